//! End-to-end tests of the `st5` binary: a sentence-transformers directory written by the Python
//! reference loads unchanged and reproduces its embeddings (≤ 1e-5 on cpu, ≤ 1e-4 on wgpu), the
//! output formats, search, and non-zero exits naming the file at fault.
//! Needs `cargo build --release --bin st5` first (the README's test command does it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use st5_tests::*;

fn st5_bin() -> PathBuf {
    workspace_bin("st5")
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(st5_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("st5-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The reference sentences that fit one per line (no embedded newline), with their expected rows.
fn line_sentences(model: &str) -> (Vec<String>, Vec<Vec<f32>>) {
    let exp = expected(model);
    let rows = &exp.embeddings[0].1;
    exp.sentences
        .iter()
        .zip(rows)
        .filter(|(s, _)| !s.contains('\n') && !s.contains('\r'))
        .map(|(s, r)| (s.clone(), r.clone()))
        .unzip()
}

fn check_embed(device: &str, tol: f32) {
    let model = fixture("st-enc-mean-relu");
    let (sentences, want) = line_sentences("st-enc-mean-relu");
    let input = scratch(&format!("in-{device}.txt"));
    std::fs::write(&input, sentences.join("\n") + "\n").unwrap();
    let out = scratch(&format!("out-{device}.npy"));
    let o = run(
        &[
            "embed",
            "--model",
            model.to_str().unwrap(),
            "--device",
            device,
            "--batch-size",
            "3",
            "--input",
            input.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "st5 embed failed: {}", String::from_utf8_lossy(&o.stderr));
    let (data, rows, cols) = st5_core::npy::read_f32(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!((rows, cols), (want.len(), want[0].len()));
    let err = want
        .iter()
        .enumerate()
        .map(|(i, w)| max_abs_diff(&data[i * cols..(i + 1) * cols], w))
        .fold(0.0, f32::max);
    println!("st5 embed --device {device}: max abs error {err:.2e}");
    assert!(err <= tol, "st5 embed on {device}: max abs error {err:e} > {tol:e}");
}

#[test]
fn embed_reproduces_reference_on_cpu() {
    check_embed("cpu", 1e-5);
}

#[test]
fn embed_reproduces_reference_on_wgpu() {
    if wgpu_device().is_some() {
        check_embed("wgpu", 1e-4);
    }
}

#[test]
fn embed_stdin_to_jsonl_keeps_order_and_empty_lines() {
    let model = fixture("st-enc-mean-relu");
    let o = run(
        &["embed", "--model", model.to_str().unwrap()],
        "Short.\n\nA man is playing a guitar.\n".as_bytes(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<Vec<f32>> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    let exp = expected("st-enc-mean-relu");
    let want = |s: &str| &exp.embeddings[0].1[exp.sentences.iter().position(|x| x == s).unwrap()];
    for (row, s) in rows.iter().zip(["Short.", "", "A man is playing a guitar."]) {
        assert!(max_abs_diff(row, want(s)) <= 1e-5, "row for {s:?}");
    }
}

#[test]
fn search_ranks_an_exact_match_first() {
    let corpus = scratch("corpus.txt");
    std::fs::write(
        &corpus,
        "A man is playing a guitar.\nWhat is the capital of France?\nShort.\nPrices rose 3.5%.\n",
    )
    .unwrap();
    let model = fixture("st-enc-mean-relu");
    let o = run(
        &[
            "search",
            "--model",
            model.to_str().unwrap(),
            "--corpus",
            corpus.to_str().unwrap(),
            "-k",
            "3",
            "What is the capital of France?",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0][2], "What is the capital of France?", "{out}");
    let scores: Vec<f32> = lines.iter().map(|l| l[1].parse().unwrap()).collect();
    assert!((scores[0] - 1.0).abs() < 1e-4, "{out}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "scores not descending: {out}");
}

/// `st5` without `--model` runs the copy of the default model (`models/DEFAULT` names it) compiled
/// into it.
#[test]
fn built_in_model_is_the_shipped_directory() {
    let text = b"A man is playing a guitar.\nWhere is Paris?\n\n";
    let built_in = run(&["embed"], text);
    let shipped = run(&["embed", "--model", default_model().to_str().unwrap()], text);
    assert!(built_in.status.success(), "{}", String::from_utf8_lossy(&built_in.stderr));
    assert!(shipped.status.success(), "{}", String::from_utf8_lossy(&shipped.stderr));
    assert_eq!(String::from_utf8_lossy(&built_in.stdout).lines().count(), 3);
    assert_eq!(built_in.stdout, shipped.stdout);
}

/// The built-in model ranks by meaning: each query, worded differently from every line of the
/// sample corpus, finds its paraphrase first.
#[test]
fn built_in_model_finds_paraphrases_in_the_sample_corpus() {
    let corpus = root().join("tests/fixtures/corpus.txt");
    let cases = [
        ("Someone is strumming a guitar.", "A man is playing a guitar."),
        ("Kids play soccer outside.", "Children are playing football in the park."),
        (
            "The forecast says it will pour tomorrow.",
            "Heavy rain is expected across the north tomorrow.",
        ),
        ("A kitten is napping by the window.", "The cat sleeps on the warm windowsill."),
        ("Shares dropped after the news.", "Stock markets fell sharply after the announcement."),
        ("Someone is chopping vegetables.", "A woman is slicing an onion in the kitchen."),
    ];
    for (query, want) in cases {
        let o = run(&["search", "--corpus", corpus.to_str().unwrap(), "-k", "3", query], b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        assert_eq!(
            out.lines().next().and_then(|l| l.split('\t').nth(2)),
            Some(want),
            "{query}:\n{out}"
        );
    }
}

#[test]
fn bad_input_exits_non_zero_naming_the_culprit() {
    let model = fixture("st-enc-mean-relu");
    let m = model.to_str().unwrap();
    // Missing model directory.
    let o = run(&["embed", "--model", "/nonexistent/model-dir"], b"hi\n");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/model-dir"));
    // Invalid UTF-8 on stdin.
    let o = run(&["embed", "--model", m], b"fine\n\xff\xfe broken\n");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("line 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Truncated weights.
    let dir = scratch_copy("st-enc-mean-relu", "cli-truncated");
    let st = dir.join("model.safetensors");
    let bytes = std::fs::read(&st).unwrap();
    std::fs::write(&st, &bytes[..1000]).unwrap();
    let o = run(&["embed", "--model", dir.to_str().unwrap()], b"hi\n");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("model.safetensors"));
    // A failed run leaves an existing output file untouched.
    let out = scratch("keep.npy");
    std::fs::write(&out, b"precious").unwrap();
    let o = run(
        &["embed", "--model", dir.to_str().unwrap(), "--output", out.to_str().unwrap()],
        b"hi\n",
    );
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let _ = std::fs::remove_dir_all(dir);
    // Unknown variant.
    let o = run(&["embed", "--model", m, "--variant", "enc-max"], b"hi\n");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("enc-max"));
}

/// The README's library example is `crates/st5-core/examples/embed.rs` (each of its code lines
/// is there, so the README cannot drift from what compiles), and that example runs on the
/// built-in model's directory.
#[test]
fn the_readme_library_example_compiles_and_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a ```rust block");
    let example_path = root().join("crates/st5-core/examples/embed.rs");
    let example = std::fs::read_to_string(&example_path).unwrap();
    let lines: Vec<&str> = example.lines().map(str::trim).collect();
    let code = block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//"));
    for line in code {
        assert!(lines.contains(&line), "README line not in {}: {line}", example_path.display());
    }
    // cargo test builds examples beside the test binaries: target/<profile>/examples/.
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("examples/embed");
    let out = Command::new(&bin).arg(root().join("models/st5-mini")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("2 x 384, cosine "), "{stdout}");
    let missing = Command::new(&bin).arg(scratch("no-such-model")).output().unwrap();
    assert!(!missing.status.success(), "a missing directory is an error");
}

/// An EncDec checkpoint in the sentence-transformers layout has a Pooling module with no mode
/// (sentence-transformers has none for the first decoder output). An explicit `--variant` wins
/// over it and reproduces the reference; without one, the error names the Pooling config.
#[test]
fn an_explicit_variant_overrides_a_pooling_config_without_a_mode() {
    let hf = fixture("hf-t5-relu-f16");
    let dir = scratch("encdec-st");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    for entry in std::fs::read_dir(&hf).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::copy(tokenizer_json(), dir.join("tokenizer.json")).unwrap();
    let modules = r#"[
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    ]"#;
    std::fs::write(dir.join("modules.json"), modules).unwrap();
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"word_embedding_dimension": 16}"#)
        .unwrap();
    let exp = expected("hf-t5-relu-f16");
    let (sentence, want) = exp
        .sentences
        .iter()
        .zip(&exp.embeddings.iter().find(|(v, _)| v == "encdec-first").unwrap().1)
        .find(|(s, _)| !s.is_empty() && !s.contains('\n'))
        .unwrap();
    let max_len = exp.max_seq_length.to_string();
    let args = ["embed", "--model", dir.to_str().unwrap(), "--max-seq-length", max_len.as_str()];
    let o = run(
        &[&args[..], &["--variant", "encdec-first"]].concat(),
        format!("{sentence}\n").as_bytes(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let row: Vec<f32> = serde_json::from_str(String::from_utf8(o.stdout).unwrap().trim()).unwrap();
    let err = max_abs_diff(&row, want);
    assert!(err <= 1e-5, "encdec-first through an explicit variant: max abs error {err:e}");
    let o = run(&args, format!("{sentence}\n").as_bytes());
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "no variant and no pooling mode must be refused");
    assert!(msg.contains("1_Pooling/config.json") && msg.contains("variant"), "{msg}");
}

/// `st5 index build` then `st5 index query`, for each mode: the same top 3 as `st5 search` (the
/// corpus is small, so rescoring the oversampled candidates is exact; with `--oversample 1`
/// only the codes' own top 3 are rescored); another model's or another variant's query and a
/// damaged file are refused, naming the file.
#[test]
fn a_saved_index_answers_as_search_does_and_refuses_what_it_cannot_use() {
    let corpus = root().join("tests/fixtures/corpus.txt");
    let corpus = corpus.to_str().unwrap();
    let query = "Someone is strumming a guitar.";
    let o = run(&["search", "--corpus", corpus, "-k", "3", query], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = String::from_utf8(o.stdout).unwrap();
    // Texts agree exactly; scores to the 4 printed decimals (f32 sums in another order).
    let column = |s: &str, i: usize| {
        s.lines().map(|l| l.split('\t').nth(i).unwrap().to_string()).collect::<Vec<_>>()
    };
    let scores =
        |s: &str| column(s, 1).iter().map(|x| x.parse::<f32>().unwrap()).collect::<Vec<_>>();
    // (codes, oversample, the flag naming the codes: `--quantize` is `--codes`'s older name)
    for (mode, oversample, flag) in [
        ("none", None, "--codes"),
        ("int8", None, "--codes"),
        ("int8", Some("1"), "--quantize"),
        ("binary", None, "--codes"),
    ] {
        let index = scratch(&format!("corpus-{mode}.st5index"));
        let index = index.to_str().unwrap();
        let o = run(&["index", "build", "--corpus", corpus, "--output", index, flag, mode], b"");
        assert!(o.status.success(), "{mode}: {}", String::from_utf8_lossy(&o.stderr));
        let mut args = vec!["index", "query", index, "-k", "3", query];
        args.extend(oversample.map(|o| ["--oversample", o]).into_iter().flatten());
        let o = run(&args, b"");
        assert!(o.status.success(), "{mode}: {}", String::from_utf8_lossy(&o.stderr));
        let got = String::from_utf8(o.stdout).unwrap();
        assert_eq!(column(&got, 2), column(&want, 2), "{mode} {oversample:?}");
        let (got, want) = (scores(&got), scores(&want));
        assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1.5e-4), "{got:?} vs {want:?}");
    }
    let index = scratch("corpus-int8.st5index");
    let other = fixture("st-enc-mean-relu");
    let o = run(
        &["index", "query", "--model", other.to_str().unwrap(), index.to_str().unwrap(), query],
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("another model"), "{err}");
    // The same weights pooled another way give other vectors: refused too.
    let o = run(&["index", "query", "--variant", "enc-first", index.to_str().unwrap(), query], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("another model"), "{err}");
    let o = run(&["index", "query", "--oversample", "0", index.to_str().unwrap(), query], b"");
    assert!(!o.status.success(), "--oversample 0 accepted");
    let mut bytes = std::fs::read(&index).unwrap();
    bytes.truncate(bytes.len() - 100);
    let cut = scratch("cut.st5index");
    std::fs::write(&cut, &bytes).unwrap();
    let o = run(&["index", "query", cut.to_str().unwrap(), query], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("cut.st5index") && err.contains("truncated"),
        "{err}"
    );
}

/// `st5 embed` on the built-in model (int8 compute): every text gets the same bits embedded one
/// at a time on one thread as in reversed, duplicated batches of 64 on every core.
#[test]
fn st5_embed_gives_a_text_the_same_bits_in_any_batch() {
    let (mut texts, _) = line_sentences("st-bert-gelu");
    texts.push(String::new());
    let input = scratch("invariance-in.txt");
    std::fs::write(&input, texts.join("\n") + "\n").unwrap();
    let mut mixed: Vec<String> = texts.iter().rev().cloned().collect();
    mixed.extend(texts.iter().take(3).cloned());
    let mixed_input = scratch("invariance-mixed.txt");
    std::fs::write(&mixed_input, mixed.join("\n") + "\n").unwrap();
    let embed = |input: &Path, batch: &str, threads: &str, out: &str| {
        let out = scratch(out);
        let o = Command::new(st5_bin())
            .args(["embed", "--batch-size", batch, "--input", input.to_str().unwrap()])
            .args(["--output", out.to_str().unwrap()])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert!(o.status.success(), "st5 embed failed: {}", String::from_utf8_lossy(&o.stderr));
        let (data, rows, cols) = st5_core::npy::read_f32(&std::fs::read(&out).unwrap()).unwrap();
        (data.iter().map(|x| x.to_bits()).collect::<Vec<u32>>(), rows, cols)
    };
    let (alone, rows, d) = embed(&input, "1", "1", "invariance-alone.npy");
    assert_eq!(rows, texts.len());
    let (batched, rows, _) = embed(&mixed_input, "64", "4", "invariance-batched.npy");
    assert_eq!(rows, mixed.len());
    for (k, text) in mixed.iter().enumerate() {
        let i = texts.iter().position(|t| t == text).unwrap();
        assert!(
            alone[i * d..(i + 1) * d] == batched[k * d..(k + 1) * d],
            "text {i} ({text:?}) differs between alone and in a batch at position {k}"
        );
    }
}

/// Every int8 kernel this CPU runs, forced with `ST5_INT8_KERNEL`, gives the built-in model's
/// vectors the same bits (AMX, the VNNI forms, AVX2, scalar: exact i32 products), and `--stats`
/// names the kernel that ran.
#[test]
fn every_int8_kernel_gives_the_same_vectors() {
    use st5_core::int8::{ACT_BITS, Kernel};
    let (texts, _) = line_sentences("st-bert-gelu");
    let input = scratch("kernels-in.txt");
    std::fs::write(&input, texts.join("\n") + "\n").unwrap();
    let kernels: Vec<Kernel> =
        Kernel::available().into_iter().filter(|k| k.accepts(ACT_BITS)).collect();
    let mut first: Option<(Kernel, Vec<u8>)> = None;
    for kernel in kernels {
        let out = scratch(&format!("kernels-{}.npy", kernel.name()));
        let o = Command::new(st5_bin())
            .args(["embed", "--stats", "--input", input.to_str().unwrap()])
            .args(["--output", out.to_str().unwrap()])
            .env("ST5_INT8_KERNEL", kernel.name())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{kernel:?}: {stderr}");
        assert!(
            stderr.contains(&format!("({kernel:?} kernel)")),
            "{kernel:?} did not run: {stderr}"
        );
        let bytes = std::fs::read(&out).unwrap();
        match &first {
            None => first = Some((kernel, bytes)),
            Some((k0, b0)) => assert!(b0 == &bytes, "{kernel:?} differs from {k0:?}"),
        }
    }
}

/// `st5 index build`'s scores are the dot products of `st5 embed`'s vectors, to the last bit: the
/// corpus embedded in batches and each query alone give the same bits as `st5 embed` gives them
/// in its own batches, and a quantized index's candidates are rescored by the f32 dot product in
/// dimension order (an f32 index's matrix product sums in its own order: within 1e-6).
#[test]
fn index_scores_are_the_dot_products_of_embed_vectors() {
    let (mut docs, _) = line_sentences("st-bert-gelu");
    docs.extend(
        std::fs::read_to_string(root().join("tests/fixtures/corpus.txt"))
            .unwrap()
            .lines()
            .map(String::from),
    );
    let queries = ["Someone is strumming a guitar.", "capital city", "", "markets"];
    let corpus = scratch("dots-corpus.txt");
    std::fs::write(&corpus, docs.join("\n") + "\n").unwrap();
    let queries_file = scratch("dots-queries.txt");
    std::fs::write(&queries_file, queries.join("\n") + "\n").unwrap();
    let embed = |input: &Path, out: &str| {
        let out = scratch(out);
        let o = run(
            &["embed", "--input", input.to_str().unwrap(), "--output", out.to_str().unwrap()],
            b"",
        );
        assert!(o.status.success(), "st5 embed: {}", String::from_utf8_lossy(&o.stderr));
        let (mut data, rows, dim) = st5_core::npy::read_f32(&std::fs::read(&out).unwrap()).unwrap();
        st5_core::model::l2_normalize_rows(&mut data, dim);
        (data, rows, dim)
    };
    let (d, n, dim) = embed(&corpus, "dots-corpus.npy");
    assert_eq!(n, docs.len());
    let (q, nq, _) = embed(&queries_file, "dots-queries.npy");
    assert_eq!(nq, queries.len());
    for codes in ["int8", "binary", "none"] {
        let index = scratch(&format!("dots-{codes}.st5index"));
        let index = index.to_str().unwrap();
        let o = run(
            &[
                "index",
                "build",
                "--corpus",
                corpus.to_str().unwrap(),
                "--output",
                index,
                "--codes",
                codes,
            ],
            b"",
        );
        assert!(o.status.success(), "{codes}: {}", String::from_utf8_lossy(&o.stderr));
        for (qi, query) in queries.iter().enumerate() {
            let k = n.to_string();
            let o = run(&["index", "query", "--json", "-k", &k, index, query], b"");
            assert!(
                o.status.success(),
                "{codes} {query:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let hits = got["hits"].as_array().unwrap();
            assert_eq!(hits.len(), n, "{codes} {query:?}: every document ranked");
            let query_row = &q[qi * dim..][..dim];
            for h in hits {
                let id = h["id"].as_u64().unwrap() as usize;
                assert_eq!(h["text"].as_str().unwrap(), docs[id], "{codes} {query:?}: hit {id}");
                let score = h["score"].as_f64().unwrap() as f32;
                let dot: f32 = d[id * dim..][..dim].iter().zip(query_row).map(|(a, b)| a * b).sum();
                match codes {
                    "none" => {
                        assert!((score - dot).abs() <= 1e-6, "{query:?} doc {id}: {score} vs {dot}")
                    }
                    _ => assert_eq!(
                        score.to_bits(),
                        dot.to_bits(),
                        "{codes} {query:?} doc {id}: {score} vs {dot}"
                    ),
                }
            }
        }
    }
}

/// `--passages paragraphs`: a blank line ends a passage (the heading and each paragraph are
/// passages of their own), so a hit shows first the paragraph it is in;
/// by window (the default) short paragraphs share one passage; an unknown split is refused.
#[test]
fn passages_split_by_paragraphs_on_request() {
    let body =
        "Weather\n\nThe river rose after a week of rain.\n\nSnow stayed late on the mountains.";
    let input = scratch("paragraphs.jsonl");
    std::fs::write(&input, serde_json::json!({"id": "w", "body": body}).to_string() + "\n")
        .unwrap();
    let input_s = input.to_str().unwrap();
    let hit = |split: &str| -> Vec<String> {
        let index = scratch(&format!("paragraphs-{split}.st5index"));
        let index_s = index.to_str().unwrap();
        let o = run(
            &[
                "index",
                "build",
                "--docs",
                input_s,
                "--text",
                "body",
                "--passages",
                split,
                "--output",
                index_s,
            ],
            b"",
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(&["index", "query", index_s, "--json", "--mode", "keyword", "mountains"], b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let passages = got["hits"][0]["passages"].as_array().unwrap();
        passages.iter().map(|p| p["text"].as_str().unwrap().to_string()).collect()
    };
    // The best passage first: the paragraph that holds the word, or the whole short body.
    let paragraphs = hit("paragraphs");
    assert_eq!(paragraphs[0], "Snow stayed late on the mountains.");
    assert_eq!(paragraphs.len(), 3, "{paragraphs:?}");
    assert_eq!(hit("window"), [body]);
    let o =
        run(&["index", "build", "--docs", input_s, "--passages", "pages", "--output", "x"], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("window or paragraphs"), "{err}");
}

/// `st5 index build --docs` (JSON Lines, a schema from flags, passages of a 32-token window):
/// vector scores are the dot products of `st5 embed`'s vectors of the passages and the query, to
/// the last bit; a filter returns only matching documents, with facet counts over all of them;
/// keyword hits highlight the query's words; `add` replaces by id and `remove` deletes, a
/// missing id or a document that breaks the schema is refused by name and leaves the file as
/// it was; a lines index answers keyword queries too.
#[test]
fn a_documents_index_searches_filters_updates_and_refuses_bad_documents() {
    let long = "The river flooded the old town. ".repeat(12);
    let docs = [
        serde_json::json!({"id": "guitar", "title": "Guitar lessons", "body": "A man is playing a guitar on the stage.", "year": 2021, "tags": ["music"]}),
        serde_json::json!({"id": "onion", "title": "Kitchen", "body": "A woman is slicing an onion in the kitchen.", "year": 2018, "tags": ["food"]}),
        serde_json::json!({"id": "paris", "title": "Capitals", "body": "Paris is the capital of France.", "year": 2022, "tags": ["travel", "europe"]}),
        serde_json::json!({"id": "river", "title": "Floods", "body": long, "year": 2020, "tags": ["news", "europe"]}),
        serde_json::json!({"id": "stocks", "body": "Stock markets fell sharply after the announcement.", "year": 2019}),
    ];
    let jsonl = |docs: &[serde_json::Value], name: &str| {
        let path = scratch(name);
        std::fs::write(&path, docs.iter().map(|d| d.to_string() + "\n").collect::<String>())
            .unwrap();
        path
    };
    let input = jsonl(&docs, "docs.jsonl");
    let index = scratch("docs.st5index");
    let index_s = index.to_str().unwrap();
    let window = ["--max-seq-length", "32"];
    let mut build = vec!["index", "build", "--docs", input.to_str().unwrap(), "--output", index_s];
    build.extend(["--text", "title:2,body", "--field", "year:number", "--field", "tags:string[]"]);
    build.extend(window);
    let o = run(&build, b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let query = |args: &[&str], q: &str| -> serde_json::Value {
        let mut a = vec!["index", "query", index_s, "--json", "-k", "10"];
        a.extend(window);
        a.extend(args);
        a.push(q);
        let o = run(&a, b"");
        assert!(o.status.success(), "{a:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let embed = |texts: &[&str]| -> Vec<Vec<f32>> {
        let o = run(&["embed", "--max-seq-length", "32"], texts.join("\n").as_bytes());
        assert!(o.status.success());
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Vec<f32> = serde_json::from_str(l).unwrap();
                st5_core::model::l2_normalize_rows(&mut v, usize::MAX);
                v
            })
            .collect()
    };
    // Vector scores, passage by passage.
    let q = "the town was under water";
    let got = query(&["--mode", "vector"], q);
    let hits = got["hits"].as_array().unwrap();
    assert_eq!(hits.len(), docs.len());
    assert_eq!(hits[0]["id"], "river");
    assert!(
        hits[0]["passages"].as_array().unwrap().len() > 1,
        "a long body makes several passages"
    );
    let qv = &embed(&[q])[0];
    for h in hits {
        let best = h["passages"][0]["score"].as_f64().unwrap() as f32;
        assert_eq!(best.to_bits(), (h["score"].as_f64().unwrap() as f32).to_bits(), "{}", h["id"]);
        for p in h["passages"].as_array().unwrap() {
            let text = p["text"].as_str().unwrap();
            let field = h["document"][p["field"].as_str().unwrap()].as_str().unwrap();
            let chars: Vec<char> = field.chars().collect();
            let (a, b) =
                (p["start"].as_u64().unwrap() as usize, p["end"].as_u64().unwrap() as usize);
            assert_eq!(
                chars[a..b].iter().collect::<String>(),
                text,
                "offsets map back to the field"
            );
            let dot: f32 = embed(&[text])[0].iter().zip(qv).map(|(x, y)| x * y).sum();
            let score = p["score"].as_f64().unwrap() as f32;
            assert_eq!(score.to_bits(), dot.to_bits(), "{}: {text:?}: {score} vs {dot}", h["id"]);
        }
    }
    // A filter, and facets over everything it matches.
    let got = query(
        &["--where", "year >= 2020 and tags in (europe, music)", "--facets", "tags"],
        "europe",
    );
    let ids: Vec<&str> =
        got["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ["guitar", "paris", "river"]);
    assert_eq!(got["matched"], 3);
    assert_eq!(
        got["facets"]["tags"],
        serde_json::json!([["europe", 2], ["music", 1], ["news", 1], ["travel", 1]])
    );
    // Keyword: the word found and marked.
    let got = query(&["--mode", "keyword"], "onions");
    let hit = &got["hits"][0];
    assert_eq!((hit["id"].as_str(), got["hits"].as_array().unwrap().len()), (Some("onion"), 1));
    let p = &hit["passages"][0];
    let text: Vec<char> = p["text"].as_str().unwrap().chars().collect();
    let [a, b] = [0, 1].map(|i| {
        p["highlights"][0][i].as_u64().unwrap() as usize - p["start"].as_u64().unwrap() as usize
    });
    assert_eq!(text[a..b].iter().collect::<String>(), "onion");
    // add replaces by id; remove deletes; what is refused changes nothing.
    let more = jsonl(
        &[
            serde_json::json!({"id": "onion", "body": "Garlic and shallots.", "year": 2024}),
            serde_json::json!({"id": "tea", "body": "Green tea leaves.", "year": 2023}),
        ],
        "more.jsonl",
    );
    let o = run(
        &[&["index", "add", index_s, "--docs", more.to_str().unwrap()][..], &window].concat(),
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(query(&["--mode", "keyword"], "onion")["hits"].as_array().unwrap().is_empty());
    assert_eq!(query(&["--mode", "keyword"], "shallots")["hits"][0]["id"], "onion");
    assert_eq!(query(&["--mode", "keyword"], "tea")["hits"][0]["id"], "tea");
    let o = run(&[&["index", "remove", index_s, "guitar"][..], &window].concat(), b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = std::fs::read(&index).unwrap();
    // Five documents again (tea in, guitar out), none of them guitar.
    let all = query(&[], "guitar");
    let ids: Vec<&str> =
        all["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert!(ids.len() == docs.len() && !ids.contains(&"guitar"), "{ids:?}");
    let o = run(&[&["index", "remove", index_s, "tea", "nothing-here"][..], &window].concat(), b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("nothing-here"), "{err}");
    let bad = jsonl(
        &[
            serde_json::json!({"id": "x", "body": "fine"}),
            serde_json::json!({"id": "y", "year": "soon"}),
        ],
        "bad.jsonl",
    );
    let o = run(
        &[&["index", "add", index_s, "--docs", bad.to_str().unwrap()][..], &window].concat(),
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("\"y\"")
            && err.contains("`year`")
            && err.contains("bad.jsonl"),
        "{err}"
    );
    assert_eq!(std::fs::read(&index).unwrap(), before, "a refused change altered the file");
    // A lines index (`--corpus`) answers a keyword query, ids its line numbers.
    let lines = scratch("lines.st5index");
    let corpus = root().join("tests/fixtures/corpus.txt");
    let o = run(
        &[
            "index",
            "build",
            "--corpus",
            corpus.to_str().unwrap(),
            "--output",
            lines.to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success());
    let o = run(
        &["index", "query", lines.to_str().unwrap(), "--mode", "keyword", "--json", "France"],
        b"",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let line: usize = got["hits"][0]["id"].as_str().unwrap().parse().unwrap();
    let text = std::fs::read_to_string(&corpus).unwrap();
    assert!(text.lines().nth(line).unwrap().contains("France"));
}
