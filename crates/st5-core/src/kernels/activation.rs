//! Element-wise kernels: the feed-forward's GELUs, one unit per vector of 4 values (burn runs
//! either as five or more kernels: scale, erf or tanh, add, two products).

use burn::tensor::DType::F32;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;

use super::{gpu, output};
use cube::gelu_kernel;

/// The kernel, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// One unit per vector of `out = gelu(x)`, the formulas of burn's `gelu` and
    /// `gelu_approximate`: `x · ½(1 + erf(x / √2))`, or with `tanh`,
    /// `½x(1 + tanh(√(2/π) (x + 0.044715 x³)))`. `x`, `out`: `units` vectors.
    #[cube(launch)]
    pub fn gelu_kernel<N: Size>(
        x: &Tensor<Vector<f32, N>>,
        out: &mut Tensor<Vector<f32, N>>,
        units: usize,
        #[comptime] tanh: bool,
    ) {
        let unit = ABSOLUTE_POS;
        if unit >= units {
            terminate!();
        }
        let v = x[unit];
        let half = Vector::<f32, N>::new(0.5);
        let one = Vector::<f32, N>::new(1.0);
        if tanh {
            let inner = (v + v * v * v * Vector::new(0.044_715)) * Vector::new(0.797_884_6);
            out[unit] = half * v * (one + Vector::tanh(inner));
        } else {
            out[unit] =
                v * (one + Vector::erf(v * Vector::new(std::f32::consts::FRAC_1_SQRT_2))) * half;
        }
    }
}

/// GELU in one kernel: the exact erf form, or with `tanh` the `gelu_new` approximation, over any
/// shape. `None` where the reference must run (see [`crate::kernels`]), or the value count is not
/// a multiple of 4.
pub fn gelu<const D: usize>(x: &Tensor<D>, tanh: bool) -> Option<Tensor<D>> {
    const VECTOR: usize = 4;
    let count = x.dims().iter().product::<usize>();
    if count == 0 || count % VECTOR != 0 {
        return None;
    }
    let xc = gpu(x, F32)?;
    let units = count / VECTOR;
    let (out, cubes, dim) = output(&xc, x.dims(), units);
    gelu_kernel::launch(
        &xc.client.clone(),
        cubes,
        dim,
        VECTOR,
        xc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        tanh,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}
