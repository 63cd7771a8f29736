//! File discovery for loaders that fetch a model file by file (the browser, from a base URL):
//! which files does loading read? The answer comes from the same code that loads
//! ([`ModelLayout::read`], [`Checkpoint::weight_files`]), run over a [`Probe`] that records every
//! file it is asked about and does not know yet. The caller fetches those and asks again, until
//! the layout is complete; only then are the (large) weight files listed for download.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::checkpoint::Checkpoint;
use crate::error::Result;
use crate::files::{FileBytes, ModelFiles};
use crate::layout::ModelLayout;

/// What is known so far about a remote model's files.
#[derive(Default)]
pub struct Probe {
    /// Files fetched, with their bytes (the small JSON and tokenizer files).
    pub fetched: BTreeMap<String, FileBytes>,
    /// Files known to exist whose bytes are not needed for planning (weights).
    pub present: BTreeSet<String>,
    /// Files known not to exist (a 404).
    pub absent: BTreeSet<String>,
    /// Shown before paths in messages (the base URL).
    pub label: String,
    asked: RefCell<BTreeSet<String>>,
}

/// The answer of [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilePlan {
    /// Fetch these (or learn they are absent) and ask again. Files whose name ends in
    /// `.safetensors` or `.bin` are only asked about for existence.
    Need(Vec<String>),
    /// The layout is complete; download these weight files, then load.
    Ready(Vec<String>),
}

impl Probe {
    /// Nothing known yet; `label` (the base URL) prefixes paths in messages.
    pub fn new(label: impl Into<String>) -> Self {
        Self { label: label.into(), ..Default::default() }
    }

    fn unknown(&self, rel: &str) -> bool {
        let known = self.fetched.contains_key(rel)
            || self.present.contains(rel)
            || self.absent.contains(rel);
        if !known {
            self.asked.borrow_mut().insert(rel.to_string());
        }
        !known
    }

    fn take_asked(&self) -> Option<Vec<String>> {
        let asked = std::mem::take(&mut *self.asked.borrow_mut());
        (!asked.is_empty()).then(|| asked.into_iter().collect())
    }
}

impl ModelFiles for Probe {
    fn read(&self, rel: &str) -> Result<Option<FileBytes>> {
        if self.unknown(rel) {
            return Ok(None);
        }
        let present = || self.present.contains(rel).then(|| FileBytes::from(Vec::new()));
        Ok(self.fetched.get(rel).cloned().or_else(present))
    }
    fn path(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("{}{rel}", self.label))
    }
    fn exists(&self, rel: &str) -> bool {
        !self.unknown(rel) && !self.absent.contains(rel)
    }
}

/// The next step of discovering a model's files. An unknown file is taken as absent for the
/// rest of the pass, so a pass may ask about files that turn out irrelevant (a 404 for a
/// layout the model does not use); errors count only once nothing is unknown.
pub fn plan(probe: &Probe) -> Result<FilePlan> {
    let layout = ModelLayout::read(probe);
    if let Some(need) = probe.take_asked() {
        return Ok(FilePlan::Need(need));
    }
    let layout = layout?;
    // Every weights folder in one pass, so their existence checks go out together.
    let dirs = std::iter::once(&layout.transformer).chain(layout.dense.iter().map(|(d, _)| d));
    let found: Vec<Result<Vec<String>>> =
        dirs.map(|dir| Checkpoint::weight_files(probe, dir)).collect();
    if let Some(need) = probe.take_asked() {
        return Ok(FilePlan::Need(need));
    }
    let mut weights = Vec::new();
    for files in found {
        weights.extend(files?);
    }
    Ok(FilePlan::Ready(weights))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::MemoryFiles;

    /// Answers every question from a complete in-memory model, as a server would, and returns
    /// the downloads and the number of rounds.
    fn discover(model: &MemoryFiles) -> (Result<Vec<String>>, usize) {
        let mut probe = Probe::new("https://host/m/");
        for round in 1..20 {
            match plan(&probe) {
                Ok(FilePlan::Need(need)) => {
                    for rel in need {
                        match model.files.get(&rel) {
                            None => probe.absent.insert(rel),
                            Some(_) if rel.ends_with(".safetensors") || rel.ends_with(".bin") => {
                                probe.present.insert(rel)
                            }
                            Some(bytes) => probe.fetched.insert(rel, bytes.clone()).is_none(),
                        };
                    }
                }
                Ok(FilePlan::Ready(files)) => return (Ok(files), round),
                Err(e) => return (Err(e), round),
            }
        }
        panic!("discovery did not converge");
    }

    fn model(files: &[(&str, &str)]) -> MemoryFiles {
        MemoryFiles {
            files: files
                .iter()
                .map(|(n, b)| (n.to_string(), b.as_bytes().to_vec().into()))
                .collect(),
            label: "m:".into(),
        }
    }

    const T5: &str = r#"{"d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 1, "num_heads": 2, "vocab_size": 100}"#;
    const ST: &str = r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"},
        {"idx":3,"name":"3","path":"3_Normalize","type":"sentence_transformers.models.Normalize"}]"#;

    #[test]
    fn discovery_finds_exactly_the_weight_files() {
        let dense = r#"{"in_features": 8, "out_features": 4, "bias": false}"#;
        let index = r#"{"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors", "c": "model-1.safetensors"}}"#;
        let cases: [(&str, MemoryFiles, Vec<&str>); 3] = [
            (
                "sentence-transformers",
                model(&[
                    ("modules.json", ST),
                    ("config.json", T5),
                    ("model.safetensors", ""),
                    ("tokenizer.json", "{}"),
                    ("1_Pooling/config.json", r#"{"pooling_mode": "mean"}"#),
                    ("2_Dense/config.json", dense),
                    ("2_Dense/model.safetensors", ""),
                ]),
                vec!["model.safetensors", "2_Dense/model.safetensors"],
            ),
            (
                "sharded Hugging Face T5",
                model(&[
                    ("config.json", T5),
                    ("model.safetensors.index.json", index),
                    ("model-1.safetensors", ""),
                    ("model-2.safetensors", ""),
                ]),
                vec!["model-1.safetensors", "model-2.safetensors"],
            ),
            (
                "plain Hugging Face T5",
                model(&[("config.json", T5), ("model.safetensors", "")]),
                vec!["model.safetensors"],
            ),
        ];
        for (name, files, want) in cases {
            let (got, rounds) = discover(&files);
            assert_eq!(got.unwrap(), want, "{name}");
            // One round per level of the layout: modules.json, each module config, the
            // transformer's JSON, the weights.
            assert!(rounds <= 6, "{name}: {rounds} rounds");
        }
    }

    #[test]
    fn discovery_errors_name_the_url() {
        let cases: [(&str, MemoryFiles, &str); 3] = [
            ("empty", model(&[]), "https://host/m/"),
            (
                "pickle only",
                model(&[("config.json", T5), ("pytorch_model.bin", "")]),
                "https://host/m/pytorch_model.bin",
            ),
            ("bad json", model(&[("modules.json", "[oops")]), "https://host/m/modules.json"),
        ];
        for (name, files, want) in cases {
            let msg = discover(&files).0.unwrap_err().to_string();
            assert!(msg.contains(want), "{name}: {msg}");
        }
    }
}
