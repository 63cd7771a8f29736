//! Fused GPU kernels for the T5 forward pass (cubecl: WGSL on WebGPU, wgpu natively).
//!
//! burn runs T5's RMS norm as 7 kernels (square, mean, add, sqrt, recip, two products) and
//! self-attention as about 12 (head copies, two batched matmuls, bias and mask adds, softmax's
//! max, sub, exp, sum and div). Each distinct kernel is a pipeline the browser compiles before
//! the first vector, and each launch is a dispatch on every forward pass (issue 13). Here each of
//! these is one kernel:
//! - RMS norm, mean pooling and L2 normalisation;
//! - attention: scores, T5's bucketed position bias, the padding and causal masks, softmax and the
//!   weighted sum of values, reading the query, key and value projections in place, `[batch,
//!   seq, heads · d_kv]`, and writing the output in the layout the `o` projection reads;
//! - the Linear layers' matrix product, register-tiled (see [`matmul`] for why).
//!
//! st5-mini's forward pass on WebGPU went from 35 pipelines and 105 dispatches to 9 and 31.
//!
//! The tensor code in `t5.rs` and `model.rs` stays the reference: it runs on the CPU (flex),
//! under autodiff (the trainer) and for anything these kernels do not take (a dtype other than
//! f32). Each function here returns `None` in those cases, and the unit tests below check the
//! kernels against that reference on the GPU.

use burn::tensor::{DType, Shape, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use crate::t5::AttentionBias;
use cube::{
    attention_kernel, l2_normalize_kernel, matmul_kernel, mean_pool_kernel, rms_norm_kernel,
};
use cubecl::prelude::CubeCount;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

/// The kernels, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// One unit per 4 rows × one vector of `N` columns of `out = a · b`, accumulated in
    /// registers over `k`: each `b` vector read serves 4 rows, each `a` value `N` columns.
    /// `a`: `[m, k]`; `b`: `[k, n]`; `out`: `[m, n]`, row-major, `n` a multiple of `N`.
    /// `units` = ⌈m / 4⌉ · `n_vec`. Rows past the edge are read clamped and not written.
    #[cube(launch)]
    pub fn matmul_kernel<N: Size>(
        a: &Tensor<f32>,
        b: &Tensor<Vector<f32, N>>,
        out: &mut Tensor<Vector<f32, N>>,
        units: usize,
        m: usize,
        k: usize,
        n_vec: usize,
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

    /// One unit per row: `out = x · (mean(x²) + eps)^-½ · weight`, in the reference's order.
    /// `x`, `out`: `[rows, d]`; `weight`: `[d]`.
    #[cube(launch)]
    pub fn rms_norm_kernel(
        x: &Tensor<f32>,
        weight: &Tensor<f32>,
        out: &mut Tensor<f32>,
        rows: usize,
        d: usize,
        eps: f32,
    ) {
        let row = ABSOLUTE_POS;
        if row >= rows {
            terminate!();
        }
        let base = row * d;
        let inv = (sum_of_squares(x, base, d) / f32::cast_from(d) + eps).sqrt().recip();
        for i in 0..d {
            out[base + i] = x[base + i] * inv * weight[i];
        }
    }

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

    /// One attention logit: the dot product of a query and a key row of `d_kv` values.
    #[cube]
    fn logit(
        q: &Tensor<f32>,
        k: &Tensor<f32>,
        q_at: usize,
        k_at: usize,
        #[comptime] d_kv: usize,
    ) -> f32 {
        let mut s = f32::new(0.0);
        for dd in 0..d_kv {
            s += q[q_at + dd] * k[k_at + dd];
        }
        s
    }

    /// T5's position bias for one (query, key) pair and head: the table row of the pair's bucket.
    #[cube]
    fn bias(
        table: &Tensor<f32>,
        buckets: &Tensor<i32>,
        pair: usize,
        heads: usize,
        h: usize,
        #[comptime] position_bias: bool,
    ) -> f32 {
        let mut b = f32::new(0.0);
        if position_bias {
            b = table[usize::cast_from(buckets[pair]) * heads + h];
        }
        b
    }

    /// One unit per (batch, head, query): two passes over the keys (the maximum logit, then the
    /// exponentials and the weighted values), as softmax computes them.
    /// `q`: `[batch, q_len, heads · d_kv]`; `k`, `v`: `[batch, k_len, heads · d_kv]`;
    /// `table`: `[num_buckets, heads]`; `buckets`: `[q_len, k_len]`; `mask`: `[batch, k_len]`
    /// (1 token, 0 padding); `out`: like `q`.
    #[cube(launch)]
    #[allow(clippy::too_many_arguments)]
    pub fn attention_kernel(
        q: &Tensor<f32>,
        k: &Tensor<f32>,
        v: &Tensor<f32>,
        table: &Tensor<f32>,
        buckets: &Tensor<i32>,
        mask: &Tensor<f32>,
        out: &mut Tensor<f32>,
        rows: usize,
        heads: usize,
        q_len: usize,
        k_len: usize,
        #[comptime] d_kv: usize,
        #[comptime] position_bias: bool,
        #[comptime] causal: bool,
    ) {
        let row = ABSOLUTE_POS;
        if row >= rows {
            terminate!();
        }
        let i = row % q_len;
        let bh = row / q_len;
        let h = bh % heads;
        let b = bh / heads;
        let inner = heads * d_kv;
        let q_base = (b * q_len + i) * inner + h * d_kv;
        let kv_base = b * k_len * inner + h * d_kv;

        // Masked keys are skipped: the reference adds -1e9 to their logits, whose exponential is
        // exactly 0 (every text keeps at least `</s>`, so some key is always attended).
        let mut max = f32::new(-3.0e38);
        for j in 0..k_len {
            let hidden = mask[b * k_len + j] == f32::new(0.0) || (causal && j > i);
            if !hidden {
                let s = logit(q, k, q_base, kv_base + j * inner, d_kv)
                    + bias(table, buckets, i * k_len + j, heads, h, position_bias);
                if s > max {
                    max = s;
                }
            }
        }

        let mut acc = Array::<f32>::new(d_kv);
        for dd in 0..d_kv {
            acc[dd] = f32::new(0.0);
        }
        let mut sum = f32::new(0.0);
        for j in 0..k_len {
            let hidden = mask[b * k_len + j] == f32::new(0.0) || (causal && j > i);
            if !hidden {
                let s = logit(q, k, q_base, kv_base + j * inner, d_kv)
                    + bias(table, buckets, i * k_len + j, heads, h, position_bias);
                let e = (s - max).exp();
                sum += e;
                for dd in 0..d_kv {
                    acc[dd] += e * v[kv_base + j * inner + dd];
                }
            }
        }
        for dd in 0..d_kv {
            out[q_base + dd] = acc[dd] / sum;
        }
    }
}

/// The contiguous f32 GPU tensor under `t`, or `None` on the CPU, under autodiff or for another
/// dtype (the caller then runs the reference).
fn gpu_f32<const D: usize>(t: &Tensor<D>) -> Option<CubeTensor> {
    let t = t.clone().try_into_primitive::<CubeBackend>().ok()?;
    (t.dtype == DType::F32).then(|| contiguous(t))
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

/// T5's RMS norm in one kernel: `x` `[batch, seq, d]`, `weight` `[d]` → `[batch, seq, d]`.
/// `None` where the reference must run (see the module docs).
pub fn rms_norm(x: &Tensor<3>, weight: &Tensor<1>, eps: f64) -> Option<Tensor<3>> {
    let (xc, wc) = (gpu_f32(x)?, gpu_f32(weight)?);
    let [b, s, d] = x.dims();
    let rows = b * s;
    let (out, count, dim) = output(&xc, [b, s, d], rows);
    rms_norm_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        xc.into_tensor_arg(),
        wc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        rows,
        d,
        eps as f32,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

/// `x · w` for `x` `[..., k]` and `w` `[k, n]` → `[..., n]` (a Linear without bias), in one
/// register-tiled kernel. `None` where the reference must run, or `n` is not a multiple of 4.
///
/// Why not burn's matmul: without autotune (which would compile and time every variant before the
/// first vector) burn runs one general tiled kernel, which on SwiftShader took 6× as long as this
/// one for st5-mini's shapes. Both read `b` in whole vectors and `a` as broadcasts.
pub fn matmul<const D: usize>(x: &Tensor<D>, w: &Tensor<2>) -> Option<Tensor<D>> {
    const VECTOR: usize = 4;
    let [k, n] = w.dims();
    let mut shape = x.dims();
    let m = shape[..D - 1].iter().product::<usize>();
    if m == 0 || k == 0 || n % VECTOR != 0 {
        return None;
    }
    let (xc, wc) = (gpu_f32(x)?, gpu_f32(w)?);
    shape[D - 1] = n;
    let units = m.div_ceil(4) * (n / VECTOR);
    let (out, count, dim) = output(&xc, shape, units);
    matmul_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        VECTOR,
        xc.into_tensor_arg(),
        wc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        m,
        k,
        n / VECTOR,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

/// Mean pooling in one kernel: `x` `[batch, seq, d]`, `mask` `[batch, seq]` (1 token, 0
/// padding) → `[batch, d]`. `None` where the reference must run (see the module docs).
pub fn mean_pool(x: &Tensor<3>, mask: &Tensor<2>) -> Option<Tensor<2>> {
    let (xc, mc) = (gpu_f32(x)?, gpu_f32(mask)?);
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

/// L2 normalisation in one kernel: `x` `[rows, d]` → same. `None` where the reference must run.
pub fn l2_normalize(x: &Tensor<2>) -> Option<Tensor<2>> {
    let xc = gpu_f32(x)?;
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

/// T5 attention in one kernel (no `1/sqrt(d_kv)` scaling): `q` `[batch, q_len, heads · d_kv]`,
/// `k`, `v` `[batch, k_len, heads · d_kv]` → `[batch, q_len, heads · d_kv]`, with `bias`'s parts
/// (position table and buckets, key mask, causal flag) read in the kernel.
/// `None` where the reference must run (see the module docs).
pub fn attention(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    bias: &AttentionBias,
    heads: usize,
    d_kv: usize,
) -> Option<Tensor<3>> {
    let (qc, kc, vc, mc) = (gpu_f32(q)?, gpu_f32(k)?, gpu_f32(v)?, gpu_f32(&bias.keys)?);
    let [b, q_len, inner] = q.dims();
    let k_len = k.dims()[1];
    let (table, buckets) = match &bias.position {
        Some((table, buckets)) => {
            let buckets = contiguous(buckets.clone().try_into_primitive::<CubeBackend>().ok()?);
            (gpu_f32(table)?, (buckets.dtype == DType::I32).then_some(buckets)?)
        }
        // Unread (the kernel is compiled without the bias): any bound buffers do.
        None => (
            mc.clone(),
            empty_device_dtype(mc.client.clone(), mc.device.clone(), Shape::new([1]), DType::I32),
        ),
    };
    let rows = b * heads * q_len;
    let (out, count, dim) = output(&qc, [b, q_len, inner], rows);
    attention_kernel::launch(
        &qc.client.clone(),
        count,
        dim,
        qc.into_tensor_arg(),
        kc.into_tensor_arg(),
        vc.into_tensor_arg(),
        table.into_tensor_arg(),
        buckets.into_tensor_arg(),
        mc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        rows,
        heads,
        q_len,
        k_len,
        d_kv,
        bias.position.is_some(),
        bias.causal,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceChoice, OpenDevice};
    use crate::t5::{attention_reference, rms_norm_reference};
    use burn::tensor::{Device, Int, TensorData};
    use st5_format::rng::Rng;

    /// The wgpu device (lavapipe in CI), or `None` when `ST5_SKIP_WGPU=1`, as the integration
    /// tests do.
    fn gpu() -> Option<Device> {
        if std::env::var("ST5_SKIP_WGPU").is_ok_and(|v| v == "1") {
            return None;
        }
        Some(DeviceChoice::Wgpu.device().expect("a wgpu adapter (ST5_SKIP_WGPU=1 to skip)"))
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

    /// Row counts that do and do not fill a 4-row tile, a vector of output columns, and widths the
    /// kernel declines (not a multiple of 4).
    #[test]
    fn matmul_matches_the_reference() {
        let Some(device) = gpu() else { return };
        let mut rng = Rng::new(13);
        for (m, k, n) in [(1, 1, 4), (5, 7, 8), (64, 384, 1024), (13, 33, 12), (3, 5, 6)] {
            let x = random([m, k], &mut rng, &device);
            let w = random([k, n], &mut rng, &device);
            let reference = values(x.clone().matmul(w.clone()));
            match matmul(&x, &w) {
                Some(fused) => {
                    let diff = max_diff(&values(fused), &reference);
                    assert!(diff <= 1e-4, "[{m}, {k}] · [{k}, {n}]: {diff}");
                }
                None => assert!(n % 4 != 0, "[{m}, {k}] · [{k}, {n}] was declined"),
            }
        }
        // A 3-D input is a batch of rows.
        let x = random([2, 3, 8], &mut rng, &device);
        let w = random([8, 4], &mut rng, &device);
        let fused = values(matmul(&x, &w).expect("f32 on the GPU"));
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
            let fused = rms_norm(&x, &w, 1e-6).expect("f32 on the GPU takes the kernel");
            let reference = rms_norm_reference(x, w, 1e-6);
            let diff = max_diff(&values(fused), &values(reference));
            assert!(diff <= 1e-5, "[{b}, {s}, {d}]: {diff}");
        }
    }

    #[test]
    fn pooling_and_l2_normalisation_match_the_reference() {
        use crate::model::l2_normalize_reference;
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
            let fused = mean_pool(&x, &mask).expect("f32 on the GPU");
            // model::mean_pool on the CPU: its reference body.
            let cpu = Device::flex();
            let reference = values(crate::model::mean_pool(
                Tensor::from_data(x.to_data(), &cpu),
                Tensor::from_data(mask.to_data(), &cpu),
            ));
            let diff = max_diff(&values(fused.clone()), &reference);
            assert!(diff <= 1e-5, "mean pool [{b}, {s}, {d}]: {diff}");

            let rows = Tensor::cat(vec![fused.clone(), fused.zeros_like().slice([0..1, 0..d])], 0);
            let normalised = l2_normalize(&rows).expect("f32 on the GPU");
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
            let fused = attention(&q, &k, &v, &bias, heads, d_kv).expect("f32 on the GPU");
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
        assert!(rms_norm(&x, &w, 1e-6).is_none());
        if let Some(gpu) = gpu() {
            let trainer = gpu.autodiff();
            let x = random([1, 2, 4], &mut rng, &trainer).require_grad();
            let w = random([4], &mut rng, &trainer);
            assert!(rms_norm(&x, &w, 1e-6).is_none(), "an autodiff tensor took the kernel");
        }
    }
}
