"""Write a tiny randomly initialised Hugging Face model folder (config + weights) for a case's script.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
model that a case's script would otherwise download from a model hub. The script then loads it with
its own `from_pretrained(FOLDER)` call, unchanged. The weights are random (fixed seed); only the
architecture family and the head matter for a few CPU training steps. If FOLDER already holds a
tokenizer (written by another prepare helper), the vocabulary is sized to cover it.

    python hf_tiny_model.py OUTDIR --arch llama [--head causal-lm] [--vocab 320] [--layers 2]
                            [--hidden 64] [--heads 4] [--ctx 256] [--labels 2] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

HEADS = {
    "causal-lm": "AutoModelForCausalLM",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
    "masked-lm": "AutoModelForMaskedLM",
    "seq-cls": "AutoModelForSequenceClassification",
    "token-cls": "AutoModelForTokenClassification",
    "base": "AutoModel",
}

# Per model family: the config keyword names of depth, width, heads, context and feed-forward width.
SIZE_KEYS = {
    "gpt2": ("n_layer", "n_embd", "n_head", "n_positions", "n_inner"),
    "t5": ("num_layers", "d_model", "num_heads", None, "d_ff"),
    "bart": ("encoder_layers", "d_model", "encoder_attention_heads", "max_position_embeddings", "encoder_ffn_dim"),
}
DEFAULT_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "max_position_embeddings",
                "intermediate_size")


def tokenizer_size(out: Path) -> int:
    """Number of ids a tokenizer already written into OUT uses (0 when there is none)."""
    vocab = out / "vocab.json"
    wordpiece = out / "vocab.txt"
    if vocab.exists():
        ids = set(json.loads(vocab.read_text(encoding="utf-8")).values())
    elif wordpiece.exists():
        ids = set(range(len(wordpiece.read_text(encoding="utf-8").splitlines())))
    else:
        return 0
    added = out / "added_tokens.json"
    if added.exists():
        ids |= set(json.loads(added.read_text(encoding="utf-8")).values())
    return max(ids) + 1 if ids else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--arch", default="llama", help="a model_type AutoConfig knows (llama, gpt2, t5, bert, ...)")
    parser.add_argument("--head", default="causal-lm", choices=sorted(HEADS))
    parser.add_argument("--vocab", type=int, default=320)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=256)
    parser.add_argument("--labels", type=int, default=2, help="classes, for the classification heads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import torch
    import transformers

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = max(args.vocab, tokenizer_size(out) + 8)
    layers, hidden, heads, ctx, ffn = SIZE_KEYS.get(args.arch, DEFAULT_KEYS)
    sizes = {layers: args.layers, hidden: args.hidden, heads: args.heads, "vocab_size": vocab}
    if ctx:
        sizes[ctx] = args.ctx
    if ffn:
        sizes[ffn] = 4 * args.hidden
    if args.arch == "bart":
        sizes.update(decoder_layers=args.layers, decoder_attention_heads=args.heads, decoder_ffn_dim=4 * args.hidden)
    if args.arch == "t5":
        sizes.update(d_kv=args.hidden // args.heads, num_decoder_layers=args.layers, decoder_start_token_id=0)
    if args.arch == "llama":
        sizes.update(num_key_value_heads=args.heads)
    if args.head in ("seq-cls", "token-cls"):
        sizes["num_labels"] = args.labels
    config = transformers.AutoConfig.for_model(args.arch, **sizes)
    torch.manual_seed(args.seed)
    model = getattr(transformers, HEADS[args.head]).from_config(config)
    model.save_pretrained(str(out))
    n = sum(p.numel() for p in model.parameters())
    print(f"tiny {args.arch} ({args.head}): {n} parameters, vocab {vocab}, in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
