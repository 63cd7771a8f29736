//! `config.json`, validated: [`ModelConfig`] chooses the encoder family once from `model_type`
//! (text-embeddings-inference's way), then parses that family's config: [`T5Config`] (T5, mT5)
//! or [`BertConfig`] (BERT and MPNet, which share their hyper-parameters).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Feed-forward activation, parsed from `feed_forward_proj` as Hugging Face does:
/// `"[gated-]ACT"`, where `gated-gelu` means the tanh-approximated `gelu_new`.
/// <https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/t5/configuration_t5.py#L123-L138>
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Relu,
    /// Exact (erf) GELU: HF's `"gelu"`.
    Gelu,
    /// Tanh-approximated GELU: HF's `"gelu_new"`, used by `gated-gelu` (T5 v1.1, mT5).
    GeluNew,
    Silu,
}

impl Activation {
    /// Parses a BERT-style `hidden_act` as transformers' `ACT2FN` names them: `gelu` is the exact
    /// erf form, `gelu_new` and `gelu_pytorch_tanh` the tanh approximation.
    pub fn from_hidden_act(s: &str) -> Option<Self> {
        Some(match s {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluNew,
            "relu" => Activation::Relu,
            "silu" | "swish" => Activation::Silu,
            _ => return None,
        })
    }
}

/// Feed-forward kind: the activation and whether it is gated (`wi_0`/`wi_1`) or plain (`wi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedForward {
    pub activation: Activation,
    pub gated: bool,
}

impl FeedForward {
    /// Parses `feed_forward_proj` (`relu`, `gated-gelu`, `gated-relu`, `gelu`, `gated-silu`, `silu`).
    pub fn parse(s: &str) -> Option<Self> {
        let (gated, act) = match s.strip_prefix("gated-") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let activation = match (act, gated) {
            ("relu", _) => Activation::Relu,
            ("gelu", true) | ("gelu_new", _) => Activation::GeluNew,
            ("gelu", false) => Activation::Gelu,
            ("silu", _) | ("swish", _) => Activation::Silu,
            _ => return None,
        };
        Some(Self { activation, gated })
    }
}

fn d_vocab() -> usize {
    32128
}
fn d_model() -> usize {
    512
}
fn d_kv() -> usize {
    64
}
fn d_ff() -> usize {
    2048
}
fn n_layers() -> usize {
    6
}
fn n_heads() -> usize {
    8
}
fn n_buckets() -> usize {
    32
}
fn max_dist() -> usize {
    128
}
fn eps() -> f64 {
    1e-6
}
fn ff_proj() -> String {
    "relu".into()
}
fn yes() -> bool {
    true
}

/// T5 hyper-parameters, with Hugging Face's defaults for absent keys.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct T5Config {
    #[serde(default = "d_vocab")]
    pub vocab_size: usize,
    #[serde(default = "d_model")]
    pub d_model: usize,
    /// Per-head width; need not equal `d_model / num_heads`.
    #[serde(default = "d_kv")]
    pub d_kv: usize,
    #[serde(default = "d_ff")]
    pub d_ff: usize,
    #[serde(default = "n_layers")]
    pub num_layers: usize,
    /// Defaults to `num_layers`.
    #[serde(default)]
    pub num_decoder_layers: Option<usize>,
    #[serde(default = "n_heads")]
    pub num_heads: usize,
    #[serde(default = "n_buckets")]
    pub relative_attention_num_buckets: usize,
    #[serde(default = "max_dist")]
    pub relative_attention_max_distance: usize,
    #[serde(default = "eps")]
    pub layer_norm_epsilon: f64,
    #[serde(default = "ff_proj")]
    pub feed_forward_proj: String,
    #[serde(default = "yes")]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub decoder_start_token_id: Option<u32>,
    #[serde(default)]
    pub model_type: Option<String>,
}

impl Default for T5Config {
    fn default() -> Self {
        serde_json::from_str("{}").expect("all fields have defaults")
    }
}

impl T5Config {
    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_slice(&std::fs::read(path).map_err(|e| Error::io(path, e))?, path)
    }

    /// Parses and validates the bytes of a `config.json`; `path` names it in errors.
    pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Self> {
        let cfg: Self = serde_json::from_slice(bytes)
            .map_err(|source| Error::Json { path: path.into(), source })?;
        cfg.validate().map_err(|m| Error::config(path, m))?;
        Ok(cfg)
    }

    /// The parsed feed-forward kind. Valid after [`validate`](Self::validate).
    pub fn feed_forward(&self) -> FeedForward {
        FeedForward::parse(&self.feed_forward_proj)
            .unwrap_or(FeedForward { activation: Activation::Relu, gated: false })
    }

    pub fn decoder_layers(&self) -> usize {
        self.num_decoder_layers.unwrap_or(self.num_layers)
    }

    /// `num_heads * d_kv`: the attention's inner width.
    pub fn inner_dim(&self) -> usize {
        self.num_heads * self.d_kv
    }

    /// Bytes of the largest f32 activation one text of `seq` tokens needs in a forward pass:
    /// attention scores `[heads, seq, seq]`, the FFN hidden `[seq, d_ff]`, q/k/v
    /// `[seq, heads * d_kv]` or hidden states `[seq, d_model]`. A batch of `b` texts needs `b`
    /// times this in one buffer.
    pub fn activation_bytes_per_text(&self, seq: usize) -> u64 {
        // u64, saturating: wasm32's usize is 32 bits, and `seq` comes from outside.
        let (seq, heads) = (seq as u64, self.num_heads as u64);
        let widest = [
            heads.saturating_mul(seq),
            self.d_ff as u64,
            self.inner_dim() as u64,
            self.d_model as u64,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        seq.saturating_mul(widest).saturating_mul(4)
    }

    /// The largest weight tensor as `(name, f32 bytes)`: the embedding table or an FFN matrix.
    pub fn largest_weight(&self) -> (&'static str, u64) {
        let d = self.d_model as u64;
        [
            ("shared.weight", self.vocab_size as u64 * d),
            ("encoder.block.*.layer.1.DenseReluDense.wi*.weight", self.d_ff as u64 * d),
            ("encoder.block.*.layer.0.SelfAttention.q.weight", self.inner_dim() as u64 * d),
        ]
        .into_iter()
        .map(|(n, elems)| (n, 4 * elems))
        .max_by_key(|&(_, b)| b)
        .expect("non-empty")
    }

    /// Checks every value inference depends on; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(t) = self.model_type.as_deref()
            && !matches!(t, "t5" | "mt5")
        {
            return Err(format!(
                "model_type `{t}` is not supported (expected `t5` or `mt5`; umT5's per-layer position bias is not T5's)"
            ));
        }
        for (key, v) in [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("d_kv", self.d_kv),
            ("d_ff", self.d_ff),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
        ] {
            if v == 0 {
                return Err(format!("`{key}` must be positive"));
            }
        }
        // Far above any T5 (mT5-XXL: vocab 250,112, d_model 4,096, d_ff 10,240, 64 heads of 64;
        // T5-11B: d_ff 65,536, 128 heads of 128), and low enough that every size derived from
        // them fits 64 bits, and each weight's elements fit wasm32's usize. Found by fuzzing:
        // a d_model of 8.9e15 overflowed the weight-size arithmetic.
        for (key, v, max) in [
            ("vocab_size", self.vocab_size, 1 << 22),
            ("d_model", self.d_model, 1 << 16),
            ("d_kv", self.d_kv, 1 << 13),
            ("d_ff", self.d_ff, 1 << 20),
            ("num_layers", self.num_layers, 1 << 10),
            ("num_decoder_layers", self.decoder_layers(), 1 << 10),
            ("num_heads", self.num_heads, 1 << 10),
            ("relative_attention_num_buckets", self.relative_attention_num_buckets, 1 << 12),
            ("relative_attention_max_distance", self.relative_attention_max_distance, 1 << 20),
        ] {
            if v > max {
                return Err(format!("`{key}` = {v} is beyond any T5 (at most {max})"));
            }
        }
        if FeedForward::parse(&self.feed_forward_proj).is_none() {
            return Err(format!(
                "`feed_forward_proj` = `{}` is not supported (expected relu, gated-gelu, gated-relu, gelu, silu or gated-silu)",
                self.feed_forward_proj
            ));
        }
        // The encoder's bucketing is bidirectional: it halves the buckets, and half of those are
        // exact, so its log-spaced part divides by ln(max_distance / max_exact) with
        // max_exact = num_buckets / 2 / 2. transformers' `_relative_position_bucket`
        // (https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/t5/modeling_t5.py)
        // then needs max_distance > max_exact, or it divides by zero (or by a negative log).
        // The decoder's causal bucketing would need max_distance > num_buckets / 2, but st5 runs
        // the decoder on its start token alone (ST5-EncDec pools the first decoder output), so it
        // only ever sees relative position 0, an exact bucket: no constraint applies to it.
        if self.relative_attention_num_buckets < 4 {
            return Err("`relative_attention_num_buckets` must be at least 4".into());
        }
        let max_exact = self.relative_attention_num_buckets / 2 / 2;
        if self.relative_attention_max_distance <= max_exact {
            return Err(format!(
                "`relative_attention_max_distance` ({}) must exceed relative_attention_num_buckets / 4 ({max_exact}), the encoder's exact buckets",
                self.relative_attention_max_distance
            ));
        }
        if !(self.layer_norm_epsilon.is_finite() && self.layer_norm_epsilon > 0.0) {
            return Err("`layer_norm_epsilon` must be positive and finite".into());
        }
        Ok(())
    }
}

/// The encoder families st5 runs, chosen once from `config.json`'s `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// T5 and mT5 (`t5.rs`): relative-position bias, RMS norm, no attention scaling.
    T5,
    /// BERT (`bert.rs`): absolute and token-type embeddings, post-LayerNorm, biases.
    Bert,
    /// MPNet (`mpnet.rs`): BERT's blocks without token types, plus T5's bucketed bias.
    Mpnet,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::T5, Family::Bert, Family::Mpnet];

    pub fn name(self) -> &'static str {
        match self {
            Family::T5 => "t5",
            Family::Bert => "bert",
            Family::Mpnet => "mpnet",
        }
    }

    /// The family of a `model_type` value: `t5` and `mt5` are T5 (absent too: early T5
    /// `config.json` files have no `model_type`).
    pub fn from_model_type(model_type: Option<&str>) -> Option<Self> {
        match model_type {
            None | Some("t5" | "mt5") => Some(Family::T5),
            Some("bert") => Some(Family::Bert),
            Some("mpnet") => Some(Family::Mpnet),
            Some(_) => None,
        }
    }
}

crate::by_name::by_name!(Family, "model family", "t5, bert or mpnet", serde);

fn bert_vocab() -> usize {
    30522
}
fn bert_hidden() -> usize {
    768
}
fn bert_layers() -> usize {
    12
}
fn bert_intermediate() -> usize {
    3072
}
fn bert_positions() -> usize {
    512
}
fn bert_types() -> usize {
    2
}
fn bert_eps() -> f64 {
    1e-12
}
fn gelu() -> String {
    "gelu".into()
}

/// BERT and MPNet hyper-parameters (Hugging Face's `BertConfig` / `MPNetConfig`), with BERT's
/// defaults for absent keys; [`ModelConfig::from_slice`] fills MPNet's own defaults.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct BertConfig {
    #[serde(default = "bert_vocab")]
    pub vocab_size: usize,
    #[serde(default = "bert_hidden")]
    pub hidden_size: usize,
    #[serde(default = "bert_layers")]
    pub num_hidden_layers: usize,
    #[serde(default = "bert_layers")]
    pub num_attention_heads: usize,
    #[serde(default = "bert_intermediate")]
    pub intermediate_size: usize,
    #[serde(default = "gelu")]
    pub hidden_act: String,
    #[serde(default = "bert_positions")]
    pub max_position_embeddings: usize,
    /// BERT only (MPNet has no token types).
    #[serde(default = "bert_types")]
    pub type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    pub layer_norm_eps: f64,
    /// The id batches are padded with: BERT's default 0, MPNet's 1. MPNet's positions do not
    /// follow it ([`MPNET_PADDING_IDX`]).
    #[serde(default)]
    pub pad_token_id: Option<usize>,
    /// MPNet's position-bias table rows; the buckets used are always 32 (transformers'
    /// `compute_position_bias` passes its default whatever the config says).
    #[serde(default)]
    pub relative_attention_num_buckets: Option<usize>,
}

/// The id MPNet's position ids skip, whatever `pad_token_id` says (transformers'
/// `MPNetEmbeddings.padding_idx`): the first token has position `MPNET_PADDING_IDX + 1`.
pub const MPNET_PADDING_IDX: usize = 1;

/// MPNet's bucket count and distance (transformers' `MPNetEncoder.compute_position_bias`).
pub const MPNET_BUCKETS: usize = 32;
pub const MPNET_MAX_DISTANCE: usize = 128;

impl BertConfig {
    /// `hidden_size / num_attention_heads`.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads.max(1)
    }

    pub fn pad_id(&self, family: Family) -> usize {
        self.pad_token_id.unwrap_or(if family == Family::Mpnet { 1 } else { 0 })
    }

    /// The parsed `hidden_act`. Valid after [`validate`](Self::validate).
    pub fn activation(&self) -> Activation {
        Activation::from_hidden_act(&self.hidden_act).unwrap_or(Activation::Gelu)
    }

    /// The first position id of a text: 0 for BERT, 2 for MPNet ([`MPNET_PADDING_IDX`] + 1).
    pub fn position_offset(&self, family: Family) -> usize {
        if family == Family::Mpnet { MPNET_PADDING_IDX + 1 } else { 0 }
    }

    /// The most tokens the position table covers.
    pub fn max_tokens(&self, family: Family) -> usize {
        self.max_position_embeddings.saturating_sub(self.position_offset(family))
    }

    /// Checks every value inference depends on; the message names the key.
    pub fn validate(&self, family: Family) -> Result<(), String> {
        for (key, v, max) in [
            ("vocab_size", self.vocab_size, 1 << 22),
            ("hidden_size", self.hidden_size, 1 << 16),
            ("num_hidden_layers", self.num_hidden_layers, 1 << 10),
            ("num_attention_heads", self.num_attention_heads, 1 << 10),
            ("intermediate_size", self.intermediate_size, 1 << 20),
            ("max_position_embeddings", self.max_position_embeddings, 1 << 20),
            ("type_vocab_size", self.type_vocab_size, 1 << 10),
        ] {
            if v == 0 && !(key == "type_vocab_size" && family == Family::Mpnet) {
                return Err(format!("`{key}` must be positive"));
            }
            if v > max {
                return Err(format!("`{key}` = {v} is beyond any {family} model (at most {max})"));
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "`hidden_size` ({}) is not a multiple of `num_attention_heads` ({})",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if Activation::from_hidden_act(&self.hidden_act).is_none() {
            return Err(format!(
                "`hidden_act` = `{}` is not supported (expected gelu, gelu_new, gelu_pytorch_tanh, relu or silu)",
                self.hidden_act
            ));
        }
        let eps = self.layer_norm_eps;
        if !(eps.is_finite() && eps > 0.0) {
            return Err("`layer_norm_eps` must be positive and finite".into());
        }
        if self.max_tokens(family) == 0 {
            return Err(format!(
                "`max_position_embeddings` ({}) leaves no position for a token (MPNet's start at 2)",
                self.max_position_embeddings
            ));
        }
        if family == Family::Mpnet
            && self.relative_attention_num_buckets.unwrap_or(MPNET_BUCKETS) < MPNET_BUCKETS
        {
            return Err(format!(
                "`relative_attention_num_buckets` must be at least {MPNET_BUCKETS} (MPNet always buckets with {MPNET_BUCKETS})"
            ));
        }
        Ok(())
    }
}

/// A validated `config.json` of any family st5 runs, chosen by `model_type`.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelConfig {
    T5(T5Config),
    /// BERT or MPNet.
    Bert(Family, BertConfig),
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig::T5(T5Config::default())
    }
}

impl ModelConfig {
    /// Parses and validates the bytes of a `config.json`; `path` names it in errors. An unknown
    /// `model_type` names the field, its value and the families st5 runs.
    pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Self> {
        #[derive(Deserialize)]
        struct Tag {
            #[serde(default)]
            model_type: Option<String>,
        }
        let tag: Tag = serde_json::from_slice(bytes)
            .map_err(|source| Error::Json { path: path.into(), source })?;
        let family = Family::from_model_type(tag.model_type.as_deref()).ok_or_else(|| {
            Error::config(
                path,
                format!(
                    "`model_type` = `{}` is not a family st5 runs (supported: t5 and mt5, bert, mpnet)",
                    tag.model_type.as_deref().unwrap_or_default()
                ),
            )
        })?;
        match family {
            Family::T5 => Ok(ModelConfig::T5(T5Config::from_slice(bytes, path)?)),
            family => {
                let cfg: BertConfig = serde_json::from_slice(bytes)
                    .map_err(|source| Error::Json { path: path.into(), source })?;
                cfg.validate(family).map_err(|m| Error::config(path, m))?;
                Ok(ModelConfig::Bert(family, cfg))
            }
        }
    }

    pub fn family(&self) -> Family {
        match self {
            ModelConfig::T5(_) => Family::T5,
            ModelConfig::Bert(family, _) => *family,
        }
    }

    /// The T5 config, for what only T5 has (a decoder, soft prompts).
    pub fn t5(&self) -> Option<&T5Config> {
        match self {
            ModelConfig::T5(cfg) => Some(cfg),
            ModelConfig::Bert(..) => None,
        }
    }

    /// The hidden width: T5's `d_model`, BERT's `hidden_size`.
    pub fn d_model(&self) -> usize {
        match self {
            ModelConfig::T5(cfg) => cfg.d_model,
            ModelConfig::Bert(_, cfg) => cfg.hidden_size,
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            ModelConfig::T5(cfg) => cfg.vocab_size,
            ModelConfig::Bert(_, cfg) => cfg.vocab_size,
        }
    }

    /// The most tokens a text may have: T5 has no limit, BERT and MPNet their position table.
    pub fn max_tokens(&self) -> Option<usize> {
        match self {
            ModelConfig::T5(_) => None,
            ModelConfig::Bert(family, cfg) => Some(cfg.max_tokens(*family)),
        }
    }

    /// As [`T5Config::activation_bytes_per_text`], for any family.
    pub fn activation_bytes_per_text(&self, seq: usize) -> u64 {
        match self {
            ModelConfig::T5(cfg) => cfg.activation_bytes_per_text(seq),
            ModelConfig::Bert(_, cfg) => {
                let (seq, heads) = (seq as u64, cfg.num_attention_heads as u64);
                let widest = [
                    heads.saturating_mul(seq),
                    cfg.intermediate_size as u64,
                    cfg.hidden_size as u64,
                ]
                .into_iter()
                .max()
                .unwrap_or(0);
                seq.saturating_mul(widest).saturating_mul(4)
            }
        }
    }

    /// The largest weight tensor as `(name, f32 bytes)`.
    pub fn largest_weight(&self) -> (&'static str, u64) {
        match self {
            ModelConfig::T5(cfg) => cfg.largest_weight(),
            ModelConfig::Bert(_, cfg) => {
                let d = cfg.hidden_size as u64;
                [
                    ("embeddings.word_embeddings.weight", cfg.vocab_size as u64 * d),
                    ("encoder.layer.*.intermediate.dense.weight", cfg.intermediate_size as u64 * d),
                ]
                .into_iter()
                .map(|(n, elems)| (n, 4 * elems))
                .max_by_key(|&(_, b)| b)
                .expect("non-empty")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_type_chooses_the_family() {
        // (config.json, the family, or the text the error must hold)
        let cases: [(&str, Result<Family, &str>); 9] = [
            ("{}", Ok(Family::T5)),
            (r#"{"model_type": "mt5"}"#, Ok(Family::T5)),
            (
                r#"{"model_type": "bert", "hidden_size": 32, "num_attention_heads": 4}"#,
                Ok(Family::Bert),
            ),
            (r#"{"model_type": "mpnet", "vocab_size": 30527}"#, Ok(Family::Mpnet)),
            (
                r#"{"model_type": "llama"}"#,
                Err(
                    "`model_type` = `llama` is not a family st5 runs (supported: t5 and mt5, bert, mpnet)",
                ),
            ),
            (r#"{"model_type": "bert", "hidden_act": "tanh"}"#, Err("hidden_act")),
            (
                r#"{"model_type": "bert", "hidden_size": 30, "num_attention_heads": 4}"#,
                Err("not a multiple"),
            ),
            (r#"{"model_type": "mpnet", "max_position_embeddings": 2}"#, Err("leaves no position")),
            (
                r#"{"model_type": "mpnet", "relative_attention_num_buckets": 16}"#,
                Err("at least 32"),
            ),
        ];
        for (json, want) in cases {
            let got = ModelConfig::from_slice(json.as_bytes(), Path::new("m/config.json"));
            match (got, want) {
                (Ok(cfg), Ok(family)) => assert_eq!(cfg.family(), family, "{json}"),
                (Err(e), Err(text)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(text) && msg.contains("m/config.json"), "{json}: {msg}");
                }
                (got, want) => panic!("{json}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn family_defaults_differ_where_transformers_does() {
        let cfg: BertConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg.layer_norm_eps, 1e-12);
        let cases = [(Family::Bert, 0, 0, 512), (Family::Mpnet, 1, 2, 510)];
        for (family, pad, offset, max) in cases {
            assert_eq!(cfg.pad_id(family), pad, "{family}");
            assert_eq!(cfg.position_offset(family), offset, "{family}");
            assert_eq!(cfg.max_tokens(family), max, "{family}");
        }
        // MPNet pads with the config's id, but its positions start at 2 whatever it says.
        let pad0: BertConfig = serde_json::from_str(r#"{"pad_token_id": 0}"#).unwrap();
        assert_eq!(
            (
                pad0.pad_id(Family::Mpnet),
                pad0.position_offset(Family::Mpnet),
                pad0.max_tokens(Family::Mpnet)
            ),
            (0, 2, 510)
        );
        for (act, want) in [
            ("gelu", Some(Activation::Gelu)),
            ("gelu_new", Some(Activation::GeluNew)),
            ("gelu_pytorch_tanh", Some(Activation::GeluNew)),
            ("relu", Some(Activation::Relu)),
            ("gelu_fast", None),
        ] {
            assert_eq!(Activation::from_hidden_act(act), want, "{act}");
        }
    }

    #[test]
    fn feed_forward_kinds() {
        let cases = [
            ("relu", Some((Activation::Relu, false))),
            ("gated-gelu", Some((Activation::GeluNew, true))),
            ("gated-relu", Some((Activation::Relu, true))),
            ("gelu", Some((Activation::Gelu, false))),
            ("gated-silu", Some((Activation::Silu, true))),
            ("gelu_new", Some((Activation::GeluNew, false))),
            ("tanh", None),
            ("gated-", None),
            ("", None),
        ];
        for (s, want) in cases {
            let got = FeedForward::parse(s).map(|f| (f.activation, f.gated));
            assert_eq!(got, want, "feed_forward_proj = {s:?}");
        }
    }

    #[test]
    fn validation_names_the_key() {
        let cases: [(&str, Option<&str>); 13] = [
            ("{}", None),
            // Found by fuzzing: sizes whose products overflowed.
            (
                r#"{"d_model": 8888888888884422222}"#,
                Some("`d_model` = 8888888888884422222 is beyond"),
            ),
            (r#"{"num_heads": 1025}"#, Some("num_heads")),
            (
                r#"{"vocab_size": 250112, "d_model": 4096, "d_ff": 65536, "num_heads": 128, "d_kv": 128}"#,
                None,
            ),
            (r#"{"d_model": 0}"#, Some("d_model")),
            (r#"{"num_heads": 0}"#, Some("num_heads")),
            (r#"{"feed_forward_proj": "gated-tanh"}"#, Some("feed_forward_proj")),
            (r#"{"relative_attention_num_buckets": 2}"#, Some("relative_attention_num_buckets")),
            // transformers runs this encoder: its exact buckets are 32 / 4 = 8 < 16.
            (
                r#"{"relative_attention_num_buckets": 32, "relative_attention_max_distance": 16}"#,
                None,
            ),
            (
                r#"{"relative_attention_num_buckets": 32, "relative_attention_max_distance": 8}"#,
                Some(
                    "relative_attention_max_distance` (8) must exceed relative_attention_num_buckets / 4 (8)",
                ),
            ),
            (
                r#"{"relative_attention_num_buckets": 9, "relative_attention_max_distance": 2}"#,
                Some("relative_attention_num_buckets / 4 (2)"),
            ),
            (r#"{"layer_norm_epsilon": -1.0}"#, Some("layer_norm_epsilon")),
            (r#"{"model_type": "umt5"}"#, Some("umt5")),
        ];
        for (json, want) in cases {
            let cfg: T5Config = serde_json::from_str(json).unwrap();
            match (cfg.validate(), want) {
                (Ok(()), None) => {}
                (Err(msg), Some(key)) => assert!(msg.contains(key), "{json}: {msg}"),
                (got, want) => panic!("{json}: got {got:?}, want error naming {want:?}"),
            }
        }
    }

    #[test]
    fn defaults_follow_hugging_face() {
        let cfg = T5Config::default();
        assert_eq!((cfg.d_model, cfg.d_kv, cfg.num_heads, cfg.decoder_layers()), (512, 64, 8, 6));
        assert!(cfg.tie_word_embeddings);
        let cfg: T5Config =
            serde_json::from_str(r#"{"num_layers": 3, "d_kv": 6, "num_heads": 3}"#).unwrap();
        assert_eq!((cfg.decoder_layers(), cfg.inner_dim()), (3, 18));
    }
}
