//! The evaluation tasks: what each reads from the data directory and how it is scored.
//! Each task lists its texts up front, so a run embeds every distinct text once.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::cv::{fit_with_dev, fit_with_inner_cv, stratified_folds, subset};
use crate::data::{self, Labeled, LabeledPair, ScoredPair};
use crate::error::{EvalError, Result};
use crate::logreg::{Dataset, Solver, accuracy, f1, matthews};
use crate::stats::spearman;

/// Looks up the embedding of a text (every text of a task is embedded before scoring).
pub trait Lookup {
    fn get(&self, text: &str) -> &[f32];
    fn dim(&self) -> usize;
}

/// Embeddings by text.
pub struct Table {
    pub index: HashMap<String, usize>,
    pub data: Vec<f32>,
    pub dim: usize,
}

impl Lookup for Table {
    fn get(&self, text: &str) -> &[f32] {
        let i = self.index[text];
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
    fn dim(&self) -> usize {
        self.dim
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += (*x as f64) * (*y as f64);
        na += (*x as f64).powi(2);
        nb += (*y as f64).powi(2);
    }
    dot / (na.sqrt() * nb.sqrt()).max(1e-12)
}

/// Spearman ×100 of cosine similarity against gold scores.
pub fn sts_score(pairs: &[ScoredPair], emb: &dyn Lookup) -> f64 {
    let sims: Vec<f64> = pairs.iter().map(|p| cosine(emb.get(&p.a), emb.get(&p.b))).collect();
    let gold: Vec<f64> = pairs.iter().map(|p| p.score).collect();
    100.0 * spearman(&sims, &gold)
}

/// An STS dataset: one or more subsets (a SemEval year's sources, or one test file).
pub struct StsTask {
    pub name: String,
    pub subsets: Vec<(String, Vec<ScoredPair>)>,
    /// Gold files without inputs (STS13 SMT).
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StsResult {
    pub name: String,
    /// Spearman ×100 with all subsets pooled (the "all" setting); the headline number.
    pub all: f64,
    /// Unweighted mean of the subsets' Spearman ×100 (SentEval's per-year "mean").
    pub mean: f64,
    pub subsets: Vec<(String, f64, usize)>,
    pub pairs: usize,
    pub skipped: Vec<String>,
}

impl StsTask {
    pub fn load(name: &str, data: &Path) -> Result<Self> {
        let (subsets, skipped) = match name {
            "sts12" | "sts13" | "sts14" | "sts15" | "sts16" => data::sts_year(&data.join(name))?,
            "stsb" => (
                vec![(
                    "test".into(),
                    data::sts_benchmark(&data.join("stsbenchmark/sts-test.csv"))?,
                )],
                vec![],
            ),
            // The split training runs choose on (the trainer's dev metric), for comparing
            // settings without touching test.
            "stsb-dev" => (
                vec![("dev".into(), data::sts_benchmark(&data.join("stsbenchmark/sts-dev.csv"))?)],
                vec![],
            ),
            "sickr" => (
                vec![("test".into(), data::sick(&data.join("sick/SICK_test_annotated.txt"))?)],
                vec![],
            ),
            _ => return Err(EvalError::Invalid(format!("unknown STS task `{name}`"))),
        };
        Ok(Self { name: name.into(), subsets, skipped })
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.subsets.iter().flat_map(|(_, p)| p.iter().flat_map(|p| [p.a.as_str(), p.b.as_str()]))
    }

    pub fn score(&self, emb: &dyn Lookup) -> StsResult {
        let subsets: Vec<(String, f64, usize)> =
            self.subsets.iter().map(|(n, p)| (n.clone(), sts_score(p, emb), p.len())).collect();
        let pooled: Vec<ScoredPair> =
            self.subsets.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
        StsResult {
            name: self.name.clone(),
            all: sts_score(&pooled, emb),
            mean: subsets.iter().map(|s| s.1).sum::<f64>() / subsets.len().max(1) as f64,
            pairs: pooled.len(),
            subsets,
            skipped: self.skipped.clone(),
        }
    }
}

/// How a classification task is split.
pub enum Split {
    /// k-fold cross-validation over one labelled set (MR, CR, SUBJ, MPQA).
    KFold(Vec<Labeled>),
    /// Train / dev / test (SST-2); C chosen on dev.
    TrainDevTest(Vec<Labeled>, Vec<Labeled>, Vec<Labeled>),
    /// Train / test with C chosen by inner CV on train (TREC).
    TrainTest(Vec<Labeled>, Vec<Labeled>),
    /// Sentence pairs, train / test, features [u, v, |u−v|, u*v] (MRPC).
    Pairs(Vec<LabeledPair>, Vec<LabeledPair>),
    /// Scored pairs, train / test: a classifier over integer scores whose expected score is
    /// correlated (Spearman ×100) with the gold scores (STS-B in SentGLUE).
    Regression(Vec<ScoredPair>, Vec<ScoredPair>),
}

pub struct ClassifyTask {
    pub name: String,
    pub classes: usize,
    pub split: Split,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassifyResult {
    pub name: String,
    /// Accuracy ×100 on the test split (mean over outer folds for k-fold tasks).
    pub accuracy: f64,
    /// F1 ×100 of the positive class (pair tasks).
    pub f1: Option<f64>,
    /// Matthews correlation ×100 (binary single-sentence tasks with a train / test split, such
    /// as CoLA, which GLUE scores by it).
    pub matthews: Option<f64>,
    /// The chosen C (per outer fold for k-fold tasks).
    pub c: Vec<f64>,
    pub n_train: usize,
    pub n_test: usize,
}

/// Protocol settings shared by every classification task.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    pub outer_folds: usize,
    pub inner_folds: usize,
    pub seed: u64,
    pub solver: Solver,
}

impl Default for Protocol {
    fn default() -> Self {
        Self { outer_folds: 10, inner_folds: 5, seed: 1111, solver: Solver::default() }
    }
}

fn features(items: &[Labeled], emb: &dyn Lookup) -> (Vec<f32>, Vec<usize>) {
    let mut x = Vec::with_capacity(items.len() * emb.dim());
    for it in items {
        x.extend_from_slice(emb.get(&it.text));
    }
    (x, items.iter().map(|i| i.label).collect())
}

/// `[u, v, |u−v|, u*v]` per `(a, b, label)` (SentEval's pair features), with the labels.
fn pair_features<'a>(
    items: impl Iterator<Item = (&'a str, &'a str, usize)>,
    emb: &dyn Lookup,
) -> (Vec<f32>, Vec<usize>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (a, b, label) in items {
        let (u, v) = (emb.get(a), emb.get(b));
        x.extend_from_slice(u);
        x.extend_from_slice(v);
        x.extend(u.iter().zip(v).map(|(a, b)| (a - b).abs()));
        x.extend(u.iter().zip(v).map(|(a, b)| a * b));
        y.push(label);
    }
    (x, y)
}

fn labeled(v: &[LabeledPair]) -> impl Iterator<Item = (&str, &str, usize)> {
    v.iter().map(|p| (p.a.as_str(), p.b.as_str(), p.label))
}

/// Scored pairs with the score rounded to an integer class.
fn binned(v: &[ScoredPair]) -> impl Iterator<Item = (&str, &str, usize)> {
    v.iter().map(|p| (p.a.as_str(), p.b.as_str(), p.score.round() as usize))
}

impl ClassifyTask {
    pub fn load(name: &str, data: &Path) -> Result<Self> {
        let j = |p: &str| data.join(p);
        let (classes, split) = match name {
            "mr" => (
                2,
                Split::KFold(data::binary_files(
                    &j("mr/rt-polarity.pos"),
                    &j("mr/rt-polarity.neg"),
                )?),
            ),
            "cr" => {
                (2, Split::KFold(data::binary_files(&j("cr/custrev.pos"), &j("cr/custrev.neg"))?))
            }
            "subj" => (
                2,
                Split::KFold(data::binary_files(
                    &j("subj/subj.subjective"),
                    &j("subj/subj.objective"),
                )?),
            ),
            "mpqa" => {
                (2, Split::KFold(data::binary_files(&j("mpqa/mpqa.pos"), &j("mpqa/mpqa.neg"))?))
            }
            "sst2" => (
                2,
                Split::TrainDevTest(
                    data::sst2(&j("sst2/sentiment-train"))?,
                    data::sst2(&j("sst2/sentiment-dev"))?,
                    data::sst2(&j("sst2/sentiment-test"))?,
                ),
            ),
            "trec" => (
                6,
                Split::TrainTest(
                    data::trec(&j("trec/train_5500.label"))?,
                    data::trec(&j("trec/TREC_10.label"))?,
                ),
            ),
            "mrpc" => (
                2,
                Split::Pairs(
                    data::mrpc(&j("mrpc/msr_paraphrase_train.txt"))?,
                    data::mrpc(&j("mrpc/msr_paraphrase_test.txt"))?,
                ),
            ),
            _ => return Err(EvalError::Invalid(format!("unknown transfer task `{name}`"))),
        };
        Ok(Self { name: name.into(), classes, split })
    }

    pub fn texts(&self) -> Vec<&str> {
        fn t(v: &[Labeled]) -> Vec<&str> {
            v.iter().map(|l| l.text.as_str()).collect()
        }
        match &self.split {
            Split::KFold(a) => t(a),
            Split::TrainDevTest(a, b, c) => [t(a), t(b), t(c)].concat(),
            Split::TrainTest(a, b) => [t(a), t(b)].concat(),
            Split::Pairs(a, b) => {
                a.iter().chain(b).flat_map(|p| [p.a.as_str(), p.b.as_str()]).collect()
            }
            Split::Regression(a, b) => {
                a.iter().chain(b).flat_map(|p| [p.a.as_str(), p.b.as_str()]).collect()
            }
        }
    }

    pub fn score(&self, emb: &dyn Lookup, proto: &Protocol) -> ClassifyResult {
        let classes = self.classes;
        let fit_eval = |xtr: &[f32], ytr: &[usize], d: usize, xte: &[f32]| {
            let train = Dataset { x: xtr, d, y: ytr, classes };
            let (model, c) = fit_with_inner_cv(&train, proto.inner_folds, proto.seed, proto.solver);
            (model.predict(xte), c)
        };
        let d = emb.dim();
        match &self.split {
            Split::KFold(items) => {
                let (x, y) = features(items, emb);
                let folds = stratified_folds(&y, proto.outer_folds, proto.seed);
                let (mut acc, mut cs) = (0.0, Vec::new());
                for f in 0..proto.outer_folds {
                    let (xtr, ytr) = subset(&x, d, &y, |i| folds[i] != f);
                    let (xte, yte) = subset(&x, d, &y, |i| folds[i] == f);
                    let (pred, c) = fit_eval(&xtr, &ytr, d, &xte);
                    acc += accuracy(&pred, &yte);
                    cs.push(c);
                }
                let n = items.len();
                ClassifyResult {
                    name: self.name.clone(),
                    accuracy: 100.0 * acc / proto.outer_folds as f64,
                    f1: None,
                    matthews: None,
                    c: cs,
                    n_train: n,
                    n_test: n,
                }
            }
            Split::TrainDevTest(tr, dv, te) => {
                let ((xtr, ytr), (xdv, ydv), (xte, yte)) =
                    (features(tr, emb), features(dv, emb), features(te, emb));
                let train = Dataset { x: &xtr, d, y: &ytr, classes };
                let (model, c) = fit_with_dev(&train, &xdv, &ydv, proto.solver);
                let acc = accuracy(&model.predict(&xte), &yte);
                ClassifyResult {
                    name: self.name.clone(),
                    accuracy: 100.0 * acc,
                    f1: None,
                    matthews: None,
                    c: vec![c],
                    n_train: tr.len(),
                    n_test: te.len(),
                }
            }
            Split::TrainTest(tr, te) => {
                let ((xtr, ytr), (xte, yte)) = (features(tr, emb), features(te, emb));
                let (pred, c) = fit_eval(&xtr, &ytr, d, &xte);
                ClassifyResult {
                    name: self.name.clone(),
                    accuracy: 100.0 * accuracy(&pred, &yte),
                    f1: None,
                    matthews: (self.classes == 2).then(|| 100.0 * matthews(&pred, &yte)),
                    c: vec![c],
                    n_train: tr.len(),
                    n_test: te.len(),
                }
            }
            Split::Pairs(tr, te) => {
                let ((xtr, ytr), (xte, yte)) =
                    (pair_features(labeled(tr), emb), pair_features(labeled(te), emb));
                let (pred, c) = fit_eval(&xtr, &ytr, 4 * d, &xte);
                ClassifyResult {
                    name: self.name.clone(),
                    accuracy: 100.0 * accuracy(&pred, &yte),
                    f1: Some(100.0 * f1(&pred, &yte)),
                    matthews: None,
                    c: vec![c],
                    n_train: tr.len(),
                    n_test: te.len(),
                }
            }
            Split::Regression(tr, te) => {
                let ((xtr, ytr), (xte, _)) =
                    (pair_features(binned(tr), emb), pair_features(binned(te), emb));
                let classes = ytr.iter().copied().max().unwrap_or(0) + 1;
                let train = Dataset { x: &xtr, d: 4 * d, y: &ytr, classes };
                let (model, c) =
                    fit_with_inner_cv(&train, proto.inner_folds, proto.seed, proto.solver);
                let expected: Vec<f64> = model
                    .proba(&xte)
                    .chunks(classes)
                    .map(|p| p.iter().enumerate().map(|(k, q)| k as f64 * q).sum())
                    .collect();
                let gold: Vec<f64> = te.iter().map(|p| p.score).collect();
                ClassifyResult {
                    name: self.name.clone(),
                    accuracy: 100.0 * spearman(&expected, &gold),
                    f1: None,
                    matthews: None,
                    c: vec![c],
                    n_train: tr.len(),
                    n_test: te.len(),
                }
            }
        }
    }
}

/// Alignment and uniformity (Wang & Isola 2020, §4.1), on L2-normalised embeddings:
/// alignment = E‖f(x) − f(y)‖² over positive pairs (STS-B test, gold ≥ 4);
/// uniformity = log E exp(−2‖f(x) − f(y)‖²) over all pairs of distinct STS-B test sentences.
#[derive(Debug, Clone, Serialize)]
pub struct Geometry {
    pub alignment: f64,
    pub uniformity: f64,
    pub positive_pairs: usize,
    pub sentences: usize,
}

/// Intent retrieval, a support site's search: each query's nearest indexed query (cosine,
/// ties to the earlier one) must share its intent; the score is that accuracy ×100 (1-NN).
/// `banking77`: the Banking77 train queries not in dev are the index, its test queries the
/// queries. `banking77-dev`: the dev queries (every 10th train record, [`is_dev_record`])
/// against the same index, for choosing settings without the test split.
pub struct RetrievalTask {
    pub name: String,
    pub index: Vec<Labeled>,
    pub queries: Vec<Labeled>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RetrievalResult {
    pub name: String,
    /// Queries whose nearest indexed text has their label, ×100.
    pub accuracy: f64,
    pub queries: usize,
    pub indexed: usize,
}

/// Banking77's dev split: train record `i` (0-based, header excluded) with `i % 10 == 9`.
/// The prompt recipe (trainer/recipes/prompt-banking77) trains on the other records only.
pub fn is_dev_record(i: usize) -> bool {
    i % 10 == 9
}

impl RetrievalTask {
    pub fn load(name: &str, data: &Path) -> Result<Self> {
        let dir = data.join("train/banking77");
        let mut intents = Vec::new();
        let train = data::banking77(&dir.join("train.csv"), &mut intents)?;
        let (mut index, mut dev) = (Vec::new(), Vec::new());
        for (i, q) in train.into_iter().enumerate() {
            if is_dev_record(i) { dev.push(q) } else { index.push(q) }
        }
        let queries = match name {
            "banking77" => data::banking77(&dir.join("test.csv"), &mut intents)?,
            "banking77-dev" => dev,
            other => return Err(EvalError::Invalid(format!("unknown retrieval task `{other}`"))),
        };
        Ok(Self { name: name.into(), index, queries })
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.index.iter().chain(&self.queries).map(|q| q.text.as_str())
    }

    pub fn score(&self, emb: &dyn Lookup) -> RetrievalResult {
        let hits = self
            .queries
            .iter()
            .filter(|q| {
                let v = emb.get(&q.text);
                let best = self.index.iter().map(|d| cosine(v, emb.get(&d.text))).enumerate().fold(
                    (usize::MAX, f64::NEG_INFINITY),
                    |b, (i, s)| if s > b.1 { (i, s) } else { b },
                );
                self.index.get(best.0).is_some_and(|d| d.label == q.label)
            })
            .count();
        RetrievalResult {
            name: self.name.clone(),
            accuracy: 100.0 * hits as f64 / self.queries.len().max(1) as f64,
            queries: self.queries.len(),
            indexed: self.index.len(),
        }
    }
}

pub struct GeometryTask {
    pub pairs: Vec<ScoredPair>,
    pub sentences: Vec<String>,
}

fn unit(v: &[f32]) -> Vec<f64> {
    let n = v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt().max(1e-12);
    v.iter().map(|x| *x as f64 / n).collect()
}

fn sq_dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

impl GeometryTask {
    pub fn load(data: &Path) -> Result<Self> {
        let pairs = data::sts_benchmark(&data.join("stsbenchmark/sts-test.csv"))?;
        let mut sentences: Vec<String> =
            pairs.iter().flat_map(|p| [p.a.clone(), p.b.clone()]).collect();
        sentences.sort();
        sentences.dedup();
        Ok(Self { pairs, sentences })
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.sentences.iter().map(String::as_str)
    }

    pub fn score(&self, emb: &dyn Lookup) -> Geometry {
        let pos: Vec<&ScoredPair> = self.pairs.iter().filter(|p| p.score >= 4.0).collect();
        let alignment =
            pos.iter().map(|p| sq_dist(&unit(emb.get(&p.a)), &unit(emb.get(&p.b)))).sum::<f64>()
                / pos.len().max(1) as f64;
        let vecs: Vec<Vec<f64>> = self.sentences.iter().map(|s| unit(emb.get(s))).collect();
        let (mut acc, mut count) = (0.0f64, 0usize);
        for i in 0..vecs.len() {
            for j in i + 1..vecs.len() {
                acc += (-2.0 * sq_dist(&vecs[i], &vecs[j])).exp();
                count += 1;
            }
        }
        Geometry {
            alignment,
            uniformity: (acc / count.max(1) as f64).ln(),
            positive_pairs: pos.len(),
            sentences: vecs.len(),
        }
    }
}
