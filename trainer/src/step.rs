//! One gradient computation of the dual encoder: anchors, positives and hard negatives all go
//! through the same (shared-weight) model. Plain: one forward and backward over the whole
//! batch. GradCache (Gao et al. 2021, <https://arxiv.org/abs/2101.06983>): embed every text in
//! chunks without a graph, take the loss's gradient with respect to the embeddings, then
//! re-embed each chunk with a graph and back-propagate `sum(embedding · cached gradient)`, so
//! the activation memory is one chunk's whatever the batch size. Both give the same gradients.

use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor, TensorData};
use st5_core::SentenceModel;
use st5_core::transfer::scalar;
// Rows scaled to unit length: the model's own normaliser, as in the contrastive loss.
use st5_core::ops::l2_normalize as unit;

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
    model: &SentenceModel,
    batch: &Batch,
    loss: &ContrastiveLoss,
    chunk: Option<usize>,
    base: &Device,
) -> (f32, GradientsParams) {
    let device = &base.clone().autodiff();
    let all = batch.all();
    let (b, negatives) = (batch.len(), !batch.negatives.is_empty());
    let Some(chunk) = chunk.filter(|&c| c < all.len()) else {
        let value = loss_of(loss, model.embed_ids(&all, device), b, negatives);
        let grads = GradientsParams::from_grads(value.backward(), model);
        return (scalar(value), grads);
    };
    // 1. Embeddings without a graph, chunk by chunk, on the inner (plain) device.
    let frozen = model.valid();
    let pieces: Vec<Tensor<2>> = all.chunks(chunk).map(|c| frozen.embed_ids(c, base)).collect();
    // 2. The loss and its gradient with respect to the embeddings.
    let emb = Tensor::cat(pieces, 0).autodiff().require_grad();
    let value = loss_of(loss, emb.clone(), b, negatives);
    let cached = emb.grad(&value.backward()).expect("the embeddings require a gradient");
    // 3. Each chunk again with a graph.
    (scalar(value), backprop_chunks(model, &all, &cached, chunk, device))
}

/// GradCache's second half: each chunk of `all` embedded again with a graph on `device` (an
/// autodiff device), its parameters' gradient that of `sum(e · cached rows)`; `cached` holds the
/// loss's gradient for each text of `all`, in order.
fn backprop_chunks(
    model: &SentenceModel,
    all: &[&[u32]],
    cached: &Tensor<2>,
    chunk: usize,
    device: &Device,
) -> GradientsParams {
    let mut acc = GradientsAccumulator::<SentenceModel>::new();
    for (i, c) in all.chunks(chunk).enumerate() {
        let e = model.embed_ids(c, device);
        let g = cached.clone().slice([i * chunk..i * chunk + c.len()]).autodiff();
        let surrogate = e.mul(g).sum();
        acc.accumulate(model, GradientsParams::from_grads(surrogate.backward(), model));
    }
    acc.grads()
}

/// Distillation (Reimers & Gurevych 2020, §3): the mean squared error between the model's
/// embeddings of `texts` and the teacher's `targets` (`[texts.len(), dim]` row-major), and the
/// gradients of every parameter. `relational` > 0 adds that weight times the mean squared
/// difference of the two `[b, b]` cosine-similarity matrices over the batch (similarity-preserving
/// distillation, Tung & Mori 2019, <https://arxiv.org/abs/1907.09682>, eq. 4, on sentence
/// embeddings): the student is taught the teacher's similarities, which STS scores, and not only
/// its coordinates.
pub fn distill_gradients(
    model: &SentenceModel,
    texts: &[Vec<u32>],
    targets: &[f32],
    relational: f32,
    base: &Device,
) -> (f32, GradientsParams) {
    let device = &base.clone().autodiff();
    let seqs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
    let emb = model.embed_ids(&seqs, device);
    let [b, dim] = emb.dims();
    let target = Tensor::<2>::from_data(TensorData::new(targets.to_vec(), [b, dim]), device);
    let mut value = emb.clone().sub(target.clone()).square().mean();
    if relational > 0.0 {
        value = value.add(similarity_gap(emb, target).mul_scalar(relational));
    }
    let grads = GradientsParams::from_grads(value.backward(), model);
    (scalar(value), grads)
}

/// The mean squared difference between the cosine-similarity matrices `[b, b]` of `student`
/// and `teacher` (`[b, dim]` each): 0 whenever the student's similarities are the teacher's,
/// whatever its coordinates.
fn similarity_gap(student: Tensor<2>, teacher: Tensor<2>) -> Tensor<1> {
    let similarities = |x: Tensor<2>| {
        let u = unit(x);
        u.clone().matmul(u.transpose())
    };
    similarities(student).sub(similarities(teacher)).square().mean()
}

/// The data-parallel contrastive step (dist.rs): `local` is this worker's contiguous slice of
/// the global batch (`workers.size()` slices of `local.len()` pairs, in rank order). Its texts
/// are embedded (in `chunk`s without a graph, or at once with one), all-gathered and put back by
/// role (every worker's anchors, then positives, then negatives), so that the loss sees the whole
/// global batch with labels on the diagonal; the loss's gradient for this worker's own rows then
/// flows back through its encoder: through the graph of that one forward pass, or as GradCache's
/// second half does, chunk by chunk. The parameter gradients returned are this worker's share:
/// their sum over workers is the global batch's gradient.
pub fn gathered_gradients(
    model: &SentenceModel,
    local: &Batch,
    loss: &ContrastiveLoss,
    chunk: Option<usize>,
    base: &Device,
    workers: &crate::dist::Workers,
) -> crate::error::Result<(f32, GradientsParams)> {
    let device = &base.clone().autodiff();
    let all = local.all();
    let (b, negatives) = (local.len(), !local.negatives.is_empty());
    let roles = if negatives { 3 } else { 2 };
    // As in `gradients`: a chunk of the whole batch or more is no chunking.
    let chunk = chunk.filter(|&c| c < all.len());
    if local_negatives_only() {
        // The control run of tests/mpi.rs: each worker's loss over its own slice alone.
        return Ok(gradients(model, local, loss, chunk, base));
    }
    // Without chunks the one forward pass keeps its graph for the backward pass, so the texts
    // are not embedded twice.
    let (mine, graph) = match chunk {
        None => {
            let e = model.embed_ids(&all, device);
            (st5_core::transfer::to_host(e.clone().inner().try_into_data())?, Some(e))
        }
        Some(c) => {
            let frozen = model.valid();
            let mut mine = Vec::new();
            for piece in all.chunks(c) {
                mine.extend(st5_core::transfer::to_host(
                    frozen.embed_ids(piece, base).try_into_data(),
                )?);
            }
            (mine, None)
        }
    };
    let dim = mine.len() / all.len().max(1);
    let gathered = workers.all_gather(&mine);
    // Worker r's rows are [anchors_r; positives_r; negatives_r]: reorder to
    // [anchors_0..; positives_0..; negatives_0..].
    let (n, rows) = (workers.size(), roles * b);
    let mut by_role = Vec::with_capacity(gathered.len());
    for role in 0..roles {
        for r in 0..n {
            let start = (r * rows + role * b) * dim;
            by_role.extend_from_slice(&gathered[start..start + b * dim]);
        }
    }
    let global_b = n * b;
    let emb = Tensor::<2>::from_data(TensorData::new(by_role, [roles * global_b, dim]), base)
        .autodiff()
        .require_grad();
    let value = loss_of(loss, emb.clone(), global_b, negatives);
    let cached = emb.grad(&value.backward()).expect("the embeddings require a gradient");
    // This worker's rows of the gradient, back in its own [anchors; positives; negatives] order.
    let rank = workers.rank();
    let own: Vec<Tensor<2>> = (0..roles)
        .map(|role| {
            cached.clone().slice([role * global_b + rank * b..role * global_b + (rank + 1) * b])
        })
        .collect();
    let own = Tensor::cat(own, 0);
    let grads = match graph {
        Some(e) => GradientsParams::from_grads(e.mul(own.autodiff()).sum().backward(), model),
        None => backprop_chunks(model, &all, &own, chunk.unwrap_or(all.len()), device),
    };
    Ok((scalar(value), grads))
}

/// `ST5_TRAINER_LOCAL_NEGATIVES=1`: a deliberately wrong data-parallel step, each worker's loss
/// over its own slice only (no gather). Only for the control run of tests/mpi.rs, which must then
/// see a difference: proof that the parity test would notice a missing gather.
fn local_negatives_only() -> bool {
    std::env::var_os("ST5_TRAINER_LOCAL_NEGATIVES").is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_gap_sees_similarities_not_coordinates() {
        let device = Device::flex();
        let t = |rows: [[f32; 2]; 2]| {
            Tensor::<2>::from_data(TensorData::new(rows.concat(), [2, 2]), &device)
        };
        let teacher = [[1.0, 0.0], [0.0, 1.0]];
        // (student, gap): same rows; the same rows rotated 90° and scaled, so that every
        // coordinate differs but no similarity does; both rows one direction (cosine 1 where the
        // teacher has 0, in 2 of the 4 entries: (1² + 1²) / 4).
        let cases = [
            ([[1.0, 0.0], [0.0, 1.0]], 0.0),
            ([[0.0, 3.0], [-3.0, 0.0]], 0.0),
            ([[1.0, 1.0], [2.0, 2.0]], 0.5),
        ];
        for (student, want) in cases {
            let got = scalar(similarity_gap(t(student), t(teacher)));
            assert!((got - want).abs() < 1e-6, "{student:?}: {got} vs {want}");
        }
    }
}
