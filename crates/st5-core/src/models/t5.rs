//! The T5 encoder and decoder stacks, named and nested like Hugging Face's `modeling_t5.py`
//! (candle's `t5.rs` style) so that every weight name maps one to one:
//! `encoder.block.{i}.layer.0.SelfAttention.q.weight`, `...layer.1.DenseReluDense.wi_0.weight`, ...
//!
//! T5 specifics: relative-position bias owned by the first block and shared by the rest
//! (bidirectional buckets in the encoder, causal in the decoder), RMS layer norm without mean
//! subtraction or bias, and no `1/sqrt(d_kv)` attention scaling (folded into the init instead).

// Field names follow the checkpoint's (`SelfAttention`, `DenseReluDense`, ...) on purpose.
#![allow(non_snake_case)]

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::layers::{self, Linear};
use crate::batch::Packing;
use crate::config::{Activation, T5Config};
use crate::int8::Int8Matrix;
use crate::names::block_layer;
use crate::ops::{self, Attend, AttentionBias};
use crate::weights::{Init, VarBuilder};

/// RMS norm: `x / sqrt(mean(x²) + eps) * weight`, no mean subtraction, no bias, in f32.
/// <https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/t5/modeling_t5.py#L246-L270>
#[derive(Module, Debug)]
pub struct T5LayerNorm {
    /// `[d_model]`
    pub weight: Param<Tensor<1>>,
    pub eps: f64,
}

impl T5LayerNorm {
    pub fn new(vb: &VarBuilder, d_model: usize, eps: f64) -> Self {
        Self { weight: vb.get([d_model], "weight", Init::Ones), eps }
    }

    /// `[batch, seq, d_model]` → same. One fused kernel on the GPU ([`ops::rms_norm`]).
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        ops::rms_norm(x, self.weight.val(), self.eps)
    }
}

/// The feed-forward block: `wo(act(wi x))`, or gated `wo(act(wi_0 x) * wi_1 x)`. Fields are
/// named as in the checkpoint: `wi` for the plain kind, `wi_0` and `wi_1` for the gated one.
#[derive(Module, Debug)]
pub struct T5DenseActDense {
    /// Plain variants only: `[d_model, d_ff]`
    pub wi: Option<Linear>,
    /// Gated variants only, the activated half: `[d_model, d_ff]`
    pub wi_0: Option<Linear>,
    /// Gated variants only, the linear half: `[d_model, d_ff]`
    pub wi_1: Option<Linear>,
    /// `[d_ff, d_model]`
    pub wo: Linear,
    #[module(skip)]
    pub activation: Activation,
}

impl T5DenseActDense {
    pub fn new(vb: &VarBuilder, cfg: &T5Config) -> Self {
        let ff = cfg.feed_forward();
        let linear = |name: &str| Some(Linear::new(&vb.pp(name), cfg.d_model, cfg.d_ff, false));
        let (wi, wi_0, wi_1) = if ff.gated {
            (None, linear("wi_0"), linear("wi_1"))
        } else {
            (linear("wi"), None, None)
        };
        Self {
            wi,
            wi_0,
            wi_1,
            wo: Linear::new(&vb.pp("wo"), cfg.d_ff, cfg.d_model, false),
            activation: ff.activation,
        }
    }

    /// `[batch, seq, d_model]` → same
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let (h, linear) = match (&self.wi, &self.wi_0, &self.wi_1) {
            (Some(wi), ..) => (wi.forward(x), None),
            (None, Some(wi_0), Some(wi_1)) => {
                let [h, linear] = Linear::forward_shared([wi_0, wi_1], x);
                (h, Some(linear))
            }
            _ => unreachable!("new builds wi, or wi_0 and wi_1"),
        };
        let h = ops::activation(h, self.activation);
        let h = match linear {
            Some(linear) => h * linear,
            None => h,
        };
        self.wo.forward(h)
    }
}

/// `layer.{1|2}`: pre-norm feed-forward with a residual.
#[derive(Module, Debug)]
pub struct T5LayerFF {
    pub DenseReluDense: T5DenseActDense,
    pub layer_norm: T5LayerNorm,
}

impl T5LayerFF {
    pub fn new(vb: &VarBuilder, cfg: &T5Config) -> Self {
        Self {
            DenseReluDense: T5DenseActDense::new(&vb.pp("DenseReluDense"), cfg),
            layer_norm: T5LayerNorm::new(&vb.pp("layer_norm"), cfg.d_model, cfg.layer_norm_epsilon),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        x.clone() + self.DenseReluDense.forward(self.layer_norm.forward(x))
    }
}

/// T5's relative-position bucket (Raffel et al. 2020, §2.1), which MPNet uses too (`mpnet.rs`,
/// bidirectional, 32 buckets, distance 128): exact buckets for small offsets,
/// log-spaced up to `max_distance`, and in the encoder one half of the buckets per direction.
/// Computed in f32 and truncated as `torch` does, so bucket edges match bit for bit.
/// <https://github.com/huggingface/transformers/blob/v4.46.0/src/transformers/models/t5/modeling_t5.py#L390-L435>
pub fn relative_position_bucket(
    relative_position: i64,
    bidirectional: bool,
    num_buckets: usize,
    max_distance: usize,
) -> usize {
    let mut num_buckets = num_buckets as i64;
    let mut bucket = 0i64;
    let rp = if bidirectional {
        num_buckets /= 2;
        if relative_position > 0 {
            bucket += num_buckets;
        }
        relative_position.abs()
    } else {
        -relative_position.min(0)
    };
    let max_exact = num_buckets / 2;
    if rp < max_exact {
        bucket += rp;
    } else {
        let scaled = (rp as f32 / max_exact as f32).ln()
            / (max_distance as f32 / max_exact as f32).ln()
            * (num_buckets - max_exact) as f32;
        bucket += (max_exact + scaled as i64).min(num_buckets - 1);
    }
    bucket as usize
}

/// Each (query, key) pair's [`relative_position_bucket`] `[q_len, k_len]`, for query positions
/// `0..q_len` against key positions `0..k_len`: a few hundred integers, computed on the host.
pub fn bucket_tensor(
    q_len: usize,
    k_len: usize,
    bidirectional: bool,
    num_buckets: usize,
    max_distance: usize,
    device: &Device,
) -> Tensor<2, Int> {
    let buckets: Vec<i32> = (0..q_len)
        .flat_map(|q| (0..k_len).map(move |k| (q, k)))
        .map(|(q, k)| {
            relative_position_bucket(k as i64 - q as i64, bidirectional, num_buckets, max_distance)
                as i32
        })
        .collect();
    Tensor::from_data(TensorData::new(buckets, [q_len, k_len]), device)
}

/// Multi-head attention without `1/sqrt(d_kv)` scaling; the first layer of each stack also owns
/// the relative-position bias table `[num_buckets, num_heads]`.
#[derive(Module, Debug)]
pub struct T5Attention {
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    /// `[num_buckets, num_heads]`, only in block 0's self-attention.
    pub relative_attention_bias: Option<Param<Tensor<2>>>,
    pub num_heads: usize,
    pub d_kv: usize,
    pub num_buckets: usize,
    pub max_distance: usize,
    /// Encoder self-attention: true; decoder: false (causal buckets).
    pub bidirectional: bool,
}

impl T5Attention {
    pub fn new(vb: &VarBuilder, cfg: &T5Config, has_bias: bool, bidirectional: bool) -> Self {
        let inner = cfg.inner_dim();
        Self {
            q: Linear::new(&vb.pp("q"), cfg.d_model, inner, false),
            k: Linear::new(&vb.pp("k"), cfg.d_model, inner, false),
            v: Linear::new(&vb.pp("v"), cfg.d_model, inner, false),
            o: Linear::new(&vb.pp("o"), inner, cfg.d_model, false),
            relative_attention_bias: has_bias.then(|| {
                vb.pp("relative_attention_bias").get(
                    [cfg.relative_attention_num_buckets, cfg.num_heads],
                    "weight",
                    Init::Normal((cfg.d_model as f64).powf(-0.5)),
                )
            }),
            num_heads: cfg.num_heads,
            d_kv: cfg.d_kv,
            num_buckets: cfg.relative_attention_num_buckets,
            max_distance: cfg.relative_attention_max_distance,
            bidirectional,
        }
    }

    fn linears(&self) -> [&Linear; 4] {
        [&self.q, &self.k, &self.v, &self.o]
    }

    /// Each (query, key) pair's bucket `[q_len, k_len]` ([`bucket_tensor`]).
    pub fn buckets(&self, q_len: usize, k_len: usize, device: &Device) -> Tensor<2, Int> {
        bucket_tensor(q_len, k_len, self.bidirectional, self.num_buckets, self.max_distance, device)
    }

    /// `x`: `[batch, q_len, d_model]`; `kv`: `[batch, k_len, d_model]` (cross-attention) or `x`.
    /// Returns `[batch, q_len, d_model]` (a packed batch: `[1, total, d_model]`, no `kv`). One
    /// fused kernel on the GPU ([`ops::attention`]).
    pub fn forward(&self, x: Tensor<3>, kv: Option<Tensor<3>>, bias: &Attend) -> Tensor<3> {
        let [q, k, v] = match kv {
            Some(kv) => [self.q.forward(x), self.k.forward(kv.clone()), self.v.forward(kv)],
            None => Linear::forward_shared([&self.q, &self.k, &self.v], x),
        };
        let out = ops::attention(q, k, v, bias, self.num_heads, self.d_kv);
        self.o.forward(out)
    }
}

/// `layer.0`: pre-norm self-attention with a residual.
#[derive(Module, Debug)]
pub struct T5LayerSelfAttention {
    pub SelfAttention: T5Attention,
    pub layer_norm: T5LayerNorm,
}

/// `layer.1` of decoder blocks: pre-norm cross-attention over the encoder output.
#[derive(Module, Debug)]
pub struct T5LayerCrossAttention {
    pub EncDecAttention: T5Attention,
    pub layer_norm: T5LayerNorm,
}

/// One block: `layer.0` self-attention, then (decoder) `layer.1` cross-attention, then the
/// feed-forward as the last `layer.N`.
#[derive(Module, Debug)]
pub struct T5Block {
    pub self_attention: T5LayerSelfAttention,
    pub cross_attention: Option<T5LayerCrossAttention>,
    pub ff: T5LayerFF,
}

impl T5Block {
    pub fn new(vb: &VarBuilder, cfg: &T5Config, first: bool, decoder: bool) -> Self {
        // Each sub-layer lives at its `layer.N` (names.rs).
        let at = |field: &str| vb.pp(block_layer(field, decoder));
        let norm = |vb: VarBuilder| {
            T5LayerNorm::new(&vb.pp("layer_norm"), cfg.d_model, cfg.layer_norm_epsilon)
        };
        Self {
            self_attention: T5LayerSelfAttention {
                SelfAttention: T5Attention::new(
                    &at("self_attention").pp("SelfAttention"),
                    cfg,
                    first,
                    !decoder,
                ),
                layer_norm: norm(at("self_attention")),
            },
            cross_attention: decoder.then(|| T5LayerCrossAttention {
                EncDecAttention: T5Attention::new(
                    &at("cross_attention").pp("EncDecAttention"),
                    cfg,
                    false,
                    true,
                ),
                layer_norm: norm(at("cross_attention")),
            }),
            ff: T5LayerFF::new(&at("ff"), cfg),
        }
    }

    /// Every Linear layer of the block.
    fn linears(&self) -> impl Iterator<Item = &Linear> {
        let ff = &self.ff.DenseReluDense;
        let attention = self.self_attention.SelfAttention.linears().into_iter();
        let cross = self.cross_attention.iter().flat_map(|c| c.EncDecAttention.linears());
        let ff = [&ff.wi, &ff.wi_0, &ff.wi_1].into_iter().flatten().chain([&ff.wo]);
        attention.chain(cross).chain(ff)
    }

    /// `x`: `[batch, seq, d_model]` (or a packed batch, `[1, total, d_model]`); `cross`: the
    /// encoder output `[batch, src, d_model]` and its bias (the source's padding mask).
    pub fn forward(
        &self,
        x: Tensor<3>,
        self_bias: &Attend,
        cross: Option<(Tensor<3>, &Attend)>,
    ) -> Tensor<3> {
        let sa = &self.self_attention;
        let x = x.clone() + sa.SelfAttention.forward(sa.layer_norm.forward(x), None, self_bias);
        let x = match (&self.cross_attention, cross) {
            (Some(ca), Some((enc, enc_bias))) => {
                x.clone()
                    + ca.EncDecAttention.forward(ca.layer_norm.forward(x), Some(enc), enc_bias)
            }
            _ => x,
        };
        self.ff.forward(x)
    }
}

/// An encoder or decoder stack: `embed_tokens` (usually tied to `shared`), `block.{i}` and
/// `final_layer_norm`.
#[derive(Module, Debug)]
pub struct T5Stack {
    /// `[vocab_size, d_model]`; `None` when the table is kept int8 ([`embed_int8`](Self::embed_int8)).
    pub embed_tokens: Option<Param<Tensor<2>>>,
    /// The table as int8 codes with one scale per row, when the loader keeps int8 models int8.
    #[module(skip)]
    pub embed_int8: Option<Int8Matrix>,
    pub block: Vec<T5Block>,
    pub final_layer_norm: T5LayerNorm,
    pub is_decoder: bool,
}

impl T5Stack {
    pub fn new(vb: &VarBuilder, cfg: &T5Config, decoder: bool) -> Self {
        let n = if decoder { cfg.decoder_layers() } else { cfg.num_layers };
        let (embed_tokens, embed_int8) = layers::table(
            &vb.pp("embed_tokens"),
            cfg.vocab_size,
            cfg.d_model,
            "weight",
            Init::Normal(1.0),
        );
        Self {
            embed_tokens,
            embed_int8,
            block: (0..n)
                .map(|i| T5Block::new(&vb.pp("block").pp(i), cfg, i == 0, decoder))
                .collect(),
            final_layer_norm: T5LayerNorm::new(
                &vb.pp("final_layer_norm"),
                cfg.d_model,
                cfg.layer_norm_epsilon,
            ),
            is_decoder: decoder,
        }
    }

    /// `ids`: `[batch, seq]` → `[batch, seq, d_model]`
    pub fn embed(&self, ids: Tensor<2, Int>) -> Tensor<3> {
        layers::lookup(&self.embed_tokens, &self.embed_int8, ids)
    }

    /// Every int8 matrix of the stack (its table and Linear weights kept int8).
    pub fn int8_matrices(&self) -> impl Iterator<Item = &Int8Matrix> {
        let linears = self.block.iter().flat_map(T5Block::linears);
        self.embed_int8.iter().chain(linears.filter_map(|l| l.int8.as_ref()))
    }

    /// `d_model`, the table's width.
    pub fn d_model(&self) -> usize {
        layers::table_width(&self.embed_tokens, &self.embed_int8)
    }

    /// `ids`, `mask`: `[batch, seq]` (mask 1 token, 0 padding); `cross`: for the decoder, the
    /// encoder output `[batch, src, d_model]` and its mask `[batch, src]`.
    /// Returns the final-norm output `[batch, seq, d_model]`.
    pub fn forward(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2>,
        cross: Option<(Tensor<3>, Tensor<2>)>,
    ) -> Tensor<3> {
        self.forward_embeds(self.embed(ids), mask, cross)
    }

    /// As [`forward`](Self::forward) from input embeddings `x`: `[batch, seq, d_model]` (token
    /// embeddings, possibly behind soft-prompt vectors).
    pub fn forward_embeds(
        &self,
        x: Tensor<3>,
        mask: Tensor<2>,
        cross: Option<(Tensor<3>, Tensor<2>)>,
    ) -> Tensor<3> {
        let seq = x.dims()[1];
        let bias = AttentionBias::new(self.position_bias(seq, &x.device()), mask, self.is_decoder);
        let cross = cross.map(|(enc, enc_mask)| {
            (enc, Attend::Padded(Box::new(AttentionBias::new(None, enc_mask, false))))
        });
        self.blocks(
            x,
            &Attend::Padded(Box::new(bias)),
            cross.as_ref().map(|(enc, b)| (enc.clone(), b)),
        )
    }

    /// The encoder over a packed batch ([`Packing`]): input embeddings `x` `[1, total, d_model]`
    /// → the final-norm output `[1, total, d_model]`, each sequence attending to itself.
    pub fn forward_packed(&self, x: Tensor<3>, packing: &Packing) -> Tensor<3> {
        let device = x.device();
        let bias = Attend::packed(packing, |len| self.position_bias(len, &device), &device);
        self.blocks(x, &bias, None)
    }

    /// Block 0's relative-position table and the buckets of `seq` × `seq` positions.
    fn position_bias(&self, seq: usize, device: &Device) -> Option<(Tensor<2>, Tensor<2, Int>)> {
        let attention = &self.block[0].self_attention.SelfAttention;
        let table = attention.relative_attention_bias.as_ref().expect("block 0 owns the bias");
        Some((table.val(), attention.buckets(seq, seq, device)))
    }

    /// Every block, then the final norm.
    fn blocks(
        &self,
        x: Tensor<3>,
        bias: &Attend,
        cross: Option<(Tensor<3>, &Attend)>,
    ) -> Tensor<3> {
        let x = self.block.iter().fold(x, |x, block| {
            block.forward(x, bias, cross.as_ref().map(|(enc, b)| (enc.clone(), *b)))
        });
        self.final_layer_norm.forward(x)
    }
}

/// The encoder and, when needed, the decoder, at the checkpoint root (`shared.weight`,
/// `encoder.*`, `decoder.*`).
#[derive(Module, Debug)]
pub struct T5Model {
    pub encoder: T5Stack,
    pub decoder: Option<T5Stack>,
}

impl T5Model {
    pub fn new(vb: &VarBuilder, cfg: &T5Config, with_decoder: bool) -> Self {
        Self {
            encoder: T5Stack::new(&vb.pp("encoder"), cfg, false),
            decoder: with_decoder.then(|| T5Stack::new(&vb.pp("decoder"), cfg, true)),
        }
    }

    /// `ids`, `mask`: `[batch, seq]` → encoder output `[batch, seq, d_model]`
    pub fn encode(&self, ids: Tensor<2, Int>, mask: Tensor<2>) -> Tensor<3> {
        self.encoder.forward(ids, mask, None)
    }

    /// The encoder over `prompt` `[p, d_model]` (soft-prompt vectors, Lester et al. 2021, §2)
    /// followed by each text's token embeddings: `ids`, `mask` `[batch, seq]` → output
    /// `[batch, p + seq, d_model]` and the attention mask `[batch, p + seq]` (prompt positions
    /// attended, 1).
    pub fn encode_with_prompt(
        &self,
        ids: Tensor<2, Int>,
        mask: Tensor<2>,
        prompt: Tensor<2>,
    ) -> (Tensor<3>, Tensor<2>) {
        let [b, _] = ids.dims();
        let [p, d] = prompt.dims();
        let x = Tensor::cat(
            vec![prompt.unsqueeze_dim::<3>(0).expand([b, p, d]), self.encoder.embed(ids)],
            1,
        );
        let mask = Tensor::cat(vec![Tensor::<2>::ones([b, p], &mask.device()), mask], 1);
        (self.encoder.forward_embeds(x, mask.clone(), None), mask)
    }

    /// The encoder over a packed batch: each run's ids `[count, len]` ([`Packing`]), after
    /// `prompt` `[p, d_model]` when given → the output `[1, total, d_model]` and the packing it
    /// has (each sequence `p` rows longer, the prompt's first).
    pub fn encode_packed(
        &self,
        packing: &Packing,
        ids: Vec<Tensor<2, Int>>,
        prompt: Option<Tensor<2>>,
    ) -> (Tensor<3>, Packing) {
        let p = prompt.as_ref().map_or(0, |t| t.dims()[0]);
        let embeds = ids
            .into_iter()
            .map(|ids| {
                let x = self.encoder.embed(ids);
                match &prompt {
                    Some(prompt) => {
                        let [count, _, d] = x.dims();
                        let before = prompt.clone().unsqueeze_dim::<3>(0).expand([count, p, d]);
                        Tensor::cat(vec![before, x], 1)
                    }
                    None => x,
                }
            })
            .collect();
        let packing = packing.lengthened(p);
        (self.encoder.forward_packed(ops::pack(embeds), &packing), packing)
    }

    /// Runs the decoder on `decoder_ids` `[batch, tgt]` over the encoder output `[batch, src,
    /// d_model]` with its mask `[batch, src]`; returns the decoder's final-norm output
    /// `[batch, tgt, d_model]`, or `None` for an encoder-only model.
    pub fn decode(
        &self,
        decoder_ids: Tensor<2, Int>,
        encoded: Tensor<3>,
        mask: Tensor<2>,
    ) -> Option<Tensor<3>> {
        let decoder = self.decoder.as_ref()?;
        let tgt_mask = decoder_ids.clone().float().ones_like();
        Some(decoder.forward(decoder_ids, tgt_mask, Some((encoded, mask))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values printed by `T5Attention._relative_position_bucket` (transformers 5.24):
    /// exact region, log region, clamping at max_distance, and the direction split.
    #[test]
    fn buckets_match_hugging_face() {
        // (relative_position, bidirectional, num_buckets, max_distance, bucket)
        let cases = [
            (0, true, 32, 128, 0),
            (1, true, 32, 128, 17),
            (-1, true, 32, 128, 1),
            (7, true, 32, 128, 23),
            (8, true, 32, 128, 24),
            (-8, true, 32, 128, 8),
            (127, true, 32, 128, 31),
            (1000, true, 32, 128, 31),
            (-1000, true, 32, 128, 15),
            (5, false, 32, 128, 0),
            (-5, false, 32, 128, 5),
            (-16, false, 32, 128, 16),
            (-200, false, 32, 128, 31),
            (3, true, 8, 20, 6),
            (-3, true, 8, 20, 2),
            (-9, true, 8, 20, 3),
            (-17, false, 16, 64, 10),
            (40, true, 16, 64, 15),
        ];
        for (rp, bi, nb, md, want) in cases {
            assert_eq!(
                relative_position_bucket(rp, bi, nb, md),
                want,
                "rp={rp} bi={bi} nb={nb} md={md}"
            );
        }
    }
}
