"""Write a gzip file of synthetic text bytes, a stand-in for a byte-level corpus such as enwik8.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): character-level
language-model scripts read the first N bytes of a gzip file and split them into train and
validation parts. The bytes written here are printable words drawn from a small fixed vocabulary
with a seeded generator, so runs are repeatable and no download is needed.

    python eng_byte_corpus.py OUT.gz [--bytes N] [--seed S]
"""
from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

WORDS = ("the of and to in is was for on as with by that from at his it an were are which "
         "this be also or has had first one their its new after who they two her she been "
         "other when time during there into school more may years over only year most would "
         "world city some where between later three state such then national used made known "
         "under many university united while part season team these american than film "
         "second born south until became including well <page> </page> [[link]] {{cite}}").split()


def corpus(size: int, seed: int) -> bytes:
    """`size` bytes of space-separated words with occasional newlines."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.choice(WORDS).encode("ascii")
        out += b"\n" if rng.random() < 0.08 else b" "
    return bytes(out[:size])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the .gz file to write (folders are created)")
    parser.add_argument("--bytes", type=int, default=1_000_000, help="uncompressed size (default 1e6)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.bytes < 1:
        parser.error("--bytes must be at least 1")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wb", compresslevel=1) as handle:
        handle.write(corpus(args.bytes, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
