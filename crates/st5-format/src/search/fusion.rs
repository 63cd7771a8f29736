//! Hybrid ranking: a vector ranking and a keyword ranking fused into one, by reciprocal rank
//! fusion (Cormack et al. 2009) or by a convex combination of normalised scores (Bruch et al.
//! 2022, who found the tuned convex combination the better), each list normalised over its own
//! candidates by min-max (a BM25 list by its maximum, its least being 0) or by z-score. The
//! default, z-score with the vector weighted 0.65, had the best mean nDCG@10 of those tried on
//! the tuning sets' dev splits (docs/search.md has the table).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How two rankings become one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "lowercase")]
pub enum Fusion {
    /// `Σ weight / (k + rank)`, ranks from 1; a document absent from a list gets nothing from it.
    Rrf { k: f64, vector_weight: f64 },
    /// `α · vector + (1 − α) · keyword`, each normalised to [0, 1] over its candidates (vector
    /// scores by min-max, BM25 by its maximum); absent is 0.
    Convex { alpha: f64 },
    /// `α · vector + (1 − α) · keyword`, each as a z-score over its candidates; absent is its
    /// list's least.
    Zscore { alpha: f64 },
}

impl Default for Fusion {
    /// Chosen on the tuning sets' dev splits (wikiqa, selqa, stackexchange_small).
    fn default() -> Self {
        Fusion::Zscore { alpha: 0.65 }
    }
}

impl std::fmt::Display for Fusion {
    /// `rrf:K:W` or `convex:ALPHA`, as [`FromStr`](std::str::FromStr) reads them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fusion::Rrf { k, vector_weight } => write!(f, "rrf:{k}:{vector_weight}"),
            Fusion::Convex { alpha } => write!(f, "convex:{alpha}"),
            Fusion::Zscore { alpha } => write!(f, "zscore:{alpha}"),
        }
    }
}

impl std::str::FromStr for Fusion {
    type Err = Error;
    /// `zscore:ALPHA` or `convex:ALPHA` (the vector's weight, 0 to 1), `rrf` (k = 60, equal
    /// weights), `rrf:K` or `rrf:K:W` (W the vector's weight, 0 to 1).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::Invalid(format!(
                "fusion `{s}`: expected zscore:ALPHA, convex:ALPHA, rrf, rrf:K or rrf:K:WEIGHT (ALPHA and WEIGHT in 0..=1, K ≥ 0)"
            ))
        };
        let mut parts = s.split(':');
        let method = parts.next().unwrap_or_default();
        let nums: Vec<f64> =
            parts.map(|p| p.parse::<f64>().map_err(|_| bad())).collect::<Result<_>>()?;
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        match (method, nums.as_slice()) {
            ("convex", &[alpha]) if unit(alpha) => Ok(Fusion::Convex { alpha }),
            ("zscore", &[alpha]) if unit(alpha) => Ok(Fusion::Zscore { alpha }),
            ("rrf", &[]) => Ok(Fusion::Rrf { k: 60.0, vector_weight: 0.5 }),
            ("rrf", &[k]) if k >= 0.0 => Ok(Fusion::Rrf { k, vector_weight: 0.5 }),
            ("rrf", &[k, w]) if k >= 0.0 && unit(w) => Ok(Fusion::Rrf { k, vector_weight: w }),
            _ => Err(bad()),
        }
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
        Fusion::Zscore { alpha } => {
            for (list, other, weight) in [(vector, keyword, alpha), (keyword, vector, 1.0 - alpha)]
            {
                let z = zscores(list);
                let least = z.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
                for &(doc, x) in &z {
                    *total.entry(doc).or_default() += weight * x;
                }
                // A document this list lacks gets its least.
                let held: std::collections::HashSet<u32> = list.iter().map(|x| x.0).collect();
                for &(doc, _) in other.iter().filter(|x| !held.contains(&x.0)) {
                    *total.entry(doc).or_default() += weight * least;
                }
            }
        }
    }
    let mut out: Vec<(u32, f32)> = total.into_iter().map(|(d, s)| (d, s as f32)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Each score as `(s − mean) / sd` over the list (sd floored, so one candidate scores 0).
fn zscores(list: &[(u32, f32)]) -> Vec<(u32, f64)> {
    let n = list.len().max(1) as f64;
    let mean = list.iter().map(|x| f64::from(x.1)).sum::<f64>() / n;
    let var = list.iter().map(|x| (f64::from(x.1) - mean).powi(2)).sum::<f64>() / n;
    let sd = var.sqrt().max(1e-9);
    list.iter().map(|&(d, x)| (d, (f64::from(x) - mean) / sd)).collect()
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
        let cases: [(Fusion, &[u32]); 7] = [
            // 3: 1/63 + 1/61 halves, above 2's two 1/62 halves.
            (Fusion::Rrf { k: 60.0, vector_weight: 0.5 }, &[3, 2, 1, 4]),
            (Fusion::Rrf { k: 60.0, vector_weight: 1.0 }, &[1, 2, 3, 4]),
            // α = 1: the vector list alone (4 has 0); α = 0: the keyword list alone.
            (Fusion::Convex { alpha: 1.0 }, &[1, 2, 3, 4]),
            (Fusion::Convex { alpha: 0.0 }, &[3, 2, 4, 1]),
            // 0.5: 1 → 0.5, 2 → 0.4375 + 0.25, 3 → 0.5, 4 → 0.125.
            (Fusion::Convex { alpha: 0.5 }, &[2, 1, 3, 4]),
            // z-scores: vector 1 → 0.84, 2 → 0.56, 3 → −1.40 (4: the least); keyword 3 → 1.34,
            // 2 → −0.27, 4 → −1.07 (1: the least). At 0.5: 2 → 0.15, 3 → −0.03, 1 → −0.11.
            (Fusion::Zscore { alpha: 0.5 }, &[2, 3, 1, 4]),
            (Fusion::Zscore { alpha: 0.9 }, &[1, 2, 3, 4]),
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

    #[test]
    fn fusions_by_name() {
        for f in [
            Fusion::default(),
            Fusion::Zscore { alpha: 1.0 },
            Fusion::Rrf { k: 60.0, vector_weight: 0.5 },
            Fusion::Convex { alpha: 0.25 },
        ] {
            assert_eq!(f.to_string().parse::<Fusion>().unwrap(), f);
        }
        assert_eq!(
            "rrf:10".parse::<Fusion>().unwrap(),
            Fusion::Rrf { k: 10.0, vector_weight: 0.5 }
        );
        for bad in
            ["", "convex", "convex:1.5", "zscore:-0.1", "rrf:-1", "rrf:60:2", "mean:3", "convex:x"]
        {
            assert!(
                bad.parse::<Fusion>().unwrap_err().to_string().contains("expected zscore"),
                "{bad}"
            );
        }
    }
}
