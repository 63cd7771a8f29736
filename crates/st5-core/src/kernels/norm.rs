//! Row normalisations, one unit per row: T5's RMS norm, BERT's and MPNet's LayerNorm (with a
//! bias), and the L2 normalisation of the sentence embeddings.

use burn::tensor::DType::F32;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;

use super::{bias_arg, gpu, output};
use cube::{l2_normalize_kernel, norm_kernel};

/// The kernels, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// One unit per row: T5's RMS norm, `out = x · (mean(x²) + eps)^-½ · weight`, or with
    /// `centred` `torch.nn.LayerNorm`, `(x - mean) · (var + eps)^-½ · weight + bias` with the
    /// variance biased (÷ d); in the references' order: the mean, then the mean of the (centred)
    /// squares. `x`, `out`: `[rows, d]`; `weight`, `bias`: `[d]` (`bias` unread unless
    /// `centred`).
    #[cube(launch)]
    pub fn norm_kernel(
        x: &Tensor<f32>,
        weight: &Tensor<f32>,
        bias: &Tensor<f32>,
        out: &mut Tensor<f32>,
        rows: usize,
        d: usize,
        eps: f32,
        #[comptime] centred: bool,
    ) {
        let row = ABSOLUTE_POS;
        if row >= rows {
            terminate!();
        }
        let base = row * d;
        let mut mean = f32::new(0.0);
        if centred {
            let mut sum = f32::new(0.0);
            for i in 0..d {
                sum += x[base + i];
            }
            mean = sum / f32::cast_from(d);
        }
        let mut squares = f32::new(0.0);
        for i in 0..d {
            let c = x[base + i] - mean;
            squares += c * c;
        }
        let inv = (squares / f32::cast_from(d) + eps).sqrt().recip();
        for i in 0..d {
            let mut v = (x[base + i] - mean) * inv * weight[i];
            if centred {
                v += bias[i];
            }
            out[base + i] = v;
        }
    }

    /// One unit per row: `x / max(‖x‖₂, 1e-12)`. `x`, `out`: `[rows, d]`.
    #[cube(launch)]
    pub fn l2_normalize_kernel(x: &Tensor<f32>, out: &mut Tensor<f32>, rows: usize, d: usize) {
        let row = ABSOLUTE_POS;
        if row >= rows {
            terminate!();
        }
        let base = row * d;
        let mut norm = sum_of_squares(x, base, d).sqrt();
        if norm < f32::new(1e-12) {
            norm = f32::new(1e-12);
        }
        for i in 0..d {
            out[base + i] = x[base + i] / norm;
        }
    }

    /// `Σ x[base + i]²` over `i < d`.
    #[cube]
    fn sum_of_squares(x: &Tensor<f32>, base: usize, d: usize) -> f32 {
        let mut sum = f32::new(0.0);
        for i in 0..d {
            let v = x[base + i];
            sum += v * v;
        }
        sum
    }
}

/// T5's RMS norm in one kernel: `x` `[batch, seq, d]`, `weight` `[d]` → `[batch, seq, d]`.
/// `None` where the reference must run (see [`crate::kernels`]).
pub fn rms_norm(x: &Tensor<3>, weight: &Tensor<1>, eps: f64) -> Option<Tensor<3>> {
    norm(x, weight, None, eps)
}

/// `torch.nn.LayerNorm` over the last axis in one kernel: `x` `[batch, seq, d]`, `weight` and
/// `bias` `[d]` → `[batch, seq, d]`. `None` where the reference must run.
pub fn layer_norm(
    x: &Tensor<3>,
    weight: &Tensor<1>,
    bias: &Tensor<1>,
    eps: f64,
) -> Option<Tensor<3>> {
    norm(x, weight, Some(bias), eps)
}

/// [`norm_kernel`] launched over `x`'s rows: centred (LayerNorm) where there is a `bias`.
fn norm(
    x: &Tensor<3>,
    weight: &Tensor<1>,
    bias: Option<&Tensor<1>>,
    eps: f64,
) -> Option<Tensor<3>> {
    let (xc, wc) = (gpu(x, F32)?, gpu(weight, F32)?);
    let bc = bias_arg(bias, &wc)?;
    let [b, s, d] = x.dims();
    let rows = b * s;
    let (out, count, dim) = output(&xc, [b, s, d], rows);
    norm_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        xc.into_tensor_arg(),
        wc.into_tensor_arg(),
        bc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        rows,
        d,
        eps as f32,
        bias.is_some(),
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

/// L2 normalisation in one kernel: `x` `[rows, d]` → same. `None` where the reference must run.
pub fn l2_normalize(x: &Tensor<2>) -> Option<Tensor<2>> {
    let xc = gpu(x, F32)?;
    let [rows, d] = x.dims();
    let (out, count, dim) = output(&xc, [rows, d], rows);
    l2_normalize_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        xc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        rows,
        d,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}
