//! One training step of a run: this worker's slice of the global batch, its gradients
//! (distillation or the contrastive loss, all-reduced over the workers), global-norm clipping,
//! and the optimiser's update; a step whose loss or norm is not finite is skipped, and K in a row
//! abort the run.

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;
use st5_core::SentenceModel;
use st5_core::transfer::scalar;

use super::{Event, Run, StageRun};
use crate::config::{OptimizerKind, StageConfig};
use crate::data::{Dataset, Example};
use crate::dist::all_reduce_gradients;
use crate::error::{Error, Result};
use crate::step::{Batch, distill_gradients, gathered_gradients, gradients};

/// A stage's optimiser, fresh.
pub(super) fn optimizer(stage: &StageConfig) -> ModuleOptimizer {
    match stage.optimizer {
        OptimizerKind::Adamw => AdamWConfig::new().init(),
        OptimizerKind::Adafactor => crate::optim::adafactor().init(),
    }
}

/// Scales all gradients so that their global L2 norm is at most `max` (when `max > 0`);
/// returns the norm before clipping (non-finite if any gradient is).
fn clip_global_norm(model: &SentenceModel, grads: &mut GradientsParams, max: f32) -> f32 {
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

impl Run {
    /// Step `step` (0-based) of `stage` on the global batch `picked` of dataset `k`: the loss
    /// and learning rate of the update made, or `None` for a step skipped as non-finite
    /// (reported; `bad_steps` counts those in a row, and `max_bad_steps` of them abort the run).
    pub(super) fn train_step(
        &mut self,
        stage: &StageRun<'_>,
        step: usize,
        (k, picked): (usize, &[usize]),
        optim: &mut ModuleOptimizer,
        bad_steps: &mut usize,
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<Option<(f32, f64)>> {
        let config = stage.config;
        let picked = self.worker_slice(config, step, picked)?;
        let (value, mut grads) = self.gradients(stage, &stage.datasets[k], picked)?;
        let norm = clip_global_norm(&self.model, &mut grads, config.clip_norm);
        if !value.is_finite() || !norm.is_finite() {
            *bad_steps += 1;
            on(Event::Skipped { stage: &config.name, step, loss: value });
            if *bad_steps >= self.cfg.max_bad_steps {
                return Err(Error::Diverged {
                    stage: config.name.clone(),
                    step,
                    count: *bad_steps,
                });
            }
            return Ok(None);
        }
        *bad_steps = 0;
        let lr = config.lr_at(step);
        self.model = optim.step(lr, self.model.clone(), grads);
        Ok(Some((value, lr)))
    }

    /// This worker's contiguous slice of the global batch `picked`: every worker draws the same
    /// global batch (the whole batch for one worker).
    fn worker_slice<'a>(
        &self,
        stage: &StageConfig,
        step: usize,
        picked: &'a [usize],
    ) -> Result<&'a [usize]> {
        let (n, pairs) = (self.workers.size(), picked.len());
        let per = pairs.div_ceil(n);
        let rank = self.workers.rank();
        let mine = &picked[(rank * per).min(pairs)..((rank + 1) * per).min(pairs)];
        if n > 1 && mine.len() * n != pairs {
            return Err(Error::Workers {
                message: format!(
                    "stage `{}` step {}: a batch of {pairs} (a dataset has fewer distinct texts than batch_size) does not split over {n} workers",
                    stage.name,
                    step + 1
                ),
            });
        }
        Ok(mine)
    }

    /// The loss and the (all-reduced) gradients of this worker's examples `picked` of `dataset`:
    /// distillation when the dataset has teacher targets, else the contrastive loss.
    fn gradients(
        &self,
        stage: &StageRun<'_>,
        dataset: &Dataset,
        picked: &[usize],
    ) -> Result<(f32, GradientsParams)> {
        let n = self.workers.size();
        let examples: Vec<&Example> = picked.iter().map(|&i| &dataset.examples[i]).collect();
        let anchors: Vec<&str> = examples.iter().map(|e| e.anchor.as_str()).collect();
        if let Some((targets, dim)) = &dataset.targets {
            let rows: Vec<f32> = picked
                .iter()
                .flat_map(|&i| targets[i * dim..(i + 1) * dim].iter().copied())
                .collect();
            let (v, mut g) = distill_gradients(
                &self.model,
                &self.tokenize(&anchors)?,
                &rows,
                stage.config.relational,
                &self.base,
            );
            // The global mean squared error is the mean of the workers' (equal) slices'.
            let scale = 1.0 / n as f32;
            all_reduce_gradients(&self.workers, &self.model, &mut g, scale, &self.base)?;
            let mut v = [v];
            self.workers.all_reduce_sum(&mut v);
            return Ok((v[0] * scale, g));
        }
        let with_neg = examples.iter().all(|e| e.negative.is_some());
        let positives: Vec<&str> = examples.iter().map(|e| e.positive.as_str()).collect();
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
        let (loss, chunk) = (&stage.loss, stage.chunk);
        if n == 1 {
            return Ok(gradients(&self.model, &batch, loss, chunk, &self.base));
        }
        let (v, mut g) =
            gathered_gradients(&self.model, &batch, loss, chunk, &self.base, &self.workers)?;
        all_reduce_gradients(&self.workers, &self.model, &mut g, 1.0, &self.base)?;
        Ok((v, g))
    }
}
