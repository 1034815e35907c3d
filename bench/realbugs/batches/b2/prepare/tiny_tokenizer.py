"""Write a tiny byte-level BPE tokenizer (GPT-2 style files, no merges) to a folder.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
tokenizer that a case's script would otherwise download from a model hub. The vocabulary is the
256 byte symbols plus the special tokens asked for; `AutoTokenizer.from_pretrained(FOLDER)`
loads it.

    python tiny_tokenizer.py OUTDIR [--special "<|endoftext|>" ...] [--pad TOKEN]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def byte_symbols() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for raw bytes (the usual mapping)."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    codes = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(keep, codes))
    return [chr(table[b]) for b in range(256)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--special", action="append", default=None,
                        help="special token(s) appended after the bytes (default: <|endoftext|>)")
    parser.add_argument("--pad", default=None, help="pad token (one of the specials); none by default")
    args = parser.parse_args(argv)
    specials = args.special or ["<|endoftext|>"]
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = {sym: i for i, sym in enumerate(byte_symbols())}
    for tok in specials:
        vocab.setdefault(tok, len(vocab))
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    config = {"tokenizer_class": "GPT2Tokenizer", "model_max_length": 1024,
              "bos_token": specials[0], "eos_token": specials[0], "unk_token": specials[0]}
    if args.pad:
        config["pad_token"] = args.pad
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (out / "special_tokens_map.json").write_text(
        json.dumps({k: v for k, v in config.items() if k.endswith("_token")}, indent=1), encoding="utf-8")
    print(f"tiny tokenizer: {len(vocab)} symbols in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
