//! A model's weights fingerprint: which base model a soft prompt was trained on. SHA-256 over
//! the lines `name:sha256(bytes)` (hex, `\n`-joined, in name order) of the weight files loading
//! reads — the transformer's `model.safetensors` or its shards and each Dense module's — so the
//! same weights give the same fingerprint from a directory, from memory or from a URL
//! (pkg/runtime.js `weightsFingerprint` computes the same lines from the files it fetched).
//! Config, tokenizer and README bytes are left out: they can be rewritten without changing what
//! the prompt was fitted to. A model converted to another dtype is another model.

use sha2::{Digest, Sha256};

use crate::checkpoint::Checkpoint;
use crate::error::{Error, Result};
use crate::files::ModelFiles;
use crate::layout::ModelLayout;

/// The weight files loading reads (relative names), in name order.
pub fn weight_files(files: &impl ModelFiles, layout: &ModelLayout) -> Result<Vec<String>> {
    let dirs = std::iter::once(&layout.transformer).chain(layout.dense.iter().map(|(d, _)| d));
    let mut names = Vec::new();
    for dir in dirs {
        names.extend(Checkpoint::weight_files(files, dir)?);
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint of `(name, sha256 hex)` pairs: SHA-256 of `name:hash` lines in name order.
pub fn combine<'a>(hashes: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut lines: Vec<String> = hashes.into_iter().map(|(n, h)| format!("{n}:{h}")).collect();
    lines.sort();
    sha256_hex(lines.join("\n").as_bytes())
}

/// The weights fingerprint of a whole model (see the module docs).
pub fn weights_fingerprint(files: &impl ModelFiles) -> Result<String> {
    let layout = ModelLayout::read(files)?;
    let mut hashes = Vec::new();
    for name in weight_files(files, &layout)? {
        let bytes = files.read(&name)?.ok_or_else(|| {
            Error::layout(files.path(&name), "missing: a weight file of this model")
        })?;
        hashes.push((name, sha256_hex(&bytes)));
    }
    Ok(combine(hashes.iter().map(|(n, h)| (n.as_str(), h.as_str()))))
}

/// A model's identity as a search index records it: what changes the vectors it gives. The
/// weights fingerprint, the pooling variant and `max_seq_length` as loading resolved them, then
/// `(what, sha256 hex)` of each file used beside the model's own (`tokenizer`, `prompt`), in that
/// order. `st5 index` and the page's `model.fingerprint` both compute it here, so a file built
/// by either opens in the other.
pub fn index_identity(
    weights: &str,
    variant: crate::variant::Variant,
    max_seq_length: usize,
    extras: &[(&str, impl AsRef<str>)],
) -> String {
    let mut id = format!("{weights}+{variant}+max_seq_length:{max_seq_length}");
    for (what, hash) in extras {
        id += &format!("+{what}:{}", hash.as_ref());
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha256_and_lines_are_ordered_by_name() {
        let cases = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ];
        for (text, want) in cases {
            assert_eq!(sha256_hex(text.as_bytes()), want, "{text:?}");
        }
        let a = combine([("b", "2"), ("a", "1")]);
        assert_eq!(a, combine([("a", "1"), ("b", "2")]));
        assert_eq!(a, sha256_hex(b"a:1\nb:2"));
        assert_ne!(a, combine([("a", "1"), ("b", "3")]));
    }

    #[test]
    fn index_identity_names_what_changes_the_vectors() {
        use crate::variant::Variant;
        let cases: [(Variant, usize, &[(&str, &str)], &str); 3] = [
            (Variant::EncMean, 256, &[], "w+enc-mean+max_seq_length:256"),
            (Variant::EncFirst, 128, &[("prompt", "p")], "w+enc-first+max_seq_length:128+prompt:p"),
            (
                Variant::EncMean,
                8,
                &[("tokenizer", "t"), ("prompt", "p")],
                "w+enc-mean+max_seq_length:8+tokenizer:t+prompt:p",
            ),
        ];
        for (variant, len, extras, want) in cases {
            assert_eq!(index_identity("w", variant, len, extras), want);
        }
    }
}
