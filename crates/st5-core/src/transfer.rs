//! Transfers between the host and the device, below the model: token ids padded ([`upload_ids`])
//! or packed ([`upload_packed`]) and uploaded, which `SentenceModel::embed_ids` runs for every
//! caller of the model on token ids (the embedder, the trainer's step and its dev evaluation),
//! and every result that comes
//! back to the host (embeddings, scores, losses, index codes, saved weights) read back by
//! [`to_host`]. It imports nothing of the model, so the int8 weights and the index read back
//! through it without depending on the model.

use burn::tensor::{Device, Element, Int, Tensor, TensorData};

use crate::batch::{Packing, pad};
use crate::error::{Error, Result};
use crate::tokenizer::PAD_ID;

/// Pads `seqs` on the right to the longest and uploads ids `[batch, seq]` and mask
/// `[batch, seq]` (1.0 token, 0.0 padding) to `device`.
pub fn upload_ids(seqs: &[&[u32]], device: &Device) -> (Tensor<2, Int>, Tensor<2>) {
    let b = pad(seqs, PAD_ID);
    let ids = Tensor::<2, Int>::from_data(TensorData::new(b.ids, [b.batch, b.seq]), device);
    let mask = Tensor::<2>::from_data(TensorData::new(b.mask, [b.batch, b.seq]), device);
    (ids, mask)
}

/// Packs `seqs` without padding ([`Packing`]) and uploads each run's ids `[count, len]`.
pub fn upload_packed(seqs: &[&[u32]], device: &Device) -> (Packing, Vec<Tensor<2, Int>>) {
    let lengths: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
    let packing = Packing::new(&lengths);
    let mut next = packing.order.iter();
    let runs = packing
        .runs
        .iter()
        .map(|run| {
            let ids: Vec<i32> = next
                .by_ref()
                .take(run.count)
                .flat_map(|&i| seqs[i].iter().map(|&t| t as i32))
                .collect();
            Tensor::from_data(TensorData::new(ids, [run.count, run.len]), device)
        })
        .collect();
    (packing, runs)
}

/// The values of a tensor read back to the host, as f32 whatever the device's float type.
/// Takes the result of `try_into_data()` or `into_data_async().await`, so the synchronous and
/// the browser's asynchronous read-backs share one error path.
pub fn to_host<E: std::fmt::Debug>(data: std::result::Result<TensorData, E>) -> Result<Vec<f32>> {
    to_host_as::<f32, E>(data)
}

/// As [`to_host`], as `T` (an index's packed code words read back as `i32`).
pub fn to_host_as<T: Element, E: std::fmt::Debug>(
    data: std::result::Result<TensorData, E>,
) -> Result<Vec<T>> {
    let data = data.map_err(|e| Error::Readback(format!("{e:?}")))?;
    data.convert::<T>().try_into_vec::<T>().map_err(|e| Error::Readback(format!("{e:?}")))
}

/// The single value of a one-element tensor (a loss, a norm), NaN when it cannot be read.
pub fn scalar<const D: usize>(t: Tensor<D>) -> f32 {
    to_host(t.try_into_data()).ok().and_then(|v| v.first().copied()).unwrap_or(f32::NAN)
}
