//! The one register-tiled loop every SIMD kernel runs ([`tiles`]), over an instruction
//! family's dot-product step ([`Dot`]): below the kernels (`x86`, `wasm`, `arm`), which the
//! dispatcher in `kernel` calls, so that no module imports back the one that calls it.

use crate::quant::{QuantizedRows, Weights};
use crate::rescale;

/// One instruction family's step of the tiled loop in [`tiles`]: vectors of `STEP` codes of an
/// activation row and a weight row multiplied and added into a vector of i32 partial sums.
///
/// The methods are `unsafe` because they execute the family's instructions: callers run them
/// only inside a function compiled with (and a CPU that has) its target features, and pass
/// pointers to `STEP` readable codes.
pub(crate) trait Dot {
    /// Codes one step reads from each row; divides [`K_ALIGN`](crate::K_ALIGN).
    const STEP: usize;
    /// Added to every activation code before the product, for instructions that take it
    /// unsigned: the products then sum to `dot + OFFSET · Σ w`, and [`tiles`] subtracts the
    /// second term with the weight row's sum (exact; wrapping i32 arithmetic is exact modulo 2³²
    /// and the true dot fits in i32).
    const OFFSET: i32;
    /// A loaded (and offset) activation vector.
    type X: Copy;
    /// A loaded weight vector.
    type W: Copy;
    /// A vector of i32 partial sums.
    type Acc: Copy;
    unsafe fn zero() -> Self::Acc;
    unsafe fn load_x(p: *const i8) -> Self::X;
    unsafe fn load_w(p: *const i8) -> Self::W;
    unsafe fn dot(acc: Self::Acc, x: Self::X, w: Self::W) -> Self::Acc;
    /// The sum of the lanes (wrapping).
    unsafe fn sum(acc: Self::Acc) -> i32;
    /// The sums of four accumulators' lanes: families override it with one transposing
    /// reduction, which costs about a third of four [`sum`](Self::sum)s. At `k` = 384 (the
    /// built-in default's width) a 4 × 4 AVX-512 tile spent about as many instructions reducing
    /// its accumulators as multiplying.
    #[inline(always)]
    unsafe fn sum4(acc: [Self::Acc; 4]) -> [i32; 4] {
        unsafe { acc.map(|a| Self::sum(a)) }
    }
    /// The sums of `N` accumulators' lanes, four at a time where [`sum4`](Self::sum4) applies.
    #[inline(always)]
    unsafe fn sums<const N: usize>(acc: &[Self::Acc; N]) -> [i32; N] {
        let mut out = [0; N];
        let mut c = 0;
        while c + 4 <= N {
            let four = unsafe { Self::sum4([acc[c], acc[c + 1], acc[c + 2], acc[c + 3]]) };
            out[c..c + 4].copy_from_slice(&four);
            c += 4;
        }
        while c < N {
            out[c] = unsafe { Self::sum(acc[c]) };
            c += 1;
        }
        out
    }
}

/// Bytes of weight rows one pass over the activation rows reuses: a block this size stays in a
/// core's L2 cache (256 KiB and up on x86-64 and Arm cores of the last decade) while every
/// activation tile passes over it.
const WEIGHT_BLOCK_BYTES: usize = 192 << 10;

/// The loop every SIMD kernel runs: `MR` activation rows against `NR` weight rows at a time, the
/// `MR · NR` accumulators in registers for the whole of `k`, each loaded vector used `NR` or `MR`
/// times; weight rows in blocks of [`WEIGHT_BLOCK_BYTES`], each block against all activation
/// rows. Edge tiles repeat the last row or column and store only what is inside.
///
/// # Safety
/// `D`'s instructions must be enabled in the caller (this is inlined into a `target_feature`
/// function) and supported by the CPU.
#[inline(always)]
pub(crate) unsafe fn tiles<D: Dot, const MR: usize, const NR: usize>(
    x: &QuantizedRows,
    w: &Weights,
    out: &mut [f32],
) {
    let (m, n) = (x.rows(), w.rows());
    if m == 0 || n == 0 {
        return;
    }
    let padded = x.padded_row(0).len();
    debug_assert!(padded == w.padded_row(0).len() && padded.is_multiple_of(D::STEP));
    let block = (WEIGHT_BLOCK_BYTES / padded / NR).max(1) * NR;
    for b0 in (0..n).step_by(block) {
        let b1 = (b0 + block).min(n);
        for i0 in (0..m).step_by(MR) {
            let xr: [*const i8; MR] =
                core::array::from_fn(|r| x.padded_row((i0 + r).min(m - 1)).as_ptr());
            for j0 in (b0..b1).step_by(NR) {
                let wr: [*const i8; NR] =
                    core::array::from_fn(|c| w.padded_row((j0 + c).min(n - 1)).as_ptr());
                // SAFETY: the caller's contract; every pointer is to a padded row of `padded`
                // codes, read in steps of `D::STEP` that divide it.
                unsafe {
                    let mut acc = [[D::zero(); NR]; MR];
                    let mut p = 0;
                    while p < padded {
                        let wv: [D::W; NR] = core::array::from_fn(|c| D::load_w(wr[c].add(p)));
                        for r in 0..MR {
                            let xv = D::load_x(xr[r].add(p));
                            for c in 0..NR {
                                acc[r][c] = D::dot(acc[r][c], xv, wv[c]);
                            }
                        }
                        p += D::STEP;
                    }
                    let cols = (b1 - j0).min(NR);
                    let (row_sums, scales) = w.sums_and_scales(j0, cols);
                    for (r, acc_row) in acc.iter().enumerate().take(m - i0) {
                        let i = i0 + r;
                        // The offset and the row's zero point, both times Σ w, come off each sum.
                        let (zero, scale) = (D::OFFSET + x.zero(i), x.scale(i));
                        let sums = D::sums(acc_row);
                        let outs = &mut out[i * n + j0..i * n + j0 + cols];
                        let columns = outs.iter_mut().zip(&sums).zip(row_sums).zip(scales);
                        for (((o, &s), &row_sum), &w_scale) in columns {
                            *o =
                                rescale(s.wrapping_sub(zero.wrapping_mul(row_sum)), scale, w_scale);
                        }
                    }
                }
            }
        }
    }
}
