//! Shared helpers for the cross-crate tests: fixture paths, the Python reference's expected
//! outputs, the backends to test on, and scratch copies of fixtures to corrupt.

use std::path::{Path, PathBuf};

use serde_json::Value;
use st5_core::Device;

/// Maximum absolute error allowed against the Python reference and for batch invariance.
pub const TOL: f32 = 1e-5;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

/// The evaluation and training sets: `$ST5_DATA`, else `shared/data` beside the repository.
pub fn shared_data() -> PathBuf {
    std::env::var_os("ST5_DATA").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/data"))
}

/// The real T5 `tokenizer.json`, shipped inside one fixture.
pub fn tokenizer_json() -> PathBuf {
    fixture("st-enc-mean-relu/tokenizer.json")
}

/// The model fixtures written by `tests/reference/make_fixtures.py`.
pub const MODELS: [&str; 9] = [
    "st-enc-mean-relu",
    "st-enc-first-gated-f16",
    "hf-t5-gated-bf16-sharded",
    "hf-t5-relu-f16",
    // relative_attention_max_distance 16 with 32 buckets: valid for the encoder, which
    // transformers runs, though a causal decoder's bucketing would refuse it.
    "st-enc-mean-short-distance",
    // BERT and MPNet (make_fixtures.py's family_fixture): every pooling, Dense with Tanh, `bert.`
    // names with the pooler, f16, no Normalize, MPNet's position bias past the exact buckets.
    "st-bert-gelu",
    "st-bert-gelu-new-prefixed-f16",
    "st-mpnet",
    // MPNet with `pad_token_id` 0: transformers' positions still skip id 1 and start at 2.
    "st-mpnet-pad0",
];

/// `expected.json`: the sentences, their token ids and the reference embeddings per variant.
pub struct Expected {
    pub sentences: Vec<String>,
    pub max_seq_length: usize,
    pub input_ids: Vec<Vec<u32>>,
    pub embeddings: Vec<(String, Vec<Vec<f32>>)>,
}

/// The built-in default model, which the CLI compiles in: the folder under `models/` that
/// `models/DEFAULT` names (read by `crates/st5-cli/build.rs` too).
pub fn default_model() -> PathBuf {
    root().join("models").join(include_str!("../models/DEFAULT").trim())
}

/// `models/st5-mini`, the fast model shipped beside the default.
pub fn st5_mini() -> PathBuf {
    root().join("models/st5-mini")
}

/// The models under `models/`, each checked against `tests/fixtures/<name>-expected.json`
/// (`make_fixtures.py --shipped`).
pub const SHIPPED: [&str; 4] =
    ["all-minilm-l6-v2-nli", "all-minilm-l6-v2", "st5-small", "st5-mini"];

pub fn expected(model: &str) -> Expected {
    expected_file(&fixture(model).join("expected.json"))
}

/// An `expected.json`-shaped file anywhere (`<name>-expected.json` for a shipped model).
pub fn expected_file(path: &Path) -> Expected {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let strings = |v: &Value| {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let matrix = |v: &Value| -> Vec<Vec<f32>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
            .collect()
    };
    Expected {
        sentences: strings(&v["sentences"]),
        max_seq_length: v["max_seq_length"].as_u64().unwrap() as usize,
        input_ids: v["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect())
            .collect(),
        embeddings: v["embeddings"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, m)| (k.clone(), matrix(m)))
            .collect(),
    }
}

/// The wgpu device, or `None` when `ST5_SKIP_WGPU=1`, reported as a `skipped:` line that
/// `scripts/test.sh` counts. Without that opt-out a missing adapter fails the test: CI installs
/// lavapipe so that wgpu parity is always checked.
pub use st5_core::device::wgpu_for_tests as wgpu_device;

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// A fresh copy of a fixture under the temp dir, to corrupt without touching the original.
/// A fresh, empty path under the temp dir (not created).
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dst = std::env::temp_dir().join(format!("st5-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    dst
}

pub fn scratch_copy(model: &str, tag: &str) -> PathBuf {
    let dst = scratch_dir(tag);
    copy_dir(&fixture(model), &dst);
    dst
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), to).unwrap();
        }
    }
}

/// A binary of the workspace, built beside the test executable (`cargo build --release --bin
/// NAME` first; the README's test command does it).
pub fn workspace_bin(name: &str) -> PathBuf {
    // target/<profile>/deps/<test>-<hash> → target/<profile>/<name>
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build --release --bin {name}` before the tests",
        bin.display()
    );
    bin
}

/// Writes a random sentence-transformers model to `dir` (seeded by burn's default RNG): 4 layers,
/// d_model 64, relu, mean pooling, Dense 64 → 32, Normalize, the fixture tokenizer. Big enough
/// that a training step takes ~10 ms, so a test can kill a run mid-stage.
pub fn save_random_model(dir: &Path) {
    use st5_core::layout::DenseActivation;
    use st5_core::save::{SaveOptions, save_sentence_transformers};
    use st5_core::{HeadConfig, ModelConfig, SentenceModel, Variant, WeightDtype};
    let cfg_json = serde_json::json!({"vocab_size": 32128, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 4, "num_heads": 4, "feed_forward_proj": "relu", "model_type": "t5"});
    let cfg = ModelConfig::from_slice(cfg_json.to_string().as_bytes(), Path::new("cfg")).unwrap();
    let head = HeadConfig {
        variant: Variant::EncMean,
        dense: vec![(64, 32, false, DenseActivation::Identity)],
        normalize: true,
    };
    let model = SentenceModel::init(&cfg, &head, &Device::flex());
    let tokenizer = std::fs::read(fixture("st-enc-mean-relu").join("tokenizer.json")).unwrap();
    let options = SaveOptions {
        config: cfg_json,
        tokenizer_json: &tokenizer,
        max_seq_length: 32,
        readme: None,
        extra: vec![],
        dtype: WeightDtype::F32,
        input_absmax: None,
    };
    save_sentence_transformers(&model, dir, &options).unwrap();
}
