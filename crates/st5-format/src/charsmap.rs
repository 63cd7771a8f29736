//! Checks the SentencePiece `precompiled_charsmap` of a `tokenizer.json` before the `tokenizers`
//! crate sees it. That crate (0.22) panics on a charsmap it cannot parse (`.expect("Precompiled")`
//! in `normalizers/mod.rs`), and its normaliser (`spm_precompiled` 0.1.4) indexes the trie and
//! slices the normalised strings without bounds checks, so a damaged charsmap that parses still
//! panics on some text later. In wasm a panic traps the whole module.
//!
//! The blob is a little-endian u32 trie size in bytes, that many bytes of u32 double-array units,
//! then NUL-separated UTF-8 replacement strings
//! (<https://github.com/google/sentencepiece/blob/v0.2.0/src/normalizer.cc#L231>). The check
//! walks every trie state reachable from the root, as `DoubleArray::common_prefix_search` would on
//! any input, and proves each array access in bounds and each replacement a valid slice: a
//! charsmap that passes cannot make the normaliser panic.

use base64::Engine;
use serde_json::Value;

/// Errors in a `tokenizer.json`'s `normalizer` value: `Ok` when it has no `Precompiled` step or
/// each one's charsmap is sound, otherwise what is wrong with the first that is not.
pub fn check_normalizer(v: &Value) -> Result<(), String> {
    match v {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("Precompiled") {
                let Some(Value::String(b64)) = map.get("precompiled_charsmap") else {
                    return Err(
                        "normalizer Precompiled: precompiled_charsmap is not a string".into()
                    );
                };
                let blob = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("normalizer Precompiled: precompiled_charsmap: {e}"))?;
                return check_blob(&blob)
                    .map_err(|e| format!("normalizer Precompiled: precompiled_charsmap: {e}"));
            }
            map.values().try_for_each(check_normalizer)
        }
        Value::Array(items) => items.iter().try_for_each(check_normalizer),
        _ => Ok(()),
    }
}

// `spm_precompiled`'s unit accessors.
fn has_leaf(u: usize) -> bool {
    (u >> 8) & 1 == 1
}
fn value(u: usize) -> usize {
    u & ((1 << 31) - 1)
}
fn label(u: usize) -> usize {
    u & ((1 << 31) | 0xFF)
}
fn offset(u: usize) -> usize {
    (u >> 10) << ((u & (1 << 9)) >> 6)
}

/// Checks a decoded charsmap blob.
pub fn check_blob(blob: &[u8]) -> Result<(), String> {
    let Some((size, rest)) = blob.split_first_chunk::<4>() else {
        return Err(format!("{} bytes, too short for the trie size", blob.len()));
    };
    let units = u32::from_le_bytes(*size) as usize / 4;
    if rest.len() < units * 4 {
        return Err(format!("the trie needs {} bytes, {} are left", units * 4, rest.len()));
    }
    let (trie, normalized) = rest.split_at(units * 4);
    let array: Vec<usize> =
        trie.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap()) as usize).collect();
    let normalized =
        std::str::from_utf8(normalized).map_err(|e| format!("replacement strings: {e}"))?;
    let at = |pos: usize| {
        array.get(pos).copied().ok_or_else(|| format!("trie index {pos} is out of {}", array.len()))
    };
    let root = at(0)?;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![offset(root)];
    while let Some(state) = stack.pop() {
        // Any byte may follow, so every child slot a lookup could read must exist.
        for c in 1..=255usize {
            let child = state ^ c;
            let unit = at(child)?;
            if label(unit) != c {
                continue;
            }
            let next = child ^ offset(unit);
            if has_leaf(unit) {
                let start = value(at(next)?);
                if start > normalized.len() || !normalized.is_char_boundary(start) {
                    return Err(format!(
                        "trie leaf {next} points at byte {start} of {} bytes of replacements, not at a character",
                        normalized.len()
                    ));
                }
            }
            if seen.insert(next) {
                stack.push(next);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A charsmap mapping the byte `a` to "b": root at 0 with offset 0, child `a` at 0x61.
    fn tiny() -> Vec<u8> {
        let mut units = vec![0u32; 512];
        // Child at 0 ^ 0x61: label 0x61, leaf bit, offset 256 (so the leaf unit is at 0x61 ^ 256).
        units[0x61] = 0x61 | (1 << 8) | (256 << 10);
        units[0x61 ^ 256] = 0; // replacement starts at byte 0
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        blob.extend(units.iter().flat_map(|u| u.to_le_bytes()));
        blob.extend(b"b\0");
        blob
    }

    #[test]
    fn sound_charsmaps_pass() {
        check_blob(&tiny()).unwrap();
        // The real T5 charsmap (SentencePiece's nmt_nfkc), as every T5 checkpoint ships it.
        let real = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../models/st5-mini/tokenizer.json"),
        )
        .unwrap();
        assert!(real.windows(11).any(|w| w == b"Precompiled"));
        let real: Value = serde_json::from_slice(&real).unwrap();
        check_normalizer(&real["normalizer"]).unwrap();
    }

    #[test]
    fn damaged_charsmaps_are_reported() {
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", vec![], "too short"),
            ("trie cut short", tiny()[..100].to_vec(), "the trie needs"),
            (
                "replacements not UTF-8",
                [&tiny()[..tiny().len() - 2], &[0xff, 0]].concat(),
                "replacement strings",
            ),
            ("zero-size trie", [0u8, 0, 0, 0].to_vec(), "trie index 0"),
            (
                "leaf past the strings",
                {
                    let mut b = tiny();
                    let leaf = 4 + (0x61 ^ 256) * 4;
                    b[leaf..leaf + 4].copy_from_slice(&9u32.to_le_bytes());
                    b
                },
                "points at byte 9",
            ),
            (
                "child slot outside the array",
                {
                    let mut b = tiny();
                    // Root offset 1024: children at 1024 ^ c, past the 512 units.
                    b[4..8].copy_from_slice(&(1024u32 << 10).to_le_bytes());
                    b
                },
                "out of 512",
            ),
        ];
        for (name, blob, want) in cases {
            let err = check_blob(&blob).expect_err(name);
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn normalizer_is_found_inside_a_sequence() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&tiny()[..100]);
        let seq = serde_json::json!({"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": b64}]});
        let err = check_normalizer(&seq).unwrap_err();
        assert!(err.contains("precompiled_charsmap: the trie needs"), "{err}");
        assert!(check_normalizer(&Value::Null).is_ok());
        let bad_b64 = serde_json::json!({"type": "Precompiled", "precompiled_charsmap": "@@"});
        assert!(check_normalizer(&bad_b64).is_err());
    }
}
