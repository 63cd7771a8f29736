//! `st5-eval`: Sentence-T5 evaluation as the paper does it (Ni et al. 2021, §5): STS12–16, STS-B
//! and SICK-R (Spearman ×100 of cosine similarity), the SentEval transfer tasks (logistic
//! regression on frozen embeddings), SentGLUE, alignment/uniformity, and the WEAT/SEAT bias
//! tests ([`bias`]).
//!
//! [`run`] loads every requested task, embeds each distinct text once through the caller's
//! embedding function (so it is independent of model and device), then scores.

pub mod bias;
pub mod cv;
pub mod data;
pub mod error;
pub mod glue;
pub mod logreg;
pub mod stats;
pub mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

pub use error::{EvalError, Result};
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

/// Expands `sts,transfer,sentglue,geometry,bias` (groups) and single task names, keeping order.
pub fn expand_tasks(spec: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let names: Vec<&str> = match t {
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
                    "unknown task `{other}` (groups: sts, transfer, sentglue, geometry, bias; tasks: {}, {}, {}, {})",
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

/// Runs the tasks in `options`. `embed` maps a list of texts to `(row-major [n, dim], dim)`.
pub fn run(
    options: &EvalOptions,
    embed: &mut dyn FnMut(&[String]) -> Result<(Vec<f32>, usize)>,
) -> Result<Report> {
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
        .chain(bias.iter().flat_map(|b| b.texts()));
    for t in all {
        if !index.contains_key(t) {
            index.insert(t.to_string(), texts.len());
            texts.push(t.to_string());
        }
    }
    let te = Instant::now();
    let (vectors, dim) = embed(&texts)?;
    let seconds_embedding = te.elapsed().as_secs_f64();
    if vectors.len() != texts.len() * dim {
        return Err(EvalError::Invalid(format!(
            "embedding function returned {} values for {} texts of dim {dim}",
            vectors.len(),
            texts.len()
        )));
    }
    let table = Table { index, data: vectors, dim };

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
        bias: bias.iter().map(|b| b.score(&table)).collect(),
        texts_embedded: texts.len(),
        seconds_embedding,
        seconds_total: t0.elapsed().as_secs_f64(),
    })
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
