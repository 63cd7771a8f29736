//! Hostile input, natively: damaged `tokenizer.json` charsmaps (the crash a mutation probe found
//! in the tokenizers crate) and text no caller should send but some will. Each case has a defined
//! result: an error naming the file, or unit-length embeddings equal to those of a stated
//! equivalent input. The browser's cases are in tests/browser/npm.test.mjs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use base64::Engine;
use st5_core::tokenizer::T5Tokenizer;
use st5_core::{Device, Embedder, LoadOptions};
use st5_tests::*;

/// One character of each Unicode general category that a Rust string can hold (surrogates, Cs,
/// cannot; the browser test sends lone ones from JS), plus an unassigned code point (Cn).
const CATEGORY_SAMPLES: &[(&str, char)] = &[
    ("Lu", 'A'),
    ("Ll", 'ß'),
    ("Lt", 'ǅ'),
    ("Lm", 'ʰ'),
    ("Lo", '中'),
    ("Mn", '\u{0301}'),
    ("Mc", '\u{0903}'),
    ("Me", '\u{20DD}'),
    ("Nd", '٣'),
    ("Nl", 'Ⅻ'),
    ("No", '½'),
    ("Pc", '_'),
    ("Pd", '—'),
    ("Ps", '('),
    ("Pe", ')'),
    ("Pi", '«'),
    ("Pf", '»'),
    ("Po", '!'),
    ("Sm", '∑'),
    ("Sc", '€'),
    ("Sk", '^'),
    ("So", '😀'),
    ("Zs", '\u{3000}'),
    ("Zl", '\u{2028}'),
    ("Zp", '\u{2029}'),
    ("Cc", '\u{0007}'),
    ("Cf", '\u{200D}'),
    ("Co", '\u{E000}'),
    ("Cn", '\u{0378}'),
];

/// Texts covering every category alone, each inside words, NUL bytes and combining runs.
fn odd_texts() -> Vec<String> {
    let mut texts: Vec<String> = CATEGORY_SAMPLES.iter().map(|(_, c)| c.to_string()).collect();
    texts.extend(CATEGORY_SAMPLES.iter().map(|(_, c)| format!("a{c}b {c}{c} end")));
    texts.push(CATEGORY_SAMPLES.iter().map(|(_, c)| *c).collect());
    texts.extend(["\0".into(), "nul\0inside".into(), "\0\0\0".into(), String::new()]);
    texts.push(format!("e{}", "\u{0301}".repeat(500)));
    texts
}

fn load(max_seq_length: usize) -> Embedder {
    let options = LoadOptions { max_seq_length: Some(max_seq_length), ..LoadOptions::default() };
    Embedder::load(&fixture("st-enc-mean-relu"), &options, &Device::flex()).unwrap()
}

fn assert_unit_rows(e: &st5_core::Embeddings, what: &str) {
    for (i, row) in e.rows().enumerate() {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(row.iter().all(|x| x.is_finite()), "{what} row {i}: not finite");
        assert!((norm - 1.0).abs() < 1e-4, "{what} row {i}: norm {norm}");
    }
}

#[test]
fn every_unicode_category_and_nul_bytes_embed_to_unit_vectors() {
    let model = load(64);
    let texts = odd_texts();
    let e = model.embed(&texts).unwrap();
    assert_eq!(e.len(), texts.len());
    assert_unit_rows(&e, "odd texts");
    // NUL is text like any other: not a terminator that drops what follows it.
    let ids = model.tokenizer().encode_batch(&["nul\0inside", "nul"]).unwrap();
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn a_megabyte_text_embeds_as_its_truncated_prefix() {
    let model = load(32);
    let big: String = "the quick brown fox jumps over the lazy dog ".repeat(24_000);
    assert!(big.len() >= 1 << 20, "{}", big.len());
    let prefix = &big[..2000]; // far more than 32 tokens
    let e = model.embed(&[big.as_str(), prefix]).unwrap();
    assert_eq!(e.row(0), e.row(1));
    assert_unit_rows(&e, "1 MB");
}

#[test]
fn a_hundred_thousand_texts_embed_in_one_call() {
    let model = load(16);
    let texts: Vec<String> = (0..100_000).map(|i| format!("item {i}")).collect();
    let e = model.embed(&texts).unwrap();
    assert_eq!(e.len(), 100_000);
    // Batching never mixes rows up: spot rows equal the same texts embedded alone.
    for i in [0, 31_337, 99_999] {
        let alone = model.embed(&[texts[i].as_str()]).unwrap();
        let diff =
            alone.row(0).iter().zip(e.row(i)).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(diff < TOL, "row {i}: {diff}");
    }
}

/// The `tokenizer.json` with its charsmap replaced by `blob`.
fn with_charsmap(json: &str, blob: &[u8]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(blob);
    let normalizer = &mut v["normalizer"];
    let precompiled = if normalizer["type"] == "Precompiled" {
        normalizer
    } else {
        let steps = normalizer["normalizers"].as_array_mut().unwrap();
        steps.iter_mut().find(|s| s["type"] == "Precompiled").unwrap()
    };
    precompiled["precompiled_charsmap"] = b64.into();
    v.to_string()
}

/// Seeded mutations of the real charsmap (byte flips, truncations, spliced runs): each must load
/// and then tokenize every odd text without a panic, or be refused with an error naming the file.
/// Before charsmap.rs, flips like these panicked inside the tokenizers crate.
#[test]
fn damaged_charsmaps_are_refused_never_panic() {
    let path = tokenizer_json();
    let json = std::fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let normalizer = &v["normalizer"];
    let b64 = std::iter::once(normalizer)
        .chain(normalizer["normalizers"].as_array().into_iter().flatten())
        .find_map(|s| (s["type"] == "Precompiled").then(|| s["precompiled_charsmap"].as_str()))
        .flatten()
        .unwrap();
    let blob = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    let texts = odd_texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut rng = st5_core::rng::Rng::new(7);
    let (mut refused, mut loaded) = (0, 0);
    for round in 0..300 {
        let mut b = blob.clone();
        let at = |rng: &mut st5_core::rng::Rng, n: usize| rng.below(n.max(1));
        match round % 3 {
            0 => {
                for _ in 0..=round % 4 {
                    let i = at(&mut rng, b.len());
                    b[i] ^= 1 << (rng.next_u64() % 8);
                }
            }
            1 => b.truncate(at(&mut rng, b.len())),
            _ => {
                let (src, dst, len) = (at(&mut rng, b.len()), at(&mut rng, b.len()), 64);
                let run = b[src..(src + len).min(b.len())].to_vec();
                let end = (dst + run.len()).min(b.len());
                b[dst..end].copy_from_slice(&run[..end - dst]);
            }
        }
        let mutated = with_charsmap(&json, &b);
        let result = catch_unwind(AssertUnwindSafe(|| {
            T5Tokenizer::from_bytes(mutated.as_bytes(), 128, PathBuf::from("bad/tokenizer.json"))
                .and_then(|t| t.encode_batch(&texts).map(|_| ()))
        }));
        match result {
            Err(_) => panic!("round {round}: the tokenizer panicked"),
            Ok(Ok(())) => loaded += 1,
            Ok(Err(e)) => {
                let msg = e.to_string();
                assert!(msg.contains("bad/tokenizer.json"), "round {round}: {msg}");
                refused += 1;
            }
        }
    }
    // The probe must exercise both outcomes, or it proves nothing.
    assert!(refused > 50 && loaded > 20, "refused {refused}, loaded {loaded}");
}
