//! int8 weights on the GPU: a Linear layer's product and an embedding lookup that read the
//! weights as int8 codes and dequantize them in registers, computing in f32. A quarter of the f32
//! weights' GPU memory and of the bytes each product streams.
//!
//! The codes are packed four to a 32-bit word, row by row as stored (`[rows, cols / 4]`, a
//! Linear weight's rows being its outputs): WGSL has no 8-bit storage. Each byte holds the code
//! plus 128, so a byte is unpacked by a shift and a mask, with no sign extension: `code = byte -
//! 128`. [`pack_codes`] writes that layout; the references in [`crate::int8`] read it with burn's
//! integer operations.

use burn::tensor::DType::{F32, I32};
use burn::tensor::{Int, Tensor};
use burn_cubecl::CubeBackend;

use super::{bias_arg, gpu, output, product_shape};
use cube::{embedding_int8_kernel, matmul_int8_kernel};

/// Codes per packed word.
pub const CODES_PER_WORD: usize = 4;

/// `codes` `[rows, cols]` row-major (`cols` a multiple of [`CODES_PER_WORD`]) packed as the
/// kernels read them: word `p` of a row holds codes `4p … 4p + 3`, each plus 128, low byte first.
/// The words are i32 (burn's integer tensors on wgpu); only their bits matter.
pub fn pack_codes(codes: &[i8]) -> Vec<i32> {
    codes
        .chunks_exact(CODES_PER_WORD)
        .map(|c| {
            let byte = |j: usize| u32::from((i16::from(c[j]) + 128) as u8) << (8 * j);
            (byte(0) | byte(1) | byte(2) | byte(3)) as i32
        })
        .collect()
}

/// The kernels, in cubecl's dialect of Rust (its `Tensor` is a kernel argument, not burn's).
mod cube {
    use cubecl::prelude::*;

    /// The 4 codes of `word` as f32 values `byte - 128`.
    #[cube]
    fn unpack<N: Size>(word: i32) -> Vector<f32, N> {
        let mut q = Vector::<f32, N>::empty();
        q.insert(0usize, f32::cast_from(word & 255) - 128.0);
        q.insert(1usize, f32::cast_from((word >> 8) & 255) - 128.0);
        q.insert(2usize, f32::cast_from((word >> 16) & 255) - 128.0);
        q.insert(3usize, f32::cast_from((word >> 24) & 255) - 128.0);
        q
    }

    /// One unit per 4 rows × 4 columns of `out = a · (codes · scale)ᵀ`: `a` `[m, k]` read as
    /// vectors of 4, `words` `[n, k / 4]` (one word = 4 codes of one output's weight row),
    /// `scales` `[n]`, `out` `[m, n]` as vectors of 4. The 16 dot products are accumulated in
    /// vectors over `k` and reduced once; each weight word serves 4 rows, each `a` vector 4
    /// columns. The scale multiplies the finished sum (it is one per output), then the bias
    /// (`[n]` as vectors of 4; unread without `has_bias`) is added. `N` is 4.
    /// `units` = ⌈m / 4⌉ · `n_vec`. Rows past the edge are read clamped and not written.
    #[cube(launch)]
    pub fn matmul_int8_kernel<N: Size>(
        a: &Tensor<Vector<f32, N>>,
        words: &Tensor<i32>,
        scales: &Tensor<f32>,
        bias: &Tensor<Vector<f32, N>>,
        out: &mut Tensor<Vector<f32, N>>,
        units: usize,
        m: usize,
        k_words: usize,
        n_vec: usize,
        #[comptime] has_bias: bool,
    ) {
        let unit = ABSOLUTE_POS;
        if unit >= units {
            terminate!();
        }
        let r0 = (unit / n_vec) * 4;
        let cv = unit % n_vec;
        let c0 = cv * 4;
        let mut acc = Array::<Vector<f32, N>>::new(16usize);
        #[unroll]
        for t in 0..16 {
            acc[t] = Vector::new(0.0);
        }
        for p in 0..k_words {
            let mut w = Array::<Vector<f32, N>>::new(4usize);
            #[unroll]
            for c in 0..4 {
                w[c] = unpack::<N>(words[(c0 + c) * k_words + p]);
            }
            #[unroll]
            for r in 0..4 {
                let av = a[min(r0 + r, m - 1) * k_words + p];
                #[unroll]
                for c in 0..4 {
                    acc[r * 4 + c] += av * w[c];
                }
            }
        }
        #[unroll]
        for r in 0..4 {
            if r0 + r < m {
                let mut o = Vector::<f32, N>::empty();
                #[unroll]
                for c in 0..4 {
                    let v = acc[r * 4 + c];
                    let dot = v.extract(0usize)
                        + v.extract(1usize)
                        + v.extract(2usize)
                        + v.extract(3usize);
                    o.insert(c, dot * scales[c0 + c]);
                }
                if has_bias {
                    o += bias[cv];
                }
                out[(r0 + r) * n_vec + cv] = o;
            }
        }
    }

    /// One unit per 4 values of one token's row: `ids` `[t]`, `words` `[vocab, d / 4]`, `scales`
    /// `[vocab]`, `out` `[t, d]` as vectors of 4 (`d_words` = d / 4). An id outside the table
    /// is clamped into it rather than read out of bounds (the embedder refuses such ids before
    /// they are uploaded). `units` = t · `d_words`.
    #[cube(launch)]
    pub fn embedding_int8_kernel<N: Size>(
        ids: &Tensor<i32>,
        words: &Tensor<i32>,
        scales: &Tensor<f32>,
        out: &mut Tensor<Vector<f32, N>>,
        units: usize,
        vocab: usize,
        d_words: usize,
    ) {
        let unit = ABSOLUTE_POS;
        if unit >= units {
            terminate!();
        }
        let id = ids[unit / d_words];
        let row = min(usize::cast_from(max(id, 0)), vocab - 1);
        let q = unpack::<N>(words[row * d_words + unit % d_words]);
        out[unit] = q * Vector::new(scales[row]);
    }
}

/// `x · Wᵀ + bias` for `x` `[..., k]`, `W` int8 `[n, k]` given as `words` `[n, k / 4]`
/// ([`pack_codes`]) and `scales` `[n]`, and `bias` `[n]` → `[..., n]`. `None` where the reference
/// must run: on the CPU, or `n` not a multiple of 4.
pub fn matmul_int8<const D: usize>(
    x: &Tensor<D>,
    words: &Tensor<2, Int>,
    scales: &Tensor<1>,
    bias: Option<&Tensor<1>>,
) -> Option<Tensor<D>> {
    const VECTOR: usize = CODES_PER_WORD;
    let [n, k_words] = words.dims();
    let (m, shape) = product_shape(x.dims(), n);
    if m == 0 || k_words == 0 || n % VECTOR != 0 || x.dims()[D - 1] != k_words * VECTOR {
        return None;
    }
    let (xc, wc, sc) = (gpu(x, F32)?, gpu(words, I32)?, gpu(scales, F32)?);
    let bc = bias_arg(bias, &sc)?;
    let units = m.div_ceil(4) * (n / VECTOR);
    let (out, count, dim) = output(&xc, shape, units);
    matmul_int8_kernel::launch(
        &xc.client.clone(),
        count,
        dim,
        VECTOR,
        xc.into_tensor_arg(),
        wc.into_tensor_arg(),
        sc.into_tensor_arg(),
        bc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        m,
        k_words,
        n / VECTOR,
        bias.is_some(),
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

/// The rows of an int8 table for `ids` `[batch, seq]`, dequantized: `[batch, seq, d]`, the table
/// given as `words` `[vocab, d / 4]` ([`pack_codes`]) and `scales` `[vocab]`. `None` where the
/// reference must run (the CPU).
pub fn embedding_int8(
    ids: &Tensor<2, Int>,
    words: &Tensor<2, Int>,
    scales: &Tensor<1>,
) -> Option<Tensor<3>> {
    const VECTOR: usize = CODES_PER_WORD;
    let [b, s] = ids.dims();
    let [vocab, d_words] = words.dims();
    if b * s == 0 || vocab == 0 || d_words == 0 {
        return None;
    }
    let (ic, wc, sc) = (gpu(ids, I32)?, gpu(words, I32)?, gpu(scales, F32)?);
    let units = b * s * d_words;
    let (out, count, dim) = output(&sc, [b, s, d_words * VECTOR], units);
    embedding_int8_kernel::launch(
        &sc.client.clone(),
        count,
        dim,
        VECTOR,
        ic.into_tensor_arg(),
        wc.into_tensor_arg(),
        sc.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        units,
        vocab,
        d_words,
    );
    Some(Tensor::from_primitive::<CubeBackend>(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code, the extremes included, comes back as `byte - 128` from its word.
    #[test]
    fn packing_keeps_every_code() {
        let codes: Vec<i8> = (-128..=127).collect();
        let words = pack_codes(&codes);
        assert_eq!(words.len(), 64);
        for (i, &c) in codes.iter().enumerate() {
            let byte = (words[i / 4] >> (8 * (i % 4))) & 255;
            assert_eq!(byte - 128, i32::from(c), "code {i}");
        }
    }
}
