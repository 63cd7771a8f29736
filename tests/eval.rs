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
    };
    let mut calls = 0;
    let mut seen = 0;
    let report = st5_eval::run(&options, &mut |texts| {
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
