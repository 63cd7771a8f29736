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
//! Version 1 holds lines (`st5 index build --corpus`): one vector a line. Version 2 holds
//! documents (`--docs`): the vectors are their passages', and the texts section is the
//! collection as JSON ([`SavedCollection`]: the schema, the passage window, the documents and
//! each passage's document, field and byte range). A version 1 file still opens, and
//! [`IndexFile::collection`] gives it as documents of one `text` field, ids its line numbers.
//! A query reads the f32 vectors from the memory map, only those of the candidates it rescores;
//! the pages that opening touched (the checksum reads every byte) are the kernel's page cache,
//! which it reclaims under pressure, not the process's own memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::files::FileBytes;
pub use crate::search::documents::SavedCollection;
use crate::vector_codes::{Codes, Quantize};

pub const MAGIC: &[u8; 8] = b"ST5INDEX";
/// Lines.
const VERSION: u32 = 1;
/// Documents.
const DOCUMENTS_VERSION: u32 = 2;
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

/// Byte offsets of the sections, from the start of the file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sections {
    pub words: usize,
    pub scales: usize,
    pub vectors: usize,
    pub texts: usize,
    /// Where the checksum starts (its 32 bytes end the file).
    pub end: usize,
}

impl IndexHeader {
    /// The header of `count` documents of width `dim` whose texts take `texts_bytes` as JSON
    /// ([`texts_json`]).
    pub fn new(
        quantize: Quantize,
        model: &str,
        dim: usize,
        count: usize,
        texts_bytes: u64,
    ) -> Self {
        Self { version: VERSION, dim, count, quantize, model: model.into(), texts_bytes }
    }

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

    /// What comes before the first section: the magic, the header's length, the header, and
    /// zero padding to a multiple of 8.
    pub fn head_bytes(&self) -> Vec<u8> {
        let head = serde_json::to_vec(self).expect("the header serializes");
        let mut out = [&MAGIC[..], &(head.len() as u64).to_le_bytes(), &head].concat();
        out.resize(out.len().next_multiple_of(8), 0);
        out
    }
}

/// The documents as the texts section holds them: a JSON array of strings.
pub fn texts_json(texts: &[String]) -> Vec<u8> {
    serde_json::to_vec(texts).expect("strings serialize")
}

/// Checks row-major `vectors` of width `dim` for `count` documents before they are written: a
/// NaN would be coded as 0 (int8) or poison a scale (binary), so it is refused here, not at query
/// time. `first_row` numbers the rows in messages when the vectors come in chunks.
pub fn check_vectors(
    dim: usize,
    first_row: usize,
    vectors: &[f32],
) -> std::result::Result<(), String> {
    if dim == 0 || dim > MAX_DIM || !vectors.len().is_multiple_of(dim) {
        return Err(format!("{} vector values do not make rows of width {dim}", vectors.len()));
    }
    match vectors.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(format!("vector {} has a non-finite value", first_row + i / dim)),
        None => Ok(()),
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
    check_vectors(dim, 0, vectors).map_err(bad)?;
    if vectors.len() != texts.len() * dim {
        return Err(bad(format!(
            "{} vector values for {} texts of width {dim}",
            vectors.len(),
            texts.len()
        )));
    }
    let texts_json = texts_json(texts);
    let header = IndexHeader::new(quantize, model, dim, texts.len(), texts_json.len() as u64);
    write_sections(path, &header, vectors, &texts_json)
}

/// Writes a documents index (version 2): `collection` with its passages' row-major `vectors`
/// (width `dim`, finite), as [`write`] does.
pub fn write_documents(
    path: &Path,
    quantize: Quantize,
    model: &str,
    dim: usize,
    collection: &SavedCollection,
    vectors: &[f32],
) -> Result<()> {
    let (header, json) = documents_head(path, quantize, model, dim, collection, vectors)?;
    write_sections(path, &header, vectors, &json)
}

/// A documents index's file as bytes (`name` for messages): what [`write_documents`] writes, for
/// a caller that keeps its files itself (the browser).
pub fn documents_bytes(
    name: &Path,
    quantize: Quantize,
    model: &str,
    dim: usize,
    collection: &SavedCollection,
    vectors: &[f32],
) -> Result<Vec<u8>> {
    let (header, json) = documents_head(name, quantize, model, dim, collection, vectors)?;
    let mut out = Vec::new();
    sections_into(&mut out, &header, vectors, &json)
        .map_err(|e| Error::Write { path: name.into(), source: e })?;
    Ok(out)
}

/// A documents index's header and collection JSON, its vectors checked.
fn documents_head(
    path: &Path,
    quantize: Quantize,
    model: &str,
    dim: usize,
    collection: &SavedCollection,
    vectors: &[f32],
) -> Result<(IndexHeader, Vec<u8>)> {
    let bad = |message: String| Error::Index { path: path.into(), message };
    check_vectors(dim, 0, vectors).map_err(bad)?;
    let count = collection.passages.len();
    if vectors.len() != count * dim {
        return Err(bad(format!(
            "{} vector values for {count} passages of width {dim}",
            vectors.len()
        )));
    }
    let json = serde_json::to_vec(collection).expect("a collection serializes");
    let mut header = IndexHeader::new(quantize, model, dim, count, json.len() as u64);
    header.version = DOCUMENTS_VERSION;
    Ok((header, json))
}

/// Writes the file of `header` to `path` whole (a temporary, then a rename).
fn write_sections(
    path: &Path,
    header: &IndexHeader,
    vectors: &[f32],
    texts_json: &[u8],
) -> Result<()> {
    crate::atomic::write_with(path, |file| sections_into(file, header, vectors, texts_json))
}

/// The file of `header` into `file`: its codes encoded from `vectors`, the vectors, `texts`, the
/// checksum.
fn sections_into(
    file: &mut impl Write,
    header: &IndexHeader,
    vectors: &[f32],
    texts_json: &[u8],
) -> std::io::Result<()> {
    let (quantize, dim) = (header.quantize, header.dim);
    let codes = quantize.packing().map(|p| p.encode(dim, vectors)).unwrap_or_default();
    let mut out = Hashing(file, Checksum::default());
    out.write_all(&header.head_bytes())?;
    for w in &codes.words {
        out.write_all(&w.to_le_bytes())?;
    }
    for x in codes.scales.iter().chain(vectors) {
        out.write_all(&x.to_le_bytes())?;
    }
    out.write_all(texts_json)?;
    let Hashing(file, hash) = out;
    file.write_all(&hash.finish())
}

/// The SHA-256 that ends an index file, over everything before it, fed in pieces: a writer
/// that streams sections, or a reader that checks a file too large to hold at once (the page's
/// `importIndex` hashes a file from its `Blob` in chunks).
#[derive(Default, Clone)]
pub struct Checksum(Sha256);

impl Checksum {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }

    /// Checks the bytes fed so far against the file's last 32 bytes, `stored`.
    pub fn verify(self, stored: &[u8], path: &Path) -> Result<()> {
        if self.finish().as_slice() != stored {
            return Err(Error::Index {
                path: path.into(),
                message: "corrupt: checksum mismatch".into(),
            });
        }
        Ok(())
    }
}

/// A writer that hashes what passes through it.
struct Hashing<W>(W, Checksum);

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

/// What an index file's head declares, checked against the file's length: read from its first
/// [`head_length`] bytes, before any section is. The one parse of a head, for a file held
/// whole ([`IndexFile`]) and for one read in pieces (the page's `importIndex`).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexLayout {
    pub header: IndexHeader,
    pub sections: Sections,
}

/// The number of bytes at the start of a file that hold its head, from its first 16 (fewer: the
/// file is too short to be an index).
pub fn head_length(start: &[u8], path: &Path) -> Result<usize> {
    if start.len() < 16 || &start[..8] != MAGIC {
        return Err(Error::Index {
            path: path.into(),
            message: "not an st5 index file (no ST5INDEX magic)".into(),
        });
    }
    let header_len = u64::from_le_bytes(start[8..16].try_into().expect("8 bytes"));
    usize::try_from(header_len).ok().and_then(|n| n.checked_add(16)).ok_or_else(|| Error::Index {
        path: path.into(),
        message: "truncated: the header runs past the end".into(),
    })
}

impl IndexLayout {
    /// The head of the file at `path`, checked against its length, reading its first bytes only
    /// (not the sections, nor the checksum): what a caller asks before choosing how to open it.
    pub fn read(path: &Path) -> Result<Self> {
        use std::io::Read;
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut bytes = Vec::new();
        (&mut file).take(16).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        let end = head_length(&bytes, path)?;
        let rest = (end as u64).saturating_sub(16).min(len);
        file.take(rest).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        Self::parse(&bytes, len, path)
    }

    /// Whether it holds documents (version 2) rather than lines.
    pub fn is_documents(&self) -> bool {
        self.header.version == DOCUMENTS_VERSION
    }

    /// Parses the head at the start of `bytes` (at least [`head_length`] of them) of a file of
    /// `file_len` bytes: the magic, the version, the header, and every section's size against
    /// the file's.
    pub fn parse(bytes: &[u8], file_len: u64, path: &Path) -> Result<Self> {
        let bad = |message: String| Error::Index { path: path.into(), message };
        let header_end = head_length(bytes, path)?;
        if header_end as u64 > file_len || header_end > bytes.len() {
            return Err(bad("truncated: the header runs past the end".into()));
        }
        let head = &bytes[16..header_end];
        let version: Version =
            serde_json::from_slice(head).map_err(|e| bad(format!("corrupt header: {e}")))?;
        if ![VERSION, DOCUMENTS_VERSION].contains(&version.version) {
            return Err(bad(format!(
                "version {} (this st5 reads {VERSION} and {DOCUMENTS_VERSION})",
                version.version
            )));
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
        if file_len != want {
            let what = if file_len < want { "truncated" } else { "corrupt" };
            return Err(bad(format!(
                "{what}: {} documents of width {} ({}) need {want} bytes, the file has {file_len}",
                header.count, header.dim, header.quantize,
            )));
        }
        Ok(Self { header, sections })
    }
}

/// The documents from the texts section's `bytes`: a JSON array of exactly `count` strings.
pub fn parse_texts(bytes: &[u8], count: usize, path: &Path) -> Result<Vec<String>> {
    let bad = |message: String| Error::Index { path: path.into(), message };
    let texts: Vec<String> =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("texts: {e}")))?;
    if texts.len() != count {
        return Err(bad(format!("{} texts for {count} vectors", texts.len())));
    }
    Ok(texts)
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
        let IndexLayout { header, sections } =
            IndexLayout::parse(&bytes, bytes.len() as u64, path)?;
        let mut sum = Checksum::default();
        sum.update(&bytes[..sections.end]);
        sum.verify(&bytes[sections.end..], path)?;
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

    /// The documents, in id order (a lines index: version 1).
    pub fn texts(&self) -> Result<Vec<String>> {
        if self.is_documents() {
            return Err(Error::Index {
                path: self.path.clone(),
                message: "holds documents, not lines: search it with its fields (`st5 index query --mode`)".into(),
            });
        }
        let s = &self.sections;
        parse_texts(&self.bytes[s.texts..s.end], self.header.count, &self.path)
    }

    /// Whether it holds documents (version 2) rather than lines.
    pub fn is_documents(&self) -> bool {
        self.header.version == DOCUMENTS_VERSION
    }

    /// The collection: a documents index's own, or a lines index's lines as documents of one
    /// `text` field with ids `"0"`, `"1"`, ... (each line one passage; an empty line has none,
    /// and its vector is left out of [`collection_vectors`](Self::collection_vectors)).
    pub fn collection(&self) -> Result<SavedCollection> {
        let bad = |message: String| Error::Index { path: self.path.clone(), message };
        if !self.is_documents() {
            return Ok(SavedCollection::from_lines(&self.texts()?));
        }
        let s = &self.sections;
        let saved: SavedCollection = serde_json::from_slice(&self.bytes[s.texts..s.end])
            .map_err(|e| bad(format!("collection: {e}")))?;
        if saved.passages.len() != self.header.count {
            return Err(bad(format!(
                "{} passages for {} vectors",
                saved.passages.len(),
                self.header.count
            )));
        }
        Ok(saved)
    }

    /// The vectors of [`collection`](Self::collection)'s passages, row-major.
    pub fn collection_vectors(&self) -> Result<Vec<f32>> {
        if self.is_documents() {
            return Ok(self.vectors());
        }
        let keep: Vec<u32> = (self.texts()?.iter().enumerate())
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, _)| i as u32)
            .collect();
        self.rows(&keep)
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

    /// The pieces the page writes and reads a file with (pkg/search-index.js through st5-wasm's
    /// index_file) give the bytes `write` does, and read back what it wrote.
    #[test]
    fn pieces_make_and_read_the_same_file() {
        let dir = std::env::temp_dir().join(format!("st5-index-pieces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for q in Quantize::ALL {
            let (path, texts, vectors) = sample(&dir, q);
            let file = std::fs::read(&path).unwrap();
            let json = texts_json(&texts);
            let header = IndexHeader::new(q, "fp", 5, texts.len(), json.len() as u64);
            let codes = q.packing().map(|p| p.encode(5, &vectors)).unwrap_or_default();
            let le = |xs: &[f32]| xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            let words: Vec<u8> = codes.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let body = [header.head_bytes(), words, le(&codes.scales), le(&vectors), json].concat();
            let mut sum = Checksum::default();
            for piece in body.chunks(7) {
                sum.update(piece);
            }
            assert_eq!([body.clone(), sum.finish().to_vec()].concat(), file, "{q}");

            let head = &file[..head_length(&file[..16], &path).unwrap()];
            let layout = IndexLayout::parse(head, file.len() as u64, &path).unwrap();
            assert_eq!(layout.header, header);
            let s = layout.sections;
            assert_eq!(parse_texts(&file[s.texts..s.end], texts.len(), &path).unwrap(), texts);
            let mut sum = Checksum::default();
            sum.update(&file[..s.end]);
            sum.verify(&file[s.end..], &path).unwrap();
            let mut sum = Checksum::default();
            sum.update(&file[1..s.end]);
            let err = sum.verify(&file[s.end..], &path).unwrap_err().to_string();
            assert!(err.contains("checksum mismatch"), "{err}");
            let err = parse_texts(&file[s.texts..s.end], 2, &path).unwrap_err().to_string();
            assert!(err.contains("3 texts for 2 vectors"), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn check_vectors_names_the_row() {
        let cases: [(usize, usize, &[f32], Option<&str>); 4] = [
            (2, 0, &[1.0, 0.0, 0.5, 0.5], None),
            (2, 10, &[1.0, 0.0, f32::NAN, 0.5], Some("vector 11 has a non-finite value")),
            (2, 0, &[1.0, 0.0, 0.5], Some("3 vector values do not make rows of width 2")),
            (0, 0, &[], Some("rows of width 0")),
        ];
        for (dim, first, vectors, want) in cases {
            match (check_vectors(dim, first, vectors), want) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => assert!(e.contains(want), "{e}"),
                (got, want) => panic!("{dim} {first} {vectors:?}: {got:?}, wanted {want:?}"),
            }
        }
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
        let newer = headed(&head(3, "5", "2").replace('}', r#","ann":{"m":16}}"#));
        let cases: [(&str, Vec<u8>, &str); 9] = [
            ("newer version", newer, "version 3 (this st5 reads 1 and 2)"),
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
