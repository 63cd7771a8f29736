//! The fuzz targets' bodies for st5-eval's parsers of outside bytes (`fuzz/fuzz_targets/`).

use std::path::Path;

/// `beir`: a BEIR directory's three files, the input split at its first two NUL bytes into
/// `corpus.jsonl`, `queries.jsonl` and `qrels/test.tsv` (lossy UTF-8). Parsing must return a task
/// or an error, never panic; a task's judgements must point inside it.
pub fn beir(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == 0).map(String::from_utf8_lossy);
    let (c, q, r) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let dir = Path::new("fuzz");
    let qrels = [("test", r.as_ref(), Path::new("qrels/test.tsv"))];
    let parsed = crate::retrieval::BeirTask::parse(
        dir,
        (c.as_ref(), Path::new("corpus.jsonl")),
        (q.as_ref(), Path::new("queries.jsonl")),
        &qrels,
    );
    if let Ok(task) = parsed {
        let split = &task.splits[0];
        assert_eq!(split.queries.len(), split.qrels.len());
        assert!(split.qrels.iter().flatten().all(|&(d, _)| d < task.docs.len()));
        let runs: Vec<Vec<(usize, f32)>> = vec![vec![(0, 1.0)]; split.queries.len()];
        let m = task.score(split, &runs);
        assert!((0.0..=1.0).contains(&m.ndcg_at_10), "{m:?}");
    }
}
