//! AArch64 kernel, chosen at run time: `sdot` (the `dotprod` extension, Armv8.2 and later).
//!
//! `vdotq_s32` is not a stable intrinsic (Rust issue 117224), so the instruction is written as
//! inline assembly: <https://developer.arm.com/documentation/ddi0602/latest/SIMD-FP-Instructions/SDOT--vector---Dot-product-signed-arithmetic--vector-->.

use core::arch::aarch64::*;
use core::arch::asm;

use crate::quant::{QuantizedRows, Weights};
use crate::tiles::{Dot, tiles};

/// `sdot`: signed × signed bytes, four products added into each i32 lane without saturation,
/// exact for any codes.
struct Sdot;

impl Dot for Sdot {
    const STEP: usize = 16;
    const OFFSET: i32 = 0;
    type X = int8x16_t;
    type W = int8x16_t;
    type Acc = int32x4_t;
    #[inline(always)]
    unsafe fn zero() -> int32x4_t {
        unsafe { vdupq_n_s32(0) }
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> int8x16_t {
        unsafe { vld1q_s8(p) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> int8x16_t {
        unsafe { vld1q_s8(p) }
    }
    #[inline(always)]
    unsafe fn dot(mut acc: int32x4_t, x: int8x16_t, w: int8x16_t) -> int32x4_t {
        // SAFETY: register-only; the caller's function enables `dotprod`.
        unsafe {
            asm!(
                "sdot {acc:v}.4s, {x:v}.16b, {w:v}.16b",
                acc = inout(vreg) acc,
                x = in(vreg) x,
                w = in(vreg) w,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        acc
    }
    #[inline(always)]
    unsafe fn sum(acc: int32x4_t) -> i32 {
        unsafe { vaddvq_s32(acc) }
    }
}

pub(crate) fn sdot(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn run(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
        // SAFETY: this function has `dotprod`.
        unsafe { tiles::<Sdot, 4, 4>(x, w, out) }
    }
    // SAFETY: `matmul` runs a kernel only where `is_available` detected `dotprod`.
    unsafe { run(x, w, out) }
}
