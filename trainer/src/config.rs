//! The training config (TOML): the model to start from, then a list of stages, each with its
//! datasets, batch size, length, learning rate and schedule, temperature and loss direction.
//! Defaults are the paper's (§3.3): Adafactor, lr 1e-3, τ = 0.01.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use st5_format::device_choice::DeviceChoice;
use st5_format::quant::WeightDtype;
use st5_format::source::ModelSource;
use st5_format::variant::Variant;

use crate::error::{Error, Result};

/// Declares a closed set of config values: serde reads the lowercase name (an unknown one is an
/// error listing the allowed ones), and `Display` prints it back.
macro_rules! config_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? } default $default:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self { $(Self::$variant => $text,)+ })
            }
        }
        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }
    };
}

config_enum!(
    /// A stage's loss.
    StageKind {
        /// The paper's in-batch softmax over positives and hard negatives.
        Contrastive = "contrastive",
        /// Mean squared error to stored teacher embeddings.
        Distill = "distill",
    } default Contrastive
);

config_enum!(
    /// The learning rate after warmup.
    Schedule {
        /// The paper's.
        Constant = "constant",
        /// Linear decay to 0 at the stage's last step.
        Linear = "linear",
    } default Constant
);

config_enum!(
    /// A stage's optimiser.
    OptimizerKind {
        /// The paper's (constant lr, no relative step).
        Adafactor = "adafactor",
        Adamw = "adamw",
    } default Adafactor
);

config_enum!(
    /// A dataset file's format.
    DataFormat {
        /// One JSON object per line.
        Jsonl = "jsonl",
        /// Tab-separated, with a header line naming the columns.
        Tsv = "tsv",
    } default Jsonl
);

/// `Option<Variant>` from its name (`enc-mean`, ...), parsed by the core's `FromStr`.
fn variant<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Variant>, D::Error> {
    let name = String::deserialize(d)?;
    name.parse().map(Some).map_err(serde::de::Error::custom)
}

/// `[model] init` as written; [`TrainConfig::parse`] reads it against the config's folder.
fn model_source<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<ModelSource, D::Error> {
    Ok(ModelSource::Local(String::deserialize(d)?.into()))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Seeds initialisation, data order and sampling.
    #[serde(default)]
    pub seed: u64,
    /// `cpu` (flex), `wgpu` (Vulkan, Metal, DX12), or `cuda` (with the `cuda` cargo feature);
    /// the aliases `st5 --device` takes too.
    #[serde(default)]
    pub device: DeviceChoice,
    /// The trained model is written here (a sentence-transformers directory).
    pub output: PathBuf,
    /// Checkpoints go here; `--resume` continues from the newest.
    #[serde(default)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between checkpoints (0: only at the end of each stage).
    #[serde(default)]
    pub checkpoint_every: usize,
    /// Non-finite losses in a row before the run aborts.
    #[serde(default = "default_max_bad_steps")]
    pub max_bad_steps: usize,
    /// Steps between STS-B dev evaluations (0: only at the end of each stage).
    #[serde(default)]
    pub eval_every: usize,
    /// STS-B dev pairs evaluated (0: all 1,500).
    #[serde(default)]
    pub eval_pairs: usize,
    /// The evaluation data (`stsbenchmark/`, `sts12/`, ...): test sentences are dropped from
    /// training, and STS-B dev is the dev metric. Relative to this file; default: `$ST5_DATA`,
    /// else `../shared/data` from the working directory (see [`TrainConfig::eval_data`]).
    #[serde(default)]
    pub eval_data: Option<PathBuf>,
    /// Markdown put at the top of the model card (`README.md`) the run writes, above the run's
    /// own data, dev-curve and config sections; default: a title and one line.
    #[serde(default)]
    pub card: Option<PathBuf>,
    pub model: ModelConfig,
    #[serde(rename = "stage")]
    pub stages: Vec<StageConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A sentence-transformers directory, or a Hugging Face T5 / T5 v1.1 / mT5 directory, or a
    /// T5 `config.json` (a random model); or a Hugging Face hub id `org/name[@revision]` (an
    /// existing path, from the config's folder, wins). st5-hub resolves it when the run starts.
    #[serde(deserialize_with = "model_source")]
    pub init: ModelSource,
    /// `enc-mean`, `enc-first` or `encdec-first`; default: the directory's pooling.
    #[serde(default, deserialize_with = "variant")]
    pub variant: Option<Variant>,
    /// Output width of the Dense projection created when the source has none (default d_model).
    #[serde(default)]
    pub dim: Option<usize>,
    #[serde(default)]
    pub max_seq_length: Option<usize>,
    /// A `tokenizer.json` for sources without one.
    #[serde(default)]
    pub tokenizer: Option<PathBuf>,
    /// `f32` (default), `f16` or `int8` for the written model (checkpoints are always f32).
    #[serde(default)]
    pub save_dtype: WeightDtype,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    pub name: String,
    /// `contrastive` (the paper's in-batch softmax loss) or `distill`: mean squared error
    /// between the model's embedding of each text and a stored teacher embedding (Reimers &
    /// Gurevych 2020).
    #[serde(default)]
    pub kind: StageKind,
    pub batch_size: usize,
    /// Optimiser steps in this stage; or give `epochs` instead.
    #[serde(default)]
    pub steps: usize,
    /// Passes over the stage's examples (all datasets together), converted to steps when the
    /// stage starts.
    #[serde(default)]
    pub epochs: Option<f64>,
    #[serde(default = "default_lr")]
    pub lr: f64,
    /// Linear warmup steps from 0 to `lr`.
    #[serde(default)]
    pub warmup: usize,
    /// `constant` (the paper's) or `linear` decay to 0 after warmup.
    #[serde(default)]
    pub schedule: Schedule,
    #[serde(default = "default_temperature")]
    pub temperature: f32,
    #[serde(default)]
    pub symmetric: bool,
    /// For `distill` stages: the weight of a pairwise-similarity term added to the MSE, the mean
    /// squared difference between the student's and the teacher's in-batch cosine similarity
    /// matrices (0, the default: MSE alone). One process only: under MPI each worker would see
    /// only its slice's pairs, so a run with workers refuses it.
    #[serde(default)]
    pub relational: f32,
    /// `adafactor` (the paper's) or `adamw`.
    #[serde(default)]
    pub optimizer: OptimizerKind,
    /// Clip the gradient's global L2 norm to this (0: no clipping).
    #[serde(default)]
    pub clip_norm: f32,
    /// GradCache: texts per forward pass (0: the whole batch at once).
    #[serde(default)]
    pub chunk_size: usize,
    /// Soft-prompt tuning (Lester et al. 2021): learn this many vectors placed before every
    /// text, the model frozen, with this stage's loss. 0 (the default): train the model. Every
    /// stage of a run gives the same length, or none does; a prompt run starts from a trained
    /// model directory and writes `output` as a prompt file (`st5_format::prompt`).
    #[serde(default)]
    pub prompt_length: usize,
    #[serde(rename = "dataset")]
    pub datasets: Vec<DatasetConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    pub path: PathBuf,
    /// `jsonl` or `tsv`; default from the extension.
    #[serde(default)]
    pub format: Option<DataFormat>,
    /// Anchor, positive and (optionally) negative: JSON fields, or TSV header names.
    #[serde(default = "default_columns")]
    pub columns: Vec<String>,
    /// For `distill` stages: the teacher embeddings, an `.npy` of `[lines, dim]` float32 whose
    /// row i belongs to the file's i-th example.
    #[serde(default)]
    pub targets: Option<PathBuf>,
    /// A column (JSON field or TSV header) naming each example's group, e.g. an intent or
    /// cluster label: two examples of one group never share a batch, so no in-batch negative is
    /// of the anchor's own kind.
    #[serde(default)]
    pub group: Option<String>,
    /// Relative sampling weight among the stage's datasets.
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_max_bad_steps() -> usize {
    5
}
/// The paper's learning rate (§3.3).
fn default_lr() -> f64 {
    1e-3
}
/// The paper's softmax temperature τ (§3.3).
fn default_temperature() -> f32 {
    0.01
}
fn default_columns() -> Vec<String> {
    vec!["anchor".into(), "positive".into(), "negative".into()]
}
fn default_weight() -> f64 {
    1.0
}

impl TrainConfig {
    /// Reads and validates a config; relative paths are taken from the config's folder.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, path)
    }

    /// As [`from_file`](Self::from_file), from the config's text; `path` names it in errors and
    /// anchors its relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let mut cfg: Self = toml::from_str(text)
            .map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        fix(&mut cfg.output);
        if let Some(d) = cfg.eval_data.as_mut() {
            fix(d);
        }
        if let ModelSource::Local(init) = &cfg.model.init {
            cfg.model.init = ModelSource::parse(&init.to_string_lossy(), base);
        }
        if let Some(c) = cfg.card.as_mut() {
            fix(c);
        }
        if let Some(t) = cfg.model.tokenizer.as_mut() {
            fix(t);
        }
        if let Some(c) = cfg.checkpoint_dir.as_mut() {
            fix(c);
        }
        for d in cfg.stages.iter_mut().flat_map(|s| s.datasets.iter_mut()) {
            fix(&mut d.path);
            if let Some(t) = d.targets.as_mut() {
                fix(t);
            }
        }
        cfg.validate().map_err(|message| Error::Config { path: path.into(), message })?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), String> {
        if self.stages.is_empty() {
            return Err("no [[stage]]".into());
        }
        // Checked now, not when the card is written after hours of training.
        if let Some(c) = self.card.as_ref().filter(|c| !c.is_file()) {
            return Err(format!("card: no file {}", c.display()));
        }
        let lengths: std::collections::BTreeSet<usize> =
            self.stages.iter().map(|s| s.prompt_length).collect();
        if lengths.len() > 1 {
            return Err(format!(
                "stages give prompt_length {lengths:?}: a run trains one prompt (every stage the same length) or the model (none)"
            ));
        }
        if let Some(p) = self.prompt_length() {
            if p > st5_format::prompt::MAX_LENGTH {
                return Err(format!(
                    "prompt_length {p} (at most {})",
                    st5_format::prompt::MAX_LENGTH
                ));
            }
            if self.model.dim.is_some() {
                return Err("a prompt run keeps the model as it is: no [model] dim".into());
            }
        }
        for s in &self.stages {
            let at = |m: &str| format!("stage `{}`: {m}", s.name);
            if (s.steps > 0) == s.epochs.is_some() {
                return Err(at("give exactly one of steps and epochs"));
            }
            if s.epochs.is_some_and(|e| !(e > 0.0 && e.is_finite())) {
                return Err(at("epochs must be positive"));
            }
            if s.batch_size < 2 {
                return Err(at("batch_size must be at least 2 (in-batch negatives)"));
            }
            // Written so that NaN fails too.
            if !(s.lr > 0.0 && s.lr.is_finite() && s.temperature > 0.0) {
                return Err(at("lr and temperature must be positive"));
            }
            if s.datasets.is_empty() {
                return Err(at("no [[stage.dataset]]"));
            }
            let distill = s.kind == StageKind::Distill;
            if !(s.relational >= 0.0 && s.relational.is_finite())
                || (s.relational > 0.0 && !distill)
            {
                return Err(at("relational is a non-negative weight, for distill stages only"));
            }
            for d in &s.datasets {
                let columns_ok = if distill {
                    d.columns.len() == 1 && d.targets.is_some()
                } else {
                    (2..=3).contains(&d.columns.len()) && d.targets.is_none()
                };
                if !(columns_ok && d.weight > 0.0) {
                    let want = if distill {
                        "1 column (the text) and `targets`"
                    } else {
                        "2 or 3 columns and no `targets`"
                    };
                    return Err(at(&format!(
                        "dataset {}: {want}, and a positive weight",
                        d.path.display()
                    )));
                }
            }
        }
        Ok(())
    }
}

impl TrainConfig {
    /// The evaluation data directory: `eval_data`, else the default of `st5 eval --data`.
    pub fn eval_data(&self) -> PathBuf {
        self.eval_data.clone().unwrap_or_else(st5_eval::data::default_data_dir)
    }
}

impl TrainConfig {
    /// The soft-prompt length of a prompt run, `None` when the run trains the model.
    pub fn prompt_length(&self) -> Option<usize> {
        self.stages.first().map(|s| s.prompt_length).filter(|&p| p > 0)
    }
}

impl StageConfig {
    /// Sets `steps` from `epochs` over `examples` training examples (at least one step).
    pub fn resolve_steps(&mut self, examples: usize) {
        if let Some(e) = self.epochs {
            self.steps = ((e * examples as f64 / self.batch_size as f64).ceil() as usize).max(1);
        }
    }

    /// The learning rate at `step` (0-based) of this stage.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.lr * (step + 1) as f64 / self.warmup as f64;
        }
        match self.schedule {
            Schedule::Linear => {
                self.lr * (self.steps.saturating_sub(step)) as f64
                    / (self.steps - self.warmup).max(1) as f64
            }
            Schedule::Constant => self.lr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(warmup: usize, schedule: &str) -> StageConfig {
        toml::from_str(&format!(
            "name = 's'\nbatch_size = 4\nsteps = 10\nwarmup = {warmup}\nschedule = '{schedule}'\n[[dataset]]\npath = 'x.jsonl'"
        ))
        .unwrap()
    }

    #[test]
    fn epochs_become_steps() {
        let mut s: StageConfig = toml::from_str(
            "name = 's'\nbatch_size = 16\nepochs = 1.5\n[[dataset]]\npath = 'x.jsonl'",
        )
        .unwrap();
        s.resolve_steps(100);
        assert_eq!(s.steps, 10); // ceil(1.5 * 100 / 16)
    }

    #[test]
    fn schedules() {
        // (warmup, schedule, step, lr / peak)
        let cases = [
            (0, "constant", 0, 1.0),
            (0, "constant", 9, 1.0),
            (4, "constant", 0, 0.25),
            (4, "constant", 3, 1.0),
            (4, "constant", 7, 1.0),
            (0, "linear", 0, 1.0),
            (0, "linear", 5, 0.5),
            (2, "linear", 2, 1.0),
            (2, "linear", 6, 0.5),
        ];
        for (w, s, step, want) in cases {
            let got = stage(w, s).lr_at(step) / 1e-3;
            assert!((got - want).abs() < 1e-9, "warmup {w} {s} step {step}: {got}");
        }
    }

    #[test]
    fn closed_sets_are_parsed_once_and_name_the_allowed_values() {
        let base = |top: &str, model: &str, stage: &str, dataset: &str| {
            format!(
                "output = 'out'\n{top}[model]\ninit = 'm'\n{model}[[stage]]\nname = 's'\nbatch_size = 4\nsteps = 1\n{stage}[[stage.dataset]]\npath = 'x.jsonl'\n{dataset}"
            )
        };
        let good = base(
            "device = 'wgpu'\n",
            "variant = 'enc-first'\nsave_dtype = 'int8'\n",
            "kind = 'contrastive'\nschedule = 'linear'\noptimizer = 'adamw'\n",
            "format = 'tsv'\n",
        );
        let cfg: TrainConfig = toml::from_str(&good).unwrap();
        assert_eq!(cfg.device, DeviceChoice::Wgpu);
        assert_eq!(cfg.model.variant, Some(Variant::EncFirst));
        assert_eq!(cfg.model.save_dtype, WeightDtype::Int8);
        let s = &cfg.stages[0];
        assert_eq!(
            (s.kind, s.schedule, s.optimizer),
            (StageKind::Contrastive, Schedule::Linear, OptimizerKind::Adamw)
        );
        assert_eq!(s.datasets[0].format, Some(DataFormat::Tsv));
        // A device's aliases are those `st5 --device` takes: `gpu` is wgpu.
        let alias: TrainConfig = toml::from_str(&base("device = 'gpu'\n", "", "", "")).unwrap();
        assert_eq!(alias.device, DeviceChoice::Wgpu);
        let defaults: TrainConfig = toml::from_str(&base("", "", "", "")).unwrap();
        assert_eq!(defaults.device, DeviceChoice::Cpu);
        let s = &defaults.stages[0];
        assert_eq!(
            (s.kind, s.schedule, s.optimizer),
            (StageKind::Contrastive, Schedule::Constant, OptimizerKind::Adafactor)
        );
        // (bad config, what the error must name)
        let cases = [
            (base("device = 'tpu'\n", "", "", ""), ["tpu", "wgpu"]),
            (base("", "variant = 'mean'\n", "", ""), ["mean", "enc-mean"]),
            (base("", "save_dtype = 'bf16'\n", "", ""), ["bf16", "int8"]),
            (base("", "", "kind = 'mse'\n", ""), ["mse", "distill"]),
            (base("", "", "schedule = 'cosine'\n", ""), ["cosine", "linear"]),
            (base("", "", "optimizer = 'sgd'\n", ""), ["sgd", "adamw"]),
            (base("", "", "", "format = 'csv'\n"), ["csv", "tsv"]),
        ];
        for (toml_text, words) in cases {
            let err = toml::from_str::<TrainConfig>(&toml_text).unwrap_err().to_string();
            for w in words {
                assert!(err.contains(w), "`{w}` not in: {err}");
            }
        }
    }

    #[test]
    fn relational_is_a_distill_weight() {
        let run = |kind: &str, weight: &str| {
            let dataset =
                if kind == "distill" { "columns = ['text']\ntargets = 't.npy'\n" } else { "" };
            TrainConfig::parse(
                &format!(
                    "output = 'out'\n[model]\ninit = 'm'\n[[stage]]\nname = 's'\nbatch_size = 4\nsteps = 1\nkind = '{kind}'\nrelational = {weight}\n[[stage.dataset]]\npath = 'x.jsonl'\n{dataset}"
                ),
                Path::new("run.toml"),
            )
        };
        // (stage kind, weight, accepted)
        let cases = [
            ("distill", "0.0", true),
            ("distill", "2.5", true),
            ("distill", "-1.0", false),
            ("distill", "nan", false),
            ("contrastive", "0.0", true),
            ("contrastive", "1.0", false),
        ];
        for (kind, weight, ok) in cases {
            match run(kind, weight) {
                Ok(cfg) => {
                    assert!(ok, "{kind} {weight} accepted");
                    assert_eq!(cfg.stages[0].relational, weight.parse::<f32>().unwrap());
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(!ok && e.contains("relational") && e.contains("run.toml"), "{e}");
                }
            }
        }
    }

    #[test]
    fn init_is_a_path_from_the_config_folder_or_a_hub_id() {
        let dir = std::env::temp_dir().join(format!("st5-init-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("org/local")).unwrap();
        let init = |name: &str| {
            let text = format!(
                "output = 'out'\n[model]\ninit = '{name}'\n[[stage]]\nname = 's'\nbatch_size = 4\nsteps = 1\n[[stage.dataset]]\npath = 'x.jsonl'\n"
            );
            TrainConfig::parse(&text, &dir.join("run.toml")).unwrap().model.init
        };
        let hub = |id: &str, revision: &str| {
            ModelSource::Hub(st5_format::source::HubModel {
                id: id.into(),
                revision: revision.into(),
            })
        };
        // A path that exists from the config's folder wins over the id it looks like.
        assert_eq!(init("org/local"), ModelSource::Local(dir.join("org/local")));
        assert_eq!(init("org/remote@v2"), hub("org/remote", "v2"));
        assert_eq!(init("google/t5-v1_1-base"), hub("google/t5-v1_1-base", "main"));
        // Not an id: a path, reported missing by loading.
        assert_eq!(init("m"), ModelSource::Local(dir.join("m")));
        assert_eq!(init("/abs/m"), ModelSource::Local("/abs/m".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn card_paths_are_checked_before_training() {
        let dir = std::env::temp_dir().join(format!("st5-card-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |card: &str| {
            let p = dir.join("run.toml");
            std::fs::write(&p, format!("output = 'out'\n{card}[model]\ninit = 'm'\n[[stage]]\nname = 's'\nbatch_size = 4\nsteps = 1\n[[stage.dataset]]\npath = 'x.jsonl'\n")).unwrap();
            TrainConfig::from_file(&p)
        };
        let err = write("card = 'CARD.md'\n").unwrap_err().to_string();
        assert!(err.contains("CARD.md") && err.contains("run.toml"), "{err}");
        std::fs::write(dir.join("CARD.md"), "# card\n").unwrap();
        assert_eq!(write("card = 'CARD.md'\n").unwrap().card, Some(dir.join("CARD.md")));
        assert_eq!(write("").unwrap().card, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_trains_one_prompt_or_the_model() {
        let run = |model: &str, lengths: &[&str]| {
            let stages: String = lengths
                .iter()
                .map(|p| format!("[[stage]]\nname = 's'\nbatch_size = 4\nsteps = 1\n{p}[[stage.dataset]]\npath = 'x.jsonl'\n"))
                .collect();
            TrainConfig::parse(
                &format!("output = 'p.safetensors'\n[model]\ninit = 'm'\n{model}{stages}"),
                Path::new("run.toml"),
            )
        };
        // (model section, each stage's prompt line, the prompt length or the error's words)
        let cases: [(&str, &[&str], Result<Option<usize>, &str>); 6] = [
            ("", &["", ""], Ok(None)),
            ("", &["prompt_length = 20\n", "prompt_length = 20\n"], Ok(Some(20))),
            ("", &["prompt_length = 0\n"], Ok(None)),
            ("", &["prompt_length = 20\n", ""], Err("one prompt")),
            ("", &["prompt_length = 5000\n"], Err("at most 1024")),
            ("dim = 64\n", &["prompt_length = 8\n"], Err("no [model] dim")),
        ];
        for (model, lengths, want) in cases {
            match (run(model, lengths), want) {
                (Ok(cfg), Ok(p)) => assert_eq!(cfg.prompt_length(), p, "{lengths:?}"),
                (Err(e), Err(words)) => {
                    let e = e.to_string();
                    assert!(e.contains(words) && e.contains("run.toml"), "{lengths:?}: {e}")
                }
                (got, want) => panic!("{model}{lengths:?}: {got:?} vs {want:?}"),
            }
        }
    }
}
