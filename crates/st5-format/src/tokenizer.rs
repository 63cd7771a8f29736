//! The T5 tokenizer: Hugging Face `tokenizers` on `tokenizer.json`, with `</s>` appended by the
//! file's post-processor and truncation to `max_seq_length` (counting `</s>`), as
//! `T5TokenizerFast(..., truncation=True, max_length=N)` does. Padding is the batcher's job.

use std::path::{Path, PathBuf};

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::{Error, Result};

/// Token id used for padding (`<pad>`), also T5's decoder start token.
pub const PAD_ID: u32 = 0;

#[derive(Clone)]
pub struct T5Tokenizer {
    inner: Tokenizer,
    path: PathBuf,
    max_len: usize,
}

/// One token of [`T5Tokenizer::tokens`]: its id, its piece, whether the post-processor added it,
/// and the characters `start..stop` of the text it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: u32,
    pub text: String,
    pub special: bool,
    pub start: usize,
    pub stop: usize,
}

/// The first `(sequence, id)` at or past `vocab_size`, an id the embedding table lacks: a
/// tokenizer from another model, or ids a client sent, can hold one.
pub fn out_of_vocab(seqs: &[Vec<u32>], vocab_size: usize) -> Option<(usize, u32)> {
    seqs.iter()
        .enumerate()
        .find_map(|(i, t)| t.iter().find(|&&id| id as usize >= vocab_size).map(|&id| (i, id)))
}

/// What the tokenizer does with a text longer than `max_seq_length` tokens: cut its end (the
/// reference's behaviour, and every st5 path's but a server's), cut its start, or keep it whole
/// so that the caller can refuse it (text-embeddings-inference's `truncate: false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    Right,
    Left,
    Off,
}

/// The longest vocabulary piece accepted, in bytes. SentencePiece's own limit is 16 characters
/// (`max_sentencepiece_length`); the tokenizers crate builds and drops its Unigram trie
/// recursively, one level per byte, so a piece of ~100k bytes overflows the stack.
pub const MAX_PIECE_BYTES: usize = 1024;

/// What the tokenizers crate would panic on (or overflow its stack on) rather than report:
/// - invalid JSON, or invalid UTF-8 (checked by the caller: serde_json skips the strings it
///   ignores unchecked), met inside a decoder or normalizer (`expect("Helper")` in
///   decoders/mod.rs);
/// - a damaged SentencePiece charsmap ([`crate::charsmap`]);
/// - a Unigram piece longer than [`MAX_PIECE_BYTES`];
/// - a `TemplateProcessing` post-processor that names what it does not define.
///
/// The top-level keys are read in order, as that crate reads them, and every `normalizer` and
/// `model` is checked where it stands: a later duplicate or a later break cannot hide one that
/// the crate would already have choked on.
fn precheck(text: &str) -> std::result::Result<(), String> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    use serde_json::Value;

    struct TopLevel<'a>(&'a mut std::result::Result<(), String>);
    impl<'de> Visitor<'de> for TopLevel<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a tokenizer.json object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let found = match key.as_ref() {
                    "normalizer" => crate::charsmap::check_normalizer(&map.next_value::<Value>()?),
                    "model" => check_pieces(&map.next_value::<Value>()?),
                    "post_processor" => check_template(&map.next_value::<Value>()?),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                        Ok(())
                    }
                };
                if self.0.is_ok() {
                    *self.0 = found;
                }
            }
            Ok(())
        }
    }
    // One pass: the visitor reads every value (so all of the JSON is checked), `end` refuses
    // anything after the object, and a syntax error anywhere outranks what the visitor found.
    let mut found = Ok(());
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(TopLevel(&mut found)).and_then(|()| de.end()).map_err(|e| {
        if e.is_data() {
            format!("not a tokenizer.json object: {e}")
        } else {
            format!("not valid JSON: {e}")
        }
    })?;
    found
}

/// A template post-processor (alone or in a `Sequence`): every special token its
/// templates name must be defined, with as many ids as tokens, and the single-text template may
/// name only sequence A. The tokenizers crate indexes both without checking, after loading.
fn check_template(processor: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value;
    if let Some(steps) = processor.get("processors").and_then(Value::as_array) {
        return steps.iter().try_for_each(check_template);
    }
    // By shape, not by `type`: the crate falls back to matching a processor's fields when the
    // type is unknown (a mangled "TemplateProcessing" still loads as one; found by fuzzing).
    if processor.get("single").is_none() && processor.get("pair").is_none() {
        return Ok(());
    }
    let specials = processor.get("special_tokens").and_then(Value::as_object);
    for (name, template) in [("single", &processor["single"]), ("pair", &processor["pair"])] {
        for piece in template.as_array().into_iter().flatten() {
            if let Some(id) = piece.pointer("/SpecialToken/id").and_then(Value::as_str) {
                let token = specials.and_then(|m| m.get(id)).ok_or_else(|| {
                    format!("post_processor: the {name} template names special token {id:?}, which special_tokens lacks")
                })?;
                let count = |field| token.get(field).and_then(Value::as_array).map(Vec::len);
                if count("ids") != count("tokens") {
                    return Err(format!(
                        "post_processor: special token {id:?} has {:?} ids for {:?} tokens",
                        count("ids"),
                        count("tokens")
                    ));
                }
            }
            if name == "single"
                && piece.pointer("/Sequence/id").and_then(Value::as_str) == Some("B")
            {
                return Err("post_processor: the single template names sequence B".into());
            }
        }
    }
    Ok(())
}

/// A Unigram vocab is `[[piece, score], ...]` (other models' vocabs are maps, without a trie).
fn check_pieces(model: &serde_json::Value) -> std::result::Result<(), String> {
    let Some(vocab) = model.get("vocab").and_then(serde_json::Value::as_array) else {
        return Ok(());
    };
    for (i, entry) in vocab.iter().enumerate() {
        let len = entry.get(0).and_then(serde_json::Value::as_str).map_or(0, str::len);
        if len > MAX_PIECE_BYTES {
            return Err(format!(
                "vocabulary piece {i} is {len} bytes long (at most {MAX_PIECE_BYTES})"
            ));
        }
    }
    Ok(())
}

impl T5Tokenizer {
    /// Loads `tokenizer.json` with truncation at `max_len` tokens (`</s>` included).
    pub fn from_file(path: &Path, max_len: usize) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(&bytes, max_len, path.into())
    }

    /// Loads from the bytes of a `tokenizer.json` (in-memory files); `path` names it in errors.
    pub fn from_bytes(bytes: &[u8], max_len: usize, path: PathBuf) -> Result<Self> {
        let err = |source| Error::Tokenizer { path: path.clone(), source };
        // Checked first: the tokenizers crate (0.22) panics or overflows its stack on some bad
        // files instead of returning an error (each found by fuzzing, fuzz/regressions/).
        let text = std::str::from_utf8(bytes).map_err(|e| err(format!("not UTF-8: {e}").into()))?;
        precheck(text).map_err(|m| err(m.into()))?;
        let mut inner = Tokenizer::from_bytes(bytes).map_err(err)?;
        Self::configure(&mut inner, max_len, Truncation::Right).map_err(err)?;
        Ok(Self { inner, path, max_len })
    }

    /// This tokenizer with another [`Truncation`]: `max_len` stays the model's limit, and with
    /// [`Truncation::Off`] a sequence may come out longer than it.
    pub fn with_truncation(&self, truncation: Truncation) -> Result<Self> {
        let mut inner = self.inner.clone();
        Self::configure(&mut inner, self.max_len, truncation)
            .map_err(|source| Error::Tokenizer { path: self.path.clone(), source })?;
        Ok(Self { inner, path: self.path.clone(), max_len: self.max_len })
    }

    fn configure(
        inner: &mut Tokenizer,
        max_len: usize,
        truncation: Truncation,
    ) -> tokenizers::Result<()> {
        if max_len == 0 {
            return Err("max_seq_length must be positive".into());
        }
        inner.with_padding(None);
        let direction = match truncation {
            Truncation::Off => {
                inner.with_truncation(None)?;
                return Ok(());
            }
            Truncation::Right => TruncationDirection::Right,
            Truncation::Left => TruncationDirection::Left,
        };
        inner.with_truncation(Some(TruncationParams {
            max_length: max_len,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction,
        }))?;
        Ok(())
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Each text's tokens with their pieces and character offsets (special tokens included, with
    /// empty offsets), as the model reads them: what a server's `/tokenize` answers.
    pub fn tokens(&self, texts: &[&str]) -> Result<Vec<Vec<Token>>> {
        let encodings = self
            .inner
            .encode_batch_char_offsets(texts.to_vec(), true)
            .map_err(|source| Error::Tokenizer { path: self.path.clone(), source })?;
        Ok(encodings
            .iter()
            .map(|e| {
                let special = e.get_special_tokens_mask();
                (e.get_ids().iter().zip(e.get_tokens()).zip(e.get_offsets()))
                    .enumerate()
                    .map(|(i, ((&id, text), &(start, stop)))| Token {
                        id,
                        text: text.clone(),
                        special: special.get(i).is_some_and(|&m| m == 1),
                        start,
                        stop,
                    })
                    .collect()
            })
            .collect())
    }

    /// Token ids of each text, `</s>` appended, truncated; never empty.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .inner
            .encode_batch(texts.to_vec(), true)
            .map_err(|source| Error::Tokenizer { path: self.path.clone(), source })?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_cuts_either_end_or_nothing() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/st-bert-gelu/tokenizer.json");
        let tok = T5Tokenizer::from_file(&path, 6).unwrap();
        let text = "one two three four five six seven eight";
        let whole = tok.with_truncation(Truncation::Off).unwrap().encode_batch(&[text]).unwrap();
        let n = whole[0].len();
        assert!(n > 6, "{whole:?}");
        let (first, last) = (whole[0][0], whole[0][n - 1]);
        // (mode, length, ids kept from the untruncated sequence's middle)
        let cases = [
            (Truncation::Right, 6, whole[0][1..5].to_vec()),
            (Truncation::Left, 6, whole[0][n - 5..n - 1].to_vec()),
            (Truncation::Off, n, whole[0][1..n - 1].to_vec()),
        ];
        for (mode, len, middle) in cases {
            let ids = tok.with_truncation(mode).unwrap().encode_batch(&[text]).unwrap().remove(0);
            assert_eq!(ids.len(), len, "{mode:?}");
            // The special tokens stay at both ends whichever end is cut.
            assert_eq!((ids[0], ids[len - 1]), (first, last), "{mode:?}");
            assert_eq!(ids[1..len - 1], middle[..], "{mode:?}");
        }
        let tokens = tok.tokens(&["one two"]).unwrap().remove(0);
        assert!(tokens[0].special && tokens.last().unwrap().special);
        assert_eq!(
            &"one two"[tokens[1].start..tokens[1].stop],
            tokens[1].text.trim_start_matches('▁')
        );
    }

    /// A charsmap cut short (base64 of 100 bytes whose trie size says far more).
    fn bad_normalizer() -> String {
        use base64::Engine;
        let mut blob = 4096u32.to_le_bytes().to_vec();
        blob.extend([0u8; 96]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(blob);
        format!(r#"{{"type": "Precompiled", "precompiled_charsmap": "{b64}"}}"#)
    }

    #[test]
    fn precheck_refuses_what_the_tokenizers_crate_would_panic_on() {
        let long = "x".repeat(MAX_PIECE_BYTES + 1);
        let bad = bad_normalizer();
        let cases: Vec<(String, Option<&str>)> = vec![
            (r#"{"normalizer": null, "model": {"vocab": [["a", -1.0]]}}"#.into(), None),
            (r#"{"decoder": {"type": "Metaspace", "#.into(), Some("not valid JSON")),
            (format!(r#"{{"normalizer": {bad}}}"#), Some("the trie needs")),
            // Found by fuzzing: the file breaks after the normalizer, where the tokenizers
            // crate, which reads fields in order, has already panicked on it.
            (format!(r#"{{"normalizer": {bad}, "model" oops"#), Some("not valid JSON")),
            // A later duplicate does not hide a bad first one.
            (format!(r#"{{"normalizer": {bad}, "normalizer": null}}"#), Some("the trie needs")),
            // Found by fuzzing: a piece this long overflowed the stack when the trie was dropped.
            (format!(r#"{{"model": {{"vocab": [["{long}", -1.0]]}}}}"#), Some("bytes long")),
            (format!(r#"{{"model": {{"vocab": {{"{long}": 1}}}}}}"#), None),
            ("[1, 2]".into(), Some("not a tokenizer.json object")),
            (r#"{"normalizer": null} {"#.into(), Some("not valid JSON")),
            (r#"{"normalizer": null, "x": [1, 2}"#.into(), Some("not valid JSON")),
            // Found by fuzzing: a template naming a special token that is not defined.
            (
                r#"{"post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}], "pair": [], "special_tokens": {"</x>": {"id": "</x>", "ids": [1], "tokens": ["</x>"]}}}}"#.into(),
                Some("special_tokens lacks"),
            ),
            (
                r#"{"post_processor": {"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B", "type_id": 0}}], "pair": [], "special_tokens": {}}]}}"#.into(),
                Some("sequence B"),
            ),
        ];
        for (json, want) in cases {
            match (precheck(&json), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{json}: {e}"),
                (got, want) => panic!("{json}: got {got:?}, wanted {want:?}"),
            }
        }
    }
}
