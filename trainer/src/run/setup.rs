//! Starting a run ([`Run::new`]), step by step: the device, the checkpoint to resume from, the
//! starting model (a directory, a checkpoint, or a random model from a T5 `config.json`), the
//! soft prompt of a prompt run, the Dense projection the paper adds, the checkpoint's training
//! state, and the evaluation data.

use std::path::{Path, PathBuf};

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor, TensorData};
use st5_core::files::Dir;
use st5_core::fingerprint::weights_fingerprint;
use st5_core::layout::ModelLayout;
use st5_core::loader::{Loaded, load_dir};
use st5_core::models::layers::Linear;
use st5_core::prompt::Prompt;
use st5_core::tokenizer::T5Tokenizer;
use st5_core::transfer::to_host;
use st5_core::{Compute, DeviceChoice, FileBytes, LoadOptions, OpenDevice, SentenceModel, Variant};

use super::checkpoint::{latest_checkpoint, read_checkpoint, with_param_ids};
use super::eval::DevSet;
use super::{PromptRun, Run, TrainState};
use crate::config::TrainConfig;
use crate::data::{self, Rng};
use crate::dist::Workers;
use crate::error::{Error, Result};

impl Run {
    /// Loads the starting model (or, with `resume`, the newest checkpoint) and the data the run
    /// checks against.
    pub fn new(cfg: TrainConfig, resume: bool) -> Result<(Self, Option<(TrainState, Vec<u8>)>)> {
        let base = open_device(cfg.device)?;
        let ad = base.clone().autodiff();
        let checkpoint = latest_checkpoint(&cfg, resume);
        let prompt_length = cfg.prompt_length();
        // `[model] init` as a local path: a hub model is fetched (or found in the cache) here.
        let init = st5_hub::resolve(&cfg.model.init, &[])?;
        check_prompt_source(&init, prompt_length)?;
        let Start { model, tokenizer, tokenizer_json, layout, config_json } =
            load_start(&cfg, &init, checkpoint.as_deref(), prompt_length, &base, &ad)?;
        let (mut model, prompt) = match prompt_length {
            None => (model, None),
            Some(length) => {
                let (model, prompt) =
                    add_prompt(model, &cfg, &init, &layout, checkpoint.as_deref(), length, &ad)?;
                (model, Some(prompt))
            }
        };
        if model.dense.is_empty() && prompt.is_none() {
            add_dense(&mut model, &cfg, &layout, &ad);
        }
        let state = match &checkpoint {
            Some(dir) => {
                let (state, optimizer) = read_checkpoint(dir)?;
                model = with_param_ids(model, &state);
                Some((state, optimizer))
            }
            None => None,
        };
        let exclude = data::eval_sentences(&cfg.eval_data())?;
        let dev = DevSet::load(&cfg, &tokenizer)?;
        let max_len = tokenizer.max_len();
        Ok((
            Self {
                cfg,
                base,
                model,
                tokenizer,
                config_json,
                tokenizer_json,
                max_len,
                dev,
                exclude,
                prompt,
                workers: Workers::single(),
            },
            state,
        ))
    }
}

/// The device the config chose; CUDA (with the `cuda` feature) is opened here, the others by
/// st5-core.
fn open_device(choice: DeviceChoice) -> Result<Device> {
    #[cfg(feature = "cuda")]
    if choice == DeviceChoice::Cuda {
        // One GPU per worker on a machine: the worker's rank among those on its node.
        return Ok(Device::cuda(crate::dist::local_rank()));
    }
    Ok(choice.device()?)
}

/// A prompt run tunes a trained model, so it starts from a model directory.
fn check_prompt_source(init: &Path, prompt_length: Option<usize>) -> Result<()> {
    if prompt_length.is_some() && !init.is_dir() {
        return Err(Error::Config {
            path: init.to_path_buf(),
            message: "a prompt run tunes a trained model: [model] init must be its directory"
                .into(),
        });
    }
    Ok(())
}

/// The starting model, with what saving it needs.
struct Start {
    model: SentenceModel,
    tokenizer: T5Tokenizer,
    tokenizer_json: FileBytes,
    layout: ModelLayout,
    /// The transformer's `config.json`, written back beside the weights.
    config_json: serde_json::Value,
}

/// The model a run starts from, on `ad` (the autodiff device over `base`): the checkpoint's when
/// it resumes a run that trains the model, else `[model] init` (resolved to `init`), a directory
/// or a T5 `config.json` (a random model).
fn load_start(
    cfg: &TrainConfig,
    init: &Path,
    checkpoint: Option<&Path>,
    prompt_length: Option<usize>,
    base: &Device,
    ad: &Device,
) -> Result<Start> {
    // A prompt run's checkpoints hold the prompt alone; the model is always `init`.
    let source = match checkpoint {
        Some(c) if prompt_length.is_none() => c.to_path_buf(),
        _ => init.to_path_buf(),
    };
    let options = LoadOptions {
        variant: cfg.model.variant,
        tokenizer: cfg.model.tokenizer.clone(),
        max_seq_length: cfg.model.max_seq_length,
        // Training updates f32 weights: an int8 init is dequantized.
        compute: Compute::F32,
        ..LoadOptions::default()
    };
    let Loaded { model, tokenizer, tokenizer_json, layout, .. } = if source.is_file() {
        // A bare T5 config.json: a randomly initialised model (seeded), for training from scratch.
        base.seed(cfg.seed);
        random_model(&source, cfg, ad)?
    } else {
        load_dir(&source, &options, ad)?
    };
    let config_path: PathBuf = if source.is_file() {
        source.clone()
    } else {
        source.join(&layout.transformer).join("config.json")
    };
    let config_json = serde_json::from_slice(
        &std::fs::read(&config_path).map_err(|e| Error::io(&config_path, e))?,
    )
    .map_err(|e| Error::Checkpoint { path: config_path.clone(), message: e.to_string() })?;
    Ok(Start { model, tokenizer, tokenizer_json, layout, config_json })
}

/// A random model from a `config.json` of any family (`[model] init` names the file): encoder
/// only, the configured pooling (default enc-mean), Normalize; the tokenizer from
/// `[model] tokenizer`.
fn random_model(config: &Path, cfg: &TrainConfig, device: &Device) -> Result<Loaded> {
    let bytes = std::fs::read(config).map_err(|e| Error::io(config, e))?;
    let t5 = st5_core::ModelConfig::from_slice(&bytes, config)?;
    let variant = cfg.model.variant.unwrap_or(Variant::EncMean);
    let head = st5_core::HeadConfig { variant, dense: Vec::new(), normalize: true };
    let model = SentenceModel::init(&t5, &head, device);
    let tok = cfg.model.tokenizer.as_ref().ok_or_else(|| Error::Config {
        path: config.into(),
        message: "a model initialised from a config.json needs [model] tokenizer".into(),
    })?;
    let max_len = cfg.model.max_seq_length.unwrap_or(512);
    let tokenizer_json = FileBytes::map(tok).map_err(|e| Error::io(tok, e))?;
    let tokenizer = T5Tokenizer::from_bytes(&tokenizer_json, max_len, tok.clone())?;
    let layout = ModelLayout {
        transformer: String::new(),
        transformer_dir: config.parent().unwrap_or(Path::new(".")).to_path_buf(),
        config: t5,
        pooling: Some(variant),
        pooling_problem: None,
        dense: Vec::new(),
        normalize: true,
        max_seq_length: max_len,
        tokenizer: None,
    };
    let report = Default::default();
    Ok(Loaded { model, tokenizer, tokenizer_json, report, layout })
}

/// A prompt run's soft prompt of `length` vectors, put before every text of `model`, which is
/// frozen: the checkpoint's prompt when the run resumes, else one drawn from the vocabulary.
fn add_prompt(
    model: SentenceModel,
    cfg: &TrainConfig,
    init: &Path,
    layout: &ModelLayout,
    checkpoint: Option<&Path>,
    length: usize,
    ad: &Device,
) -> Result<(SentenceModel, PromptRun)> {
    if model.encoder.t5().is_none() {
        return Err(Error::Config {
            path: init.into(),
            message: format!(
                "soft prompts run on T5 models only, and this is a {} model",
                layout.config.family()
            ),
        });
    }
    let fingerprint = weights_fingerprint(&Dir(init.to_path_buf()))?;
    let values = match checkpoint {
        Some(dir) => {
            let path = dir.join("prompt.safetensors");
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let p = Prompt::from_bytes(&bytes, &path)?;
            p.check_base(&fingerprint, layout.config.d_model(), &path)?;
            p.values
        }
        None => vocab_init(&model, layout.config.vocab_size(), length, cfg.seed, ad)?,
    };
    // Frozen: only the prompt records gradients, so only it is clipped and stepped.
    let mut model = model.no_grad();
    let shape = [length, layout.config.d_model()];
    model.prompt =
        Some(Param::from_tensor(Tensor::<2>::from_data(TensorData::new(values, shape), ad)));
    Ok((model, PromptRun { fingerprint }))
}

/// The first `length` token embeddings a prompt starts from: rows of the model's embedding
/// table at ids drawn from the 5,000 most frequent pieces (Lester et al. 2021, §3.2, "sampled
/// vocab"; SentencePiece numbers pieces by frequency, after the 3 specials).
fn vocab_init(
    model: &SentenceModel,
    vocab: usize,
    length: usize,
    seed: u64,
    device: &Device,
) -> Result<Vec<f32>> {
    let mut rng = Rng(seed ^ 0x50_0000);
    let top = vocab.min(5003);
    let ids: Vec<i32> =
        (0..length).map(|_| (3 + rng.below(top.saturating_sub(3).max(1))) as i32).collect();
    let ids = Tensor::<2, burn::tensor::Int>::from_data(TensorData::new(ids, [1, length]), device);
    let t5 = model.encoder.t5().expect("add_prompt checks the family");
    Ok(to_host(t5.encoder.embed(ids).try_into_data())?)
}

/// The paper's projection, d_model → dim (`[model] dim`, default d_model), no bias, for a source
/// without one; its weights drawn from the run's seed.
fn add_dense(model: &mut SentenceModel, cfg: &TrainConfig, layout: &ModelLayout, ad: &Device) {
    let d_model = layout.config.d_model();
    let (d_in, d_out) = (d_model, cfg.model.dim.unwrap_or(d_model));
    let w = normal(&mut Rng(cfg.seed ^ 0xD15E), d_in * d_out, (d_in as f64).powf(-0.5));
    let weight = Param::from_tensor(Tensor::<2>::from_data(TensorData::new(w, [d_in, d_out]), ad));
    model.dense.push(Linear { weight: Some(weight), bias: None, int8: None });
}

/// Normal(0, std) values from the run's RNG (Box–Muller), so a created Dense is reproducible.
fn normal(rng: &mut Rng, n: usize, std: f64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let (u, v) = (rng.unit().max(1e-12), rng.unit());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos() * std) as f32
        })
        .collect()
}
