//! [`VectorIndex`]: top-k search over vectors kept on the device, exact over f32 or over int8 /
//! binary codes (`st5_format::vector_codes`) followed by exact rescoring of the candidates.
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
//! index keeps its codes in host memory instead and scans them with [`Packing::scan`] (its own
//! summation order, so its candidate scores may differ from a GPU's in the last bits; the
//! rescored scores do not).

use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::host::to_host;
use crate::vector_codes::{Codes, Packing, Quantize};

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

/// One buffer's worth of rows.
// Tensors are handles (as for `Selected`), and an index holds a few shards.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Shard {
    /// f32 vectors `[rows, dim]`.
    Dense(Tensor<2>),
    /// Packed codes `[rows, W]` and their scales `[1, rows]`, on a GPU.
    Packed { words: Tensor<2, Int>, scales: Tensor<2> },
    /// Packed codes in host memory, for the CPU: flex has no fused unpack, and unpacking as
    /// tensor ops made an int8 query 15× slower than f32 (100k × 384: 105 ms vs 7 ms), where
    /// [`Packing::scan`] reads each word once.
    /// Shared, so that the clone a browser search takes costs nothing.
    Host { codes: Arc<Codes>, rows: usize },
}

impl Shard {
    fn rows(&self) -> usize {
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

/// The queries on the device, in the forms the shards need.
struct Queries {
    /// `[q, dim]`.
    dense: Tensor<2>,
    /// For packed shards: the queries zero-padded to `planes·W` `[q, planes·W]`, their sums
    /// `[q, 1]`, and the shift of each plane `[1, planes, 1]`.
    packed: Option<(Packing, Tensor<2>, Tensor<2>, Tensor<3, Int>)>,
}

/// Unpacked values per slice of a quantized shard (×4 bytes, transient): 32 MB.
const UNPACK_VALUES: usize = 1 << 23;

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
    /// Scored and narrowed on the host already (a CPU index's codes).
    Host(Candidates),
}

/// Searches each group of queries, reading its selections back with `$read` (sync or async)
/// and merging them; one body for [`VectorIndex::search`] and [`VectorIndex::search_async`].
macro_rules! read_selection {
    ($index:expr, $queries:expr, $k:expr, |$t:ident| $read:expr) => {{
        let mut hits = Vec::new();
        for group in $index.query_groups($queries)? {
            let q = group.len() / $index.dim;
            let mut candidates = Vec::new();
            for sel in $index.select(group, q, $k) {
                match sel {
                    Selected::Host(c) => candidates.push(c),
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
            hits.extend(merge(&candidates, q, $k));
        }
        Ok(hits)
    }};
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
            let data = words.clone().into_data_async().await;
            let data = data.map_err(|e| Error::Readback(format!("{e:?}")))?.convert::<i32>();
            codes
                .words
                .extend(data.try_into_vec::<i32>().map_err(|e| Error::Readback(format!("{e:?}")))?);
            codes.scales.extend(to_host(scales.clone().into_data_async().await)?);
        }
        Ok(codes)
    }

    /// The queries in groups whose scores `[group, shard_rows]` fit one buffer, after checking
    /// them (whole vectors, finite: a NaN query would select no block at all).
    fn query_groups<'q>(&self, queries: &'q [f32]) -> Result<std::slice::Chunks<'q, f32>> {
        if !queries.len().is_multiple_of(self.dim) {
            return Err(Error::Invalid(format!(
                "{} query values are not whole vectors of width {}",
                queries.len(),
                self.dim
            )));
        }
        if queries.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("queries must be finite".into()));
        }
        let group =
            usize::try_from(self.limit / (4 * self.shard_rows as u64)).unwrap_or(usize::MAX).max(1);
        Ok(queries.chunks(group.saturating_mul(self.dim)))
    }

    /// The queries on the device, padded for packed shards.
    fn upload_queries(&self, queries: &[f32], q: usize) -> Queries {
        let dense =
            Tensor::<2>::from_data(TensorData::new(queries.to_vec(), [q, self.dim]), &self.device);
        let packed = self.quantize.packing().map(|p| {
            let width = p.planes() * p.words(self.dim);
            let mut padded = vec![0f32; q * width];
            for (row, query) in padded.chunks_mut(width).zip(queries.chunks(self.dim)) {
                row[..self.dim].copy_from_slice(query);
            }
            let padded = Tensor::<2>::from_data(TensorData::new(padded, [q, width]), &self.device);
            let sums = padded.clone().sum_dim(1); // [q, 1]
            let shifts: Vec<i32> = (0..p.planes() as i32).map(|j| j * p.bits() as i32).collect();
            let shifts = Tensor::<3, Int>::from_data(
                TensorData::new(shifts, [1, p.planes(), 1]),
                &self.device,
            );
            (p, padded, sums, shifts)
        });
        Queries { dense, packed }
    }

    /// A shard's scores `[q, rows]`: exact for f32, approximate for codes.
    fn shard_scores(&self, shard: &Shard, queries: &Queries, q: usize) -> Tensor<2> {
        match shard {
            // One query on a GPU is a matrix-vector product: as a broadcast multiply and a row
            // sum it streams the shard once, where the matmul kernel pads the single row to a
            // whole tile (2.1× faster on WebGPU for 100k × 768). The CPU's gemm is faster as is.
            Shard::Dense(vectors) if q == 1 && self.gpu => {
                let rows = vectors.dims()[0];
                vectors
                    .clone()
                    .mul(queries.dense.clone().expand([rows, self.dim]))
                    .sum_dim(1)
                    .reshape([1, rows])
            }
            Shard::Dense(vectors) => queries.dense.clone().matmul(vectors.clone().transpose()),
            Shard::Host { .. } => unreachable!("host shards are scored on the host"),
            Shard::Packed { words, scales } => {
                let (p, padded, sums, shifts) = queries.packed.as_ref().expect("packed queries");
                let [rows, w] = words.dims();
                let (a, c) = p.affine();
                let width = p.planes() * w;
                let step = (UNPACK_VALUES / width).max(1);
                let parts = (0..rows)
                    .step_by(step)
                    .map(|start| {
                        let end = (start + step).min(rows);
                        let n = end - start;
                        // [n, W] → [n, planes, W] (one shift a plane) → values in dim order.
                        let values = words
                            .clone()
                            .slice([start..end, 0..w])
                            .reshape([n, 1, w])
                            .bitwise_right_shift(shifts.clone())
                            .bitwise_and_scalar(p.mask())
                            .float()
                            .reshape([n, width]);
                        let raw = padded.clone().matmul(values.transpose()); // [q, n]
                        raw.mul_scalar(a)
                            .add(sums.clone().mul_scalar(c))
                            .mul(scales.clone().slice([0..1, start..end]))
                    })
                    .collect::<Vec<_>>();
                Tensor::cat(parts, 1)
            }
        }
    }

    /// Per shard, the scores and (past `k` blocks' worth of rows) their block maxima.
    fn select(&self, queries: &[f32], q: usize, k: usize) -> Vec<Selected> {
        if q == 0 || k == 0 {
            return Vec::new();
        }
        let uploaded = self.upload_queries(queries, q);
        let mut offset = 0;
        let mut out = Vec::new();
        for shard in &self.shards {
            let rows = shard.rows();
            if let Shard::Host { codes, .. } = shard {
                let p = self.quantize.packing().expect("host shards hold codes");
                let found = host_candidates(p, codes, queries, self.dim, k, offset);
                out.push(Selected::Host(found));
                offset += rows;
                continue;
            }
            let scores = self.shard_scores(shard, &uploaded, q); // [q, rows]
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

    /// The `k` best vectors for each query, exactly: a quantized index searches `k × oversample`
    /// candidates on its codes, reads their f32 vectors with `rows` (ids → row-major vectors in
    /// that order) and orders them by [`rescore`]. An f32 index needs neither.
    pub fn search_rescored(
        &self,
        queries: &[f32],
        k: usize,
        oversample: usize,
        mut rows: impl FnMut(&[u32]) -> Result<Vec<f32>>,
    ) -> Result<Vec<Vec<Hit>>> {
        if self.quantize == Quantize::None {
            return self.search(queries, k);
        }
        if oversample == 0 {
            return Err(Error::Invalid("oversample must be at least 1".into()));
        }
        let candidates = self.search(queries, k.saturating_mul(oversample))?;
        candidates
            .iter()
            .zip(queries.chunks(self.dim))
            .map(|(hits, query)| {
                let ids: Vec<u32> = hits.iter().map(|h| h.id).collect();
                rescore(query, &ids, &rows(&ids)?, k)
            })
            .collect()
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

/// A host shard's candidates: each query's top `k` of [`Packing::scan`]'s scores (ties to the
/// lower id), as the union of their ids with every query's score for each.
fn host_candidates(
    p: Packing,
    codes: &Codes,
    queries: &[f32],
    dim: usize,
    k: usize,
    offset: usize,
) -> Candidates {
    let n = codes.scales.len();
    let mut all = Vec::with_capacity(n * queries.len() / dim);
    let mut picked = std::collections::BTreeSet::new();
    for query in queries.chunks(dim) {
        let start = all.len();
        p.scan(&codes.words, &codes.scales, query, &mut all);
        let mut order: Vec<usize> = (0..n).collect();
        let scores = &all[start..];
        let better = |a: &usize, b: &usize| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b));
        if k < n {
            order.select_nth_unstable_by(k - 1, better);
            order.truncate(k);
        }
        picked.extend(order);
    }
    let ids: Vec<usize> = picked.into_iter().collect();
    let scores = all.chunks(n).flat_map(|s| ids.iter().map(|&i| s[i])).collect();
    Candidates { scores, rows: ids.len(), ids: ids.into_iter().map(|i| offset + i).collect() }
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

/// The `k` best of the candidate `ids` for `query` by their exact f32 vectors `rows` (row-major
/// `[ids.len(), query.len()]`, in the order of `ids`): score descending, ties to the lower id.
pub fn rescore(query: &[f32], ids: &[u32], rows: &[f32], k: usize) -> Result<Vec<Hit>> {
    if query.is_empty() || rows.len() != ids.len() * query.len() {
        return Err(Error::Invalid(format!(
            "rescore: {} row values for {} candidates of width {}",
            rows.len(),
            ids.len(),
            query.len()
        )));
    }
    let mut hits = brute_force(rows, query.len(), query, ids.len());
    hits.iter_mut().for_each(|h| h.id = ids[h.id as usize]);
    rank(&mut hits, k);
    Ok(hits)
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

    /// A quantized index over random vectors: its scores equal the host's decode of the same
    /// codes, each query's candidates are the true top of those scores, and rescoring orders
    /// the candidates exactly as brute-force f32 over them does.
    #[test]
    fn quantized_scores_match_the_host_and_rescoring_is_exact() {
        let device = Device::flex();
        let mut rng = crate::rng::Rng::new(7);
        let (n, k) = (700, 5);
        // (quantize, dim, shard rows): dims that fill whole words and dims that pad them.
        let cases = [
            (Quantize::Int8, 32, 1000),
            (Quantize::Int8, 37, 300),
            (Quantize::Binary, 64, 1000),
            (Quantize::Binary, 45, 256),
        ];
        for (quantize, dim, shard_rows) in cases {
            let vectors: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
            let queries: Vec<f32> = (0..3 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
            let mut index = VectorIndex::with_quantize(dim, &device, None, quantize)
                .unwrap()
                .with_shard_rows(shard_rows);
            index.add(&vectors[..100 * dim]).unwrap();
            index.add(&vectors[100 * dim..]).unwrap();
            assert_eq!(index.shards(), n.div_ceil(shard_rows), "{quantize} {dim}");
            let p = quantize.packing().unwrap();
            let codes = p.encode(dim, &vectors);
            let w = p.words(dim);
            let host = |i: usize, query: &[f32]| {
                p.score(&codes.words[i * w..(i + 1) * w], codes.scales[i], query)
            };
            let oversample = 4;
            let found = index.search(&queries, k * oversample).unwrap();
            for (query, hits) in queries.chunks(dim).zip(&found) {
                // The device's candidates are the host scores' top (allowing float ties).
                let mut all: Vec<f32> = (0..n).map(|i| host(i, query)).collect();
                all.sort_by(|a, b| b.total_cmp(a));
                for (hit, want) in hits.iter().zip(&all) {
                    let got = host(hit.id as usize, query);
                    assert!((hit.score - got).abs() <= 1e-4, "{quantize} {dim}: {hit:?} vs {got}");
                    assert!(
                        (hit.score - want).abs() <= 1e-4,
                        "{quantize} {dim}: {hit:?} vs {want}"
                    );
                }
                let ids: Vec<u32> = hits.iter().map(|h| h.id).collect();
                let rows: Vec<f32> =
                    ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect();
                let got = rescore(query, &ids, &rows, k).unwrap();
                let mut want: Vec<Hit> = ids
                    .iter()
                    .map(|&i| Hit {
                        id: i,
                        score: vectors[i as usize * dim..][..dim]
                            .iter()
                            .zip(query)
                            .map(|(a, b)| a * b)
                            .sum(),
                    })
                    .collect();
                rank(&mut want, k);
                assert_eq!(got, want, "{quantize} {dim}");
            }
            // search_rescored reads the candidates' rows and gives the same answer.
            let rescored = index
                .search_rescored(&queries, k, oversample, |ids| {
                    Ok(ids
                        .iter()
                        .flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec())
                        .collect())
                })
                .unwrap();
            for ((query, hits), found) in queries.chunks(dim).zip(&rescored).zip(&found) {
                let ids: Vec<u32> = found.iter().map(|h| h.id).collect();
                let rows: Vec<f32> =
                    ids.iter().flat_map(|&i| vectors[i as usize * dim..][..dim].to_vec()).collect();
                assert_eq!(hits, &rescore(query, &ids, &rows, k).unwrap(), "{quantize} {dim}");
            }
            // Codes come back as they went in, and a second index built from them agrees.
            let back = futures_lite_block(index.codes_async()).unwrap();
            assert_eq!(back, codes, "{quantize} {dim}");
            let mut restored = VectorIndex::with_quantize(dim, &device, None, quantize).unwrap();
            restored.add_codes(&back).unwrap();
            assert_eq!(restored.search(&queries, k).unwrap(), index.search(&queries, k).unwrap());
        }
    }

    /// Drives a future that completes without waiting (flex reads back synchronously).
    fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let waker = std::task::Waker::noop();
        match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("flex read back asynchronously"),
        }
    }

    #[test]
    fn codes_of_the_wrong_size_or_kind_are_errors() {
        let device = Device::flex();
        let mut int8 = VectorIndex::with_quantize(8, &device, None, Quantize::Int8).unwrap();
        let bad = [
            Codes { words: vec![0; 3], scales: vec![1.0] }, // 2 words a vector
            Codes { words: vec![0; 2], scales: vec![f32::NAN] },
            Codes { words: vec![0; 2], scales: vec![-1.0] },
        ];
        for codes in bad {
            assert!(int8.add_codes(&codes).is_err(), "{codes:?}");
        }
        assert_eq!(int8.len(), 0);
        let mut dense = VectorIndex::new(8, &device, None).unwrap();
        assert!(dense.add_codes(&Codes { words: vec![0; 2], scales: vec![1.0] }).is_err());
        // Refused by kind, empty or not.
        assert!(futures_lite_block(int8.vectors_async()).is_err());
        assert!(futures_lite_block(dense.codes_async()).is_err());
        int8.add(&[0.5; 8]).unwrap();
        dense.add(&[0.5; 8]).unwrap();
        assert!(futures_lite_block(int8.vectors_async()).is_err());
        assert!(futures_lite_block(dense.codes_async()).is_err());
        assert!(futures_lite_block(int8.codes_async()).is_ok());
        assert!(futures_lite_block(dense.vectors_async()).is_ok());
        // Oversampling by 0 would search nothing.
        let none = |_: &[u32]| -> Result<Vec<f32>> { Ok(vec![0.5; 8]) };
        assert!(int8.search_rescored(&[1.0; 8], 1, 0, none).is_err());
        assert_eq!(int8.search_rescored(&[1.0; 8], 1, 1, none).unwrap()[0].len(), 1);
    }

    #[test]
    fn rescore_refuses_rows_that_do_not_match_the_candidates() {
        let cases: [(&[f32], &[u32], &[f32]); 3] = [
            (&[], &[0], &[]),                           // an empty query
            (&[1.0, 0.0], &[0, 1], &[1.0, 0.0]),        // one row for two ids
            (&[1.0, 0.0], &[0], &[1.0, 0.0, 0.0, 1.0]), // two rows for one id
        ];
        for (query, ids, rows) in cases {
            assert!(rescore(query, ids, rows, 1).is_err(), "{query:?} {ids:?} {rows:?}");
        }
        let hits = rescore(&[1.0, 0.0], &[7, 3], &[0.5, 0.0, 0.5, 1.0], 2).unwrap();
        assert_eq!(hits, [Hit { id: 3, score: 0.5 }, Hit { id: 7, score: 0.5 }]);
    }

    #[test]
    fn queries_are_searched_in_groups_whose_scores_fit_one_buffer() {
        // Under a 160-byte limit, a shard holds 10 f32 rows of width 4 (4 queries' scores fill a
        // buffer: 3 groups of the 9 queries) or 40 rows of codes (1 query's: 9 groups). The
        // answers are those of one unbounded search.
        let device = Device::flex();
        let mut rng = crate::rng::Rng::new(3);
        let dim = 4;
        let vectors: Vec<f32> = (0..80 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        let queries: Vec<f32> = (0..9 * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        for quantize in Quantize::ALL {
            let mut bounded =
                VectorIndex::with_quantize(dim, &device, Some(160), quantize).unwrap();
            let mut free = VectorIndex::with_quantize(dim, &device, None, quantize).unwrap();
            bounded.add(&vectors).unwrap();
            free.add(&vectors).unwrap();
            let groups = if quantize == Quantize::None { 3 } else { 9 };
            assert_eq!(bounded.query_groups(&queries).unwrap().count(), groups, "{quantize}");
            assert_eq!(free.query_groups(&queries).unwrap().count(), 1, "{quantize}");
            // The same ids; f32 scores to the last bit of the matrix product's summation order,
            // which depends on how many queries share it.
            let (a, b) = (bounded.search(&queries, 5).unwrap(), free.search(&queries, 5).unwrap());
            for (a, b) in a.iter().flatten().zip(b.iter().flatten()) {
                assert!(
                    a.id == b.id && (a.score - b.score).abs() <= 1e-6,
                    "{quantize}: {a:?} {b:?}"
                );
            }
            assert_eq!(a.iter().flatten().count(), 9 * 5);
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let device = Device::flex();
        let mut index = VectorIndex::new(3, &device, None).unwrap();
        assert!(index.add(&[1.0, 2.0]).is_err());
        assert!(index.add(&[1.0, f32::NAN, 0.0]).is_err());
        assert!(index.search(&[1.0], 1).is_err());
        assert!(index.search(&[1.0, f32::NAN, 0.0], 1).is_err());
        assert!(index.search(&[1.0, 0.0, 0.0], 3).unwrap()[0].is_empty());
        assert!(matches!(VectorIndex::new(3, &device, Some(8)), Err(Error::Limit { .. })));
        assert!(VectorIndex::new(0, &device, None).is_err());
    }
}
