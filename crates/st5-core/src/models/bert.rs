//! The BERT encoder, named and nested like Hugging Face's `modeling_bert.py` (candle's `bert.rs`
//! style) so that every weight name maps one to one: `embeddings.word_embeddings.weight`,
//! `encoder.layer.{i}.attention.self.query.weight`, `...attention.output.LayerNorm.bias`,
//! `...intermediate.dense.weight`, `...output.dense.weight`, ...
//!
//! BERT specifics: word, absolute position and token-type embeddings summed and layer-normed;
//! post-LayerNorm blocks (`x = LN(x + f(x))`) with a bias in every Linear; attention scaled by
//! `1/sqrt(d_head)`. The pooler (`pooler.dense`) is never run: sentence-transformers pools the
//! hidden states itself (names.rs ignores it). MPNet (`mpnet.rs`) reuses the embeddings and the
//! feed-forward halves.
//! <https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/bert/modeling_bert.py>

// Field names follow the checkpoint's (`LayerNorm`) on purpose.
#![allow(non_snake_case)]

use burn::module::{Module, Param};
use burn::tensor::{Int, Tensor, TensorData};

use super::layers::{self, LayerNorm, Linear};
use crate::batch::Packing;
use crate::config::{Activation, BertConfig, Family, MPNET_PADDING_IDX};
use crate::int8::Int8Matrix;
use crate::ops::{self, Attend, AttentionBias};
use crate::weights::{Init, VarBuilder};

/// `embeddings`: word + token type 0 + absolute position, then LayerNorm. MPNet's have no
/// token-type table, and its positions start after the padding id (RoBERTa's scheme).
#[derive(Module, Debug)]
pub struct BertEmbeddings {
    /// `[vocab_size, hidden]`; `None` when the table is kept int8.
    pub word_embeddings: Option<Param<Tensor<2>>>,
    #[module(skip)]
    pub word_int8: Option<Int8Matrix>,
    /// `[max_position_embeddings, hidden]`
    pub position_embeddings: Param<Tensor<2>>,
    /// `[type_vocab_size, hidden]`: BERT only. Every text is segment 0.
    pub token_type_embeddings: Option<Param<Tensor<2>>>,
    pub LayerNorm: LayerNorm,
    /// How position ids follow from the token ids.
    #[module(skip)]
    pub positions: Positions,
}

/// Position ids, as each family's `transformers` embeddings compute them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// BERT: 0, 1, 2, ... whatever the tokens.
    Absolute,
    /// MPNet (RoBERTa's scheme): `MPNetEmbeddings` fixes `padding_idx = 1` whatever
    /// `pad_token_id` says; a token with id 1 gets position 1 and the others count the tokens
    /// that are not id 1, from 2.
    AfterPadding,
}

impl BertEmbeddings {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig, family: Family) -> Self {
        let d = cfg.hidden_size;
        let (word_embeddings, word_int8) = layers::table(
            &vb.pp("word_embeddings"),
            cfg.vocab_size,
            d,
            "weight",
            Init::Normal(0.02),
        );
        let position_embeddings = vb.pp("position_embeddings").get(
            [cfg.max_position_embeddings, d],
            "weight",
            Init::Normal(0.02),
        );
        let token_type_embeddings = (family == Family::Bert).then(|| {
            vb.pp("token_type_embeddings").get(
                [cfg.type_vocab_size, d],
                "weight",
                Init::Normal(0.02),
            )
        });
        Self {
            word_embeddings,
            word_int8,
            position_embeddings,
            token_type_embeddings,
            LayerNorm: LayerNorm::new(&vb.pp("LayerNorm"), d, cfg.layer_norm_eps),
            positions: if family == Family::Mpnet {
                Positions::AfterPadding
            } else {
                Positions::Absolute
            },
        }
    }

    /// `ids`: `[batch, seq]` → `[batch, seq, hidden]`. `seq` is at most the position table's
    /// rows after the offset (the loader caps `max_seq_length` there).
    pub fn forward(&self, ids: Tensor<2, Int>) -> Tensor<3> {
        let [b, s] = ids.dims();
        let device = ids.device();
        let words = layers::lookup(&self.word_embeddings, &self.word_int8, ids.clone());
        let d = words.dims()[2];
        let x = match &self.token_type_embeddings {
            Some(types) => words + types.val().slice([0..1, 0..d]).reshape([1, 1, d]),
            None => words,
        };
        let table = self.position_embeddings.val();
        let x = match self.positions {
            Positions::Absolute => {
                let positions: Vec<i32> = (0..s as i32).collect();
                let positions =
                    Tensor::<1, Int>::from_data(TensorData::new(positions, [s]), &device);
                x + table.select(0, positions).reshape([1, s, d])
            }
            Positions::AfterPadding => {
                let kept = ids.not_equal_elem(MPNET_PADDING_IDX as i64).int();
                let positions = kept.clone().cumsum(1) * kept + MPNET_PADDING_IDX as i64;
                x + table.select(0, positions.reshape([b * s])).reshape([b, s, d])
            }
        };
        self.LayerNorm.forward(x)
    }

    /// Each run's ids `[count, len]` → the packed embeddings `[1, total, hidden]`, every
    /// sequence's positions its own.
    pub fn forward_packed(&self, ids: Vec<Tensor<2, Int>>) -> Tensor<3> {
        ops::pack(ids.into_iter().map(|ids| self.forward(ids)).collect())
    }

    /// The hidden width.
    pub fn hidden(&self) -> usize {
        self.position_embeddings.dims()[1]
    }
}

/// `attention.self`: q, k, v with biases; `softmax(q kᵀ / sqrt(d_head) + mask) v`.
#[derive(Module, Debug)]
pub struct BertSelfAttention {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub num_heads: usize,
    pub head_dim: usize,
}

impl BertSelfAttention {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        let d = cfg.hidden_size;
        Self {
            query: Linear::new(&vb.pp("query"), d, d, true),
            key: Linear::new(&vb.pp("key"), d, d, true),
            value: Linear::new(&vb.pp("value"), d, d, true),
            num_heads: cfg.num_attention_heads,
            head_dim: cfg.head_dim(),
        }
    }

    /// `[batch, seq, hidden]` → the heads' context `[batch, seq, hidden]`.
    pub fn forward(&self, x: Tensor<3>, bias: &Attend) -> Tensor<3> {
        let [q, k, v] = Linear::forward_shared([&self.query, &self.key, &self.value], x);
        scaled_attention(q, k, v, bias, self.num_heads, self.head_dim)
    }
}

/// Attention scaled by `1/sqrt(d_head)` (BERT, MPNet): [`ops::attention`] is T5's, unscaled, so
/// the queries are scaled first; `bias` (MPNet's position bias, the padding mask) is added after
/// the scaling, as both references do.
pub fn scaled_attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    bias: &Attend,
    num_heads: usize,
    head_dim: usize,
) -> Tensor<3> {
    let q = q.mul_scalar(1.0 / (head_dim as f64).sqrt());
    ops::attention(q, k, v, bias, num_heads, head_dim)
}

/// `attention.output`: `LayerNorm(x + dense(context))`.
#[derive(Module, Debug)]
pub struct BertSelfOutput {
    pub dense: Linear,
    pub LayerNorm: LayerNorm,
}

/// `attention`: self-attention, then its output projection and post-LayerNorm.
#[derive(Module, Debug)]
pub struct BertAttention {
    /// `attention.self` (a keyword in Rust: names.rs maps `self_`).
    pub self_: BertSelfAttention,
    pub output: BertSelfOutput,
}

/// `intermediate`: `act(dense(x))`.
#[derive(Module, Debug)]
pub struct BertIntermediate {
    pub dense: Linear,
    #[module(skip)]
    pub activation: Activation,
}

impl BertIntermediate {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        Self {
            dense: Linear::new(&vb.pp("dense"), cfg.hidden_size, cfg.intermediate_size, true),
            activation: cfg.activation(),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        ops::activation(self.dense.forward(x), self.activation)
    }
}

/// `output` (of the feed-forward) and `attention.output`: `LayerNorm(residual + dense(h))`.
#[derive(Module, Debug)]
pub struct BertOutput {
    pub dense: Linear,
    pub LayerNorm: LayerNorm,
}

impl BertOutput {
    pub fn new(vb: &VarBuilder, d_in: usize, cfg: &BertConfig) -> Self {
        let d = cfg.hidden_size;
        Self {
            dense: Linear::new(&vb.pp("dense"), d_in, d, true),
            LayerNorm: LayerNorm::new(&vb.pp("LayerNorm"), d, cfg.layer_norm_eps),
        }
    }

    pub fn forward(&self, h: Tensor<3>, residual: Tensor<3>) -> Tensor<3> {
        self.LayerNorm.forward(residual + self.dense.forward(h))
    }
}

/// The feed-forward half of a BERT or MPNet layer: `output(intermediate(x), x)`.
pub fn feed_forward(
    intermediate: &BertIntermediate,
    output: &BertOutput,
    x: Tensor<3>,
) -> Tensor<3> {
    output.forward(intermediate.forward(x.clone()), x)
}

/// `encoder.layer.{i}`.
#[derive(Module, Debug)]
pub struct BertLayer {
    pub attention: BertAttention,
    pub intermediate: BertIntermediate,
    pub output: BertOutput,
}

impl BertLayer {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        let d = cfg.hidden_size;
        let attention = vb.pp("attention");
        let self_output = attention.pp("output");
        Self {
            attention: BertAttention {
                self_: BertSelfAttention::new(&attention.pp("self"), cfg),
                output: BertSelfOutput {
                    dense: Linear::new(&self_output.pp("dense"), d, d, true),
                    LayerNorm: LayerNorm::new(&self_output.pp("LayerNorm"), d, cfg.layer_norm_eps),
                },
            },
            intermediate: BertIntermediate::new(&vb.pp("intermediate"), cfg),
            output: BertOutput::new(&vb.pp("output"), cfg.intermediate_size, cfg),
        }
    }

    /// `[batch, seq, hidden]` (or a packed batch, `[1, total, hidden]`) → same.
    pub fn forward(&self, x: Tensor<3>, bias: &Attend) -> Tensor<3> {
        let context = self.attention.self_.forward(x.clone(), bias);
        let out = &self.attention.output;
        let x = out.LayerNorm.forward(x + out.dense.forward(context));
        feed_forward(&self.intermediate, &self.output, x)
    }

    fn linears(&self) -> [&Linear; 6] {
        let a = &self.attention;
        [
            &a.self_.query,
            &a.self_.key,
            &a.self_.value,
            &a.output.dense,
            &self.intermediate.dense,
            &self.output.dense,
        ]
    }
}

/// `encoder`: the layers.
#[derive(Module, Debug)]
pub struct BertEncoder {
    pub layer: Vec<BertLayer>,
}

/// `BertModel` without its pooler: `embeddings` and `encoder`.
#[derive(Module, Debug)]
pub struct BertModel {
    pub embeddings: BertEmbeddings,
    pub encoder: BertEncoder,
}

impl BertModel {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        Self {
            embeddings: BertEmbeddings::new(&vb.pp("embeddings"), cfg, Family::Bert),
            encoder: BertEncoder {
                layer: (0..cfg.num_hidden_layers)
                    .map(|i| BertLayer::new(&vb.pp("encoder").pp("layer").pp(i), cfg))
                    .collect(),
            },
        }
    }

    /// `ids`, `mask`: `[batch, seq]` (mask 1 token, 0 padding) → the last hidden states
    /// `[batch, seq, hidden]`.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<3> {
        let bias = Attend::Padded(Box::new(AttentionBias::new(None, mask, false)));
        let x = self.embeddings.forward(ids);
        self.encoder.layer.iter().fold(x, |x, layer| layer.forward(x, &bias))
    }

    /// Over a packed batch: each run's ids `[count, len]` ([`Packing`]) → the last hidden
    /// states `[1, total, hidden]`, each sequence attending to itself.
    pub fn forward_packed(&self, packing: &Packing, ids: Vec<Tensor<2, Int>>) -> Tensor<3> {
        let x = self.embeddings.forward_packed(ids);
        let bias = Attend::packed(packing, |_| None, &x.device());
        self.encoder.layer.iter().fold(x, |x, layer| layer.forward(x, &bias))
    }

    /// Every int8 matrix (the word table and the Linear weights kept int8).
    pub fn int8_matrices(&self) -> impl Iterator<Item = &Int8Matrix> {
        let linears = self.encoder.layer.iter().flat_map(BertLayer::linears);
        self.embeddings.word_int8.iter().chain(linears.filter_map(|l| l.int8.as_ref()))
    }
}
