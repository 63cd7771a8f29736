//! Checkpoints: reading the tensors of one or more safetensors files (single or sharded, as a
//! shard index lists them), kept as raw bytes until asked for and decoded to f32 then: F32,
//! F16 and BF16 widened exactly, I8 dequantized with its per-row scale (quant.rs); and writing
//! one file ([`serialize`]) in f32, f16 or int8, which the reader reads back. Names are
//! resolved through the one name table (names.rs). Building modules from them is st5-core's
//! weights.rs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::files::{FileBytes, ModelFiles, join};
use crate::names::stored_names;
use crate::quant::{
    WeightDtype, dequantize_rows, input_absmax_name, is_quantized, quantize_weight_rows, scale_name,
};

/// Tensors to write: checkpoint name → (shape, row-major f32 values).
pub type Tensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// The safetensors file of `tensors` stored as `dtype` (`path` names it in an error): in int8,
/// the tensors [`is_quantized`] picks become I8 plus an F32 `…_scale` `[rows, 1]` (and the F32
/// `…_input_absmax` `[cols]` that `input_absmax` holds for them), and the rest f16.
/// [`Checkpoint`] reads every such file back: f32 exactly, f16 to the nearest f16, int8 to
/// within half a row's scale.
pub fn serialize(
    tensors: &Tensors,
    input_absmax: &BTreeMap<String, Vec<f32>>,
    dtype: WeightDtype,
    path: &std::path::Path,
) -> Result<Vec<u8>> {
    // Each stored tensor's bytes, owned here so that the views below can borrow them.
    let mut stored: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, (shape, values)) in tensors {
        let (kind, bytes) = match dtype {
            WeightDtype::F32 => (Dtype::F32, bytemuck::cast_slice(values).to_vec()),
            WeightDtype::Int8 if is_quantized(name, shape.len()) => {
                let (q, scales) = quantize_weight_rows(values, shape[1]);
                let scale_bytes = bytemuck::cast_slice(&scales).to_vec();
                stored.push((scale_name(name), Dtype::F32, vec![shape[0], 1], scale_bytes));
                if let Some(absmax) = input_absmax.get(name).filter(|a| a.len() == shape[1]) {
                    let bytes = bytemuck::cast_slice(absmax).to_vec();
                    stored.push((input_absmax_name(name), Dtype::F32, vec![shape[1]], bytes));
                }
                (Dtype::I8, bytemuck::cast_slice(&q).to_vec())
            }
            // f16, and in int8 the tensors that stay floating point.
            WeightDtype::F16 | WeightDtype::Int8 => (
                Dtype::F16,
                values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
            ),
        };
        stored.push((name.clone(), kind, shape.clone(), bytes));
    }
    let mut views = Vec::with_capacity(stored.len());
    for (name, dtype, shape, bytes) in &stored {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
            .map_err(|source| Error::Safetensors { path: path.to_path_buf(), source })?;
        views.push((name.clone(), view));
    }
    let meta = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    safetensors::serialize(views, meta)
        .map_err(|source| Error::Safetensors { path: path.to_path_buf(), source })
}

struct Entry {
    file: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

/// An int8 tensor as stored ([`Checkpoint::int8_rows`]): `codes` `[rows, cols]` row-major, borrowed
/// from the file, and one f32 scale per row (a per-tensor scale repeated).
#[derive(Debug, Clone)]
pub struct Int8Rows<'a> {
    pub codes: &'a [i8],
    pub scales: Vec<f32>,
    pub cols: usize,
}

/// The tensors of one or more safetensors files, kept as raw bytes until asked for.
pub struct Checkpoint {
    /// Each file's bytes, shared with whoever handed them over (a map, the caller's buffer).
    files: Vec<(PathBuf, FileBytes)>,
    entries: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

impl Checkpoint {
    /// The weight files of folder `dir` (relative paths): the shards listed by
    /// `model.safetensors.index.json`, else `model.safetensors`. A `pytorch_model.bin` alone is
    /// refused by name. Loading and the browser's file discovery both use this list.
    pub fn weight_files(files: &impl ModelFiles, dir: &str) -> Result<Vec<String>> {
        let index = join(dir, "model.safetensors.index.json");
        if let Some(idx) = files.json::<ShardIndex>(&index)? {
            let shards: BTreeSet<&String> = idx.weight_map.values().collect();
            return Ok(shards.into_iter().map(|s| join(dir, s)).collect());
        }
        let single = join(dir, "model.safetensors");
        if files.exists(&single) {
            return Ok(vec![single]);
        }
        let bin = join(dir, "pytorch_model.bin");
        if files.exists(&bin) {
            return Err(Error::layout(
                files.path(&bin),
                "PyTorch pickle weights are not supported; convert them to model.safetensors \
                 (e.g. `model.save_pretrained(dir, safe_serialization=True)`)",
            ));
        }
        Err(Error::layout(files.path(dir), "no model.safetensors or model.safetensors.index.json"))
    }

    /// Opens the weights in folder `dir` of a model (see [`Checkpoint::weight_files`]).
    pub fn open(files: &impl ModelFiles, dir: &str) -> Result<Self> {
        let index = join(dir, "model.safetensors.index.json");
        let mut buffers = Vec::new();
        for rel in Self::weight_files(files, dir)? {
            let bytes = files.read(&rel)?.ok_or_else(|| {
                Error::layout(
                    files.path(&rel),
                    "missing: a weight file of this model (listed by the shard index)",
                )
            })?;
            buffers.push((files.path(&rel), bytes));
        }
        let ckpt = Self::from_buffers(buffers)?;
        if let Some(idx) = files.json::<ShardIndex>(&index)?
            && let Some(name) = idx.weight_map.keys().find(|n| !ckpt.entries.contains_key(*n))
        {
            return Err(Error::layout(
                files.path(&index),
                format!("lists tensor `{name}`, which no shard holds"),
            ));
        }
        Ok(ckpt)
    }

    /// Parses and validates safetensors buffers, each named by the path shown in errors; a
    /// truncated file is named.
    pub fn from_buffers(buffers: Vec<(PathBuf, FileBytes)>) -> Result<Self> {
        let mut files = Vec::with_capacity(buffers.len());
        let mut entries = BTreeMap::new();
        for (i, (path, bytes)) in buffers.into_iter().enumerate() {
            let st = SafeTensors::deserialize(&bytes)
                .map_err(|source| Error::Safetensors { path: path.clone(), source })?;
            let base = bytes.as_ptr() as usize;
            for (name, view) in st.tensors() {
                let start = view.data().as_ptr() as usize - base;
                let range = start..start + view.data().len();
                entries.insert(
                    name,
                    Entry { file: i, dtype: view.dtype(), shape: view.shape().to_vec(), range },
                );
            }
            files.push((path, bytes));
        }
        Ok(Self { files, entries })
    }

    /// Every tensor name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The stored shape of a tensor.
    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.entries.get(name).map(|e| e.shape.as_slice())
    }

    /// The scale stored beside `name` when `name` is int8 (quant.rs), which loading `name` uses.
    pub fn scale_of(&self, name: &str) -> Option<String> {
        let e = self.entries.get(name)?;
        (e.dtype == Dtype::I8).then(|| scale_name(name)).filter(|s| self.contains(s))
    }

    /// The tensors stored beside int8 tensor `name` that belong to it (its scale, its inputs'
    /// calibration statistic): loading `name` accounts for them, whichever path computes it.
    pub fn companions_of(&self, name: &str) -> Vec<String> {
        if self.entries.get(name).is_none_or(|e| e.dtype != Dtype::I8) {
            return Vec::new();
        }
        [scale_name(name), input_absmax_name(name)]
            .into_iter()
            .filter(|n| self.contains(n))
            .collect()
    }

    /// The calibration statistic beside int8 Linear weight `name` ([`input_absmax_name`]): one
    /// finite, non-negative value per input channel (`cols`). `None` when there is none (a model
    /// quantized without calibration); an error naming the tensor when it is malformed.
    pub fn input_absmax(&self, name: &str, cols: usize) -> Result<Option<Vec<f32>>> {
        let key = input_absmax_name(name);
        let Some(e) = self.entries.get(&key) else { return Ok(None) };
        let fail = |message: String| Error::Quantized {
            path: self.files[e.file].0.clone(),
            name: name.to_string(),
            message,
        };
        if !matches!(e.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(fail(format!("`{key}` has dtype {:?}; expected F32", e.dtype)));
        }
        if e.shape != [cols] {
            return Err(fail(format!("`{key}` has shape {:?}; expected [{cols}]", e.shape)));
        }
        let values = self.to_f32(&key)?;
        if let Some(bad) = values.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return Err(fail(format!("`{key}` holds {bad}; expected finite magnitudes")));
        }
        Ok(Some(values))
    }

    /// Decodes a tensor to f32: F16 and BF16 are widened exactly; I8 is dequantized with the
    /// per-row scale stored beside it (quant.rs).
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>> {
        let e =
            self.entries.get(name).ok_or_else(|| Error::Invalid(format!("no tensor `{name}`")))?;
        let (path, bytes) = &self.files[e.file];
        let raw = &bytes[e.range.clone()];
        // Safetensors data is little-endian and unaligned in the file: decode by chunks.
        Ok(match e.dtype {
            Dtype::I8 => self.dequantize(name, e, raw)?,
            Dtype::F32 => {
                raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(Error::Dtype {
                    path: path.clone(),
                    name: name.into(),
                    dtype: format!("{other:?}"),
                });
            }
        })
    }

    /// `q[r, c] * scale[r]` for int8 tensor `name` (`e`, bytes `raw`).
    fn dequantize(&self, name: &str, e: &Entry, raw: &[u8]) -> Result<Vec<f32>> {
        let (scales, cols) = self.int8_scales(name, e)?;
        Ok(dequantize_rows(bytemuck::cast_slice::<u8, i8>(raw), &scales, cols))
    }

    /// An int8 tensor as stored, for computing on it without dequantizing (st5-core's int8
    /// compute): its codes `[rows, cols]` row-major and one scale per row. `None` when `name` is
    /// not int8; the same errors as [`to_f32`](Self::to_f32) for a malformed one.
    pub fn int8_rows(&self, name: &str) -> Result<Option<Int8Rows<'_>>> {
        let e =
            self.entries.get(name).ok_or_else(|| Error::Invalid(format!("no tensor `{name}`")))?;
        if e.dtype != Dtype::I8 {
            return Ok(None);
        }
        let (scales, cols) = self.int8_scales(name, e)?;
        let raw = &self.files[e.file].1[e.range.clone()];
        Ok(Some(Int8Rows { codes: bytemuck::cast_slice::<u8, i8>(raw), scales, cols }))
    }

    /// One scale per row of int8 tensor `name` (`e`) and its row length: the scale must be a
    /// float tensor of `[rows, 1]` or `[rows]` (one per row) or a single value (one for the
    /// tensor).
    fn int8_scales(&self, name: &str, e: &Entry) -> Result<(Vec<f32>, usize)> {
        let fail = |message: String| Error::Quantized {
            path: self.files[e.file].0.clone(),
            name: name.to_string(),
            message,
        };
        let [rows, cols] = e.shape[..] else {
            return Err(fail(format!("has shape {:?}; int8 tensors must be 2-D", e.shape)));
        };
        let key = scale_name(name);
        let se =
            self.entries.get(&key).ok_or_else(|| fail(format!("no scale `{key}` beside it")))?;
        if !matches!(se.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(fail(format!(
                "scale `{key}` has dtype {:?}; expected F32, F16 or BF16",
                se.dtype
            )));
        }
        let per_row = se.shape == [rows, 1] || se.shape == [rows];
        let per_tensor = se.shape.iter().product::<usize>() == 1;
        if !per_row && !per_tensor {
            return Err(fail(format!(
                "scale `{key}` has shape {:?}; expected [{rows}, 1] (one per row)",
                se.shape
            )));
        }
        let scale = self.to_f32(&key)?;
        Ok((if per_row { scale } else { vec![scale[0]; rows] }, cols))
    }

    /// The first of `name`'s stored spellings (names.rs) that this checkpoint holds.
    pub fn resolve(&self, name: &str) -> Option<String> {
        stored_names(name).find(|n| self.contains(n))
    }
}
