//! Sharding: an index's rows in shards that each fit one device buffer (WebGPU caps a binding
//! at `maxStorageBufferBindingSize`), f32 vectors or packed codes, filled in id order; and the
//! read-back of every shard for saving.

use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::VectorIndex;
use crate::error::{Error, Result};
use crate::transfer::{to_host, to_host_as};
use crate::vector_codes::{Codes, Quantize};

/// One buffer's worth of rows.
// Tensors are handles (as for `select.rs`'s `Selected`), and an index holds a few shards.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(super) enum Shard {
    /// f32 vectors `[rows, dim]`.
    Dense(Tensor<2>),
    /// Packed codes `[rows, W]` and their scales `[1, rows]`, on a GPU.
    Packed { words: Tensor<2, Int>, scales: Tensor<2> },
    /// Packed codes in host memory, for the CPU: flex has no fused unpack, and unpacking as
    /// tensor ops made an int8 query 15× slower than f32 (100k × 384: 105 ms vs 7 ms), where
    /// [`Packing::scan`](crate::vector_codes::Packing::scan) reads each word once.
    /// Shared, so that the clone a browser search takes costs nothing.
    Host { codes: Arc<Codes>, rows: usize },
}

impl Shard {
    pub(super) fn rows(&self) -> usize {
        match self {
            Shard::Dense(t) => t.dims()[0],
            Shard::Packed { words, .. } => words.dims()[0],
            Shard::Host { rows, .. } => *rows,
        }
    }

    /// `self` followed by `other` (of the same kind).
    fn cat(self, other: Shard) -> Shard {
        match (self, other) {
            (Shard::Dense(a), Shard::Dense(b)) => Shard::Dense(Tensor::cat(vec![a, b], 0)),
            (Shard::Packed { words: w1, scales: s1 }, Shard::Packed { words: w2, scales: s2 }) => {
                Shard::Packed {
                    words: Tensor::cat(vec![w1, w2], 0),
                    scales: Tensor::cat(vec![s1, s2], 1),
                }
            }
            (Shard::Host { codes: c1, rows: r1 }, Shard::Host { codes: c2, rows: r2 }) => {
                // Exact reservations: a growing shard holds its codes, not twice their size.
                let mut codes = Arc::unwrap_or_clone(c1);
                codes.words.reserve_exact(c2.words.len());
                codes.words.extend_from_slice(&c2.words);
                codes.scales.reserve_exact(c2.scales.len());
                codes.scales.extend_from_slice(&c2.scales);
                Shard::Host { codes: Arc::new(codes), rows: r1 + r2 }
            }
            _ => unreachable!("an index holds one kind of shard"),
        }
    }
}

impl VectorIndex {
    /// Appends row-major vectors (`vectors.len()` a multiple of `dim`); they get the next ids. A
    /// quantized index encodes them and keeps only the codes.
    pub fn add(&mut self, vectors: &[f32]) -> Result<()> {
        if !vectors.len().is_multiple_of(self.dim) {
            return Err(Error::Invalid(format!(
                "{} values are not whole vectors of width {}",
                vectors.len(),
                self.dim
            )));
        }
        if vectors.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("index vectors must be finite".into()));
        }
        match self.quantize.packing() {
            None => {
                let dim = self.dim;
                self.append(vectors.len() / dim, |rows, device| {
                    let head = vectors[rows.start * dim..rows.end * dim].to_vec();
                    Shard::Dense(Tensor::from_data(
                        TensorData::new(head, [rows.len(), dim]),
                        device,
                    ))
                })
            }
            Some(p) => self.add_codes(&p.encode(self.dim, vectors)),
        }
    }

    /// Appends vectors already encoded for this index's quantization (a saved index).
    pub fn add_codes(&mut self, codes: &Codes) -> Result<()> {
        let Some(p) = self.quantize.packing() else {
            return Err(Error::Invalid("an f32 index takes vectors, not codes".into()));
        };
        let w = p.words(self.dim);
        let n = codes.scales.len();
        if codes.words.len() != n * w {
            return Err(Error::Invalid(format!(
                "{} code words for {n} vectors; {} expects {w} words a vector of width {}",
                codes.words.len(),
                self.quantize,
                self.dim
            )));
        }
        if codes.scales.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return Err(Error::Invalid("index scales must be finite and non-negative".into()));
        }
        let gpu = self.gpu;
        self.append(n, |rows, device| {
            let words = codes.words[rows.start * w..rows.end * w].to_vec();
            let scales = codes.scales[rows.clone()].to_vec();
            if !gpu {
                return Shard::Host { codes: Arc::new(Codes { words, scales }), rows: rows.len() };
            }
            Shard::Packed {
                words: Tensor::from_data(TensorData::new(words, [rows.len(), w]), device),
                scales: Tensor::from_data(TensorData::new(scales, [1, rows.len()]), device),
            }
        })
    }

    /// Appends `n` rows, uploading each run that fits the last shard or a new one with `make`.
    fn append(
        &mut self,
        n: usize,
        make: impl Fn(std::ops::Range<usize>, &Device) -> Shard,
    ) -> Result<()> {
        let mut at = 0;
        while at < n {
            let last_rows = self.shards.last().map_or(self.shard_rows, Shard::rows);
            let room = if last_rows < self.shard_rows {
                self.shard_rows - last_rows
            } else {
                self.shard_rows
            };
            let take = room.min(n - at);
            let new = make(at..at + take, &self.device);
            if last_rows < self.shard_rows {
                let last = self.shards.pop().expect("a partial shard");
                self.shards.push(last.cat(new));
            } else {
                self.shards.push(new);
            }
            self.len += take;
            at += take;
        }
        Ok(())
    }

    /// Every vector, row-major, in id order (for saving an f32 index).
    pub async fn vectors_async(&self) -> Result<Vec<f32>> {
        if self.quantize != Quantize::None {
            return Err(Error::Invalid(format!(
                "a {} index keeps codes, not vectors",
                self.quantize
            )));
        }
        let mut out = Vec::with_capacity(self.len * self.dim);
        for shard in &self.shards {
            if let Shard::Dense(t) = shard {
                out.extend(to_host(t.clone().into_data_async().await)?);
            }
        }
        Ok(out)
    }

    /// Every code, in id order (for saving a quantized index).
    pub async fn codes_async(&self) -> Result<Codes> {
        if self.quantize == Quantize::None {
            return Err(Error::Invalid("an f32 index keeps vectors, not codes".into()));
        }
        let mut codes = Codes::default();
        for shard in &self.shards {
            let (words, scales) = match shard {
                Shard::Packed { words, scales } => (words, scales),
                Shard::Host { codes: c, .. } => {
                    codes.words.extend_from_slice(&c.words);
                    codes.scales.extend_from_slice(&c.scales);
                    continue;
                }
                Shard::Dense(_) => {
                    return Err(Error::Invalid("an f32 index keeps vectors, not codes".into()));
                }
            };
            codes.words.extend(to_host_as::<i32, _>(words.clone().into_data_async().await)?);
            codes.scales.extend(to_host(scales.clone().into_data_async().await)?);
        }
        Ok(codes)
    }
}
