//! The fuzz targets' bodies (fuzz/fuzz_targets/*.rs call these), here so that the regression
//! test (tests/fuzz_regressions.rs) runs every saved crash input through exactly what the fuzzer
//! ran. Each takes outside bytes the way a load does and must return, never panic.

use crate::checkpoint::Checkpoint;
use crate::config::ModelConfig;
use crate::files::{MemoryFiles, ModelFiles, join};
use crate::layout::ModelLayout;
#[cfg(not(target_arch = "wasm32"))]
use crate::tokenizer::T5Tokenizer;

/// `config.json`: parsed and validated, then every size the loader derives from it.
pub fn config_json(data: &[u8]) {
    if let Ok(cfg) = ModelConfig::from_slice(data, "config.json".as_ref()) {
        if let Some(t5) = cfg.t5() {
            let _ = (t5.feed_forward(), t5.decoder_layers(), t5.inner_dim());
        }
        let _ = (cfg.largest_weight(), cfg.activation_bytes_per_text(512), cfg.max_tokens());
    }
}

/// A saved index file (`st5 index build`): magic, header, section sizes and checksum; a file that
/// passes is read back whole (codes, vectors, texts) and by row, an id past the end included.
pub fn index_file(data: &[u8]) {
    let path = std::path::Path::new("fuzz.st5index");
    if let Ok(file) = crate::index_file::IndexFile::from_bytes(data.to_vec().into(), path) {
        let count = u32::try_from(file.header.count).unwrap_or(u32::MAX);
        let _ = (file.codes(), file.vectors(), file.texts(), file.rows(&[0, count]));
        // A documents index (or lines as documents): its collection checked and opened.
        if let (Ok(saved), Ok(vectors)) = (file.collection(), file.collection_vectors()) {
            let _ = crate::search::DocumentIndex::open(saved, file.header.dim, vectors);
        }
    }
}

/// A search filter from outside (`st5 index query --where`, `/search`'s `where`, the page's):
/// the text form, and the same bytes as JSON, against a schema of every field type; a filter
/// that parses is evaluated on a document.
pub fn search_filter(data: &[u8]) {
    use crate::search::{Filter, Schema, Value};
    let schema: Schema = serde_json::from_str(
        r#"{"text": [{"name": "body"}], "fields": [{"name": "n", "type": "number"},
            {"name": "s", "type": "string"}, {"name": "b", "type": "boolean"},
            {"name": "tags", "type": "string[]"}]}"#,
    )
    .expect("the fuzz schema parses");
    let doc = [
        Some(Value::Number(1.0)),
        Some(Value::String("a".into())),
        None,
        Some(Value::StringList(vec!["x".into()])),
    ];
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(f) = Filter::parse(&schema, text)
    {
        f.matches(&doc);
    }
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(data)
        && let Ok(f) = Filter::from_json(&schema, &json)
    {
        f.matches(&doc);
    }
}

/// A soft-prompt file (`trainer` with `prompt_length`): safetensors with `st5_prompt` metadata,
/// checked against its tensor.
pub fn prompt_file(data: &[u8]) {
    let _ = crate::prompt::Prompt::from_bytes(data, "fuzz-prompt.safetensors".as_ref());
}

/// `.npy` arrays (teacher vectors, `st5 embed` output read back).
pub fn npy(data: &[u8]) {
    let _ = crate::npy::read_f32(data);
}

/// One safetensors file: the header, the tensor table and every tensor read as f32 (f32, f16,
/// bf16, and int8 rows with their `_scale`).
pub fn safetensors(data: &[u8]) {
    if let Ok(ckpt) =
        Checkpoint::from_buffers(vec![("model.safetensors".into(), data.to_vec().into())])
    {
        read_all(&ckpt);
    }
}

fn read_all(ckpt: &Checkpoint) {
    let names: Vec<String> = ckpt.names().map(String::from).collect();
    for name in names {
        let _ = (ckpt.shape(&name), ckpt.companions_of(&name), ckpt.resolve(&name));
        let _ = ckpt.to_f32(&name);
        if let Some(&[_, cols]) = ckpt.shape(&name) {
            let _ = (ckpt.int8_rows(&name), ckpt.input_absmax(&name, cols));
        }
    }
}

/// Separates the files of a [`model_files`] input.
pub const MODEL_FILES_SEP: &[u8] = b"\n--st5-file--\n";
/// The files of a [`model_files`] input, in order.
pub const MODEL_FILES: [&str; 9] = [
    "modules.json",
    "config.json",
    "sentence_bert_config.json",
    "tokenizer_config.json",
    "1_Pooling/config.json",
    "2_Dense/config.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
];

/// A whole model directory: `data` is split into [`MODEL_FILES`] at each [`MODEL_FILES_SEP`] (an
/// empty part is a missing file), then read as the loader reads it: the layout (`modules.json`,
/// Pooling, Dense, Normalize, the max length, `config.json`), the variant, and the checkpoint
/// (single or sharded through its index) with every tensor as f32.
pub fn model_files(data: &[u8]) {
    let mut files = MemoryFiles { label: "fuzz:".into(), ..Default::default() };
    let mut rest = data;
    for name in MODEL_FILES {
        let (part, next) =
            match rest.windows(MODEL_FILES_SEP.len()).position(|w| w == MODEL_FILES_SEP) {
                Some(i) => (&rest[..i], &rest[i + MODEL_FILES_SEP.len()..]),
                None => (rest, &rest[rest.len()..]),
            };
        if !part.is_empty() {
            files.insert(name, part.to_vec());
        }
        rest = next;
    }
    let Ok(layout) = ModelLayout::read(&files) else { return };
    let _ = layout.variant(None);
    let _ = files.read(&join(&layout.transformer, "tokenizer_config.json"));
    if let Ok(ckpt) = Checkpoint::open(&files, &layout.transformer) {
        read_all(&ckpt);
    }
}

/// `tokenizer.json`: loaded as st5 loads it (its charsmap checked first), then used.
#[cfg(not(target_arch = "wasm32"))]
pub fn tokenizer_json(data: &[u8]) {
    if let Ok(t) = T5Tokenizer::from_bytes(data, 16, "tokenizer.json".into()) {
        let _ = t.encode_batch(&["A man is playing a guitar.", "ﬁ①Ａ ｶﾞ e\u{301}", ""]);
    }
}

/// The charsmap check ([`crate::charsmap`]) against the normaliser it guards: a charsmap the
/// check accepts must normalise any text without a panic.
#[cfg(not(target_arch = "wasm32"))]
pub fn charsmap(data: &[u8]) {
    use tokenizers::normalizers::precompiled::Precompiled;
    use tokenizers::{NormalizedString, Normalizer};
    const TEXTS: &[&str] =
        &["A man is playing a guitar.", "ﬁ①Ａ\u{3000}ｶﾞ", "e\u{301}\u{0}x", "😀👍🏽", ""];
    if crate::charsmap::check_blob(data).is_ok()
        && let Ok(p) = Precompiled::from(data)
    {
        for text in TEXTS {
            let _ = p.normalize(&mut NormalizedString::from(*text));
        }
    }
}

/// Every target by name, for the regression test.
#[cfg(not(target_arch = "wasm32"))]
pub const TARGETS: [(&str, fn(&[u8])); 9] = [
    ("config_json", config_json),
    ("npy", npy),
    ("safetensors", safetensors),
    ("model_files", model_files),
    ("tokenizer_json", tokenizer_json),
    ("charsmap", charsmap),
    ("index_file", index_file),
    ("prompt_file", prompt_file),
    ("search_filter", search_filter),
];
