//! The Linear layers' matrix product and bias, register-tiled: one unit per 4 rows × one vector
//! of columns.

use burn::tensor::DType::F32;
use burn::tensor::Tensor;
use burn_cubecl::CubeBackend;

use super::{bias_arg, gpu, output, product_shape};
use cube::matmul_kernel;

/// The kernel, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// One unit per 4 rows × one vector of `N` columns of `out = a · b (+ bias)`, accumulated
    /// in registers over `k`, the bias added last (as the reference adds it to the product): each
    /// `b` vector read serves 4 rows, each `a` value `N` columns. `a`: `[m, k]`; `b`: `[k, n]`;
    /// `bias`: `[n]` (unread without `has_bias`); `out`: `[m, n]`, row-major, `n` a multiple of
    /// `N`. `units` = ⌈m / 4⌉ · `n_vec`. Rows past the edge are read clamped and not written.
    #[cube(launch)]
    pub fn matmul_kernel<N: Size>(
        a: &Tensor<f32>,
        b: &Tensor<Vector<f32, N>>,
        bias: &Tensor<Vector<f32, N>>,
        out: &mut Tensor<Vector<f32, N>>,
        units: usize,
        m: usize,
        k: usize,
        n_vec: usize,
        #[comptime] has_bias: bool,
    ) {
        let unit = ABSOLUTE_POS;
        if unit >= units {
            terminate!();
        }
        let r0 = (unit / n_vec) * 4;
        let c = unit % n_vec;
        let a0 = r0 * k;
        let a1 = min(r0 + 1, m - 1) * k;
        let a2 = min(r0 + 2, m - 1) * k;
        let a3 = min(r0 + 3, m - 1) * k;
        let mut acc0 = Vector::<f32, N>::new(f32::new(0.0));
        let mut acc1 = Vector::<f32, N>::new(f32::new(0.0));
        let mut acc2 = Vector::<f32, N>::new(f32::new(0.0));
        let mut acc3 = Vector::<f32, N>::new(f32::new(0.0));
        for kk in 0..k {
            let bv = b[kk * n_vec + c];
            acc0 += bv * Vector::new(a[a0 + kk]);
            acc1 += bv * Vector::new(a[a1 + kk]);
            acc2 += bv * Vector::new(a[a2 + kk]);
            acc3 += bv * Vector::new(a[a3 + kk]);
        }
        if has_bias {
            let bv = bias[c];
            acc0 += bv;
            acc1 += bv;
            acc2 += bv;
            acc3 += bv;
        }
        out[r0 * n_vec + c] = acc0;
        if r0 + 1 < m {
            out[(r0 + 1) * n_vec + c] = acc1;
        }
        if r0 + 2 < m {
            out[(r0 + 2) * n_vec + c] = acc2;
        }
        if r0 + 3 < m {
            out[(r0 + 3) * n_vec + c] = acc3;
        }
    }
}

/// `x · w + bias` for `x` `[..., k]`, `w` `[k, n]` and `bias` `[n]` → `[..., n]` (a Linear), in
/// one register-tiled kernel. `None` where the reference must run, or `n` is not a multiple of 4.
///
/// Why not burn's matmul: without autotune (which would compile and time every variant before the
/// first vector) burn runs one general tiled kernel, which on SwiftShader took 6× as long as this
/// one for st5-mini's shapes. Both read `b` in whole vectors and `a` as broadcasts.
pub fn matmul<const D: usize>(
    x: &Tensor<D>,
    w: &Tensor<2>,
    bias: Option<&Tensor<1>>,
) -> Option<Tensor<D>> {
    const VECTOR: usize = 4;
    let [k, n] = w.dims();
    let (m, shape) = product_shape(x.dims(), n);
    if m == 0 || k == 0 || n % VECTOR != 0 {
        return None;
    }
    let (xc, wc) = (gpu(x, F32)?, gpu(w, F32)?);
    let bc = bias_arg(bias, &wc)?;
    let units = m.div_ceil(4) * (n / VECTOR);
    let (out, count, dim) = output(&xc, shape, units);
    matmul_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        VECTOR,
        xc.into_tensor_arg(),
        wc.into_tensor_arg(),
        bc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        m,
        k,
        n / VECTOR,
        bias.is_some(),
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}
