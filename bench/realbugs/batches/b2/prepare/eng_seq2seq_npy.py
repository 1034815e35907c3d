"""Write a synthetic, already-numericalised translation corpus as pickled NumPy files plus a vocabulary.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): some seq2seq
examples train on `<prefix>{train,valid,test}.npy`, each a pickled array of (source ids, target
ids) pairs produced by a preprocessing script that downloads and tokenises a corpus, and read
their vocabulary from a text file with one token per line (the loader prepends its special
tokens: padding, begin, end, unknown). This helper writes such files directly: token ids start
after the special ones, lengths vary so that batches need padding, and the target is a noisy
copy of the source so a model has something to learn. Seeded and repeatable.

    python eng_seq2seq_npy.py OUTDIR [--prefix processed.] [--vocab N] [--specials K]
                              [--train N] [--valid N] [--min-len A] [--max-len B] [--seed S]
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np


def pairs(count: int, args: argparse.Namespace, rng: random.Random) -> np.ndarray:
    """An object array of `count` (source, target) int64 id arrays."""
    first = args.specials
    last = args.specials + args.vocab - 1
    out = np.empty(count, dtype=object)
    for i in range(count):
        n = rng.randint(args.min_len, args.max_len)
        src = [rng.randint(first, last) for _ in range(n)]
        tgt = [t if rng.random() < 0.8 else rng.randint(first, last) for t in src]
        tgt = tgt[:max(1, n + rng.randint(-2, 2))]
        out[i] = (np.array(src, dtype=np.int64), np.array(tgt, dtype=np.int64))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--prefix", default="processed.", help="file name prefix (default 'processed.')")
    parser.add_argument("--vocab", type=int, default=200, help="ordinary tokens in the vocabulary file")
    parser.add_argument("--specials", type=int, default=4,
                        help="ids the loader reserves before the file's tokens (default 4)")
    parser.add_argument("--train", type=int, default=400, help="training pairs")
    parser.add_argument("--valid", type=int, default=16, help="pairs in valid and in test")
    parser.add_argument("--min-len", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.vocab < 2 or args.specials < 0 or not 1 <= args.min_len <= args.max_len:
        parser.error("need --vocab >= 2, --specials >= 0 and 1 <= --min-len <= --max-len")
    rng = random.Random(args.seed)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.prefix}vocab.text").write_text(
        "".join(f"tok{i}\n" for i in range(args.vocab)), encoding="utf-8")
    for split, count in (("train", args.train), ("valid", args.valid), ("test", args.valid)):
        np.save(out / f"{args.prefix}{split}.npy", pairs(count, args, rng), allow_pickle=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
