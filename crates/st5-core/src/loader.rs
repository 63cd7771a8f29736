//! Loading: a model's files (a directory or files in memory, any layout st5 reads) to a
//! [`SentenceModel`] on a device with its tokenizer, checking every tensor by name on the way
//! (missing, mis-shaped, unused), the Dense chain's widths and the device's buffer limit.
//! [`crate::Embedder`] wraps the result for embedding.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use burn::tensor::Device;

use crate::checkpoint::Checkpoint;
use crate::compute::Compute;
use crate::error::{Error, Result};
use crate::files::{Dir, FileBytes, ModelFiles, join};
use crate::layout::ModelLayout;
use crate::model::{HeadConfig, SentenceModel};
use crate::tokenizer::T5Tokenizer;
use crate::weights::{LoadReport, VarBuilder};
use st5_format::Error as FormatError;
use st5_format::variant::Variant;

/// Options for [`Embedder::load`]; `Default` follows the model directory.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Overrides the variant given by the Pooling module (enc-mean for a plain T5 directory).
    pub variant: Option<Variant>,
    /// A `tokenizer.json` to use when the directory has none (or to override it).
    pub tokenizer: Option<PathBuf>,
    /// Overrides `max_seq_length`.
    pub max_seq_length: Option<usize>,
    /// Texts per forward pass.
    pub batch_size: usize,
    /// The largest device buffer allowed, in bytes (WebGPU's `maxStorageBufferBindingSize` /
    /// `maxBufferSize`). Batches are split so that no activation outgrows it; `None`: no limit.
    pub max_buffer_bytes: Option<u64>,
    /// int8 weights kept int8 for int8 models (`Auto`, the default: int8 products on the CPU, f32
    /// products over int8 codes on a GPU), or f32 everywhere (`F32`: training, conversion, and
    /// the exact reference).
    pub compute: Compute,
}

/// Texts per forward pass unless a caller says otherwise: the CLI, the library and the browser
/// package all default to it.
pub const DEFAULT_BATCH_SIZE: usize = 32;

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            variant: None,
            tokenizer: None,
            max_seq_length: None,
            batch_size: DEFAULT_BATCH_SIZE,
            max_buffer_bytes: None,
            compute: Compute::Auto,
        }
    }
}

/// What [`load`] builds.
pub struct Loaded {
    pub model: SentenceModel,
    pub tokenizer: T5Tokenizer,
    /// The `tokenizer.json` the tokenizer was built from (what a saved copy of the model ships).
    pub tokenizer_json: FileBytes,
    /// Unused tensors (a decoder or LM head an `enc-*` variant leaves) and nothing else: a load
    /// with missing or mis-shaped tensors is an error.
    pub report: LoadReport,
    pub layout: ModelLayout,
}

/// Loads the model directory `dir` onto `device`; a missing directory is named.
pub fn load_dir(dir: &Path, options: &LoadOptions, device: &Device) -> Result<Loaded> {
    if !dir.is_dir() {
        return Err(FormatError::layout(dir, "model directory not found").into());
    }
    load(&Dir(dir.to_path_buf()), options, device)
}

/// Loads the model in `files` onto `device`.
pub fn load(files: &impl ModelFiles, options: &LoadOptions, device: &Device) -> Result<Loaded> {
    if options.batch_size == 0 {
        return Err(Error::Invalid("batch size must be at least 1".into()));
    }
    let layout = ModelLayout::read(files)?;
    let variant = layout.variant(options.variant)?;
    let cfg = &layout.config;
    if let (Some(limit), (name, bytes)) = (options.max_buffer_bytes, cfg.largest_weight())
        && bytes > limit
    {
        let hint = "; use the CPU device or a device with larger buffers";
        return Err(Error::Limit { what: format!("weight `{name}`"), bytes, limit, hint });
    }
    let mut width = cfg.d_model();
    for (dir, (d_in, d_out, ..)) in &layout.dense {
        if *d_in != width {
            return Err(FormatError::config(
                files.path(&join(dir, "config.json")),
                format!("Dense in_features is {d_in}, but its input has width {width}"),
            )
            .into());
        }
        width = *d_out;
    }
    if variant.needs_decoder() && cfg.t5().is_none() {
        return Err(FormatError::config(
            files.path(&join(&layout.transformer, "config.json")),
            format!(
                "variant encdec-first needs a T5 decoder, and a {} model has none; use enc-mean or enc-first",
                cfg.family()
            ),
        )
        .into());
    }
    let ckpt = Rc::new(Checkpoint::open(files, &layout.transformer)?);
    if variant.needs_decoder() && !crate::names::has_decoder(ckpt.names()) {
        return Err(FormatError::layout(
            &layout.transformer_dir,
            "variant encdec-first needs the T5 decoder weights (decoder.block.*), but this checkpoint holds an \
                 encoder only; use enc-mean or enc-first, or a full T5 checkpoint",
        ).into());
    }
    let keep_int8 = options.compute == Compute::Auto;
    let t5_vb = VarBuilder::from_checkpoint(ckpt, device, keep_int8);
    let mut dense_vbs = Vec::new();
    for (dir, _) in &layout.dense {
        let ckpt = Rc::new(Checkpoint::open(files, dir)?);
        dense_vbs.push((files.path(dir), VarBuilder::from_checkpoint(ckpt, device, keep_int8)));
    }
    let head = HeadConfig {
        variant,
        dense: layout.dense.iter().map(|(_, d)| *d).collect(),
        normalize: layout.normalize,
    };
    let vbs: Vec<VarBuilder> = dense_vbs.iter().map(|(_, vb)| vb.clone()).collect();
    let model = SentenceModel::new(&t5_vb, &vbs, cfg, &head);
    let mut report = t5_vb.report();
    if !report.is_ok() {
        return Err(Error::Weights {
            path: layout.transformer_dir.clone(),
            report: report.problems(),
        });
    }
    for (path, vb) in &dense_vbs {
        let r = vb.report();
        if !r.is_ok() {
            return Err(Error::Weights { path: path.clone(), report: r.problems() });
        }
        report.unused.extend(r.unused.into_iter().map(|n| format!("{}/{n}", path.display())));
    }
    let max_len = options.max_seq_length.unwrap_or(layout.max_seq_length);
    // BERT and MPNet have a position table; sentence-transformers' max_seq_length is within it
    // for every published model, and a longer one would index past it.
    if let Some(limit) = cfg.max_tokens()
        && max_len > limit
    {
        let from = if options.max_seq_length.is_some() {
            "the requested max_seq_length".to_string()
        } else {
            format!("{}'s max_seq_length", files.path("sentence_bert_config.json").display())
        };
        return Err(FormatError::config(
            files.path(&join(&layout.transformer, "config.json")),
            format!(
                "{from} ({max_len}) exceeds the {} model's {limit} positions (max_position_embeddings)",
                cfg.family()
            ),
        )
        .into());
    }
    let (tokenizer_json, tokenizer_path) = match (&options.tokenizer, &layout.tokenizer) {
        (Some(path), _) => {
            (FileBytes::map(path).map_err(|e| FormatError::io(path, e))?, path.clone())
        }
        (None, Some(rel)) => {
            let bytes = files.read(rel)?.ok_or_else(|| {
                FormatError::layout(files.path(rel), "tokenizer.json vanished while loading")
            })?;
            (bytes, files.path(rel))
        }
        (None, None) => {
            return Err(FormatError::layout(
                files.path(""),
                "no tokenizer.json in the model directory; pass one explicitly (--tokenizer)",
            )
            .into());
        }
    };
    let tokenizer = T5Tokenizer::from_bytes(&tokenizer_json, max_len, tokenizer_path)?;
    Ok(Loaded { model, tokenizer, tokenizer_json, report, layout })
}
