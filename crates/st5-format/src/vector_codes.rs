//! Quantized index vectors: the searchable form of a [`VectorIndex`] that holds `int8` or
//! `binary` codes instead of f32, and the exact rescoring that follows a search over them.
//!
//! - `int8`: per-vector symmetric scale `s = max|v| / 127`, `q = round(v / s)`.
//! - `binary`: sign bits, with per-vector scale `s = mean|v|` (the L1-optimal scale of a sign
//!   vector, so that vectors of different spread compare fairly); the query stays f32, so a
//!   score is the asymmetric ±1 dot product `s · Σ sign(v_d) q_d`.
//!
//! Codes are packed into 32-bit words as *planes*: with `per = 32 / bits` values per word and
//! `W = ceil(dim / per)` words per vector, dimension `d` is stored in word `d % W` at bit offset
//! `(d / W) · bits`. Unpacking a row with one shift per plane and a mask then gives the dims in
//! order `plane · W + word` = `d`, so a device can unpack whole `[rows, W]` blocks with one
//! broadcast shift and multiply them by the query without any interleaving (st5-core's index).
//! Stored values are unsigned: `u = q + 128` for int8 and `u = bit` for binary, decoded as
//! `v ≈ s · (a·u + c)` with `(a, c)` from [`Packing::affine`]; padding dims decode to 0 for int8
//! and meet zero query entries for binary.
//!
//! [`VectorIndex`]: https://docs.rs/st5-core (st5_core::VectorIndex)

use serde::{Deserialize, Serialize};

use crate::by_name::by_name;

/// Each row of row-major `[n, dim]` values scaled to unit length, in place (a row of zeros stays
/// zero): how an index's vectors and queries are made unit before they are searched by dot
/// product (a model without a Normalize module, searched by cosine).
pub fn l2_normalize_rows(data: &mut [f32], dim: usize) {
    for row in data.chunks_mut(dim.max(1)) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        row.iter_mut().for_each(|x| *x /= norm);
    }
}

/// How an index stores its searchable vectors; chosen when the index is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantize {
    /// f32 vectors, searched exactly: 4 bytes a dimension.
    #[default]
    None,
    /// int8 codes with a per-vector scale: 1 byte a dimension (+4 bytes a vector), rescored.
    Int8,
    /// Sign bits with a per-vector scale: 1 bit a dimension (+4 bytes a vector), rescored.
    Binary,
}

impl Quantize {
    pub const ALL: [Quantize; 3] = [Quantize::None, Quantize::Int8, Quantize::Binary];

    pub fn name(self) -> &'static str {
        match self {
            Quantize::None => "none",
            Quantize::Int8 => "int8",
            Quantize::Binary => "binary",
        }
    }

    /// The packed form, or `None` for f32 vectors.
    pub fn packing(self) -> Option<Packing> {
        match self {
            Quantize::None => None,
            Quantize::Int8 => Some(Packing::Int8),
            Quantize::Binary => Some(Packing::Binary),
        }
    }

    /// Bytes one vector of width `dim` takes in the searchable part (codes and scale).
    pub fn bytes_per_vector(self, dim: usize) -> usize {
        match self.packing() {
            None => 4 * dim,
            Some(p) => 4 * p.words(dim) + 4,
        }
    }

    /// Candidates searched per result before exact rescoring. int8 codes keep the order of close
    /// neighbours nearly intact: 4 gave recall@10 1.000 on 100k and 1M real vectors
    /// (docs/search-at-scale.md). Binary codes blur it most where the corpus is one dense domain
    /// of short texts: at 16, recall@10 was 0.984 on 1M real vectors and 0.947 on 20k short
    /// review snippets, so binary searches 32 candidates a result (rescoring 320 rows for k = 10
    /// costs far less than the scan).
    pub fn default_oversample(self) -> usize {
        match self {
            Quantize::None => 1,
            Quantize::Int8 => 4,
            Quantize::Binary => 32,
        }
    }
}

by_name!(Quantize, "index quantization", "none, int8 or binary");

/// A packed code format (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    Int8,
    Binary,
}

impl Packing {
    /// Bits per stored dimension.
    pub fn bits(self) -> u32 {
        match self {
            Packing::Int8 => 8,
            Packing::Binary => 1,
        }
    }

    /// Values per 32-bit word (the number of planes).
    pub fn planes(self) -> usize {
        32 / self.bits() as usize
    }

    /// 32-bit words per vector of width `dim`.
    pub fn words(self, dim: usize) -> usize {
        dim.div_ceil(self.planes())
    }

    /// The mask of one stored value.
    pub fn mask(self) -> i32 {
        ((1u64 << self.bits()) - 1) as i32
    }

    /// `(a, c)` such that a stored value `u` decodes to `scale · (a·u + c)`.
    pub fn affine(self) -> (f32, f32) {
        match self {
            Packing::Int8 => (1.0, -128.0),
            Packing::Binary => (2.0, -1.0),
        }
    }

    /// Packs row-major `vectors` of width `dim` (finite; checked by the caller).
    pub fn encode(self, dim: usize, vectors: &[f32]) -> Codes {
        let w = self.words(dim);
        let n = vectors.len() / dim;
        let mut words = vec![0i32; n * w];
        let mut scales = Vec::with_capacity(n);
        // Int8 padding dims hold u = 128 (the value 0).
        let pad = match self {
            Packing::Int8 => 128u32,
            Packing::Binary => 0,
        };
        for (row, out) in vectors.chunks(dim).zip(words.chunks_mut(w)) {
            let scale = match self {
                Packing::Int8 => row.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0,
                Packing::Binary => row.iter().map(|x| x.abs()).sum::<f32>() / dim as f32,
            };
            scales.push(scale);
            for d in 0..w * self.planes() {
                let u = match (self, row.get(d)) {
                    (_, None) => pad,
                    (Packing::Int8, Some(_)) if scale == 0.0 => 128,
                    (Packing::Int8, Some(&x)) => {
                        ((x / scale).round().clamp(-127.0, 127.0) as i32 + 128) as u32
                    }
                    (Packing::Binary, Some(&x)) => u32::from(x > 0.0),
                };
                let word = &mut out[d % w];
                *word = (*word as u32 | (u << ((d / w) as u32 * self.bits()))) as i32;
            }
        }
        Codes { words, scales }
    }

    /// The stored value of dimension `d` in one vector's words.
    fn value(self, words: &[i32], d: usize) -> u32 {
        let w = words.len();
        (words[d % w] as u32 >> ((d / w) as u32 * self.bits())) & self.mask() as u32
    }

    /// One vector decoded to f32 (`dim` values).
    pub fn decode(self, words: &[i32], scale: f32, dim: usize) -> Vec<f32> {
        let (a, c) = self.affine();
        (0..dim).map(|d| scale * (a * self.value(words, d) as f32 + c)).collect()
    }

    /// The approximate scores of every coded vector (`words` `[n, W]`, `scales` `[n]`) against
    /// `query` (width `dim`), appended to `out`: the CPU's scan, equal to [`score`](Self::score)
    /// per row up to float summation order. int8 multiplies each plane's bytes by that plane's
    /// slice of the query in 8-word lanes (which LLVM vectorises, SIMD128 in wasm); binary looks
    /// each byte's 8 bits up in a table of partial sums of the query (`W·4·256` floats, 48 KB
    /// for dim 384), 4 lookups a word instead of 32 multiply-adds.
    pub fn scan(self, words: &[i32], scales: &[f32], query: &[f32], out: &mut Vec<f32>) {
        let dim = query.len();
        let w = self.words(dim);
        let (a, c) = self.affine();
        let offset = c * query.iter().sum::<f32>();
        // The query in plane order, zero-padded: plane j's slice is planes[j*W..(j+1)*W].
        let mut planes = query.to_vec();
        planes.resize(self.planes() * w, 0.0);
        match self {
            Packing::Int8 => {
                const LANES: usize = 8;
                let (p0, rest) = planes.split_at(w);
                let (p1, rest) = rest.split_at(w);
                let (p2, p3) = rest.split_at(w);
                // Bytes as i32 (exact, and the conversion SIMD has: i32 → f32).
                let byte = |x: i32, at: u32| ((x >> at) & 255) as f32;
                let whole = w / LANES * LANES;
                for (row, &scale) in words.chunks_exact(w).zip(scales) {
                    let mut acc = [0f32; LANES];
                    let lanes = row
                        .chunks_exact(LANES)
                        .zip(p0.chunks_exact(LANES))
                        .zip(p1.chunks_exact(LANES))
                        .zip(p2.chunks_exact(LANES).zip(p3.chunks_exact(LANES)));
                    for (((x, q0), q1), (q2, q3)) in lanes {
                        for l in 0..LANES {
                            acc[l] += byte(x[l], 0) * q0[l]
                                + byte(x[l], 8) * q1[l]
                                + byte(x[l], 16) * q2[l]
                                + byte(x[l], 24) * q3[l];
                        }
                    }
                    let tail: f32 = (whole..w)
                        .map(|i| {
                            let x = row[i];
                            byte(x, 0) * p0[i]
                                + byte(x, 8) * p1[i]
                                + byte(x, 16) * p2[i]
                                + byte(x, 24) * p3[i]
                        })
                        .sum();
                    out.push(scale * (a * (acc.iter().sum::<f32>() + tail) + offset));
                }
            }
            Packing::Binary => {
                // table[(i*4 + g)*256 + byte] = Σ over the byte's set bits b of the query value
                // at plane 8g+b of word i.
                let mut table = vec![0f32; w * 4 * 256];
                for i in 0..w {
                    for g in 0..4 {
                        let t = &mut table[(i * 4 + g) * 256..][..256];
                        for b in 0..8 {
                            let v = planes[(8 * g + b) * w + i];
                            let bit = 1 << b;
                            for (byte, entry) in t.iter_mut().enumerate() {
                                if byte & bit != 0 {
                                    *entry += v;
                                }
                            }
                        }
                    }
                }
                for (row, &scale) in words.chunks_exact(w).zip(scales) {
                    let mut raw = 0f32;
                    for (i, &x) in row.iter().enumerate() {
                        let t = &table[i * 1024..][..1024];
                        let x = x as u32;
                        raw += t[(x & 255) as usize]
                            + t[256 + ((x >> 8) & 255) as usize]
                            + t[512 + ((x >> 16) & 255) as usize]
                            + t[768 + (x >> 24) as usize];
                    }
                    out.push(scale * (a * raw + offset));
                }
            }
        }
    }

    /// The approximate score of one coded vector against `query` (width `dim`): the plain
    /// reference that the device's scores and [`scan`](Self::scan) are tested against.
    pub fn score(self, words: &[i32], scale: f32, query: &[f32]) -> f32 {
        let (a, c) = self.affine();
        let raw: f32 = query.iter().enumerate().map(|(d, q)| self.value(words, d) as f32 * q).sum();
        scale * (a * raw + c * query.iter().sum::<f32>())
    }
}

/// Packed vectors, row-major: `words` `[n, W]` and one scale per vector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Codes {
    pub words: Vec<i32>,
    pub scales: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn random_unit(rng: &mut Rng, n: usize, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 * 2.0 - 1.0).collect();
        for row in v.chunks_mut(dim) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            row.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for q in Quantize::ALL {
            assert_eq!(q.to_string().parse::<Quantize>().unwrap(), q);
            assert_eq!(serde_json::to_string(&q).unwrap(), format!("\"{q}\""));
        }
        let err = "int4".parse::<Quantize>().unwrap_err().to_string();
        assert!(err.contains("int4") && err.contains("binary"), "{err}");
    }

    #[test]
    fn sizes_per_vector() {
        // (quantize, dim, words, bytes per vector)
        let cases = [
            (Quantize::None, 384, 0, 1536),
            (Quantize::Int8, 384, 96, 388),
            (Quantize::Int8, 5, 2, 12),
            (Quantize::Binary, 384, 12, 52),
            (Quantize::Binary, 33, 2, 12),
            (Quantize::Binary, 1, 1, 8),
        ];
        for (q, dim, words, bytes) in cases {
            assert_eq!(q.packing().map_or(0, |p| p.words(dim)), words, "{q} {dim}");
            assert_eq!(q.bytes_per_vector(dim), bytes, "{q} {dim}");
        }
    }

    #[test]
    fn int8_decodes_within_half_a_step_and_scores_match_the_decoded_vector() {
        let mut rng = Rng::new(1);
        for dim in [1, 3, 4, 7, 64, 385] {
            let v = random_unit(&mut rng, 5, dim);
            let codes = Packing::Int8.encode(dim, &v);
            let w = Packing::Int8.words(dim);
            let q = random_unit(&mut rng, 1, dim);
            for (i, row) in v.chunks(dim).enumerate() {
                let (words, s) = (&codes.words[i * w..(i + 1) * w], codes.scales[i]);
                let back = Packing::Int8.decode(words, s, dim);
                for (x, y) in row.iter().zip(&back) {
                    assert!((x - y).abs() <= s / 2.0 + 1e-7, "dim {dim}: {x} vs {y}");
                }
                let want: f32 = back.iter().zip(&q).map(|(a, b)| a * b).sum();
                assert!((Packing::Int8.score(words, s, &q) - want).abs() < 1e-4, "dim {dim}");
            }
        }
    }

    #[test]
    fn binary_keeps_signs_and_the_mean_magnitude() {
        let v = [0.5f32, -0.25, 0.0, -1.0, 2.0];
        let codes = Packing::Binary.encode(5, &v);
        assert_eq!(codes.scales, [0.75]);
        // Signs: +, -, (0 is not > 0) -, -, + → bits at dims 0 and 4; W = 1, so d = plane.
        assert_eq!(codes.words, [0b10001]);
        assert_eq!(
            Packing::Binary.decode(&codes.words, 0.75, 5),
            [0.75, -0.75, -0.75, -0.75, 0.75]
        );
        let q = [1.0, 1.0, 1.0, 1.0, 1.0];
        assert_eq!(Packing::Binary.score(&codes.words, 0.75, &q), -0.75);
    }

    #[test]
    fn the_scan_equals_the_reference_score() {
        let mut rng = Rng::new(3);
        for p in [Packing::Int8, Packing::Binary] {
            for dim in [1, 5, 31, 32, 33, 100, 384] {
                let v = random_unit(&mut rng, 9, dim);
                let q = random_unit(&mut rng, 1, dim);
                let codes = p.encode(dim, &v);
                let mut got = Vec::new();
                p.scan(&codes.words, &codes.scales, &q, &mut got);
                let w = p.words(dim);
                for (i, g) in got.iter().enumerate() {
                    let want = p.score(&codes.words[i * w..(i + 1) * w], codes.scales[i], &q);
                    assert!((g - want).abs() <= 1e-5, "{p:?} dim {dim} row {i}: {g} vs {want}");
                }
                assert_eq!(got.len(), 9);
            }
        }
    }

    #[test]
    fn planes_put_dimension_d_in_word_d_mod_w() {
        // dim 8, int8: W = 2; dims 0..8 → (word, plane) = (d % 2, d / 2).
        let v: Vec<f32> = (0..8).map(|d| d as f32 / 7.0).collect();
        let codes = Packing::Int8.encode(8, &v);
        let u = |d: usize| ((v[d] / codes.scales[0]).round() as i32 + 128) as u32;
        for d in 0..8 {
            let got = (codes.words[d % 2] as u32 >> (8 * (d / 2))) & 255;
            assert_eq!(got, u(d), "dim {d}");
        }
        // The zero vector has scale 0 and decodes to zeros.
        let zero = Packing::Int8.encode(3, &[0.0; 3]);
        assert_eq!(Packing::Int8.decode(&zero.words, zero.scales[0], 3), [0.0; 3]);
    }
}
