//! One gradient computation of the dual encoder: anchors, positives and hard negatives all go
//! through the same (shared-weight) model. Plain: one forward and backward over the whole
//! batch. GradCache (Gao et al. 2021, <https://arxiv.org/abs/2101.06983>): embed every text in
//! chunks without a graph, take the loss's gradient with respect to the embeddings, then
//! re-embed each chunk with a graph and back-propagate `sum(embedding · cached gradient)`, so
//! the activation memory is one chunk's whatever the batch size. Both give the same gradients.

use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor, TensorData};
use st5_core::SentenceT5;
use st5_core::host::{embed_ids, scalar};

use crate::loss::ContrastiveLoss;

/// Token ids of one batch: `anchors[i]` pairs with `positives[i]`; `negatives` (empty, or one
/// per pair) are the hard negatives, shared by the batch as extra columns.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub anchors: Vec<Vec<u32>>,
    pub positives: Vec<Vec<u32>>,
    pub negatives: Vec<Vec<u32>>,
}

impl Batch {
    /// Every sequence in the order anchors, positives, negatives.
    fn all(&self) -> Vec<&[u32]> {
        self.anchors
            .iter()
            .chain(&self.positives)
            .chain(&self.negatives)
            .map(Vec::as_slice)
            .collect()
    }
    pub fn len(&self) -> usize {
        self.anchors.len()
    }
    pub fn is_empty(&self) -> bool {
        self.anchors.is_empty()
    }
}

/// The loss on embeddings of all texts `[2b or 3b, dim]` in [`Batch::all`] order.
fn loss_of(loss: &ContrastiveLoss, emb: Tensor<2>, b: usize, negatives: bool) -> Tensor<1> {
    let a = emb.clone().slice([0..b]);
    let p = emb.clone().slice([b..2 * b]);
    let n = negatives.then(|| emb.slice([2 * b..3 * b]));
    loss.forward(a, p, n)
}

/// The batch's loss and the gradients of every parameter of `model`, which lives on
/// `base.autodiff()`. `chunk`: GradCache with this many texts per forward; `None`: plain.
pub fn gradients(
    model: &SentenceT5,
    batch: &Batch,
    loss: &ContrastiveLoss,
    chunk: Option<usize>,
    base: &Device,
) -> (f32, GradientsParams) {
    let device = &base.clone().autodiff();
    let all = batch.all();
    let (b, negatives) = (batch.len(), !batch.negatives.is_empty());
    let Some(chunk) = chunk.filter(|&c| c < all.len()) else {
        let value = loss_of(loss, embed_ids(model, &all, device), b, negatives);
        let grads = GradientsParams::from_grads(value.backward(), model);
        return (scalar(value), grads);
    };
    // 1. Embeddings without a graph, chunk by chunk, on the inner (plain) device.
    let frozen = model.valid();
    let pieces: Vec<Tensor<2>> = all.chunks(chunk).map(|c| embed_ids(&frozen, c, base)).collect();
    // 2. The loss and its gradient with respect to the embeddings.
    let emb = Tensor::cat(pieces, 0).autodiff().require_grad();
    let value = loss_of(loss, emb.clone(), b, negatives);
    let cached = emb.grad(&value.backward()).expect("the embeddings require a gradient");
    // 3. Each chunk again with a graph; its parameters' gradient is that of sum(e · cached).
    let mut acc = GradientsAccumulator::<SentenceT5>::new();
    for (i, c) in all.chunks(chunk).enumerate() {
        let e = embed_ids(model, c, device);
        let g = cached.clone().slice([i * chunk..i * chunk + c.len()]).autodiff();
        let surrogate = e.mul(g).sum();
        acc.accumulate(model, GradientsParams::from_grads(surrogate.backward(), model));
    }
    (scalar(value), acc.grads())
}

/// Distillation (Reimers & Gurevych 2020, §3): the mean squared error between the model's
/// embeddings of `texts` and the teacher's `targets` (`[texts.len(), dim]` row-major), and the
/// gradients of every parameter.
pub fn distill_gradients(
    model: &SentenceT5,
    texts: &[Vec<u32>],
    targets: &[f32],
    base: &Device,
) -> (f32, GradientsParams) {
    let device = &base.clone().autodiff();
    let seqs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
    let emb = embed_ids(model, &seqs, device);
    let [b, dim] = emb.dims();
    let target = Tensor::<2>::from_data(TensorData::new(targets.to_vec(), [b, dim]), device);
    let value = emb.sub(target).square().mean();
    let grads = GradientsParams::from_grads(value.backward(), model);
    (scalar(value), grads)
}
