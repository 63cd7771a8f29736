//! Correlations: Pearson, and Spearman as Pearson on average ranks (ties share the mean of
//! their positions), as `scipy.stats.spearmanr` computes it.

/// 1-based ranks with ties given the average of the positions they span.
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// Pearson correlation; NaN when either side is constant or shorter than 2.
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len(), "pearson: lengths differ");
    let n = x.len() as f64;
    if x.len() < 2 {
        return f64::NAN;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    sxy / (sxx * syy).sqrt()
}

/// Spearman's rank correlation with average ranks for ties.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&average_ranks(x), &average_ranks(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_average_ties() {
        let cases: [(&[f64], &[f64]); 4] = [
            (&[], &[]),
            (&[3.0, 1.0, 2.0], &[3.0, 1.0, 2.0]),
            (&[1.0, 1.0, 1.0], &[2.0, 2.0, 2.0]),
            (&[5.0, 1.0, 5.0, 2.0, 5.0], &[4.0, 1.0, 4.0, 2.0, 4.0]),
        ];
        for (x, want) in cases {
            assert_eq!(average_ranks(x), want, "{x:?}");
        }
    }

    #[test]
    fn perfect_and_degenerate_correlations() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 90.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!(spearman(&[1.0, 1.0], &[1.0, 2.0]).is_nan());
    }
}
