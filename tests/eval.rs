//! The evaluation harness: Spearman and logistic regression against scipy / scikit-learn
//! fixtures (`tests/reference/make_eval_fixtures.py`), every parser on every file of
//! `shared/data` it reads with the row counts of `SOURCES.md`, and `st5 eval` end to end.

use st5_eval::data;
use st5_eval::logreg::{Dataset, LogReg, Solver, accuracy};
use st5_eval::stats::spearman;
use st5_tests::*;

fn json(name: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("eval").join(name)).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn ints(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

#[test]
fn spearman_with_ties_matches_scipy() {
    for case in json("spearman.json").as_array().unwrap() {
        let (x, y) = (floats(&case["x"]), floats(&case["y"]));
        let want = case["spearman"].as_f64().unwrap();
        let got = spearman(&x, &y);
        assert!((got - want).abs() <= 1e-6, "n={}: {got} vs scipy {want}", x.len());
    }
}

#[test]
fn logistic_regression_matches_scikit_learn() {
    for p in json("logreg.json").as_array().unwrap() {
        let (classes, c, d) = (
            p["classes"].as_u64().unwrap() as usize,
            p["c"].as_f64().unwrap(),
            p["d"].as_u64().unwrap() as usize,
        );
        let xtr: Vec<f32> = floats(&p["x_train"]).into_iter().map(|v| v as f32).collect();
        let xte: Vec<f32> = floats(&p["x_test"]).into_iter().map(|v| v as f32).collect();
        let (ytr, yte, want) = (ints(&p["y_train"]), ints(&p["y_test"]), ints(&p["predictions"]));
        let model = LogReg::fit(
            &Dataset { x: &xtr, d, y: &ytr, classes },
            c,
            Solver { max_iter: 2000, tol: 1e-9 },
            None,
        );
        let pred = model.predict(&xte);
        let acc = accuracy(&pred, &yte);
        let agree = accuracy(&pred, &want);
        println!(
            "{classes} classes, C={c}: accuracy {acc} (sklearn {}), agreement {agree}",
            p["accuracy"]
        );
        assert_eq!(
            acc,
            p["accuracy"].as_f64().unwrap(),
            "{classes} classes: accuracy differs from scikit-learn"
        );
        assert!(agree >= 0.995, "{classes} classes: predictions agree on only {agree}");
    }
}

#[test]
fn parsers_read_every_file_with_sources_md_counts() {
    let d = shared_data();
    let sts = |year: &str, want: &[(&str, usize)], skipped: &[&str]| {
        let (sets, sk) = data::sts_year(&d.join(year)).unwrap();
        let got: Vec<(String, usize)> = sets.iter().map(|(n, p)| (n.clone(), p.len())).collect();
        let want: Vec<(String, usize)> = want.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        assert_eq!(got, want, "{year}");
        assert_eq!(sk, skipped, "{year} skipped");
    };
    sts(
        "sts12",
        &[
            ("MSRpar", 750),
            ("MSRvid", 750),
            ("SMTeuroparl", 459),
            ("surprise.OnWN", 750),
            ("surprise.SMTnews", 399),
        ],
        &[],
    );
    sts("sts13", &[("FNWN", 189), ("OnWN", 561), ("headlines", 750)], &["SMT"]);
    sts(
        "sts14",
        &[
            ("OnWN", 750),
            ("deft-forum", 450),
            ("deft-news", 300),
            ("headlines", 750),
            ("images", 750),
            ("tweet-news", 750),
        ],
        &[],
    );
    sts(
        "sts15",
        &[
            ("answers-forums", 375),
            ("answers-students", 750),
            ("belief", 375),
            ("headlines", 750),
            ("images", 750),
        ],
        &[],
    );
    sts(
        "sts16",
        &[
            ("answer-answer", 254),
            ("headlines", 249),
            ("plagiarism", 230),
            ("postediting", 244),
            ("question-question", 209),
        ],
        &[],
    );
    for (f, n) in [("sts-train.csv", 5749), ("sts-dev.csv", 1500), ("sts-test.csv", 1379)] {
        assert_eq!(data::sts_benchmark(&d.join("stsbenchmark").join(f)).unwrap().len(), n, "{f}");
    }
    for (f, n) in
        [("SICK_train.txt", 4500), ("SICK_trial.txt", 500), ("SICK_test_annotated.txt", 4927)]
    {
        assert_eq!(data::sick(&d.join("sick").join(f)).unwrap().len(), n, "{f}");
    }
    let binary = |dir: &str, pos: &str, neg: &str, np: usize, nn: usize| {
        let items = data::binary_files(&d.join(dir).join(pos), &d.join(dir).join(neg)).unwrap();
        let p = items.iter().filter(|i| i.label == 1).count();
        assert_eq!((p, items.len() - p), (np, nn), "{dir}");
        assert!(
            items.iter().all(|i| !i.text.contains('\u{fffd}')),
            "{dir}: replacement characters (bad decoding)"
        );
    };
    binary("mr", "rt-polarity.pos", "rt-polarity.neg", 5331, 5331);
    binary("subj", "subj.subjective", "subj.objective", 5000, 5000);
    binary("cr", "custrev.pos", "custrev.neg", 2407, 1368);
    binary("mpqa", "mpqa.pos", "mpqa.neg", 3312, 7294);
    for (f, n) in [("train_5500.label", 5452), ("TREC_10.label", 500)] {
        assert_eq!(data::trec(&d.join("trec").join(f)).unwrap().len(), n, "{f}");
    }
    for (f, n) in [("sentiment-train", 67349), ("sentiment-dev", 872), ("sentiment-test", 1821)] {
        assert_eq!(data::sst2(&d.join("sst2").join(f)).unwrap().len(), n, "{f}");
    }
    for (f, n) in [("msr_paraphrase_train.txt", 4076), ("msr_paraphrase_test.txt", 1725)] {
        let rows = data::mrpc(&d.join("mrpc").join(f)).unwrap();
        assert_eq!(rows.len(), n, "{f}");
        assert!(rows.iter().all(|r| r.label <= 1));
    }
}

/// SentGLUE reads `glue/` in the data directory by default: CoLA and RTE with SOURCES.md's row
/// and label counts, the fields that begin with a quote kept as they are (split on tabs only),
/// and the tasks without a train split skipped with the reason.
#[test]
fn sentglue_reads_the_glue_files_with_sources_md_counts() {
    use st5_eval::tasks::Split;
    let (tasks, skipped) = st5_eval::glue::sentglue_tasks(&shared_data(), None).unwrap();
    let task =
        |name: &str| tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name}"));
    let Split::TrainTest(train, dev) = &task("glue-cola").split else { panic!("cola split") };
    let ones = |rows: &[data::Labeled]| rows.iter().filter(|r| r.label == 1).count();
    assert_eq!((train.len(), ones(train), dev.len(), ones(dev)), (8551, 6023, 1043, 721));
    assert_eq!(dev[0].text, "The sailors rode the breeze clear of the rocks.");
    let Split::Pairs(train, dev) = &task("glue-rte").split else { panic!("rte split") };
    let entailed = |rows: &[data::LabeledPair]| rows.iter().filter(|r| r.label == 1).count();
    let quoted = |rows: &[data::LabeledPair]| {
        rows.iter().filter(|r| r.a.starts_with('"') || r.b.starts_with('"')).count()
    };
    assert_eq!((train.len(), entailed(train), quoted(train)), (2490, 1249, 70));
    assert_eq!((dev.len(), entailed(dev), quoted(dev)), (277, 146, 6));
    let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["glue-cola", "glue-sst2", "glue-mrpc", "glue-stsb", "glue-rte"]);
    let why = |name: &str| &skipped.iter().find(|(n, _)| n == name).unwrap().1;
    assert!(why("glue-qnli").contains("no train.tsv in") && !why("glue-qnli").contains("dev"));
    for name in ["glue-qqp", "glue-mnli-m", "glue-mnli-mm"] {
        assert!(why(name).contains("no train.tsv or dev"), "{name}: {}", why(name));
    }
}

#[test]
fn st5_eval_end_to_end_on_a_fixture_model() {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|p| p.parent()).unwrap().join("st5");
    assert!(bin.is_file(), "run `cargo build --release --bin st5` first");
    let out = std::env::temp_dir().join(format!("st5-eval-{}.json", std::process::id()));
    let o = std::process::Command::new(bin)
        .args([
            "eval",
            "--model",
            fixture("st-enc-mean-relu").to_str().unwrap(),
            "--data",
            shared_data().to_str().unwrap(),
        ])
        .args(["--tasks", "sts,transfer,sentglue,geometry,bias", "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "st5 eval failed: {}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    println!("{table}");
    for needle in [
        "STS12",
        "SICKR",
        "Avg7",
        "MRPC",
        "TREC",
        "GLUE-SST2",
        "GLUE-COLA",
        "GLUE-RTE",
        "skipped glue-qnli",
        "alignment",
        "sent-weat10",
        "exact (12870 partitions)",
    ] {
        assert!(table.contains(needle), "table lacks {needle}:\n{table}");
    }
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["sts"].as_array().unwrap().len(), 7);
    assert_eq!(r["transfer"].as_array().unwrap().len(), 7);
    let avg7 = r["avg7"].as_f64().unwrap();
    assert!(avg7.is_finite() && avg7.abs() <= 100.0, "avg7 {avg7}");
    for t in r["transfer"].as_array().unwrap() {
        let acc = t["accuracy"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&acc), "{t}");
    }
    let bias = r["bias"].as_array().unwrap();
    assert_eq!(bias.len(), 20);
    for t in bias {
        let (d, p) = (t["effect_size"].as_f64().unwrap(), t["p_value"].as_f64().unwrap());
        assert!(d.is_finite() && d.abs() <= 2.0 && (0.0..=1.0).contains(&p), "{t}");
    }
    let _ = std::fs::remove_file(out);
}

/// STS-B test is read by the STS task and by geometry: the embedding function must see each
/// distinct text exactly once.
#[test]
fn each_text_is_embedded_once_per_run() {
    let options = st5_eval::EvalOptions {
        data_dir: shared_data(),
        glue_dir: None,
        tasks: st5_eval::expand_tasks("stsb,geometry,stsb").unwrap(),
        protocol: Default::default(),
        query_prefix: String::new(),
        document_prefix: String::new(),
        modes: Vec::new(),
        fusions: Vec::new(),
    };
    let mut calls = 0;
    let mut seen = 0;
    let report = st5_eval::run(&options, &mut |texts: &[String]| {
        calls += 1;
        let distinct: std::collections::HashSet<&String> = texts.iter().collect();
        assert_eq!(distinct.len(), texts.len(), "duplicate texts sent to the embedder");
        seen = texts.len();
        // A deterministic stand-in embedding: text length and byte sums.
        let v = texts
            .iter()
            .flat_map(|t| [t.len() as f32, t.bytes().map(f32::from).sum::<f32>() % 97.0 + 1.0, 1.0])
            .collect();
        Ok((v, 3))
    })
    .unwrap();
    let pairs = data::sts_benchmark(&shared_data().join("stsbenchmark/sts-test.csv")).unwrap();
    let distinct: std::collections::HashSet<&String> =
        pairs.iter().flat_map(|p| [&p.a, &p.b]).collect();
    assert_eq!((calls, seen, report.texts_embedded), (1, distinct.len(), distinct.len()));
    assert_eq!(report.sts.len(), 1);
}

/// WEAT against the SEAT-style reference (`tests/reference/make_weat_fixture.py`, numpy) on the
/// same random vectors: effect size to 1e-9, and the exact permutation p-value equal (a count
/// over the same partitions). The planted associations come out planted, the null one not.
#[test]
fn weat_matches_the_reference_and_finds_planted_associations() {
    use st5_eval::bias::{PValue, weat};
    for case in json("weat.json").as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dim = case["dim"].as_u64().unwrap() as usize;
        let set =
            |k: &str| -> Vec<f32> { floats(&case[k]).into_iter().map(|v| v as f32).collect() };
        let (x, y, a, b) = (set("x"), set("y"), set("a"), set("b"));
        let (rx, ry, ra, rb): (Vec<&[f32]>, Vec<&[f32]>, Vec<&[f32]>, Vec<&[f32]>) = (
            x.chunks(dim).collect(),
            y.chunks(dim).collect(),
            a.chunks(dim).collect(),
            b.chunks(dim).collect(),
        );
        let (d, p, method) = weat(&rx, &ry, &ra, &rb);
        let want_d = case["effect_size"].as_f64().unwrap();
        let want_p = case["p_value"].as_f64().unwrap();
        let partitions = case["partitions"].as_u64().unwrap();
        assert!((d - want_d).abs() <= 1e-9, "{name}: d {d} vs reference {want_d}");
        assert_eq!(p, want_p, "{name}: p");
        assert_eq!(method, PValue::Exact { partitions }, "{name}");
        if name.starts_with("planted") {
            assert!(d > 1.0 && p < 0.01, "{name}: d {d}, p {p}");
        } else {
            assert!(d.abs() < 0.5 && p > 0.05, "{name}: d {d}, p {p}");
        }
    }
}

/// Every WEAT/SEAT file in shared/data parses, with the set sizes SOURCES.md lists.
#[test]
fn weat_stimuli_parse_with_their_sizes() {
    let tests = st5_eval::bias::WeatTest::load_all(&shared_data().join("weat")).unwrap();
    let sizes: Vec<[usize; 4]> = tests
        .iter()
        .map(|t| [&t.targ1, &t.targ2, &t.attr1, &t.attr2].map(|s| s.examples.len()))
        .collect();
    let want: [[usize; 4]; 20] = [
        [25, 25, 25, 25],
        [25, 25, 25, 25],
        [32, 32, 25, 25],
        [16, 16, 25, 25],
        [16, 16, 8, 8],
        [8, 8, 8, 8],
        [8, 8, 8, 8],
        [8, 8, 8, 8],
        [6, 6, 7, 7],
        [8, 8, 8, 8],
        [350, 350, 215, 250],
        [330, 330, 215, 250],
        [256, 256, 215, 249],
        [128, 128, 215, 249],
        [128, 128, 40, 47],
        [64, 64, 101, 112],
        [72, 72, 80, 80],
        [56, 56, 80, 80],
        [18, 18, 21, 23],
        [64, 64, 40, 47],
    ];
    assert_eq!(sizes, want);
    let err = st5_eval::bias::WeatTest::load(&fixture("eval").join("weat.json")).unwrap_err();
    assert!(err.to_string().contains("weat.json"), "{err}");
}

/// nDCG@10, recall@10 and @100 and MRR@10 equal pytrec_eval's (trec_eval's, what MTEB reports)
/// to 1e-6 on every query of a generated run with ties, graded relevance, judged queries with
/// nothing relevant, empty runs and runs shorter than the cut-offs
/// (`tests/reference/retrieval_metrics.py`).
#[test]
fn retrieval_metrics_equal_pytrec_eval() {
    use st5_eval::retrieval::metrics;
    let golden = json("retrieval.json");
    let queries = golden["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 60);
    let pairs = |v: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let (mut all_qrels, mut all_runs) = (Vec::new(), Vec::new());
    let mut want_mean = [0.0f64; 4];
    for q in queries {
        let qrels: Vec<(String, i64)> =
            pairs(&q["qrels"]).into_iter().map(|(d, g)| (d, g.as_i64().unwrap())).collect();
        let run: Vec<(String, f64)> =
            pairs(&q["run"]).into_iter().map(|(d, s)| (d, s.as_f64().unwrap())).collect();
        let qr: Vec<(&str, i64)> = qrels.iter().map(|(d, g)| (d.as_str(), *g)).collect();
        let rn: Vec<(&str, f64)> = run.iter().map(|(d, s)| (d.as_str(), *s)).collect();
        let got = metrics(std::slice::from_ref(&qr), std::slice::from_ref(&rn));
        let want = ["ndcg_at_10", "recall_at_10", "recall_at_100", "mrr_at_10"]
            .map(|k| q[k].as_f64().unwrap());
        let have = [got.ndcg_at_10, got.recall_at_10, got.recall_at_100, got.mrr_at_10];
        for ((name, w), h) in ["nDCG@10", "R@10", "R@100", "MRR@10"].iter().zip(want).zip(have) {
            assert!((w - h).abs() <= 1e-6, "{} {name}: {h} against pytrec_eval's {w}", q["id"]);
        }
        for (m, w) in want_mean.iter_mut().zip(want) {
            *m += w / queries.len() as f64;
        }
        all_qrels.push(qrels);
        all_runs.push(run);
    }
    let qr: Vec<Vec<(&str, i64)>> =
        all_qrels.iter().map(|q| q.iter().map(|(d, g)| (d.as_str(), *g)).collect()).collect();
    let rn: Vec<Vec<(&str, f64)>> =
        all_runs.iter().map(|q| q.iter().map(|(d, s)| (d.as_str(), *s)).collect()).collect();
    let m = metrics(&qr, &rn);
    let have = [m.ndcg_at_10, m.recall_at_10, m.recall_at_100, m.mrr_at_10];
    for (w, h) in want_mean.iter().zip(have) {
        assert!((w - h).abs() <= 1e-6, "mean {h} against {w}");
    }
}

/// A small BEIR directory: documents on four topics (one far past the fixture model's window),
/// queries for three of them, graded judgements, and a query whose judgements are all 0.
fn tiny_beir(dir: &std::path::Path) {
    let topics = [
        ("cats", "A cat sleeps on the warm windowsill in the afternoon sun."),
        ("trains", "The night train leaves the central station at nine."),
        ("bread", "Knead the dough and let the bread rise for an hour."),
        ("rain", "Heavy rain flooded the streets of the old town."),
    ];
    let mut corpus = String::new();
    for (i, (topic, text)) in topics.iter().enumerate() {
        for j in 0..5 {
            let body = if i == 3 && j == 0 { text.repeat(60) } else { format!("{text} ({j})") };
            let row =
                serde_json::json!({"_id": format!("{topic}-{j}"), "title": topic, "text": body});
            corpus += &format!("{row}\n");
        }
    }
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
    let queries = [
        ("q1", "where is my cat sleeping"),
        ("q2", "when does the train leave"),
        ("q3", "how long does bread rise"),
        ("q4", "unjudged"),
        ("q5", "weather"),
    ];
    let q: String = queries
        .iter()
        .map(|(i, t)| format!("{}\n", serde_json::json!({"_id": i, "text": t})))
        .collect();
    std::fs::write(dir.join("queries.jsonl"), q).unwrap();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for (q, topic) in [("q1", "cats"), ("q2", "trains"), ("q3", "bread")] {
        for j in 0..5 {
            qrels += &format!("{q}\t{topic}-{j}\t{}\n", if j == 0 { 2 } else { 1 });
        }
    }
    qrels += "q5\train-1\t0\n";
    std::fs::write(dir.join("qrels/test.tsv"), qrels).unwrap();
}

/// `st5 eval --tasks retrieval:DIR` end to end: its figures equal the metrics of an exact cosine
/// search over `st5 embed`'s vectors of the same texts (the query and `title text`); int8 and
/// binary codes run and find what exact search finds within their depth; truncation is counted.
#[test]
fn st5_eval_retrieval_end_to_end_on_a_fixture_model() {
    use st5_eval::retrieval::{exact_search, metrics};
    let dir = scratch_dir("beir-tiny");
    tiny_beir(&dir);
    // max_seq_length 60: one document is past it, the others within.
    let model = fixture("st-mpnet");
    let spec = format!("retrieval:{}", dir.display());
    let eval = |codes: &str| -> serde_json::Value {
        let out = dir.join(format!("eval-{codes}.json"));
        let o = std::process::Command::new(workspace_bin("st5"))
            .args(["eval", "--model", model.to_str().unwrap(), "--tasks", &spec, "--codes", codes])
            .args(["--json", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "st5 eval failed: {}", String::from_utf8_lossy(&o.stderr));
        let table = String::from_utf8(o.stdout).unwrap();
        assert!(table.contains("nDCG@10") && table.contains("truncated to it"), "{table}");
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        r["beir"][0].clone()
    };
    let exact = eval("none");
    assert_eq!((exact["queries"].as_u64(), exact["documents"].as_u64()), (Some(4), Some(20)));
    assert_eq!(exact["truncated_documents"].as_u64(), Some(1), "{exact}");
    assert_eq!(exact["split"], "test");

    // The same figures from `st5 embed` and the library's metrics.
    let task = st5_eval::retrieval::BeirTask::load(&dir, &["test"]).unwrap();
    let split = &task.splits[0];
    let embed = |texts: &[String]| -> Vec<f32> {
        let input = dir.join("texts.txt");
        std::fs::write(&input, texts.join("\n") + "\n").unwrap();
        let npy = dir.join("texts.npy");
        let o = std::process::Command::new(workspace_bin("st5"))
            .args(["embed", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap()])
            .args(["--output", npy.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (data, _, dim) = st5_core::npy::read_f32(&std::fs::read(&npy).unwrap()).unwrap();
        data.chunks(dim)
            .flat_map(|v| {
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(move |x| x / n)
            })
            .collect()
    };
    let (q, d) = (embed(&split.queries), embed(&task.docs));
    let dim = q.len() / split.queries.len();
    let hits = exact_search(&d, dim, &q, 100);
    let qrels: Vec<Vec<(&str, i64)>> = split
        .qrels
        .iter()
        .map(|j| j.iter().map(|&(r, g)| (task.doc_ids[r].as_str(), g)).collect())
        .collect();
    let runs: Vec<Vec<(&str, f64)>> = hits
        .iter()
        .map(|h| {
            h.iter().map(|&(r, s)| (task.doc_ids[r as usize].as_str(), f64::from(s))).collect()
        })
        .collect();
    let want = metrics(&qrels, &runs);
    for (k, w) in [
        ("ndcg_at_10", want.ndcg_at_10),
        ("recall_at_10", want.recall_at_10),
        ("mrr_at_10", want.mrr_at_10),
    ] {
        let h = exact[k].as_f64().unwrap();
        assert!((h - w).abs() < 1e-6, "{k}: st5 eval {h}, st5 embed + metrics {w}");
    }
    // Every document is within the depth: recall@100 is that of the judged queries with a
    // relevant document (3 of 4), whatever the codes.
    for codes in ["int8", "binary"] {
        let r = eval(codes);
        assert_eq!(r["codes"], codes);
        assert!((r["recall_at_100"].as_f64().unwrap() - 0.75).abs() < 1e-12, "{r}");
    }
    assert!((exact["recall_at_100"].as_f64().unwrap() - 0.75).abs() < 1e-12);
}
