//! `st5-eval`: Sentence-T5 evaluation as the paper does it (Ni et al. 2021, §5): STS12–16, STS-B
//! and SICK-R (Spearman ×100 of cosine similarity), the SentEval transfer tasks (logistic
//! regression on frozen embeddings), SentGLUE, alignment/uniformity, and the WEAT/SEAT bias
//! tests ([`bias`]); and retrieval over any corpus in BEIR's layout ([`retrieval`]: nDCG@10,
//! recall@10 and @100, MRR@10).
//!
//! [`run`] loads every requested task, embeds each distinct text once through the caller's
//! [`Embed`] (so it is independent of model and device), has it search the retrieval tasks'
//! corpora, then scores.

pub mod bias;
pub mod cv;
pub mod data;
pub mod error;
pub mod fuzzing;
pub mod glue;
pub mod logreg;
pub mod retrieval;
pub mod stats;
pub mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

pub use error::{EvalError, Result};
use retrieval::{BeirResult, BeirTask};
use st5_format::search::{Fusion, SearchMode, fuse};
use tasks::{
    ClassifyResult, ClassifyTask, Geometry, GeometryTask, Protocol, RetrievalResult, RetrievalTask,
    StsResult, StsTask, Table,
};

pub const STS_TASKS: [&str; 7] = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"];
pub const TRANSFER_TASKS: [&str; 7] = ["mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc"];
/// STS tasks outside Avg7: STS-B dev, the split training decisions are made on.
pub const DEV_TASKS: [&str; 1] = ["stsb-dev"];
/// Domain retrieval tasks (not in the paper's set; what a soft prompt is tuned for).
pub const RETRIEVAL_TASKS: [&str; 2] = ["banking77", "banking77-dev"];

/// Expands `sts,transfer,sentglue,geometry,bias` (groups) and single task names, keeping order;
/// `retrieval:DIR[@SPLIT]` ([`retrieval::parse_spec`]) names a BEIR directory.
pub fn expand_tasks(spec: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let names: Vec<&str> = match t {
            t if retrieval::parse_spec(t).transpose()?.is_some() => vec![t],
            "sts" => STS_TASKS.to_vec(),
            "transfer" => TRANSFER_TASKS.to_vec(),
            "sentglue" | "geometry" | "bias" => vec![t],
            t if [&STS_TASKS[..], &DEV_TASKS, &TRANSFER_TASKS, &RETRIEVAL_TASKS]
                .concat()
                .contains(&t) =>
            {
                vec![t]
            }
            other => {
                return Err(EvalError::Invalid(format!(
                    "unknown task `{other}` (groups: sts, transfer, sentglue, geometry, bias; tasks: {}, {}, {}, {}; a BEIR directory: retrieval:DIR or retrieval:DIR@SPLIT)",
                    STS_TASKS.join(", "),
                    DEV_TASKS.join(", "),
                    TRANSFER_TASKS.join(", "),
                    RETRIEVAL_TASKS.join(", ")
                )));
            }
        };
        for n in names {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    Ok(out)
}

/// What to evaluate and where the data is.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// `shared/data`: the evaluation sets.
    pub data_dir: PathBuf,
    /// Optional GLUE directory (`TASK/{train,dev}.tsv`) for the SentGLUE tasks not in `data_dir`.
    pub glue_dir: Option<PathBuf>,
    /// Expanded task names (see [`expand_tasks`]).
    pub tasks: Vec<String>,
    pub protocol: Protocol,
    /// Text put before each retrieval query and each document (an instruction model's `query: `
    /// and `passage: `); empty for most models.
    pub query_prefix: String,
    pub document_prefix: String,
    /// How BEIR retrieval ranks: by vector, by keyword (BM25 over the raw texts, st5's search
    /// library), or both fused by each of `fusions`. Empty: vector only.
    pub modes: Vec<SearchMode>,
    /// The fusions a hybrid run is measured with (empty: the library's default).
    pub fusions: Vec<Fusion>,
}

/// What [`run`] asks of the model under evaluation: st5-eval runs no model and knows no device.
/// A closure `FnMut(&[String]) -> Result<(Vec<f32>, usize)>` is one, searching exactly.
pub trait Embed {
    /// `texts` → (row-major `[n, dim]`, `dim`).
    fn embed(&mut self, texts: &[String]) -> Result<(Vec<f32>, usize)>;
    /// How many of `texts` are longer than the model reads and are truncated (`None`: unknown).
    fn truncated(&mut self, _texts: &[String]) -> Result<Option<usize>> {
        Ok(None)
    }
    /// The `k` best rows of `corpus` (unit rows `[n, dim]`) for each unit query, best first, as
    /// (row, score): where a caller measures its own index (quantized codes, a GPU).
    fn search(
        &mut self,
        corpus: &[f32],
        dim: usize,
        queries: &[f32],
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        Ok(retrieval::exact_search(corpus, dim, queries, k))
    }
    /// What [`search`](Self::search) runs on, for the report (`none`: exact f32).
    fn codes(&self) -> String {
        "none".into()
    }
}

impl<F: FnMut(&[String]) -> Result<(Vec<f32>, usize)>> Embed for F {
    fn embed(&mut self, texts: &[String]) -> Result<(Vec<f32>, usize)> {
        self(texts)
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub sts: Vec<StsResult>,
    /// Mean of the seven STS headline numbers, when all seven ran.
    pub avg7: Option<f64>,
    pub transfer: Vec<ClassifyResult>,
    pub transfer_avg: Option<f64>,
    pub sentglue: Vec<ClassifyResult>,
    pub sentglue_skipped: Vec<(String, String)>,
    pub geometry: Option<Geometry>,
    /// Domain retrieval ([`RETRIEVAL_TASKS`]).
    pub retrieval: Vec<RetrievalResult>,
    /// Retrieval over BEIR directories (`retrieval:DIR`).
    pub beir: Vec<BeirResult>,
    /// WEAT (words) and SEAT (sentences), in [`bias::TESTS`] order.
    pub bias: Vec<bias::WeatResult>,
    /// Distinct texts embedded (each once, across all tasks).
    pub texts_embedded: usize,
    pub seconds_embedding: f64,
    pub seconds_total: f64,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = v.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Runs the tasks in `options` on `model`.
pub fn run(options: &EvalOptions, model: &mut dyn Embed) -> Result<Report> {
    let t0 = Instant::now();
    let data = &options.data_dir;
    let sts: Vec<StsTask> = options
        .tasks
        .iter()
        .filter(|t| STS_TASKS.contains(&t.as_str()) || DEV_TASKS.contains(&t.as_str()))
        .map(|t| StsTask::load(t, data))
        .collect::<Result<_>>()?;
    let transfer: Vec<ClassifyTask> = options
        .tasks
        .iter()
        .filter(|t| TRANSFER_TASKS.contains(&t.as_str()))
        .map(|t| ClassifyTask::load(t, data))
        .collect::<Result<_>>()?;
    let (sentglue, sentglue_skipped) = if options.tasks.iter().any(|t| t == "sentglue") {
        glue::sentglue_tasks(data, options.glue_dir.as_deref())?
    } else {
        (Vec::new(), Vec::new())
    };
    let geometry = if options.tasks.iter().any(|t| t == "geometry") {
        Some(GeometryTask::load(data)?)
    } else {
        None
    };
    let retrieval: Vec<RetrievalTask> = options
        .tasks
        .iter()
        .filter(|t| RETRIEVAL_TASKS.contains(&t.as_str()))
        .map(|t| RetrievalTask::load(t, data))
        .collect::<Result<_>>()?;
    // The splits asked of one directory share its corpus: (directory, [(spec order, split)]).
    let mut dirs: Vec<(PathBuf, Vec<(usize, String)>)> = Vec::new();
    for (i, spec) in options.tasks.iter().filter_map(|t| retrieval::parse_spec(t)).enumerate() {
        let (dir, split) = spec?;
        match dirs.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, splits)) => splits.push((i, split)),
            None => dirs.push((dir, vec![(i, split)])),
        }
    }
    let beir: Vec<BeirTask> = dirs
        .iter()
        .map(|(dir, splits)| {
            BeirTask::load(dir, &splits.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>())
        })
        .collect::<Result<_>>()?;
    let (qp, dp) = (&options.query_prefix, &options.document_prefix);
    let prefixed = |p: &str, texts: &[String]| -> Vec<String> {
        texts.iter().map(|t| format!("{p}{t}")).collect()
    };
    // Per directory: its documents, then each split's queries, as the model reads them.
    let beir_texts: Vec<(Vec<String>, Vec<Vec<String>>)> = beir
        .iter()
        .map(|b| {
            (prefixed(dp, &b.docs), b.splits.iter().map(|s| prefixed(qp, &s.queries)).collect())
        })
        .collect();
    let bias = if options.tasks.iter().any(|t| t == "bias") {
        bias::WeatTest::load_all(&data.join("weat"))?
    } else {
        Vec::new()
    };

    // Each distinct text once, in first-seen order.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut texts: Vec<String> = Vec::new();
    let all = sts
        .iter()
        .flat_map(|t| t.texts().collect::<Vec<_>>())
        .chain(transfer.iter().chain(&sentglue).flat_map(|t| t.texts()))
        .chain(geometry.iter().flat_map(|g| g.texts()))
        .chain(retrieval.iter().flat_map(|r| r.texts()))
        .chain(beir_texts.iter().flat_map(|(d, q)| q.iter().flatten().chain(d)).map(String::as_str))
        .chain(bias.iter().flat_map(|b| b.texts()));
    for t in all {
        if !index.contains_key(t) {
            index.insert(t.to_string(), texts.len());
            texts.push(t.to_string());
        }
    }
    let te = Instant::now();
    let (vectors, dim) = model.embed(&texts)?;
    let seconds_embedding = te.elapsed().as_secs_f64();
    if vectors.len() != texts.len() * dim {
        return Err(EvalError::Invalid(format!(
            "embedding function returned {} values for {} texts of dim {dim}",
            vectors.len(),
            texts.len()
        )));
    }
    let table = Table { index, data: vectors, dim };
    let mut beir_results = Vec::new();
    for ((task, (docs, queries)), (_, order)) in beir.iter().zip(&beir_texts).zip(&dirs) {
        let results =
            score_beir(task, docs, queries, &table, model, (&options.modes, &options.fusions))?;
        // Each spec's results, one a mode, in the order the specs were named.
        let per_mode = results.len() / order.len();
        beir_results.extend(
            results
                .into_iter()
                .enumerate()
                .map(|(j, r)| (order[j % order.len()].0 * per_mode + j / order.len(), r)),
        );
    }
    // In the order the tasks were named.
    beir_results.sort_by_key(|(i, _)| *i);

    let sts_results: Vec<StsResult> = sts.iter().map(|t| t.score(&table)).collect();
    let seven = sts_results.iter().filter(|r| STS_TASKS.contains(&r.name.as_str()));
    let avg7 =
        (seven.clone().count() == STS_TASKS.len()).then(|| mean(seven.map(|r| r.all))).flatten();
    let transfer_results: Vec<ClassifyResult> =
        transfer.iter().map(|t| t.score(&table, &options.protocol)).collect();
    let glue_results: Vec<ClassifyResult> =
        sentglue.iter().map(|t| t.score(&table, &options.protocol)).collect();
    Ok(Report {
        avg7,
        transfer_avg: mean(transfer_results.iter().map(|r| r.accuracy)),
        sts: sts_results,
        transfer: transfer_results,
        sentglue: glue_results,
        sentglue_skipped,
        geometry: geometry.map(|g| g.score(&table)),
        retrieval: retrieval.iter().map(|r| r.score(&table)).collect(),
        beir: beir_results.into_iter().map(|(_, r)| r).collect(),
        bias: bias.iter().map(|b| b.score(&table)).collect(),
        texts_embedded: texts.len(),
        seconds_embedding,
        seconds_total: t0.elapsed().as_secs_f64(),
    })
}

/// Unit rows of `texts` from the table, row-major.
fn unit_rows(table: &Table, texts: &[String]) -> Vec<f32> {
    let mut out = Vec::with_capacity(texts.len() * table.dim);
    for t in texts {
        let v = &table.data[table.index[t] * table.dim..][..table.dim];
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        out.extend(v.iter().map(|x| x / n));
    }
    out
}

/// One BEIR directory: the caller's search over its documents' unit vectors (cosine), to
/// [`retrieval::DEPTH`], once for every split's queries, then each split's metrics.
fn score_beir(
    task: &BeirTask,
    docs: &[String],
    queries: &[Vec<String>],
    table: &Table,
    model: &mut dyn Embed,
    (modes, fusions): (&[SearchMode], &[Fusion]),
) -> Result<Vec<BeirResult>> {
    let all: Vec<String> = queries.concat();
    let (q, d) = (unit_rows(table, &all), unit_rows(table, docs));
    let hits = model.search(&d, table.dim, &q, retrieval::DEPTH.min(docs.len()))?;
    if hits.len() != all.len() || hits.iter().flatten().any(|h| h.0 as usize >= docs.len()) {
        return Err(EvalError::Invalid(format!(
            "{}: the search returned {} result lists for {} queries, or a row past the {} documents",
            task.dir.display(),
            hits.len(),
            all.len(),
            docs.len()
        )));
    }
    let truncated = model.truncated(docs)?;
    let depth = retrieval::DEPTH.min(docs.len());
    let modes = if modes.is_empty() { &[SearchMode::Vector][..] } else { modes };
    let fusions = if fusions.is_empty() { &[Fusion::default()][..] } else { fusions };
    let keyword = if modes.iter().any(|m| *m != SearchMode::Vector) {
        let raw: Vec<&String> = task.splits.iter().flat_map(|s| &s.queries).collect();
        Some(retrieval::keyword_search(&task.docs, &raw, depth)?)
    } else {
        None
    };
    // (mode's name, each query's hits), in the order asked.
    let mut ranked: Vec<(String, Vec<Vec<(u32, f32)>>)> = Vec::new();
    for mode in modes {
        match mode {
            SearchMode::Vector => ranked.push((mode.to_string(), hits.clone())),
            SearchMode::Keyword => {
                ranked.push((mode.to_string(), keyword.clone().expect("keyword runs")))
            }
            SearchMode::Hybrid => {
                let keyword = keyword.as_ref().expect("keyword runs");
                for &f in fusions {
                    let fused = hits
                        .iter()
                        .zip(keyword)
                        .map(|(v, k)| {
                            let mut h = fuse(v, k, f);
                            h.truncate(depth);
                            h
                        })
                        .collect();
                    ranked.push((format!("hybrid {f}"), fused));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (mode, hits) in ranked {
        let runs: Vec<Vec<(usize, f32)>> =
            hits.iter().map(|h| h.iter().map(|&(r, s)| (r as usize, s)).collect()).collect();
        let mut at = 0;
        for split in &task.splits {
            let runs = &runs[at..at + split.queries.len()];
            at += split.queries.len();
            out.push(BeirResult {
                name: split.name.clone(),
                split: split.split.clone(),
                metrics: task.score(split, runs),
                queries: split.queries.len(),
                documents: docs.len(),
                truncated_documents: truncated,
                codes: model.codes(),
                mode: mode.clone(),
            });
        }
    }
    Ok(out)
}

impl Report {
    /// The report as Markdown tables, in the paper's layout.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let row = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let sep = |n: usize| format!("|{}\n", "---|".repeat(n));
        if !self.sts.is_empty() {
            out +=
                "### STS (Spearman ×100 of cosine similarity; STS12–16 pooled \"all\" setting)\n\n";
            let mut head: Vec<String> = self.sts.iter().map(|r| r.name.to_uppercase()).collect();
            let mut vals: Vec<String> = self.sts.iter().map(|r| format!("{:.2}", r.all)).collect();
            if let Some(a) = self.avg7 {
                head.push("Avg7".into());
                vals.push(format!("{a:.2}"));
            }
            out += &row(head.clone());
            out += &sep(head.len());
            out += &row(vals);
            let years: Vec<&StsResult> = self.sts.iter().filter(|r| r.subsets.len() > 1).collect();
            if !years.is_empty() {
                out += "\nPer-year mean of subsets (SentEval \"mean\"): ";
                out += &years
                    .iter()
                    .map(|r| format!("{} {:.2}", r.name.to_uppercase(), r.mean))
                    .collect::<Vec<_>>()
                    .join(", ");
                out += "\n";
            }
            for r in self.sts.iter().filter(|r| !r.skipped.is_empty()) {
                out += &format!(
                    "\n{}: skipped {} (gold file without inputs)\n",
                    r.name.to_uppercase(),
                    r.skipped.join(", ")
                );
            }
            out += "\n";
        }
        let classify = |title: &str, rs: &[ClassifyResult], avg: Option<f64>| {
            let mut s = format!("### {title}\n\n");
            let mut head: Vec<String> = rs.iter().map(|r| r.name.to_uppercase()).collect();
            let mut vals: Vec<String> = rs
                .iter()
                .map(|r| match (r.f1, r.matthews) {
                    (Some(f), _) => format!("{:.2} / {f:.2}", r.accuracy),
                    (None, Some(m)) => format!("{:.2} / {m:.2}", r.accuracy),
                    _ => format!("{:.2}", r.accuracy),
                })
                .collect();
            if let Some(a) = avg {
                head.push("Avg".into());
                vals.push(format!("{a:.2}"));
            }
            s += &row(head.clone());
            s += &sep(head.len());
            s += &row(vals);
            s + "\n"
        };
        if !self.transfer.is_empty() {
            out += &classify(
                "SentEval transfer (accuracy ×100; MRPC accuracy / F1)",
                &self.transfer,
                self.transfer_avg,
            );
        }
        if !self.sentglue.is_empty() || !self.sentglue_skipped.is_empty() {
            out += &classify(
                "SentGLUE (dev accuracy ×100; MRPC accuracy / F1; CoLA and SST-2 accuracy / Matthews correlation ×100; STS-B Spearman ×100)",
                &self.sentglue,
                None,
            );
            for (n, why) in &self.sentglue_skipped {
                out += &format!("- skipped {n}: {why}\n");
            }
            out += "\n";
        }
        if let Some(g) = &self.geometry {
            out += "### Geometry (Wang & Isola 2020; lower is better)\n\n";
            out += &row(vec!["alignment".into(), "uniformity".into()]);
            out += &sep(2);
            out += &row(vec![format!("{:.4}", g.alignment), format!("{:.4}", g.uniformity)]);
            out += &format!(
                "\n{} positive pairs (STS-B test, gold ≥ 4), {} sentences\n\n",
                g.positive_pairs, g.sentences
            );
        }
        if !self.retrieval.is_empty() {
            out += "### Domain retrieval (1-NN intent accuracy ×100)\n\n";
            out += &row(vec!["task".into(), "accuracy".into(), "queries".into(), "indexed".into()]);
            out += &sep(4);
            for r in &self.retrieval {
                out += &row(vec![
                    r.name.clone(),
                    format!("{:.2}", r.accuracy),
                    r.queries.to_string(),
                    r.indexed.to_string(),
                ]);
            }
            out += "\n";
        }
        if !self.beir.is_empty() {
            out += "### Retrieval (BEIR layout; top 100 by cosine, BM25 or both fused; nDCG@10, recall@10 and @100, MRR@10 ×100)\n\n";
            let head = [
                "task",
                "split",
                "nDCG@10",
                "R@10",
                "R@100",
                "MRR@10",
                "queries",
                "documents",
                "truncated",
                "codes",
                "mode",
            ];
            out += &row(head.iter().map(|h| h.to_string()).collect());
            out += &sep(head.len());
            for r in &self.beir {
                let m = &r.metrics;
                // The directory's own name: the full spec is in the JSON.
                let spec = r.name.trim_start_matches(retrieval::PREFIX);
                let dir = spec.strip_suffix(&format!("@{}", r.split)).unwrap_or(spec);
                let short = std::path::Path::new(dir)
                    .file_name()
                    .map_or(dir.into(), |n| n.to_string_lossy());
                out += &row(vec![
                    short.to_string(),
                    r.split.clone(),
                    format!("{:.2}", 100.0 * m.ndcg_at_10),
                    format!("{:.2}", 100.0 * m.recall_at_10),
                    format!("{:.2}", 100.0 * m.recall_at_100),
                    format!("{:.2}", 100.0 * m.mrr_at_10),
                    r.queries.to_string(),
                    r.documents.to_string(),
                    r.truncated_documents.map_or("?".into(), |n| n.to_string()),
                    r.codes.clone(),
                    r.mode.clone(),
                ]);
            }
            let cut: usize = self.beir.iter().filter_map(|r| r.truncated_documents).sum();
            if cut > 0 {
                out += &format!(
                    "\n{cut} documents are longer than the model's window and were truncated to it (as MTEB does).\n"
                );
            }
            out += "\n";
        }
        if !self.bias.is_empty() {
            out += "### Bias (WEAT on words, SEAT on sentences; effect size d, one-sided permutation p)\n\n";
            out += &row(vec![
                "test".into(),
                "X vs Y / A vs B".into(),
                "|X|, |Y|, |A|, |B|".into(),
                "d".into(),
                "p".into(),
                "p computed".into(),
            ]);
            out += &sep(6);
            for r in &self.bias {
                let sizes = r.sizes.map(|n| n.to_string()).join(", ");
                out += &row(vec![
                    r.name.clone(),
                    r.sets.clone(),
                    sizes,
                    format!("{:.2}", r.effect_size),
                    format!("{:.2e}", r.p_value),
                    r.method.to_string(),
                ]);
            }
            out += "\n";
        }
        out += &format!(
            "{} distinct texts embedded in {:.1} s; total {:.1} s\n",
            self.texts_embedded, self.seconds_embedding, self.seconds_total
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_specs_expand_and_dedupe() {
        let cases: [(&str, Option<usize>); 8] = [
            ("sts", Some(7)),
            ("transfer", Some(7)),
            ("sts,transfer,sentglue,geometry", Some(16)),
            ("bias,sts12,bias", Some(2)),
            ("mr,mr,sts12,sts", Some(8)),
            ("", Some(0)),
            ("sts,bogus", None),
            ("stsb-dev,banking77-dev,banking77", Some(3)),
        ];
        for (spec, want) in cases {
            assert_eq!(expand_tasks(spec).ok().map(|v| v.len()), want, "{spec}");
        }
    }
}
