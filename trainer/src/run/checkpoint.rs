//! Checkpoints: written atomically every `checkpoint_every` steps and at the end of each stage,
//! they hold everything needed to continue bit for bit (the weights, or a prompt run's prompt;
//! the optimiser state; stage, step, sampler order and position; the parameter ids the optimiser
//! state is keyed by), and a resumed run reads them back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{ModuleOptimizer, OptimizerRecord};
use burn::tensor::{Bytes, Tensor};
use st5_core::SentenceModel;
use st5_core::WeightDtype;
use st5_core::save::save_files;

use super::train_step::optimizer;
use super::{Event, Run, StageRun, TrainState};
use crate::config::TrainConfig;
use crate::data::Sampler;
use crate::dist::params_checksum;
use crate::error::{Error, Result};

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

fn param_ids(model: &SentenceModel) -> BTreeMap<String, u64> {
    let mut v = Ids(Vec::new(), BTreeMap::new());
    model.visit(&mut v);
    v.1
}

/// The checkpoint a resumed run continues from (`checkpoint_dir/latest`), if `resume` and one
/// has been written.
pub(super) fn latest_checkpoint(cfg: &TrainConfig, resume: bool) -> Option<PathBuf> {
    let checkpoint = cfg
        .checkpoint_dir
        .as_ref()
        .map(|d| d.join("latest"))
        .filter(|d| resume && d.join("trainer_state.json").is_file());
    if resume && checkpoint.is_none() {
        eprintln!("trainer: --resume, but no checkpoint yet; starting from {}", cfg.model.init);
    }
    checkpoint
}

/// A checkpoint's training state and optimiser record (`optimizer.bpk`, read when its stage
/// starts again).
pub(super) fn read_checkpoint(dir: &Path) -> Result<(TrainState, Vec<u8>)> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| Error::io(dir.join(name), e));
    let state = TrainState::parse(&read("trainer_state.json")?, dir)?;
    Ok((state, read("optimizer.bpk")?))
}

/// `model` with the parameter ids `state` recorded, so that the optimiser state finds its
/// parameters again.
pub(super) fn with_param_ids(model: SentenceModel, state: &TrainState) -> SentenceModel {
    model.map(&mut SetIds(Vec::new(), &state.param_ids))
}

/// `optim` with a checkpoint's optimiser record (`optimizer.bpk`) loaded.
pub(super) fn load_optimizer(optim: ModuleOptimizer, bytes: Vec<u8>) -> Result<ModuleOptimizer> {
    let rec = OptimizerRecord::from_bytes(Bytes::from_bytes_vec(bytes)).map_err(|e| {
        Error::Checkpoint { path: PathBuf::from("optimizer.bpk"), message: format!("{e:?}") }
    })?;
    Ok(optim.load_record(rec))
}

impl Run {
    /// After step `step` (0-based) of `stage`: a checkpoint when one is due (every
    /// `checkpoint_every` steps, and at the stage's end), after checking that the workers'
    /// replicas agree; rank 0 alone writes it.
    pub(super) fn checkpoint_if_due(
        &self,
        stage: &StageRun<'_>,
        step: usize,
        sampler: &Sampler,
        bad_steps: usize,
        optim: &ModuleOptimizer,
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<()> {
        let (si, stage) = (stage.index, stage.config);
        let last = step + 1 == stage.steps;
        let (next_stage, next_step) = if last { (si + 1, 0) } else { (si, step + 1) };
        let every = self.cfg.checkpoint_every;
        if !(last || (every > 0 && (step + 1).is_multiple_of(every))) {
            return Ok(());
        }
        if self.workers.size() > 1 {
            // Replicas that drifted apart would train different models silently.
            let sum = params_checksum(&self.model)?;
            self.workers.check_same(
                sum,
                &format!("model parameters after step {} of stage `{}`", step + 1, stage.name),
            )?;
        }
        if !self.workers.is_root() {
            return Ok(());
        }
        let s = TrainState {
            stage: next_stage,
            step: next_step,
            sampler: (!last).then(|| sampler.state.clone()),
            bad_steps,
            param_ids: param_ids(&self.model),
        };
        // A finished stage's optimiser state is not carried into the next stage.
        let fresh = optimizer(stage);
        if let Some(p) = self.checkpoint(&s, if last { &fresh } else { optim })? {
            on(Event::Checkpoint(&p));
        }
        Ok(())
    }

    /// Writes `checkpoint_dir/latest` (when the config has a checkpoint directory).
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
}
