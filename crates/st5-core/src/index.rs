//! [`VectorIndex`]: exact (brute-force) top-k search over unit vectors kept on the device.
//! Vectors live in row shards that each fit one device buffer (WebGPU caps a binding at
//! `maxStorageBufferBindingSize`); a query is one matrix product per shard followed by a
//! selection done with tensor ops on the same device, so only `k` ids and scores per query
//! leave it. The same code runs on the CPU (flex), giving the same ids.

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::{Error, Result};

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
}

/// Above this many results per shard, selection reads the shard's scores back and sorts them
/// on the host: `k` passes on the device cost more than one `[queries, rows]` read-back.
const DEVICE_SELECT_MAX_K: usize = 32;

/// A shard's selection, still on the device: scores `[queries, k]` with their ids, or (for a
/// large `k`) all of the shard's scores `[queries, rows]` with `ids: None`.
struct Selected {
    ids: Option<Tensor<2, Int>>,
    scores: Tensor<2>,
    offset: usize,
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
            return Err(Error::Limit { what: "one index vector".into(), bytes: row_bytes, limit, hint: "" });
        }
        // Ids are selected as f32 (exact below 2^24), which bounds a shard's rows too.
        let shard_rows = usize::try_from(limit / row_bytes).unwrap_or(usize::MAX).min(1 << 24);
        Ok(Self { device: device.clone(), dim, shard_rows, shards: Vec::new(), len: 0 })
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
        if vectors.len() % self.dim != 0 {
            return Err(Error::Invalid(format!("{} values are not whole vectors of width {}", vectors.len(), self.dim)));
        }
        if vectors.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("index vectors must be finite".into()));
        }
        let mut rest = vectors;
        while !rest.is_empty() {
            let last_rows = self.shards.last().map_or(self.shard_rows, |s| s.dims()[0]);
            let room = if last_rows < self.shard_rows { self.shard_rows - last_rows } else { self.shard_rows };
            let take = room.min(rest.len() / self.dim);
            let (head, tail) = rest.split_at(take * self.dim);
            let new = Tensor::<2>::from_data(TensorData::new(head.to_vec(), [take, self.dim]), &self.device);
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

    /// The `k` best vectors for each query (row-major `[q, dim]`), best first, ties to the lower
    /// id; fewer than `k` when the index holds fewer.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        let q = self.check_queries(queries)?;
        let mut parts = Vec::new();
        for sel in self.select(queries, q, k) {
            let ids = sel.ids.map(|t| read_ids(t.try_into_data())).transpose()?;
            parts.push(Part { ids, scores: read_scores(sel.scores.try_into_data())?, offset: sel.offset });
        }
        Ok(merge(&parts, q, k))
    }

    /// As [`search`](Self::search), reading results back asynchronously (the browser's way).
    pub async fn search_async(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        let q = self.check_queries(queries)?;
        let mut parts = Vec::new();
        for sel in self.select(queries, q, k) {
            let ids = match sel.ids {
                Some(t) => Some(read_ids(t.into_data_async().await)?),
                None => None,
            };
            parts.push(Part { ids, scores: read_scores(sel.scores.into_data_async().await)?, offset: sel.offset });
        }
        Ok(merge(&parts, q, k))
    }

    /// Every vector, row-major, in id order (for saving the index).
    pub async fn vectors_async(&self) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(self.len * self.dim);
        for shard in &self.shards {
            out.extend(read_scores(shard.clone().into_data_async().await)?);
        }
        Ok(out)
    }

    fn check_queries(&self, queries: &[f32]) -> Result<usize> {
        if queries.len() % self.dim != 0 {
            return Err(Error::Invalid(format!("{} query values are not whole vectors of width {}", queries.len(), self.dim)));
        }
        Ok(queries.len() / self.dim)
    }

    /// Per shard, the top `min(k, rows)` by repeated selection: the maximum score, then the
    /// lowest id holding it (so ties resolve the same on every backend), then that entry is
    /// masked out. `k` small passes of elementwise ops and reductions, all on the device; past
    /// [`DEVICE_SELECT_MAX_K`] the scores are returned whole for the host to sort.
    fn select(&self, queries: &[f32], q: usize, k: usize) -> Vec<Selected> {
        if q == 0 || k == 0 {
            return Vec::new();
        }
        let query = Tensor::<2>::from_data(TensorData::new(queries.to_vec(), [q, self.dim]), &self.device);
        let mut offset = 0;
        let mut out = Vec::new();
        for shard in &self.shards {
            let rows = shard.dims()[0];
            let mut scores = query.clone().matmul(shard.clone().transpose()); // [q, rows]
            if k.min(rows) > DEVICE_SELECT_MAX_K {
                out.push(Selected { ids: None, scores, offset });
                offset += rows;
                continue;
            }
            let ids = Tensor::<1, Int>::arange(0..rows as i64, &self.device).float().unsqueeze::<2>().expand([q, rows]);
            let (mut best_ids, mut best_scores) = (Vec::new(), Vec::new());
            for _ in 0..k.min(rows) {
                let best = scores.clone().max_dim(1); // [q, 1]
                let at_best = scores.clone().equal(best.clone().expand([q, rows]));
                let id = ids.clone().mask_fill(at_best.bool_not(), f32::MAX).min_dim(1); // [q, 1]
                scores = scores.mask_fill(ids.clone().equal(id.clone().expand([q, rows])), f32::NEG_INFINITY);
                best_ids.push(id);
                best_scores.push(best);
            }
            out.push(Selected { ids: Some(Tensor::cat(best_ids, 1).int()), scores: Tensor::cat(best_scores, 1), offset });
            offset += rows;
        }
        out
    }
}

/// A shard's selection read back: `[q, k_s]` scores with shard-local ids, or (`ids: None`) all
/// `[q, rows]` scores, whose column is the shard-local id.
struct Part {
    ids: Option<Vec<i64>>,
    scores: Vec<f32>,
    offset: usize,
}

/// Merges per-shard selections into the best `k` per query: score descending, ties to the
/// lower id, the order the device selection uses.
fn merge(parts: &[Part], q: usize, k: usize) -> Vec<Vec<Hit>> {
    (0..q)
        .map(|qi| {
            let mut hits: Vec<Hit> = parts
                .iter()
                .flat_map(|p| {
                    let ks = p.scores.len() / q;
                    (0..ks).map(move |j| {
                        let local = p.ids.as_ref().map_or(j, |ids| ids[qi * ks + j] as usize);
                        Hit { id: (p.offset + local) as u32, score: p.scores[qi * ks + j] }
                    })
                })
                .collect();
            hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
            hits.truncate(k);
            hits
        })
        .collect()
}

fn read_scores<E: std::fmt::Debug>(data: std::result::Result<TensorData, E>) -> Result<Vec<f32>> {
    let data = data.map_err(|e| Error::Readback(format!("{e:?}")))?;
    data.convert::<f32>().try_into_vec::<f32>().map_err(|e| Error::Readback(format!("{e:?}")))
}

fn read_ids<E: std::fmt::Debug>(data: std::result::Result<TensorData, E>) -> Result<Vec<i64>> {
    let data = data.map_err(|e| Error::Readback(format!("{e:?}")))?;
    data.convert::<i64>().try_into_vec::<i64>().map_err(|e| Error::Readback(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(vectors: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<Hit> {
        let mut hits: Vec<Hit> = vectors
            .chunks(dim)
            .enumerate()
            .map(|(i, v)| Hit { id: i as u32, score: v.iter().zip(query).map(|(a, b)| a * b).sum() })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        hits
    }

    #[test]
    fn top_k_matches_brute_force_across_shards_ties_and_large_k() {
        let device = Device::flex();
        let dim = 4;
        // Rows 1, 4 and 6 are equal (a three-way tie); row 7 is the negated query.
        let vectors: Vec<f32> = [
            [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
            [1.0, 0.0, 0.0, 0.0], [0.6, 0.8, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0],
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
            assert_eq!(got[0].iter().map(|h| h.id).collect::<Vec<_>>(), want.iter().map(|h| h.id).collect::<Vec<_>>(), "rows {rows} k {k}");
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
