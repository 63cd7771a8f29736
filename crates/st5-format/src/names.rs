//! The one table between this crate's module tree and checkpoint tensor names, for loading and
//! saving alike, for every family. Modules and fields are named as in Hugging Face's
//! `modeling_t5.py` (`SelfAttention`, `DenseReluDense`, `wi`, `wi_0`, `wi_1`, ...),
//! `modeling_bert.py` (`attention.self.query`, `intermediate.dense`, `LayerNorm`, ...) and
//! `modeling_mpnet.py` (`attention.attn.q`, `encoder.relative_attention_bias`), so a parameter's
//! module path is its checkpoint name, except for what is listed here:
//! - [`BLOCK_LAYERS`]: a T5 block's sub-layers are fields here and a `layer.N` list there;
//! - [`FIELDS`]: checkpoint names that are Rust keywords;
//! - [`IGNORED`]: tensors a checkpoint may hold that no family uses (BERT's pooler);
//! - [`TIED`]: the token embeddings are stored once, as `shared.weight`;
//! - [`PREFIXES`]: wrapped exports put a prefix before every name (read, never written);
//! - tensors: a Linear's `weight` is `[in, out]` here and `[out, in]` there, and a bare table
//!   (`embed_tokens`, `relative_attention_bias`) is an `Embedding` module, named `….weight`.
//!
//! Loading asks for names through [`block_layer`] (`t5.rs`) and resolves them through
//! [`stored_names`] (`weights.rs`); saving maps module paths through [`checkpoint_name`]
//! (`save.rs`). Adding a module means naming its fields like the checkpoint, or adding a row here.

/// `T5Block` fields stored under a `layer.N` index: (field, encoder name, decoder name). In the
/// decoder the cross-attention takes `layer.1` and pushes the feed-forward to `layer.2`.
pub const BLOCK_LAYERS: [(&str, &str, &str); 3] = [
    ("self_attention", "layer.0", "layer.0"),
    ("cross_attention", "layer.1", "layer.1"),
    ("ff", "layer.1", "layer.2"),
];

/// Tensors that may be stored under a shared name: (name this crate asks for, shared name). A
/// stack's own `embed_tokens` wins when present (an untied checkpoint may hold both, with
/// different values, and `transformers` then uses the stack's); otherwise it is the tied
/// `shared.weight`, which is also the name saving writes.
pub const TIED: [(&str, &str); 2] = [
    ("encoder.embed_tokens.weight", "shared.weight"),
    ("decoder.embed_tokens.weight", "shared.weight"),
];

/// The tied token table's stored name, which saving writes the encoder's table under.
pub const SHARED: &str = TIED[0].1;
/// The decoder's own token table, written when an EncDec run moved it apart from the encoder's.
pub const DECODER_EMBEDDING: &str = TIED[1].0;

/// Whether a checkpoint whose tensor names are `names` holds a T5 decoder (its first block).
pub fn has_decoder<'a>(mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|n| n.contains("decoder.block.0."))
}

/// Fields named otherwise than the checkpoint's module, because the checkpoint's name is a Rust
/// keyword: (field, checkpoint name). BERT's `attention.self`.
pub const FIELDS: [(&str, &str); 1] = [("self_", "self")];

/// Checkpoint tensors no family uses, by prefix (after [`PREFIXES`]): they are not reported as
/// unused. BERT's pooler (dense + tanh over `[CLS]`, which sentence-transformers never runs) and
/// the `position_ids` buffer older exports store.
pub const IGNORED: [&str; 2] = ["pooler.", "embeddings.position_ids"];

/// Prefixes some exporters put before every name (wrapped models; `BertModel` and `MPNetModel`
/// weights saved from a task model carry `bert.` / `mpnet.`).
pub const PREFIXES: [&str; 6] = ["", "model.", "transformer.", "auto_model.", "bert.", "mpnet."];

/// Whether the stored tensor `name` is one that no family uses ([`IGNORED`]), under any prefix.
pub fn is_ignored(name: &str) -> bool {
    PREFIXES.iter().any(|p| {
        name.strip_prefix(p).is_some_and(|rest| IGNORED.iter().any(|i| rest.starts_with(i)))
    })
}

/// The checkpoint name of `T5Block` field `field` (`self_attention`, `cross_attention`, `ff`).
pub fn block_layer(field: &str, decoder: bool) -> &'static str {
    let (_, enc, dec) = BLOCK_LAYERS
        .iter()
        .find(|(f, _, _)| *f == field)
        .unwrap_or_else(|| panic!("`{field}` is not a T5Block field"));
    if decoder { dec } else { enc }
}

/// Every name under which the tensor `name` may be stored, in the order they are tried: each
/// [`TIED`] spelling under each of the [`PREFIXES`].
pub fn stored_names(name: &str) -> impl Iterator<Item = String> + '_ {
    let shared = TIED.iter().find(|(own, _)| *own == name).map(|(_, shared)| *shared);
    PREFIXES
        .iter()
        .flat_map(move |p| std::iter::once(name).chain(shared).map(move |n| format!("{p}{n}")))
}

/// Every stored spelling, under each prefix, of the [`TIED`] pairs that hold `name` (empty when
/// none does): a checkpoint's other copy of a used table is not "unused". The stack's own name
/// ties it to `shared.weight` only; `shared.weight` ties every stack's.
pub fn tied_spellings(name: &str) -> Vec<String> {
    let pairs = TIED.iter().filter(|(own, shared)| *own == name || *shared == name);
    let group: Vec<&str> = pairs.flat_map(|(own, shared)| [*own, *shared]).collect();
    PREFIXES.iter().flat_map(|p| group.iter().map(move |n| format!("{p}{n}"))).collect()
}

/// The checkpoint name of the encoder parameter at module path `path` (burn's field path under
/// the model's encoder, e.g. `encoder.block.0.self_attention.SelfAttention.q.weight` or
/// `encoder.layer.0.attention.self_.query.weight`), and
/// whether it is a Linear weight, stored transposed. Fields named `weight`/`bias` belong to
/// Linear and layer-norm modules; bare parameters are embedding tables.
pub fn checkpoint_name(path: &str, rank: usize) -> (String, bool) {
    let decoder = path.starts_with("decoder.");
    let segments: Vec<&str> = path
        .split('.')
        .map(|seg| {
            let field = FIELDS.iter().find(|(f, _)| *f == seg).map_or(seg, |(_, n)| n);
            BLOCK_LAYERS
                .iter()
                .find(|(f, _, _)| *f == field)
                .map_or(field, |(_, e, d)| if decoder { d } else { e })
        })
        .collect();
    let name = segments.join(".");
    if name.ends_with(".weight") || name.ends_with(".bias") {
        let linear = rank == 2 && name.ends_with(".weight");
        return (name, linear);
    }
    let name = format!("{name}.weight");
    let shared = TIED.iter().find(|(own, _)| *own == name).map(|(_, shared)| shared.to_string());
    (shared.unwrap_or(name), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_decoder_looks_for_the_first_decoder_block() {
        let cases: [(&[&str], bool); 4] = [
            (&["shared.weight", "encoder.block.0.layer.0.SelfAttention.q.weight"], false),
            (&["decoder.block.0.layer.0.SelfAttention.q.weight"], true),
            (&["model.decoder.block.0.layer.2.DenseReluDense.wo.weight"], true),
            (&[], false),
        ];
        for (names, want) in cases {
            assert_eq!(has_decoder(names.iter().copied()), want, "{names:?}");
        }
        assert_eq!((SHARED, DECODER_EMBEDDING), ("shared.weight", "decoder.embed_tokens.weight"));
    }

    #[test]
    fn module_paths_map_to_checkpoint_names() {
        let cases: &[(&str, usize, &str, bool)] = &[
            (
                "encoder.block.0.self_attention.SelfAttention.q.weight",
                2,
                "encoder.block.0.layer.0.SelfAttention.q.weight",
                true,
            ),
            (
                "encoder.block.0.self_attention.SelfAttention.relative_attention_bias",
                2,
                "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                false,
            ),
            (
                "encoder.block.3.self_attention.layer_norm.weight",
                1,
                "encoder.block.3.layer.0.layer_norm.weight",
                false,
            ),
            (
                "encoder.block.1.ff.DenseReluDense.wi.weight",
                2,
                "encoder.block.1.layer.1.DenseReluDense.wi.weight",
                true,
            ),
            (
                "encoder.block.1.ff.DenseReluDense.wi_0.weight",
                2,
                "encoder.block.1.layer.1.DenseReluDense.wi_0.weight",
                true,
            ),
            (
                "decoder.block.0.ff.DenseReluDense.wo.weight",
                2,
                "decoder.block.0.layer.2.DenseReluDense.wo.weight",
                true,
            ),
            (
                "decoder.block.0.cross_attention.EncDecAttention.k.weight",
                2,
                "decoder.block.0.layer.1.EncDecAttention.k.weight",
                true,
            ),
            ("encoder.final_layer_norm.weight", 1, "encoder.final_layer_norm.weight", false),
            ("encoder.embed_tokens", 2, "shared.weight", false),
            (
                "encoder.layer.2.attention.self_.query.weight",
                2,
                "encoder.layer.2.attention.self.query.weight",
                true,
            ),
            ("embeddings.word_embeddings", 2, "embeddings.word_embeddings.weight", false),
            ("embeddings.LayerNorm.bias", 1, "embeddings.LayerNorm.bias", false),
            ("encoder.relative_attention_bias", 2, "encoder.relative_attention_bias.weight", false),
            ("decoder.embed_tokens", 2, "shared.weight", false),
        ];
        for &(path, rank, want, linear) in cases {
            assert_eq!(checkpoint_name(path, rank), (want.to_string(), linear), "{path}");
        }
    }

    #[test]
    fn the_pooler_and_position_ids_are_ignored_under_any_prefix() {
        let cases = [
            ("pooler.dense.weight", true),
            ("bert.pooler.dense.bias", true),
            ("embeddings.position_ids", true),
            ("mpnet.embeddings.position_ids", true),
            ("embeddings.position_embeddings.weight", false),
            ("encoder.layer.0.output.dense.weight", false),
            ("lm_head.weight", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_ignored(name), want, "{name}");
        }
    }

    #[test]
    fn block_layers_follow_the_stack() {
        let cases = [
            ("self_attention", false, "layer.0"),
            ("self_attention", true, "layer.0"),
            ("cross_attention", true, "layer.1"),
            ("ff", false, "layer.1"),
            ("ff", true, "layer.2"),
        ];
        for (field, decoder, want) in cases {
            assert_eq!(block_layer(field, decoder), want, "{field}, decoder {decoder}");
        }
    }

    #[test]
    fn stored_names_try_the_own_name_then_the_shared_one_under_each_prefix() {
        let names: Vec<String> = stored_names("encoder.embed_tokens.weight").take(4).collect();
        assert_eq!(
            names,
            [
                "encoder.embed_tokens.weight",
                "shared.weight",
                "model.encoder.embed_tokens.weight",
                "model.shared.weight"
            ]
        );
        let plain: Vec<String> = stored_names("encoder.final_layer_norm.weight").collect();
        assert_eq!(plain.len(), PREFIXES.len());
        assert!(tied_spellings("encoder.final_layer_norm.weight").is_empty());
        let tied = tied_spellings("shared.weight");
        for n in [
            "shared.weight",
            "encoder.embed_tokens.weight",
            "auto_model.decoder.embed_tokens.weight",
        ] {
            assert!(tied.contains(&n.to_string()), "{n} in {tied:?}");
        }
    }
}
