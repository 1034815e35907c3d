"""Write a synthetic instruction-tuning set as JSON text records, and a checkpoint folder for a tiny model.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b5). It replaces a
dataset and a converted checkpoint that a case's script would otherwise download:

- FILE: a JSON list of {"instruction", "input", "output"} records whose words come from the
  word-level vocabulary below (instruction 4-16 words, output 2-10 words);
- CKPT/ (with --checkpoint CKPT): the tokenizer files and empty weights of instruct_token_rows.py's
  checkpoint folder, plus `model_config.yaml`, a tiny GPT configuration (4 layers, width 32, 4 heads,
  context 128, the vocabulary's size) for a script that builds its model from that file.

    python instruct_json.py FILE [--checkpoint CKPT] [--n 40] [--vocab 200] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from instruct_token_rows import SPECIALS, _checkpoint, _words

TINY_CONFIG = {
    "name": "tiny-instruct",
    "block_size": 128,
    "n_layer": 4,
    "n_head": 4,
    "n_embd": 32,
    "rotary_percentage": 1.0,
    "parallel_residual": False,
    "bias": False,
    "norm_class_name": "RMSNorm",
    "mlp_class_name": "LLaMAMLP",
    "intermediate_size": 64,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--checkpoint")
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n < 2 or args.vocab <= len(SPECIALS) + 1:
        parser.error("--n must be >= 2 and --vocab > 5")

    rng = random.Random(args.seed)
    words = _words(args.vocab)[len(SPECIALS):]

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))

    records = [{"instruction": text(4, 16), "input": "", "output": text(2, 10)} for _ in range(args.n)]
    out = Path(args.file)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1), encoding="utf-8")
    print(f"{args.n} instruction records in {out}")
    if args.checkpoint:
        folder = Path(args.checkpoint)
        _checkpoint(folder, args.vocab)
        config = dict(TINY_CONFIG, vocab_size=args.vocab, padded_vocab_size=args.vocab)
        lines = [f"{key}: {json.dumps(value)}" for key, value in config.items()]
        (folder / "model_config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"tokenizer, empty weights and a tiny model_config.yaml in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
