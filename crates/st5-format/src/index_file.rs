//! A saved search index (`st5 index build`): the documents, their f32 vectors for exact
//! rescoring, and, for a quantized index, the codes that are searched. One file, reused between
//! runs; everything in it is checked before anything is used, so a truncated or altered file is
//! refused with the reason instead of answering from garbage.
//!
//! Layout (integers little-endian):
//! ```text
//! "ST5INDEX" | u64 header length | header JSON | zero padding to a multiple of 8
//! | words  i32 [count, W]   (int8 / binary only; see vector_codes)
//! | scales f32 [count]      (int8 / binary only)
//! | vectors f32 [count, dim]
//! | texts  JSON array of count strings (texts_bytes long)
//! | SHA-256 of everything above (32 bytes)
//! ```
//! A query reads the f32 vectors from the memory map, only those of the candidates it rescores;
//! the pages that opening touched (the checksum reads every byte) are the kernel's page cache,
//! which it reclaims under pressure, not the process's own memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::files::FileBytes;
use crate::vector_codes::{Codes, Quantize};

pub const MAGIC: &[u8; 8] = b"ST5INDEX";
const VERSION: u32 = 1;
/// The widest vectors a header may declare: far above any sentence encoder's (sentence-t5-xxl:
/// 768), and low enough that no size computed from it overflows before it is checked.
const MAX_DIM: usize = 1 << 16;

/// The version alone, read before the rest, so that a newer file is named as such instead of
/// failing on a field this version does not know.
#[derive(Deserialize)]
struct Version {
    version: u32,
}

/// What the header records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexHeader {
    pub version: u32,
    pub dim: usize,
    pub count: usize,
    pub quantize: Quantize,
    /// The weights fingerprint of the model that embedded the documents (`fingerprint`).
    pub model: String,
    pub texts_bytes: u64,
}

/// Byte offsets of the sections.
#[derive(Debug, Clone, Copy)]
struct Sections {
    words: usize,
    scales: usize,
    vectors: usize,
    texts: usize,
    end: usize,
}

impl IndexHeader {
    /// The section offsets after a header of `header_len` bytes, or `None` on overflow.
    fn sections(&self, header_len: usize) -> Option<Sections> {
        let words_per = self.quantize.packing().map_or(0, |p| p.words(self.dim));
        let scale_per = usize::from(self.quantize.packing().is_some());
        let words = (16usize.checked_add(header_len)?).checked_next_multiple_of(8)?;
        let scales = words.checked_add(self.count.checked_mul(words_per)?.checked_mul(4)?)?;
        let vectors = scales.checked_add(self.count.checked_mul(scale_per * 4)?)?;
        let texts = vectors.checked_add(self.count.checked_mul(self.dim)?.checked_mul(4)?)?;
        let end = texts.checked_add(usize::try_from(self.texts_bytes).ok()?)?;
        Some(Sections { words, scales, vectors, texts, end })
    }
}

/// Writes an index of `texts` with their row-major `vectors` (width `dim`, finite) to `path`,
/// encoding the codes `quantize` asks for. It is written beside `path` and renamed into place,
/// so a failure leaves any earlier file as it was.
pub fn write(
    path: &Path,
    quantize: Quantize,
    model: &str,
    dim: usize,
    texts: &[String],
    vectors: &[f32],
) -> Result<()> {
    let bad = |message: String| Error::Index { path: path.into(), message };
    if dim == 0 || dim > MAX_DIM || vectors.len() != texts.len() * dim {
        return Err(bad(format!(
            "{} vector values for {} texts of width {dim}",
            vectors.len(),
            texts.len()
        )));
    }
    // A NaN would be coded as 0 (int8) or poison a scale (binary): refused here, not at query time.
    if let Some(i) = vectors.iter().position(|x| !x.is_finite()) {
        return Err(bad(format!("vector {} has a non-finite value", i / dim)));
    }
    let texts_json = serde_json::to_vec(texts).expect("strings serialize");
    let header = IndexHeader {
        version: VERSION,
        dim,
        count: texts.len(),
        quantize,
        model: model.into(),
        texts_bytes: texts_json.len() as u64,
    };
    let head = serde_json::to_vec(&header).expect("the header serializes");
    let codes = quantize.packing().map(|p| p.encode(dim, vectors)).unwrap_or_default();
    crate::atomic::write_with(path, |file| {
        let mut out = Hashing(file, Sha256::new());
        out.write_all(MAGIC)?;
        out.write_all(&(head.len() as u64).to_le_bytes())?;
        out.write_all(&head)?;
        let pad = (16 + head.len()).next_multiple_of(8) - (16 + head.len());
        out.write_all(&[0; 8][..pad])?;
        for w in &codes.words {
            out.write_all(&w.to_le_bytes())?;
        }
        for x in codes.scales.iter().chain(vectors) {
            out.write_all(&x.to_le_bytes())?;
        }
        out.write_all(&texts_json)?;
        let Hashing(file, hash) = out;
        file.write_all(&hash.finalize())
    })
}

/// A writer that hashes what passes through it.
struct Hashing<W>(W, Sha256);

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// An index file, checked whole and memory-mapped.
pub struct IndexFile {
    pub path: PathBuf,
    pub header: IndexHeader,
    bytes: FileBytes,
    sections: Sections,
}

impl IndexFile {
    /// Opens and checks `path`: magic, header, every section's size, and the checksum.
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = FileBytes::map(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(bytes, path)
    }

    /// Checks `bytes` (the file at `path`, for messages) as [`open`](Self::open) does.
    pub fn from_bytes(bytes: FileBytes, path: &Path) -> Result<Self> {
        let bad = |message: String| Error::Index { path: path.into(), message };
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(bad("not an st5 index file (no ST5INDEX magic)".into()));
        }
        let header_len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        let header_end = usize::try_from(header_len)
            .ok()
            .and_then(|n| n.checked_add(16))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| bad("truncated: the header runs past the end".into()))?;
        let head = &bytes[16..header_end];
        let version: Version =
            serde_json::from_slice(head).map_err(|e| bad(format!("corrupt header: {e}")))?;
        if version.version != VERSION {
            return Err(bad(format!("version {} (this st5 reads {VERSION})", version.version)));
        }
        let header: IndexHeader =
            serde_json::from_slice(head).map_err(|e| bad(format!("corrupt header: {e}")))?;
        if header.dim == 0 || header.dim > MAX_DIM {
            return Err(bad(format!("corrupt header: dim {}", header.dim)));
        }
        let sections = header
            .sections(header_end - 16)
            .filter(|s| s.end.checked_add(32).is_some())
            .ok_or_else(|| bad("corrupt header: sizes overflow".into()))?;
        let want = sections.end as u64 + 32;
        if bytes.len() as u64 != want {
            let what = if (bytes.len() as u64) < want { "truncated" } else { "corrupt" };
            return Err(bad(format!(
                "{what}: {} documents of width {} ({}) need {want} bytes, the file has {}",
                header.count,
                header.dim,
                header.quantize,
                bytes.len()
            )));
        }
        if Sha256::digest(&bytes[..sections.end]).as_slice() != &bytes[sections.end..] {
            return Err(bad("corrupt: checksum mismatch".into()));
        }
        Ok(Self { path: path.into(), header, bytes, sections })
    }

    /// The codes a quantized index searches (`None` for `quantize = none`).
    pub fn codes(&self) -> Option<Codes> {
        self.header.quantize.packing()?;
        let s = &self.sections;
        Some(Codes {
            words: le_values(&self.bytes[s.words..s.scales], i32::from_le_bytes),
            scales: le_values(&self.bytes[s.scales..s.vectors], f32::from_le_bytes),
        })
    }

    /// Every f32 vector, row-major.
    pub fn vectors(&self) -> Vec<f32> {
        le_values(&self.bytes[self.sections.vectors..self.sections.texts], f32::from_le_bytes)
    }

    /// The f32 vectors of `ids`, row-major in that order; an id past `count` is an error.
    pub fn rows(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let row = 4 * self.header.dim;
        let mut out = Vec::with_capacity(ids.len() * self.header.dim);
        for &id in ids {
            if id as usize >= self.header.count {
                return Err(Error::Index {
                    path: self.path.clone(),
                    message: format!("no row {id} (the index holds {})", self.header.count),
                });
            }
            let at = self.sections.vectors + id as usize * row;
            out.extend(le_values(&self.bytes[at..at + row], f32::from_le_bytes));
        }
        Ok(out)
    }

    /// The documents, in id order.
    pub fn texts(&self) -> Result<Vec<String>> {
        let texts: Vec<String> = serde_json::from_slice(
            &self.bytes[self.sections.texts..self.sections.end],
        )
        .map_err(|e| Error::Index { path: self.path.clone(), message: format!("texts: {e}") })?;
        if texts.len() != self.header.count {
            return Err(Error::Index {
                path: self.path.clone(),
                message: format!("{} texts for {} vectors", texts.len(), self.header.count),
            });
        }
        Ok(texts)
    }
}

fn le_values<T>(bytes: &[u8], from: fn([u8; 4]) -> T) -> Vec<T> {
    bytes.chunks_exact(4).map(|c| from(c.try_into().expect("4 bytes"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path, quantize: Quantize) -> (PathBuf, Vec<String>, Vec<f32>) {
        let texts: Vec<String> = ["a", "b\nc", "ü"].map(String::from).to_vec();
        let vectors: Vec<f32> = (0..15).map(|i| (i as f32 - 7.0) / 7.0).collect();
        let path = dir.join(format!("{quantize}.st5index"));
        write(&path, quantize, "fp", 5, &texts, &vectors).unwrap();
        (path, texts, vectors)
    }

    #[test]
    fn round_trips_each_mode() {
        let dir = std::env::temp_dir().join(format!("st5-index-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for q in Quantize::ALL {
            let (path, texts, vectors) = sample(&dir, q);
            let file = IndexFile::open(&path).unwrap();
            assert_eq!((file.header.count, file.header.dim, file.header.quantize), (3, 5, q));
            assert_eq!(file.texts().unwrap(), texts);
            assert_eq!(file.vectors(), vectors);
            assert_eq!(file.rows(&[2, 0]).unwrap(), [&vectors[10..15], &vectors[..5]].concat());
            assert!(file.rows(&[3]).unwrap_err().to_string().contains("no row 3"));
            assert_eq!(file.codes(), q.packing().map(|p| p.encode(5, &vectors)));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn non_finite_vectors_are_not_written() {
        let dir = std::env::temp_dir().join(format!("st5-index-nan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nan.st5index");
        let texts = ["a", "b"].map(String::from);
        for bad in [f32::NAN, f32::INFINITY] {
            let err =
                write(&path, Quantize::Binary, "fp", 2, &texts, &[1.0, 0.0, bad, 1.0]).unwrap_err();
            assert!(err.to_string().contains("vector 1 has a non-finite value"), "{err}");
            assert!(!path.exists());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_files_are_refused_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("st5-index-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, _, _) = sample(&dir, Quantize::Int8);
        let good = std::fs::read(&path).unwrap();
        let header_end = 16 + u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
        let mut flipped = good.clone();
        flipped[header_end + 9] ^= 1; // a code byte
        let mut header = good.clone();
        header[16] = b'['; // the header's opening brace
        // A file of a header alone (count 0): what the header's own checks see.
        let headed =
            |json: &str| [&MAGIC[..], &(json.len() as u64).to_le_bytes(), json.as_bytes()].concat();
        let head = |version: u32, dim: &str, texts: &str| {
            format!(
                r#"{{"version":{version},"dim":{dim},"count":0,"quantize":"int8","model":"fp","texts_bytes":{texts}}}"#
            )
        };
        // texts_bytes that reach just below usize::MAX, so that the checksum's 32 bytes overflow.
        let words = (16 + head(1, "5", &u64::MAX.to_string()).len()).next_multiple_of(8) as u64;
        let overflow = headed(&head(1, "5", &(u64::MAX - words - 10).to_string()));
        let newer = headed(&head(2, "5", "2").replace('}', r#","ann":{"m":16}}"#));
        let cases: [(&str, Vec<u8>, &str); 9] = [
            ("newer version", newer, "version 2 (this st5 reads 1)"),
            ("huge dim", headed(&head(1, "1000000000000", "2")), "dim 1000000000000"),
            ("overflowing sizes", overflow, "sizes overflow"),
            ("empty", vec![], "no ST5INDEX magic"),
            ("other magic", b"ST5IDX1\n-------".to_vec(), "no ST5INDEX magic"),
            ("header cut", good[..20].to_vec(), "header runs past the end"),
            ("body cut", good[..good.len() - 40].to_vec(), "truncated"),
            ("flipped bit", flipped, "checksum mismatch"),
            ("bad header", header, "corrupt header"),
        ];
        for (what, bytes, want) in cases {
            let bad = dir.join("bad.st5index");
            std::fs::write(&bad, &bytes).unwrap();
            let err = IndexFile::open(&bad).err().unwrap_or_else(|| panic!("{what}: accepted"));
            let msg = err.to_string();
            assert!(msg.contains("bad.st5index") && msg.contains(want), "{what}: {msg}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
