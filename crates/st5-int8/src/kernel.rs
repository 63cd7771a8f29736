//! The kernels: which exist and which this machine runs ([`Kernel`]), and the scalar reference.
//! The SIMD kernels (`x86`, `wasm`, `arm`) each run `tiles`' register-tiled loop with their own
//! dot-product step.
//!
//! Bit-for-bit equality with the scalar kernel holds by construction: every kernel computes each
//! output's dot product exactly in i32 (integer addition is associative, and the bounds in the
//! crate documentation keep every intermediate inside its lane), then hands it to the same
//! [`rescale`] call.

use crate::quant::{ActBits, QuantizedRows, Weights};
use crate::rescale;

/// A kernel for [`matmul`](crate::matmul). Which exist depends on the target; which run, on the
/// CPU ([`Kernel::available`]); which accept 8-bit activations, on the instruction
/// ([`Kernel::accepts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, the reference every other kernel equals.
    Scalar,
    /// x86-64 AVX2: codes sign-extended to i16, `vpmaddwd` (exact for any codes).
    Avx2,
    /// x86-64 AVX2: `vpmaddubsw` on activations offset to [1, 127] (7-bit activations only;
    /// pairs of products stay within i16, so it never saturates), then `vpmaddwd` by ones.
    Avx2Ubs,
    /// x86-64 AVX-512 VNNI: `vpdpbusd` on 64-byte vectors, activations offset by 128 into u8.
    Avx512Vnni,
    /// x86-64 AVX-VNNI (the VEX form of `vpdpbusd`, 32-byte vectors), as [`Kernel::Avx512Vnni`].
    AvxVnni,
    /// x86-64 AMX-INT8 on Linux: `tdpbssd` on 16 × 64 tiles, signed × signed, weights repacked
    /// once into the tile layout (`amx.rs`). Available where the CPU has it and Linux grants the
    /// process the tile state.
    Amx,
    /// WebAssembly SIMD128: codes widened to i16, `i32x4.dot_i16x8_s`.
    Simd128,
    /// WebAssembly relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s` with weights as the
    /// signed operand and activations offset to [1, 127] as the 7-bit one (7-bit activations
    /// only). Present when the module is built with `relaxed-simd` (a target feature or this
    /// crate's feature); nothing can detect it at run time, the host picks the module.
    RelaxedSimd,
    /// AArch64 `sdot` (the `dotprod` extension): signed × signed, four products into each i32.
    Sdot,
}

impl Kernel {
    /// Every kernel this build contains and this CPU runs, the scalar one first.
    pub fn available() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.is_available()).collect()
    }

    /// Every kernel of any build, the scalar one first.
    pub const ALL: [Kernel; 9] = [
        Kernel::Scalar,
        Kernel::Avx2,
        Kernel::Avx2Ubs,
        Kernel::Avx512Vnni,
        Kernel::AvxVnni,
        Kernel::Amx,
        Kernel::Simd128,
        Kernel::RelaxedSimd,
        Kernel::Sdot,
    ];

    /// The kernel's name, as `ST5_INT8_KERNEL` takes it (st5-core).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx2Ubs => "avx2-ubs",
            Kernel::Avx512Vnni => "avx512-vnni",
            Kernel::AvxVnni => "avx-vnni",
            Kernel::Amx => "amx",
            Kernel::Simd128 => "simd128",
            Kernel::RelaxedSimd => "relaxed-simd",
            Kernel::Sdot => "sdot",
        }
    }

    /// The kernel named `name` ([`name`](Self::name)), if any.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this build contains the kernel and this CPU runs it.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 | Kernel::Avx2Ubs => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("avxvnni")
            }
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            Kernel::Amx => crate::amx::available(),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Kernel::Simd128 => true,
            #[cfg(all(
                target_arch = "wasm32",
                target_feature = "simd128",
                any(target_feature = "relaxed-simd", feature = "relaxed-simd")
            ))]
            Kernel::RelaxedSimd => true,
            #[cfg(target_arch = "aarch64")]
            Kernel::Sdot => std::arch::is_aarch64_feature_detected!("dotprod"),
            #[allow(unreachable_patterns)] // every kernel is reachable on some target
            _ => false,
        }
    }

    /// Whether the kernel takes activations of `bits`: the 7-bit-operand instructions take
    /// only [`ActBits::Seven`].
    pub fn accepts(self, bits: ActBits) -> bool {
        !matches!((self, bits), (Kernel::Avx2Ubs | Kernel::RelaxedSimd, ActBits::Eight))
    }

    /// The fastest available kernel for activations of `bits` (measured order: AMX, VNNI, then the
    /// 7-bit forms, then the 16-bit ones; the crate's benchmark).
    pub fn best(bits: ActBits) -> Kernel {
        [
            Kernel::Amx,
            Kernel::Avx512Vnni,
            Kernel::AvxVnni,
            Kernel::Avx2Ubs,
            Kernel::Avx2,
            Kernel::RelaxedSimd,
            Kernel::Simd128,
            Kernel::Sdot,
        ]
        .into_iter()
        .find(|k| k.accepts(bits) && k.is_available())
        .unwrap_or(Kernel::Scalar)
    }

    /// Runs the kernel; [`matmul`](crate::matmul) has checked shapes, availability and bits.
    pub(crate) fn run(self, x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
        match self {
            Kernel::Scalar => scalar(x, w, out),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => crate::x86::avx2(x, w, out),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Ubs => crate::x86::avx2_ubs(x, w, out),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => crate::x86::avx512_vnni(x, w, out),
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => crate::x86::avx_vnni(x, w, out),
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            Kernel::Amx => crate::amx::amx(x, w, out),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Kernel::Simd128 => crate::wasm::simd128(x, w, out),
            #[cfg(all(
                target_arch = "wasm32",
                target_feature = "simd128",
                any(target_feature = "relaxed-simd", feature = "relaxed-simd")
            ))]
            Kernel::RelaxedSimd => crate::wasm::relaxed_simd(x, w, out),
            #[cfg(target_arch = "aarch64")]
            Kernel::Sdot => crate::arm::sdot(x, w, out),
            #[allow(unreachable_patterns)]
            _ => unreachable!("{self:?} is not in this build"),
        }
    }
}

/// The reference: each output's dot product summed in i32 in index order, then rescaled.
fn scalar(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    let n = w.rows();
    for (i, out_row) in out.chunks_exact_mut(n.max(1)).take(x.rows()).enumerate() {
        for (j, o) in out_row.iter_mut().enumerate() {
            let dot: i32 =
                x.row(i).iter().zip(w.row(j)).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum();
            let dot = dot.wrapping_sub(x.zero(i).wrapping_mul(w.row_sum(j)));
            *o = rescale(dot, x.scale(i), w.scale(j));
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::quant::quantize_rows;
    use crate::test_data::Lcg;

    /// Quantized operands from codes given directly (the activation codes through
    /// `quantize_rows` of the codes themselves, with a row maximum pinned so that the codes come
    /// back unchanged).
    fn operands(
        x_codes: &[i8],
        m: usize,
        w_codes: &[i8],
        n: usize,
        k: usize,
        bits: ActBits,
    ) -> (QuantizedRows, Weights) {
        let top = bits.max_code();
        let mut x: Vec<f32> = x_codes.iter().map(|&c| f32::from(c.clamp(-top, top))).collect();
        // A row whose largest magnitude is the top code has scale 1 and keeps its codes; pin
        // one value per row (the last) to the top code.
        for row in x.chunks_exact_mut(k) {
            row[k - 1] = f32::from(top);
        }
        let q = quantize_rows(&x, k, bits);
        for i in 0..m {
            assert_eq!(q.scale(i), 1.0);
        }
        let scales: Vec<f32> = (0..n).map(|j| 0.5 + j as f32 / 7.0).collect();
        (q, Weights::new(w_codes, &scales, n, k))
    }

    fn assert_kernels_equal_scalar(x: &QuantizedRows, w: &Weights, what: &str) {
        let mut want = vec![0f32; x.rows() * w.rows()];
        crate::matmul(Kernel::Scalar, x, w, &mut want);
        for kernel in Kernel::available() {
            if !kernel.accepts(x.bits()) {
                continue;
            }
            let mut got = vec![f32::NAN; want.len()];
            crate::matmul(kernel, x, w, &mut got);
            let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{kernel:?} differs from the scalar kernel: {what}");
        }
    }

    #[test]
    fn every_kernel_equals_scalar_bit_for_bit_on_random_codes() {
        let dims = [1, 3, 15, 16, 17, 31, 64, 65, 384];
        let mut rng = Lcg(0x5eed);
        for bits in [ActBits::Seven, ActBits::Eight] {
            for &m in &dims[..7] {
                for &n in &dims[..7] {
                    for &k in &dims {
                        let xc = rng.codes(m * k);
                        let wc = rng.codes(n * k);
                        let (x, w) = operands(&xc, m, &wc, n, k, bits);
                        assert_kernels_equal_scalar(&x, &w, &format!("{bits:?} {m}x{k}x{n}"));
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_equals_scalar_bit_for_bit_on_extreme_codes() {
        // (activation code, weight code): the ends of each range, -128 for weights too (every
        // i8 is accepted), and the 7-bit bounds.
        let cases: [(i8, i8); 9] = [
            (127, 127),
            (127, -128),
            (-127, 127),
            (-127, -128),
            (63, -128),
            (-63, 127),
            (-64, -127),
            (0, -128),
            (63, 0),
        ];
        // k up to 2048 makes sums far beyond i16 (the kernels' intermediates) on every lane.
        for k in [1, 16, 17, 64, 2048] {
            for (a, b) in cases {
                for bits in [ActBits::Seven, ActBits::Eight] {
                    let (m, n) = (5, 3);
                    let xc = vec![a; m * k];
                    let wc = vec![b; n * k];
                    let (x, w) = operands(&xc, m, &wc, n, k, bits);
                    assert_kernels_equal_scalar(&x, &w, &format!("{a} x {b}, k {k}, {bits:?}"));
                }
            }
        }
    }

    /// Asymmetric rows (codes down to -64, zero points across [-64, 63]) on every 7-bit-taking
    /// kernel, including one-signed rows (a ReLU's output) and the extreme k; and the zero point
    /// really is subtracted: the output equals the dequantized rows' product.
    #[test]
    fn every_kernel_equals_scalar_bit_for_bit_on_asymmetric_rows() {
        let mut rng = Lcg(0xa5);
        for (m, k, n) in [(1, 1, 1), (3, 17, 5), (16, 64, 16), (17, 384, 9), (2, crate::MAX_K, 2)] {
            let mut x: Vec<f32> = (0..m * k).map(|_| rng.normal(1.0)).collect();
            // Row 0 one-signed (relu), row 1 (if any) all negative, the rest mixed.
            x[..k].iter_mut().for_each(|v| *v = v.abs());
            if m > 1 {
                x[k..2 * k].iter_mut().for_each(|v| *v = -v.abs() - 0.5);
            }
            let q = crate::quantize_rows_asymmetric(&x, k);
            let w = Weights::new(&rng.codes(n * k), &vec![0.01; n], n, k);
            assert_kernels_equal_scalar(&q, &w, &format!("asymmetric {m}x{k}x{n}"));
            let mut got = vec![0f32; m * n];
            crate::matmul(Kernel::Scalar, &q, &w, &mut got);
            for i in 0..m.min(3) {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|c| {
                            let xv =
                                f64::from(q.row(i)[c] as i32 - q.zero(i)) * f64::from(q.scale(i));
                            xv * f64::from(w.row(j)[c]) * 0.01
                        })
                        .sum();
                    let tol = 1e-5 * want.abs().max(1.0);
                    assert!((f64::from(got[i * n + j]) - want).abs() <= tol, "{i},{j}");
                }
            }
        }
    }

    #[test]
    fn the_largest_k_sums_exactly() {
        // k = MAX_K at the largest products: |dot| = 128 · 127 · 2^17 < 2^31 for the scalar
        // kernel and for the offset kernels, whose intermediates wrap and come back.
        let k = crate::MAX_K;
        for bits in [ActBits::Seven, ActBits::Eight] {
            let top = bits.max_code();
            let (x, w) = operands(&vec![top; k], 1, &vec![-128; 2 * k], 2, k, bits);
            let mut want = vec![0f32; 2];
            crate::matmul(Kernel::Scalar, &x, &w, &mut want);
            let exact = -128.0 * f64::from(top) * k as f64;
            assert_eq!(f64::from(want[0]), exact * f64::from(w.scale(0)));
            assert_kernels_equal_scalar(&x, &w, &format!("k = MAX_K, {bits:?}"));
        }
    }

    #[test]
    fn zero_and_non_finite_rows_give_zero_and_nan_outputs() {
        let k = 20;
        let mut x = vec![0.25f32; 3 * k];
        x[..k].fill(0.0);
        x[k + 3] = f32::NAN;
        let mut rng = Lcg(7);
        let w = Weights::new(&rng.codes(4 * k), &[0.1; 4], 4, k);
        for bits in [ActBits::Seven, ActBits::Eight] {
            let q = quantize_rows(&x, k, bits);
            for kernel in Kernel::available().into_iter().filter(|k| k.accepts(bits)) {
                let mut out = vec![1f32; 12];
                crate::matmul(kernel, &q, &w, &mut out);
                assert!(out[..4].iter().all(|&v| v == 0.0), "{kernel:?}");
                assert!(out[4..8].iter().all(|v| v.is_nan()), "{kernel:?}");
                assert!(out[8..].iter().all(|v| v.is_finite()), "{kernel:?}");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::from_name(k.name()), Some(k));
        }
        assert_eq!(Kernel::from_name("Amx"), None);
    }

    /// AMX is chosen first where it runs; where the CPU lacks it (or Linux refuses the tile
    /// state) this test says so and checks nothing more, so a run shows which it was.
    #[test]
    fn amx_is_the_best_kernel_where_it_runs() {
        if !Kernel::Amx.is_available() {
            eprintln!("skipped: no AMX-INT8 here (CPU or OS)");
            return;
        }
        for bits in [ActBits::Seven, ActBits::Eight] {
            assert_eq!(Kernel::best(bits), Kernel::Amx);
        }
        // Edges of its tiles: rows and columns either side of 16 and 32, k either side of 64.
        let mut rng = Lcg(0xa3);
        for (m, k, n) in
            [(1, 1, 1), (15, 63, 17), (16, 64, 16), (33, 65, 31), (32, 128, 32), (47, 200, 70)]
        {
            let (x, w) = operands(&rng.codes(m * k), m, &rng.codes(n * k), n, k, ActBits::Eight);
            let (mut want, mut got) = (vec![0f32; m * n], vec![f32::NAN; m * n]);
            crate::matmul(Kernel::Scalar, &x, &w, &mut want);
            crate::matmul(Kernel::Amx, &x, &w, &mut got);
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{m}x{k}x{n}");
            // The tile layout is made once and counted in the matrix's bytes.
            assert!(w.heap_bytes() >= 2 * n * k);
        }
    }

    #[test]
    fn best_accepts_its_bits_and_is_available() {
        for bits in [ActBits::Seven, ActBits::Eight] {
            let k = Kernel::best(bits);
            assert!(k.accepts(bits) && k.is_available(), "{k:?} for {bits:?}");
        }
        println!("kernels here: {:?}", Kernel::available());
    }

    #[test]
    fn the_build_decides_the_webassembly_kernels() {
        // Nothing detects them at run time, so a test run in a wasm engine shows which ran.
        let simd128 = cfg!(all(target_arch = "wasm32", target_feature = "simd128"));
        let relaxed =
            simd128 && cfg!(any(target_feature = "relaxed-simd", feature = "relaxed-simd"));
        let cases =
            [(Kernel::Scalar, true), (Kernel::Simd128, simd128), (Kernel::RelaxedSimd, relaxed)];
        for (kernel, present) in cases {
            assert_eq!(kernel.is_available(), present, "{kernel:?}");
        }
    }
}
