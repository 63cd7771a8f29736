//! Mean pooling over the sequence, one unit per (row, column).

use burn::tensor::DType::F32;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;

use super::{gpu, output};
use cube::mean_pool_kernel;

/// The kernel, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// One unit per (row, column): the masked mean over the sequence, as sentence-transformers
    /// pools (the count clamped at 1e-9). `x`: `[batch, seq, d]`; `mask`: `[batch, seq]`;
    /// `out`: `[batch, d]`.
    #[cube(launch)]
    pub fn mean_pool_kernel(
        x: &Tensor<f32>,
        mask: &Tensor<f32>,
        out: &mut Tensor<f32>,
        units: usize,
        seq: usize,
        d: usize,
    ) {
        let unit = ABSOLUTE_POS;
        if unit >= units {
            terminate!();
        }
        let b = unit / d;
        let c = unit % d;
        let mut sum = f32::new(0.0);
        let mut count = f32::new(0.0);
        for t in 0..seq {
            let m = mask[b * seq + t];
            sum += x[(b * seq + t) * d + c] * m;
            count += m;
        }
        if count < f32::new(1e-9) {
            count = f32::new(1e-9);
        }
        out[unit] = sum / count;
    }
}

/// Mean pooling in one kernel: `x` `[batch, seq, d]`, `mask` `[batch, seq]` (1 token, 0
/// padding) → `[batch, d]`. `None` where the reference must run (see [`crate::kernels`]).
pub fn mean_pool(x: &Tensor<3>, mask: &Tensor<2>) -> Option<Tensor<2>> {
    let (xc, mc) = (gpu(x, F32)?, gpu(mask, F32)?);
    let [b, seq, d] = x.dims();
    let units = b * d;
    let (out, count, dim) = output(&xc, [b, d], units);
    mean_pool_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        xc.into_tensor_arg(),
        mc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        seq,
        d,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}
