//! Saves a [`SentenceModel`] as a sentence-transformers directory: its parameters read back from
//! the device and named as the checkpoint names them (names.rs, Linear weights back in PyTorch's
//! `[out, in]` layout), then written by st5-format's
//! [`SentenceTransformersDir`](st5_format::layout::SentenceTransformersDir), beside the reader.
//! [`convert`] is `st5 quantize`: any model st5 loads, written in f32, f16 or int8.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};

use crate::calibration::{self, InputAbsmax};
use crate::checkpoint::Tensors;
use crate::compute::Compute;
use crate::error::{Error, Result};
use crate::files::{ModelFiles, join};
use crate::layout::{DenseActivation, DenseModule, SentenceTransformersDir};
use crate::loader::{LoadOptions, load};
use crate::model::SentenceModel;
use crate::names::{self, checkpoint_name};
use crate::quant::WeightDtype;
use crate::transfer::to_host;
use crate::weights::transpose2;
use st5_format::Error as FormatError;

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

/// Saves `model` to `dir` in the sentence-transformers layout, replacing what is there only once
/// everything is written. An `encdec-first` model keeps its decoder in `model.safetensors` (the
/// Hugging Face T5 names) and gets the pooling mode
/// [`ENCDEC_POOLING_MODE`](crate::layout::ENCDEC_POOLING_MODE), which st5 loads back as
/// `encdec-first` and Python sentence-transformers refuses (it has no such pooling).
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
    let mut t5 = Tensors::new();
    let mut dense: BTreeMap<usize, Tensors> = BTreeMap::new();
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

    let dense = dense
        .into_iter()
        .map(|(i, tensors)| DenseModule {
            tensors,
            activation: model.dense_activation.get(i).copied().unwrap_or(DenseActivation::Identity),
            input_absmax: dense_absmax.remove(&i).unwrap_or_default(),
        })
        .collect();
    SentenceTransformersDir {
        config: &options.config,
        tokenizer_json: options.tokenizer_json,
        max_seq_length: options.max_seq_length,
        pooling: model.variant,
        hidden: model.encoder.hidden(),
        encoder: t5,
        encoder_input_absmax: t5_absmax,
        dense,
        normalize: model.normalize,
        readme: options.readme.as_deref(),
        extra: &options.extra,
        dtype: options.dtype,
    }
    .write(dir)
    .map_err(Error::from)
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
    crate::atomic::write_dir(dir, |staging| {
        files.iter().try_for_each(|(rel, bytes)| crate::atomic::write_under(staging, rel, bytes))
    })
    .map_err(Error::from)
}
