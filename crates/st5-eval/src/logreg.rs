//! L2-regularised logistic regression on frozen embeddings, the SentEval classifier, with the
//! objective scikit-learn's `LogisticRegression(C=c, solver="lbfgs")` minimises:
//! binary (one weight vector, sigmoid) for 2 classes, multinomial (softmax) otherwise, the
//! intercept unpenalised:  mean_i loss_i + ‖W‖² / (2 C n).
//! Solved by L-BFGS (Nocedal & Wright 2006, Alg. 7.4–7.5) with a backtracking Armijo search.

/// Features `[n, d]` row-major with labels in `0..classes`.
pub struct Dataset<'a> {
    pub x: &'a [f32],
    pub d: usize,
    pub y: &'a [usize],
    pub classes: usize,
}

impl Dataset<'_> {
    pub fn n(&self) -> usize {
        self.y.len()
    }
}

/// A fitted model: `w` is `[m, d]` row-major (one weight row per output) with `m = 1` for
/// binary, `classes` otherwise.
#[derive(Debug, Clone)]
pub struct LogReg {
    pub w: Vec<f64>,
    pub b: Vec<f64>,
    pub d: usize,
    pub classes: usize,
}

/// Solver settings.
#[derive(Debug, Clone, Copy)]
pub struct Solver {
    pub max_iter: usize,
    /// Stop when the largest gradient component is below this.
    pub tol: f64,
}

/// scikit-learn's defaults for `LogisticRegression` (`max_iter=100`, `tol=1e-4`), which
/// SentEval's scikit-learn path uses.
impl Default for Solver {
    fn default() -> Self {
        Self { max_iter: 100, tol: 1e-4 }
    }
}

fn outputs(classes: usize) -> usize {
    if classes == 2 { 1 } else { classes }
}

/// Worker threads for a pass over `n` rows of width `d`: one for small problems, where
/// spawning costs more than it saves.
fn threads_for(n: usize, d: usize) -> usize {
    if n * d < 1 << 18 {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |t| t.get()).min(8)
    }
}

/// `a · b` in f32 with 16 independent lanes, so it vectorises without reassociation flags.
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scores `[n, m]` of `x` under `w` (`[m, d]`, one row per output) and `b`, threads over rows.
fn scores(x: &[f32], d: usize, w: &[f64], b: &[f64]) -> Vec<f64> {
    let m = b.len();
    let n = x.len() / d.max(1);
    let wf: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let mut out = vec![0.0f64; n * m];
    let rows_per = n.div_ceil(threads_for(n, d)).max(1);
    std::thread::scope(|s| {
        for (ci, chunk) in out.chunks_mut(rows_per * m).enumerate() {
            let wf = &wf;
            s.spawn(move || {
                for (r, o) in chunk.chunks_mut(m).enumerate() {
                    let row = &x[(ci * rows_per + r) * d..][..d];
                    for (j, oj) in o.iter_mut().enumerate() {
                        *oj = dot_f32(row, &wf[j * d..(j + 1) * d]) as f64 + b[j];
                    }
                }
            });
        }
    });
    out
}

/// `Rᵀ X` → `[m, d]` (the weight gradient, one row per output), threads over rows, summed in f64.
fn rt_x(x: &[f32], d: usize, r: &[f64], m: usize) -> Vec<f64> {
    let n = r.len() / m;
    let rows_per = n.div_ceil(threads_for(n, d)).max(1);
    let parts: Vec<Vec<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n.div_ceil(rows_per))
            .map(|t| {
                s.spawn(move || {
                    let mut g = vec![0.0f64; m * d];
                    for i in t * rows_per..((t + 1) * rows_per).min(n) {
                        let row = &x[i * d..][..d];
                        for j in 0..m {
                            let rij = r[i * m + j];
                            if rij != 0.0 {
                                for (gk, &xk) in g[j * d..(j + 1) * d].iter_mut().zip(row) {
                                    *gk += xk as f64 * rij;
                                }
                            }
                        }
                    }
                    g
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    parts
        .into_iter()
        .reduce(|mut a, b| {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            a
        })
        .unwrap_or_else(|| vec![0.0; m * d])
}

/// Objective and gradient at `theta = [w (m×d), b (m)]`.
fn objective(data: &Dataset, c: f64, theta: &[f64]) -> (f64, Vec<f64>) {
    let (d, m, n) = (data.d, outputs(data.classes), data.n());
    let (w, b) = theta.split_at(d * m);
    let s = scores(data.x, d, w, b);
    let mut loss = 0.0;
    let mut resid = vec![0.0f64; n * m];
    for i in 0..n {
        let si = &s[i * m..(i + 1) * m];
        let y = data.y[i];
        if m == 1 {
            // log(1 + exp(-t z)) with t = ±1, computed stably.
            let z = si[0];
            let t = if y == 1 { 1.0 } else { -1.0 };
            let tz = t * z;
            loss += if tz > 0.0 { (-tz).exp().ln_1p() } else { -tz + tz.exp().ln_1p() };
            let p1 = 1.0 / (1.0 + (-z).exp());
            resid[i] = p1 - if y == 1 { 1.0 } else { 0.0 };
        } else {
            let max = si.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = max + si.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            loss += lse - si[y];
            for j in 0..m {
                resid[i * m + j] = (si[j] - lse).exp() - if j == y { 1.0 } else { 0.0 };
            }
        }
    }
    let inv_n = 1.0 / n as f64;
    let reg = 1.0 / (c * n as f64);
    let mut grad = rt_x(data.x, d, &resid, m);
    let mut value = loss * inv_n;
    for (g, wv) in grad.iter_mut().zip(w) {
        *g = *g * inv_n + reg * wv;
        value += 0.5 * reg * wv * wv;
    }
    for j in 0..m {
        grad.push((0..n).map(|i| resid[i * m + j]).sum::<f64>() * inv_n);
    }
    (value, grad)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl LogReg {
    /// Fits with inverse regularisation strength `c`, starting from `warm` when given (same shape).
    pub fn fit(data: &Dataset, c: f64, solver: Solver, warm: Option<&LogReg>) -> LogReg {
        let (d, m) = (data.d, outputs(data.classes));
        let mut theta: Vec<f64> = match warm {
            Some(w) if w.d == d && w.b.len() == m => w.w.iter().chain(&w.b).copied().collect(),
            _ => vec![0.0; d * m + m],
        };
        let (mut f, mut g) = objective(data, c, &theta);
        let history = 10;
        let mut s_hist: Vec<Vec<f64>> = Vec::new();
        let mut y_hist: Vec<Vec<f64>> = Vec::new();
        for _ in 0..solver.max_iter {
            if g.iter().fold(0.0f64, |a, v| a.max(v.abs())) < solver.tol {
                break;
            }
            // Two-loop recursion: direction = -H g.
            let mut q = g.clone();
            let mut alphas = Vec::with_capacity(s_hist.len());
            for (s, y) in s_hist.iter().zip(&y_hist).rev() {
                let a = dot(s, &q) / dot(y, s);
                q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
                alphas.push(a);
            }
            let gamma = match (s_hist.last(), y_hist.last()) {
                (Some(s), Some(y)) => dot(s, y) / dot(y, y),
                _ => 1.0 / g.iter().map(|v| v.abs()).fold(0.0, f64::max).max(1.0),
            };
            q.iter_mut().for_each(|v| *v *= gamma);
            for ((s, y), a) in s_hist.iter().zip(&y_hist).zip(alphas.into_iter().rev()) {
                let bta = dot(y, &q) / dot(y, s);
                q.iter_mut().zip(s).for_each(|(qi, si)| *qi += (a - bta) * si);
            }
            let mut dir: Vec<f64> = q.iter().map(|v| -v).collect();
            let mut slope = dot(&g, &dir);
            if slope >= 0.0 {
                // Not a descent direction: restart from steepest descent.
                s_hist.clear();
                y_hist.clear();
                dir = g.iter().map(|v| -v).collect();
                slope = dot(&g, &dir);
            }
            let mut step = 1.0;
            let mut accepted = None;
            for _ in 0..40 {
                let cand: Vec<f64> = theta.iter().zip(&dir).map(|(t, dv)| t + step * dv).collect();
                let (fc, gc) = objective(data, c, &cand);
                if fc <= f + 1e-4 * step * slope {
                    accepted = Some((cand, fc, gc));
                    break;
                }
                step *= 0.5;
            }
            let Some((cand, fc, gc)) = accepted else { break };
            let s: Vec<f64> = cand.iter().zip(&theta).map(|(a, b)| a - b).collect();
            let y: Vec<f64> = gc.iter().zip(&g).map(|(a, b)| a - b).collect();
            if dot(&s, &y) > 1e-12 {
                s_hist.push(s);
                y_hist.push(y);
                if s_hist.len() > history {
                    s_hist.remove(0);
                    y_hist.remove(0);
                }
            }
            let converged = (f - fc).abs() <= 1e-12 * f.abs().max(1.0);
            theta = cand;
            f = fc;
            g = gc;
            if converged {
                break;
            }
        }
        let b = theta.split_off(d * m);
        LogReg { w: theta, b, d, classes: data.classes }
    }

    /// Class probabilities `[n, classes]` of each row of `x` (`[n, d]`).
    pub fn proba(&self, x: &[f32]) -> Vec<f64> {
        let s = scores(x, self.d, &self.w, &self.b);
        let m = self.b.len();
        s.chunks(m)
            .flat_map(|row| {
                if m == 1 {
                    let p = 1.0 / (1.0 + (-row[0]).exp());
                    vec![1.0 - p, p]
                } else {
                    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
                    let z: f64 = e.iter().sum();
                    e.into_iter().map(|v| v / z).collect()
                }
            })
            .collect()
    }

    /// Predicted class of each row of `x` (`[n, d]`): the most probable, the lower on a tie.
    pub fn predict(&self, x: &[f32]) -> Vec<usize> {
        self.proba(x)
            .chunks(self.classes)
            .map(|p| {
                p.iter()
                    .enumerate()
                    .fold(
                        (0, f64::NEG_INFINITY),
                        |best, (j, &v)| if v > best.1 { (j, v) } else { best },
                    )
                    .0
            })
            .collect()
    }
}

/// Fraction of equal entries.
pub fn accuracy(pred: &[usize], gold: &[usize]) -> f64 {
    pred.iter().zip(gold).filter(|(a, b)| a == b).count() as f64 / gold.len().max(1) as f64
}

/// F1 of the positive class (label 1), as reported for MRPC.
pub fn f1(pred: &[usize], gold: &[usize]) -> f64 {
    let tp = pred.iter().zip(gold).filter(|&(&p, &g)| p == 1 && g == 1).count() as f64;
    let fp = pred.iter().zip(gold).filter(|&(&p, &g)| p == 1 && g == 0).count() as f64;
    let fneg = pred.iter().zip(gold).filter(|&(&p, &g)| p == 0 && g == 1).count() as f64;
    if tp == 0.0 { 0.0 } else { 2.0 * tp / (2.0 * tp + fp + fneg) }
}

/// Matthews correlation coefficient of binary predictions (label 1 positive), as GLUE scores
/// CoLA: (tp·tn − fp·fn) / √((tp+fp)(tp+fn)(tn+fp)(tn+fn)), and 0 when a factor is zero
/// (scikit-learn's `matthews_corrcoef` convention).
pub fn matthews(pred: &[usize], gold: &[usize]) -> f64 {
    let count = |p: usize, g: usize| {
        pred.iter().zip(gold).filter(|&(&a, &b)| a == p && b == g).count() as f64
    };
    let (tp, tn, fp, fneg) = (count(1, 1), count(0, 0), count(1, 0), count(0, 1));
    let denom = ((tp + fp) * (tp + fneg) * (tn + fp) * (tn + fneg)).sqrt();
    if denom == 0.0 { 0.0 } else { (tp * tn - fp * fneg) / denom }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Matthews correlation on small tables, against values from its definition (and
    /// scikit-learn's `matthews_corrcoef` on the same lists).
    #[test]
    fn matthews_correlation_table() {
        let cases: [(&[usize], &[usize], f64); 5] = [
            (&[1, 0, 1, 0], &[1, 0, 1, 0], 1.0),
            (&[0, 1, 0, 1], &[1, 0, 1, 0], -1.0),
            // tp 2, tn 1, fp 1, fn 0: (2 − 0) / √(3·2·2·1)
            (&[1, 1, 1, 0], &[1, 1, 0, 0], 2.0 / 12f64.sqrt()),
            // One predicted class only: a zero factor, scored 0.
            (&[1, 1, 1, 1], &[1, 0, 1, 0], 0.0),
            (&[], &[], 0.0),
        ];
        for (pred, gold, want) in cases {
            let got = matthews(pred, gold);
            assert!((got - want).abs() < 1e-12, "{pred:?} vs {gold:?}: {got} != {want}");
        }
    }

    /// The gradient matches central differences, binary and multinomial. Scores are computed in
    /// f32, so the step is 1e-3 and the tolerance 1e-4 (f32 rounding over the step).
    #[test]
    fn gradient_matches_finite_differences() {
        let x: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
        for (classes, y) in [(2, vec![0, 1, 1, 0, 1, 0]), (3, vec![0, 1, 2, 2, 1, 0])] {
            let data = Dataset { x: &x, d: 4, y: &y, classes };
            let m = outputs(classes);
            let theta: Vec<f64> = (0..4 * m + m).map(|i| (i as f64 * 0.37).sin() * 0.5).collect();
            let (_, g) = objective(&data, 0.7, &theta);
            for k in 0..theta.len() {
                let h = 1e-3;
                let mut p = theta.clone();
                p[k] += h;
                let mut q = theta.clone();
                q[k] -= h;
                let num = (objective(&data, 0.7, &p).0 - objective(&data, 0.7, &q).0) / (2.0 * h);
                assert!(
                    (num - g[k]).abs() < 1e-4,
                    "classes {classes}, param {k}: {num} vs {}",
                    g[k]
                );
            }
        }
    }

    #[test]
    fn metrics() {
        assert_eq!(accuracy(&[1, 0, 1], &[1, 1, 1]), 2.0 / 3.0);
        assert_eq!(f1(&[1, 0, 1, 0], &[1, 1, 0, 0]), 0.5);
        assert_eq!(f1(&[0, 0], &[1, 0]), 0.0);
    }
}
