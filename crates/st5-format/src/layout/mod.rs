//! Model directory layouts: a sentence-transformers directory (`modules.json`, `1_Pooling`,
//! `2_Dense`, `Normalize`; the Transformer at the root or in `0_Transformer/`) or a plain
//! Hugging Face directory of any family st5 runs (T5, BERT, MPNet). Reading a layout touches
//! only JSON files; [`write`] writes the sentence-transformers layout that this reads back.

use std::path::PathBuf;

use serde::Deserialize;

use crate::by_name::by_name;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::files::{ModelFiles, join};
use crate::variant::Variant;

pub mod write;
pub use write::{DenseModule, SentenceTransformersDir};

/// Everything read from a model directory's JSON files.
#[derive(Debug, Clone)]
pub struct ModelLayout {
    /// The folder (relative to the model root) holding the encoder's `config.json` and weights.
    pub transformer: String,
    /// The same, as a path for messages.
    pub transformer_dir: PathBuf,
    pub config: ModelConfig,
    /// From the Pooling module (`mean` → enc-mean, `cls` → enc-first); `None` for a plain HF dir.
    pub pooling: Option<Variant>,
    /// A Pooling module whose mode is unset or not a Sentence-T5 pooling (the natural layout of
    /// an EncDec checkpoint, which sentence-transformers has no mode for): its config file and
    /// the problem. An error only when no variant is given explicitly ([`ModelLayout::variant`]).
    pub pooling_problem: Option<(PathBuf, String)>,
    /// Dense module folders (relative) with `(in_features, out_features, bias, activation)`.
    pub dense: Vec<(String, DenseSpec)>,
    /// A Normalize module is present (always true for a plain HF directory).
    pub normalize: bool,
    /// From `sentence_bert_config.json`, else the tokenizer's `model_max_length`, else 512.
    pub max_seq_length: usize,
    /// `tokenizer.json` (relative), if the model has one.
    pub tokenizer: Option<String>,
}

/// A Dense module's activation (`activation_function` in its config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenseActivation {
    /// `torch.nn.modules.linear.Identity`: Sentence-T5's projection.
    Identity,
    /// `torch.nn.modules.activation.Tanh`.
    Tanh,
}

impl DenseActivation {
    pub const ALL: [DenseActivation; 2] = [DenseActivation::Identity, DenseActivation::Tanh];

    pub fn name(self) -> &'static str {
        match self {
            DenseActivation::Identity => "identity",
            DenseActivation::Tanh => "tanh",
        }
    }

    /// The class path sentence-transformers writes, which [`from_class`](Self::from_class) reads.
    pub fn class(self) -> &'static str {
        match self {
            DenseActivation::Identity => "torch.nn.modules.linear.Identity",
            DenseActivation::Tanh => "torch.nn.modules.activation.Tanh",
        }
    }

    /// The activation of a class path (`torch.nn.modules.activation.Tanh`, ...), by its last
    /// segment.
    pub fn from_class(class: &str) -> Option<Self> {
        match class.rsplit('.').next().unwrap_or_default() {
            "Identity" => Some(DenseActivation::Identity),
            "Tanh" => Some(DenseActivation::Tanh),
            _ => None,
        }
    }
}

by_name!(DenseActivation, "Dense activation", "identity or tanh");

/// One Dense module: `(in_features, out_features, bias, activation)`.
pub type DenseSpec = (usize, usize, bool, DenseActivation);

#[derive(Deserialize)]
struct ModuleEntry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// The `pooling_mode` st5 writes in `1_Pooling/config.json` for an ST5-EncDec model (the first
/// decoder output). It is not a sentence-transformers mode.
pub const ENCDEC_POOLING_MODE: &str = "st5_encdec_first";

/// `1_Pooling/config.json` in either sentence-transformers format: v5+ (`pooling_mode`) or the
/// older boolean flags (`pooling_mode_mean_tokens`, ...).
#[derive(Deserialize, Default)]
struct PoolingConfig {
    pooling_mode: Option<String>,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

impl PoolingConfig {
    fn variant(&self) -> Result<Variant, String> {
        let modes: Vec<&str> = match &self.pooling_mode {
            Some(m) => m.split('+').map(str::trim).collect(),
            None => [
                (self.pooling_mode_cls_token, "cls"),
                (self.pooling_mode_mean_tokens, "mean"),
                (self.pooling_mode_max_tokens, "max"),
                (self.pooling_mode_mean_sqrt_len_tokens, "mean_sqrt_len_tokens"),
                (self.pooling_mode_weightedmean_tokens, "weightedmean"),
                (self.pooling_mode_lasttoken, "lasttoken"),
            ]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect(),
        };
        match modes.as_slice() {
            ["mean"] | ["mean_tokens"] => Ok(Variant::EncMean),
            ["cls"] | ["cls_token"] => Ok(Variant::EncFirst),
            ["max"] | ["max_tokens"] => Ok(Variant::Max),
            ["mean_sqrt_len_tokens"] => Ok(Variant::MeanSqrtLen),
            // st5's own mode for the first decoder output (save.rs writes it for encdec-first
            // models); sentence-transformers has none, so Python refuses such a directory.
            [ENCDEC_POOLING_MODE] => Ok(Variant::EncDecFirst),
            [] => Err("no pooling mode is set".into()),
            other => Err(format!(
                "pooling mode {other:?} is not supported (expected one of mean, cls, max or mean_sqrt_len_tokens)"
            )),
        }
    }
}

#[derive(Deserialize)]
struct DenseConfig {
    in_features: usize,
    out_features: usize,
    #[serde(default = "yes")]
    bias: bool,
    #[serde(default)]
    activation_function: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, Default)]
struct SbertConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize, Default)]
struct TokenizerConfig {
    model_max_length: Option<f64>,
}

impl ModelLayout {
    /// Reads the layout of a model. Unknown sentence-transformers modules are refused by name.
    pub fn read(files: &impl ModelFiles) -> Result<Self> {
        let Some(modules) = files.json::<Vec<ModuleEntry>>("modules.json")? else {
            return Self::plain(files, "");
        };
        let modules_path = files.path("modules.json");
        let mut transformer = None;
        let mut pooling = None;
        let mut pooling_problem = None;
        let mut dense = Vec::new();
        let mut normalize = false;
        for m in &modules {
            let sub = m.path.trim_matches('/').to_string();
            let config = join(&sub, "config.json");
            let required = |what: &str| {
                Error::layout(files.path(&config), format!("missing: the {what} module's config"))
            };
            match m.kind.rsplit('.').next().unwrap_or_default() {
                "Transformer" => transformer = Some(sub),
                "Pooling" => {
                    let cfg: PoolingConfig =
                        files.json(&config)?.ok_or_else(|| required("Pooling"))?;
                    match cfg.variant() {
                        Ok(v) => pooling = Some(v),
                        Err(m) => pooling_problem = Some((files.path(&config), m)),
                    }
                }
                "Dense" => {
                    let cfg: DenseConfig = files.json(&config)?.ok_or_else(|| required("Dense"))?;
                    let act = cfg
                        .activation_function
                        .as_deref()
                        .unwrap_or("torch.nn.modules.linear.Identity");
                    let Some(activation) = DenseActivation::from_class(act) else {
                        return Err(Error::config(
                            files.path(&config),
                            format!(
                                "Dense activation_function `{act}` is not supported (expected torch.nn.modules.linear.Identity or torch.nn.modules.activation.Tanh)"
                            ),
                        ));
                    };
                    dense.push((sub, (cfg.in_features, cfg.out_features, cfg.bias, activation)));
                }
                "Normalize" => normalize = true,
                other => {
                    return Err(Error::config(
                        &modules_path,
                        format!(
                            "module type `{}` ({other}) is not supported (expected Transformer, Pooling, Dense and Normalize)",
                            m.kind
                        ),
                    ));
                }
            }
        }
        let transformer =
            transformer.ok_or_else(|| Error::config(&modules_path, "no Transformer module"))?;
        let mut layout = Self::plain(files, &transformer)?;
        layout.pooling = pooling;
        layout.pooling_problem = pooling_problem;
        layout.dense = dense;
        layout.normalize = normalize;
        Ok(layout)
    }

    /// The variant to run: `explicit` (`--variant`, the package's `variant` option) wins over
    /// the directory's pooling; without either, a plain T5 directory is enc-mean, and a Pooling
    /// module whose mode cannot be used is an error naming its config.
    pub fn variant(&self, explicit: Option<Variant>) -> Result<Variant> {
        match (explicit, self.pooling, &self.pooling_problem) {
            (Some(v), _, _) => Ok(v),
            (None, _, Some((path, message))) => Err(Error::config(
                path,
                format!(
                    "{message}; choose a variant explicitly (--variant, or the `variant` option)"
                ),
            )),
            (None, pooling, None) => Ok(pooling.unwrap_or(Variant::EncMean)),
        }
    }

    /// The Transformer part: `config.json`, max length and tokenizer, looked up in the
    /// transformer folder and then the model root.
    fn plain(files: &impl ModelFiles, transformer: &str) -> Result<Self> {
        let config_rel = join(transformer, "config.json");
        let Some(bytes) = files.read(&config_rel)? else {
            return Err(Error::layout(
                files.path(transformer),
                "no config.json (expected a sentence-transformers or Hugging Face model directory)",
            ));
        };
        let config = ModelConfig::from_slice(&bytes, &files.path(&config_rel))?;
        let find = |name: &str| {
            [join(transformer, name), name.to_string()].into_iter().find(|p| files.exists(p))
        };
        let sbert: SbertConfig = match find("sentence_bert_config.json") {
            Some(p) => files.json(&p)?.unwrap_or_default(),
            None => SbertConfig::default(),
        };
        let tok_cfg: TokenizerConfig = match find("tokenizer_config.json") {
            Some(p) => files.json(&p)?.unwrap_or_default(),
            None => TokenizerConfig::default(),
        };
        // Tokenizers without a limit store a huge sentinel (1e30) as model_max_length.
        let tok_max =
            tok_cfg.model_max_length.filter(|&m| (1.0..=1e6).contains(&m)).map(|m| m as usize);
        Ok(Self {
            transformer: transformer.to_string(),
            transformer_dir: files.path(transformer),
            config,
            pooling: None,
            pooling_problem: None,
            dense: Vec::new(),
            normalize: true,
            max_seq_length: sbert.max_seq_length.or(tok_max).unwrap_or(512),
            tokenizer: find("tokenizer.json"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_configs() {
        let cases: [(&str, Option<Variant>); 11] = [
            (r#"{"pooling_mode": "mean"}"#, Some(Variant::EncMean)),
            (r#"{"pooling_mode": "cls"}"#, Some(Variant::EncFirst)),
            (r#"{"pooling_mode": "max"}"#, Some(Variant::Max)),
            (r#"{"pooling_mode_mean_sqrt_len_tokens": true}"#, Some(Variant::MeanSqrtLen)),
            (r#"{"pooling_mode": "weightedmean"}"#, None),
            (r#"{"pooling_mode": "st5_encdec_first"}"#, Some(Variant::EncDecFirst)),
            (r#"{"pooling_mode": "mean+cls"}"#, None),
            (
                r#"{"word_embedding_dimension": 768, "pooling_mode_mean_tokens": true}"#,
                Some(Variant::EncMean),
            ),
            (
                r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
                Some(Variant::EncFirst),
            ),
            (r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#, None),
            (r#"{}"#, None),
        ];
        for (json, want) in cases {
            let cfg: PoolingConfig = serde_json::from_str(json).unwrap();
            assert_eq!(cfg.variant().ok(), want, "{json}");
        }
    }

    #[test]
    fn an_explicit_variant_wins_over_the_directory() {
        use Variant::*;
        let problem = || Some((PathBuf::from("m/1_Pooling/config.json"), "no pooling mode".into()));
        // (explicit, directory's pooling, pooling problem) → the variant, or None for an error
        let cases: [(Option<Variant>, Option<Variant>, Option<(PathBuf, String)>, Option<Variant>);
            6] = [
            (None, None, None, Some(EncMean)),
            (None, Some(EncFirst), None, Some(EncFirst)),
            (Some(EncMean), Some(EncFirst), None, Some(EncMean)),
            (Some(EncDecFirst), None, problem(), Some(EncDecFirst)),
            (Some(EncFirst), None, problem(), Some(EncFirst)),
            (None, None, problem(), None),
        ];
        for (explicit, pooling, pooling_problem, want) in cases {
            let layout = ModelLayout {
                transformer: String::new(),
                transformer_dir: PathBuf::from("m"),
                config: ModelConfig::default(),
                pooling,
                pooling_problem: pooling_problem.clone(),
                dense: Vec::new(),
                normalize: true,
                max_seq_length: 8,
                tokenizer: None,
            };
            let got = layout.variant(explicit);
            assert_eq!(
                got.as_ref().ok().copied(),
                want,
                "{explicit:?} {pooling:?} {pooling_problem:?}"
            );
            if let Err(e) = got {
                let msg = e.to_string();
                assert!(msg.contains("1_Pooling/config.json") && msg.contains("variant"), "{msg}");
            }
        }
    }
}
