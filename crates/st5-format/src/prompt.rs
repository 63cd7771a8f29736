//! Soft-prompt files (Lester et al. 2021, "The Power of Scale for Parameter-Efficient Prompt
//! Tuning"): P vectors of width d_model placed before every text's token embeddings, trained
//! while the model stays frozen. One small safetensors file: the tensor `prompt` `[P, d_model]`
//! (F32) and, in the header's `__metadata__` under [`META_KEY`], JSON naming the base model by
//! its weights fingerprint ([`crate::fingerprint`]), P and d_model. A prompt is applied only to
//! the model it was made for.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::variant::Variant;

/// The `__metadata__` key holding [`PromptMeta`] as JSON.
pub const META_KEY: &str = "st5_prompt";
/// The tensor's name.
pub const TENSOR: &str = "prompt";
/// Longest prompt accepted: Lester et al. use up to 150; this bounds what a file can make the
/// encoder attend to.
pub const MAX_LENGTH: usize = 1024;

/// What a prompt file says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptMeta {
    /// [`crate::fingerprint::weights_fingerprint`] of the model the prompt was trained on.
    pub base_fingerprint: String,
    /// P: prompt vectors.
    pub length: usize,
    pub d_model: usize,
    /// The pooling it was trained with.
    pub variant: Variant,
}

/// A soft prompt: `values` is `[meta.length, meta.d_model]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub meta: PromptMeta,
    pub values: Vec<f32>,
}

impl Prompt {
    /// Reads a prompt file's bytes; `path` names it in errors. Checks the metadata, the tensor's
    /// dtype and shape against it, and that every value is finite.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        let err = |m: String| Error::Prompt { path: path.into(), message: m };
        let (_, header) = SafeTensors::read_metadata(bytes)
            .map_err(|source| Error::Safetensors { path: path.into(), source })?;
        let json = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(META_KEY))
            .ok_or_else(|| err(format!("no `{META_KEY}` metadata: not an st5 prompt file")))?;
        let meta: PromptMeta =
            serde_json::from_str(json).map_err(|e| err(format!("`{META_KEY}` metadata: {e}")))?;
        if !(1..=MAX_LENGTH).contains(&meta.length) || meta.d_model == 0 {
            return Err(err(format!(
                "length {} and d_model {} (length 1 to {MAX_LENGTH}, d_model positive)",
                meta.length, meta.d_model
            )));
        }
        let tensors = SafeTensors::deserialize(bytes)
            .map_err(|source| Error::Safetensors { path: path.into(), source })?;
        let t = tensors.tensor(TENSOR).map_err(|_| err(format!("no tensor `{TENSOR}`")))?;
        if t.dtype() != Dtype::F32 {
            return Err(Error::Dtype {
                path: path.into(),
                name: TENSOR.into(),
                dtype: format!("{:?} (a prompt is F32)", t.dtype()),
            });
        }
        if t.shape() != [meta.length, meta.d_model] {
            return Err(err(format!(
                "tensor `{TENSOR}` has shape {:?}, but the metadata says [{}, {}]",
                t.shape(),
                meta.length,
                meta.d_model
            )));
        }
        let values: Vec<f32> = t
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            return Err(err(format!("tensor `{TENSOR}` value {i} is not finite")));
        }
        Ok(Self { meta, values })
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let data: Vec<u8> = self.values.iter().flat_map(|x| x.to_le_bytes()).collect();
        let view = safetensors::tensor::TensorView::new(
            Dtype::F32,
            vec![self.meta.length, self.meta.d_model],
            &data,
        )
        .expect("values match the metadata's shape");
        let meta = HashMap::from([(
            META_KEY.to_string(),
            serde_json::to_string(&self.meta).expect("metadata serialises"),
        )]);
        safetensors::serialize([(TENSOR, view)], Some(meta)).expect("a prompt serialises")
    }

    /// Refuses a prompt made for another model: `fingerprint` and `d_model` are the loaded
    /// model's.
    pub fn check_base(&self, fingerprint: &str, d_model: usize, path: &Path) -> Result<()> {
        let err = |m: String| Error::Prompt { path: path.into(), message: m };
        if self.meta.d_model != d_model {
            return Err(err(format!(
                "made for a model of width {}, but this model's d_model is {d_model}",
                self.meta.d_model
            )));
        }
        if self.meta.base_fingerprint != fingerprint {
            return Err(err(format!(
                "made for another model (weights fingerprint {}…, this model's is {}…)",
                short(&self.meta.base_fingerprint),
                short(fingerprint)
            )));
        }
        Ok(())
    }
}

fn short(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> Prompt {
        Prompt {
            meta: PromptMeta {
                base_fingerprint: "ab".repeat(32),
                length: 2,
                d_model: 3,
                variant: Variant::EncMean,
            },
            values: vec![0.5, -1.0, 2.0, 0.0, 1e-3, 3.0],
        }
    }

    /// The file with its metadata JSON and tensor bytes replaced.
    fn with(meta: Option<&str>, dtype: Dtype, shape: Vec<usize>, data: &[u8]) -> Vec<u8> {
        let view = safetensors::tensor::TensorView::new(dtype, shape, data).unwrap();
        let meta = meta.map(|m| HashMap::from([(META_KEY.to_string(), m.to_string())]));
        safetensors::serialize([(TENSOR, view)], meta).unwrap()
    }

    #[test]
    fn round_trips_and_refuses_bad_files_by_name() {
        let p = prompt();
        let path = Path::new("p.safetensors");
        assert_eq!(Prompt::from_bytes(&p.to_bytes(), path).unwrap(), p);
        let good_meta = serde_json::to_string(&p.meta).unwrap();
        let f32s: Vec<u8> = p.values.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut nan = f32s.clone();
        nan[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        let long = good_meta.replace("\"length\":2", "\"length\":5000");
        let extra = good_meta.replace("{", "{\"x\":1,");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not safetensors".to_vec(), "invalid safetensors"),
            (with(None, Dtype::F32, vec![2, 3], &f32s), "not an st5 prompt file"),
            (with(Some("{"), Dtype::F32, vec![2, 3], &f32s), "metadata"),
            (with(Some(&extra), Dtype::F32, vec![2, 3], &f32s), "unknown field"),
            (with(Some(&long), Dtype::F32, vec![2, 3], &f32s), "length 5000"),
            (with(Some(&good_meta), Dtype::F32, vec![3, 2], &f32s), "has shape [3, 2]"),
            (with(Some(&good_meta), Dtype::F16, vec![2, 3], &f32s[..12]), "dtype F16"),
            (with(Some(&good_meta), Dtype::F32, vec![2, 3], &nan), "value 2 is not finite"),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            let e = Prompt::from_bytes(bytes, path).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("p.safetensors"), "case {i}: {e}");
        }
    }

    #[test]
    fn a_prompt_for_another_model_is_refused() {
        let p = prompt();
        let path = Path::new("p.safetensors");
        p.check_base(&p.meta.base_fingerprint, 3, path).unwrap();
        let e = p.check_base(&"cd".repeat(32), 3, path).unwrap_err().to_string();
        assert!(e.contains("made for another model"), "{e}");
        let e = p.check_base(&p.meta.base_fingerprint, 4, path).unwrap_err().to_string();
        assert!(e.contains("width 3") && e.contains("d_model is 4"), "{e}");
    }
}
