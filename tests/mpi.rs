//! Data-parallel training under MPI (trainer/src/dist.rs): `mpirun -np 2 trainer-mpi` on
//! localhost against one process. `scripts/test.sh` builds `trainer-mpi` (the `trainer` binary
//! with the `mpi` feature) and installs Open MPI; `ST5_SKIP_MPI=1` skips these tests on a
//! machine without them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use st5_tests::{root, scratch_dir, shared_data, workspace_bin};

fn skip() -> bool {
    if std::env::var_os("ST5_SKIP_MPI").is_some_and(|v| v == "1") {
        st5_core::device::report_skipped("MPI (ST5_SKIP_MPI=1)");
        return true;
    }
    assert!(
        workspace_bin("trainer-mpi").is_file(),
        "no trainer-mpi: build it with scripts/test.sh (or set ST5_SKIP_MPI=1)"
    );
    false
}

/// trainer/configs/tiny.toml (QA pairs with GradCache chunks, then NLI with hard negatives,
/// both on Adafactor) at `steps` steps per stage, writing under `dir`, with `edits` applied.
fn config(dir: &Path, steps: usize, edits: &[(&str, &str)]) -> PathBuf {
    let r = root();
    let mut text = std::fs::read_to_string(r.join("trainer/configs/tiny.toml")).unwrap();
    text = text
        .replace("\"../../target/tiny-st5\"", &format!("{:?}", dir.join("model")))
        .replace("\"../../target/tiny-st5-checkpoints\"", &format!("{:?}", dir.join("ck")))
        .replace("\"../../", &format!("\"{}/", r.display()))
        .replace("\"data/", &format!("\"{}/trainer/configs/data/", r.display()))
        .replacen("seed = 7", &format!("seed = 7\neval_data = {:?}", shared_data()), 1)
        .replace("steps = 20", &format!("steps = {steps}"))
        .replace("eval_pairs = 200", "eval_pairs = 50");
    for (from, to) in edits {
        assert!(text.contains(from), "tiny.toml has no `{from}`");
        text = text.replace(from, to);
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn mpirun(np: usize, args: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", &np.to_string()]);
    for (k, v) in env {
        cmd.args(["-x", &format!("{k}={v}")]);
    }
    cmd.arg(workspace_bin("trainer-mpi")).args(["train", "--config"]).args(args);
    cmd
}

fn run(mut cmd: Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// `(stage, step, loss)` of each metrics row.
fn losses(dir: &Path) -> Vec<(String, String, f64)> {
    std::fs::read_to_string(dir.join("ck/metrics.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())
        })
        .collect()
}

/// Every weight of the written model, in file and name order.
fn weights(dir: &Path) -> Vec<f32> {
    let mut out = Vec::new();
    for rel in ["model.safetensors", "2_Dense/model.safetensors"] {
        let path = dir.join("model").join(rel);
        let ckpt = st5_core::checkpoint::Checkpoint::from_buffers(vec![(
            path.clone(),
            std::fs::read(&path).unwrap().into(),
        )])
        .unwrap();
        let mut names: Vec<&str> = ckpt.names().collect();
        names.sort();
        for name in names {
            out.extend(ckpt.to_f32(name).unwrap());
        }
    }
    out
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// One process and `mpirun -np 2` (one thread each) on `tiny.toml` with `edits`, 3 steps per
/// stage: the worst relative loss difference over every step and the worst weight difference.
fn one_vs_two_workers(dir: &Path, edits: &[(&str, &str)]) -> (f64, f32) {
    let one = config(&dir.join("one"), 3, edits);
    let two = config(&dir.join("two"), 3, edits);
    let single = Command::new(workspace_bin("trainer-mpi"))
        .args(["train", "--config"])
        .arg(&one)
        .output()
        .unwrap();
    assert!(single.status.success(), "{}", String::from_utf8_lossy(&single.stderr));
    let out = run(mpirun(2, &[two.as_os_str()], &[("RAYON_NUM_THREADS", "1")]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 data-parallel workers"));
    let (a, b) = (losses(&dir.join("one")), losses(&dir.join("two")));
    assert_eq!(a.len(), 6);
    let mut worst_loss = 0f64;
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.0, &x.1), (&y.0, &y.1));
        worst_loss = worst_loss.max((x.2 - y.2).abs() / x.2.abs().max(1.0));
    }
    (worst_loss, max_diff(&weights(&dir.join("one")), &weights(&dir.join("two"))))
}

/// Two workers with global batch 16 give the loss of one process with batch 16 at every step,
/// and weights within 1e-6 after 3 Adafactor steps of each stage (QA with GradCache chunks, NLI
/// with hard negatives); a control run whose workers see only their own slice's negatives
/// differs, so the comparison would notice a missing gather.
#[test]
fn two_workers_train_as_one_process_with_the_global_batch() {
    if skip() {
        return;
    }
    let dir = scratch_dir("mpi-parity");
    let (worst_loss, weight_diff) = one_vs_two_workers(&dir, &[]);
    let control = config(&dir.join("control"), 3, &[]);
    run(mpirun(
        2,
        &[control.as_os_str()],
        &[("RAYON_NUM_THREADS", "1"), ("ST5_TRAINER_LOCAL_NEGATIVES", "1")],
    ));
    let (a, c) = (losses(&dir.join("one")), losses(&dir.join("control")));
    let control_diff = max_diff(&weights(&dir.join("one")), &weights(&dir.join("control")));
    let control_loss = a.iter().zip(&c).map(|(x, y)| (x.2 - y.2).abs()).fold(0.0, f64::max);
    println!(
        "2 workers vs 1: loss {worst_loss:.1e} relative, weights {weight_diff:.1e}; local-negatives control: loss {control_loss:.2}, weights {control_diff:.1e}"
    );
    assert!(worst_loss <= 1e-5, "losses differ by {worst_loss:e}");
    assert!(weight_diff <= 1e-6, "weights differ by {weight_diff:e}");
    assert!(
        control_loss > 1e-2 && control_diff > 1e-4,
        "the control run matched: the test cannot see a missing gather"
    );
}

/// GPU workers (`device = "wgpu"`, here on lavapipe's software Vulkan): two workers, each with
/// its own device, train as one wgpu process does, within the CPU test's tolerances.
#[test]
fn two_wgpu_workers_train_as_one_wgpu_process() {
    if skip() || st5_tests::wgpu_device().is_none() {
        return;
    }
    let dir = scratch_dir("mpi-wgpu");
    let (worst_loss, weight_diff) =
        one_vs_two_workers(&dir, &[("device = \"cpu\"", "device = \"wgpu\"")]);
    println!("2 wgpu workers vs 1: loss {worst_loss:.1e} relative, weights {weight_diff:.1e}");
    assert!(worst_loss <= 1e-5, "losses differ by {worst_loss:e}");
    assert!(weight_diff <= 1e-6, "weights differ by {weight_diff:e}");
}

/// A distill stage with `relational` (the in-batch similarity term, which one worker's slice
/// cannot compute) is refused under MPI before any stage trains, naming the stage.
#[test]
fn relational_distillation_is_refused_under_mpi() {
    if skip() {
        return;
    }
    let dir = scratch_dir("mpi-relational");
    let cfg = config(
        &dir,
        3,
        &[
            ("symmetric = true", "kind = \"distill\"\nrelational = 0.1"),
            (
                "columns = [\"premise\", \"entailment\", \"contradiction\"]",
                "columns = [\"premise\"]\ntargets = \"teacher.npy\"",
            ),
        ],
    );
    let out = mpirun(2, &[cfg.as_os_str()], &[("RAYON_NUM_THREADS", "1")]).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a relational stage trained under MPI");
    assert!(log.contains("stage `nli`") && log.contains("relational"), "{log}");
    assert!(!dir.join("ck/latest").exists(), "a stage trained before the refusal");
}

/// A killed worker ends the job with an error and leaves the last checkpoint whole; `--resume`
/// under mpirun then finishes with the weights of an uninterrupted 2-worker run. A worker given
/// another config is refused at start.
#[test]
fn a_killed_worker_ends_the_job_and_resume_continues_bit_identically() {
    if skip() {
        return;
    }
    let dir = scratch_dir("mpi-kill");
    // A larger model than the fixture (4 layers, d_model 64), so a step takes long enough to
    // kill mid-run.
    let init = dir.join("init");
    st5_tests::save_random_model(&init);
    let from =
        format!("init = {:?}", root().join("tests/fixtures/hf-t5-relu-f16").display().to_string());
    let to = format!("init = {:?}", init.display().to_string());
    let edits = [
        (from.as_str(), to.as_str()),
        ("checkpoint_every = 5", "checkpoint_every = 4"),
        ("dim = 16\n", ""),
    ];
    let straight = config(&dir.join("straight"), 30, &edits);
    run(mpirun(2, &[straight.as_os_str()], &[("RAYON_NUM_THREADS", "1")]));

    let cut_dir = dir.join("cut");
    let cut = config(&cut_dir, 30, &edits);
    let job = mpirun(2, &[cut.as_os_str()], &[("RAYON_NUM_THREADS", "1")])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let state = cut_dir.join("ck/latest/trainer_state.json");
    let started = std::time::Instant::now();
    loop {
        let s: Value = std::fs::read_to_string(&state)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        if s["stage"] == 0 && s["step"].as_u64().unwrap_or(0) >= 12 {
            break;
        }
        assert!(started.elapsed().as_secs() < 300, "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SIGKILL one worker (a child of mpirun that is not rank 0's... either will do: rank 1 is
    // the one that does not write).
    let children = String::from_utf8(
        Command::new("pgrep").args(["-P", &job.id().to_string()]).output().unwrap().stdout,
    )
    .unwrap();
    let pids: Vec<&str> = children.split_whitespace().collect();
    assert!(!pids.is_empty(), "no worker processes under mpirun");
    Command::new("kill").args(["-9", pids[pids.len() - 1]]).status().unwrap();
    let out = job.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job went on after a worker was killed");
    let said = log.lines().find(|l| l.contains("signal") || l.contains("exited")).unwrap_or("");
    println!("killed worker: mpirun exited with {:?}: {}", out.status.code(), said.trim());
    assert!(!cut_dir.join("model").exists(), "a killed job wrote a final model");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert!(s["step"].as_u64().is_some(), "the checkpoint is not whole: {s}");

    run(mpirun(
        2,
        &[cut.as_os_str(), std::ffi::OsStr::new("--resume")],
        &[("RAYON_NUM_THREADS", "1")],
    ));
    let diff = max_diff(&weights(&dir.join("straight")), &weights(&cut_dir));
    println!("resumed 2-worker run vs uninterrupted: max abs weight difference {diff:e}");
    assert_eq!(diff, 0.0, "the resumed run differs by {diff:e}");

    // Another config on rank 1 (MPMD launch): refused before training.
    let other = config(&dir.join("other"), 29, &edits);
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "1"])
        .arg(workspace_bin("trainer-mpi"))
        .args(["train", "--config"])
        .arg(&straight)
        .args([":", "-np", "1"])
        .arg(workspace_bin("trainer-mpi"))
        .args(["train", "--config"])
        .arg(&other)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && log.contains("rank 1's config"), "{log}");
}
