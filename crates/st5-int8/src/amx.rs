//! x86-64 AMX-INT8 on Linux: `tdpbssd` multiplies a tile of 16 activation rows × 64 codes by a
//! tile of 64 codes × 16 weight rows, signed × signed, into 16 × 16 exact i32 sums, about eight
//! times the multiply-adds per cycle of AVX-512 VNNI. Stable Rust has no AMX intrinsics, so each
//! instruction is one `asm!` line; the tile registers are not the compiler's, and hold their
//! values between the lines.
//!
//! - **Permission.** Linux (5.16 and later) gives a process the tile state only when it asks
//!   (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); [`available`] asks once, and a
//!   refusal (an older kernel, or a policy) leaves the kernel unavailable, so that
//!   [`Kernel::best`](crate::Kernel::best) picks VNNI instead.
//! - **Layout.** A weight tile holds four consecutive codes of each of 16 weight rows per 64-byte
//!   row (`B[r][4c + t] = W[j0 + c][k0 + 4r + t]`, the VNNI layout AMX takes): [`pack`] rewrites
//!   a matrix so on its first AMX product, kept beside its codes ([`Weights`]) and counted in its
//!   heap bytes. Activation tiles are loaded straight
//!   from [`QuantizedRows`], whose rows are 64-byte multiples.
//! - **Exactness.** The sums are the exact i32 dot products (the crate's bounds), given to the
//!   same zero-point correction and [`rescale`] as the scalar kernel: equal bit for bit.
//!
//! Intel's Architecture Instruction Set Extensions reference, chapter 3 (AMX).

use core::arch::asm;
use std::sync::OnceLock;

use crate::quant::{QuantizedRows, Weights};
use crate::rescale;

/// Rows of a tile, and its bytes per row.
const ROWS: usize = 16;
const ROW_BYTES: usize = 64;
/// Bytes of one weight tile.
const TILE: usize = ROWS * ROW_BYTES;

/// Whether the CPU has AMX-TILE and AMX-INT8 and Linux lets this process use the tile state.
pub(crate) fn available() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| {
        // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8.
        let leaf = core::arch::x86_64::__cpuid_count(7, 0);
        let cpu = (leaf.edx >> 24) & 0b11 == 0b11;
        cpu && request_tile_permission()
    })
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: 0 when granted.
fn request_tile_permission() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: a Linux system call that only changes which register state the process may use;
    // `syscall` clobbers rcx and r11.
    unsafe {
        asm!("syscall", inlateout("rax") SYS_ARCH_PRCTL => ret, in("rdi") ARCH_REQ_XCOMP_PERM,
             in("rsi") XFEATURE_XTILEDATA, lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret == 0
}

/// The weight tiles of `w` (`n` rows, `stride` codes a row, a multiple of 64): for each pair of
/// 16-row column blocks (the last pair and block filled with zero rows), for each 64-code step of
/// `k`, the two blocks' tiles one after the other.
pub(crate) fn pack(w: &Weights) -> Vec<i8> {
    let (n, stride) = (w.rows(), w.padded_row(0).len());
    let pairs = n.div_ceil(2 * ROWS);
    let steps = stride / ROW_BYTES;
    let mut out = vec![0i8; pairs * steps * 2 * TILE];
    for j in 0..n {
        let (block, c) = (j / ROWS, j % ROWS);
        let (pair, half) = (block / 2, block % 2);
        let row = w.padded_row(j);
        for s in 0..steps {
            let tile = &mut out[((pair * steps + s) * 2 + half) * TILE..][..TILE];
            for r in 0..ROWS {
                let src = &row[s * ROW_BYTES + 4 * r..][..4];
                tile[r * ROW_BYTES + 4 * c..][..4].copy_from_slice(src);
            }
        }
    }
    out
}

/// The tile configuration (palette 1): tiles 0-3 the 16 × 16 i32 sums of a 32 × 32 block, 4-5
/// two activation tiles, 6-7 two weight tiles, each 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

impl Config {
    fn new() -> Self {
        let mut c = [0u8; 64];
        c[0] = 1;
        for t in 0..8 {
            c[16 + 2 * t..18 + 2 * t].copy_from_slice(&(ROW_BYTES as u16).to_le_bytes());
            c[48 + t] = ROWS as u8;
        }
        Config(c)
    }
}

/// The kernel: 32 activation rows × 32 weight rows a block, four sum tiles over the whole of
/// `k`; edge rows come from a zero-filled copy, edge columns from the packing's zero rows.
pub(crate) fn amx(x: &QuantizedRows, w: &Weights, out: &mut [f32]) {
    let (m, n) = (x.rows(), w.rows());
    if m == 0 || n == 0 {
        return;
    }
    let tiles = w.amx_tiles().get_or_init(|| pack(w));
    let stride = x.padded_row(0).len();
    let steps = stride / ROW_BYTES;
    let mut edge = vec![0i8; 2 * ROWS * stride];
    let mut sums = [[0i32; 2 * ROWS]; 2 * ROWS];
    let config = Config::new();
    // SAFETY: `matmul` runs this kernel only where `available` found AMX and the permission
    // granted; every tile load reads 16 rows of 64 bytes inside `x`'s codes, `edge` or `tiles`
    // (a block of rows past `m` is read from `edge`), and every store writes inside `sums`.
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
        for i0 in (0..m).step_by(2 * ROWS) {
            let rows = (m - i0).min(2 * ROWS);
            let a = if rows == 2 * ROWS {
                x.padded_rows(i0, rows).as_ptr()
            } else {
                edge.fill(0);
                for r in 0..rows {
                    edge[r * stride..(r + 1) * stride].copy_from_slice(x.padded_row(i0 + r));
                }
                edge.as_ptr()
            };
            let a1 = a.add(ROWS * stride);
            for pair in 0..n.div_ceil(2 * ROWS) {
                let b = tiles.as_ptr().add(pair * steps * 2 * TILE);
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    options(nostack, nomem)
                );
                for s in 0..steps {
                    let (k0, b0) = (s * ROW_BYTES, b.add(s * 2 * TILE));
                    asm!(
                        "tileloadd tmm4, [{a0} + {sa}*1]",
                        "tileloadd tmm5, [{a1} + {sa}*1]",
                        "tileloadd tmm6, [{b0} + {sb}*1]",
                        "tileloadd tmm7, [{b1} + {sb}*1]",
                        "tdpbssd tmm0, tmm4, tmm6",
                        "tdpbssd tmm1, tmm4, tmm7",
                        "tdpbssd tmm2, tmm5, tmm6",
                        "tdpbssd tmm3, tmm5, tmm7",
                        a0 = in(reg) a.add(k0),
                        a1 = in(reg) a1.add(k0),
                        b0 = in(reg) b0,
                        b1 = in(reg) b0.add(TILE),
                        sa = in(reg) stride,
                        sb = in(reg) ROW_BYTES,
                        options(nostack, readonly),
                    );
                }
                let c = sums.as_mut_ptr().cast::<i32>();
                asm!(
                    "tilestored [{c0} + {sc}*1], tmm0",
                    "tilestored [{c1} + {sc}*1], tmm1",
                    "tilestored [{c2} + {sc}*1], tmm2",
                    "tilestored [{c3} + {sc}*1], tmm3",
                    c0 = in(reg) c,
                    c1 = in(reg) c.add(ROWS),
                    c2 = in(reg) c.add(ROWS * 2 * ROWS),
                    c3 = in(reg) c.add(ROWS * 2 * ROWS + ROWS),
                    sc = in(reg) 2 * ROWS * 4,
                    options(nostack),
                );
                let j0 = pair * 2 * ROWS;
                let cols = (n - j0).min(2 * ROWS);
                let (row_sums, scales) = w.sums_and_scales(j0, cols);
                for (r, sum_row) in sums.iter().enumerate().take(rows) {
                    let i = i0 + r;
                    let (zero, scale) = (x.zero(i), x.scale(i));
                    let outs = &mut out[i * n + j0..i * n + j0 + cols];
                    for (((o, &s), &row_sum), &w_scale) in
                        outs.iter_mut().zip(sum_row).zip(row_sums).zip(scales)
                    {
                        *o = rescale(s.wrapping_sub(zero.wrapping_mul(row_sum)), scale, w_scale);
                    }
                }
            }
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}
