//! Bias tests: WEAT (Caliskan, Bryson & Narayanan 2017, *Science* 356:183) on single words and
//! SEAT (May et al. 2019, <https://arxiv.org/abs/1903.10561>) on sentences, with SEAT's stimuli
//! and orientation (`shared/data/weat/`, `sentbias/weat.py`): X = `targ1`, Y = `targ2`,
//! A = `attr1`, B = `attr2`.
//!
//! - Association of a word: s(w, A, B) = mean_{a∈A} cos(w, a) − mean_{b∈B} cos(w, b).
//! - Effect size: d = [mean_{x∈X} s(x) − mean_{y∈Y} s(y)] / std_{w∈X∪Y} s(w), the sample standard
//!   deviation (n − 1), as in SEAT's code.
//! - One-sided permutation p-value: the share of equal-size partitions (Xi, Yi) of X ∪ Y whose
//!   statistic S(Xi, Yi) = Σ_{Xi} s − Σ_{Yi} s is strictly greater than the observed S(X, Y).
//!   Exact (every partition) when there are at most [`EXACT_LIMIT`] partitions; otherwise
//!   [`SAMPLES`] random partitions from a fixed seed, counted as (1 + greater) / (1 + samples).
//!   [`PValue`] says which.

use std::path::Path;

use serde::{Deserialize, Serialize};
use st5_format::rng::Rng;

use crate::error::{EvalError, Result};
use crate::tasks::{Lookup, cosine};

/// Partition counts up to this are enumerated exactly (SEAT's `n_samples` default).
pub const EXACT_LIMIT: u64 = 100_000;
/// Random partitions drawn when there are more.
pub const SAMPLES: usize = 100_000;
/// The sampler's seed: the same p-value on every run.
pub const SEED: u64 = 1;

/// The test files, in the order SOURCES.md lists them: word level, then sentence level.
pub const TESTS: [&str; 20] = [
    "weat1",
    "weat2",
    "weat3",
    "weat4",
    "weat5",
    "weat6",
    "weat7",
    "weat8",
    "weat9",
    "weat10",
    "sent-weat1",
    "sent-weat2",
    "sent-weat3",
    "sent-weat4",
    "sent-weat5",
    "sent-weat6",
    "sent-weat7",
    "sent-weat8",
    "sent-weat9",
    "sent-weat10",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stimuli {
    pub category: String,
    pub examples: Vec<String>,
}

/// One test as stored: `{"name", "description", "targ1", "targ2", "attr1", "attr2"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeatTest {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub targ1: Stimuli,
    pub targ2: Stimuli,
    pub attr1: Stimuli,
    pub attr2: Stimuli,
}

/// How the p-value was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "method")]
pub enum PValue {
    /// Every one of `partitions` equal-size partitions.
    Exact { partitions: u64 },
    /// `samples` random partitions, seeded.
    Sampled { samples: usize, seed: u64 },
}

impl std::fmt::Display for PValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PValue::Exact { partitions } => write!(f, "exact ({partitions} partitions)"),
            PValue::Sampled { samples, seed } => write!(f, "sampled ({samples}, seed {seed})"),
        }
    }
}

/// What one test measured.
#[derive(Debug, Clone, Serialize)]
pub struct WeatResult {
    pub name: String,
    /// `targ1 vs targ2 / attr1 vs attr2`, by category.
    pub sets: String,
    /// |X|, |Y|, |A|, |B|.
    pub sizes: [usize; 4],
    pub effect_size: f64,
    pub p_value: f64,
    pub method: PValue,
}

impl WeatTest {
    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).map_err(|source| EvalError::Io { path: path.into(), source })?;
        let test: Self = serde_json::from_slice(&bytes).map_err(|e| EvalError::Parse {
            path: path.into(),
            line: e.line(),
            message: e.to_string(),
        })?;
        for (role, s) in [
            ("targ1", &test.targ1),
            ("targ2", &test.targ2),
            ("attr1", &test.attr1),
            ("attr2", &test.attr2),
        ] {
            if s.examples.is_empty() {
                return Err(EvalError::Invalid(format!(
                    "{}: {role} ({}) has no examples",
                    path.display(),
                    s.category
                )));
            }
        }
        if test.targ1.examples.len() != test.targ2.examples.len() {
            // The permutation test partitions X ∪ Y into halves of the original sizes, which
            // SEAT requires to be equal.
            return Err(EvalError::Invalid(format!(
                "{}: targ1 has {} examples and targ2 {}; WEAT needs equal target sets",
                path.display(),
                test.targ1.examples.len(),
                test.targ2.examples.len()
            )));
        }
        Ok(test)
    }

    /// Every test of `weat_dir` (`shared/data/weat`), in [`TESTS`] order.
    pub fn load_all(weat_dir: &Path) -> Result<Vec<Self>> {
        TESTS.iter().map(|n| Self::load(&weat_dir.join(format!("{n}.json")))).collect()
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        [&self.targ1, &self.targ2, &self.attr1, &self.attr2]
            .into_iter()
            .flat_map(|s| s.examples.iter().map(String::as_str))
    }

    pub fn score(&self, emb: &dyn Lookup) -> WeatResult {
        let rows = |s: &Stimuli| s.examples.iter().map(|t| emb.get(t)).collect::<Vec<_>>();
        let (x, y, a, b) =
            (rows(&self.targ1), rows(&self.targ2), rows(&self.attr1), rows(&self.attr2));
        let (effect_size, p_value, method) = weat(&x, &y, &a, &b);
        WeatResult {
            name: self.name.clone(),
            sets: format!(
                "{} vs {} / {} vs {}",
                self.targ1.category, self.targ2.category, self.attr1.category, self.attr2.category
            ),
            sizes: [x.len(), y.len(), a.len(), b.len()],
            effect_size,
            p_value,
            method,
        }
    }
}

/// s(w, A, B) for every w.
fn associations(words: &[&[f32]], a: &[&[f32]], b: &[&[f32]]) -> Vec<f64> {
    let mean_cos = |w: &[f32], set: &[&[f32]]| {
        set.iter().map(|v| cosine(w, v)).sum::<f64>() / set.len().max(1) as f64
    };
    words.iter().map(|w| mean_cos(w, a) - mean_cos(w, b)).collect()
}

/// Binomial coefficient, saturating at `u64::MAX`.
fn binomial(n: usize, k: usize) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * (n - i) as u128 / (i + 1) as u128;
        if c > u64::MAX as u128 {
            return u64::MAX;
        }
    }
    c as u64
}

/// Effect size, one-sided p-value and how it was computed, for targets X, Y and attributes
/// A, B (rows of embeddings).
pub fn weat(x: &[&[f32]], y: &[&[f32]], a: &[&[f32]], b: &[&[f32]]) -> (f64, f64, PValue) {
    let sx = associations(x, a, b);
    let sy = associations(y, a, b);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let all: Vec<f64> = sx.iter().chain(&sy).copied().collect();
    let m = mean(&all);
    let var = all.iter().map(|s| (s - m).powi(2)).sum::<f64>() / (all.len().max(2) - 1) as f64;
    let effect_size = (mean(&sx) - mean(&sy)) / var.sqrt();
    // S(Xi, Yi) = Σ_{Xi} s − Σ_{Yi} s = 2 Σ_{Xi} s − Σ s: only the sum over Xi varies.
    let total: f64 = all.iter().sum();
    let observed = 2.0 * sx.iter().sum::<f64>() - total;
    let k = sx.len();
    let partitions = binomial(all.len(), k);
    if partitions <= EXACT_LIMIT {
        let mut greater = 0u64;
        for_each_subset_sum(&all, k, &mut |sum| {
            if 2.0 * sum - total > observed {
                greater += 1;
            }
        });
        (effect_size, greater as f64 / partitions as f64, PValue::Exact { partitions })
    } else {
        let mut rng = Rng::new(SEED);
        let mut pool = all.clone();
        let mut greater = 0usize;
        for _ in 0..SAMPLES {
            // A partial Fisher–Yates: the first k of a uniform shuffle are a uniform k-subset.
            for i in 0..k {
                let j = i + rng.below(pool.len() - i);
                pool.swap(i, j);
            }
            if 2.0 * pool[..k].iter().sum::<f64>() - total > observed {
                greater += 1;
            }
        }
        let p = (1 + greater) as f64 / (1 + SAMPLES) as f64;
        (effect_size, p, PValue::Sampled { samples: SAMPLES, seed: SEED })
    }
}

/// Calls `f` with the sum of every k-element subset of `v` (index order, as
/// `itertools.combinations` enumerates them).
fn for_each_subset_sum(v: &[f64], k: usize, f: &mut dyn FnMut(f64)) {
    fn go(v: &[f64], k: usize, start: usize, sum: f64, f: &mut dyn FnMut(f64)) {
        if k == 0 {
            f(sum);
            return;
        }
        for i in start..=v.len() - k {
            go(v, k - 1, i + 1, sum + v[i], f);
        }
    }
    if k <= v.len() {
        go(v, k, 0, 0.0, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomials_and_subset_enumeration_agree() {
        for (n, k, want) in
            [(4, 2, 6), (16, 8, 12_870), (10, 0, 1), (5, 5, 1), (50, 25, 126_410_606_437_752)]
        {
            assert_eq!(binomial(n, k), want, "C({n}, {k})");
        }
        for (n, k) in [(4, 2), (6, 3), (8, 4), (5, 0), (5, 5)] {
            let v: Vec<f64> = (0..n).map(|i| (1u64 << i) as f64).collect();
            let mut sums = Vec::new();
            for_each_subset_sum(&v, k, &mut |s| sums.push(s as u64));
            // Each subset has a distinct bit pattern with k bits set.
            assert_eq!(sums.len() as u64, binomial(n, k), "C({n}, {k})");
            assert!(sums.iter().all(|s| s.count_ones() as usize == k));
            sums.sort_unstable();
            sums.dedup();
            assert_eq!(sums.len() as u64, binomial(n, k), "distinct subsets of C({n}, {k})");
        }
    }

    fn rows(v: &[Vec<f32>]) -> Vec<&[f32]> {
        v.iter().map(Vec::as_slice).collect()
    }

    /// Unit vectors in 2-D at angle `t`.
    fn at(t: f64) -> Vec<f32> {
        vec![t.cos() as f32, t.sin() as f32]
    }

    #[test]
    fn a_hand_worked_case() {
        // A at angle 0, B at 90°. X near A (s = cos t − sin t > 0), Y near B (s < 0).
        let (a, b) = (at(0.0), at(std::f64::consts::FRAC_PI_2));
        let xs = [at(0.1), at(0.2)];
        let ys = [at(1.4), at(1.5)];
        let (d, p, method) = weat(&rows(&xs), &rows(&ys), &[&a], &[&b]);
        let s = |t: f64| t.cos() - t.sin();
        let all = [s(0.1), s(0.2), s(1.4), s(1.5)];
        let m = all.iter().sum::<f64>() / 4.0;
        let sd = (all.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 3.0).sqrt();
        let want = ((s(0.1) + s(0.2)) / 2.0 - (s(1.4) + s(1.5)) / 2.0) / sd;
        // want is computed in f64 from the angles; the vectors are f32.
        assert!((d - want).abs() < 1e-5, "d {d} vs {want}");
        // Of the 6 partitions of 4 into 2 + 2, none beats the observed one (it is the largest).
        assert_eq!((p, method), (0.0, PValue::Exact { partitions: 6 }));
        // Swapping the targets negates d; every other partition now beats the observed one.
        let (d2, p2, _) = weat(&rows(&ys), &rows(&xs), &[&a], &[&b]);
        assert!((d2 + d).abs() < 1e-12);
        assert!((p2 - 5.0 / 6.0).abs() < 1e-12, "p {p2}");
    }

    #[test]
    fn large_sets_are_sampled_with_a_fixed_seed() {
        // 30 + 30 targets: C(60, 30) partitions, so sampled; the planted association gives the
        // smallest p the sampler can report, and the result repeats exactly.
        let xs: Vec<Vec<f32>> = (0..30).map(|i| at(0.1 + 0.01 * i as f64)).collect();
        let ys: Vec<Vec<f32>> = (0..30).map(|i| at(1.3 + 0.01 * i as f64)).collect();
        let (a, b) = (at(0.0), at(std::f64::consts::FRAC_PI_2));
        let first = weat(&rows(&xs), &rows(&ys), &[&a], &[&b]);
        assert_eq!(first.2, PValue::Sampled { samples: SAMPLES, seed: SEED });
        assert_eq!(first.1, 1.0 / (1 + SAMPLES) as f64);
        assert!(first.0 > 1.5, "d {}", first.0);
        assert_eq!(weat(&rows(&xs), &rows(&ys), &[&a], &[&b]), first);
    }
}
