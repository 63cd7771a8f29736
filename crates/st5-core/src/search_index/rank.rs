//! Ranking: the shards' candidates merged into each query's best `k`, the one order of hits
//! (score descending, ties to the lower id), exact rescoring of a quantized index's candidates,
//! and the brute-force reference.

use super::{Hit, VectorIndex};
use crate::error::{Error, Result};
use crate::vector_codes::Quantize;

/// A shard's candidates read back: `[q, rows]` scores and the global id of each column
/// (`usize::MAX` for padding).
pub(super) struct Candidates {
    pub(super) scores: Vec<f32>,
    pub(super) ids: Vec<usize>,
    pub(super) rows: usize,
}

/// Merges the candidates into the best `k` per query: score descending, ties to the lower id.
pub(super) fn merge(parts: &[Candidates], q: usize, k: usize) -> Vec<Vec<Hit>> {
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

impl VectorIndex {
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
