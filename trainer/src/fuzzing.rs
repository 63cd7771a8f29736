//! The trainer's fuzz targets' bodies (fuzz/fuzz_targets/trainer_*.rs call these; the regression
//! test tests/fuzz_regressions.rs runs saved crash inputs through them): the files a run reads
//! from outside, taken as the trainer takes them. Each must return, never panic.

use std::path::Path;

use crate::config::{DataFormat, DatasetConfig, TrainConfig};
use crate::data::{Dataset, Example, Sampler, parse_examples};
use crate::state::TrainState;

/// The TOML config, validated, then each stage's steps and learning rates resolved.
pub fn trainer_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(cfg) = TrainConfig::parse(text, Path::new("/fuzz/config.toml")) {
        for mut stage in cfg.stages {
            stage.resolve_steps(1_000_003);
            for step in [0, 1, stage.steps / 2, stage.steps.saturating_sub(1), stage.steps] {
                let _ = stage.lr_at(step);
            }
        }
    }
}

/// A dataset file: the first byte picks the format (even: JSON Lines, odd: TSV), whether a
/// negative column is read (bit 1) and whether a `group` column is (bit 2); the rest is the
/// file's text.
pub fn dataset_rows(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let mut columns = vec!["anchor".to_string(), "positive".to_string()];
    if mode & 2 != 0 {
        columns.push("negative".into());
    }
    let cfg = DatasetConfig {
        path: "/fuzz/data".into(),
        format: Some(if mode & 1 == 0 { DataFormat::Jsonl } else { DataFormat::Tsv }),
        columns,
        targets: None,
        group: (mode & 4 != 0).then(|| "group".into()),
        weight: 1.0,
    };
    let _ = parse_examples(text, &cfg);
}

/// `trainer_state.json`, then a resume from it over two small datasets (3 and 5 examples) and a
/// few batches drawn: a state that does not fit them must be refused, not followed.
pub fn trainer_state(data: &[u8]) {
    let Ok(state) = TrainState::parse(data, Path::new("/fuzz/checkpoint")) else { return };
    let Some(sampler) = state.sampler else { return };
    let dataset = |name: &str, n: usize| Dataset {
        name: name.into(),
        examples: (0..n)
            .map(|i| Example {
                anchor: format!("{name} a{i}"),
                positive: format!("{name} p{i}"),
                negative: None,
                group: None,
            })
            .collect(),
        dropped_eval_overlap: 0,
        weight: 1.0,
        targets: None,
    };
    let datasets = [dataset("x", 3), dataset("y", 5)];
    if let Ok(mut s) = Sampler::resume(&datasets, sampler) {
        for _ in 0..3 {
            let _ = s.next_batch(4);
        }
    }
}

/// Every target by name, for the regression test.
pub const TARGETS: [(&str, fn(&[u8])); 3] = [
    ("trainer_config", trainer_config),
    ("dataset_rows", dataset_rows),
    ("trainer_state", trainer_state),
];
