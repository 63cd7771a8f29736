//! Fused GPU kernels for the forward pass of every family (cubecl: WGSL on WebGPU, wgpu
//! natively), one file per kernel family.
//!
//! burn runs T5's RMS norm as 7 kernels (square, mean, add, sqrt, recip, two products) and
//! self-attention as about 12 (head copies, two batched matmuls, bias and mask adds, softmax's
//! max, sub, exp, sum and div). Each distinct kernel is a pipeline the browser compiles before
//! the first vector, and each launch is a dispatch on every forward pass, so both cost time before
//! and during every embedding. Here each of these is one kernel:
//! - [`rms_norm`], [`layer_norm`] and [`l2_normalize`] (`norm.rs`), [`mean_pool`] (`pool.rs`),
//!   [`gelu`] (`activation.rs`, both forms);
//! - [`attention`] (`attention.rs`): scores, T5's bucketed position bias, the padding and causal
//!   masks, softmax and the weighted sum of values, reading the query, key and value projections
//!   in place, `[batch, seq, heads · d_kv]`, and writing the output in the layout the `o`
//!   projection reads;
//! - [`matmul`] (`matmul.rs`): the Linear layers' matrix product and bias, register-tiled (see
//!   there for why);
//! - [`matmul_int8`] and [`embedding_int8`] (`int8.rs`): the same product (and bias) and the
//!   embedding lookup reading int8 weights, packed four codes to a word ([`pack_codes`]),
//!   dequantized in registers.
//!
//! st5-mini's forward pass on WebGPU went from 35 pipelines and 105 dispatches to 9 and 31.
//!
//! This is the lowest layer: it takes plain tensors and parameters and knows nothing of the
//! model. Each function returns `None` where its kernel does not apply: on the CPU (flex), under
//! autodiff (the trainer) and for a dtype other than f32. [`crate::ops`] (for the int8 kernels,
//! [`crate::int8`]) then runs the reference beside it, and its unit tests check each kernel
//! against that reference on the GPU.

use burn::tensor::kind::Basic;
use burn::tensor::{BackendPrimitive, DType, Shape, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::CubeCount;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

mod activation;
mod attention;
mod int8;
mod matmul;
mod norm;
mod pool;

pub use activation::gelu;
pub use attention::attention;
pub use int8::{CODES_PER_WORD, embedding_int8, matmul_int8, pack_codes};
pub use matmul::matmul;
pub use norm::{l2_normalize, layer_norm, rms_norm};
pub use pool::mean_pool;

/// The contiguous GPU tensor under `t` if it holds `dtype` (f32 values, i32 ids and packed
/// codes), or `None` on the CPU, under autodiff or for another dtype (the caller then runs the
/// reference).
fn gpu<const D: usize, K>(t: &Tensor<D, K>, dtype: DType) -> Option<CubeTensor>
where
    K: Basic + BackendPrimitive<CubeBackend, Primitive = CubeTensor>,
{
    let t = t.clone().try_into_primitive::<CubeBackend>().ok()?;
    (t.dtype == dtype).then(|| contiguous(t))
}

/// A product's rows and output shape: `m`, the product of `x`'s leading dimensions (`[..., k]`
/// read as `[m, k]`), and `x`'s shape with its last dimension replaced by `n`.
fn product_shape<const D: usize>(mut x: [usize; D], n: usize) -> (usize, [usize; D]) {
    let m = x[..D - 1].iter().product();
    x[D - 1] = n;
    (m, x)
}

/// A product's bias for a kernel argument: the GPU tensor under `bias`, or where there is none
/// any bound buffer (`like`: the kernel is compiled without the bias and never reads it).
/// `None` where a bias is given but cannot be read on the GPU (the caller runs the reference).
fn bias_arg(bias: Option<&Tensor<1>>, like: &CubeTensor) -> Option<CubeTensor> {
    match bias {
        Some(b) => gpu(b, DType::F32),
        None => Some(like.clone()),
    }
}

fn contiguous(t: CubeTensor) -> CubeTensor {
    if t.is_contiguous() { t } else { into_contiguous(t) }
}

/// An empty f32 output on `like`'s device, and the launch shape for `units` units (one unit per
/// row, tile or element) in cubes of the device's preferred size.
fn output<const D: usize>(
    like: &CubeTensor,
    shape: [usize; D],
    units: usize,
) -> (CubeTensor, CubeCount, CubeDim) {
    let out =
        empty_device_dtype(like.client.clone(), like.device.clone(), Shape::new(shape), DType::F32);
    let units = units.max(1);
    let dim = CubeDim::new(&like.client, units);
    (out, calculate_cube_count_elemwise(&like.client, units, dim), dim)
}
