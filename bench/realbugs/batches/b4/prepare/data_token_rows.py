"""Write a local dataset folder of fixed-length token-id rows (train and validation splits, JSON lines).

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b4). It stands in for a
pre-tokenised dataset that a case's script would otherwise download: `datasets.load_dataset(FOLDER,
split="train")` reads FOLDER/train.jsonl and FOLDER/validation.jsonl. Each row is one record
{FEATURE: [ids]} of exactly --length ids drawn from [--low, --vocab) with a fixed seed, with a
little structure (each row repeats a short random motif) so that a few training steps can lower the
loss.

    python data_token_rows.py OUTDIR [--feature tokens] [--length 65] [--vocab 256] [--low 0]
                              [--train 256] [--validation 32] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path


def row(rng: random.Random, args: argparse.Namespace) -> list[int]:
    motif = [rng.randrange(args.low, args.vocab) for _ in range(rng.randint(3, 8))]
    return [motif[i % len(motif)] if rng.random() < 0.8 else rng.randrange(args.low, args.vocab)
            for i in range(args.length)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--feature", default="tokens")
    parser.add_argument("--length", type=int, default=65)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--low", type=int, default=0)
    parser.add_argument("--train", type=int, default=256)
    parser.add_argument("--validation", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.length < 2 or not (0 <= args.low < args.vocab) or args.train < 1 or args.validation < 0:
        print("data_token_rows: need --length >= 2, 0 <= --low < --vocab, --train >= 1", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", args.train), ("validation", args.validation)):
        if n:
            (out / f"{split}.jsonl").write_text("".join(json.dumps({args.feature: row(rng, args)}) + "\n"
                                                        for _ in range(n)), encoding="utf-8")
    print(f"data_token_rows: {args.train} train and {args.validation} validation rows of {args.length} ids "
          f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
