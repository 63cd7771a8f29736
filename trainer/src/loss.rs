//! The Sentence-T5 contrastive loss (Ni et al. 2021, §3.2, eq. 1): for each anchor, softmax
//! cross-entropy over its cosine similarity / τ to every positive in the batch (its own is the
//! label) and to the hard negatives, which are extra columns shared by the whole batch. The
//! optional symmetric direction adds the positives-to-anchors loss and averages the two
//! (sentence-transformers' `MultipleNegativesSymmetricRankingLoss`).

use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};
// Rows scaled to unit length: the model's own normaliser.
use st5_core::ops::l2_normalize as unit;

/// The loss's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContrastiveLoss {
    /// τ; the paper uses 0.01.
    pub temperature: f32,
    /// Also score each positive against all anchors, and average the two directions.
    pub symmetric: bool,
}

impl Default for ContrastiveLoss {
    fn default() -> Self {
        Self { temperature: 0.01, symmetric: false }
    }
}

/// Mean cross-entropy of `scores` `[b, c]` with the label of row `i` in column `i`.
fn diagonal_cross_entropy(scores: Tensor<2>) -> Tensor<1> {
    let b = scores.dims()[0];
    let labels = Tensor::<1, Int>::arange(0..b as i64, &scores.device()).reshape([b, 1]);
    log_softmax(scores, 1).gather(1, labels).mean().neg()
}

impl ContrastiveLoss {
    /// `anchors` `[b, d]`, `positives` `[b, d]` (row `i` pairs with anchor `i`) and optional
    /// hard `negatives` `[m, d]` → the scalar loss `[1]`. Embeddings need not be normalised.
    pub fn forward(
        &self,
        anchors: Tensor<2>,
        positives: Tensor<2>,
        negatives: Option<Tensor<2>>,
    ) -> Tensor<1> {
        let (a, p) = (unit(anchors), unit(positives));
        let candidates = match negatives {
            Some(n) => Tensor::cat(vec![p.clone(), unit(n)], 0),
            None => p.clone(),
        };
        let scale = 1.0 / self.temperature;
        let forward =
            diagonal_cross_entropy(a.clone().matmul(candidates.transpose()).mul_scalar(scale));
        if !self.symmetric {
            return forward;
        }
        let backward = diagonal_cross_entropy(p.matmul(a.transpose()).mul_scalar(scale));
        forward.add(backward).div_scalar(2.0)
    }
}
