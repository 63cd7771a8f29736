//! `st5-trainer`: Sentence-T5's contrastive fine-tuning (Ni et al. 2021, §3) on the same
//! st5-core model code the browser and the CLI run, with burn autodiff.
//!
//! - [`config`]: the TOML config (stages, datasets, schedules);
//! - [`data`]: pairs and triplets, evaluation-overlap filtering, the resumable batch sampler;
//! - [`loss`]: the in-batch softmax contrastive loss with hard negatives;
//! - [`optim`]: the optimisers as the paper configures them;
//! - [`plot`]: the loss / dev-Spearman PNG;
//! - [`report`]: the metrics CSV and the model card;
//! - [`step`]: one gradient computation of the dual encoder, plain or with GradCache;
//! - [`train`]: the run: stages, clipping, checkpoints and resume, dev evaluation, export.

pub mod config;
pub mod data;
pub mod error;
pub mod loss;
pub mod optim;
pub mod plot;
pub mod report;
pub mod step;
pub mod train;
