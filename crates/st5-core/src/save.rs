//! Writes a [`SentenceModel`] as a sentence-transformers directory (the 2.x layout, which every
//! sentence-transformers version and this crate read): the encoder (any family) under Hugging Face names
//! in `model.safetensors` (Linear weights back in PyTorch's `[out, in]` layout), `config.json`,
//! the tokenizer, `1_Pooling`, each Dense as `2_Dense/model.safetensors` (`linear.weight`), and
//! `3_Normalize`. The directory is written beside the target and renamed into place, so a
//! failed save leaves an existing model untouched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};
use serde_json::json;

use crate::calibration::{self, InputAbsmax};
use crate::compute::Compute;
use crate::error::{Error, Result};
use crate::files::{ModelFiles, join};
use crate::layout::{DenseActivation, ENCDEC_POOLING_MODE};
use crate::loader::{LoadOptions, load};
use crate::model::SentenceModel;
use crate::names::{self, checkpoint_name};
use crate::quant::{
    WeightDtype, input_absmax_name, is_quantized, quantization_config, quantize_weight_rows,
    scale_name,
};
use crate::transfer::to_host;
use crate::weights::transpose2;
use st5_format::Error as FormatError;
use st5_format::variant::Variant;

/// What a saved directory needs besides the weights.
pub struct SaveOptions<'a> {
    /// The T5 `config.json`, as parsed JSON (kept as given, so unknown keys survive).
    pub config: serde_json::Value,
    /// The tokenizer's `tokenizer.json` bytes.
    pub tokenizer_json: &'a [u8],
    pub max_seq_length: usize,
    /// The model card (`README.md`), if any.
    pub readme: Option<String>,
    /// More files written into the same directory, in the same atomic step (a trainer's state).
    pub extra: Vec<(String, Vec<u8>)>,
    /// How weights are stored (quant.rs): checkpoints that must resume exactly stay f32.
    pub dtype: WeightDtype,
    /// In int8, the calibration statistic stored beside each int8 Linear weight
    /// ([`calibration::record`] of this model's forward passes); `None` stores none.
    pub input_absmax: Option<&'a InputAbsmax>,
}

/// Every float parameter as `(module path, shape, values)`.
#[derive(Default)]
struct Collect<'a> {
    path: Vec<String>,
    tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
    /// The recorded calibration, and what of it belongs to the parameters seen, by module path.
    calibration: Option<&'a InputAbsmax>,
    input_absmax: BTreeMap<String, Vec<f32>>,
    /// The first parameter that could not be read back, and why: saving stops rather than
    /// writing a file with a tensor missing.
    failed: Option<(String, Error)>,
}

impl ModuleVisitor for Collect<'_> {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val();
        let shape = t.dims().to_vec();
        let name = self.path.join(".");
        if let Some(absmax) = self.calibration.and_then(|c| c.get(&param.id)) {
            self.input_absmax.insert(name.clone(), absmax.clone());
        }
        match to_host(t.try_into_data()) {
            Ok(values) => self.tensors.push((name, shape, values)),
            Err(e) => {
                self.failed.get_or_insert((name, e));
            }
        }
    }
}

/// The safetensors file of `tensors` (checkpoint name → shape, values) stored as `dtype`: in
/// int8, the tensors [`is_quantized`] picks become I8 plus an F32 `…_scale` `[rows, 1]` (and the
/// F32 `…_input_absmax` `[cols]` that `input_absmax` holds for them), and the rest f16.
fn safetensors_bytes(
    tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    input_absmax: &BTreeMap<String, Vec<f32>>,
    path: &Path,
    dtype: WeightDtype,
) -> Result<Vec<u8>> {
    use safetensors::Dtype;
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
    let views = stored.iter().map(|(name, dtype, shape, bytes)| {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
            .expect("shape matches data");
        (name.clone(), view)
    });
    let meta = Some(std::collections::HashMap::from([("format".to_string(), "pt".to_string())]));
    safetensors::serialize(views, meta)
        .map_err(|source| FormatError::Safetensors { path: path.to_path_buf(), source }.into())
}

fn write(dir: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| FormatError::io(parent, e))?;
    }
    std::fs::write(&p, bytes).map_err(|e| FormatError::io(&p, e).into())
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

/// Saves `model` to `dir` in the sentence-transformers layout, replacing what is there only once
/// everything is written. An `encdec-first` model keeps its decoder in `model.safetensors` (the
/// Hugging Face T5 names) and gets the pooling mode [`ENCDEC_POOLING_MODE`], which st5 loads
/// back as `encdec-first` and Python sentence-transformers refuses (it has no such pooling).
pub fn save_sentence_transformers(
    model: &SentenceModel,
    dir: &Path,
    options: &SaveOptions<'_>,
) -> Result<()> {
    // Int8 matrices kept for int8 compute are not parameters, so the visitor below would miss
    // them and write a model without them.
    if model.int8_matrices().next().is_some() {
        return Err(Error::Invalid(
            "this model was loaded for int8 compute (its int8 weights are kept as codes) and \
             cannot be saved; load it with `compute: Compute::F32` (`--compute f32`) to save it"
                .into(),
        ));
    }
    let mut collect = Collect { calibration: options.input_absmax, ..Default::default() };
    model.visit(&mut collect);
    if let Some((name, e)) = collect.failed {
        return Err(Error::Readback(format!("parameter {name}: {e}")));
    }
    let mut t5 = BTreeMap::new();
    let mut dense: BTreeMap<usize, BTreeMap<String, (Vec<usize>, Vec<f32>)>> = BTreeMap::new();
    // The calibration statistic by checkpoint name: the encoder's, and each Dense module's.
    let mut t5_absmax = BTreeMap::new();
    let mut dense_absmax: BTreeMap<usize, BTreeMap<String, Vec<f32>>> = BTreeMap::new();
    let mut decoder_embed = None;
    // burn's visitor names the encoder's enum variant: `encoder.T5.`, `encoder.Bert.`, ...
    let family_prefix = |path: &str| {
        ["encoder.T5.", "encoder.Bert.", "encoder.Mpnet."]
            .into_iter()
            .find_map(|p| path.strip_prefix(p))
            .map(str::to_string)
    };
    for (path, shape, values) in collect.tensors {
        let absmax = collect.input_absmax.remove(&path);
        if path == "encoder.T5.decoder.embed_tokens" {
            // Written below: under `shared.weight` with the encoder's only if the two are equal.
            decoder_embed = Some((shape, values));
        } else if let Some(rest) = family_prefix(&path) {
            let rest = rest.as_str();
            let (name, flip) = checkpoint_name(rest, shape.len());
            let (shape, values) = if flip {
                (vec![shape[1], shape[0]], transpose2(&values, shape[0], shape[1]))
            } else {
                (shape, values)
            };
            if let Some(absmax) = absmax {
                t5_absmax.insert(name.clone(), absmax);
            }
            t5.insert(name, (shape, values));
        } else if path == "prompt" {
            // A soft prompt is its own file (st5_format::prompt), not part of the model.
            continue;
        } else if let Some(rest) = path.strip_prefix("dense.") {
            // `dense.{i}.weight` / `dense.{i}.bias` of a Linear stored `[in, out]`.
            let (i, field) = rest
                .split_once('.')
                .ok_or_else(|| Error::Invalid(format!("unexpected parameter {path}")))?;
            let i: usize =
                i.parse().map_err(|_| Error::Invalid(format!("unexpected parameter {path}")))?;
            let (shape, values) = if shape.len() == 2 {
                (vec![shape[1], shape[0]], transpose2(&values, shape[0], shape[1]))
            } else {
                (shape, values)
            };
            if let Some(absmax) = absmax {
                dense_absmax.entry(i).or_default().insert(format!("linear.{field}"), absmax);
            }
            dense.entry(i).or_default().insert(format!("linear.{field}"), (shape, values));
        } else {
            return Err(Error::Invalid(format!("unexpected parameter {path}")));
        }
    }
    // Each stack trains its own token embeddings (the encoder's is `shared.weight`). Once an
    // EncDec run has moved them apart, the decoder's is kept under its own name, which the loader
    // prefers to the shared one (names::TIED), so the model loads back as it was trained.
    if let Some(embed) = decoder_embed
        && t5.get(names::SHARED) != Some(&embed)
    {
        let name =
            if t5.contains_key(names::SHARED) { names::DECODER_EMBEDDING } else { names::SHARED };
        t5.insert(name.to_string(), embed);
    }

    let staging = staging_dir(dir);
    let _ = std::fs::remove_dir_all(&staging);
    let d_model = model.encoder.hidden();
    write(
        &staging,
        "model.safetensors",
        &safetensors_bytes(&t5, &t5_absmax, &dir.join("model.safetensors"), options.dtype)?,
    )?;
    let mut config = options.config.clone();
    if let Some(obj) = config.as_object_mut() {
        // A converted model's old scheme no longer applies.
        obj.remove("quantization_config");
    }
    // transformers reads `torch_dtype` (4.x) or `dtype` (5.x): the float type of what is stored.
    let float = if options.dtype == WeightDtype::F32 { "float32" } else { "float16" };
    config["torch_dtype"] = json!(float);
    if config.get("dtype").is_some() {
        config["dtype"] = json!(float);
    }
    if options.dtype == WeightDtype::Int8 {
        config["quantization_config"] = quantization_config();
    }
    write(&staging, "config.json", &json_bytes(config))?;
    write(&staging, "tokenizer.json", &minify_json(options.tokenizer_json))?;
    write(
        &staging,
        "sentence_bert_config.json",
        &json_bytes(json!({ "max_seq_length": options.max_seq_length, "do_lower_case": false })),
    )?;
    write(
        &staging,
        "tokenizer_config.json",
        &json_bytes(tokenizer_config(options.tokenizer_json, options.max_seq_length)),
    )?;
    let pooling = match model.variant {
        Variant::EncDecFirst => {
            json!({ "word_embedding_dimension": d_model, "pooling_mode": ENCDEC_POOLING_MODE })
        }
        variant => json!({
            "word_embedding_dimension": d_model,
            "pooling_mode_cls_token": variant == Variant::EncFirst,
            "pooling_mode_mean_tokens": variant == Variant::EncMean,
            "pooling_mode_max_tokens": variant == Variant::Max,
            "pooling_mode_mean_sqrt_len_tokens": variant == Variant::MeanSqrtLen,
        }),
    };
    write(&staging, "1_Pooling/config.json", &json_bytes(pooling))?;
    let mut modules = vec![
        json!({ "idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer" }),
        json!({ "idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling" }),
    ];
    for (i, tensors) in &dense {
        let folder = format!("{}_Dense", i + 2);
        let (out_f, in_f) = (tensors["linear.weight"].0[0], tensors["linear.weight"].0[1]);
        let activation =
            model.dense_activation.get(*i).copied().unwrap_or(DenseActivation::Identity);
        let cfg = json!({ "in_features": in_f, "out_features": out_f, "bias": tensors.contains_key("linear.bias"), "activation_function": activation.class() });
        write(&staging, &format!("{folder}/config.json"), &json_bytes(cfg))?;
        write(
            &staging,
            &format!("{folder}/model.safetensors"),
            &safetensors_bytes(
                tensors,
                &dense_absmax.remove(i).unwrap_or_default(),
                &dir.join(&folder),
                options.dtype,
            )?,
        )?;
        modules.push(json!({ "idx": modules.len(), "name": modules.len().to_string(), "path": folder, "type": "sentence_transformers.models.Dense" }));
    }
    if model.normalize {
        let folder = format!("{}_Normalize", modules.len());
        write(&staging, &format!("{folder}/config.json"), b"{}")?;
        modules.push(json!({ "idx": modules.len(), "name": modules.len().to_string(), "path": folder, "type": "sentence_transformers.models.Normalize" }));
    }
    write(&staging, "modules.json", &json_bytes(serde_json::Value::Array(modules)))?;
    write(
        &staging,
        "config_sentence_transformers.json",
        &json_bytes(json!({ "similarity_fn_name": "cosine", "model_type": "SentenceTransformer" })),
    )?;
    if let Some(readme) = &options.readme {
        write(&staging, "README.md", readme.as_bytes())?;
    }
    for (rel, bytes) in &options.extra {
        write(&staging, rel, bytes)?;
    }
    replace_dir(&staging, dir)
}

/// `tokenizer_config.json` for the tokenizer in `tokenizer_json`, which is what transformers'
/// `AutoTokenizer` reads first. T5's SentencePiece (Unigram) tokenizer gets T5's own class and
/// special tokens, as Hugging Face's T5 directories have them. Any other tokenizer (a model
/// trained on its teacher's WordPiece vocabulary, say) gets `PreTrainedTokenizerFast`, which
/// runs `tokenizer.json` exactly as st5 does, with the pad token st5 pads with (id
/// [`PAD_ID`](crate::tokenizer::PAD_ID)) and the model's unknown token: a T5 class there would
/// not load in Python at all.
fn tokenizer_config(tokenizer_json: &[u8], max_seq_length: usize) -> serde_json::Value {
    let parsed: serde_json::Value = serde_json::from_slice(tokenizer_json).unwrap_or_default();
    let model = &parsed["model"];
    if model["type"].as_str().is_none_or(|t| t == "Unigram") {
        return json!({ "model_max_length": max_seq_length, "tokenizer_class": "T5Tokenizer", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>" });
    }
    let pad_id = u64::from(crate::tokenizer::PAD_ID);
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

/// Writes the model in `files` (any layout st5 loads: sentence-transformers or Hugging Face T5,
/// f32/f16/bf16/int8, sharded) to `output` as a sentence-transformers directory whose weights are
/// stored as `dtype`, keeping its model card: `st5 quantize`. `tokenizer` stands in for a
/// directory without `tokenizer.json`. The model is dequantized and computed as st5 loads it, so
/// converting an int8 model to f32 gives its exact dequantized copy. In int8 the f32 model first
/// embeds `calibration` (the built-in [`calibration::SENTENCES`] when `None`), and each int8
/// Linear weight is stored with its inputs' statistic.
pub fn convert(
    files: &impl ModelFiles,
    tokenizer: Option<&Path>,
    dtype: WeightDtype,
    output: &Path,
    calibration: Option<&[String]>,
) -> Result<()> {
    let options = LoadOptions {
        tokenizer: tokenizer.map(Path::to_path_buf),
        compute: Compute::F32,
        ..Default::default()
    };
    let device = Device::flex();
    let loaded = load(files, &options, &device)?;
    let config_rel = join(&loaded.layout.transformer, "config.json");
    let config = files
        .json::<serde_json::Value>(&config_rel)?
        .ok_or_else(|| FormatError::layout(files.path(&config_rel), "missing"))?;
    let readme = files.read("README.md")?.map(|b| String::from_utf8_lossy(&b).into_owned());
    let input_absmax = match dtype {
        WeightDtype::Int8 => {
            let texts: Vec<&str> = match calibration {
                Some(texts) => texts.iter().map(String::as_str).collect(),
                None => calibration::sentences(),
            };
            Some(loaded.model.calibrate(&loaded.tokenizer, &texts, &device)?)
        }
        WeightDtype::F32 | WeightDtype::F16 => None,
    };
    let save = SaveOptions {
        config,
        tokenizer_json: &loaded.tokenizer_json,
        max_seq_length: loaded.layout.max_seq_length,
        readme,
        extra: Vec::new(),
        dtype,
        input_absmax: input_absmax.as_ref(),
    };
    save_sentence_transformers(&loaded.model, output, &save)
}

/// Writes `files` (relative name, bytes) as the directory `dir`, replacing what is there only
/// once all are written (a prompt run's checkpoint).
pub fn save_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    let staging = staging_dir(dir);
    let _ = std::fs::remove_dir_all(&staging);
    for (rel, bytes) in files {
        write(&staging, rel, bytes)?;
    }
    replace_dir(&staging, dir)
}

/// Where a save into `dir` writes before it moves the result into place (`.{name}.saving`
/// beside it), so that a save that fails part-way leaves `dir` as it was.
pub fn staging_dir(dir: &Path) -> PathBuf {
    crate::atomic::temporary(dir)
}

/// Moves `staging` to `dir`: the old directory is moved aside first and removed only after the
/// new one is in place.
fn replace_dir(staging: &Path, dir: &Path) -> Result<()> {
    let old = dir.with_file_name(format!(
        ".{}.old",
        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    let had_old = dir.exists();
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old).map_err(|e| FormatError::io(dir, e))?;
    }
    std::fs::rename(staging, dir).map_err(|e| FormatError::io(dir, e))?;
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{minify_json, tokenizer_config};
    use serde_json::json;

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
