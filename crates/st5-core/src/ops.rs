//! The model's fused operations, each a dispatcher with its reference beside it: the GPU kernel
//! ([`crate::kernels`]) where one applies, else the same operation as burn tensor operations.
//! The reference is what runs on the CPU (flex), under autodiff (the trainer's loss
//! differentiates through it) and for a dtype other than f32; the unit tests below check each
//! kernel against it on the GPU. The model (`t5.rs`, `model.rs`) calls these, never the kernels.
//!
//! - [`linear`]: a Linear layer's `x · W + b` ([`kernels::matmul`], the bias included);
//! - [`rms_norm`]: T5's layer norm; [`layer_norm`]: BERT's and MPNet's, with a bias;
//! - [`activation`]: the FFN's (the GELUs fused, relu and silu as tensor operations);
//! - [`attention`], over an [`Attend`]: a padded batch's [`AttentionBias`] (T5's position bias
//!   and the padding and causal masks), or a packed batch's, one per run of equal lengths
//!   ([`pack`] and [`unpack`] move between the packed rows and a run's `[count, len, d]`);
//! - [`mean_pool`] and [`l2_normalize`]: the sentence embedding's pooling and normalisation.
//!
//! On the CPU outside autodiff, LayerNorm and the GELUs run as one host pass each
//! ([`layer_norm_host`], [`gelu_host`]). Tensor operations only, on every device: the other
//! poolings ([`max_pool`], [`mean_sqrt_len_pool`]).

use std::cell::OnceCell;

use burn::tensor::activation::{gelu, gelu_approximate, relu, silu, softmax};
use burn::tensor::{Int, Tensor};

use crate::batch::{Packing, Run};
use crate::config::Activation;
use crate::kernels;

/// Large negative added to masked attention logits. HF uses `finfo(f32).min`; any value whose
/// `exp` underflows to exactly 0 gives the same softmax, and this one cannot overflow to -inf.
const MASKED: f32 = -1e9;

/// `x W + b`: `x` `[..., d_in]`, `weight` `[d_in, d_out]`, `bias` `[d_out]` → `[..., d_out]`.
/// One fused kernel on the GPU, the bias included ([`kernels::matmul`]).
pub fn linear<const D: usize>(
    x: Tensor<D>,
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
) -> Tensor<D> {
    kernels::matmul(&x, &weight, bias.as_ref()).unwrap_or_else(|| linear_reference(x, weight, bias))
}

/// [`linear`] as tensor operations.
pub fn linear_reference<const D: usize>(
    x: Tensor<D>,
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
) -> Tensor<D> {
    // As one `[rows, d_in]` matrix (a view of a contiguous `x`): burn keeps a `[b, s, d]`
    // input batched when `s` is a multiple of 32, i.e. b small gemms, and the backward
    // pass then repacks the whole weight for each of them.
    let mut dims = x.dims();
    let [d_in, d_out] = weight.dims();
    let rows = dims[..D - 1].iter().product::<usize>();
    let x = x.reshape([rows, d_in]);
    dims[D - 1] = d_out;
    // One row is computed as two: gemm (flex's matmul) takes a matrix-vector path for a single
    // row whose arithmetic is not its kernel's on every target (in wasm with relaxed SIMD its
    // kernel fuses multiply and add, the vector path does not), and a row's bits must not depend
    // on how many rows share the product (a text alone, or a lone text's pooled vector in the
    // Dense head, against the same in a batch).
    let y = if rows == 1 {
        burn::tensor::module::linear(x.repeat_dim(0, 2), weight, bias).slice([0..1])
    } else {
        burn::tensor::module::linear(x, weight, bias)
    };
    y.reshape(dims)
}

/// T5's RMS norm, `x / sqrt(mean(x²) + eps) * weight`: `x` `[batch, seq, d]`, `weight` `[d]` →
/// `[batch, seq, d]`. One fused kernel on the GPU ([`kernels::rms_norm`]).
pub fn rms_norm(x: Tensor<3>, weight: Tensor<1>, eps: f64) -> Tensor<3> {
    kernels::rms_norm(&x, &weight, eps).unwrap_or_else(|| rms_norm_reference(x, weight, eps))
}

/// [`rms_norm`] as tensor operations: `x` `[batch, seq, d]`, `weight` `[d]` → `[batch, seq, d]`.
pub fn rms_norm_reference(x: Tensor<3>, weight: Tensor<1>, eps: f64) -> Tensor<3> {
    let variance = x.clone().powi_scalar(2).mean_dim(2);
    let d = weight.dims()[0];
    x * (variance + eps).sqrt().recip() * weight.reshape([1, 1, d])
}

/// `torch.nn.LayerNorm` over the last axis: `(x - mean) / sqrt(var + eps) * weight + bias`, the
/// variance biased (divided by `d`), in f32: `x` `[batch, seq, d]`, `weight`, `bias` `[d]` → same.
/// On the CPU outside autodiff one pass a row on the host ([`layer_norm_host`]: the tensor form
/// is nine passes over the activations); on a GPU one kernel ([`kernels::layer_norm`]);
/// elsewhere [`layer_norm_reference`].
pub fn layer_norm(x: Tensor<3>, weight: Tensor<1>, bias: Tensor<1>, eps: f64) -> Tensor<3> {
    let device = x.device();
    if !crate::device::is_gpu(&device) && !device.is_autodiff() {
        return layer_norm_host(x, weight, bias, eps);
    }
    kernels::layer_norm(&x, &weight, &bias, eps)
        .unwrap_or_else(|| layer_norm_reference(x, weight, bias, eps))
}

/// [`layer_norm`] as tensor operations.
pub fn layer_norm_reference(
    x: Tensor<3>,
    weight: Tensor<1>,
    bias: Tensor<1>,
    eps: f64,
) -> Tensor<3> {
    let d = weight.dims()[0];
    let centred = x.clone() - x.mean_dim(2);
    let variance = centred.clone().square().mean_dim(2);
    centred * (variance + eps).sqrt().recip() * weight.reshape([1, 1, d]) + bias.reshape([1, 1, d])
}

/// [`layer_norm`] over a CPU tensor's rows on the host (split over rayon's threads natively), in
/// loops that vectorise ([`wide_simd`]): the mean and the variance are sums over [`LANES`]
/// independent partial sums, where one running sum would keep them scalar (each addition
/// waiting for the last: a fifth of all-MiniLM-L6-v2's forward pass natively, before this).
pub fn layer_norm_host(x: Tensor<3>, weight: Tensor<1>, bias: Tensor<1>, eps: f64) -> Tensor<3> {
    use crate::transfer::to_host;
    let (device, dims) = (x.device(), x.dims());
    let d = dims[2].max(1);
    let mut values = to_host(x.try_into_data()).expect("a CPU tensor reads back");
    let w = to_host(weight.try_into_data()).expect("a CPU tensor reads back");
    let b = to_host(bias.try_into_data()).expect("a CPU tensor reads back");
    let eps = eps as f32;
    let rows = |rows: &mut [f32]| wide_simd(LayerNormRows { rows, d, w: &w, b: &b, eps });
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let per = (values.len() / d).div_ceil(rayon::current_num_threads()).max(8);
        values.par_chunks_mut(per * d).for_each(rows);
    }
    #[cfg(target_arch = "wasm32")]
    rows(&mut values);
    Tensor::from_data(burn::tensor::TensorData::new(values, dims), &device)
}

/// Independent partial sums in [`lane_sum`]: one AVX-512 register of f32.
pub const LANES: usize = 16;

/// `Σ f(v)` over `values` as [`LANES`] partial sums (lane `i` takes the values at `i` modulo
/// `LANES`), added in a fixed order at the end: the same bits on every target, and a loop the
/// compiler vectorises.
#[inline(always)]
pub fn lane_sum(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(rest) {
        *a += f(v);
    }
    acc.iter().sum()
}

/// A loop that [`wide_simd`] compiles twice. `run` must be `#[inline(always)]`, as must
/// everything it calls per value: only code inlined into the AVX-512 copy is compiled for it.
pub trait SimdLoop {
    type Out;
    fn run(self) -> Self::Out;
}

/// Runs `l` compiled for AVX-512 where the CPU has it (16 f32 lanes instead of SSE2's 4), else as
/// it is; in WebAssembly, SIMD128 is the module's. Only for loops of IEEE operations that are
/// exact per value (no fused multiply-add, which Rust never forms unasked), so both copies give
/// the same bits.
#[inline(always)]
pub fn wide_simd<L: SimdLoop>(l: L) -> L::Out {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        #[target_feature(enable = "avx512f")]
        unsafe fn wide<L: SimdLoop>(l: L) -> L::Out {
            l.run()
        }
        // SAFETY: the CPU has AVX-512F (detected above).
        return unsafe { wide(l) };
    }
    l.run()
}

/// [`layer_norm_host`]'s loop over whole rows of `d` values.
struct LayerNormRows<'a> {
    rows: &'a mut [f32],
    d: usize,
    w: &'a [f32],
    b: &'a [f32],
    eps: f32,
}

impl SimdLoop for LayerNormRows<'_> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        let d = self.d;
        for r in self.rows.chunks_mut(d) {
            let mean = lane_sum(r, |v| v) / d as f32;
            let var = lane_sum(r, |v| (v - mean) * (v - mean)) / d as f32;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, w), b) in r.iter_mut().zip(self.w).zip(self.b) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

/// [`gelu_host`]'s loop.
struct GeluValues<'a> {
    values: &'a mut [f32],
    tanh: bool,
}

impl SimdLoop for GeluValues<'_> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        if self.tanh {
            for v in self.values.iter_mut() {
                *v = gelu_tanh_f32(*v);
            }
        } else {
            for v in self.values.iter_mut() {
                *v = gelu_erf_f32(*v);
            }
        }
    }
}

/// An FFN activation, element-wise: `gelu` is the exact erf form (BERT's `gelu`, parity at 1e-5
/// needs it), `gelu_new` the tanh approximation (T5 v1.1's gated-gelu). On the CPU outside
/// autodiff the two GELUs run as one host loop ([`gelu_host`]): burn's flex evaluates `erf` and
/// `tanh` as several element-wise passes that made them most of a BERT forward pass
/// (all-MiniLM-L6-v2, 2 threads: 362 sentences/s with erf, 195 with tanh, 872 with relu in
/// their place). On a GPU one kernel ([`kernels::gelu`]); the reference,
/// [`activation_reference`], runs under autodiff and for relu and silu.
pub fn activation<const D: usize>(x: Tensor<D>, act: Activation) -> Tensor<D> {
    let device = x.device();
    let host = !crate::device::is_gpu(&device) && !device.is_autodiff();
    match act {
        Activation::Gelu | Activation::GeluNew if host => gelu_host(x, act == Activation::GeluNew),
        Activation::Gelu | Activation::GeluNew => kernels::gelu(&x, act == Activation::GeluNew)
            .unwrap_or_else(|| activation_reference(x, act)),
        _ => activation_reference(x, act),
    }
}

/// [`activation`] as burn's tensor operations.
pub fn activation_reference<const D: usize>(x: Tensor<D>, act: Activation) -> Tensor<D> {
    match act {
        Activation::Relu => relu(x),
        Activation::Gelu => gelu(x),
        Activation::GeluNew => gelu_approximate(x),
        Activation::Silu => silu(x),
    }
}

/// GELU over a CPU tensor's values in one pass on the host (split over rayon's threads
/// natively), branch-free f32 that the compiler vectorises ([`wide_simd`]): `x Φ(x)` with erf by Abramowitz and
/// Stegun's 7.1.26 (|error| ≤ 1.5e-7, so ≤ 7.5e-7 in GELU for |x| ≤ 10), or, for `tanh` (the
/// `gelu_new` form), `x σ(2y)`, which equals `0.5 x (1 + tanh(y))`; both over [`exp_f32`].
/// <https://personal.math.ubc.ca/~cbm/aands/page_299.htm>
pub fn gelu_host<const D: usize>(x: Tensor<D>, tanh: bool) -> Tensor<D> {
    let (device, dims) = (x.device(), x.dims());
    let mut values = crate::transfer::to_host(x.try_into_data()).expect("a CPU tensor reads back");
    let run = |values: &mut [f32]| wide_simd(GeluValues { values, tanh });
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let chunk = values.len().div_ceil(rayon::current_num_threads()).max(4096);
        values.par_chunks_mut(chunk).for_each(run);
    }
    #[cfg(target_arch = "wasm32")]
    run(&mut values);
    Tensor::from_data(burn::tensor::TensorData::new(values, dims), &device)
}

/// `x Φ(x)`, Φ from erf by Abramowitz and Stegun's 7.1.26.
#[inline(always)]
fn gelu_erf_f32(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_8, -1.453_152, 1.061_405_4];
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = z.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = ((((A[4] * t + A[3]) * t + A[2]) * t + A[1]) * t + A[0]) * t;
    // erf(|z|) = 1 - poly e^{-z²}; Φ(x) = (1 + erf(z)) / 2 without the sign's branch.
    let tail = 0.5 * poly * exp_f32(-a * a);
    let phi = if z >= 0.0 { 1.0 - tail } else { tail };
    x * phi
}

/// `0.5 x (1 + tanh(y))` with `y = √(2/π) (x + 0.044715 x³)`, as `x / (1 + e^{-2y})`.
#[inline(always)]
fn gelu_tanh_f32(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // √(2/π)
    let y = K * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_f32(-2.0 * y))
}

/// `e^x` in f32 without a library call, so that loops over it vectorise: `2^n · e^f` with
/// `n = round(x log2 e)`, `f = x - n ln 2` by Cody and Waite's two-part `ln 2` (exact in the
/// first part), so `f` in [-0.35, 0.35] keeps full precision, and `e^f` by its Taylor series to
/// degree 7 (relative error below 1e-7); clamped to [-87, 88], where f32 underflows and
/// overflows.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Round to nearest by the 1.5 · 2^23 trick: `f32::round` is a libm call on baseline x86-64
    // (no SSE4.1), which keeps the loop scalar.
    const SHIFT: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4; // 0.693359375: 9 significant bits, so n · LN2_HI is exact
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + SHIFT;
    let n = shifted - SHIFT;
    let f = (x - n * LN2_HI) - n * LN2_LO;
    const C: [f32; 8] =
        [1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0];
    let p = C.iter().rev().fold(0.0f32, |acc, &c| acc * f + c);
    // 2^n from the bits of `shifted` (1.5 · 2^23 + n, whose last mantissa bits hold n): integer
    // operations only, where `n as i32` would add a NaN and saturation check per value that
    // keeps the loop scalar. n lies in [-126, 127], so n + 127 is a normal exponent.
    let biased = shifted.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(127);
    p * f32::from_bits(biased << 23)
}

/// What an attention layer adds to its logits: T5's relative-position bias (block 0's table
/// and each pair's bucket), the keys' padding mask and, in the decoder, the causal mask. Built
/// once per stack and pass; the reference path materialises it once as `[batch|1, heads, q_len,
/// k_len]` ([`dense`](Self::dense)), the fused kernel reads the parts.
pub struct AttentionBias {
    /// `[num_buckets, heads]` and `[q_len, k_len]`; `None` for cross-attention.
    pub position: Option<(Tensor<2>, Tensor<2, Int>)>,
    /// `[batch, k_len]`: 1.0 for a token, 0.0 for padding.
    pub keys: Tensor<2>,
    pub causal: bool,
    dense: OnceCell<Tensor<4>>,
}

impl AttentionBias {
    pub fn new(
        position: Option<(Tensor<2>, Tensor<2, Int>)>,
        keys: Tensor<2>,
        causal: bool,
    ) -> Self {
        Self { position, keys, causal, dense: OnceCell::new() }
    }

    /// The whole bias `[batch|1, heads, q_len, k_len]`: table rows gathered by bucket, plus the
    /// padding mask, plus (decoder) the causal mask.
    pub fn dense(&self) -> Tensor<4> {
        self.dense
            .get_or_init(|| {
                let mask = mask_bias(self.keys.clone());
                match &self.position {
                    Some((table, buckets)) => {
                        let [q_len, k_len] = buckets.dims();
                        let heads = table.dims()[1];
                        let gathered = table
                            .clone()
                            .select(0, buckets.clone().reshape([q_len * k_len]))
                            .reshape([q_len, k_len, heads])
                            .permute([2, 0, 1])
                            .unsqueeze_dim(0);
                        let bias = gathered + mask;
                        if !self.causal {
                            return bias;
                        }
                        // Causal: position q sees keys 0..=q only.
                        let future = Tensor::<2>::ones([q_len, k_len], &self.keys.device())
                            .triu(1)
                            .mul_scalar(MASKED);
                        bias + future.unsqueeze_dims(&[0, 1])
                    }
                    None => mask,
                }
            })
            .clone()
    }
}

/// The additive attention mask `[batch, 1, 1, seq]`: 0 for tokens, a large negative for padding.
/// `mask`: `[batch, seq]` of 1.0 (token) / 0.0 (padding).
pub fn mask_bias(mask: Tensor<2>) -> Tensor<4> {
    (mask.ones_like() - mask).mul_scalar(-MASKED).neg().unsqueeze_dims(&[1, 2])
}

/// How a batch's sequences attend: over a padded batch `[batch, seq, ..]` with its bias, or over
/// a packed one `[1, total, ..]` ([`Packing`]), each run of equal lengths with its own bias (its
/// sequences attend to their own rows only, at their own length).
pub enum Attend {
    Padded(Box<AttentionBias>),
    Packed(Vec<(Run, AttentionBias)>),
}

impl Attend {
    /// A packed batch's: each run's keys all tokens, and `position(len)` (T5's or MPNet's
    /// position bias: its table and the `[len, len]` buckets), or none (BERT).
    pub fn packed(
        packing: &Packing,
        position: impl Fn(usize) -> Option<(Tensor<2>, Tensor<2, Int>)>,
        device: &burn::tensor::Device,
    ) -> Self {
        let bias = |run: &Run| {
            AttentionBias::new(position(run.len), Tensor::ones([run.count, run.len], device), false)
        };
        Attend::Packed(packing.runs.iter().map(|run| (*run, bias(run))).collect())
    }
}

/// Run `run`'s rows of a packed batch `[1, total, d]` → `[count, len, d]`.
pub fn unpack(x: &Tensor<3>, run: &Run) -> Tensor<3> {
    let d = x.dims()[2];
    x.clone().slice([0..1, run.rows()]).reshape([run.count, run.len, d])
}

/// Runs `[count, len, d]` one after another → a packed batch `[1, total, d]` ([`unpack`]'s
/// inverse).
pub fn pack(runs: Vec<Tensor<3>>) -> Tensor<3> {
    let flat = runs
        .into_iter()
        .map(|r| {
            let [count, len, d] = r.dims();
            r.reshape([1, count * len, d])
        })
        .collect();
    Tensor::cat(flat, 1)
}

/// T5 attention (no `1/sqrt(d_kv)` scaling): `q` `[batch, q_len, heads · d_kv]`, `k`, `v`
/// `[batch, k_len, heads · d_kv]` → `[batch, q_len, heads · d_kv]`, with the bias added to the
/// logits; for a packed batch (`[1, total, heads · d_kv]`) run by run. One fused kernel on the
/// GPU ([`kernels::attention`]), which reads the bias's parts.
pub fn attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    attend: &Attend,
    num_heads: usize,
    d_kv: usize,
) -> Tensor<3> {
    match attend {
        Attend::Padded(bias) => attention_padded(q, k, v, bias, num_heads, d_kv),
        Attend::Packed(runs) => pack(
            runs.iter()
                .map(|(run, bias)| {
                    let (q, k, v) = (unpack(&q, run), unpack(&k, run), unpack(&v, run));
                    attention_padded(q, k, v, bias, num_heads, d_kv)
                })
                .collect(),
        ),
    }
}

/// [`attention`] over one batch of sequences of equal length (padded or not).
fn attention_padded(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    bias: &AttentionBias,
    num_heads: usize,
    d_kv: usize,
) -> Tensor<3> {
    let position = bias.position.as_ref().map(|(table, buckets)| (table, buckets));
    kernels::attention(&q, &k, &v, position, &bias.keys, bias.causal, num_heads, d_kv)
        .unwrap_or_else(|| attention_reference(q, k, v, bias, num_heads, d_kv))
}

/// [`attention`] as tensor operations, over the materialised bias ([`AttentionBias::dense`]).
pub fn attention_reference(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    bias: &AttentionBias,
    num_heads: usize,
    d_kv: usize,
) -> Tensor<3> {
    let [b, q_len, _] = q.dims();
    let k_len = k.dims()[1];
    let heads = |t: Tensor<3>, len: usize| t.reshape([b, len, num_heads, d_kv]).swap_dims(1, 2);
    let (q, k, v) = (heads(q, q_len), heads(k, k_len), heads(v, k_len));
    // No 1/sqrt(d_kv): T5 folds it into the initialisation of q.
    let scores = q.matmul(k.swap_dims(2, 3)) + bias.dense();
    let attn = softmax(scores, 3);
    attn.matmul(v).swap_dims(1, 2).reshape([b, q_len, num_heads * d_kv])
}

/// The masked mean over the sequence: `text` `[batch, seq, d]`, `mask` `[batch, seq]` (1.0
/// token, 0.0 padding) → `[batch, d]`. One fused kernel on the GPU ([`kernels::mean_pool`]).
pub fn mean_pool(text: Tensor<3>, mask: Tensor<2>) -> Tensor<2> {
    kernels::mean_pool(&text, &mask).unwrap_or_else(|| mean_pool_reference(text, mask))
}

/// [`mean_pool`] as tensor operations.
pub fn mean_pool_reference(text: Tensor<3>, mask: Tensor<2>) -> Tensor<2> {
    let [b, _, d] = text.dims();
    let summed = (text * mask.clone().unsqueeze_dim(2)).sum_dim(1).reshape([b, d]);
    // sentence-transformers clamps the count at 1e-9; every text has at least `</s>`.
    summed / mask.sum_dim(1).clamp_min(1e-9)
}

/// The element-wise maximum over the tokens: `text` `[batch, seq, d]`, `mask` `[batch, seq]` →
/// `[batch, d]`. Padding is set to -1e9 first, as sentence-transformers' `Pooling` does.
pub fn max_pool(text: Tensor<3>, mask: Tensor<2>) -> Tensor<2> {
    let [b, _, d] = text.dims();
    let mask = mask.unsqueeze_dim::<3>(2);
    let padding = (mask.ones_like() - mask.clone()).mul_scalar(-1e9);
    (text * mask + padding).max_dim(1).reshape([b, d])
}

/// The sum over the tokens divided by the square root of their count (sentence-transformers'
/// `mean_sqrt_len_tokens`): `text` `[batch, seq, d]`, `mask` `[batch, seq]` → `[batch, d]`.
pub fn mean_sqrt_len_pool(text: Tensor<3>, mask: Tensor<2>) -> Tensor<2> {
    let [b, _, d] = text.dims();
    let summed = (text * mask.clone().unsqueeze_dim(2)).sum_dim(1).reshape([b, d]);
    summed / mask.sum_dim(1).clamp_min(1e-9).sqrt()
}

/// `x / max(‖x‖₂, 1e-12)` per row, as `torch.nn.functional.normalize`. `[n, dim]` → same.
/// One fused kernel on the GPU ([`kernels::l2_normalize`]).
pub fn l2_normalize(x: Tensor<2>) -> Tensor<2> {
    kernels::l2_normalize(&x).unwrap_or_else(|| l2_normalize_reference(x))
}

/// [`l2_normalize`] as tensor operations (the trainer's loss differentiates through it).
pub fn l2_normalize_reference(x: Tensor<2>) -> Tensor<2> {
    // `square`: the value of `powi_scalar(2)`, with the plain `2x` gradient (the trainer's loss
    // normalises with this function too).
    let norm = x.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
    x / norm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::wgpu_for_tests;
    use burn::tensor::{Device, Int, TensorData};
    use st5_format::rng::Rng;

    /// The wgpu device (lavapipe in CI), or `None`, reported as skipped, when `ST5_SKIP_WGPU=1`,
    /// as the integration tests do.
    fn gpu() -> Option<Device> {
        wgpu_for_tests()
    }

    fn random<const D: usize>(shape: [usize; D], rng: &mut Rng, device: &Device) -> Tensor<D> {
        let n = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|_| (rng.unit() * 4.0 - 2.0) as f32).collect();
        Tensor::from_data(TensorData::new(values, shape), device)
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    /// Row counts that do and do not fill a 4-row tile, a vector of output columns, with and
    /// without a bias, and widths the kernel declines (not a multiple of 4).
    #[test]
    fn matmul_matches_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(13);
        for (m, k, n) in [(1, 1, 4), (5, 7, 8), (64, 384, 1024), (13, 33, 12), (3, 5, 6)] {
            for with_bias in [false, true] {
                let x = random([m, k], &mut rng, &device);
                let w = random([k, n], &mut rng, &device);
                let bias = with_bias.then(|| random([n], &mut rng, &device));
                let reference = values(linear_reference(x.clone(), w.clone(), bias.clone()));
                match kernels::matmul(&x, &w, bias.as_ref()) {
                    Some(fused) => {
                        let diff = max_diff(&values(fused), &reference);
                        assert!(diff <= 1e-4, "[{m}, {k}] · [{k}, {n}] bias {with_bias}: {diff}");
                    }
                    None => assert!(n % 4 != 0, "[{m}, {k}] · [{k}, {n}] was declined"),
                }
            }
        }
        // A 3-D input is a batch of rows.
        let x = random([2, 3, 8], &mut rng, &device);
        let w = random([8, 4], &mut rng, &device);
        let fused = values(kernels::matmul(&x, &w, None).expect("f32 on the GPU"));
        let diff = max_diff(&fused, &values(x.matmul(w.unsqueeze_dim(0))));
        assert!(diff <= 1e-5, "[2, 3, 8] · [8, 4]: {diff}");
    }

    #[test]
    fn rms_norm_matches_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(7);
        for (b, s, d) in [(1, 1, 8), (3, 5, 384), (2, 17, 33)] {
            let x = random([b, s, d], &mut rng, &device);
            let w = random([d], &mut rng, &device);
            let fused = kernels::rms_norm(&x, &w, 1e-6).expect("f32 on the GPU takes the kernel");
            let reference = rms_norm_reference(x, w, 1e-6);
            let diff = max_diff(&values(fused), &values(reference));
            assert!(diff <= 1e-5, "[{b}, {s}, {d}]: {diff}");
        }
    }

    /// The LayerNorm kernel against its tensor reference: widths below and above a vector, an
    /// offset mean (which a one-pass variance would lose), BERT's and MPNet's epsilons.
    #[test]
    fn layer_norm_kernel_matches_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(11);
        for (b, s, d, eps) in
            [(1, 1, 1, 1e-12), (2, 3, 8, 1e-12), (3, 5, 384, 1e-5), (2, 17, 33, 0.5)]
        {
            let x = random([b, s, d], &mut rng, &device).mul_scalar(3.0).add_scalar(1.5);
            let (w, bias) = (random([d], &mut rng, &device), random([d], &mut rng, &device));
            let fused = kernels::layer_norm(&x, &w, &bias, eps).expect("f32 on the GPU");
            let diff = max_diff(&values(fused), &values(layer_norm_reference(x, w, bias, eps)));
            assert!(diff <= 1e-5, "[{b}, {s}, {d}] eps {eps}: {diff:e}");
        }
    }

    /// Both GELU kernels against burn's `gelu` and `gelu_approximate` on the GPU, over the range
    /// a feed-forward's pre-activations take, and a count the kernel declines (not a multiple of
    /// 4).
    #[test]
    fn gelu_kernels_match_burns() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(5);
        for tanh in [false, true] {
            let x = random([2, 7, 1536], &mut rng, &device).mul_scalar(3.0);
            let act = if tanh { Activation::GeluNew } else { Activation::Gelu };
            let fused = kernels::gelu(&x, tanh).expect("f32 on the GPU");
            let diff = max_diff(&values(fused), &values(activation_reference(x, act)));
            assert!(diff <= 1e-5, "tanh {tanh}: {diff:e}");
        }
        assert!(kernels::gelu(&random([3, 5], &mut rng, &device), false).is_none());
    }

    /// The host LayerNorm against its tensor reference.
    #[test]
    fn host_layer_norm_matches_the_reference() {
        let device = Device::flex();
        let mut rng = Rng(7);
        for (b, s, d, eps) in
            [(1, 1, 1, 1e-12), (2, 3, 8, 1e-12), (3, 5, 384, 1e-5), (1, 2, 7, 0.5)]
        {
            let x = random([b, s, d], &mut rng, &device).mul_scalar(3.0).add_scalar(1.5);
            let (w, bias) = (random([d], &mut rng, &device), random([d], &mut rng, &device));
            let got = values(layer_norm_host(x.clone(), w.clone(), bias.clone(), eps));
            let want = values(layer_norm_reference(x, w, bias, eps));
            let err = max_diff(&got, &want);
            assert!(err <= 1e-5, "[{b}, {s}, {d}] eps {eps}: {err:e}");
        }
    }

    /// `lane_sum` over lengths around its lane count: within f32 rounding of the f64 sum, and
    /// exactly the fixed-order partial sums it documents.
    #[test]
    fn lane_sums_are_partial_sums_in_a_fixed_order() {
        let mut rng = Rng::new(11);
        for len in [0, 1, LANES - 1, LANES, LANES + 1, 384, 1000] {
            let v: Vec<f32> = (0..len).map(|_| (rng.unit() * 20.0 - 10.0) as f32).collect();
            let got = lane_sum(&v, |x| x * x);
            let exact: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
            assert!((f64::from(got) - exact).abs() <= 1e-5 * exact.max(1.0), "{len}: {got}");
            let mut lanes = [0f32; LANES];
            for (i, &x) in v.iter().enumerate() {
                lanes[i % LANES] += x * x;
            }
            assert_eq!(got, lanes.iter().sum::<f32>(), "{len}: not the documented order");
        }
    }

    /// The host GELUs against burn's on the same values (both forms), `exp_f32` against `exp`,
    /// and the other poolings against their definitions on a padded batch.
    #[test]
    fn host_gelus_match_burns() {
        for x in [-87.0f32, -20.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 10.0, 50.0, 88.0] {
            let (got, want) = (exp_f32(x), x.exp());
            assert!(((got - want) / want).abs() <= 3e-7, "exp({x}): {got} vs {want}");
        }
        let device = Device::flex();
        let mut v: Vec<f32> = (-800..=800).map(|i| i as f32 / 64.0).collect();
        v.extend([0.0, -0.0, 1e-8, -1e-8, 40.0, -40.0]);
        let n = v.len();
        let x = Tensor::<1>::from_data(TensorData::new(v, [n]), &device);
        for (act, tanh) in [(Activation::Gelu, false), (Activation::GeluNew, true)] {
            let want = values(activation_reference(x.clone(), act));
            let got = values(gelu_host(x.clone(), tanh));
            let err = max_diff(&got, &want);
            assert!(err <= 2e-6, "{act:?}: host GELU differs by {err:e}");
            // The vectorised loop (AVX-512 where the CPU has it) gives the scalar function's bits.
            let scalar = if tanh { gelu_tanh_f32 } else { gelu_erf_f32 };
            let one_by_one: Vec<f32> =
                values(x.clone()).into_iter().map(|v| std::hint::black_box(scalar)(v)).collect();
            assert!(got == one_by_one, "{act:?}: vectorised GELU differs from the scalar one");
            assert_eq!(values(activation(x.clone(), act)), got, "{act:?}: dispatch on flex");
        }
        let text = Tensor::<3>::from_data(
            TensorData::new(vec![1.0f32, -2., 3., 4., -5., 6., 7., 8., 9., 0., 0., 0.], [2, 3, 2]),
            &device,
        );
        let mask = Tensor::<2>::from_data(
            TensorData::new(vec![1.0f32, 1., 1., 1., 1., 0.], [2, 3]),
            &device,
        );
        assert_eq!(values(max_pool(text.clone(), mask.clone())), [3.0, 6.0, 9.0, 8.0]);
        let sqrt_len = values(mean_sqrt_len_pool(text, mask));
        let want = [
            (1.0 + 3.0 - 5.0) / 3f32.sqrt(),
            (-2.0 + 4.0 + 6.0) / 3f32.sqrt(),
            16.0 / 2f32.sqrt(),
            8.0 / 2f32.sqrt(),
        ];
        assert!(max_diff(&sqrt_len, &want) <= 1e-6, "{sqrt_len:?}");
    }

    #[test]
    fn pooling_and_l2_normalisation_match_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(5);
        // (batch, seq, d, padded positions per row); a zero row checks the 1e-12 clamp.
        for (b, s, d, padded) in
            [(1, 1, 4, vec![0]), (3, 9, 384, vec![0, 4, 8]), (2, 6, 7, vec![5, 1])]
        {
            let x = random([b, s, d], &mut rng, &device);
            let mask: Vec<f32> = padded
                .iter()
                .flat_map(|&p| (0..s).map(move |t| if t < s - p { 1.0 } else { 0.0 }))
                .collect();
            let mask = Tensor::<2>::from_data(TensorData::new(mask, [b, s]), &device);
            let fused = kernels::mean_pool(&x, &mask).expect("f32 on the GPU");
            // The reference on the CPU.
            let cpu = Device::flex();
            let reference = values(mean_pool_reference(
                Tensor::from_data(x.to_data(), &cpu),
                Tensor::from_data(mask.to_data(), &cpu),
            ));
            let diff = max_diff(&values(fused.clone()), &reference);
            assert!(diff <= 1e-5, "mean pool [{b}, {s}, {d}]: {diff}");

            let rows = Tensor::cat(vec![fused.clone(), fused.zeros_like().slice([0..1, 0..d])], 0);
            let normalised = kernels::l2_normalize(&rows).expect("f32 on the GPU");
            let reference = l2_normalize_reference(rows);
            let diff = max_diff(&values(normalised), &values(reference));
            assert!(diff <= 1e-6, "l2 [{b}, {d}]: {diff}");
        }
    }

    /// Every shape and mask the encoder and decoder give it: padding, a cross-attention source of
    /// another length without position bias, and the decoder's causal mask.
    #[test]
    fn attention_matches_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(11);
        // (batch, q_len, k_len, heads, d_kv, position bias, causal, padded keys per row)
        let cases = [
            (1, 1, 1, 1, 4, true, false, vec![0]),
            (2, 7, 7, 3, 8, true, false, vec![0, 3]),
            (3, 12, 12, 6, 64, true, false, vec![5, 0, 11]),
            (2, 5, 9, 2, 16, false, false, vec![0, 4]),
            (2, 6, 6, 2, 8, true, true, vec![0, 0]),
        ];
        for (b, q_len, k_len, heads, d_kv, position, causal, padded) in cases {
            let inner = heads * d_kv;
            let q = random([b, q_len, inner], &mut rng, &device);
            let k = random([b, k_len, inner], &mut rng, &device);
            let v = random([b, k_len, inner], &mut rng, &device);
            let keys: Vec<f32> = padded
                .iter()
                .flat_map(|&p| (0..k_len).map(move |j| if j < k_len - p { 1.0 } else { 0.0 }))
                .collect();
            let keys = Tensor::<2>::from_data(TensorData::new(keys, [b, k_len]), &device);
            let position = position.then(|| {
                let table = random([8, heads], &mut rng, &device);
                let buckets: Vec<i32> = (0..q_len * k_len).map(|_| rng.below(8) as i32).collect();
                let buckets = TensorData::new(buckets, [q_len, k_len]);
                (table, Tensor::<2, Int>::from_data(buckets, &device))
            });
            let bias = AttentionBias::new(position, keys, causal);
            let position = bias.position.as_ref().map(|(table, buckets)| (table, buckets));
            let fused = kernels::attention(&q, &k, &v, position, &bias.keys, causal, heads, d_kv)
                .expect("f32 on the GPU");
            let reference = attention_reference(q, k, v, &bias, heads, d_kv);
            let diff = max_diff(&values(fused), &values(reference));
            let case = format!("b {b}, q {q_len}, k {k_len}, heads {heads}, d_kv {d_kv}");
            assert!(diff <= 1e-5, "{case}: {diff}");
        }
    }

    /// The CPU and autodiff tensors take the reference: the kernels are for GPU inference only.
    #[test]
    fn cpu_and_autodiff_tensors_are_declined() {
        let device = Device::flex();
        let mut rng = Rng::new(3);
        let x = random([1, 2, 4], &mut rng, &device);
        let w = random([4], &mut rng, &device);
        assert!(kernels::rms_norm(&x, &w, 1e-6).is_none());
        if let Some(gpu) = gpu() {
            let trainer = gpu.autodiff();
            let x = random([1, 2, 4], &mut rng, &trainer).require_grad();
            let w = random([4], &mut rng, &trainer);
            assert!(
                kernels::rms_norm(&x, &w, 1e-6).is_none(),
                "an autodiff tensor took the kernel"
            );
        }
    }
}
