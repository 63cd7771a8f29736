//! SentGLUE (Ni et al. 2021, §5.3): the GLUE tasks, each as a classifier on frozen sentence
//! embeddings (pair tasks on [u, v, |u−v|, u*v]), scored on the GLUE dev split.
//! GLUE's own TSVs (the standard `TASK/{train,dev}.tsv` layout) are read from `--glue-dir`, by
//! default `glue/` in the data directory, which holds CoLA and RTE (train and dev) and QNLI (dev
//! only). SST-2, MRPC and STS-B fall back to the data directory's SentEval copies. A task with no
//! train and dev file is skipped by name, with the reason. CoLA is scored by Matthews
//! correlation, as GLUE scores it.

use std::path::Path;

use crate::data::{self, Labeled, LabeledPair, ScoredPair};
use crate::error::{EvalError, Result};
use crate::tasks::{ClassifyTask, Split};

/// `(task, GLUE folder, dev file)`, in the paper's order.
pub const GLUE_TASKS: [(&str, &str, &str); 9] = [
    ("cola", "CoLA", "dev.tsv"),
    ("sst2", "SST-2", "dev.tsv"),
    ("mrpc", "MRPC", "dev.tsv"),
    ("stsb", "STS-B", "dev.tsv"),
    ("qqp", "QQP", "dev.tsv"),
    ("mnli-m", "MNLI", "dev_matched.tsv"),
    ("mnli-mm", "MNLI", "dev_mismatched.tsv"),
    ("qnli", "QNLI", "dev.tsv"),
    ("rte", "RTE", "dev.tsv"),
];

fn label_ids(raw: &[String], known: &[&str], path: &Path) -> Result<Vec<usize>> {
    raw.iter()
        .map(|l| match known.iter().position(|k| k == l) {
            Some(i) => Ok(i),
            None => Err(EvalError::Invalid(format!(
                "{}: unknown label `{l}` (expected one of {known:?})",
                path.display()
            ))),
        })
        .collect()
}

fn pairs(path: &Path, a: &str, b: &str, label: &str, known: &[&str]) -> Result<Vec<LabeledPair>> {
    let (texts, raw) = data::glue_tsv(path, &[a, b], label)?;
    let ids = label_ids(&raw, known, path)?;
    Ok(texts
        .into_iter()
        .zip(ids)
        .map(|(t, label)| LabeledPair { a: t[0].clone(), b: t[1].clone(), label })
        .collect())
}

/// CoLA's TSVs have no header: source, label, original label, sentence.
fn cola(path: &Path) -> Result<Vec<Labeled>> {
    let text = data::read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            match (f.get(1).and_then(|s| s.parse().ok()), f.get(3)) {
                (Some(label), Some(s)) => Ok(Labeled { text: s.to_string(), label }),
                _ => Err(EvalError::Parse {
                    path: path.into(),
                    line: i + 1,
                    message: "expected source, label, original label, sentence".into(),
                }),
            }
        })
        .collect()
}

fn load_glue(task: &str, dir: &Path, dev: &str) -> Result<Split> {
    let (tr, dv) = (dir.join("train.tsv"), dir.join(dev));
    let nli = ["entailment", "neutral", "contradiction"];
    let bin = ["not_entailment", "entailment"];
    Ok(match task {
        "cola" => Split::TrainTest(cola(&tr)?, cola(&dv)?),
        "sst2" => {
            let read = |p: &Path| -> Result<Vec<Labeled>> {
                let (t, l) = data::glue_tsv(p, &["sentence"], "label")?;
                Ok(t.into_iter()
                    .zip(label_ids(&l, &["0", "1"], p)?)
                    .map(|(t, label)| Labeled { text: t[0].clone(), label })
                    .collect())
            };
            Split::TrainTest(read(&tr)?, read(&dv)?)
        }
        "mrpc" => Split::Pairs(
            pairs(&tr, "#1 String", "#2 String", "Quality", &["0", "1"])?,
            pairs(&dv, "#1 String", "#2 String", "Quality", &["0", "1"])?,
        ),
        "stsb" => {
            let read = |p: &Path| -> Result<Vec<ScoredPair>> {
                let (t, l) = data::glue_tsv(p, &["sentence1", "sentence2"], "score")?;
                t.into_iter()
                    .zip(l)
                    .map(|(t, s)| {
                        Ok(ScoredPair {
                            a: t[0].clone(),
                            b: t[1].clone(),
                            score: s.parse().map_err(|_| {
                                EvalError::Invalid(format!("{}: score `{s}`", p.display()))
                            })?,
                        })
                    })
                    .collect()
            };
            Split::Regression(read(&tr)?, read(&dv)?)
        }
        "qqp" => Split::Pairs(
            pairs(&tr, "question1", "question2", "is_duplicate", &["0", "1"])?,
            pairs(&dv, "question1", "question2", "is_duplicate", &["0", "1"])?,
        ),
        "mnli-m" | "mnli-mm" => Split::Pairs(
            pairs(&tr, "sentence1", "sentence2", "gold_label", &nli)?,
            pairs(&dv, "sentence1", "sentence2", "gold_label", &nli)?,
        ),
        "qnli" => Split::Pairs(
            pairs(&tr, "question", "sentence", "label", &bin)?,
            pairs(&dv, "question", "sentence", "label", &bin)?,
        ),
        "rte" => Split::Pairs(
            pairs(&tr, "sentence1", "sentence2", "label", &bin)?,
            pairs(&dv, "sentence1", "sentence2", "label", &bin)?,
        ),
        _ => return Err(EvalError::Invalid(format!("unknown GLUE task `{task}`"))),
    })
}

/// The SentGLUE tasks that can run, and the names of those skipped with the reason.
pub fn sentglue_tasks(
    data: &Path,
    glue_dir: Option<&Path>,
) -> Result<(Vec<ClassifyTask>, Vec<(String, String)>)> {
    let default_dir = data.join("glue");
    let glue_dir = glue_dir.or(Some(default_dir.as_path()).filter(|d| d.is_dir()));
    let mut tasks = Vec::new();
    let mut skipped = Vec::new();
    for (task, folder, dev) in GLUE_TASKS {
        let classes = match task {
            "cola" | "sst2" | "mrpc" | "qqp" | "qnli" | "rte" => 2,
            "mnli-m" | "mnli-mm" => 3,
            _ => 0,
        };
        let name = format!("glue-{task}");
        if let Some(dir) = glue_dir
            .map(|g| g.join(folder))
            .filter(|d| d.join("train.tsv").is_file() && d.join(dev).is_file())
        {
            tasks.push(ClassifyTask { name, classes, split: load_glue(task, &dir, dev)? });
            continue;
        }
        // Built-in copies in shared/data; GLUE's dev split is the test here (GLUE test labels are hidden).
        let split = match task {
            "sst2" => Split::TrainTest(
                data::sst2(&data.join("sst2/sentiment-train"))?,
                data::sst2(&data.join("sst2/sentiment-dev"))?,
            ),
            "mrpc" => Split::Pairs(
                data::mrpc(&data.join("mrpc/msr_paraphrase_train.txt"))?,
                data::mrpc(&data.join("mrpc/msr_paraphrase_test.txt"))?,
            ),
            "stsb" => Split::Regression(
                data::sts_benchmark(&data.join("stsbenchmark/sts-train.csv"))?,
                data::sts_benchmark(&data.join("stsbenchmark/sts-dev.csv"))?,
            ),
            _ => {
                let why = match glue_dir {
                    Some(g) => {
                        let dir = g.join(folder);
                        let missing: Vec<&str> = ["train.tsv", dev]
                            .into_iter()
                            .filter(|f| !dir.join(f).is_file())
                            .collect();
                        format!("no {} in {}", missing.join(" or "), dir.display())
                    }
                    None => "no GLUE directory (pass --glue-dir with GLUE's TSVs)".into(),
                };
                skipped.push((name, why));
                continue;
            }
        };
        tasks.push(ClassifyTask { name, classes, split });
    }
    Ok((tasks, skipped))
}
