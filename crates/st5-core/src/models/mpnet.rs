//! The MPNet encoder, named and nested like Hugging Face's `modeling_mpnet.py`:
//! `embeddings.*` (no token types), `encoder.layer.{i}.attention.attn.{q,k,v,o}`,
//! `...attention.LayerNorm`, `...intermediate.dense`, `...output.{dense,LayerNorm}`, and one
//! `encoder.relative_attention_bias` table.
//!
//! MPNet is BERT's post-LayerNorm blocks (`bert.rs`'s embeddings and feed-forward are reused)
//! with positions that start after the padding id, and a relative-position bias computed once
//! with T5's bidirectional bucket function (32 buckets, distance 128: `t5.rs`'s
//! [`relative_position_bucket`](super::t5::relative_position_bucket)) and added, after the
//! `1/sqrt(d_head)` scaling, in every layer.
//! <https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/mpnet/modeling_mpnet.py>

// Field names follow the checkpoint's (`LayerNorm`) on purpose.
#![allow(non_snake_case)]

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor};

use super::bert::{BertEmbeddings, BertIntermediate, BertOutput, feed_forward, scaled_attention};
use super::layers::{LayerNorm, Linear};
use super::t5::bucket_tensor;
use crate::batch::Packing;
use crate::config::{BertConfig, Family, MPNET_BUCKETS, MPNET_MAX_DISTANCE};
use crate::int8::Int8Matrix;
use crate::ops::{Attend, AttentionBias};
use crate::weights::{Init, VarBuilder};

/// `attention.attn`: q, k, v and the output projection o, all with biases.
#[derive(Module, Debug)]
pub struct MPNetSelfAttention {
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    pub num_heads: usize,
    pub head_dim: usize,
}

/// `attention`: `LayerNorm(x + attn(x))`.
#[derive(Module, Debug)]
pub struct MPNetAttention {
    pub attn: MPNetSelfAttention,
    pub LayerNorm: LayerNorm,
}

/// `encoder.layer.{i}`.
#[derive(Module, Debug)]
pub struct MPNetLayer {
    pub attention: MPNetAttention,
    pub intermediate: BertIntermediate,
    pub output: BertOutput,
}

impl MPNetLayer {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        let d = cfg.hidden_size;
        let attn = vb.pp("attention").pp("attn");
        let linear = |name: &str| Linear::new(&attn.pp(name), d, d, true);
        Self {
            attention: MPNetAttention {
                attn: MPNetSelfAttention {
                    q: linear("q"),
                    k: linear("k"),
                    v: linear("v"),
                    o: linear("o"),
                    num_heads: cfg.num_attention_heads,
                    head_dim: cfg.head_dim(),
                },
                LayerNorm: LayerNorm::new(
                    &vb.pp("attention").pp("LayerNorm"),
                    d,
                    cfg.layer_norm_eps,
                ),
            },
            intermediate: BertIntermediate::new(&vb.pp("intermediate"), cfg),
            output: BertOutput::new(&vb.pp("output"), cfg.intermediate_size, cfg),
        }
    }

    /// `[batch, seq, hidden]` → same; `bias` holds the position bias and the padding mask.
    pub fn forward(&self, x: Tensor<3>, bias: &Attend) -> Tensor<3> {
        let a = &self.attention.attn;
        let [q, k, v] = Linear::forward_shared([&a.q, &a.k, &a.v], x.clone());
        let context = scaled_attention(q, k, v, bias, a.num_heads, a.head_dim);
        let x = self.attention.LayerNorm.forward(x + a.o.forward(context));
        feed_forward(&self.intermediate, &self.output, x)
    }

    fn linears(&self) -> [&Linear; 6] {
        let a = &self.attention.attn;
        [&a.q, &a.k, &a.v, &a.o, &self.intermediate.dense, &self.output.dense]
    }
}

/// `encoder`: the layers and the one position-bias table `[num_buckets, heads]`.
#[derive(Module, Debug)]
pub struct MPNetEncoder {
    pub layer: Vec<MPNetLayer>,
    pub relative_attention_bias: Param<Tensor<2>>,
}

/// `MPNetModel` without its pooler: `embeddings` and `encoder`.
#[derive(Module, Debug)]
pub struct MPNetModel {
    pub embeddings: BertEmbeddings,
    pub encoder: MPNetEncoder,
}

impl MPNetModel {
    pub fn new(vb: &VarBuilder, cfg: &BertConfig) -> Self {
        let encoder = vb.pp("encoder");
        let buckets = cfg.relative_attention_num_buckets.unwrap_or(MPNET_BUCKETS);
        Self {
            embeddings: BertEmbeddings::new(&vb.pp("embeddings"), cfg, Family::Mpnet),
            encoder: MPNetEncoder {
                layer: (0..cfg.num_hidden_layers)
                    .map(|i| MPNetLayer::new(&encoder.pp("layer").pp(i), cfg))
                    .collect(),
                relative_attention_bias: encoder.pp("relative_attention_bias").get(
                    [buckets, cfg.num_attention_heads],
                    "weight",
                    Init::Normal(0.02),
                ),
            },
        }
    }

    /// `ids`, `mask`: `[batch, seq]` (mask 1 token, 0 padding) → the last hidden states
    /// `[batch, seq, hidden]`.
    pub fn forward(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<3> {
        let position = self.position_bias(ids.dims()[1], &ids.device());
        let bias = Attend::Padded(Box::new(AttentionBias::new(position, mask, false)));
        let x = self.embeddings.forward(ids);
        self.encoder.layer.iter().fold(x, |x, layer| layer.forward(x, &bias))
    }

    /// Over a packed batch: each run's ids `[count, len]` ([`Packing`]) → the last hidden
    /// states `[1, total, hidden]`, each sequence attending to itself.
    pub fn forward_packed(&self, packing: &Packing, ids: Vec<Tensor<2, Int>>) -> Tensor<3> {
        let x = self.embeddings.forward_packed(ids);
        let device = x.device();
        let bias = Attend::packed(packing, |len| self.position_bias(len, &device), &device);
        self.encoder.layer.iter().fold(x, |x, layer| layer.forward(x, &bias))
    }

    /// The position table and the buckets of `seq` × `seq` positions.
    fn position_bias(&self, seq: usize, device: &Device) -> Option<(Tensor<2>, Tensor<2, Int>)> {
        let buckets = bucket_tensor(seq, seq, true, MPNET_BUCKETS, MPNET_MAX_DISTANCE, device);
        Some((self.encoder.relative_attention_bias.val(), buckets))
    }

    /// Every int8 matrix (the word table and the Linear weights kept int8).
    pub fn int8_matrices(&self) -> impl Iterator<Item = &Int8Matrix> {
        let linears = self.encoder.layer.iter().flat_map(MPNetLayer::linears);
        self.embeddings.word_int8.iter().chain(linears.filter_map(|l| l.int8.as_ref()))
    }
}
