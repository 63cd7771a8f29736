//! WebAssembly kernels, chosen when the module is built: SIMD128 always (the workspace builds
//! every wasm32 target with it), relaxed SIMD's integer dot product when `relaxed-simd` is a
//! target feature or this crate's feature.
//!
//! The instructions: <https://github.com/WebAssembly/spec/blob/main/proposals/simd/SIMD.md> and
//! <https://github.com/WebAssembly/relaxed-simd/blob/main/proposals/relaxed-simd/Overview.md>.

use core::arch::wasm32::*;

use crate::quant::{QuantizedRows, Weights};
use crate::tiles::{Dot, tiles};

/// The lane sums of four i32x4 vectors `[a, b, c, d]`: interleaved and added twice (a 4 × 4
/// transpose folded into the additions), six shuffles and three adds for four sums.
#[inline(always)]
fn sum4_i32x4(v: [v128; 4]) -> [i32; 4] {
    // [a0+a2, b0+b2, a1+a3, b1+b3] and the same for c, d.
    let ab =
        i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(v[0], v[1]), i32x4_shuffle::<2, 6, 3, 7>(v[0], v[1]));
    let cd =
        i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(v[2], v[3]), i32x4_shuffle::<2, 6, 3, 7>(v[2], v[3]));
    let s = i32x4_add(i32x4_shuffle::<0, 1, 4, 5>(ab, cd), i32x4_shuffle::<2, 3, 6, 7>(ab, cd));
    [
        i32x4_extract_lane::<0>(s),
        i32x4_extract_lane::<1>(s),
        i32x4_extract_lane::<2>(s),
        i32x4_extract_lane::<3>(s),
    ]
}

/// The lanes of an i32x4 summed (wrapping, as every step before).
#[inline(always)]
fn sum_i32x4(a: v128) -> i32 {
    i32x4_extract_lane::<0>(a)
        .wrapping_add(i32x4_extract_lane::<1>(a))
        .wrapping_add(i32x4_extract_lane::<2>(a))
        .wrapping_add(i32x4_extract_lane::<3>(a))
}

/// SIMD128, exact for any codes: 8 codes sign-extended to i16 at load (`v128.load8x8_s`),
/// `i32x4.dot_i16x8_s` multiplies them into i32 pairs (at most 2 · 128² = 2¹⁵), `i32x4.add`
/// accumulates.
struct Simd128;

impl Dot for Simd128 {
    const STEP: usize = 8;
    const OFFSET: i32 = 0;
    type X = v128;
    type W = v128;
    type Acc = v128;
    #[inline(always)]
    unsafe fn zero() -> v128 {
        i32x4_splat(0)
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> v128 {
        unsafe { i16x8_load_extend_i8x8(p) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> v128 {
        unsafe { i16x8_load_extend_i8x8(p) }
    }
    #[inline(always)]
    unsafe fn dot(acc: v128, x: v128, w: v128) -> v128 {
        i32x4_add(acc, i32x4_dot_i16x8(x, w))
    }
    #[inline(always)]
    unsafe fn sum(acc: v128) -> i32 {
        sum_i32x4(acc)
    }
    #[inline(always)]
    unsafe fn sum4(acc: [v128; 4]) -> [i32; 4] {
        sum4_i32x4(acc)
    }
}

/// Relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, c)` reads `a` as signed bytes and
/// `b` as signed or unsigned at the engine's choice, so its result is defined only where `b`'s
/// top bit is clear, and its pairs of products may saturate or wrap in i16. Weights are `a`;
/// 7-bit activations offset by 64 are `b`, in [1, 127]: top bit clear, and a pair is at most
/// 2 · 128 · 127 = 32512 < 2¹⁵, so every engine computes the same exact sums.
///
/// Engines seen: Chromium 156 passes the crate's tests with both of V8's compilers (default, and
/// `--js-flags=--liftoff-only`). Node 20 (V8 11.3, relaxed SIMD behind
/// `--experimental-wasm-relaxed-simd`) computes wrong sums in its baseline compiler, Liftoff
/// (`--liftoff-only` fails the bit-for-bit tests, `--no-liftoff` passes), so a default run there
/// fails once a test runs before the kernel is tiered up.
#[cfg(any(target_feature = "relaxed-simd", feature = "relaxed-simd"))]
struct RelaxedSimd;

#[cfg(any(target_feature = "relaxed-simd", feature = "relaxed-simd"))]
impl Dot for RelaxedSimd {
    const STEP: usize = 16;
    const OFFSET: i32 = 64;
    type X = v128;
    type W = v128;
    type Acc = v128;
    #[inline(always)]
    unsafe fn zero() -> v128 {
        i32x4_splat(0)
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> v128 {
        unsafe { i8x16_add(v128_load(p.cast()), i8x16_splat(64)) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> v128 {
        unsafe { v128_load(p.cast()) }
    }
    #[inline(always)]
    #[allow(unused_unsafe)] // safe to call where relaxed SIMD is a global target feature
    unsafe fn dot(acc: v128, x: v128, w: v128) -> v128 {
        unsafe { i32x4_relaxed_dot_i8x16_i7x16_add(w, x, acc) }
    }
    #[inline(always)]
    unsafe fn sum(acc: v128) -> i32 {
        sum_i32x4(acc)
    }
    #[inline(always)]
    unsafe fn sum4(acc: [v128; 4]) -> [i32; 4] {
        sum4_i32x4(acc)
    }
}

// Tiles (rows × weight rows) of 8 accumulators: V8 maps v128 values to x64's 16 xmm registers.
// 2 × 4 rather than 4 × 2 (the same loads and products a step) so that each row's four sums are
// reduced together (`sum4_i32x4`).
pub(crate) fn simd128(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    // SAFETY: SIMD128 is a global target feature of this build (the module's cfg).
    unsafe { tiles::<Simd128, 2, 4>(x, w, out) }
}

#[cfg(any(target_feature = "relaxed-simd", feature = "relaxed-simd"))]
pub(crate) fn relaxed_simd(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    #[target_feature(enable = "simd128,relaxed-simd")]
    unsafe fn run(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
        // SAFETY: this function has relaxed SIMD.
        unsafe { tiles::<RelaxedSimd, 2, 4>(x, w, out) }
    }
    // SAFETY: an engine without relaxed SIMD rejects the whole module when it validates it, so
    // if this runs, the instructions exist (the npm package loads the relaxed module only where
    // `WebAssembly.validate` accepts relaxed SIMD).
    unsafe { run(x, w, out) }
}
