//! The training run: stages in order, each an optimiser over its own datasets; global-norm
//! gradient clipping; non-finite steps skipped (K in a row abort); STS-B dev Spearman every N
//! steps; atomic checkpoints that hold everything needed to continue bit for bit (weights,
//! optimiser state, stage, step, sampler order and position, RNG); and, at the end, a
//! sentence-transformers directory with a model card.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer, OptimizerRecord};
use burn::tensor::{Bytes, Device, Tensor, TensorData};
use st5_core::files::Dir;
use st5_core::fingerprint::weights_fingerprint;
use st5_core::host::{embed_ids, scalar, to_host};
use st5_core::loader::{Loaded, load_dir};
use st5_core::prompt::{Prompt, PromptMeta};
use st5_core::save::{SaveOptions, save_files, save_sentence_transformers, write_atomically};
use st5_core::t5::Linear;
use st5_core::tokenizer::T5Tokenizer;
use st5_core::{
    DEFAULT_BATCH_SIZE, DeviceChoice, FileBytes, LoadOptions, OpenDevice, SentenceT5, Variant,
    WeightDtype,
};

use crate::config::{OptimizerKind, StageConfig, TrainConfig};
use crate::data::{self, Dataset, Rng, Sampler};
use crate::dist::{Workers, all_reduce_gradients, params_checksum};
use crate::error::{Error, Result};
use crate::loss::ContrastiveLoss;
use crate::report::Metric;
pub use crate::state::TrainState;
use crate::step::{Batch, distill_gradients, gathered_gradients, gradients};

/// Progress reported to the caller (the binary draws a bar from it).
pub enum Event<'a> {
    StageStart { stage: &'a StageConfig, datasets: &'a [Dataset] },
    Step(&'a Metric),
    Skipped { stage: &'a str, step: usize, loss: f32 },
    Checkpoint(&'a Path),
}

struct Ids(Vec<String>, BTreeMap<String, u64>);
impl ModuleVisitor for Ids {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.0.push(name.into());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.0.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.1.insert(self.0.join("."), param.id.val());
    }
}

struct SetIds<'a>(Vec<String>, &'a BTreeMap<String, u64>);
impl ModuleMapper for SetIds<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.0.push(name.into());
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.0.pop();
    }
    fn map_float<const D: usize>(&mut self, mut param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if let Some(&id) = self.1.get(&self.0.join(".")) {
            param.id = id.into();
        }
        param
    }
}

fn param_ids(model: &SentenceT5) -> BTreeMap<String, u64> {
    let mut v = Ids(Vec::new(), BTreeMap::new());
    model.visit(&mut v);
    v.1
}

/// Scales all gradients so that their global L2 norm is at most `max` (when `max > 0`);
/// returns the norm before clipping (non-finite if any gradient is).
fn clip_global_norm(model: &SentenceT5, grads: &mut GradientsParams, max: f32) -> f32 {
    struct Norm<'a>(&'a GradientsParams, f64);
    impl ModuleVisitor for Norm<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            if let Some(g) = self.0.get::<D>(p.id) {
                self.1 += scalar(g.square().sum()) as f64;
            }
        }
    }
    struct Scale<'a>(&'a mut GradientsParams, f32);
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<D>>) {
            if let Some(g) = self.0.remove::<D>(p.id) {
                self.0.register(p.id, g.mul_scalar(self.1));
            }
        }
    }
    let mut n = Norm(grads, 0.0);
    model.visit(&mut n);
    let norm = n.1.sqrt() as f32;
    if max > 0.0 && norm.is_finite() && norm > max {
        model.visit(&mut Scale(grads, max / norm));
    }
    norm
}

fn optimizer(stage: &StageConfig) -> ModuleOptimizer {
    match stage.optimizer {
        OptimizerKind::Adamw => AdamWConfig::new().init(),
        OptimizerKind::Adafactor => crate::optim::adafactor().init(),
    }
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

/// A random model from a T5 `config.json` (`[model] init` names the file): encoder only, the
/// configured pooling (default enc-mean), Normalize; the tokenizer from `[model] tokenizer`.
fn random_model(config: &Path, cfg: &TrainConfig, device: &Device) -> Result<Loaded> {
    let t5 = st5_core::T5Config::from_file(config)?;
    let variant = cfg.model.variant.unwrap_or(Variant::EncMean);
    let head = st5_core::HeadConfig { variant, dense: Vec::new(), normalize: true };
    let model = SentenceT5::init(&t5, &head, device);
    let tok = cfg.model.tokenizer.as_ref().ok_or_else(|| Error::Config {
        path: config.into(),
        message: "a model initialised from a config.json needs [model] tokenizer".into(),
    })?;
    let max_len = cfg.model.max_seq_length.unwrap_or(512);
    let tokenizer_json = FileBytes::map(tok).map_err(|e| Error::io(tok, e))?;
    let tokenizer = T5Tokenizer::from_bytes(&tokenizer_json, max_len, tok.clone())?;
    let layout = st5_core::layout::ModelLayout {
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

/// The first `length` token embeddings a prompt starts from: rows of the model's embedding
/// table at ids drawn from the 5,000 most frequent pieces (Lester et al. 2021, §3.2, "sampled
/// vocab"; SentencePiece numbers pieces by frequency, after the 3 specials).
fn vocab_init(model: &SentenceT5, length: usize, seed: u64) -> Result<Vec<f32>> {
    let table = model.t5.encoder.embed_tokens.val();
    let vocab = table.dims()[0];
    let mut rng = Rng(seed ^ 0x50_0000);
    let top = vocab.min(5003);
    let ids: Vec<i32> =
        (0..length).map(|_| (3 + rng.below(top.saturating_sub(3).max(1))) as i32).collect();
    let ids =
        Tensor::<1, burn::tensor::Int>::from_data(TensorData::new(ids, [length]), &table.device());
    Ok(to_host(table.select(0, ids).try_into_data())?)
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

/// What a prompt run (every stage `prompt_length = P`) keeps beside the frozen model.
struct PromptRun {
    /// The base model's weights fingerprint, written into the prompt file.
    fingerprint: String,
}

/// The model being trained, with what saving it needs.
pub struct Run {
    pub cfg: TrainConfig,
    base: Device,
    pub model: SentenceT5,
    tokenizer: T5Tokenizer,
    config_json: serde_json::Value,
    tokenizer_json: FileBytes,
    max_len: usize,
    /// STS-B dev: both texts of every pair, tokenized once per run (`[a0, b0, a1, b1, ...]`),
    /// and the gold scores.
    dev_ids: Vec<Vec<u32>>,
    dev_gold: Vec<f64>,
    exclude: HashSet<String>,
    prompt: Option<PromptRun>,
    /// The data-parallel workers (dist.rs); one unless started under `mpirun`.
    pub workers: Workers,
}

impl Run {
    /// Loads the starting model (or, with `resume`, the newest checkpoint) and the data the run
    /// checks against.
    pub fn new(cfg: TrainConfig, resume: bool) -> Result<(Self, Option<(TrainState, Vec<u8>)>)> {
        let base = open_device(cfg.device)?;
        let ad = base.clone().autodiff();
        let checkpoint = cfg
            .checkpoint_dir
            .as_ref()
            .map(|d| d.join("latest"))
            .filter(|d| resume && d.join("trainer_state.json").is_file());
        if resume && checkpoint.is_none() {
            eprintln!(
                "trainer: --resume, but no checkpoint yet; starting from {}",
                cfg.model.init.display()
            );
        }
        let prompt_length = cfg.prompt_length();
        if prompt_length.is_some() && !cfg.model.init.is_dir() {
            return Err(Error::Config {
                path: cfg.model.init.clone(),
                message: "a prompt run tunes a trained model: [model] init must be its directory"
                    .into(),
            });
        }
        // A prompt run's checkpoints hold the prompt alone; the model is always `init`.
        let source = match &checkpoint {
            Some(c) if prompt_length.is_none() => c.clone(),
            _ => cfg.model.init.clone(),
        };
        let options = LoadOptions {
            variant: cfg.model.variant,
            tokenizer: cfg.model.tokenizer.clone(),
            max_seq_length: cfg.model.max_seq_length,
            ..LoadOptions::default()
        };
        let Loaded { mut model, tokenizer, tokenizer_json, layout, .. } = if source.is_file() {
            // A bare T5 config.json: a randomly initialised model (seeded), for training from scratch.
            base.seed(cfg.seed);
            random_model(&source, &cfg, &ad)?
        } else {
            load_dir(&source, &options, &ad)?
        };
        let config_path = if source.is_file() {
            source.clone()
        } else {
            source.join(&layout.transformer).join("config.json")
        };
        let config_json = serde_json::from_slice(
            &std::fs::read(&config_path).map_err(|e| Error::io(&config_path, e))?,
        )
        .map_err(|e| Error::Checkpoint { path: config_path.clone(), message: e.to_string() })?;
        let prompt = match prompt_length {
            None => None,
            Some(length) => {
                let fingerprint = weights_fingerprint(&Dir(cfg.model.init.clone()))?;
                let values = match &checkpoint {
                    Some(dir) => {
                        let path = dir.join("prompt.safetensors");
                        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                        let p = Prompt::from_bytes(&bytes, &path)?;
                        p.check_base(&fingerprint, layout.config.d_model, &path)?;
                        p.values
                    }
                    None => vocab_init(&model, length, cfg.seed)?,
                };
                // Frozen: only the prompt records gradients, so only it is clipped and stepped.
                model = model.no_grad();
                let shape = [length, layout.config.d_model];
                model.prompt = Some(Param::from_tensor(Tensor::<2>::from_data(
                    TensorData::new(values, shape),
                    &ad,
                )));
                Some(PromptRun { fingerprint })
            }
        };
        if model.dense.is_empty() && prompt.is_none() {
            // The paper's projection: d_model → dim, no bias, created when the source has none.
            let (d_in, d_out) =
                (layout.config.d_model, cfg.model.dim.unwrap_or(layout.config.d_model));
            let w = normal(&mut Rng(cfg.seed ^ 0xD15E), d_in * d_out, (d_in as f64).powf(-0.5));
            let weight =
                Param::from_tensor(Tensor::<2>::from_data(TensorData::new(w, [d_in, d_out]), &ad));
            model.dense.push(Linear { weight, bias: None });
        }
        let mut state = None;
        if let Some(dir) = &checkpoint {
            let read = |name: &str| {
                std::fs::read(dir.join(name)).map_err(|e| Error::io(dir.join(name), e))
            };
            let s = TrainState::parse(&read("trainer_state.json")?, dir)?;
            model = model.map(&mut SetIds(Vec::new(), &s.param_ids));
            state = Some((s, read("optimizer.bpk")?));
        }
        let exclude = data::eval_sentences(&cfg.eval_data())?;
        let mut dev =
            st5_eval::data::sts_benchmark(&cfg.eval_data().join("stsbenchmark/sts-dev.csv"))?;
        if cfg.eval_pairs > 0 {
            dev.truncate(cfg.eval_pairs);
        }
        let dev_texts: Vec<&str> = dev.iter().flat_map(|p| [p.a.as_str(), p.b.as_str()]).collect();
        let dev_ids = tokenizer.encode_batch(&dev_texts)?;
        let dev_gold = dev.iter().map(|p| p.score).collect();
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
                dev_ids,
                dev_gold,
                exclude,
                prompt,
                workers: Workers::single(),
            },
            state,
        ))
    }

    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        Ok(self.tokenizer.encode_batch(texts)?)
    }

    /// Spearman ×100 of cosine similarity on the STS-B dev pairs.
    pub fn dev_spearman(&self) -> Result<f64> {
        let frozen = self.model.valid();
        let mut emb = Vec::new();
        for chunk in self.dev_ids.chunks(DEFAULT_BATCH_SIZE) {
            let seqs: Vec<&[u32]> = chunk.iter().map(Vec::as_slice).collect();
            emb.extend(to_host(embed_ids(&frozen, &seqs, &self.base).try_into_data())?);
        }
        let dim = emb.len() / self.dev_ids.len().max(1);
        let rows: Vec<&[f32]> = emb.chunks(dim.max(1)).collect();
        let sims: Vec<f64> = rows.chunks(2).map(|p| st5_eval::tasks::cosine(p[0], p[1])).collect();
        Ok(100.0 * st5_eval::stats::spearman(&sims, &self.dev_gold))
    }

    fn save(
        &self,
        dir: &Path,
        readme: Option<String>,
        extra: Vec<(String, Vec<u8>)>,
        dtype: WeightDtype,
    ) -> Result<()> {
        let options = SaveOptions {
            config: self.config_json.clone(),
            tokenizer_json: &self.tokenizer_json,
            max_seq_length: self.max_len,
            readme,
            extra,
            dtype,
        };
        Ok(save_sentence_transformers(&self.model.valid(), dir, &options)?)
    }

    /// The prompt being trained, as its file holds it (`None` when the run trains the model).
    fn prompt_file(&self) -> Result<Option<Prompt>> {
        let (Some(run), Some(param)) = (&self.prompt, &self.model.prompt) else { return Ok(None) };
        let [length, d_model] = param.dims();
        let values = to_host(param.val().try_into_data())?;
        let meta = PromptMeta {
            base_fingerprint: run.fingerprint.clone(),
            length,
            d_model,
            variant: self.model.variant,
        };
        Ok(Some(Prompt { meta, values }))
    }

    fn checkpoint(&self, state: &TrainState, optim: &ModuleOptimizer) -> Result<Option<PathBuf>> {
        let Some(dir) = &self.cfg.checkpoint_dir else { return Ok(None) };
        let latest = dir.join("latest");
        let bytes = optim.to_record().into_bytes().map_err(|e| Error::Checkpoint {
            path: latest.clone(),
            message: format!("optimizer state: {e:?}"),
        })?;
        let state_json = serde_json::to_vec_pretty(state).expect("state serialises");
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut files = vec![
            ("trainer_state.json".to_string(), state_json),
            ("optimizer.bpk".to_string(), bytes.to_vec()),
        ];
        if let Some(prompt) = self.prompt_file()? {
            // The model is frozen: the prompt is all a prompt run's checkpoint needs.
            files.push(("prompt.safetensors".into(), prompt.to_bytes()));
            save_files(&latest, &files)?;
        } else {
            // f32: a resumed run must continue from exactly these weights.
            self.save(&latest, None, files, WeightDtype::F32)?;
        }
        Ok(Some(latest))
    }

    /// Runs every stage from `resume_state` (or the start), reporting through `on`.
    pub fn train(
        &mut self,
        resume_state: Option<(TrainState, Vec<u8>)>,
        mut on: impl FnMut(Event<'_>),
    ) -> Result<()> {
        let (mut state, mut record) = match resume_state {
            Some((s, bytes)) => (s, Some(bytes)),
            None => (
                TrainState {
                    stage: 0,
                    step: 0,
                    sampler: None,
                    bad_steps: 0,
                    param_ids: BTreeMap::new(),
                },
                None,
            ),
        };
        let stages = self.cfg.stages.clone();
        // Refused before any stage trains, not when a later stage starts.
        let workers = self.workers.size();
        if let Some(s) = stages.iter().find(|s| s.relational > 0.0 && workers > 1) {
            return Err(Error::Workers {
                message: format!(
                    "stage `{}`: `relational` needs the whole batch's similarities, which one worker's slice does not have; run it in one process",
                    s.name
                ),
            });
        }
        for (si, stage) in stages.iter().enumerate().skip(state.stage) {
            let datasets: Vec<Dataset> = stage
                .datasets
                .iter()
                .map(|d| data::load(d, &self.exclude))
                .collect::<Result<_>>()?;
            let mut stage = stage.clone();
            stage.resolve_steps(datasets.iter().map(|d| d.examples.len()).sum());
            let stage = &stage;
            on(Event::StageStart { stage, datasets: &datasets });
            let mut optim = optimizer(stage);
            if let Some(bytes) = record.take() {
                let rec =
                    OptimizerRecord::from_bytes(Bytes::from_bytes_vec(bytes)).map_err(|e| {
                        Error::Checkpoint {
                            path: PathBuf::from("optimizer.bpk"),
                            message: format!("{e:?}"),
                        }
                    })?;
                optim = optim.load_record(rec);
            }
            let mut sampler = match state.sampler.take() {
                Some(s) => Sampler::resume(&datasets, s).map_err(|message| Error::Checkpoint {
                    path: PathBuf::from("trainer_state.json"),
                    message,
                })?,
                None => Sampler::new(&datasets, self.cfg.seed.wrapping_add(si as u64)),
            };
            let n = self.workers.size();
            if !stage.batch_size.is_multiple_of(n) {
                return Err(Error::Workers {
                    message: format!(
                        "stage `{}`: batch_size {} does not split evenly over {n} workers",
                        stage.name, stage.batch_size
                    ),
                });
            }
            let loss =
                ContrastiveLoss { temperature: stage.temperature, symmetric: stage.symmetric };
            let chunk = (stage.chunk_size > 0).then_some(stage.chunk_size);
            for step in state.step..stage.steps {
                let started = Instant::now();
                let (k, picked) = sampler.next_batch(stage.batch_size);
                // Every worker draws the same global batch and takes its own contiguous slice
                // (the whole batch for one worker).
                let pairs = picked.len();
                let per = pairs.div_ceil(n);
                let rank = self.workers.rank();
                let picked = &picked[(rank * per).min(pairs)..((rank + 1) * per).min(pairs)];
                if n > 1 && picked.len() * n != pairs {
                    return Err(Error::Workers {
                        message: format!(
                            "stage `{}` step {}: a batch of {pairs} (a dataset has fewer distinct texts than batch_size) does not split over {n} workers",
                            stage.name,
                            step + 1
                        ),
                    });
                }
                let examples: Vec<&data::Example> =
                    picked.iter().map(|&i| &datasets[k].examples[i]).collect();
                let anchors: Vec<&str> = examples.iter().map(|e| e.anchor.as_str()).collect();
                let (value, mut grads, pairs) = if let Some((targets, dim)) = &datasets[k].targets {
                    let rows: Vec<f32> = picked
                        .iter()
                        .flat_map(|&i| targets[i * dim..(i + 1) * dim].iter().copied())
                        .collect();
                    let (v, mut g) = distill_gradients(
                        &self.model,
                        &self.tokenize(&anchors)?,
                        &rows,
                        stage.relational,
                        &self.base,
                    );
                    // The global mean squared error is the mean of the workers' (equal) slices'.
                    let scale = 1.0 / n as f32;
                    all_reduce_gradients(&self.workers, &self.model, &mut g, scale, &self.base)?;
                    let mut v = [v];
                    self.workers.all_reduce_sum(&mut v);
                    (v[0] * scale, g, pairs)
                } else {
                    let with_neg = examples.iter().all(|e| e.negative.is_some());
                    let positives: Vec<&str> =
                        examples.iter().map(|e| e.positive.as_str()).collect();
                    let negatives: Vec<&str> = if with_neg {
                        examples.iter().filter_map(|e| e.negative.as_deref()).collect()
                    } else {
                        Vec::new()
                    };
                    let batch = Batch {
                        anchors: self.tokenize(&anchors)?,
                        positives: self.tokenize(&positives)?,
                        negatives: self.tokenize(&negatives)?,
                    };
                    let (v, g) = if n == 1 {
                        gradients(&self.model, &batch, &loss, chunk, &self.base)
                    } else {
                        let (v, mut g) = gathered_gradients(
                            &self.model,
                            &batch,
                            &loss,
                            chunk,
                            &self.base,
                            &self.workers,
                        )?;
                        all_reduce_gradients(&self.workers, &self.model, &mut g, 1.0, &self.base)?;
                        (v, g)
                    };
                    (v, g, pairs)
                };
                let norm = clip_global_norm(&self.model, &mut grads, stage.clip_norm);
                if !value.is_finite() || !norm.is_finite() {
                    state.bad_steps += 1;
                    on(Event::Skipped { stage: &stage.name, step, loss: value });
                    if state.bad_steps >= self.cfg.max_bad_steps {
                        return Err(Error::Diverged {
                            stage: stage.name.clone(),
                            step,
                            count: state.bad_steps,
                        });
                    }
                    continue;
                }
                state.bad_steps = 0;
                let lr = stage.lr_at(step);
                self.model = optim.step(lr, self.model.clone(), grads);
                let last = step + 1 == stage.steps;
                let due =
                    (self.cfg.eval_every > 0 && (step + 1) % self.cfg.eval_every == 0) || last;
                // Rank 0 alone logs, so it alone evaluates.
                let dev_spearman =
                    if due && self.workers.is_root() { Some(self.dev_spearman()?) } else { None };
                let metric = Metric {
                    stage: stage.name.clone(),
                    step: step + 1,
                    loss: value,
                    lr,
                    pairs_per_s: pairs as f64 / started.elapsed().as_secs_f64(),
                    dev_spearman,
                };
                on(Event::Step(&metric));
                let (next_stage, next_step) = if last { (si + 1, 0) } else { (si, step + 1) };
                if last
                    || (self.cfg.checkpoint_every > 0
                        && (step + 1) % self.cfg.checkpoint_every == 0)
                {
                    if n > 1 {
                        // Replicas that drifted apart would train different models silently.
                        let sum = params_checksum(&self.model)?;
                        self.workers.check_same(
                            sum,
                            &format!(
                                "model parameters after step {} of stage `{}`",
                                step + 1,
                                stage.name
                            ),
                        )?;
                    }
                    if !self.workers.is_root() {
                        continue;
                    }
                    let s = TrainState {
                        stage: next_stage,
                        step: next_step,
                        sampler: (!last).then(|| sampler.state.clone()),
                        bad_steps: state.bad_steps,
                        param_ids: param_ids(&self.model),
                    };
                    // A finished stage's optimiser state is not carried into the next stage.
                    let fresh = optimizer(stage);
                    if let Some(p) = self.checkpoint(&s, if last { &fresh } else { &optim })? {
                        on(Event::Checkpoint(&p));
                    }
                }
            }
            state.step = 0;
        }
        Ok(())
    }

    /// Writes the trained model to `cfg.output` with a model card; a prompt run writes its
    /// prompt file there, and the card beside it (`{output}.md`).
    pub fn export(&self, card: String) -> Result<()> {
        let Some(prompt) = self.prompt_file()? else {
            return self.save(&self.cfg.output, Some(card), Vec::new(), self.cfg.model.save_dtype);
        };
        let out = &self.cfg.output;
        if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        write_atomically(out, &prompt.to_bytes())?;
        Ok(write_atomically(&out.with_extension("md"), card.as_bytes())?)
    }
}
