//! Retrieval in BEIR's layout (`st5 eval --tasks retrieval:DIR[@split]`): a corpus, queries and
//! graded relevance judgements, scored by nDCG@10, recall@10, recall@100 and MRR@10 as MTEB's
//! retrieval tasks report them (through pytrec_eval, that is trec_eval).
//!
//! A directory holds `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`) and
//! `qrels/SPLIT.tsv` (`query-id`, `corpus-id`, `score`; a header line is allowed). A document is
//! embedded as `title text` (the title, a space, the text; the text alone without a title), as
//! MTEB does. The queries scored are those the split's qrels name; a query whose judgements are
//! all 0 scores 0 on every metric, as in trec_eval.
//!
//! Ranking follows trec_eval: score descending, ties broken by the document id, the greater
//! (byte order) first. [`metrics`] re-sorts what it is given, so that a caller's own order of
//! tied hits (st5's index puts the lower row first) cannot change a figure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{EvalError, Result};

/// The spec's prefix: `retrieval:DIR` (the `test` qrels) or `retrieval:DIR@SPLIT`.
pub const PREFIX: &str = "retrieval:";
/// The depth each query is searched to: the deepest cut-off reported (recall@100).
pub const DEPTH: usize = 100;

/// `retrieval:DIR[@SPLIT]` → (DIR, SPLIT); `None` when `spec` is not a retrieval spec.
pub fn parse_spec(spec: &str) -> Option<Result<(PathBuf, String)>> {
    let rest = spec.strip_prefix(PREFIX)?;
    let (dir, split) = match rest.rsplit_once('@') {
        Some((dir, split)) if !split.contains('/') => (dir, split),
        _ => (rest, "test"),
    };
    Some(if dir.is_empty() || split.is_empty() || split.contains(['/', '\\', '.']) {
        Err(EvalError::Invalid(format!(
            "`{spec}`: expected retrieval:DIR or retrieval:DIR@SPLIT (a BEIR directory; SPLIT names qrels/SPLIT.tsv)"
        )))
    } else {
        Ok((PathBuf::from(dir), split.to_string()))
    })
}

/// One BEIR directory with the splits of its judgements asked for: the corpus is read, embedded
/// and searched once for all of them.
#[derive(Debug, Clone)]
pub struct BeirTask {
    /// The directory as the user gave it.
    pub dir: PathBuf,
    /// Document ids and their texts (`title text`), in file order.
    pub doc_ids: Vec<String>,
    pub docs: Vec<String>,
    pub splits: Vec<BeirSplit>,
}

/// One split's judged queries.
#[derive(Debug, Clone)]
pub struct BeirSplit {
    /// `retrieval:DIR@SPLIT`.
    pub name: String,
    pub split: String,
    /// The split's queries: ids and texts, in `queries.jsonl`'s order.
    pub query_ids: Vec<String>,
    pub queries: Vec<String>,
    /// Each query's judgements: document (row in the corpus) and grade.
    pub qrels: Vec<Vec<(usize, i64)>>,
}

/// The four figures MTEB reports for a retrieval task, each a mean over the judged queries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metrics {
    pub ndcg_at_10: f64,
    pub recall_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
}

/// What a BEIR task measured, with what was searched.
#[derive(Debug, Clone, Serialize)]
pub struct BeirResult {
    pub name: String,
    pub split: String,
    #[serde(flatten)]
    pub metrics: Metrics,
    pub queries: usize,
    pub documents: usize,
    /// Documents longer than the model's window, truncated to it (`None`: the embedder did not say).
    pub truncated_documents: Option<usize>,
    /// The vector index's codes the search ran on (`none`, `int8`, `binary`), as the caller named them.
    pub codes: String,
    /// How it ranked: `vector`, `keyword` or `hybrid FUSION`.
    pub mode: String,
}

fn bad(path: &Path, line: usize, message: impl Into<String>) -> EvalError {
    EvalError::Parse { path: path.into(), line, message: message.into() }
}

fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| EvalError::Io { path: path.into(), source })?;
    Ok(text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text))
}

/// A string field of a JSON line; `required` fields must be present.
fn field(
    row: &serde_json::Map<String, serde_json::Value>,
    name: &str,
    required: bool,
    path: &Path,
    line: usize,
) -> Result<String> {
    match row.get(name) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        // BEIR's own files hold some numeric ids.
        Some(serde_json::Value::Number(n)) if name == "_id" => Ok(n.to_string()),
        None | Some(serde_json::Value::Null) if !required => Ok(String::new()),
        None => Err(bad(path, line, format!("missing `{name}`"))),
        Some(v) => Err(bad(path, line, format!("`{name}` must be a string, found {v}"))),
    }
}

/// `(id, title, text)` of every line of a BEIR JSON Lines file (blank lines skipped).
fn jsonl(text: &str, path: &Path, with_title: bool) -> Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let row: serde_json::Map<String, serde_json::Value> = serde_json::from_str(l)
            .map_err(|e| bad(path, line, format!("not a JSON object: {e}")))?;
        let id = field(&row, "_id", true, path, line)?;
        if id.is_empty() {
            return Err(bad(path, line, "empty `_id`"));
        }
        if let Some(first) = seen.insert(id.clone(), line) {
            return Err(bad(path, line, format!("`_id` {id:?} again (first on line {first})")));
        }
        let title =
            if with_title { field(&row, "title", false, path, line)? } else { String::new() };
        out.push((id, title, field(&row, "text", true, path, line)?));
    }
    Ok(out)
}

impl BeirTask {
    /// Reads `dir` with the qrels of each of `splits`; every error names the file and line.
    pub fn load(dir: &Path, splits: &[&str]) -> Result<Self> {
        let (c, q) = (dir.join("corpus.jsonl"), dir.join("queries.jsonl"));
        let paths: Vec<PathBuf> =
            splits.iter().map(|s| dir.join("qrels").join(format!("{s}.tsv"))).collect();
        let texts: Vec<String> = paths.iter().map(|p| read(p)).collect::<Result<_>>()?;
        let qrels: Vec<(&str, &str, &Path)> = (splits.iter().zip(&texts).zip(&paths))
            .map(|((s, t), p)| (*s, t.as_str(), p.as_path()))
            .collect();
        Self::parse(dir, (&read(&c)?, &c), (&read(&q)?, &q), &qrels)
    }

    /// The files' texts, each with the path its errors name: the corpus, the queries, and each
    /// split's qrels (split, text, path).
    pub fn parse(
        dir: &Path,
        (corpus, cpath): (&str, &Path),
        (queries, qpath): (&str, &Path),
        qrels: &[(&str, &str, &Path)],
    ) -> Result<Self> {
        let corpus = jsonl(corpus, cpath, true)?;
        let queries = jsonl(queries, qpath, false)?;
        let doc_row: HashMap<&str, usize> =
            corpus.iter().enumerate().map(|(i, d)| (d.0.as_str(), i)).collect();
        let query_row: HashMap<&str, usize> =
            queries.iter().enumerate().map(|(i, q)| (q.0.as_str(), i)).collect();
        let splits = qrels
            .iter()
            .map(|&(split, text, path)| {
                let mut judged = judgements(text, path, &doc_row, &query_row)?;
                let keep: Vec<usize> =
                    (0..queries.len()).filter(|&i| !judged[i].is_empty()).collect();
                if keep.is_empty() {
                    return Err(bad(path, 0, "no judgements"));
                }
                Ok(BeirSplit {
                    name: format!("{PREFIX}{}@{split}", dir.display()),
                    split: split.into(),
                    query_ids: keep.iter().map(|&i| queries[i].0.clone()).collect(),
                    queries: keep.iter().map(|&i| queries[i].2.clone()).collect(),
                    qrels: keep.iter().map(|&i| std::mem::take(&mut judged[i])).collect(),
                })
            })
            .collect::<Result<_>>()?;
        let (doc_ids, docs) = corpus
            .into_iter()
            .map(|(id, title, text)| {
                let joined = if title.trim().is_empty() { text } else { format!("{title} {text}") };
                (id, joined.trim().to_string())
            })
            .unzip();
        Ok(Self { dir: dir.into(), doc_ids, docs, splits })
    }

    /// The metrics of `split`'s `runs`: each judged query's hits (document row, score), any order.
    pub fn score(&self, split: &BeirSplit, runs: &[Vec<(usize, f32)>]) -> Metrics {
        let id = |d: usize| self.doc_ids[d].as_str();
        let judged: Vec<Vec<(&str, i64)>> =
            split.qrels.iter().map(|q| q.iter().map(|&(d, g)| (id(d), g)).collect()).collect();
        let runs: Vec<Vec<(&str, f64)>> = runs
            .iter()
            .map(|hits| hits.iter().map(|&(d, s)| (id(d), f64::from(s))).collect())
            .collect();
        metrics(&judged, &runs)
    }
}

/// One qrels file: each query's (document row, grade), indexed by the query's row.
fn judgements(
    text: &str,
    path: &Path,
    doc_row: &HashMap<&str, usize>,
    query_row: &HashMap<&str, usize>,
) -> Result<Vec<Vec<(usize, i64)>>> {
    let mut judged: Vec<Vec<(usize, i64)>> = vec![Vec::new(); query_row.len()];
    let mut pairs: HashMap<(usize, usize), usize> = HashMap::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let cells: Vec<&str> = l.split('\t').map(str::trim).collect();
        // BEIR writes `query-id corpus-id score`; TREC qrels add an iteration column.
        let (q, d, score) = match cells[..] {
            [q, d, s] | [q, _, d, s] => (q, d, s),
            _ => {
                return Err(bad(
                    path,
                    line,
                    format!(
                        "expected query-id, corpus-id and score, tab-separated; found {} fields",
                        cells.len()
                    ),
                ));
            }
        };
        let Ok(score) = score.parse::<i64>() else {
            if line == 1 {
                continue; // the header
            }
            return Err(bad(path, line, format!("score {score:?} is not an integer")));
        };
        let &qi = query_row
            .get(q)
            .ok_or_else(|| bad(path, line, format!("query {q:?} is not in queries.jsonl")))?;
        let &di = doc_row
            .get(d)
            .ok_or_else(|| bad(path, line, format!("document {d:?} is not in corpus.jsonl")))?;
        if let Some(first) = pairs.insert((qi, di), line) {
            return Err(bad(
                path,
                line,
                format!("query {q:?} judges {d:?} again (first on line {first})"),
            ));
        }
        judged[qi].push((di, score));
    }
    Ok(judged)
}

/// Per query: `qrels[i]` (document id, grade) and `runs[i]` (document id, score, any order; a
/// missing run is an empty one). The means over the queries of `qrels`, as trec_eval computes
/// `ndcg_cut_10`, `recall_10`, `recall_100` and `recip_rank` over the run cut at 10.
pub fn metrics(qrels: &[Vec<(&str, i64)>], runs: &[Vec<(&str, f64)>]) -> Metrics {
    let mut sum = [0.0f64; 4];
    for (i, judged) in qrels.iter().enumerate() {
        let mut run: Vec<(&str, f64)> = runs.get(i).cloned().unwrap_or_default();
        run.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(a.0)));
        let grade: HashMap<&str, i64> = judged.iter().copied().collect();
        let gain = |d: &str| grade.get(d).copied().unwrap_or(0).max(0) as f64;
        let relevant = judged.iter().filter(|j| j.1 > 0).count();
        let mut ideal: Vec<f64> = judged.iter().map(|j| j.1.max(0) as f64).collect();
        ideal.sort_by(|a, b| b.total_cmp(a));
        let dcg = |gains: &mut dyn Iterator<Item = f64>| -> f64 {
            gains.take(10).enumerate().map(|(r, g)| g / ((r + 2) as f64).log2()).sum()
        };
        let idcg = dcg(&mut ideal.iter().copied());
        if idcg > 0.0 {
            sum[0] += dcg(&mut run.iter().map(|h| gain(h.0))) / idcg;
        }
        if relevant > 0 {
            let found = |k: usize| run.iter().take(k).filter(|h| gain(h.0) > 0.0).count();
            sum[1] += found(10) as f64 / relevant as f64;
            sum[2] += found(100) as f64 / relevant as f64;
        }
        if let Some(r) = run.iter().take(10).position(|h| gain(h.0) > 0.0) {
            sum[3] += 1.0 / (r + 1) as f64;
        }
    }
    let n = qrels.len().max(1) as f64;
    Metrics {
        ndcg_at_10: sum[0] / n,
        recall_at_10: sum[1] / n,
        recall_at_100: sum[2] / n,
        mrr_at_10: sum[3] / n,
    }
}

/// Each query's `k` best documents by BM25 (st5's search library: one text field, English
/// analysis), as (row, score) best first.
pub fn keyword_search(
    docs: &[String],
    queries: &[&String],
    k: usize,
) -> Result<Vec<Vec<(u32, f32)>>> {
    use st5_format::search::{Collection, Schema, TextField};
    let schema = Schema {
        id: "id".into(),
        text: vec![TextField { name: "text".into(), boost: 1.0 }],
        fields: Vec::new(),
        language: Default::default(),
        passages: Default::default(),
    };
    let mut c = Collection::new(schema).map_err(|e| EvalError::Invalid(e.to_string()))?;
    let rows: Vec<serde_json::Value> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| serde_json::json!({"id": i.to_string(), "text": d}))
        .collect();
    c.add(&rows).map_err(|e| EvalError::Invalid(e.to_string()))?;
    // Slots are rows: the collection was empty and every document was added in order.
    Ok(queries.iter().map(|q| c.keyword_search(q, k, None, false)).collect())
}

/// The exact top `k` of `corpus` (row-major `[n, dim]`) for each query by dot product, score
/// descending, ties to the lower row: the search a caller that brings none gets.
pub fn exact_search(corpus: &[f32], dim: usize, queries: &[f32], k: usize) -> Vec<Vec<(u32, f32)>> {
    queries
        .chunks(dim)
        .map(|q| {
            let mut hits: Vec<(u32, f32)> = corpus
                .chunks(dim)
                .enumerate()
                .map(|(i, d)| (i as u32, d.iter().zip(q).map(|(a, b)| a * b).sum()))
                .collect();
            hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            hits.truncate(k);
            hits
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_directory_and_a_split() {
        let cases: [(&str, Option<Option<(&str, &str)>>); 7] = [
            ("retrieval:sets/wikiqa", Some(Some(("sets/wikiqa", "test")))),
            ("retrieval:sets/wikiqa@dev", Some(Some(("sets/wikiqa", "dev")))),
            ("retrieval:/a@b/c", Some(Some(("/a@b/c", "test")))),
            ("retrieval:", Some(None)),
            ("retrieval:d@", Some(None)),
            ("retrieval:d@../x", Some(Some(("d@../x", "test")))),
            ("sts12", None),
        ];
        for (spec, want) in cases {
            let got = parse_spec(spec).map(|r| r.ok());
            let want = want.map(|w| w.map(|(d, s)| (PathBuf::from(d), s.to_string())));
            assert_eq!(got, want, "{spec}");
        }
    }

    /// Hand-computed figures, the trec_eval conventions one case each.
    #[test]
    fn metrics_follow_trec_eval_conventions() {
        let l2 = |r: f64| 1.0 / (r + 1.0).log2();
        // (qrels, run, nDCG@10, recall@10, MRR@10)
        type Case = (Vec<(&'static str, i64)>, Vec<(&'static str, f64)>, f64, f64, f64);
        let cases: Vec<Case> = vec![
            // Ties: the greater id first, so d4 and d2 precede d1.
            (
                vec![("d1", 1), ("d2", 2), ("d3", 0)],
                vec![("d1", 0.5), ("d2", 0.5), ("d3", 0.9), ("d4", 0.5)],
                (2.0 * l2(3.0) + l2(4.0)) / (2.0 + l2(2.0)),
                1.0,
                1.0 / 3.0,
            ),
            // Judged, nothing relevant: 0, and still counted in the mean.
            (vec![("d1", 0)], vec![("d1", 1.0)], 0.0, 0.0, 0.0),
            // An empty run.
            (vec![("d9", 1)], vec![], 0.0, 0.0, 0.0),
            // Relevant only past 10.
            (
                vec![("z", 1)],
                (0..11)
                    .map(|i| {
                        (
                            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "z"][i],
                            11.0 - i as f64,
                        )
                    })
                    .collect(),
                0.0,
                0.0,
                0.0,
            ),
        ];
        for (qrels, run, ndcg, recall, mrr) in cases {
            let m = metrics(std::slice::from_ref(&qrels), std::slice::from_ref(&run));
            assert!((m.ndcg_at_10 - ndcg).abs() < 1e-12, "{qrels:?} {run:?}: {m:?}");
            assert!((m.recall_at_10 - recall).abs() < 1e-12, "{qrels:?}: {m:?}");
            assert!((m.mrr_at_10 - mrr).abs() < 1e-12, "{qrels:?}: {m:?}");
        }
    }

    /// Each broken file is refused with an error naming the file, the line and what is wrong.
    #[test]
    fn bad_beir_files_are_refused_by_name() {
        let good_corpus = "{\"_id\": \"d1\", \"title\": \"T\", \"text\": \"one\"}\n{\"_id\": 2, \"text\": \"two\"}\n";
        let good_queries = "{\"_id\": \"q1\", \"text\": \"first\"}\n";
        let good_qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\t2\t0\n";
        // (corpus, queries, qrels, file named, line and words the error must hold)
        let cases: [(&str, &str, &str, &str, &str); 9] = [
            (
                "{\"title\": \"T\", \"text\": \"x\"}\n",
                good_queries,
                good_qrels,
                "corpus.jsonl",
                "line 1: missing `_id`",
            ),
            (
                "{\"_id\": \"d1\", \"text\": \"x\"}\nnot json\n",
                good_queries,
                good_qrels,
                "corpus.jsonl",
                "line 2: not a JSON object",
            ),
            (
                "{\"_id\": \"d1\"}\n",
                good_queries,
                good_qrels,
                "corpus.jsonl",
                "line 1: missing `text`",
            ),
            (
                "{\"_id\": \"d1\", \"text\": 3}\n",
                good_queries,
                good_qrels,
                "corpus.jsonl",
                "`text` must be a string",
            ),
            (
                "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d1\", \"text\": \"b\"}\n",
                good_queries,
                good_qrels,
                "corpus.jsonl",
                "line 2: `_id` \"d1\" again (first on line 1)",
            ),
            (
                good_corpus,
                good_queries,
                "q1\td9\t1\n",
                "test.tsv",
                "line 1: document \"d9\" is not in corpus.jsonl",
            ),
            (
                good_corpus,
                good_queries,
                "q1\td1\t1\nq7\td1\t1\n",
                "test.tsv",
                "line 2: query \"q7\" is not in queries.jsonl",
            ),
            (
                good_corpus,
                good_queries,
                "q1\td1\t1\nq1\td1\tx\n",
                "test.tsv",
                "line 2: score \"x\" is not an integer",
            ),
            (
                good_corpus,
                good_queries,
                "q1 d1 1\n",
                "test.tsv",
                "line 1: expected query-id, corpus-id and score",
            ),
        ];
        let dir = std::env::temp_dir().join(format!("st5-eval-beir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("qrels")).unwrap();
        for (corpus, queries, qrels, file, words) in cases {
            std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
            std::fs::write(dir.join("queries.jsonl"), queries).unwrap();
            std::fs::write(dir.join("qrels/test.tsv"), qrels).unwrap();
            let e = BeirTask::load(&dir, &["test"]).unwrap_err().to_string();
            assert!(e.contains(file) && e.contains(words), "{words}: {e}");
        }
        std::fs::write(dir.join("corpus.jsonl"), good_corpus).unwrap();
        std::fs::write(dir.join("qrels/test.tsv"), good_qrels).unwrap();
        let t = BeirTask::load(&dir, &["test"]).unwrap();
        assert_eq!(
            (t.docs.clone(), t.doc_ids.clone()),
            (vec!["T one".to_string(), "two".into()], vec!["d1".to_string(), "2".into()])
        );
        assert_eq!(t.splits[0].qrels, vec![vec![(0, 1), (1, 0)]]);
        let e = BeirTask::load(&dir, &["dev"]).unwrap_err().to_string();
        assert!(e.contains("dev.tsv"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn exact_search_orders_ties_by_row_and_stops_at_the_corpus() {
        let corpus = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0];
        let hits = exact_search(&corpus, 2, &[1.0, 0.0], 100);
        assert_eq!(hits, vec![vec![(0, 1.0), (2, 1.0), (1, 0.0)]]);
    }
}
