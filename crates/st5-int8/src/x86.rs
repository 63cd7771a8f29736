//! x86-64 kernels, chosen at run time: AVX2 in two forms, AVX-512 VNNI and AVX-VNNI, each a
//! [`Dot`] step in the shared tiled loop.
//!
//! Intel's intrinsics guide for each instruction:
//! <https://www.intel.com/content/www/us/en/docs/intrinsics-guide/index.html>.

use core::arch::x86_64::*;

use crate::quant::{QuantizedRows, Weights};
use crate::tiles::{Dot, tiles};

/// The lanes of an i32x8 summed (wrapping, as every step before).
/// The lane sums of four i32x8 vectors `[a, b, c, d]`: three horizontal adds leave each 128-bit
/// half holding partial sums of all four, and the halves are added.
#[inline(always)]
unsafe fn sum4_i32x8(v: [__m256i; 4]) -> [i32; 4] {
    unsafe {
        let ab = _mm256_hadd_epi32(v[0], v[1]);
        let cd = _mm256_hadd_epi32(v[2], v[3]);
        let abcd = _mm256_hadd_epi32(ab, cd);
        let s = _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256::<1>(abcd));
        let mut out = [0i32; 4];
        _mm_storeu_si128(out.as_mut_ptr().cast(), s);
        out
    }
}

#[inline(always)]
unsafe fn sum_i32x8(a: __m256i) -> i32 {
    unsafe {
        let s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    }
}

/// AVX2, exact for any codes: 16 codes sign-extended to i16 (`vpmovsxbw`), `vpmaddwd` multiplies
/// them into i32 pairs (at most 2 · 128² = 2¹⁵, no saturation), `vpaddd` accumulates.
struct Avx2Madd;

impl Dot for Avx2Madd {
    const STEP: usize = 16;
    const OFFSET: i32 = 0;
    type X = __m256i;
    type W = __m256i;
    type Acc = __m256i;
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> __m256i {
        unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> __m256i {
        unsafe { Self::load_x(p) }
    }
    #[inline(always)]
    unsafe fn dot(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(x, w)) }
    }
    #[inline(always)]
    unsafe fn sum(acc: __m256i) -> i32 {
        unsafe { sum_i32x8(acc) }
    }
}

/// AVX2 on 7-bit activations: `vpmaddubsw` multiplies unsigned bytes by signed ones and adds
/// pairs into i16 with saturation; activations offset by 64 lie in [1, 127], so a pair is at most
/// 2 · 127 · 128 = 32512 and never saturates. `vpmaddwd` by ones widens pairs of those into i32.
struct Avx2Ubs;

impl Dot for Avx2Ubs {
    const STEP: usize = 32;
    const OFFSET: i32 = 64;
    type X = __m256i;
    type W = __m256i;
    type Acc = __m256i;
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> __m256i {
        unsafe { _mm256_add_epi8(_mm256_loadu_si256(p.cast()), _mm256_set1_epi8(64)) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> __m256i {
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn dot(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        unsafe {
            let pairs = _mm256_maddubs_epi16(x, w);
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
        }
    }
    #[inline(always)]
    unsafe fn sum(acc: __m256i) -> i32 {
        unsafe { sum_i32x8(acc) }
    }
}

/// AVX-512 VNNI: `vpdpbusd` multiplies unsigned bytes by signed ones and adds four products into
/// each i32 without saturation; activations are offset by 128 (`x ^ 0x80` as u8 is `x + 128`).
struct Avx512Vnni;

impl Dot for Avx512Vnni {
    const STEP: usize = 64;
    const OFFSET: i32 = 128;
    type X = __m512i;
    type W = __m512i;
    type Acc = __m512i;
    #[inline(always)]
    unsafe fn zero() -> __m512i {
        unsafe { _mm512_setzero_si512() }
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> __m512i {
        unsafe { _mm512_xor_si512(_mm512_loadu_si512(p.cast()), _mm512_set1_epi8(-128)) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> __m512i {
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i {
        unsafe { _mm512_dpbusd_epi32(acc, x, w) }
    }
    #[inline(always)]
    unsafe fn sum(acc: __m512i) -> i32 {
        unsafe { _mm512_reduce_add_epi32(acc) }
    }
    #[inline(always)]
    unsafe fn sum4(acc: [__m512i; 4]) -> [i32; 4] {
        unsafe {
            let halves = acc.map(|a| {
                _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a))
            });
            sum4_i32x8(halves)
        }
    }
}

/// AVX-VNNI: the VEX-encoded `vpdpbusd` on 32-byte vectors, for CPUs with VNNI but no AVX-512
/// (Alder Lake and later cores); as [`Avx512Vnni`] otherwise.
struct AvxVnni;

impl Dot for AvxVnni {
    const STEP: usize = 32;
    const OFFSET: i32 = 128;
    type X = __m256i;
    type W = __m256i;
    type Acc = __m256i;
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn load_x(p: *const i8) -> __m256i {
        unsafe { _mm256_xor_si256(_mm256_loadu_si256(p.cast()), _mm256_set1_epi8(-128)) }
    }
    #[inline(always)]
    unsafe fn load_w(p: *const i8) -> __m256i {
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn dot(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        unsafe { _mm256_dpbusd_avx_epi32(acc, x, w) }
    }
    #[inline(always)]
    unsafe fn sum(acc: __m256i) -> i32 {
        unsafe { sum_i32x8(acc) }
    }
}

/// A kernel's entry: the tiled loop compiled with the step's target features, called after
/// [`Kernel::is_available`](crate::Kernel::is_available) has detected them.
macro_rules! entry {
    ($name:ident, $features:literal, $dot:ty, $mr:literal, $nr:literal) => {
        pub(crate) fn $name(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
            #[target_feature(enable = $features)]
            unsafe fn run(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
                // SAFETY: this function has the step's features.
                unsafe { tiles::<$dot, $mr, $nr>(x, w, out) }
            }
            // SAFETY: `matmul` runs a kernel only where `is_available` detected its features.
            unsafe { run(x, w, out) }
        }
    };
}

// Tiles (rows × weight rows) sized to the 16 (AVX2) or 32 (AVX-512) vector registers:
// accumulators, one vector per weight row, one activation vector and a constant.
entry!(avx2, "avx2", Avx2Madd, 4, 2);
entry!(avx2_ubs, "avx2", Avx2Ubs, 4, 2);
entry!(avx512_vnni, "avx512f,avx512bw,avx512vnni", Avx512Vnni, 4, 4);
entry!(avx_vnni, "avx2,avxvnni", AvxVnni, 4, 2);
