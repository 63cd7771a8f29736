//! The trainer's loss and optimiser against PyTorch (fixtures from
//! tests/reference/make_trainer_fixtures.py): the contrastive loss and its gradient with respect
//! to every embedding, with and without hard negatives, symmetric or not; and three Adafactor
//! steps as `transformers.optimization.Adafactor` takes them. Tolerance: 1e-5 absolute, or
//! 1e-5 relative to the reference's magnitude where that is larger (f32 here, f64 there).
//! And GradCache against the plain step on a tiny random model.

use burn::optim::Optimizer;
use burn::tensor::{Device, Tensor, TensorData};
use serde_json::Value;
use st5_core::{SentenceModel, WeightDtype};
use st5_tests::fixture;
use st5_trainer::loss::ContrastiveLoss;

const TOL: f32 = 1e-5;

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("trainer").join(name)).unwrap()).unwrap()
}

fn matrix(v: &Value) -> (Vec<f32>, [usize; 2]) {
    let rows = v.as_array().unwrap();
    let data: Vec<f32> = rows
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32))
        .collect();
    let shape = [rows.len(), data.len() / rows.len()];
    (data, shape)
}

fn flat(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        x => vec![x.as_f64().unwrap() as f32],
    }
}

fn tensor(v: &Value, device: &Device) -> Tensor<2> {
    let (data, shape) = matrix(v);
    Tensor::from_data(TensorData::new(data, shape), device)
}

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// The worst error, each measured against max(1, |reference|) (absolute below 1, relative above).
fn worst(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / w.abs().max(1.0)).fold(0.0, f32::max)
}

#[test]
fn contrastive_loss_and_gradients_match_pytorch() {
    let fx = json("loss.json");
    let device = Device::flex().autodiff();
    let temperature = fx["temperature"].as_f64().unwrap() as f32;
    for case in fx["cases"].as_array().unwrap() {
        let (negatives, symmetric) =
            (case["negatives"].as_bool().unwrap(), case["symmetric"].as_bool().unwrap());
        let a = tensor(&fx["anchors"], &device).require_grad();
        let p = tensor(&fx["positives"], &device).require_grad();
        let n = tensor(&fx["negatives"], &device).require_grad();
        let loss = ContrastiveLoss { temperature, symmetric }.forward(
            a.clone(),
            p.clone(),
            negatives.then(|| n.clone()),
        );
        let got: f32 = loss.clone().into_data().try_to_vec::<f32>().unwrap()[0];
        let want = case["loss"].as_f64().unwrap() as f32;
        let label = format!("negatives {negatives}, symmetric {symmetric}");
        assert!((got - want).abs() <= TOL * want.abs().max(1.0), "{label}: loss {got} vs {want}");
        let grads = loss.backward();
        let mut errs = vec![
            worst(&values(a.grad(&grads).unwrap()), &flat(&case["grad_anchors"])),
            worst(&values(p.grad(&grads).unwrap()), &flat(&case["grad_positives"])),
        ];
        if negatives {
            errs.push(worst(&values(n.grad(&grads).unwrap()), &flat(&case["grad_negatives"])));
        }
        let err = errs.iter().copied().fold(0.0, f32::max);
        println!("{label}: loss {got:.6} (reference {want:.6}), worst gradient error {err:.2e}");
        assert!(err <= TOL, "{label}: gradient error {err:e}");
    }
}

#[test]
fn adafactor_steps_match_transformers() {
    let fx = json("adafactor.json");
    let device = Device::flex();
    let optim = st5_trainer::optim::adafactor().build();
    let lr = fx["lr"].as_f64().unwrap();
    let mut matrix_param = tensor(&fx["initial"]["matrix"], &device);
    let mut vector_param =
        Tensor::<1>::from_data(TensorData::new(flat(&fx["initial"]["vector"]), [5]), &device);
    let (mut ms, mut vs) = (None, None);
    for (i, step) in fx["steps"].as_array().unwrap().iter().enumerate() {
        let g = tensor(&step["grads"]["matrix"], &device);
        (matrix_param, ms) = optim.step(lr, matrix_param, g, ms);
        let g =
            Tensor::<1>::from_data(TensorData::new(flat(&step["grads"]["vector"]), [5]), &device);
        (vector_param, vs) = optim.step(lr, vector_param, g, vs);
        let em = worst(&values(matrix_param.clone()), &flat(&step["params"]["matrix"]));
        let ev = worst(
            &vector_param.clone().into_data().try_to_vec::<f32>().unwrap(),
            &flat(&step["params"]["vector"]),
        );
        println!("adafactor step {}: matrix error {em:.2e}, vector error {ev:.2e}", i + 1);
        assert!(em <= TOL && ev <= TOL, "step {}: matrix {em:e}, vector {ev:e}", i + 1);
    }
}

/// Every parameter's gradient in `grads`, in module order.
fn all_grads(model: &SentenceModel, grads: &burn::optim::GradientsParams) -> Vec<Vec<f32>> {
    use burn::module::{Module, ModuleVisitor, Param};
    struct V<'a>(&'a burn::optim::GradientsParams, Vec<Vec<f32>>);
    impl ModuleVisitor for V<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let g = self
                .0
                .get::<D>(param.id)
                .map(|g| g.into_data().try_to_vec::<f32>().unwrap())
                .unwrap_or_default();
            self.1.push(g);
        }
    }
    let mut v = V(grads, Vec::new());
    model.visit(&mut v);
    v.1
}

/// One GradCache step (chunks of 4 texts) gives the plain step's loss and gradients, and so the
/// same updated weights, on a tiny random model, with and without hard negatives.
#[test]
fn gradcache_step_equals_plain_step() {
    use st5_core::layout::DenseActivation;
    use st5_core::{HeadConfig, ModelConfig, Variant};
    use st5_trainer::step::{Batch, gradients};
    let cfg = ModelConfig::from_slice(br#"{"vocab_size": 64, "d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 2, "num_heads": 2}"#, std::path::Path::new("tiny")).unwrap();
    let base = Device::flex();
    // Seeded: the model's random init sets the gradients' scale, and with it how far the two
    // summation orders drift apart (unseeded, some inits exceeded the tolerance).
    base.seed(1);
    let head = HeadConfig {
        variant: Variant::EncMean,
        dense: vec![(8, 6, false, DenseActivation::Identity)],
        normalize: true,
    };
    let model = SentenceModel::init(&cfg, &head, &base.clone().autodiff());
    let seq = |seed: u32, len: usize| {
        (0..len).map(|i| 2 + (seed * 31 + i as u32 * 17) % 60).chain([1]).collect::<Vec<u32>>()
    };
    let mut batch = Batch {
        anchors: (0..5).map(|i| seq(i, 3 + i as usize)).collect(),
        positives: (0..5).map(|i| seq(i + 10, 7 - i as usize)).collect(),
        negatives: vec![],
    };
    let loss = ContrastiveLoss { temperature: 0.05, symmetric: true };
    for negatives in [false, true] {
        if negatives {
            batch.negatives = (0..5).map(|i| seq(i + 20, 2 + 2 * i as usize)).collect();
        }
        let (plain_loss, plain) = gradients(&model, &batch, &loss, None, &base);
        let (cached_loss, cached) = gradients(&model, &batch, &loss, Some(4), &base);
        assert!((plain_loss - cached_loss).abs() <= 1e-5, "loss {plain_loss} vs {cached_loss}");
        let (a, b) = (all_grads(&model, &plain), all_grads(&model, &cached));
        assert_eq!(a.len(), b.len());
        let mut worst = 0.0f32;
        let mut nonzero = 0;
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.len(), y.len(), "a parameter lacks a gradient on one side");
            nonzero += x.iter().any(|v| *v != 0.0) as usize;
            worst = worst.max(worst_abs(x, y));
        }
        let mut optim = st5_trainer::optim::adafactor().init();
        let p1 = optim.step(1e-3, model.clone(), plain);
        let mut optim = st5_trainer::optim::adafactor().init();
        let p2 = optim.step(1e-3, model.clone(), cached);
        let weights = |m: &SentenceModel| all_params(m);
        let wdiff = weights(&p1)
            .iter()
            .zip(&weights(&p2))
            .map(|(x, y)| worst_abs(x, y))
            .fold(0.0, f32::max);
        println!(
            "negatives {negatives}: loss {plain_loss:.6}; worst gradient difference {worst:.2e} over {nonzero} parameters with gradients; updated weights differ by {wdiff:.2e}"
        );
        assert!(nonzero > 10, "too few gradients: {nonzero}");
        assert!(worst <= 1e-5 && wdiff <= 1e-5, "gradients {worst:e}, weights {wdiff:e}");
    }
}

fn worst_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn all_params(model: &SentenceModel) -> Vec<Vec<f32>> {
    use burn::module::{Module, ModuleVisitor, Param};
    struct V(Vec<Vec<f32>>);
    impl ModuleVisitor for V {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().try_to_vec::<f32>().unwrap());
        }
    }
    let mut v = V(Vec::new());
    model.visit(&mut v);
    v.0
}

// --- whole runs of the `trainer` binary ---------------------------------------------------

use st5_tests::{root as repo_root, scratch_dir, shared_data, workspace_bin};
use std::path::{Path, PathBuf};
use std::process::Command;

/// trainer/configs/tiny.toml with absolute paths, its outputs under `dir`, and `edits`
/// (`(from, to)` text replacements) applied.
fn tiny_config(dir: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let root = repo_root();
    let mut text = std::fs::read_to_string(root.join("trainer/configs/tiny.toml")).unwrap();
    text = text.replace("\"../../target/tiny-st5\"", &format!("{:?}", dir.join("model"))).replace(
        "\"../../target/tiny-st5-checkpoints\"",
        &format!("{:?}", dir.join("checkpoints")),
    );
    text = text
        .replace("\"../../", &format!("\"{}/", root.display()))
        .replace("\"data/", &format!("\"{}/trainer/configs/data/", root.display()));
    text = text.replacen("seed = 7", &format!("seed = 7\neval_data = {:?}", shared_data()), 1);
    for (from, to) in edits {
        assert!(text.contains(from), "tiny.toml has no `{from}`");
        text = text.replacen(from, to, 1);
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn train(config: &Path, resume: bool) -> std::process::Child {
    let mut cmd = Command::new(workspace_bin("trainer"));
    cmd.args(["train", "--config"])
        .arg(config)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    if resume {
        cmd.arg("--resume");
    }
    cmd.spawn().unwrap()
}

fn finish(child: std::process::Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every tensor of a saved model directory's weight files, by file and name.
fn weights(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    for rel in ["model.safetensors", "2_Dense/model.safetensors"] {
        let ckpt = st5_core::checkpoint::Checkpoint::from_buffers(vec![(
            dir.join(rel),
            std::fs::read(dir.join(rel)).unwrap().into(),
        )])
        .unwrap();
        for name in ckpt.names() {
            out.push((format!("{rel}:{name}"), ckpt.to_f32(name).unwrap()));
        }
    }
    out
}

/// The tiny two-stage config runs end to end (QA pairs with GradCache, then NLI triplets with
/// hard negatives), and `st5 embed` loads what it wrote.
#[test]
fn tiny_two_stage_run_loads_in_st5_embed() {
    let dir = scratch_dir("tiny-run");
    let (ok, log) = finish(train(&tiny_config(&dir, &[]), false));
    assert!(ok, "trainer failed:\n{log}");
    assert!(log.contains("dropped: a text is in an evaluation test split"), "{log}");
    let csv = std::fs::read_to_string(dir.join("checkpoints/metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 40, "{csv}");
    let card = std::fs::read_to_string(dir.join("model/README.md")).unwrap();
    assert!(
        card.contains("## Data") && card.contains("STS-B dev") && card.contains("[[stage]]"),
        "{card}"
    );
    let out = Command::new(workspace_bin("st5"))
        .args(["embed", "--model"])
        .arg(dir.join("model"))
        .args(["--output"])
        .arg(dir.join("e.jsonl"))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"A man is playing a guitar.\nA dog runs.\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = std::fs::read_to_string(dir.join("e.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let v = first.get("embedding").unwrap_or(&first).as_array().unwrap().len();
    assert_eq!(v, 16, "the created Dense projects to dim 16");
}

/// The trainer trains the BERT and MPNet families through the same model code: the tiny
/// two-stage run from each family's random fixture (which has its own Dense) finishes with finite
/// losses, moves every encoder weight it trains, and writes a directory that loads back as the
/// same family with the trained weights.
#[test]
fn tiny_two_stage_run_trains_bert_and_mpnet() {
    for fixture_name in ["st-bert-gelu", "st-mpnet"] {
        let src = fixture(fixture_name);
        let dir = scratch_dir(&format!("tiny-{fixture_name}"));
        let init = format!("init = {:?}", src);
        let tokenizer = format!("tokenizer = {:?}", src.join("tokenizer.json"));
        // tiny_config has made the paths absolute before it applies the edits.
        let old_init = format!("init = {:?}", fixture("hf-t5-relu-f16"));
        let old_tokenizer =
            format!("tokenizer = {:?}", fixture("st-enc-mean-relu").join("tokenizer.json"));
        let edits =
            [(old_init.as_str(), init.as_str()), (old_tokenizer.as_str(), tokenizer.as_str())];
        let (ok, log) = finish(train(&tiny_config(&dir, &edits), false));
        assert!(ok, "{fixture_name}: trainer failed:\n{log}");
        let csv = std::fs::read_to_string(dir.join("checkpoints/metrics.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 40, "{fixture_name}: {csv}");
        for line in csv.lines().skip(1) {
            let loss: f32 = line.split(',').nth(2).unwrap().parse().unwrap();
            assert!(loss.is_finite(), "{fixture_name}: {line}");
        }
        // Every tensor but the pooler, which no family runs (names.rs) and saving leaves out.
        let (before, after) = (weights(&src), weights(&dir.join("model")));
        let kept: Vec<_> = before.iter().filter(|(n, _)| !n.contains("pooler.")).collect();
        assert_eq!(kept.len(), after.len(), "{fixture_name}: the same tensors");
        for ((name, b), (name2, a)) in kept.into_iter().zip(&after) {
            assert_eq!(name, name2);
            assert!(worst_abs(a, b) > 0.0, "{fixture_name}: {name} did not train");
        }
        let cfg: Value =
            serde_json::from_slice(&std::fs::read(dir.join("model/config.json")).unwrap()).unwrap();
        let family = fixture_name.trim_start_matches("st-").split('-').next().unwrap();
        assert_eq!(cfg["model_type"], family, "{fixture_name}");
        let e = st5_core::Embedder::load(
            &dir.join("model"),
            &st5_core::LoadOptions::default(),
            &Device::flex(),
        )
        .unwrap();
        assert_eq!(e.embed(&["A man is playing a guitar."]).unwrap().len(), 1);
    }
}

/// A run killed with SIGKILL mid-stage and resumed ends with the same weights as an
/// uninterrupted run (≤ 1e-6), on a model large enough that the kill lands mid-run.
#[test]
fn killed_and_resumed_run_equals_uninterrupted_run() {
    let root = scratch_dir("resume");
    // A 4-layer, d_model 64 random model: ~10 ms a step, so the kill lands mid-stage.
    let init = root.join("init");
    st5_tests::save_random_model(&init);
    let edits = |sub: &str| -> Vec<(String, String)> {
        vec![
            (
                "init = \"".to_string()
                    + &repo_root().join("tests/fixtures/hf-t5-relu-f16").display().to_string()
                    + "\"",
                format!("init = {:?}", init),
            ),
            ("steps = 20".into(), "steps = 30".into()),
            ("checkpoint_every = 5".into(), "checkpoint_every = 4".into()),
            ("eval_every = 10".into(), format!("eval_every = 0 # {sub}")),
        ]
    };
    let config = |sub: &str| {
        let e = edits(sub);
        let refs: Vec<(&str, &str)> = e.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        tiny_config(&root.join(sub), &refs)
    };
    let (ok, log) = finish(train(&config("straight"), false));
    assert!(ok, "{log}");

    let cut = config("cut");
    let mut child = train(&cut, false);
    let state = root.join("cut/checkpoints/latest/trainer_state.json");
    let started = std::time::Instant::now();
    // Kill after the stage-1 checkpoint at step 12 (or later) exists, before the run ends.
    loop {
        if let Ok(text) = std::fs::read_to_string(&state) {
            let s: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if s["stage"] == 0 && s["step"].as_u64().unwrap_or(0) >= 12 || s["stage"] == 1 {
                break;
            }
        }
        assert!(started.elapsed().as_secs() < 120, "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success(), "the run finished before it could be killed");
    assert!(!root.join("cut/model").exists(), "a killed run wrote no final model");
    let (ok, log) = finish(train(&cut, true));
    assert!(ok, "resume failed:\n{log}");
    // The metrics log holds each step once: the steps redone after the checkpoint replace the
    // killed run's rows.
    let csv = std::fs::read_to_string(root.join("cut/checkpoints/metrics.csv")).unwrap();
    let steps: Vec<String> =
        csv.lines().skip(1).map(|l| l.split(',').take(2).collect::<Vec<_>>().join(":")).collect();
    let want: Vec<String> =
        (1..=30).map(|i| format!("qa:{i}")).chain((1..=20).map(|i| format!("nli:{i}"))).collect();
    assert_eq!(steps, want);

    let (a, b) = (weights(&root.join("straight/model")), weights(&root.join("cut/model")));
    assert_eq!(a.len(), b.len());
    let mut worst = 0.0f32;
    for ((na, va), (nb, vb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        worst = worst.max(va.iter().zip(vb).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max));
    }
    let moved = a
        .iter()
        .zip(weights(&init))
        .map(|((_, x), (_, y))| x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max))
        .fold(0.0, f32::max);
    println!(
        "resumed vs uninterrupted: max abs weight difference {worst:e} (training moved weights by up to {moved:e})"
    );
    assert!(moved > 1e-4, "training did not change the weights");
    assert!(worst <= 1e-6, "resumed run differs by {worst:e}");
}

/// A run whose loss turns non-finite skips those steps with a warning, aborts after
/// `max_bad_steps` in a row with a clear message, and keeps its last good checkpoint.
#[test]
fn diverging_run_aborts_and_keeps_its_checkpoint() {
    let dir = scratch_dir("diverge");
    let config = tiny_config(
        &dir,
        &[
            ("eval_pairs = 200", "eval_pairs = 50\nmax_bad_steps = 3"),
            ("checkpoint_every = 5", "checkpoint_every = 1"),
            ("lr = 1e-3", "lr = 1e30"),
        ],
    );
    let (ok, log) = finish(train(&config, false));
    assert!(!ok, "a run at lr 1e30 finished:\n{log}");
    assert!(
        log.contains("non-finite") && log.contains("3 non-finite losses or gradients in a row"),
        "{log}"
    );
    assert!(
        dir.join("checkpoints/latest/trainer_state.json").is_file(),
        "the last good checkpoint is gone"
    );
    assert!(!dir.join("model").exists());
}

/// One full training step on a tiny random T5 (gated-gelu; mean pooling, Dense, Normalize)
/// matches PyTorch's: the same loss, and every weight after one Adafactor step within 1e-4.
#[test]
fn full_training_step_matches_pytorch() {
    use burn::module::Module;
    use st5_trainer::step::{Batch, gradients};
    let dir = fixture("trainer/step");
    let batch_json = json("step/batch.json");
    let ids = |k: &str| -> Vec<Vec<u32>> {
        batch_json[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect())
            .collect()
    };
    let batch =
        Batch { anchors: ids("anchors"), positives: ids("positives"), negatives: ids("negatives") };
    let base = Device::flex();
    let options = st5_core::LoadOptions {
        tokenizer: Some(fixture("st-enc-mean-relu").join("tokenizer.json")),
        ..Default::default()
    };
    let (model, _, _) =
        st5_core::Embedder::load(&dir.join("init"), &options, &base.clone().autodiff())
            .unwrap()
            .into_parts();
    let (loss, grads) = gradients(&model, &batch, &ContrastiveLoss::default(), None, &base);
    let want_loss = batch_json["loss"].as_f64().unwrap() as f32;
    assert!((loss - want_loss).abs() <= 1e-4, "loss {loss} vs PyTorch {want_loss}");
    let model = st5_trainer::optim::adafactor().init().step(1e-3, model, grads);
    let saved = scratch_dir("step-after");
    let config: Value =
        serde_json::from_slice(&std::fs::read(dir.join("init/config.json")).unwrap()).unwrap();
    let tokenizer = std::fs::read(fixture("st-enc-mean-relu").join("tokenizer.json")).unwrap();
    let opts = st5_core::save::SaveOptions {
        config,
        tokenizer_json: &tokenizer,
        max_seq_length: 16,
        readme: None,
        extra: vec![],
        dtype: WeightDtype::F32,
        input_absmax: None,
    };
    st5_core::save::save_sentence_transformers(&model.valid(), &saved, &opts).unwrap();
    let before = weights(&dir.join("init"));
    let (ours, theirs) = (weights(&saved), weights(&dir.join("after")));
    let find = |set: &[(String, Vec<f32>)], name: &str| {
        set.iter()
            .find(|(n, _)| {
                n == name
                    || (name.ends_with(":shared.weight")
                        && n.ends_with(":encoder.embed_tokens.weight"))
            })
            .map(|(_, v)| v.clone())
    };
    let (mut worst, mut moved) = (0.0f32, 0.0f32);
    for (name, v) in &ours {
        let w = find(&theirs, name).unwrap_or_else(|| panic!("PyTorch's step has no {name}"));
        let b = find(&before, name).unwrap();
        worst = worst.max(worst_abs(v, &w));
        moved = moved.max(worst_abs(&w, &b));
    }
    println!(
        "full step: loss {loss:.6} (PyTorch {want_loss:.6}); weights within {worst:.2e} of PyTorch's after a step that moved them by up to {moved:.2e}"
    );
    assert!(moved > 1e-4 && worst <= 1e-4, "worst {worst:e}, moved {moved:e}");
}

/// A distillation stage from a randomly initialised model (a bare `config.json`) learns a
/// teacher's embeddings: the mean squared error falls by more than half; and a text found in
/// an evaluation test split is dropped together with its teacher vector.
#[test]
fn distill_stage_learns_the_teacher() {
    let dir = scratch_dir("distill");
    std::fs::create_dir_all(&dir).unwrap();
    let qa = std::fs::read_to_string(repo_root().join("trainer/configs/data/qa.jsonl")).unwrap();
    let mut texts: Vec<String> = qa
        .lines()
        .take(96)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["positive"].as_str().unwrap().to_string()
        })
        .collect();
    // The first sentence of STS-B test: dropped with its vector.
    let sts = std::fs::read_to_string(shared_data().join("stsbenchmark/sts-test.csv")).unwrap();
    texts.insert(5, sts.lines().next().unwrap().split('\t').nth(5).unwrap().to_string());
    // The teacher: the random fixture model (12 dimensions).
    let teacher = st5_core::Embedder::load(
        &fixture("st-enc-mean-relu"),
        &Default::default(),
        &Device::flex(),
    )
    .unwrap();
    let mut targets = teacher.embed(&texts).unwrap().data;
    // Poison the dropped text's vector: if alignment slipped, the loss would blow up.
    targets[5 * 12..6 * 12].iter_mut().for_each(|x| *x = 1e6);
    let mut npy = Vec::new();
    st5_core::npy::write_f32(&mut npy, &targets, texts.len(), 12).unwrap();
    std::fs::write(dir.join("teacher.npy"), npy).unwrap();
    std::fs::write(
        dir.join("texts.jsonl"),
        texts
            .iter()
            .map(|t| serde_json::json!({ "text": t }).to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    std::fs::write(dir.join("student.json"), r#"{"vocab_size": 32128, "d_model": 16, "d_kv": 8, "d_ff": 32, "num_layers": 2, "num_heads": 2, "feed_forward_proj": "relu"}"#).unwrap();
    let config = format!(
        "seed = 1\noutput = {:?}\ncheckpoint_dir = {:?}\neval_pairs = 50\neval_data = {:?}\n[model]\ninit = {:?}\ntokenizer = {:?}\ndim = 12\nmax_seq_length = 32\n\
         [[stage]]\nname = \"distill\"\nkind = \"distill\"\nbatch_size = 16\nsteps = 80\noptimizer = \"adamw\"\n\
         [[stage.dataset]]\npath = {:?}\ncolumns = [\"text\"]\ntargets = {:?}\n",
        dir.join("model"),
        dir.join("ck"),
        shared_data(),
        dir.join("student.json"),
        fixture("st-enc-mean-relu").join("tokenizer.json"),
        dir.join("texts.jsonl"),
        dir.join("teacher.npy")
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
    let (ok, log) = finish(train(&dir.join("config.toml"), false));
    assert!(ok, "{log}");
    assert!(log.contains("96 examples (1 dropped"), "{log}");
    let csv = std::fs::read_to_string(dir.join("ck/metrics.csv")).unwrap();
    let losses: Vec<f64> =
        csv.lines().skip(1).map(|l| l.split(',').nth(2).unwrap().parse().unwrap()).collect();
    let (first, last) = (
        losses[..5].iter().sum::<f64>() / 5.0,
        losses[losses.len() - 10..].iter().sum::<f64>() / 10.0,
    );
    println!("distillation MSE: first 5 steps {first:.5}, last 10 steps {last:.5}");
    assert!(last < 0.5 * first && last < 1.0, "MSE {first} → {last}");
    assert!(
        workspace_bin("st5").is_file() && dir.join("model/2_Dense/model.safetensors").is_file()
    );
}

/// `model`'s embeddings of `texts` (tokenized by `embedder`), each text run alone on the CPU,
/// flattened: what `Embedder::embed` must equal bit for bit, since on the CPU it pads no text
/// (one text, one vector); a padded batch of them would differ in the last bits.
fn each_alone(model: &SentenceModel, embedder: &st5_core::Embedder, texts: &[&str]) -> Vec<f32> {
    let ids = embedder.tokenizer().encode_batch(texts).unwrap();
    ids.iter()
        .flat_map(|t| {
            let row = model.embed_ids(&[t.as_slice()], &Device::flex());
            st5_core::transfer::to_host(row.try_into_data()).unwrap()
        })
        .collect()
}

/// ST5-EncDec trains (the tiny config with `variant = "encdec-first"`), and the directory it
/// writes (decoder included, pooling mode `st5_encdec_first`) loads back without a `--variant`
/// as encdec-first and embeds exactly as the trained model did in memory.
#[test]
fn encdec_first_trains_and_loads_back_identically() {
    use burn::module::Module;
    use st5_core::{Embedder, LoadOptions, Variant};
    let dir = scratch_dir("tiny-encdec");
    let config = tiny_config(
        &dir,
        &[
            ("variant = \"enc-mean\"", "variant = \"encdec-first\"\nsave_dtype = \"f32\""),
            ("steps = 20", "steps = 4"),
            ("steps = 20", "steps = 4"),
        ],
    );
    let cfg = st5_trainer::config::TrainConfig::from_file(&config).unwrap();
    let (mut run, state) = st5_trainer::run::Run::new(cfg, false).unwrap();
    run.train(state, |_| {}).unwrap();
    run.export("tiny EncDec run".into()).unwrap();

    let saved = dir.join("model");
    let pooling = std::fs::read_to_string(saved.join("1_Pooling/config.json")).unwrap();
    assert!(pooling.contains("st5_encdec_first"), "{pooling}");
    let loaded = Embedder::load(&saved, &LoadOptions::default(), &Device::flex()).unwrap();
    assert_eq!(loaded.variant(), Variant::EncDecFirst);
    let texts = ["A man is playing a guitar.", "A dog runs in the park.", "Two"];
    let from_disk = loaded.embed(&texts).unwrap();
    let in_memory = each_alone(&run.model.valid(), &loaded, &texts);
    assert_eq!(from_disk.data, in_memory, "saved EncDec model embeds differently");

    // The decoder was trained and saved: its weights moved away from the starting fixture's.
    let decoder = |dir: &Path| -> Vec<f32> {
        let ckpt = st5_core::checkpoint::Checkpoint::from_buffers(vec![(
            dir.join("model.safetensors"),
            std::fs::read(dir.join("model.safetensors")).unwrap().into(),
        )])
        .unwrap();
        ckpt.to_f32("decoder.block.0.layer.1.EncDecAttention.q.weight").unwrap()
    };
    let start = decoder(&repo_root().join("tests/fixtures/hf-t5-relu-f16"));
    assert_ne!(decoder(&saved), start);
}

/// Soft-prompt tuning (Lester et al. 2021): the tiny two-stage config with `prompt_length = 4`
/// tunes a prompt on the frozen `st-enc-mean-relu` fixture. A run that crashes after a checkpoint
/// and is resumed writes the same prompt bit for bit as an uninterrupted run; the prompt file,
/// applied to the fixture loaded from disk, embeds exactly as the trained model did in memory (so
/// the model stayed frozen); training moved the prompt; another model refuses it.
#[test]
fn prompt_run_tunes_only_the_prompt_and_resumes_exactly() {
    use burn::module::Module;
    use st5_core::fingerprint::weights_fingerprint;
    use st5_core::prompt::Prompt;
    use st5_core::transfer::to_host;
    use st5_core::{Embedder, LoadOptions};
    use st5_trainer::config::TrainConfig;
    use st5_trainer::run::{Event, Run};
    let root = scratch_dir("tiny-prompt");
    let fixtures = repo_root().join("tests/fixtures");
    let config = |sub: &str| {
        let dir = root.join(sub);
        let (model_out, prompt_out) =
            (format!("{:?}", dir.join("model")), format!("{:?}", dir.join("p.safetensors")));
        let (from_init, to_init) = (
            format!("init = {:?}", fixtures.join("hf-t5-relu-f16").display().to_string()),
            format!("init = {:?}", fixtures.join("st-enc-mean-relu").display().to_string()),
        );
        let edits = [
            (model_out.as_str(), prompt_out.as_str()),
            (from_init.as_str(), to_init.as_str()),
            ("dim = 16\n", ""),
            ("checkpoint_every = 5", "checkpoint_every = 2"),
            ("chunk_size = 8", "chunk_size = 8\nprompt_length = 4"),
            ("clip_norm = 1.0", "clip_norm = 1.0\nprompt_length = 4"),
            ("steps = 20", "steps = 6"),
            ("steps = 20", "steps = 6"),
            ("lr = 1e-3", "lr = 0.05"),
            ("lr = 1e-3", "lr = 0.05"),
        ];
        TrainConfig::from_file(&tiny_config(&dir, &edits)).unwrap()
    };
    let prompt_of = |sub: &str| {
        let path = root.join(sub).join("p.safetensors");
        Prompt::from_bytes(&std::fs::read(&path).unwrap(), &path).unwrap()
    };

    let (mut straight, state) = Run::new(config("straight"), false).unwrap();
    let start = to_host(straight.model.prompt.as_ref().unwrap().val().try_into_data()).unwrap();
    straight.train(state, |_| {}).unwrap();
    straight.export("tiny prompt run".into()).unwrap();
    let card = std::fs::read_to_string(root.join("straight/p.md")).unwrap();
    assert_eq!(card, "tiny prompt run", "the card is not beside the prompt");

    // A crash right after the second checkpoint (qa step 4 of 6), then --resume.
    let (mut cut, state) = Run::new(config("cut"), false).unwrap();
    let mut checkpoints = 0;
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cut.train(state, |e| {
            if let Event::Checkpoint(_) = e {
                checkpoints += 1;
                assert!(checkpoints < 2, "crash after checkpoint {checkpoints}");
            }
        })
    }));
    assert!(crashed.is_err(), "the run was not interrupted");
    assert!(!root.join("cut/p.safetensors").exists());
    let (mut resumed, state) = Run::new(config("cut"), true).unwrap();
    assert_eq!(state.as_ref().map(|(s, _)| (s.stage, s.step)), Some((0, 4)));
    resumed.train(state, |_| {}).unwrap();
    resumed.export("tiny prompt run".into()).unwrap();
    let (a, b) = (prompt_of("straight"), prompt_of("cut"));
    assert_eq!(a, b, "the resumed run's prompt differs from the uninterrupted run's");
    let moved = a.values.iter().zip(&start).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
    assert!(moved > 1e-3, "training did not move the prompt ({moved:e})");
    let base = fixtures.join("st-enc-mean-relu");
    assert_eq!(a.meta.base_fingerprint, weights_fingerprint(&st5_core::Dir(base.clone())).unwrap());
    assert_eq!((a.meta.length, a.meta.d_model), (4, 8));

    // The file on the fixture from disk embeds exactly as the trained model in memory: the
    // model's weights did not move, and the prompt takes part.
    let texts = ["A man is playing a guitar.", "A dog runs in the park.", "Two"];
    let mut loaded = Embedder::load(&base, &LoadOptions::default(), &Device::flex()).unwrap();
    let plain = loaded.embed(&texts).unwrap();
    let path = root.join("straight/p.safetensors");
    loaded.set_prompt(Some((&a, &path)), &a.meta.base_fingerprint).unwrap();
    let prompted = loaded.embed(&texts).unwrap();
    assert_eq!(prompted.data, each_alone(&straight.model.valid(), &loaded, &texts));
    assert!(worst_abs(&prompted.data, &plain.data) > 1e-3, "the prompt changed nothing");

    // Another model (another fingerprint and width) refuses it.
    let other = fixtures.join("st-enc-first-gated-f16");
    let options =
        LoadOptions { tokenizer: Some(base.join("tokenizer.json")), ..Default::default() };
    let mut e = Embedder::load(&other, &options, &Device::flex()).unwrap();
    let fp = weights_fingerprint(&st5_core::Dir(other)).unwrap();
    let err = e.set_prompt(Some((&a, &path)), &fp).unwrap_err().to_string();
    assert!(err.contains("p.safetensors") && err.contains("made for"), "{err}");
}
