//! Writing a sentence-transformers directory (the 2.x layout, which every sentence-transformers
//! version and [`ModelLayout::read`](super::ModelLayout::read) read): the encoder under its
//! checkpoint names in `model.safetensors`, `config.json`, the tokenizer, `1_Pooling`, each
//! Dense as `{i}_Dense/model.safetensors` (`linear.weight`, `linear.bias`), and `{i}_Normalize`.
//! Weights are stored by [`checkpoint::serialize`](crate::checkpoint::serialize) in f32, f16 or
//! int8. The directory is written whole ([`atomic::write_dir`]): a failed write leaves an
//! existing model untouched. st5-core's `save.rs` gathers a model's tensors into this.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::{DenseActivation, ENCDEC_POOLING_MODE};
use crate::atomic::{self, write_under};
use crate::checkpoint::{Tensors, serialize};
use crate::error::{Error, Result};
use crate::quant::{WeightDtype, quantization_config};
use crate::tokenizer::PAD_ID;
use crate::variant::Variant;

/// One Dense module: `linear.weight` `[out, in]` (PyTorch's layout) and, if it has one,
/// `linear.bias` `[out]`.
#[derive(Debug, Clone)]
pub struct DenseModule {
    pub tensors: Tensors,
    pub activation: DenseActivation,
    /// In int8, the calibration statistic stored beside `linear.weight` (`[in]`).
    pub input_absmax: BTreeMap<String, Vec<f32>>,
}

/// What a sentence-transformers directory holds, ready to [`write`](Self::write).
#[derive(Debug, Clone)]
pub struct SentenceTransformersDir<'a> {
    /// The encoder's `config.json`, as parsed JSON (kept as given, so unknown keys survive).
    pub config: &'a serde_json::Value,
    /// The tokenizer's `tokenizer.json` bytes (written without whitespace between tokens).
    pub tokenizer_json: &'a [u8],
    pub max_seq_length: usize,
    pub pooling: Variant,
    /// The encoder's output width (`word_embedding_dimension`).
    pub hidden: usize,
    /// The encoder's tensors under their checkpoint names, Linear weights `[out, in]`.
    pub encoder: Tensors,
    /// In int8, the calibration statistic of the encoder's int8 Linear weights, by name.
    pub encoder_input_absmax: BTreeMap<String, Vec<f32>>,
    pub dense: Vec<DenseModule>,
    pub normalize: bool,
    /// The model card (`README.md`), if any.
    pub readme: Option<&'a str>,
    /// More files written in the same atomic step (a trainer's state), by relative path.
    pub extra: &'a [(String, Vec<u8>)],
    /// How weights are stored: checkpoints that must resume exactly stay f32.
    pub dtype: WeightDtype,
}

impl SentenceTransformersDir<'_> {
    /// Writes the directory `dir`, replacing what is there only once everything is written. An
    /// `encdec-first` model gets the pooling mode [`ENCDEC_POOLING_MODE`], which st5 reads back
    /// as `encdec-first` and Python sentence-transformers refuses (it has no such pooling).
    pub fn write(&self, dir: &Path) -> Result<()> {
        atomic::write_dir(dir, |staging| self.write_into(staging, dir))
    }

    fn write_into(&self, staging: &Path, dir: &Path) -> Result<()> {
        let weights = serialize(
            &self.encoder,
            &self.encoder_input_absmax,
            self.dtype,
            &dir.join("model.safetensors"),
        )?;
        write_under(staging, "model.safetensors", &weights)?;
        write_under(staging, "config.json", &json_bytes(self.stored_config()))?;
        write_under(staging, "tokenizer.json", &minify_json(self.tokenizer_json))?;
        let sbert = json!({ "max_seq_length": self.max_seq_length, "do_lower_case": false });
        write_under(staging, "sentence_bert_config.json", &json_bytes(sbert))?;
        let tokenizer_config = tokenizer_config(self.tokenizer_json, self.max_seq_length);
        write_under(staging, "tokenizer_config.json", &json_bytes(tokenizer_config))?;
        write_under(staging, "1_Pooling/config.json", &json_bytes(self.pooling_config()))?;
        let mut modules = vec![
            json!({ "idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer" }),
            json!({ "idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling" }),
        ];
        for dense in &self.dense {
            let folder = format!("{}_Dense", modules.len());
            let Some((shape, _)) = dense.tensors.get("linear.weight").filter(|(s, _)| s.len() == 2)
            else {
                return Err(Error::Invalid(format!("{folder}: no 2-D linear.weight to write")));
            };
            let cfg = json!({
                "in_features": shape[1],
                "out_features": shape[0],
                "bias": dense.tensors.contains_key("linear.bias"),
                "activation_function": dense.activation.class(),
            });
            write_under(staging, &format!("{folder}/config.json"), &json_bytes(cfg))?;
            let path = dir.join(&folder).join("model.safetensors");
            let weights = serialize(&dense.tensors, &dense.input_absmax, self.dtype, &path)?;
            write_under(staging, &format!("{folder}/model.safetensors"), &weights)?;
            modules.push(json!({ "idx": modules.len(), "name": modules.len().to_string(), "path": folder, "type": "sentence_transformers.models.Dense" }));
        }
        if self.normalize {
            let folder = format!("{}_Normalize", modules.len());
            write_under(staging, &format!("{folder}/config.json"), b"{}")?;
            modules.push(json!({ "idx": modules.len(), "name": modules.len().to_string(), "path": folder, "type": "sentence_transformers.models.Normalize" }));
        }
        write_under(staging, "modules.json", &json_bytes(serde_json::Value::Array(modules)))?;
        let st = json!({ "similarity_fn_name": "cosine", "model_type": "SentenceTransformer" });
        write_under(staging, "config_sentence_transformers.json", &json_bytes(st))?;
        if let Some(readme) = self.readme {
            write_under(staging, "README.md", readme.as_bytes())?;
        }
        for (rel, bytes) in self.extra {
            write_under(staging, rel, bytes)?;
        }
        Ok(())
    }

    /// `config.json` as stored: the float type of the weights, and in int8 the quantization
    /// scheme (a converted model's old scheme no longer applies).
    fn stored_config(&self) -> serde_json::Value {
        let mut config = self.config.clone();
        if let Some(obj) = config.as_object_mut() {
            obj.remove("quantization_config");
        }
        // transformers reads `torch_dtype` (4.x) or `dtype` (5.x).
        let float = if self.dtype == WeightDtype::F32 { "float32" } else { "float16" };
        config["torch_dtype"] = json!(float);
        if config.get("dtype").is_some() {
            config["dtype"] = json!(float);
        }
        if self.dtype == WeightDtype::Int8 {
            config["quantization_config"] = quantization_config();
        }
        config
    }

    /// `1_Pooling/config.json` in the boolean form every sentence-transformers version reads.
    fn pooling_config(&self) -> serde_json::Value {
        let d = self.hidden;
        match self.pooling {
            Variant::EncDecFirst => {
                json!({ "word_embedding_dimension": d, "pooling_mode": ENCDEC_POOLING_MODE })
            }
            variant => json!({
                "word_embedding_dimension": d,
                "pooling_mode_cls_token": variant == Variant::EncFirst,
                "pooling_mode_mean_tokens": variant == Variant::EncMean,
                "pooling_mode_max_tokens": variant == Variant::Max,
                "pooling_mode_mean_sqrt_len_tokens": variant == Variant::MeanSqrtLen,
            }),
        }
    }
}

fn json_bytes(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec_pretty(&v).expect("JSON values serialise")
}

/// JSON text without the whitespace between tokens, every token kept byte for byte (numbers are
/// not re-printed, so nothing is rounded). The T5 `tokenizer.json` is 2.4 MB pretty-printed and
/// 1.4 MB compact, which counts in a model that ships inside a binary or to a browser.
fn minify_json(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b.is_ascii_whitespace() {
            continue;
        }
        out.push(b);
    }
    out
}

/// `tokenizer_config.json` for the tokenizer in `tokenizer_json`, which is what transformers'
/// `AutoTokenizer` reads first. T5's SentencePiece (Unigram) tokenizer gets T5's own class and
/// special tokens, as Hugging Face's T5 directories have them. Any other tokenizer (a model
/// trained on its teacher's WordPiece vocabulary, say) gets `PreTrainedTokenizerFast`, which
/// runs `tokenizer.json` exactly as st5 does, with the pad token st5 pads with (id [`PAD_ID`])
/// and the model's unknown token: a T5 class there would not load in Python at all.
fn tokenizer_config(tokenizer_json: &[u8], max_seq_length: usize) -> serde_json::Value {
    let parsed: serde_json::Value = serde_json::from_slice(tokenizer_json).unwrap_or_default();
    let model = &parsed["model"];
    if model["type"].as_str().is_none_or(|t| t == "Unigram") {
        return json!({ "model_max_length": max_seq_length, "tokenizer_class": "T5Tokenizer", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>" });
    }
    let pad_id = u64::from(PAD_ID);
    let added = parsed["added_tokens"].as_array().into_iter().flatten();
    let pad = added
        .filter(|t| t["id"].as_u64() == Some(pad_id))
        .find_map(|t| t["content"].as_str())
        .or_else(|| {
            // WordPiece and BPE vocabularies are `{piece: id}` maps.
            model["vocab"]
                .as_object()?
                .iter()
                .find(|(_, id)| id.as_u64() == Some(pad_id))
                .map(|(p, _)| p.as_str())
        });
    let mut config =
        json!({ "model_max_length": max_seq_length, "tokenizer_class": "PreTrainedTokenizerFast" });
    if let Some(pad) = pad {
        config["pad_token"] = json!(pad);
    }
    if let Some(unk) = model["unk_token"].as_str() {
        config["unk_token"] = json!(unk);
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::files::Dir;
    use crate::layout::ModelLayout;
    use crate::rng::Rng;

    fn random(rng: &mut Rng, shape: &[usize]) -> (Vec<usize>, Vec<f32>) {
        let n = shape.iter().product();
        (shape.to_vec(), (0..n).map(|_| (rng.unit() as f32 - 0.5) * 0.2).collect())
    }

    /// A directory written in each dtype reads back through the readers alone (no burn): the
    /// layout (pooling, Dense modules and their activations, Normalize, max length, tokenizer)
    /// as given, and every tensor within what its dtype keeps: f32 exactly, f16 to 2⁻¹¹
    /// relative, int8 (Linear weights) to half a row's scale, with the calibration statistic.
    #[test]
    fn a_written_directory_reads_back_without_burn() {
        let root = std::env::temp_dir().join(format!("st5-layout-write-{}", std::process::id()));
        let mut rng = Rng::new(7);
        let (d, ff, out) = (8, 12, 6);
        let config = json!({ "model_type": "bert", "hidden_size": d, "num_attention_heads": 2,
            "intermediate_size": ff, "num_hidden_layers": 1, "vocab_size": 10,
            "max_position_embeddings": 16, "quantization_config": { "old": true } });
        let mut encoder = Tensors::new();
        for (name, shape) in [
            ("embeddings.word_embeddings.weight", vec![10, d]),
            ("encoder.layer.0.intermediate.dense.weight", vec![ff, d]),
            ("encoder.layer.0.intermediate.dense.bias", vec![ff]),
        ] {
            encoder.insert(name.to_string(), random(&mut rng, &shape));
        }
        let absmax: Vec<f32> = (0..d).map(|c| 1.0 + c as f32).collect();
        let encoder_input_absmax =
            BTreeMap::from([("encoder.layer.0.intermediate.dense.weight".into(), absmax.clone())]);
        let dense = DenseModule {
            tensors: Tensors::from([
                ("linear.weight".into(), random(&mut rng, &[out, d])),
                ("linear.bias".into(), random(&mut rng, &[out])),
            ]),
            activation: DenseActivation::Tanh,
            input_absmax: BTreeMap::new(),
        };
        let tokenizer = br#"{ "model": { "type": "WordPiece", "unk_token": "[UNK]", "vocab": { "[PAD]": 0 } } }"#;
        for (dtype, pooling) in [
            (WeightDtype::F32, Variant::Max),
            (WeightDtype::F16, Variant::EncFirst),
            (WeightDtype::Int8, Variant::EncMean),
        ] {
            let dir = root.join(dtype.to_string());
            let written = SentenceTransformersDir {
                config: &config,
                tokenizer_json: tokenizer,
                max_seq_length: 9,
                pooling,
                hidden: d,
                encoder: encoder.clone(),
                encoder_input_absmax: encoder_input_absmax.clone(),
                dense: vec![dense.clone()],
                normalize: true,
                readme: Some("# card"),
                extra: &[("state/step.json".into(), b"{}".to_vec())],
                dtype,
            };
            written.write(&dir).unwrap();

            let files = Dir(dir.clone());
            let layout = ModelLayout::read(&files).unwrap();
            assert_eq!(layout.variant(None).unwrap(), pooling, "{dtype}");
            assert_eq!(
                layout.dense,
                vec![("2_Dense".into(), (d, out, true, DenseActivation::Tanh))]
            );
            assert!(layout.normalize);
            assert_eq!(layout.max_seq_length, 9);
            assert_eq!(layout.tokenizer.as_deref(), Some("tokenizer.json"));
            assert_eq!(std::fs::read(dir.join("state/step.json")).unwrap(), b"{}");
            assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), "# card");
            let stored: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
            assert_eq!(stored["quantization_config"].get("old"), None, "{dtype}");

            for (folder, tensors) in [("", &encoder), ("2_Dense", &dense.tensors)] {
                let ckpt = Checkpoint::open(&files, folder).unwrap();
                for (name, (shape, values)) in tensors {
                    assert_eq!(ckpt.shape(name), Some(shape.as_slice()), "{dtype} {name}");
                    let back = ckpt.to_f32(name).unwrap();
                    let int8 = ckpt.int8_rows(name).unwrap();
                    assert_eq!(int8.is_some(), dtype == WeightDtype::Int8 && shape.len() == 2);
                    for (i, (&a, &b)) in values.iter().zip(&back).enumerate() {
                        let bound = match (&int8, dtype) {
                            (Some(rows), _) => rows.scales[i / shape[1]] / 2.0,
                            (None, WeightDtype::F32) => 0.0,
                            (None, _) => a.abs() / 2048.0,
                        };
                        assert!((a - b).abs() <= bound, "{dtype} {name}[{i}]: {a} vs {b}");
                    }
                }
            }
            let ckpt = Checkpoint::open(&files, "").unwrap();
            let name = "encoder.layer.0.intermediate.dense.weight";
            let want = (dtype == WeightDtype::Int8).then(|| absmax.clone());
            assert_eq!(ckpt.input_absmax(name, d).unwrap(), want, "{dtype}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A Dense module without a weight is refused by its folder's name, and nothing is written.
    #[test]
    fn a_dense_module_without_a_weight_is_refused() {
        let dir = std::env::temp_dir().join(format!("st5-layout-bad-{}", std::process::id()));
        let written = SentenceTransformersDir {
            config: &json!({ "model_type": "bert" }),
            tokenizer_json: b"{}",
            max_seq_length: 8,
            pooling: Variant::EncMean,
            hidden: 4,
            encoder: Tensors::new(),
            encoder_input_absmax: BTreeMap::new(),
            dense: vec![DenseModule {
                tensors: Tensors::new(),
                activation: DenseActivation::Identity,
                input_absmax: BTreeMap::new(),
            }],
            normalize: false,
            readme: None,
            extra: &[],
            dtype: WeightDtype::F32,
        };
        let e = written.write(&dir).unwrap_err().to_string();
        assert!(e.contains("2_Dense") && e.contains("linear.weight"), "{e}");
        assert!(!dir.exists() && !atomic::temporary(&dir).exists());
    }

    #[test]
    fn tokenizer_config_follows_the_tokenizer_model() {
        let t5 = json!({ "model_max_length": 64, "tokenizer_class": "T5Tokenizer", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>" });
        let cases = [
            // T5's Unigram, and anything unreadable: T5's class, as before.
            (json!({ "model": { "type": "Unigram", "vocab": [["<pad>", 0.0]] } }).to_string(), t5.clone()),
            ("not json".to_string(), t5.clone()),
            (json!({ "model": {} }).to_string(), t5),
            // BERT's WordPiece: the pad token is the added token with id 0.
            (
                json!({ "added_tokens": [{ "id": 100, "content": "[UNK]" }, { "id": 0, "content": "[PAD]" }],
                        "model": { "type": "WordPiece", "unk_token": "[UNK]", "vocab": { "[PAD]": 0, "a": 1 } } })
                .to_string(),
                json!({ "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "[PAD]", "unk_token": "[UNK]" }),
            ),
            // No added tokens: id 0 in the vocabulary map; no unknown token named.
            (
                json!({ "model": { "type": "BPE", "vocab": { "x": 1, "<|pad|>": 0 } } }).to_string(),
                json!({ "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|pad|>" }),
            ),
        ];
        for (tokenizer, want) in cases {
            assert_eq!(tokenizer_config(tokenizer.as_bytes(), 64), want, "{tokenizer}");
        }
    }

    #[test]
    fn minify_keeps_strings_and_numbers_byte_for_byte() {
        let cases: [(&str, &str); 7] = [
            ("{\n  \"a\": 1,\n  \"b\": [ 1.50, -2e-05 ]\n}", "{\"a\":1,\"b\":[1.50,-2e-05]}"),
            ("\"two  spaces\"", "\"two  spaces\""),
            ("[\"\\\"\", \" x \"]", "[\"\\\"\",\" x \"]"),
            ("[\"\\\\\", \" y \"]", "[\"\\\\\",\" y \"]"),
            ("{ \"\u{2581}\" : \"\\u2581 \\n\" }", "{\"\u{2581}\":\"\\u2581 \\n\"}"),
            ("\t\r\n", ""),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(
                String::from_utf8(minify_json(input.as_bytes())).unwrap(),
                want,
                "{input:?}"
            );
        }
        // The repository's real tokenizer: same JSON value, 40% smaller.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/st-enc-mean-relu/tokenizer.json"
        );
        let text = std::fs::read(path).unwrap();
        let small = minify_json(&text);
        let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
        assert_eq!(parse(&small), parse(&text));
        assert!(small.len() * 10 < text.len() * 6, "{} -> {}", text.len(), small.len());
    }
}
