"""Write a word-level language-modelling corpus (train.txt, valid.txt, test.txt) to a folder.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it stands in
for corpora such as Penn Treebank or WikiText that word-level LM scripts download. One sentence
per line, space-separated words. `--vocab` sets how many distinct words occur: every word of the
vocabulary appears at least once in train.txt, so a script that builds its vocabulary from the
files sees exactly that many word types (plus its own end-of-sentence symbol). Seeded and
repeatable.

    python eng_word_corpus.py OUTDIR [--vocab N] [--train-words N] [--valid-words N] [--seed S]
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path


def sentences(words: list[str], count: int, rng: random.Random) -> list[str]:
    """`count` words drawn from `words`, cut into sentences of 5-20 words."""
    lines: list[str] = []
    drawn = 0
    while drawn < count:
        n = min(rng.randint(5, 20), count - drawn)
        lines.append(" ".join(rng.choice(words) for _ in range(n)))
        drawn += n
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--vocab", type=int, default=10000, help="distinct words (default 10000)")
    parser.add_argument("--train-words", type=int, default=0,
                        help="extra random words in train.txt after the vocabulary pass (default 0)")
    parser.add_argument("--valid-words", type=int, default=2000, help="words in valid.txt and in test.txt")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.vocab < 2 or args.train_words < 0 or args.valid_words < 1:
        parser.error("--vocab must be >= 2, --train-words >= 0, --valid-words >= 1")
    rng = random.Random(args.seed)
    words = [f"w{i}" for i in range(args.vocab)]
    order = words[:]
    rng.shuffle(order)
    train = [" ".join(order[i:i + 12]) for i in range(0, len(order), 12)]
    train += sentences(words, args.train_words, rng)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    for name in ("valid.txt", "test.txt"):
        (out / name).write_text("\n".join(sentences(words, args.valid_words, rng)) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
