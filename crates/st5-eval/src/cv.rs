//! Stratified k-fold splits with a seeded shuffle, and C selection by inner cross-validation,
//! the protocol of SentEval's `KFoldClassifier` (grid 2^-2 … 2^3).

use crate::logreg::{Dataset, LogReg, Solver, accuracy};

/// The L2 grid SentEval searches: C in {2^-2, …, 2^3}.
pub const C_GRID: [f64; 6] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0];

pub use st5_format::rng::Rng;

/// Test-fold membership for `k` stratified folds: each class is shuffled and dealt round-robin.
pub fn stratified_folds(labels: &[usize], k: usize, seed: u64) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    let classes = labels.iter().copied().max().map_or(0, |m| m + 1);
    let mut fold = vec![0; labels.len()];
    let mut next = 0;
    for c in 0..classes {
        let mut idx: Vec<usize> = (0..labels.len()).filter(|&i| labels[i] == c).collect();
        rng.shuffle(&mut idx);
        for i in idx {
            fold[i] = next % k;
            next += 1;
        }
    }
    fold
}

/// Rows of `x` (`[n, d]`) and `y` selected by `keep`.
pub fn subset(
    x: &[f32],
    d: usize,
    y: &[usize],
    keep: impl Fn(usize) -> bool,
) -> (Vec<f32>, Vec<usize>) {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for (i, &label) in y.iter().enumerate() {
        if keep(i) {
            xs.extend_from_slice(&x[i * d..(i + 1) * d]);
            ys.push(label);
        }
    }
    (xs, ys)
}

/// Picks C from [`C_GRID`] by `k`-fold inner cross-validation on `data`, warm-starting each fit
/// from the previous C's solution; returns the model refitted on all of `data` with that C.
pub fn fit_with_inner_cv(data: &Dataset, k: usize, seed: u64, solver: Solver) -> (LogReg, f64) {
    let folds = stratified_folds(data.y, k, seed);
    let mut best = (f64::NEG_INFINITY, C_GRID[0]);
    let mut warm: Vec<Option<LogReg>> = vec![None; k];
    for &c in &C_GRID {
        let mut acc = 0.0;
        for (f, warm) in warm.iter_mut().enumerate() {
            let (xtr, ytr) = subset(data.x, data.d, data.y, |i| folds[i] != f);
            let (xte, yte) = subset(data.x, data.d, data.y, |i| folds[i] == f);
            let train = Dataset { x: &xtr, d: data.d, y: &ytr, classes: data.classes };
            let model = LogReg::fit(&train, c, solver, warm.as_ref());
            acc += accuracy(&model.predict(&xte), &yte);
            *warm = Some(model);
        }
        if acc > best.0 {
            best = (acc, c);
        }
    }
    (LogReg::fit(data, best.1, solver, None), best.1)
}

/// Picks C on a dev set, then returns the model trained on `train` with it.
pub fn fit_with_dev(
    train: &Dataset,
    dev_x: &[f32],
    dev_y: &[usize],
    solver: Solver,
) -> (LogReg, f64) {
    let mut best: Option<(f64, LogReg, f64)> = None;
    let mut warm: Option<LogReg> = None;
    for &c in &C_GRID {
        let model = LogReg::fit(train, c, solver, warm.as_ref());
        let acc = accuracy(&model.predict(dev_x), dev_y);
        if best.as_ref().is_none_or(|b| acc > b.0) {
            best = Some((acc, model.clone(), c));
        }
        warm = Some(model);
    }
    let (_, model, c) = best.expect("C grid is not empty");
    (model, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_are_stratified_and_cover_everything() {
        let labels: Vec<usize> = (0..103).map(|i| usize::from(i % 3 == 0)).collect();
        for k in [2, 5, 10] {
            let folds = stratified_folds(&labels, k, 1111);
            for f in 0..k {
                let in_fold: Vec<usize> = (0..labels.len()).filter(|&i| folds[i] == f).collect();
                let pos = in_fold.iter().filter(|&&i| labels[i] == 1).count();
                let per = 35.0 / k as f64;
                assert!(
                    (pos as f64 - per).abs() <= 1.0,
                    "k={k} fold {f}: {pos} positives, expected ~{per}"
                );
            }
            assert_eq!(stratified_folds(&labels, k, 1111), folds, "deterministic");
        }
    }
}
