//! The two operands: activations quantized per row at run time ([`quantize_rows`] →
//! [`QuantizedRows`]) and a Linear layer's int8 weight with its per-row scales ([`Weights`]), both
//! stored with rows padded to [`K_ALIGN`] bytes so that every kernel reads whole vectors.

use std::sync::OnceLock;

use crate::{K_ALIGN, MAX_K};

/// How many bits an activation code uses: symmetric, so ±63 or ±127.
///
/// Seven bits exist for the dot-product instructions whose second operand must be a 7-bit
/// unsigned value (WebAssembly's `i32x4.relaxed_dot_i8x16_i7x16_add_s`, x86's `vpmaddubsw`
/// without saturation): a code in [-63, 63] plus 64 lies in [1, 127]. What the lost bit costs in
/// accuracy is measured by the crate's `accuracy` test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActBits {
    /// Codes in [-63, 63].
    Seven,
    /// Codes in [-127, 127] (never -128, as weights by `st5 quantize`).
    Eight,
}

impl ActBits {
    /// The largest code magnitude.
    pub fn max_code(self) -> i8 {
        match self {
            ActBits::Seven => 63,
            ActBits::Eight => 127,
        }
    }
}

/// Rows of activations as int8 codes with one f32 scale and one zero point per row: row `i`'s
/// value `j` is about `(codes[i][j] - zeros[i]) * scales[i]`. Built by [`quantize_rows`] (zero
/// points 0) or [`quantize_rows_asymmetric`] only, so its codes are within the range the kernels
/// rely on: [-63, 63] or [-64, 63] for 7 bits, [-127, 127] for 8.
#[derive(Clone, Debug)]
pub struct QuantizedRows {
    /// `rows` rows of `stride` codes; the `stride - cols` codes after each row are 0.
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Each row's zero point, in [-64, 63].
    zeros: Vec<i32>,
    rows: usize,
    cols: usize,
    stride: usize,
    bits: ActBits,
}

/// Quantizes each row of `x` (row-major, `cols` values a row) symmetrically to `bits`: the
/// row's scale is its largest magnitude over the largest code, and each code is `x` times the
/// inverse of that scale, rounded to the nearest integer (ties to even).
///
/// Defined results for the edge cases rather than an error, so that a forward pass behaves as
/// its f32 twin would:
/// - a row of zeros, or one whose largest magnitude is so small (below about 1e-36) that its
///   scale or the scale's inverse leaves f32, gets codes 0 and scale 0: its outputs are 0;
/// - a row holding NaN or ±infinity gets codes 0 and scale NaN, so every output of that row is
///   NaN, as an f32 product with such a row would be NaN or infinite rather than a number.
///
/// # Panics
/// If `cols` is 0 or above [`MAX_K`], or `x.len()` is not a multiple of `cols`.
pub fn quantize_rows(x: &[f32], cols: usize, bits: ActBits) -> QuantizedRows {
    let (mut codes, mut scales, stride) = zeroed_rows(x, cols);
    let rows = scales.len();
    let max_code = f32::from(bits.max_code());
    // Rounding in two additions that vectorise (`f32::round` is a libm call per value on x86-64
    // without SSE4.1): for |y| < 2²², the sum y + 1.5 · 2²³ lies in [2²³, 2²⁴), where f32 has no
    // fraction bits, so the addition itself rounds y to an integer (to nearest, ties to even,
    // IEEE 754's default), and subtracting 1.5 · 2²³ again is exact.
    const ROUND: f32 = 12_582_912.0;
    for (i, row) in x.chunks_exact(cols).enumerate() {
        // The largest magnitude by integer maximum of the bits without the sign, which keeps a
        // NaN (its bits are above infinity's) where a float maximum would drop it.
        let top_bits = row.iter().fold(0u32, |a, v| a.max(v.to_bits() & 0x7fff_ffff));
        if top_bits >= f32::INFINITY.to_bits() {
            scales[i] = f32::NAN;
            continue;
        }
        let amax = f32::from_bits(top_bits);
        let (scale, inverse) = (amax / max_code, max_code / amax);
        if scale == 0.0 || !inverse.is_finite() {
            continue;
        }
        scales[i] = scale;
        for (q, &v) in codes[i * stride..].iter_mut().zip(row) {
            // |v · inverse| <= max_code up to one rounding; the clamp keeps a last-ulp
            // overshoot inside the range the 7-bit kernels rely on.
            let y = (v * inverse).clamp(-max_code, max_code);
            *q = ((y + ROUND) - ROUND) as i8;
        }
    }
    let zeros = vec![0; rows];
    QuantizedRows { codes, scales, zeros, rows, cols, stride, bits }
}

/// Quantizes each row of `x` (row-major, `cols` values a row) asymmetrically to 7-bit codes in
/// [-64, 63]: the row's range, widened to include 0, is cut into 127 steps (`scale = (max -
/// min) / 127`), and the zero point is the code of 0.0, so 0 is exact and a row of one sign
/// (a ReLU's output) uses all 128 codes where the symmetric [`quantize_rows`] would use 64. The
/// codes fit every 7-bit kernel (offset by 64 they lie in [0, 127]); the kernels subtract the
/// zero point times the weight row's sum, exactly.
///
/// Edge cases as [`quantize_rows`]: a zero row, or one whose range is too small for a finite
/// inverse, gets codes 0, zero point 0 and scale 0; a row holding NaN or ±infinity gets scale NaN.
///
/// # Panics
/// As [`quantize_rows`].
pub fn quantize_rows_asymmetric(x: &[f32], cols: usize) -> QuantizedRows {
    // The same code compiled for AVX-512 where the CPU has it (the loops below vectorise to 16
    // lanes instead of SSE2's 4): every operation is exact per value, so the codes are the same
    // bits either way. At the default's widths quantizing took a third of the int8 product's time.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        #[target_feature(enable = "avx512f")]
        unsafe fn wide(x: &[f32], cols: usize) -> QuantizedRows {
            asymmetric(x, cols)
        }
        // SAFETY: the CPU has AVX-512F (detected above).
        return unsafe { wide(x, cols) };
    }
    asymmetric(x, cols)
}

/// [`quantize_rows_asymmetric`]'s body, inlined into each compiled copy.
#[inline(always)]
fn asymmetric(x: &[f32], cols: usize) -> QuantizedRows {
    let (mut codes, mut scales, stride) = zeroed_rows(x, cols);
    let rows = scales.len();
    let mut zeros = vec![0i32; rows];
    const ROUND: f32 = 12_582_912.0; // as in quantize_rows
    for (i, row) in x.chunks_exact(cols).enumerate() {
        let Some((lo, hi)) = finite_range(row) else {
            scales[i] = f32::NAN;
            continue;
        };
        let range = hi - lo;
        let (scale, inverse) = (range / 127.0, 127.0 / range);
        if scale == 0.0 || !inverse.is_finite() {
            continue;
        }
        // -lo · inverse lies in [0, 127], so the zero point lies in [-64, 63].
        let zero = ((-64.0 - lo * inverse + ROUND) - ROUND) as i32;
        scales[i] = scale;
        zeros[i] = zero;
        // round(v · inverse) read from the bits of v · inverse + ROUND: that sum lies in [2²³,
        // 2²⁴), where the low mantissa bits are the integer, so subtracting ROUND's bits gives
        // exactly `((v · inverse + ROUND) - ROUND) as i32` (|v · inverse| <= 127), in integer
        // operations that vectorise; a float-to-int conversion here was done one value at a time.
        let round_bits = ROUND.to_bits() as i32;
        for (q, &v) in codes[i * stride..].iter_mut().zip(row) {
            let y = (v * inverse + ROUND).to_bits() as i32 - round_bits + zero;
            *q = y.clamp(-64, 63) as i8;
        }
    }
    QuantizedRows { codes, scales, zeros, rows, cols, stride, bits: ActBits::Seven }
}

/// The smallest and largest value of `row` with 0 included, or `None` if it holds a NaN or an
/// infinity. Kept in 16 independent lanes (which vectorise) and combined at the end: the minimum
/// and maximum of finite values do not depend on the order (but for the sign of a zero, which
/// changes neither the scale nor the zero point computed from them).
#[inline(always)]
fn finite_range(row: &[f32]) -> Option<(f32, f32)> {
    const LANES: usize = 16;
    // `top`: the largest magnitude's bits, as integers (a NaN's are above infinity's).
    let (mut lo, mut hi, mut top) = ([0f32; LANES], [0f32; LANES], [0u32; LANES]);
    let mut step = |l: usize, v: f32| {
        lo[l] = if v < lo[l] { v } else { lo[l] };
        hi[l] = if v > hi[l] { v } else { hi[l] };
        top[l] = top[l].max(v.to_bits() & 0x7fff_ffff);
    };
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in chunk.iter().enumerate() {
            step(l, v);
        }
    }
    for (l, &v) in rest.iter().enumerate() {
        step(l, v);
    }
    if top.iter().any(|&t| t >= f32::INFINITY.to_bits()) {
        return None;
    }
    let lo = lo.iter().fold(0f32, |a, &v| if v < a { v } else { a });
    let hi = hi.iter().fold(0f32, |a, &v| if v > a { v } else { a });
    Some((lo, hi))
}

/// Zero codes (rows padded to [`K_ALIGN`]), zero scales and the row stride for `x`'s rows of
/// `cols`, after the checks both quantizers share.
fn zeroed_rows(x: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>, usize) {
    assert!((1..=MAX_K).contains(&cols), "a row has 1 to {MAX_K} values, not {cols}");
    assert!(x.len().is_multiple_of(cols), "{} values are not rows of {cols}", x.len());
    let rows = x.len() / cols;
    let stride = cols.next_multiple_of(K_ALIGN);
    (vec![0i8; rows * stride], vec![0f32; rows], stride)
}

impl QuantizedRows {
    /// The number of rows (`m` of the product).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row (`k` of the product).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The code range the rows were quantized to.
    pub fn bits(&self) -> ActBits {
        self.bits
    }

    /// Row `i`'s codes, without padding.
    pub fn row(&self, i: usize) -> &[i8] {
        &self.padded_row(i)[..self.cols]
    }

    /// Row `i`'s scale.
    pub fn scale(&self, i: usize) -> f32 {
        self.scales[i]
    }

    /// Row `i`'s zero point: 0 for [`quantize_rows`]' symmetric codes.
    pub fn zero(&self, i: usize) -> i32 {
        self.zeros[i]
    }

    /// Row `i`'s codes followed by zeros up to a multiple of [`K_ALIGN`].
    pub(crate) fn padded_row(&self, i: usize) -> &[i8] {
        &self.codes[i * self.stride..(i + 1) * self.stride]
    }

    /// Rows `i .. i + count`, each as [`padded_row`](Self::padded_row), one after another.
    #[cfg_attr(not(all(target_arch = "x86_64", target_os = "linux")), allow(dead_code))]
    pub(crate) fn padded_rows(&self, i: usize, count: usize) -> &[i8] {
        &self.codes[i * self.stride..(i + count) * self.stride]
    }
}

/// A Linear layer's int8 weight, `[n, k]` row-major (output rows, as in a checkpoint) with one f32
/// scale per output row: the compressed-tensors layout `st5 quantize --dtype int8` writes
/// (`weight` i8 `[out, in]`, `weight_scale` f32 `[out, 1]`). Built once at load: rows are padded
/// to [`K_ALIGN`] with zeros, and each row's code sum is kept for the kernels that offset the
/// activations into unsigned bytes.
#[derive(Clone, Debug)]
pub struct Weights {
    codes: Vec<i8>,
    scales: Vec<f32>,
    row_sums: Vec<i32>,
    n: usize,
    k: usize,
    stride: usize,
    /// The codes in the AMX kernel's tile layout, made on its first product with this matrix.
    amx: OnceLock<Vec<i8>>,
}

impl Weights {
    /// Wraps `codes` (`n` rows of `k`) and `scales` (`n`). Every i8 is accepted, -128 included:
    /// the kernels' bounds (crate documentation) hold for it.
    ///
    /// # Panics
    /// If `k` is 0 or above [`MAX_K`], or the lengths are not `n * k` and `n`.
    pub fn new(codes: &[i8], scales: &[f32], n: usize, k: usize) -> Weights {
        assert!((1..=MAX_K).contains(&k), "a row has 1 to {MAX_K} values, not {k}");
        assert_eq!(codes.len(), n * k, "weight codes are not {n} x {k}");
        assert_eq!(scales.len(), n, "weight scales are not {n}");
        let stride = k.next_multiple_of(K_ALIGN);
        let mut padded = vec![0i8; n * stride];
        for (dst, src) in padded.chunks_exact_mut(stride).zip(codes.chunks_exact(k)) {
            dst[..k].copy_from_slice(src);
        }
        let row_sums =
            codes.chunks_exact(k).map(|r| r.iter().map(|&c| i32::from(c)).sum()).collect();
        Weights {
            codes: padded,
            scales: scales.to_vec(),
            row_sums,
            n,
            k,
            stride,
            amx: OnceLock::new(),
        }
    }

    /// Output rows (`n` of the product).
    pub fn rows(&self) -> usize {
        self.n
    }

    /// Input values per row (`k` of the product).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Row `j`'s codes, without padding.
    pub fn row(&self, j: usize) -> &[i8] {
        &self.padded_row(j)[..self.k]
    }

    /// Row `j`'s scale.
    pub fn scale(&self, j: usize) -> f32 {
        self.scales[j]
    }

    /// The bytes this matrix holds on the heap: padded codes, scales and row sums (what a
    /// model's memory report counts).
    pub fn heap_bytes(&self) -> usize {
        let amx = self.amx.get().map_or(0, Vec::len);
        self.codes.len() + amx + 4 * (self.scales.len() + self.row_sums.len())
    }

    /// Row `j`'s code sum, exact (|sum| <= 128 · MAX_K).
    pub(crate) fn row_sum(&self, j: usize) -> i32 {
        self.row_sums[j]
    }

    /// The code sums and scales of rows `j0 .. j0 + len`: a tile's epilogue reads them as slices,
    /// with no bounds check per output.
    pub(crate) fn sums_and_scales(&self, j0: usize, len: usize) -> (&[i32], &[f32]) {
        (&self.row_sums[j0..j0 + len], &self.scales[j0..j0 + len])
    }

    /// Row `j`'s codes followed by zeros up to a multiple of [`K_ALIGN`].
    pub(crate) fn padded_row(&self, j: usize) -> &[i8] {
        &self.codes[j * self.stride..(j + 1) * self.stride]
    }

    /// Where the AMX kernel keeps this matrix in its tile layout (filled on first use).
    #[cfg_attr(not(all(target_arch = "x86_64", target_os = "linux")), allow(dead_code))]
    pub(crate) fn amx_tiles(&self) -> &OnceLock<Vec<i8>> {
        &self.amx
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::test_data::Lcg;

    #[test]
    fn quantize_rows_edge_cases() {
        let nan = f32::NAN;
        let inf = f32::INFINITY;
        // (row, bits, codes, scale; None = NaN)
        let cases: &[(&[f32], ActBits, &[i8], Option<f32>)] = &[
            (&[0.0, 0.0, -0.0], ActBits::Eight, &[0, 0, 0], Some(0.0)),
            (&[1.0, -0.25, 0.1], ActBits::Eight, &[127, -32, 13], Some(1.0 / 127.0)),
            (&[1.0, -0.25, 0.1], ActBits::Seven, &[63, -16, 6], Some(1.0 / 63.0)),
            (&[-2.0, 0.5], ActBits::Seven, &[-63, 16], Some(2.0 / 63.0)),
            (&[3.0], ActBits::Eight, &[127], Some(3.0 / 127.0)),
            // The largest finite magnitude still has a finite scale.
            (&[f32::MAX, 0.0], ActBits::Eight, &[127, 0], Some(f32::MAX / 127.0)),
            // A scale that underflows to 0, or whose inverse overflows, makes a zero row.
            (&[1e-45, 0.0], ActBits::Eight, &[0, 0], Some(0.0)),
            (&[-1e-37, 1e-38], ActBits::Eight, &[0, 0], Some(0.0)),
            // The smallest row that still quantizes.
            (&[-1e-36, 1e-38], ActBits::Seven, &[-63, 1], Some(1e-36 / 63.0)),
            // Ties go to the even code (scale 1, so the codes are the values rounded).
            (&[127.0, 2.5, -3.5, 0.5], ActBits::Eight, &[127, 2, -4, 0], Some(1.0)),
            (&[1.0, nan, 2.0], ActBits::Eight, &[0, 0, 0], None),
            (&[inf, 1.0], ActBits::Seven, &[0, 0], None),
            (&[1.0, -inf], ActBits::Eight, &[0, 0], None),
        ];
        for &(row, bits, codes, scale) in cases {
            let q = quantize_rows(row, row.len(), bits);
            assert_eq!((q.rows(), q.cols(), q.bits()), (1, row.len(), bits), "{row:?}");
            assert_eq!(q.row(0), codes, "{row:?} {bits:?}");
            assert!(q.padded_row(0)[row.len()..].iter().all(|&c| c == 0));
            match scale {
                Some(s) => assert_eq!(q.scale(0), s, "{row:?} {bits:?}"),
                None => assert!(q.scale(0).is_nan(), "{row:?} {bits:?}"),
            }
        }
    }

    #[test]
    fn quantize_rows_scales_each_row_on_its_own() {
        let x = [0.6, -1.0, 0.0, 0.0, 7.0, 7.0, -7.0, 3.0, -1.0];
        // (bits, codes of the three rows)
        let cases = [
            (ActBits::Eight, [[76, -127, 0], [0, 127, 127], [-127, 54, -18]]),
            (ActBits::Seven, [[38, -63, 0], [0, 63, 63], [-63, 27, -9]]),
        ];
        for (bits, rows) in cases {
            let q = quantize_rows(&x, 3, bits);
            assert_eq!(q.rows(), 3);
            for (i, codes) in rows.iter().enumerate() {
                assert_eq!(q.row(i), codes, "{bits:?} row {i}");
            }
            let top = f32::from(bits.max_code());
            assert_eq!([q.scale(0), q.scale(1), q.scale(2)], [1.0 / top, 7.0 / top, 7.0 / top]);
        }
    }

    /// The lane-split quantizer (and its AVX-512 copy, where this CPU has one) gives the bits
    /// of the plain loop it replaced, on random rows of every remainder length, rows with
    /// signed zeros, one sign only, and a NaN or an infinity anywhere.
    #[test]
    fn asymmetric_quantizer_equals_the_plain_loop() {
        fn plain(row: &[f32]) -> (Vec<i8>, f32, i32) {
            const ROUND: f32 = 12_582_912.0;
            let (mut lo, mut hi, mut finite) = (0f32, 0f32, true);
            for &v in row {
                finite &= v.is_finite();
                lo = lo.min(v);
                hi = hi.max(v);
            }
            if !finite {
                return (vec![0; row.len()], f32::NAN, 0);
            }
            let range = hi - lo;
            let (scale, inverse) = (range / 127.0, 127.0 / range);
            if scale == 0.0 || !inverse.is_finite() {
                return (vec![0; row.len()], 0.0, 0);
            }
            let zero = ((-64.0 - lo * inverse + ROUND) - ROUND) as i32;
            let codes = row
                .iter()
                .map(|&v| ((((v * inverse + ROUND) - ROUND) as i32 + zero).clamp(-64, 63)) as i8)
                .collect();
            (codes, scale, zero)
        }
        let mut rng = Lcg(5);
        let mut rows: Vec<Vec<f32>> = (1..=70)
            .chain([383, 384, 1536])
            .map(|len| (0..len).map(|_| rng.normal(2.0)).collect())
            .collect();
        rows.push(vec![-0.0, 0.0, -0.0]);
        rows.push((0..40).map(|i| i as f32 * 0.25).collect());
        rows.push((0..40).map(|i| -(i as f32) - 1.0).collect());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for at in [0, 15, 16, 33] {
                let mut row: Vec<f32> = (0..34).map(|_| rng.normal(1.0)).collect();
                row[at] = bad;
                rows.push(row);
            }
        }
        for row in &rows {
            let q = quantize_rows_asymmetric(row, row.len());
            let (codes, scale, zero) = plain(row);
            assert_eq!(q.row(0), &codes[..], "{} values", row.len());
            assert_eq!((q.scale(0).to_bits(), q.zero(0)), (scale.to_bits(), zero), "{row:?}");
        }
    }

    #[test]
    fn asymmetric_rows_use_every_code_and_keep_zero_exact() {
        let nan = f32::NAN;
        // (row, codes, zero point, scale; None = NaN)
        let cases: &[(&[f32], &[i8], i32, Option<f32>)] = &[
            // A ReLU's output: [0, 127] → codes [-64, 63], 0.0 at the zero point -64.
            (&[0.0, 127.0, 63.5, 1.0], &[-64, 63, 0, -63], -64, Some(1.0)),
            // All negative: the range is widened to 0.
            (&[-127.0, -1.0], &[-64, 62], 63, Some(1.0)),
            // Both signs: range 254, scale 2; 0.0 at code round(-64 + 63.5) = 0 (ties to even).
            (&[-127.0, 127.0, 0.0, 3.0], &[-64, 63, 0, 2], 0, Some(2.0)),
            (&[0.0, 0.0], &[0, 0], 0, Some(0.0)),
            (&[1.0, nan], &[0, 0], 0, None),
        ];
        for &(row, codes, zero, scale) in cases {
            let q = quantize_rows_asymmetric(row, row.len());
            assert_eq!(q.bits(), ActBits::Seven);
            assert_eq!((q.row(0), q.zero(0)), (codes, zero), "{row:?}");
            assert!(q.row(0).iter().all(|&c| (-64..=63).contains(&c)));
            match scale {
                Some(s) => assert_eq!(q.scale(0), s, "{row:?}"),
                None => assert!(q.scale(0).is_nan(), "{row:?}"),
            }
        }
        // Every value comes back within half a step.
        let row: Vec<f32> = (0..300).map(|i| ((i * 37) % 101) as f32 / 7.0 - 3.0).collect();
        let q = quantize_rows_asymmetric(&row, 300);
        for (j, &v) in row.iter().enumerate() {
            let back = (q.row(0)[j] as i32 - q.zero(0)) as f32 * q.scale(0);
            assert!((back - v).abs() <= 0.5001 * q.scale(0), "{v} came back as {back}");
        }
    }

    #[test]
    #[should_panic(expected = "not rows of 3")]
    fn quantize_rows_rejects_a_ragged_input() {
        quantize_rows(&[1.0; 4], 3, ActBits::Eight);
    }

    #[test]
    fn weights_pad_rows_and_sum_them() {
        let codes: Vec<i8> = (0..3 * 70).map(|i| (i % 256 - 128) as i8).collect();
        let w = Weights::new(&codes, &[1.0, 2.0, 3.0], 3, 70);
        for j in 0..3 {
            let row = &codes[j * 70..(j + 1) * 70];
            assert_eq!(w.row(j), row);
            assert_eq!(w.padded_row(j).len(), 128);
            assert!(w.padded_row(j)[70..].iter().all(|&c| c == 0));
            assert_eq!(w.row_sum(j), row.iter().map(|&c| i32::from(c)).sum::<i32>());
            assert_eq!(w.scale(j), (j + 1) as f32);
        }
    }
}
