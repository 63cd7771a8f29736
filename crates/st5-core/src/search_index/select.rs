//! Selection: [`VectorIndex::search`] scores each shard (`score.rs`), keeps on the device only
//! the blocks of scores that can hold a top-k entry (block-max selection), reads those back and
//! merges them (`rank.rs`). A CPU index's codes are scanned and narrowed on the host instead.

use burn::tensor::{Int, Tensor, TensorData};

use super::rank::{Candidates, merge};
use super::shard::Shard;
use super::{Hit, VectorIndex};
use crate::error::{Error, Result};
use crate::transfer::to_host;
use crate::vector_codes::{Codes, Packing};

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
    /// The `k` best vectors for each query (row-major `[q, dim]`), best first, ties to the lower
    /// id; fewer than `k` when the index holds fewer.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        read_selection!(self, queries, k, |t| t.try_into_data())
    }

    /// As [`search`](Self::search), reading results back asynchronously (the browser's way).
    pub async fn search_async(&self, queries: &[f32], k: usize) -> Result<Vec<Vec<Hit>>> {
        read_selection!(self, queries, k, |t| t.into_data_async().await)
    }

    /// The queries in groups whose scores `[group, shard_rows]` fit one buffer, after checking
    /// them (whole vectors, finite: a NaN query would select no block at all).
    pub(super) fn query_groups<'q>(
        &self,
        queries: &'q [f32],
    ) -> Result<std::slice::Chunks<'q, f32>> {
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
