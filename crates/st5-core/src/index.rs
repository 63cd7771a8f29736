//! [`VectorIndex`]: exact (brute-force) top-k search over unit vectors kept on the device.
//! Vectors live in row shards that each fit one device buffer (WebGPU caps a binding at
//! `maxStorageBufferBindingSize`). A query is one matrix product per shard, then a block-max
//! selection on the device: the scores `[q, rows]` are cut into blocks of [`BLOCK`], each
//! block's maximum is reduced on the device, and only the blocks that can hold a top-k entry
//! (those whose maximum reaches the k-th largest block maximum) are gathered and read back:
//! `k × BLOCK` scores instead of `rows`, in three dispatches whatever `k`. It is exact: an entry
//! outside those blocks has k blocks' maxima strictly above it. The final order (score
//! descending, ties to the lower id) is applied to the candidates on the host. The same code
//! runs on the CPU (flex), giving the same ids.

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::host::to_host;

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
    /// Rows per shard: the most that fit one buffer, for the vectors and for a shard's scores.
    shard_rows: usize,
    /// `[rows, dim]` each; every shard but the last is full.
    shards: Vec<Tensor<2>>,
    len: usize,
    /// A cubecl (GPU) device rather than the flex CPU backend.
    gpu: bool,
}

/// Scores per block of the device-side selection.
pub const BLOCK: usize = 256;

/// A shard's scores, still on the device: all of them (a small shard), or blocked with each
/// block's maximum.
// Tensors are handles, so both variants are small in memory that matters; one lives per shard
// per query, on the stack.
#[allow(clippy::large_enum_variant)]
enum Selected {
    /// `[q, rows]`.
    All { scores: Tensor<2>, offset: usize },
    /// `blocks`: `[q, nb, BLOCK]` padded with -inf; `maxima`: `[q, nb]`.
    Blocks { blocks: Tensor<3>, maxima: Tensor<2>, offset: usize, rows: usize },
}

/// Reads a search's selections back with `$read` (sync or async) and merges them; one body for
/// [`VectorIndex::search`] and [`VectorIndex::search_async`].
macro_rules! read_selection {
    ($index:expr, $queries:expr, $k:expr, |$t:ident| $read:expr) => {{
        let q = $index.check_queries($queries)?;
        let mut candidates = Vec::new();
        for sel in $index.select($queries, q, $k) {
            match sel {
                Selected::All { scores, offset } => {
                    let $t = scores;
                    let scores = to_host($read)?;
                    let rows = scores.len() / q;
                    candidates.push(Candidates {
                        scores,
                        ids: (0..rows).map(|j| offset + j).collect(),
                        rows,
                    });
                }
                Selected::Blocks { blocks, maxima, offset, rows } => {
                    let $t = maxima;
                    let maxima = to_host($read)?;
                    let picked = candidate_blocks(&maxima, q, $k);
                    let at = Tensor::<1, Int>::from_data(
                        TensorData::new(
                            picked.iter().map(|&b| b as i64).collect::<Vec<_>>(),
                            [picked.len()],
                        ),
                        $index.device(),
                    );
                    let $t = blocks.select(1, at); // [q, picked, BLOCK]
                    let scores = to_host($read)?;
                    let ids = picked
                        .iter()
                        .flat_map(|&b| (0..BLOCK).map(move |j| b * BLOCK + j))
                        .map(|local| if local < rows { offset + local } else { usize::MAX })
                        .collect::<Vec<_>>();
                    candidates.push(Candidates { scores, rows: ids.len(), ids });
                }
            }
        }
        Ok(merge(&candidates, q, $k))
    }};
}

impl VectorIndex {
    /// An empty index. `max_buffer_bytes` is the device's largest buffer (`None`: no limit).
    pub fn new(dim: usize, device: &Device, max_buffer_bytes: Option<u64>) -> Result<Self> {
        if dim == 0 {
            return Err(Error::Invalid("index dimension must be at least 1".into()));
        }
        let row_bytes = 4 * dim as u64;
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
        Ok(Self { device: device.clone(), dim, shard_rows, shards: Vec::new(), len: 0, gpu })
    }

    /// Caps the rows per shard below what the buffer limit allows (to test sharding cheaply).
    pub fn with_shard_rows(mut self, rows: usize) -> Self {
        self.shard_rows = self.shard_rows.min(rows.max(1));
        self
    }

    pub fn dim(&self) -> usize {
        self.dim
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
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Appends row-major vectors (`vectors.len()` a multiple of `dim`); they get the next ids.
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
        let mut rest = vectors;
        while !rest.is_empty() {
            let last_rows = self.shards.last().map_or(self.shard_rows, |s| s.dims()[0]);
            let room = if last_rows < self.shard_rows {
                self.shard_rows - last_rows
            } else {
                self.shard_rows
            };
            let take = room.min(rest.len() / self.dim);
            let (head, tail) = rest.split_at(take * self.dim);
            let new = Tensor::<2>::from_data(
                TensorData::new(head.to_vec(), [take, self.dim]),
                &self.device,
            );
            if last_rows < self.shard_rows {
                let last = self.shards.pop().expect("a partial shard");
                self.shards.push(Tensor::cat(vec![last, new], 0));
            } else {
                self.shards.push(new);
            }
            self.len += take;
            rest = tail;
        }
        Ok(())
    }

    /// Frees what cubecl's pools keep for reuse on this index's device: after a batch of adds,
    /// not after each. Each add leaves the shard's old buffer, and the scores of searches at the
    /// old length, free in the pools at sizes that never come back: a growing index held ~5 more
    /// GPU buffers per add-and-search round (tests/browser/memory.test.mjs) until released. The
    /// pools are the device's, so this also empties the model's scratch buffers, which is why a
    /// caller that embeds and adds in a loop calls it once, at the end. A no-op on the CPU.
    pub fn release_pooled_memory(&self) {
        if self.gpu {
            self.device.memory_cleanup();
        }
    }

    /// The `k` best vectors for each query (row-major `[q, dim]`), best first, ties to the lower
    /// id; fewer than `k` when the index holds fewer.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        read_selection!(self, queries, k, |t| t.try_into_data())
    }

    /// As [`search`](Self::search), reading results back asynchronously (the browser's way).
    pub async fn search_async(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        read_selection!(self, queries, k, |t| t.into_data_async().await)
    }

    /// Every vector, row-major, in id order (for saving the index).
    pub async fn vectors_async(&self) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(self.len * self.dim);
        for shard in &self.shards {
            out.extend(to_host(shard.clone().into_data_async().await)?);
        }
        Ok(out)
    }

    fn check_queries(&self, queries: &[f32]) -> Result<usize> {
        if !queries.len().is_multiple_of(self.dim) {
            return Err(Error::Invalid(format!(
                "{} query values are not whole vectors of width {}",
                queries.len(),
                self.dim
            )));
        }
        Ok(queries.len() / self.dim)
    }

    /// Per shard, the scores and (past `k` blocks' worth of rows) their block maxima.
    fn select(&self, queries: &[f32], q: usize, k: usize) -> Vec<Selected> {
        if q == 0 || k == 0 {
            return Vec::new();
        }
        let query =
            Tensor::<2>::from_data(TensorData::new(queries.to_vec(), [q, self.dim]), &self.device);
        let mut offset = 0;
        let mut out = Vec::new();
        for shard in &self.shards {
            let rows = shard.dims()[0];
            // One query on a GPU is a matrix-vector product: as a broadcast multiply and a row
            // sum it streams the shard once, where the matmul kernel pads the single row to a
            // whole tile (2.1× faster on WebGPU for 100k × 768). The CPU's gemm is faster as is.
            let scores = if q == 1 && self.gpu {
                shard
                    .clone()
                    .mul(query.clone().expand([rows, self.dim]))
                    .sum_dim(1)
                    .reshape([1, rows])
            } else {
                query.clone().matmul(shard.clone().transpose())
            }; // [q, rows]
            let nb = rows.div_ceil(BLOCK);
            if nb <= k {
                out.push(Selected::All { scores, offset });
            } else {
                let pad = nb * BLOCK - rows;
                let padded = if pad == 0 {
                    scores
                } else {
                    Tensor::cat(
                        vec![scores, Tensor::full([q, pad], f32::NEG_INFINITY, &self.device)],
                        1,
                    )
                };
                let blocks = padded.reshape([q, nb, BLOCK]);
                let maxima = blocks.clone().max_dim(2).reshape([q, nb]);
                out.push(Selected::Blocks { blocks, maxima, offset, rows });
            }
            offset += rows;
        }
        out
    }
}

/// The blocks that can hold a top-`k` entry of some query: for each query, those whose maximum
/// is at least its k-th largest block maximum (ties kept). `maxima` is `[q, nb]`.
fn candidate_blocks(maxima: &[f32], q: usize, k: usize) -> Vec<usize> {
    let nb = maxima.len() / q;
    let mut picked = std::collections::BTreeSet::new();
    for row in maxima.chunks(nb) {
        let mut sorted = row.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k.min(nb) - 1];
        picked.extend((0..nb).filter(|&b| row[b] >= kth));
    }
    picked.into_iter().collect()
}

/// A shard's candidates read back: `[q, rows]` scores and the global id of each column
/// (`usize::MAX` for padding).
struct Candidates {
    scores: Vec<f32>,
    ids: Vec<usize>,
    rows: usize,
}

/// Merges the candidates into the best `k` per query: score descending, ties to the lower id.
fn merge(parts: &[Candidates], q: usize, k: usize) -> Vec<Vec<Hit>> {
    (0..q)
        .map(|qi| {
            let mut hits: Vec<Hit> = parts
                .iter()
                .flat_map(|p| {
                    (0..p.rows)
                        .filter(|&j| p.ids[j] != usize::MAX)
                        .map(move |j| Hit { id: p.ids[j] as u32, score: p.scores[qi * p.rows + j] })
                })
                .collect();
            rank(&mut hits, k);
            hits
        })
        .collect()
}

/// Orders hits best first (score descending, ties to the lower id) and keeps the first `k`.
pub fn rank(hits: &mut Vec<Hit>, k: usize) {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    hits.truncate(k);
}

/// The exact answer on the host, one dot product per row: the reference the index is tested
/// against.
pub fn brute_force(vectors: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = vectors
        .chunks(dim)
        .enumerate()
        .map(|(i, v)| Hit { id: i as u32, score: v.iter().zip(query).map(|(a, b)| a * b).sum() })
        .collect();
    rank(&mut hits, k);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_matches_brute_force_across_shards_ties_and_large_k() {
        let device = Device::flex();
        let dim = 4;
        // Rows 1, 4 and 6 are equal (a three-way tie); row 7 is the negated query.
        let vectors: Vec<f32> = [
            [0.5, 0.5, 0.5, 0.5],
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [1.0, 0.0, 0.0, 0.0],
            [0.6, 0.8, 0.0, 0.0],
            [1.0, 0.0, 0.0, 0.0],
            [-1.0, 0.0, 0.0, 0.0],
        ]
        .concat();
        let query = [1.0, 0.0, 0.0, 0.0];
        // (shard rows, k)
        let cases = [(8, 3), (3, 3), (2, 5), (1, 8), (3, 20), (8, 0), (5, 1)];
        for (rows, k) in cases {
            let mut index = VectorIndex::new(dim, &device, None).unwrap().with_shard_rows(rows);
            index.add(&vectors[..12]).unwrap(); // added in two parts, filling a partial shard
            index.add(&vectors[12..]).unwrap();
            assert_eq!((index.len(), index.shards()), (8, 8usize.div_ceil(rows)), "rows {rows}");
            let got = index.search(&query, k).unwrap();
            let want = brute_force(&vectors, dim, &query, k);
            assert_eq!(
                got[0].iter().map(|h| h.id).collect::<Vec<_>>(),
                want.iter().map(|h| h.id).collect::<Vec<_>>(),
                "rows {rows} k {k}"
            );
            for (g, w) in got[0].iter().zip(&want) {
                assert!((g.score - w.score).abs() <= 1e-6, "rows {rows} k {k}: {g:?} vs {w:?}");
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let device = Device::flex();
        let mut index = VectorIndex::new(3, &device, None).unwrap();
        assert!(index.add(&[1.0, 2.0]).is_err());
        assert!(index.add(&[1.0, f32::NAN, 0.0]).is_err());
        assert!(index.search(&[1.0], 1).is_err());
        assert!(index.search(&[1.0, 0.0, 0.0], 3).unwrap()[0].is_empty());
        assert!(matches!(VectorIndex::new(3, &device, Some(8)), Err(Error::Limit { .. })));
        assert!(VectorIndex::new(0, &device, None).is_err());
    }
}
