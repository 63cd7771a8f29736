//! Hybrid ranking: a vector ranking and a keyword ranking fused into one, by reciprocal rank
//! fusion (Cormack et al. 2009) or by a convex combination of normalised scores (Bruch et al.
//! 2022, who found the tuned convex combination the better). Normalisation: a vector score by the
//! minimum and maximum of its candidates; a BM25 score by its maximum (its least is 0).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// How two rankings become one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "lowercase")]
pub enum Fusion {
    /// `Σ weight / (k + rank)`, ranks from 1; a document absent from a list gets nothing from it.
    Rrf { k: f64, vector_weight: f64 },
    /// `α · vector + (1 − α) · keyword`, each normalised to [0, 1] over its candidates; absent
    /// is 0.
    Convex { alpha: f64 },
}

impl Default for Fusion {
    /// The default, chosen on the tuning sets (wikiqa, selqa, stackexchange_small dev splits):
    /// docs/search.md has the table.
    fn default() -> Self {
        Fusion::Convex { alpha: 0.7 }
    }
}

/// Fuses `vector` and `keyword` (each `(doc, score)`, any order) into one list, best first, ties
/// to the lower doc.
pub fn fuse(vector: &[(u32, f32)], keyword: &[(u32, f32)], fusion: Fusion) -> Vec<(u32, f32)> {
    let mut total: HashMap<u32, f64> = HashMap::new();
    match fusion {
        Fusion::Rrf { k, vector_weight } => {
            for (list, weight) in [(vector, vector_weight), (keyword, 1.0 - vector_weight)] {
                for (rank, (doc, _)) in ranked(list).iter().enumerate() {
                    *total.entry(*doc).or_default() += weight / (k + rank as f64 + 1.0);
                }
            }
        }
        Fusion::Convex { alpha } => {
            let (lo, hi) = bounds(vector);
            let span = if hi > lo { hi - lo } else { 1.0 };
            for &(doc, s) in vector {
                let x = if hi > lo { (f64::from(s) - lo) / span } else { 1.0 };
                *total.entry(doc).or_default() += alpha * x;
            }
            let (_, top) = bounds(keyword);
            for &(doc, s) in keyword {
                let x = if top > 0.0 { f64::from(s) / top } else { 0.0 };
                *total.entry(doc).or_default() += (1.0 - alpha) * x;
            }
        }
    }
    let mut out: Vec<(u32, f32)> = total.into_iter().map(|(d, s)| (d, s as f32)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn ranked(list: &[(u32, f32)]) -> Vec<(u32, f32)> {
    let mut l = list.to_vec();
    l.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    l
}

fn bounds(list: &[(u32, f32)]) -> (f64, f64) {
    list.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, s)| {
        (lo.min(f64::from(s)), hi.max(f64::from(s)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_orders_by_both_lists() {
        let vector = [(1, 0.9), (2, 0.8), (3, 0.1)];
        let keyword = [(3, 12.0), (2, 6.0), (4, 3.0)];
        // (fusion, want order)
        let cases: [(Fusion, &[u32]); 5] = [
            // 3: 1/63 + 1/61 halves, above 2's two 1/62 halves.
            (Fusion::Rrf { k: 60.0, vector_weight: 0.5 }, &[3, 2, 1, 4]),
            (Fusion::Rrf { k: 60.0, vector_weight: 1.0 }, &[1, 2, 3, 4]),
            // α = 1: the vector list alone (4 has 0); α = 0: the keyword list alone.
            (Fusion::Convex { alpha: 1.0 }, &[1, 2, 3, 4]),
            (Fusion::Convex { alpha: 0.0 }, &[3, 2, 4, 1]),
            // 0.5: 1 → 0.5, 2 → 0.4375 + 0.25, 3 → 0.5, 4 → 0.125.
            (Fusion::Convex { alpha: 0.5 }, &[2, 1, 3, 4]),
        ];
        for (fusion, want) in cases {
            let got: Vec<u32> = fuse(&vector, &keyword, fusion).iter().map(|h| h.0).collect();
            assert_eq!(got, want, "{fusion:?}");
        }
        assert!(fuse(&[], &[], Fusion::default()).is_empty());
        // One candidate each: normalised to 1, never NaN.
        let one = fuse(&[(5, 0.3)], &[(5, 0.0)], Fusion::Convex { alpha: 0.5 });
        assert_eq!(one, [(5, 0.5)]);
    }
}
