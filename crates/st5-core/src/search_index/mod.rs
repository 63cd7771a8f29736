//! [`VectorIndex`]: top-k search over vectors kept on the device, exact over f32 or over int8 /
//! binary codes (`st5_format::vector_codes`) followed by exact rescoring of the candidates.
//! One file per job:
//! - this one: the index, its limits and what it holds;
//! - `shard.rs`, sharding: vectors (or codes) added in row shards that each fit one device
//!   buffer, and read back for saving;
//! - `score.rs`, device scoring: a shard's scores for a group of queries, f32 or unpacked from
//!   int8 / binary codes;
//! - `select.rs`, selection: [`search`](VectorIndex::search), block-max top-k on the device and
//!   the read-back of the candidates;
//! - `rank.rs`, ranking: merging the shards' candidates, [`rank`], [`rescore`] and
//!   [`brute_force`], the host reference.
//!
//! Vectors live in row shards that each fit one device buffer (WebGPU caps a binding at
//! `maxStorageBufferBindingSize`). A query is one matrix product per shard, then a block-max
//! selection on the device: the scores `[q, rows]` are cut into blocks of [`BLOCK`], each
//! block's maximum is reduced on the device, and only the blocks that can hold a top-k entry
//! (those whose maximum reaches the k-th largest block maximum) are gathered and read back:
//! `k × BLOCK` scores instead of `rows`, in three dispatches whatever `k`. It is exact: an entry
//! outside those blocks has k blocks' maxima strictly above it. The final order (score
//! descending, ties to the lower id) is applied to the candidates on the host. An f32 index runs
//! the same code on the CPU (flex), giving the same ids. Queries are searched in groups small
//! enough that a shard's scores `[group, rows]` fit one buffer too.
//!
//! A quantized shard holds the packed 32-bit words `[rows, W]` and the scales. Its scores are
//! computed in slices of rows: one broadcast shift and mask unpack a slice to `[rows, planes·W]`
//! values in dimension order, one matrix product with the padded query gives the raw sums, and
//! the affine decode (`scale · (a·raw + c·Σq)`) is applied to the scores, not the vectors. The
//! searchable part thus takes 1 byte (int8) or 1 bit (binary) a dimension on the device; the
//! unpacked slice is transient. The scores then go through the same selection as f32 ones, and
//! [`rescore`] orders the candidates by their exact f32 dot products. On the CPU a quantized
//! index keeps its codes in host memory instead and scans them with
//! [`Packing::scan`](crate::vector_codes::Packing::scan) (its own summation order, so its
//! candidate scores may differ from a GPU's in the last bits; the rescored scores do not).

use burn::tensor::Device;

use crate::error::{Error, Result};
use crate::vector_codes::Quantize;

mod rank;
mod score;
mod select;
mod shard;
#[cfg(test)]
mod tests;

pub use rank::{brute_force, rank, rescore};
pub use select::BLOCK;
use shard::Shard;

/// One search result: the vector's id (its insertion order) and its dot-product score (the
/// cosine similarity for unit vectors).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub id: u32,
    pub score: f32,
}

/// Vectors of width `dim` on one device, searched by dot product. Cloning shares the device
/// memory of the shards.
#[derive(Clone)]
pub struct VectorIndex {
    device: Device,
    dim: usize,
    quantize: Quantize,
    /// Rows per shard: the most whose vectors (or codes) fit one buffer.
    shard_rows: usize,
    /// The device's largest buffer: bounds the queries a search scores at once (`group`).
    limit: u64,
    /// Every shard but the last is full.
    shards: Vec<Shard>,
    len: usize,
    /// A cubecl (GPU) device rather than the flex CPU backend.
    gpu: bool,
}

impl VectorIndex {
    /// An empty f32 index. `max_buffer_bytes` is the device's largest buffer (`None`: no limit).
    pub fn new(dim: usize, device: &Device, max_buffer_bytes: Option<u64>) -> Result<Self> {
        Self::with_quantize(dim, device, max_buffer_bytes, Quantize::None)
    }

    /// An empty index that stores its vectors as `quantize` asks.
    pub fn with_quantize(
        dim: usize,
        device: &Device,
        max_buffer_bytes: Option<u64>,
        quantize: Quantize,
    ) -> Result<Self> {
        if dim == 0 {
            return Err(Error::Invalid("index dimension must be at least 1".into()));
        }
        let row_bytes = (quantize.packing().map_or(dim, |p| p.words(dim)) as u64)
            .checked_mul(4)
            .ok_or_else(|| Error::Invalid(format!("index dimension {dim} is too large")))?;
        let limit = max_buffer_bytes.unwrap_or(u64::MAX);
        if limit < row_bytes {
            return Err(Error::Limit {
                what: "one index vector".into(),
                bytes: row_bytes,
                limit,
                hint: "",
            });
        }
        // Ids are selected as f32 (exact below 2^24), which bounds a shard's rows too.
        let shard_rows = usize::try_from(limit / row_bytes).unwrap_or(usize::MAX).min(1 << 24);
        let gpu = crate::device::is_gpu(device);
        Ok(Self {
            device: device.clone(),
            dim,
            quantize,
            shard_rows,
            limit,
            shards: Vec::new(),
            len: 0,
            gpu,
        })
    }

    /// Caps the rows per shard below what the buffer limit allows (to test sharding cheaply).
    pub fn with_shard_rows(mut self, rows: usize) -> Self {
        self.shard_rows = self.shard_rows.min(rows.max(1));
        self
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn quantize(&self) -> Quantize {
        self.quantize
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn shards(&self) -> usize {
        self.shards.len()
    }
    /// Bytes the searchable part holds: the shards' buffers (device or host), by their dtypes
    /// and capacities.
    pub fn bytes(&self) -> u64 {
        let tensor = |dims: usize, size: usize| (dims * size) as u64;
        self.shards
            .iter()
            .map(|s| match s {
                Shard::Dense(t) => tensor(t.shape().num_elements(), t.dtype().size()),
                Shard::Packed { words, scales } => {
                    tensor(words.shape().num_elements(), words.dtype().size())
                        + tensor(scales.shape().num_elements(), scales.dtype().size())
                }
                Shard::Host { codes, .. } => {
                    4 * (codes.words.capacity() + codes.scales.capacity()) as u64
                }
            })
            .sum()
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Frees what cubecl's pools keep for reuse on this index's device: after a batch of adds,
    /// not after each. Each add leaves the shard's old buffer, and the scores of searches at the
    /// old length, free in the pools at sizes that never come back: a growing index held ~5 more
    /// GPU buffers per add-and-search round (tests/browser/memory.test.mjs) until released. The
    /// pools are the device's, so this also empties the model's scratch buffers, which is why a
    /// caller that embeds and adds in a loop calls it once, at the end. A no-op on the CPU.
    pub fn release_pooled_memory(&self) {
        crate::device::release_pooled_memory(&self.device);
    }
}
