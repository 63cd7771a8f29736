//! T5 attention in one kernel: scores, the bucketed position bias, the padding and causal
//! masks, softmax and the weighted sum of values.

use burn::tensor::DType::{F32, I32};
use burn::tensor::{Int, Shape, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::ops::numeric::empty_device_dtype;

use super::{gpu, output};
use cube::attention_kernel;

/// The kernels, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

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

/// T5 attention in one kernel (no `1/sqrt(d_kv)` scaling): `q` `[batch, q_len, heads · d_kv]`,
/// `k`, `v` `[batch, k_len, heads · d_kv]` → `[batch, q_len, heads · d_kv]`. Read in the kernel:
/// `position`, T5's bias table `[num_buckets, heads]` and each (query, key) pair's bucket
/// `[q_len, k_len]` (`None` for cross-attention); `keys`, the key mask `[batch, k_len]` (1.0
/// token, 0.0 padding); `causal`, whether query `i` sees keys `0..=i` only (the decoder).
/// `None` where the reference must run (see [`crate::kernels`]).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    position: Option<(&Tensor<2>, &Tensor<2, Int>)>,
    keys: &Tensor<2>,
    causal: bool,
    heads: usize,
    d_kv: usize,
) -> Option<Tensor<3>> {
    let (qc, kc, vc, mc) = (gpu(q, F32)?, gpu(k, F32)?, gpu(v, F32)?, gpu(keys, F32)?);
    let [b, q_len, inner] = q.dims();
    let k_len = k.dims()[1];
    let (table, buckets) = match position {
        Some((table, buckets)) => (gpu(table, F32)?, gpu(buckets, I32)?),
        // Unread (the kernel is compiled without the bias): any bound buffers do.
        None => (
            mc.clone(),
            empty_device_dtype(mc.client.clone(), mc.device.clone(), Shape::new([1]), I32),
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
        position.is_some(),
        causal,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}
