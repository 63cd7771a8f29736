//! int8 weights kept int8: a model stored in int8 (`st5 quantize --dtype int8`, per-row scales)
//! keeps its Linear weights and its embedding table int8 in memory ([`Int8Matrix`]) instead of
//! dequantizing them at load.
//! - On the CPU its Linear layers multiply int8 × int8 → i32 with st5-int8's kernels, the
//!   activations quantized per row as they arrive ([`linear`]): a quarter of the f32 weights'
//!   memory, so that a browser's worker pool can give every core a worker within the same budget,
//!   and faster products where the CPU has an integer dot product (x86 `vpmaddubsw`/VNNI,
//!   WebAssembly's relaxed dot product, Arm `sdot`).
//! - On a GPU the codes sit in GPU memory, packed four to a word, and the kernels
//!   ([`kernels::matmul_int8`], [`kernels::embedding_int8`]) dequantize them in registers and
//!   compute in f32: a quarter of the GPU memory and of the bytes each product streams.
//!
//! Norms, attention, softmax and residuals stay f32, as does everything of an f32 or f16 model
//! ([`Compute`](crate::Compute) decides, in the loader).
//!
//! Outlier input channels: a few channels of a transformer's hidden states are far larger than
//! the rest (all-MiniLM-L6-v2's LayerNorm outputs, the inputs of q/k/v and of the FFN, have
//! channels 4-15× the median channel's largest magnitude), and one scale per activation row then
//! resolves every other channel in a handful of codes. Where `st5 quantize` calibrated the model
//! (a `weight_input_absmax` beside the weight, st5-format's `quant::input_absmax_name`), the CPU
//! multiplies the channels above [`OUTLIER_RATIO`] × the median in f32 against the dequantized
//! weight columns and quantizes the others without them: LLM.int8()'s decomposition (Dettmers
//! et al. 2022, §3.2, <https://arxiv.org/abs/2208.07339>), with the channels fixed at
//! calibration so that a text's vector does not depend on what else is in its batch.
//!
//! The reference beside it: the same model loaded with `Compute::F32` (int8 weights dequantized,
//! f32 products), which is also what the GPU path falls back to ([`DeviceInt8::dequantize`]). How
//! far the two are apart is measured by `tests/quant.rs` (native, CPU and wgpu) and the browser
//! tests.

use std::sync::{Arc, OnceLock};

use burn::tensor::{Device, Int, Tensor, TensorData};
pub use st5_int8::Kernel;
use st5_int8::{ActBits, Weights, quantize_rows_asymmetric};

use crate::device::is_gpu;
use crate::kernels::{self, CODES_PER_WORD};
use crate::ops;
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

/// An input channel is multiplied in f32 when its calibrated largest magnitude is above this
/// many times the median channel's. Simulated on all-MiniLM-L6-v2 (7-bit rows as here, STS-B dev
/// sentences): the least cosine of int8 compute to f32 went from 0.983 to 0.997 with 4x, while
/// 6x and 8x left it at 0.983 (they pick only the largest one or two channels).
pub const OUTLIER_RATIO: f32 = 4.0;

/// At most this many channels of one input are multiplied in f32 (the largest first): the f32
/// part costs `rows × channels × d_out` multiply-adds beside the int8 product's `rows × d_in ×
/// d_out`, 2% at the default's widths.
pub const MAX_F32_CHANNELS: usize = 8;

/// The kernel this process uses, chosen once: the fastest that takes [`ACT_BITS`], or the one
/// `ST5_INT8_KERNEL` names (`amx`, `avx512-vnni`, `avx-vnni`, `avx2-ubs`, `avx2`, `scalar`, ...:
/// every kernel gives the same bits, so this only changes speed; for benchmarks and tests). A
/// name this CPU does not run is reported on stderr and the fastest is used.
pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        let best = Kernel::best(ACT_BITS);
        let Ok(name) = std::env::var("ST5_INT8_KERNEL") else { return best };
        match Kernel::from_name(&name).filter(|k| k.is_available() && k.accepts(ACT_BITS)) {
            Some(k) => k,
            None => {
                let here: Vec<&str> = Kernel::available()
                    .into_iter()
                    .filter(|k| k.accepts(ACT_BITS))
                    .map(Kernel::name)
                    .collect();
                eprintln!(
                    "warning: ST5_INT8_KERNEL={name} is not a kernel this CPU runs (here: {}); using {}",
                    here.join(", "),
                    best.name()
                );
                best
            }
        }
    })
}

/// A matrix kept as int8 codes with one f32 scale per row: a Linear weight `[d_out, d_in]` (as
/// checkpoints store it) or an embedding table `[vocab, d_model]`. Clones share the codes.
#[derive(Clone, Debug)]
pub enum Int8Matrix {
    /// In host memory, for st5-int8's CPU kernels.
    Host(Arc<HostInt8>),
    /// In GPU memory, for the GPU kernels.
    Device(Arc<DeviceInt8>),
}

/// An int8 matrix in host memory: st5-int8's weights, and the input channels it multiplies in f32
/// (none unless calibrated; the module docs say why).
#[derive(Clone, Debug)]
pub struct HostInt8 {
    weights: Weights,
    /// The channels, ascending.
    channels: Vec<usize>,
    /// `[channels.len(), rows]`: weight column `c` dequantized (`code · scale`) for each channel.
    columns: Vec<f32>,
}

impl HostInt8 {
    /// The codes, for st5-int8's kernels.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The input channels multiplied in f32, ascending.
    pub fn f32_channels(&self) -> &[usize] {
        &self.channels
    }

    /// `out += x[:, channels] · W[:, channels]ᵀ` for row-major `x` `[m, cols]` and `out` `[m,
    /// rows]`: the f32 part of the product.
    fn add_f32_channels(&self, x: &[f32], out: &mut [f32]) {
        let (k, n) = (self.weights.cols(), self.weights.rows());
        for (xr, or) in x.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            for (&c, column) in self.channels.iter().zip(self.columns.chunks_exact(n)) {
                let v = xr[c];
                for (o, &w) in or.iter_mut().zip(column) {
                    *o += v * w;
                }
            }
        }
    }
}

/// The channels of `absmax` (one calibrated largest magnitude per input channel) above
/// [`OUTLIER_RATIO`] × the median, at most [`MAX_F32_CHANNELS`] of the largest, ascending.
pub fn f32_channels(absmax: &[f32]) -> Vec<usize> {
    let mut sorted = absmax.to_vec();
    sorted.sort_by(f32::total_cmp);
    let Some(&median) = sorted.get(sorted.len() / 2) else { return Vec::new() };
    let mut channels: Vec<usize> =
        (0..absmax.len()).filter(|&c| absmax[c] > OUTLIER_RATIO * median).collect();
    channels.sort_by(|&a, &b| absmax[b].total_cmp(&absmax[a]).then(a.cmp(&b)));
    channels.truncate(MAX_F32_CHANNELS);
    channels.sort_unstable();
    channels
}

/// An int8 matrix on a GPU: `words` `[rows, cols / 4]` ([`kernels::pack_codes`]) and `scales`
/// `[rows]`.
#[derive(Debug)]
pub struct DeviceInt8 {
    words: Tensor<2, Int>,
    scales: Tensor<1>,
    /// The f32 copy ([`DeviceInt8::dequantize`]), built the first time a kernel declines this
    /// matrix (a Linear whose `d_out` is not a multiple of 4) and kept: dequantizing on every
    /// forward pass would cost more than the product. No shipped model takes that path.
    fallback: OnceLock<Tensor<2>>,
}

impl Int8Matrix {
    /// `codes` `[rows, cols]` row-major and `scales` `[rows]`, on `device`. `None` when the
    /// lengths disagree, `cols` is 0, or the device's kernels cannot take `cols` (above
    /// st5-int8's [`MAX_K`](st5_int8::MAX_K) on the CPU, not a multiple of 4 on a GPU): the
    /// caller then dequantizes and computes in f32.
    pub fn new(
        codes: &[i8],
        scales: &[f32],
        rows: usize,
        cols: usize,
        device: &Device,
    ) -> Option<Self> {
        let fits = cols > 0 && codes.len() == rows * cols && scales.len() == rows;
        if !fits {
            return None;
        }
        if is_gpu(device) {
            if !cols.is_multiple_of(CODES_PER_WORD) || rows == 0 {
                return None;
            }
            let words = kernels::pack_codes(codes);
            let words = TensorData::new(words, [rows, cols / CODES_PER_WORD]);
            let scales = TensorData::new(scales.to_vec(), [rows]);
            let words = Tensor::<2, Int>::from_data(words, device);
            let scales = Tensor::<1>::from_data(scales, device);
            let fallback = OnceLock::new();
            return Some(Self::Device(Arc::new(DeviceInt8 { words, scales, fallback })));
        }
        (cols <= st5_int8::MAX_K).then(|| {
            let weights = Weights::new(codes, scales, rows, cols);
            Self::Host(Arc::new(HostInt8 { weights, channels: Vec::new(), columns: Vec::new() }))
        })
    }

    /// The same matrix with its inputs' calibrated largest magnitudes (`[cols]`, from `st5
    /// quantize`): on the CPU the channels [`f32_channels`] picks are multiplied in f32 from now
    /// on. A GPU computes in f32 anyway and ignores them; `None` or a length other than `cols`
    /// changes nothing.
    pub fn with_input_absmax(self, absmax: Option<&[f32]>) -> Self {
        match (self, absmax) {
            (Self::Host(host), Some(absmax)) if absmax.len() == host.weights.cols() => {
                let mut host = Arc::unwrap_or_clone(host);
                let channels = f32_channels(absmax);
                let w = &host.weights;
                host.columns = channels
                    .iter()
                    .flat_map(|&c| (0..w.rows()).map(move |j| f32::from(w.row(j)[c]) * w.scale(j)))
                    .collect();
                host.channels = channels;
                Self::Host(Arc::new(host))
            }
            (m, _) => m,
        }
    }

    /// Rows: a Linear layer's `d_out`, a table's vocabulary.
    pub fn rows(&self) -> usize {
        match self {
            Self::Host(h) => h.weights.rows(),
            Self::Device(d) => d.words.dims()[0],
        }
    }

    /// Values per row: a Linear layer's `d_in`, a table's `d_model`.
    pub fn cols(&self) -> usize {
        match self {
            Self::Host(h) => h.weights.cols(),
            Self::Device(d) => d.words.dims()[1] * CODES_PER_WORD,
        }
    }

    /// Whether the products are int8 × int8 (the CPU); on a GPU they are f32.
    pub fn is_host(&self) -> bool {
        matches!(self, Self::Host(_))
    }

    /// An identity shared by clones (the same codes): tied tables are counted once.
    pub fn id(&self) -> usize {
        match self {
            Self::Host(w) => Arc::as_ptr(w) as usize,
            Self::Device(d) => Arc::as_ptr(d) as usize,
        }
    }

    /// Bytes held: on the CPU the heap's codes, scales and the kernels' row sums; on a GPU the
    /// packed codes and the scales.
    pub fn bytes(&self) -> usize {
        match self {
            Self::Host(h) => h.weights.heap_bytes() + 4 * h.columns.len(),
            Self::Device(_) => self.rows() * (self.cols() + 4),
        }
    }
}

impl DeviceInt8 {
    /// The matrix as f32 `[rows, cols]`, `code · scale`: the reference the kernels are checked
    /// against and what runs where they decline. Each value is the product st5-format's
    /// dequantization computes, so this equals the f32 path's weight bit for bit.
    pub fn dequantize(&self) -> Tensor<2> {
        let [rows, words] = self.words.dims();
        let bytes = (0..CODES_PER_WORD as i32).map(|j| {
            let byte = self.words.clone().bitwise_right_shift_scalar(8 * j).bitwise_and_scalar(255);
            (byte.float() - 128.0).unsqueeze_dim::<3>(2)
        });
        let codes = Tensor::cat(bytes.collect(), 2).reshape([rows, words * CODES_PER_WORD]);
        codes * self.scales.clone().unsqueeze_dim(1)
    }

    /// [`dequantize`](Self::dequantize)'s result, built once: what runs where a kernel declines.
    fn fallback(&self) -> Tensor<2> {
        self.fallback.get_or_init(|| self.dequantize()).clone()
    }
}

/// `x · Wᵀ (+ bias)` with `W` int8: `x` `[..., d_in]` → `[..., d_out]`.
///
/// On the CPU each row of `x` is quantized to [`ACT_BITS`] codes with its own scale, multiplied
/// exactly in i32 and rescaled by both scales, and the bias added in the same pass; natively the
/// rows are split over rayon's threads (the pool flex's gemm runs on); in the browser each Worker
/// runs one thread. On a GPU the product is f32 over the codes dequantized in registers
/// ([`kernels::matmul_int8`]).
pub fn linear<const D: usize>(x: Tensor<D>, w: &Int8Matrix, bias: Option<Tensor<1>>) -> Tensor<D> {
    match w {
        Int8Matrix::Host(host) => host_linears(x, &[host], &[bias.map(host_values)]).remove(0),
        Int8Matrix::Device(d) => kernels::matmul_int8(&x, &d.words, &d.scales, bias.as_ref())
            .unwrap_or_else(|| ops::linear_reference(x, d.fallback().transpose(), bias)),
    }
}

/// `x · Wᵢᵀ + bᵢ` for several int8 weights of one input width (self-attention's q, k and v, a
/// gated FFN's two inputs): `x` `[..., d_in]` → `[..., d_outᵢ]`. On the CPU `x` is read back
/// and quantized once for all of them (when they multiply the same channels in f32, as
/// calibration on one input gives), where [`linear`] per weight would do both N times; on a GPU
/// it is [`linear`] per weight.
pub fn linears<const D: usize, const N: usize>(
    x: Tensor<D>,
    ws: [&Int8Matrix; N],
    biases: [Option<Tensor<1>>; N],
) -> [Tensor<D>; N] {
    let host = ws.map(|w| match w {
        Int8Matrix::Host(host) => Some(&**host),
        Int8Matrix::Device(_) => None,
    });
    match host.iter().copied().collect::<Option<Vec<_>>>() {
        Some(hs) if hs.windows(2).all(|p| p[0].channels == p[1].channels) => {
            let biases = biases.map(|b| b.map(host_values));
            host_linears(x, &hs, &biases).try_into().expect("one output per weight")
        }
        _ => {
            let mut biases = biases.into_iter();
            ws.map(|w| linear(x.clone(), w, biases.next().expect("one bias per weight")))
        }
    }
}

/// A CPU tensor's values.
fn host_values(t: Tensor<1>) -> Vec<f32> {
    to_host(t.try_into_data()).expect("a CPU tensor reads back")
}

/// [`linears`] on the CPU: `biases[i]` `[d_outᵢ]` where weight `i` has one.
fn host_linears<const D: usize>(
    x: Tensor<D>,
    ws: &[&HostInt8],
    biases: &[Option<Vec<f32>>],
) -> Vec<Tensor<D>> {
    let device = x.device();
    let dims = x.dims();
    let k = dims[D - 1];
    for w in ws.iter().map(|h| &h.weights) {
        assert_eq!(w.cols(), k, "int8 Linear: input width {k} is not d_in {}", w.cols());
    }
    let values = to_host(x.try_into_data()).expect("a CPU tensor reads back");
    let mut outs: Vec<Vec<f32>> =
        ws.iter().map(|w| vec![0f32; values.len() / k * w.weights.rows()]).collect();
    products(&values, ws, biases, &mut outs);
    outs.into_iter()
        .zip(ws)
        .map(|(out, w)| {
            let mut dims = dims;
            dims[D - 1] = w.weights.rows();
            Tensor::<D>::from_data(TensorData::new(out, dims), &device)
        })
        .collect()
}

/// `outs[i] = x · Wᵢᵀ + biases[i]` for row-major `x` `[m, k]` and `outs[i]` `[m, nᵢ]`: each
/// block of rows is quantized once and multiplied by every weight. The weights multiply the same
/// channels in f32 ([`linears`] checks): those are left out of the quantized rows and added in
/// f32.
fn products(x: &[f32], ws: &[&HostInt8], biases: &[Option<Vec<f32>>], outs: &mut [Vec<f32>]) {
    let Some(first) = ws.first() else { return };
    let (k, channels) = (first.weights.cols(), &first.channels);
    let block = |x: &[f32], outs: Vec<&mut [f32]>| {
        let q = if channels.is_empty() {
            quantize_rows_asymmetric(x, k)
        } else {
            let mut rest = x.to_vec();
            for row in rest.chunks_exact_mut(k) {
                for &c in channels {
                    row[c] = 0.0;
                }
            }
            quantize_rows_asymmetric(&rest, k)
        };
        for ((w, bias), out) in ws.iter().zip(biases).zip(outs) {
            st5_int8::matmul(kernel(), &q, &w.weights, out);
            w.add_f32_channels(x, out);
            if let Some(bias) = bias {
                for row in out.chunks_exact_mut(bias.len()) {
                    for (o, b) in row.iter_mut().zip(bias) {
                        *o += b;
                    }
                }
            }
        }
    };
    if x.is_empty() {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        // One block of rows per thread (a few rows at least): each block streams every weight
        // once, so fewer, larger blocks read them fewer times.
        let rows = (x.len() / k).div_ceil(rayon::current_num_threads()).max(4);
        let mut blocks: Vec<Vec<&mut [f32]>> = Vec::new();
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            for (i, chunk) in out.chunks_mut(rows * w.weights.rows()).enumerate() {
                match blocks.get_mut(i) {
                    Some(block) => block.push(chunk),
                    None => blocks.push(vec![chunk]),
                }
            }
        }
        x.par_chunks(rows * k).zip(blocks).for_each(|(x, outs)| block(x, outs));
    }
    #[cfg(target_arch = "wasm32")]
    block(x, outs.iter_mut().map(|o| o.as_mut_slice()).collect());
}

/// The rows of `table` for `ids` `[batch, seq]`, dequantized: `[batch, seq, d_model]`, each value
/// `code · scale` as the f32 path's table holds it. On the CPU an id outside the table gives a
/// row of NaN rather than a panic (the tokenizer never produces one).
pub fn embedding(ids: Tensor<2, Int>, table: &Int8Matrix) -> Tensor<3> {
    let [b, s] = ids.dims();
    let d = table.cols();
    let table = match table {
        Int8Matrix::Host(host) => return host_embedding(ids, &host.weights),
        Int8Matrix::Device(table) => table,
    };
    kernels::embedding_int8(&ids, &table.words, &table.scales)
        .unwrap_or_else(|| table.dequantize().select(0, ids.reshape([b * s])).reshape([b, s, d]))
}

/// [`embedding`] on the CPU.
fn host_embedding(ids: Tensor<2, Int>, table: &Weights) -> Tensor<3> {
    let device = ids.device();
    let [b, s] = ids.dims();
    let d = table.cols();
    let ids: Vec<i64> = to_host_as(ids.try_into_data()).expect("a CPU tensor reads back");
    let mut out = vec![0f32; b * s * d];
    for (row, &id) in out.chunks_exact_mut(d).zip(&ids) {
        match usize::try_from(id).ok().filter(|&j| j < table.rows()) {
            Some(j) => {
                let scale = table.scale(j);
                for (o, &c) in row.iter_mut().zip(table.row(j)) {
                    *o = c as f32 * scale;
                }
            }
            None => row.fill(f32::NAN),
        }
    }
    Tensor::from_data(TensorData::new(out, [b, s, d]), &device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::wgpu_for_tests;

    /// Per-row symmetric int8 as `st5 quantize` stores weights.
    fn int8(values: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
        assert_eq!(values.len(), rows * cols);
        crate::quant::quantize_weight_rows(values, cols)
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

    /// Several weights on one input (quantized once) give, bit for bit, what each weight gives
    /// on its own, for row counts below and above the per-thread block, outputs of different
    /// widths, with and without a bias.
    #[test]
    fn shared_input_equals_one_product_per_weight() {
        let device = Device::flex();
        for (m, k) in [(1, 8), (9, 70), (37, 128), (0, 16)] {
            let x = Tensor::<2>::from_data(TensorData::new(values(m * k, 3), [m, k]), &device);
            let ws: Vec<Int8Matrix> = [5, 12, 7]
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let (codes, scales) = int8(&values(n * k, 20 + i as u32), n, k);
                    Int8Matrix::new(&codes, &scales, n, k, &device).unwrap()
                })
                .collect();
            let bias = |n: usize| {
                Some(Tensor::<1>::from_data(TensorData::new(values(n, 9), [n]), &device))
            };
            let biases = [None, bias(12), bias(7)];
            let shared = linears(x.clone(), [&ws[0], &ws[1], &ws[2]], biases.clone());
            for ((w, b), got) in ws.iter().zip(biases).zip(shared) {
                assert_eq!(got.dims(), [m, w.rows()]);
                let alone = to_host(linear(x.clone(), w, b).try_into_data()).unwrap();
                assert!(to_host(got.try_into_data()).unwrap() == alone, "{m}x{k}x{}", w.rows());
            }
        }
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
            let w = Int8Matrix::new(&codes, &scales, n, k, &device).unwrap();
            let Int8Matrix::Host(host) = &w else { panic!("int8 on the CPU is kept on the host") };
            let host = host.weights();
            let x = Tensor::<3>::from_data(TensorData::new(xv.clone(), [b, s, k]), &device);
            let y = linear(x, &w, None);
            assert_eq!(y.dims(), [b, s, n]);
            let got = to_host(y.try_into_data()).unwrap();
            let mut want = vec![0f32; b * s * n];
            if b * s > 0 {
                let q = quantize_rows_asymmetric(&xv, k);
                st5_int8::matmul(Kernel::Scalar, &q, host, &mut want);
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

    /// Which channels are multiplied in f32, by the calibrated magnitudes: strictly above 4x the
    /// median, the largest 8 at most, ascending.
    #[test]
    fn f32_channels_are_the_few_far_above_the_median() {
        let flat = vec![1.0f32; 16];
        let with = |pairs: &[(usize, f32)]| {
            let mut v = vec![1.0f32; 16.max(4 * pairs.len())];
            for &(c, x) in pairs {
                v[c] = x;
            }
            v
        };
        let many: Vec<(usize, f32)> = (0..10).map(|c| (c, 10.0 + c as f32)).collect();
        let cases: Vec<(&str, Vec<f32>, Vec<usize>)> = vec![
            ("empty", vec![], vec![]),
            ("all alike", flat.clone(), vec![]),
            ("exactly 4x stays int8", with(&[(3, 4.0)]), vec![]),
            ("one outlier", with(&[(3, 4.5)]), vec![3]),
            ("ascending whatever the size", with(&[(9, 30.0), (2, 6.0)]), vec![2, 9]),
            ("the largest 8 of 10", with(&many), vec![2, 3, 4, 5, 6, 7, 8, 9]),
            ("median 0: every non-zero", vec![0.0, 0.0, 0.0, 2.0, 0.0], vec![3]),
        ];
        for (case, absmax, want) in cases {
            assert_eq!(f32_channels(&absmax), want, "{case}");
        }
    }

    /// A calibrated Linear leaves its outlier channels out of the int8 rows and adds them in f32
    /// against the dequantized weight columns, exactly so (the scalar kernel on the rest plus
    /// the f32 part); it then tracks the f32 product better than without; several weights on
    /// one input give what each gives alone; and a matrix without the statistic, or with one of
    /// another width, is unchanged.
    #[test]
    fn calibrated_channels_are_multiplied_in_f32() {
        let device = Device::flex();
        let (m, k, outliers) = (9, 96, [5usize, 40, 77]);
        let mut xv = values(m * k, 13);
        for row in xv.chunks_exact_mut(k) {
            for c in outliers {
                row[c] *= 25.0;
            }
        }
        let absmax: Vec<f32> =
            (0..k).map(|c| xv.chunks_exact(k).fold(0f32, |a, r| a.max(r[c].abs()))).collect();
        assert_eq!(f32_channels(&absmax), outliers);
        let x = Tensor::<2>::from_data(TensorData::new(xv.clone(), [m, k]), &device);
        let ws: Vec<(Int8Matrix, Vec<f32>)> = [24, 40]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let (codes, scales) = int8(&values(n * k, 30 + i as u32), n, k);
                let deq = crate::quant::dequantize_rows(&codes, &scales, k);
                (Int8Matrix::new(&codes, &scales, n, k, &device).unwrap(), deq)
            })
            .collect();
        let calibrated: Vec<Int8Matrix> =
            ws.iter().map(|(w, _)| w.clone().with_input_absmax(Some(&absmax))).collect();
        let shared = linears(x.clone(), [&calibrated[0], &calibrated[1]], [None, None]);
        for (((plain, deq), w), got) in ws.iter().zip(&calibrated).zip(shared) {
            let n = w.rows();
            let Int8Matrix::Host(host) = w else { panic!("int8 on the CPU is kept on the host") };
            assert_eq!(host.f32_channels(), outliers);
            let got = to_host(got.try_into_data()).unwrap();
            let alone = to_host(linear(x.clone(), w, None).try_into_data()).unwrap();
            assert!(got == alone, "shared input differs from one weight alone");
            let mut rest = xv.clone();
            for row in rest.chunks_exact_mut(k) {
                for c in outliers {
                    row[c] = 0.0;
                }
            }
            let mut want = vec![0f32; m * n];
            let q = quantize_rows_asymmetric(&rest, k);
            st5_int8::matmul(Kernel::Scalar, &q, host.weights(), &mut want);
            for (xr, wr) in xv.chunks_exact(k).zip(want.chunks_exact_mut(n)) {
                for c in outliers {
                    for (j, o) in wr.iter_mut().enumerate() {
                        *o += xr[c] * deq[j * k + c];
                    }
                }
            }
            assert!(got == want, "differs from the int8 rest plus the f32 channels");
            let before = to_host(linear(x.clone(), plain, None).try_into_data()).unwrap();
            let (mut worst_before, mut worst_after) = (1f64, 1f64);
            for i in 0..m {
                let exact: Vec<f32> = deq
                    .chunks_exact(k)
                    .map(|wr| xv[i * k..(i + 1) * k].iter().zip(wr).map(|(a, b)| a * b).sum())
                    .collect();
                let row = |v: &[f32]| v[i * n..(i + 1) * n].to_vec();
                worst_before = worst_before.min(cosine(&row(&before), &exact));
                worst_after = worst_after.min(cosine(&row(&got), &exact));
            }
            assert!(
                worst_after > worst_before && worst_after > 0.9995,
                "least cosine to f32: {worst_before} without, {worst_after} with the f32 channels"
            );
        }
        let (plain, _) = &ws[0];
        for absmax in [None, Some(&absmax[1..])] {
            let same = plain.clone().with_input_absmax(absmax);
            let Int8Matrix::Host(host) = &same else { panic!("kept on the host") };
            assert!(host.f32_channels().is_empty());
        }
        // Different channels on one input: each weight runs alone, and still equals itself.
        let other = ws[1].0.clone().with_input_absmax(Some(&vec![1.0; k]));
        let [a, b] = linears(x.clone(), [&calibrated[0], &other], [None, None]);
        let alone = |w: &Int8Matrix| to_host(linear(x.clone(), w, None).try_into_data()).unwrap();
        assert!(to_host(a.try_into_data()).unwrap() == alone(&calibrated[0]));
        assert!(to_host(b.try_into_data()).unwrap() == alone(&other));
    }

    /// The embedding lookup equals the dequantized table's rows exactly; an id past the table
    /// gives NaN, not a panic.
    #[test]
    fn embedding_rows_equal_the_dequantized_table() {
        let device = Device::flex();
        let (vocab, d) = (10, 6);
        let tv = values(vocab * d, 3);
        let (codes, scales) = int8(&tv, vocab, d);
        let table = Int8Matrix::new(&codes, &scales, vocab, d, &device).unwrap();
        let deq = crate::quant::dequantize_rows(&codes, &scales, d);
        let ids =
            Tensor::<2, Int>::from_data(TensorData::new(vec![3i64, 0, 9, 10], [2, 2]), &device);
        let got = to_host(embedding(ids, &table).try_into_data()).unwrap();
        for (row, id) in got.chunks_exact(d).zip([3usize, 0, 9]) {
            assert!(row == &deq[id * d..(id + 1) * d], "row {id}");
        }
        assert!(got[3 * d..].iter().all(|v| v.is_nan()));
    }

    /// On a GPU the codes stay int8 there, and the kernels equal the reference (the dequantized
    /// matrix in f32 operations): the lookup bit for bit, the product within f32 rounding (the
    /// kernel sums `x · code` and scales the sum once; the reference scales each weight first).
    /// Shapes: rows that do and do not fill the 4-row tile, outputs that do not fill a vector
    /// (the reference runs), a bias (added in the kernel).
    #[test]
    fn gpu_kernels_match_the_reference() {
        let Some(device) = wgpu_for_tests() else { return };
        for (b, s, k, n) in [(1, 1, 4, 4), (2, 5, 64, 12), (3, 7, 384, 1536), (1, 3, 8, 6)] {
            let xv = values(b * s * k, 5);
            let (codes, scales) = int8(&values(n * k, 9), n, k);
            let w = Int8Matrix::new(&codes, &scales, n, k, &device).unwrap();
            let Int8Matrix::Device(d) = &w else { panic!("int8 on a GPU is kept on the GPU") };
            assert_eq!((w.rows(), w.cols(), w.bytes()), (n, k, n * (k + 4)));
            let x = Tensor::<3>::from_data(TensorData::new(xv, [b, s, k]), &device);
            let bias = Tensor::<1>::from_data(TensorData::new(values(n, 4), [n]), &device);
            let reference =
                ops::linear_reference(x.clone(), d.dequantize().transpose(), Some(bias.clone()));
            let reference = to_host(reference.try_into_data()).unwrap();
            assert_eq!(kernels::matmul_int8(&x, &d.words, &d.scales, None).is_some(), n % 4 == 0);
            let got = to_host(linear(x, &w, Some(bias)).try_into_data()).unwrap();
            // The f32 copy is built where the kernel declined, and only there.
            assert_eq!(d.fallback.get().is_some(), n % 4 != 0, "{b}x{s}x{k}x{n}");
            let scale = reference.iter().fold(1f32, |m, v| m.max(v.abs()));
            let diff = got.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff <= 1e-5 * scale, "{b}x{s}x{k}x{n}: {diff} (largest value {scale})");
        }
        let (vocab, d) = (50, 24);
        let (codes, scales) = int8(&values(vocab * d, 3), vocab, d);
        let table = Int8Matrix::new(&codes, &scales, vocab, d, &device).unwrap();
        let ids =
            Tensor::<2, Int>::from_data(TensorData::new(vec![3, 0, 49, 7, 7, 1], [2, 3]), &device);
        let Int8Matrix::Device(t) = &table else { panic!("int8 on a GPU is kept on the GPU") };
        assert!(kernels::embedding_int8(&ids, &t.words, &t.scales).is_some());
        let got = to_host(embedding(ids, &table).try_into_data()).unwrap();
        let deq = crate::quant::dequantize_rows(&codes, &scales, d);
        for (row, id) in got.chunks_exact(d).zip([3usize, 0, 49, 7, 7, 1]) {
            assert!(row == &deq[id * d..(id + 1) * d], "row {id}");
        }
    }

    #[test]
    fn matrices_that_the_kernels_cannot_take_are_refused() {
        let cpu = Device::flex();
        assert!(Int8Matrix::new(&[], &[], 0, 0, &cpu).is_none());
        assert!(Int8Matrix::new(&[1, 2, 3], &[1.0], 1, 2, &cpu).is_none());
        assert!(Int8Matrix::new(&[1, 2], &[1.0, 1.0], 1, 2, &cpu).is_none());
        let m = Int8Matrix::new(&[1, 2], &[1.0], 1, 2, &cpu).unwrap();
        assert_eq!((m.rows(), m.cols()), (1, 2));
        assert!(m.is_host() && m.bytes() >= 64 + 8);
        if let Some(gpu) = wgpu_for_tests() {
            // A GPU takes rows of whole words only.
            assert!(Int8Matrix::new(&[1, 2], &[1.0], 1, 2, &gpu).is_none());
            let m = Int8Matrix::new(&[1, 2, 3, 4], &[1.0], 1, 4, &gpu).unwrap();
            assert!(!m.is_host());
        }
    }
}
