//! `st5-trainer`: Sentence-T5's contrastive fine-tuning (Ni et al. 2021, §3) on the same
//! st5-core model code the browser and the CLI run, with burn autodiff.
//!
//! - [`loss`]: the in-batch softmax contrastive loss with hard negatives;
//! - [`optim`]: the optimisers as the paper configures them;
//! - [`step`]: one gradient computation of the dual encoder, plain or with GradCache.

pub mod loss;
pub mod optim;
pub mod step;
