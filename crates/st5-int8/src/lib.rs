//! int8 matrix products for Linear layers: `y = x · Wᵀ` with `W` stored as int8 codes and one f32
//! scale per output row (the compressed-tensors layout `st5 quantize --dtype int8` writes), and
//! `x` quantized per row at run time ([`quantize_rows`]). Each output is an exact i32 dot product
//! of codes, rescaled once by the row's and the weight row's scales ([`rescale`]).
//!
//! Kernels ([`Kernel`]): a scalar reference, and SIMD kernels that equal it bit for bit on the
//! same codes: x86-64 AMX-INT8 (on Linux, which grants the tile state on request), AVX2 (two
//! forms), AVX-512 VNNI and AVX-VNNI, chosen at run time;
//! WebAssembly SIMD128 and relaxed SIMD, chosen when the module is built; AArch64 `sdot`, chosen
//! at run time. [`Kernel::best`] picks one; `examples/bench.rs` measures them against the f32
//! matrix kernel st5 runs today.
//!
//! Bounds that keep every kernel exact (the offset kernels add 64 or 128 to activation codes to
//! make them unsigned, then subtract that offset times the weight row's sum):
//! - weight codes: any i8; activation codes: within [`ActBits`]' range, which [`quantize_rows`]
//!   guarantees and [`QuantizedRows`] can only be built by it;
//! - `k <= MAX_K` (2¹⁷), so `|dot| <= 128 · 127 · k < 2³¹`: the true dot fits in i32, and the
//!   kernels' wrapping sums are exact;
//! - 16-bit intermediates: a pair of products in `vpmaddubsw` or the relaxed dot product is at
//!   most `2 · 127 · 128 = 32512 < 2¹⁵` with activations offset to [1, 127] (7 bits only); the
//!   16-bit kernels multiply sign-extended codes into i32 directly.
//!
//! Tests: `cargo test -p st5-int8 --release` natively; in Node with SIMD128,
//! `CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test -p st5-int8
//! --release --target wasm32-unknown-unknown`; for the relaxed kernel add
//! `RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd"` and run them in Chromium
//! (`WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER=$(command -v chromedriver)`), or in Node 20 with
//! `NODE_ARGS=--experimental-wasm-relaxed-simd,--no-liftoff` (the `RelaxedSimd` kernel's
//! documentation says why not Liftoff). CI runs the native tests with the workspace's and the two
//! Node runs (the second with `--features relaxed-simd`) in `scripts/wasm-test.sh`.
//!
//! Where it plugs in: st5-core's `int8::linear`, for the Linear weights of an int8 model loaded
//! on the CPU (kept as codes, not dequantized). This crate is single-threaded; the caller splits
//! the activation rows over its threads. It has no dependencies and knows no model or tensor
//! library.

mod kernel;
mod quant;
// The SIMD kernels' shared loop, where there is a SIMD kernel.
#[cfg(any(
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128"),
    target_arch = "x86_64"
))]
mod tiles;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx;
#[cfg(target_arch = "aarch64")]
mod arm;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use kernel::Kernel;
pub use quant::{ActBits, QuantizedRows, Weights, quantize_rows, quantize_rows_asymmetric};

/// The longest row (`k`) the kernels take: `128 · 127 · 2¹⁷ < 2³¹`, so every dot product of codes
/// fits in i32.
pub const MAX_K: usize = 1 << 17;

/// Rows of both operands are stored padded with zero codes to a multiple of this (the widest
/// vector, AVX-512's 64 bytes), so kernels have no remainder loop: a zero weight code times any
/// (offset) activation adds nothing.
pub const K_ALIGN: usize = 64;

/// An output from its exact dot product of codes: `dot · x_scale · w_scale`, in that order, the
/// one f32 rounding sequence every kernel shares.
#[inline(always)]
pub fn rescale(dot: i32, x_scale: f32, w_scale: f32) -> f32 {
    dot as f32 * x_scale * w_scale
}

/// `out = x · Wᵀ`: `out[i · n + j]` is row `i` of `x` against weight row `j`, rescaled; `out` is
/// `[m, n]` row-major.
///
/// # Panics
/// If `x` and `w` differ in `k`, `out` is not `m · n` long, `kernel` is not
/// [available](Kernel::is_available), or it does not [accept](Kernel::accepts) `x`'s bits.
pub fn matmul(kernel: Kernel, x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    assert_eq!(x.cols(), w.cols(), "activations and weights differ in k");
    assert_eq!(out.len(), x.rows() * w.rows(), "output is not m x n");
    assert!(kernel.accepts(x.bits()), "{kernel:?} does not take {:?} activations", x.bits());
    assert!(kernel.is_available(), "{kernel:?} does not run here");
    kernel.run(x, w, out);
}

/// A seeded generator for the tests' random data. Not st5-format's SplitMix64: this crate has no
/// dependencies (st5-format brings the tokenizer), and the tests need only reproducible codes.
#[cfg(test)]
mod test_data {
    /// Knuth's MMIX linear congruential generator; the high bits are the well-mixed ones.
    pub struct Lcg(pub u64);

    impl Lcg {
        pub fn next_u32(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 32) as u32
        }

        /// Uniform i8 codes, -128 included.
        pub fn codes(&mut self, len: usize) -> Vec<i8> {
            (0..len).map(|_| (self.next_u32() >> 24) as u8 as i8).collect()
        }

        /// Approximately normal f32 (the sum of four uniforms, centred), scaled by `sd`.
        pub fn normal(&mut self, sd: f32) -> f32 {
            let u: f32 = (0..4).map(|_| self.next_u32() as f32 / 4294967296.0).sum();
            (u - 2.0) * sd * 3f32.sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::test_data::Lcg;

    /// Per-row symmetric int8 weights as `st5 quantize --dtype int8` writes them: scale =
    /// max |w| / 127, codes rounded.
    fn quantize_weights(w: &[f32], n: usize, k: usize) -> Weights {
        let q = quantize_rows(w, k, ActBits::Eight);
        let codes: Vec<i8> = (0..n).flat_map(|j| q.row(j).to_vec()).collect();
        let scales: Vec<f32> = (0..n).map(|j| q.scale(j)).collect();
        Weights::new(&codes, &scales, n, k)
    }

    fn cosine(a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
        let na: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum();
        let nb: f64 = b.iter().map(|&x| f64::from(x).powi(2)).sum();
        dot / (na * nb).sqrt()
    }

    #[test]
    fn int8_products_track_the_f32_product() {
        // (m, k, n): sentence-t5-base's attention projections and feed-forward layers.
        let shapes = [(32, 768, 768), (32, 768, 3072), (32, 3072, 768)];
        // (outlier factor, least row cosine to the f32 product for 7- and 8-bit activations):
        // normal activations, then 3 channels of every row scaled up, as a transformer's hidden
        // states have a few large channels. The bounds are this seed's worst over the shapes,
        // rounded down: 7 bits, half the resolution, cost about 4x the 8-bit 1 - cosine.
        let cases = [(1.0, 0.9995, 0.9999), (5.0, 0.998, 0.9995), (20.0, 0.985, 0.996)];
        let mut rng = Lcg(42);
        for (m, k, n) in shapes {
            for (outlier, least_7, least_8) in cases {
                let mut x: Vec<f32> = (0..m * k).map(|_| rng.normal(1.0)).collect();
                for row in x.chunks_exact_mut(k) {
                    for c in [3, 100, 500] {
                        row[c] *= outlier;
                    }
                }
                let wf: Vec<f32> = (0..n * k).map(|_| rng.normal(0.03)).collect();
                let w = quantize_weights(&wf, n, k);
                let mut exact = vec![0f32; m * n];
                for (i, xr) in x.chunks_exact(k).enumerate() {
                    for (j, wr) in wf.chunks_exact(k).enumerate() {
                        let dot: f64 =
                            xr.iter().zip(wr).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                        exact[i * n + j] = dot as f32;
                    }
                }
                for (bits, least) in [(ActBits::Seven, least_7), (ActBits::Eight, least_8)] {
                    let q = quantize_rows(&x, k, bits);
                    let mut out = vec![0f32; m * n];
                    matmul(Kernel::best(bits), &q, &w, &mut out);
                    let worst = (0..m)
                        .map(|i| cosine(&out[i * n..(i + 1) * n], &exact[i * n..(i + 1) * n]))
                        .fold(1f64, f64::min);
                    println!(
                        "{m}x{k}x{n}, outliers x{outlier}, {bits:?}-bit activations: worst row \
                         cosine to the f32 product {worst:.6}"
                    );
                    assert!(worst >= least, "{m}x{k}x{n} x{outlier} {bits:?}: {worst}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "RelaxedSimd does not take Eight activations")]
    fn a_7_bit_kernel_refuses_8_bit_activations() {
        // The bits are checked before availability, so this holds on every target.
        let x = quantize_rows(&[1.0; 4], 4, ActBits::Eight);
        let w = Weights::new(&[1; 4], &[1.0], 1, 4);
        matmul(Kernel::RelaxedSimd, &x, &w, &mut [0.0]);
    }
}

/// Timing, not a check (ignored): the kernel and the quantizer at the built-in default's shapes
/// and sentence-t5-base's, for the wasm engine at hand, with wasm-bindgen-test-runner as the
/// target's runner (`CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER`):
/// `cargo test --release --target wasm32-unknown-unknown --features relaxed-simd --
/// --include-ignored --nocapture time_the` runs it in Node (with `NODE_ARGS` as in
/// scripts/wasm-test.sh); `WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER=$(command -v chromedriver)`
/// before it, in Chromium (`webdriver.json`, st5-wasm's flags). Node 20's V8 runs the relaxed
/// kernel no faster than SIMD128; Chromium 156 runs it at up to ~155 GOPS here, more than two
/// multiplying instructions per product could reach, so its V8 uses the CPU's one-instruction
/// VNNI dot product (docs/browser.md has the figures).
#[cfg(all(test, target_arch = "wasm32"))]
mod wasm_timing {
    use wasm_bindgen_test::{console_log, wasm_bindgen_test};

    use super::*;
    use crate::test_data::Lcg;

    #[wasm_bindgen_test]
    #[ignore]
    fn time_the_kernels() {
        let mut rng = Lcg(3);
        let shapes = [
            (480, 384, 384),
            (480, 384, 1536),
            (480, 1536, 384),
            (480, 768, 768),
            (480, 768, 3072),
            (480, 3072, 768),
        ];
        for (m, k, n) in shapes {
            let x: Vec<f32> = (0..m * k).map(|_| rng.normal(1.0)).collect();
            let w = Weights::new(&rng.codes(n * k), &vec![0.01; n], n, k);
            let mut out = vec![0f32; m * n];
            let now = js_sys::Date::now;
            let reps = 20;
            let t0 = now();
            for _ in 0..reps {
                core::hint::black_box(quantize_rows_asymmetric(&x, k));
            }
            let quantize = (now() - t0) / reps as f64;
            let q = quantize_rows_asymmetric(&x, k);
            for kernel in Kernel::available() {
                if !kernel.accepts(q.bits()) {
                    continue;
                }
                let t0 = now();
                for _ in 0..reps {
                    matmul(kernel, &q, &w, &mut out);
                }
                let ms = (now() - t0) / reps as f64;
                let gops = 2.0 * (m * n * k) as f64 / ms / 1e6;
                console_log!(
                    "{m}x{k}x{n} {kernel:?}: {ms:.2} ms ({gops:.1} GOPS); quantize {quantize:.2} ms"
                );
            }
        }
    }
}
