//! The training run: stages in order, each an optimiser over its own datasets; global-norm
//! gradient clipping; non-finite steps skipped (K in a row abort); STS-B dev Spearman every N
//! steps; atomic checkpoints that hold everything needed to continue bit for bit (weights,
//! optimiser state, stage, step, sampler order and position, RNG); and, at the end, a
//! sentence-transformers directory with a model card.
//!
//! - [`setup`]: [`Run::new`], step by step (device, checkpoint, model, prompt, Dense, dev set);
//! - [`train_step`]: one step (the worker's slice, gradients, clipping, the update);
//! - [`eval`]: the STS-B dev metric;
//! - [`checkpoint`]: writing checkpoints and reading them back.

mod checkpoint;
mod eval;
mod setup;
mod train_step;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::Device;
use st5_core::FileBytes;
use st5_core::atomic;
use st5_core::calibration;
use st5_core::prompt::{Prompt, PromptMeta};
use st5_core::save::{SaveOptions, save_sentence_transformers};
use st5_core::tokenizer::T5Tokenizer;
use st5_core::transfer::to_host;
use st5_core::{SentenceModel, WeightDtype};

use crate::config::{StageConfig, TrainConfig};
use crate::data::{self, Dataset, Sampler};
use crate::dist::Workers;
use crate::error::{Error, Result};
use crate::loss::ContrastiveLoss;
use crate::report::Metric;
pub use crate::state::TrainState;
use checkpoint::load_optimizer;
use eval::DevSet;
use train_step::optimizer;

/// Progress reported to the caller (the binary draws a bar from it).
pub enum Event<'a> {
    StageStart { stage: &'a StageConfig, datasets: &'a [Dataset] },
    Step(&'a Metric),
    Skipped { stage: &'a str, step: usize, loss: f32 },
    Checkpoint(&'a Path),
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
    pub model: SentenceModel,
    tokenizer: T5Tokenizer,
    config_json: serde_json::Value,
    tokenizer_json: FileBytes,
    max_len: usize,
    dev: DevSet,
    exclude: HashSet<String>,
    prompt: Option<PromptRun>,
    /// The data-parallel workers (dist.rs); one unless started under `mpirun`.
    pub workers: Workers,
}

/// The stage being trained: its place in the run, its config (steps resolved), its datasets and
/// loss.
struct StageRun<'a> {
    index: usize,
    config: &'a StageConfig,
    datasets: &'a [Dataset],
    loss: ContrastiveLoss,
    /// GradCache's texts per forward pass; `None`: the whole batch at once.
    chunk: Option<usize>,
}

impl Run {
    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        Ok(self.tokenizer.encode_batch(texts)?)
    }

    fn save(
        &self,
        dir: &Path,
        readme: Option<String>,
        extra: Vec<(String, Vec<u8>)>,
        dtype: WeightDtype,
    ) -> Result<()> {
        let model = self.model.valid();
        // An int8 model is calibrated as `st5 quantize` calibrates one (st5-core's calibration).
        let input_absmax = match dtype {
            WeightDtype::Int8 => {
                Some(model.calibrate(&self.tokenizer, &calibration::sentences(), &self.base)?)
            }
            WeightDtype::F32 | WeightDtype::F16 => None,
        };
        let options = SaveOptions {
            config: self.config_json.clone(),
            tokenizer_json: &self.tokenizer_json,
            max_seq_length: self.max_len,
            readme,
            extra,
            dtype,
            input_absmax: input_absmax.as_ref(),
        };
        Ok(save_sentence_transformers(&model, dir, &options)?)
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
                optim = load_optimizer(optim, bytes)?;
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
            let current = StageRun {
                index: si,
                config: stage,
                datasets: &datasets,
                loss: ContrastiveLoss {
                    temperature: stage.temperature,
                    symmetric: stage.symmetric,
                },
                chunk: (stage.chunk_size > 0).then_some(stage.chunk_size),
            };
            for step in state.step..stage.steps {
                let started = Instant::now();
                let (k, picked) = sampler.next_batch(stage.batch_size);
                let pairs = picked.len();
                let stepped = self.train_step(
                    &current,
                    step,
                    (k, &picked),
                    &mut optim,
                    &mut state.bad_steps,
                    &mut on,
                )?;
                let Some((loss, lr)) = stepped else { continue };
                let dev_spearman = self.dev_spearman_if_due(step, stage.steps)?;
                let metric = Metric {
                    stage: stage.name.clone(),
                    step: step + 1,
                    loss,
                    lr,
                    pairs_per_s: pairs as f64 / started.elapsed().as_secs_f64(),
                    dev_spearman,
                };
                on(Event::Step(&metric));
                self.checkpoint_if_due(&current, step, &sampler, state.bad_steps, &optim, &mut on)?;
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
        atomic::write(out, &prompt.to_bytes())?;
        Ok(atomic::write(&out.with_extension("md"), card.as_bytes())?)
    }
}
