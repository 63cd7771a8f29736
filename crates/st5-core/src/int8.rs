//! int8 compute on the CPU: a model stored in int8 (`st5 quantize --dtype int8`, per-row scales)
//! keeps its Linear weights and its embedding table int8 in memory ([`Int8Matrix`]), and its
//! Linear layers multiply int8 × int8 → i32 with st5-int8's kernels, the activations quantized per
//! row as they arrive ([`linear`]). Norms, attention, softmax and residuals stay f32, as does
//! everything of an f32 or f16 model and everything on a GPU ([`Compute`](crate::Compute)
//! decides, in the loader).
//!
//! A quarter of the f32 weights' memory, so that a browser's worker pool can give every core a
//! worker within the same budget; and faster products than f32 where the CPU has an integer dot
//! product (x86 `vpmaddubsw`/VNNI, WebAssembly's relaxed dot product, Arm `sdot`).
//!
//! The reference beside it: the same model loaded with `Compute::F32` (int8 weights dequantized,
//! f32 products). How far the two are apart is measured by `tests/quant.rs` (native) and the browser tests.

use std::sync::{Arc, OnceLock};

use burn::tensor::{Int, Tensor, TensorData};
use st5_int8::{ActBits, Kernel, Weights, quantize_rows_asymmetric};

use crate::transfer::{to_host, to_host_as};

/// Activation codes have 7 bits on every target, asymmetric (st5-int8's
/// `quantize_rows_asymmetric`: each row's range, 0 included, in 127 steps, with a zero point).
/// WebAssembly's relaxed dot product (the browser's faster module) is defined only for a 7-bit
/// second operand, and x86's `vpmaddubsw` needs the same; with one scheme everywhere every kernel
/// computes the same i32 dot products (st5-int8's kernels equal its scalar one bit for bit), so
/// both browser modules, the native CLI and every machine give identical embeddings. Asymmetric
/// because symmetric 7-bit codes left st5-small at a least cosine of 0.9978 to the f32
/// computation (a ReLU's output, the input of `wo`, used half the codes); asymmetric: 0.99913;
/// symmetric 8-bit, which the relaxed dot product cannot take: 0.99961 (`tests/quant.rs`).
pub const ACT_BITS: ActBits = ActBits::Seven;

/// The kernel this process uses: the fastest that takes [`ACT_BITS`], chosen once.
pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| Kernel::best(ACT_BITS))
}

/// A matrix kept as int8 codes with one f32 scale per row: a Linear weight `[d_out, d_in]` (as
/// checkpoints store it) or an embedding table `[vocab, d_model]`. Clones share the codes.
#[derive(Clone, Debug)]
pub struct Int8Matrix(Arc<Weights>);

impl Int8Matrix {
    /// `codes` `[rows, cols]` row-major and `scales` `[rows]`; `None` when `cols` is 0 or above
    /// st5-int8's [`MAX_K`](st5_int8::MAX_K) or the lengths disagree (the caller then dequantizes
    /// and computes in f32).
    pub fn new(codes: &[i8], scales: &[f32], rows: usize, cols: usize) -> Option<Self> {
        let fits = (1..=st5_int8::MAX_K).contains(&cols)
            && codes.len() == rows * cols
            && scales.len() == rows;
        fits.then(|| Self(Arc::new(Weights::new(codes, scales, rows, cols))))
    }

    /// Rows: a Linear layer's `d_out`, a table's vocabulary.
    pub fn rows(&self) -> usize {
        self.0.rows()
    }

    /// Values per row: a Linear layer's `d_in`, a table's `d_model`.
    pub fn cols(&self) -> usize {
        self.0.cols()
    }

    /// An identity shared by clones (the same codes): tied tables are counted once.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Heap bytes held (codes, scales and the kernels' row sums).
    pub fn bytes(&self) -> usize {
        self.0.heap_bytes()
    }

    /// Row `j` as f32, `code · scale`: the same product st5-format's dequantization computes, so
    /// an int8 embedding lookup equals the f32 path's bit for bit.
    fn dequantize_row(&self, j: usize, out: &mut [f32]) {
        let scale = self.0.scale(j);
        for (o, &c) in out.iter_mut().zip(self.0.row(j)) {
            *o = c as f32 * scale;
        }
    }
}

/// `x · Wᵀ (+ bias)` with `W` int8: `x` `[..., d_in]` → `[..., d_out]`. Each row of `x` is
/// quantized to [`ACT_BITS`] codes with its own scale, multiplied exactly in i32 and rescaled by
/// both scales. Natively the rows are split over rayon's threads (the pool flex's gemm runs on);
/// in the browser each Worker runs one thread.
pub fn linear<const D: usize>(x: Tensor<D>, w: &Int8Matrix, bias: Option<Tensor<1>>) -> Tensor<D> {
    let device = x.device();
    let mut dims = x.dims();
    let (k, n) = (w.cols(), w.rows());
    assert_eq!(dims[D - 1], k, "int8 Linear: input width {} is not d_in {k}", dims[D - 1]);
    let values = to_host(x.try_into_data()).expect("a CPU tensor reads back");
    let mut out = vec![0f32; values.len() / k * n];
    products(&values, &w.0, &mut out);
    dims[D - 1] = n;
    let y = Tensor::<D>::from_data(TensorData::new(out, dims), &device);
    match bias {
        Some(b) => y + b.reshape(bias_shape::<D>(n)),
        None => y,
    }
}

/// `[1, ..., 1, n]`: a bias broadcast over the leading dimensions.
fn bias_shape<const D: usize>(n: usize) -> [usize; D] {
    let mut shape = [1; D];
    shape[D - 1] = n;
    shape
}

/// `out = x · Wᵀ` for row-major `x` `[m, k]`, `out` `[m, n]`.
fn products(x: &[f32], w: &Weights, out: &mut [f32]) {
    let block = |x: &[f32], out: &mut [f32]| {
        let q = quantize_rows_asymmetric(x, w.cols());
        st5_int8::matmul(kernel(), &q, w, out);
    };
    if x.is_empty() {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        let (k, n) = (w.cols(), w.rows());
        // One block of rows per thread (a few rows at least): each block streams the whole
        // weight once, so fewer, larger blocks read it fewer times.
        let rows = (x.len() / k).div_ceil(rayon::current_num_threads()).max(4);
        x.par_chunks(rows * k).zip(out.par_chunks_mut(rows * n)).for_each(|(x, out)| block(x, out));
    }
    #[cfg(target_arch = "wasm32")]
    block(x, out);
}

/// The rows of `table` for `ids` `[batch, seq]`, dequantized: `[batch, seq, d_model]`. An id
/// outside the table gives a row of NaN rather than a panic (the tokenizer never produces one).
pub fn embedding(ids: Tensor<2, Int>, table: &Int8Matrix) -> Tensor<3> {
    let device = ids.device();
    let [b, s] = ids.dims();
    let d = table.cols();
    let ids: Vec<i64> = to_host_as(ids.try_into_data()).expect("a CPU tensor reads back");
    let mut out = vec![0f32; b * s * d];
    for (row, &id) in out.chunks_exact_mut(d).zip(&ids) {
        match usize::try_from(id).ok().filter(|&j| j < table.rows()) {
            Some(j) => table.dequantize_row(j, row),
            None => row.fill(f32::NAN),
        }
    }
    Tensor::from_data(TensorData::new(out, [b, s, d]), &device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;

    /// Per-row symmetric int8 as `st5 quantize` stores weights.
    fn int8(values: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
        assert_eq!(values.len(), rows * cols);
        crate::quant::quantize_rows(values, cols)
    }

    fn cosine(a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
        let na: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum();
        let nb: f64 = b.iter().map(|&x| f64::from(x).powi(2)).sum();
        dot / (na * nb).sqrt()
    }

    /// Deterministic values in about [-1, 1].
    fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    /// The int8 Linear equals, bit for bit, st5-int8's scalar kernel on the same codes, whatever
    /// the thread split; tracks the f32 product of the dequantized weights; keeps leading
    /// dimensions; adds a bias; and an empty batch gives an empty result.
    #[test]
    fn linear_matches_the_scalar_kernel_and_tracks_f32() {
        let device = Device::flex();
        // (batch, seq, k, n): rows below and above the per-thread block, k not a multiple of 64.
        for (b, s, k, n) in [(1, 1, 8, 3), (2, 5, 70, 33), (3, 17, 128, 64), (0, 4, 16, 8)] {
            let xv = values(b * s * k, 7);
            let wv = values(n * k, 11);
            let (codes, scales) = int8(&wv, n, k);
            let w = Int8Matrix::new(&codes, &scales, n, k).unwrap();
            let x = Tensor::<3>::from_data(TensorData::new(xv.clone(), [b, s, k]), &device);
            let y = linear(x, &w, None);
            assert_eq!(y.dims(), [b, s, n]);
            let got = to_host(y.try_into_data()).unwrap();
            let mut want = vec![0f32; b * s * n];
            if b * s > 0 {
                let q = quantize_rows_asymmetric(&xv, k);
                st5_int8::matmul(Kernel::Scalar, &q, &w.0, &mut want);
            }
            assert!(got == want, "{b}x{s}x{k}x{n}: differs from the scalar kernel");
            let deq = crate::quant::dequantize_rows(&codes, &scales, k);
            for (i, row) in got.chunks_exact(n).enumerate() {
                let x = &xv[i * k..(i + 1) * k];
                let exact: Vec<f32> = deq
                    .chunks_exact(k)
                    .map(|wr| x.iter().zip(wr).map(|(a, b)| a * b).sum())
                    .collect();
                let c = cosine(row, &exact);
                assert!(c > 0.999, "{b}x{s}x{k}x{n} row {i}: cosine {c}");
            }
            if b * s > 0 {
                let x = Tensor::<3>::from_data(TensorData::new(xv.clone(), [b, s, k]), &device);
                let bias = Tensor::<1>::from_data(TensorData::new(vec![0.5f32; n], [n]), &device);
                let with = to_host(linear(x, &w, Some(bias)).try_into_data()).unwrap();
                assert!(with.iter().zip(&got).all(|(a, b)| *a == b + 0.5));
            }
        }
    }

    /// The embedding lookup equals the dequantized table's rows exactly; an id past the table
    /// gives NaN, not a panic.
    #[test]
    fn embedding_rows_equal_the_dequantized_table() {
        let device = Device::flex();
        let (vocab, d) = (10, 6);
        let tv = values(vocab * d, 3);
        let (codes, scales) = int8(&tv, vocab, d);
        let table = Int8Matrix::new(&codes, &scales, vocab, d).unwrap();
        let deq = crate::quant::dequantize_rows(&codes, &scales, d);
        let ids =
            Tensor::<2, Int>::from_data(TensorData::new(vec![3i64, 0, 9, 10], [2, 2]), &device);
        let got = to_host(embedding(ids, &table).try_into_data()).unwrap();
        for (row, id) in got.chunks_exact(d).zip([3usize, 0, 9]) {
            assert!(row == &deq[id * d..(id + 1) * d], "row {id}");
        }
        assert!(got[3 * d..].iter().all(|v| v.is_nan()));
    }

    #[test]
    fn matrices_that_the_kernels_cannot_take_are_refused() {
        assert!(Int8Matrix::new(&[], &[], 0, 0).is_none());
        assert!(Int8Matrix::new(&[1, 2, 3], &[1.0], 1, 2).is_none());
        assert!(Int8Matrix::new(&[1, 2], &[1.0, 1.0], 1, 2).is_none());
        let m = Int8Matrix::new(&[1, 2], &[1.0], 1, 2).unwrap();
        assert_eq!((m.rows(), m.cols()), (1, 2));
        assert!(m.bytes() >= 64 + 8);
    }
}
