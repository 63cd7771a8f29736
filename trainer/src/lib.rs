//! `st5-trainer`: Sentence-T5's contrastive fine-tuning (Ni et al. 2021, §3) on the same
//! st5-core model code the browser and the CLI run, with burn autodiff.
//!
//! - [`config`]: the TOML config (stages, datasets, schedules);
//! - [`data`]: pairs and triplets, evaluation-overlap filtering, the resumable batch sampler;
//! - [`state`]: what a checkpoint records besides weights and optimiser state;
//! - [`loss`]: the in-batch softmax contrastive loss with hard negatives;
//! - [`optim`]: the optimisers as the paper configures them;
//! - [`plot`]: the loss / dev-Spearman PNG;
//! - [`report`]: the metrics CSV and the model card;
//! - [`step`]: one gradient computation of the dual encoder, plain or with GradCache;
//! - [`run`]: the run: setup, stages, the training step with clipping, dev evaluation,
//!   checkpoints and resume, export.
//!
//! Without the `model` feature (on by default) only the parsers of outside files remain
//! ([`config`], [`data`], [`state`], [`error`]): what fuzz/ builds without burn.

pub mod config;
pub mod data;
#[cfg(feature = "model")]
pub mod dist;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "model")]
pub mod loss;
#[cfg(feature = "model")]
pub mod optim;
#[cfg(feature = "model")]
pub mod plot;
#[cfg(feature = "model")]
pub mod report;
#[cfg(feature = "model")]
pub mod run;
pub mod state;
#[cfg(feature = "model")]
pub mod step;
