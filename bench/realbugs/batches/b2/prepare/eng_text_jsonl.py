"""Write a JSON-lines file of short synthetic English-like documents, one {"text": ...} per line.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it stands in
for a hub text corpus (a Wikipedia dump, a news set) that a training script loads with
`datasets.load_dataset`; `load_dataset("json", data_files=FILE)` reads this file. Document
lengths vary widely so that padding to a fixed length leaves many pad positions. Seeded and
repeatable.

    python eng_text_jsonl.py OUT.jsonl [--docs N] [--min-words A] [--max-words B] [--seed S]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = ("the a an of in on at to from by with for and or but river city school team music "
         "history war king church town family language station film album season game player "
         "country island mountain village road bridge was is were are had has became built "
         "founded named located known played released born died north south east west old "
         "new first second third large small early late one two three many several").split()


def document(rng: random.Random, lo: int, hi: int) -> str:
    """One or more sentences, `lo`..`hi` words in all."""
    n = rng.randint(lo, hi)
    words = [rng.choice(WORDS) for _ in range(n)]
    out, start = [], 0
    while start < n:
        end = min(n, start + rng.randint(4, 12))
        sentence = " ".join(words[start:end])
        out.append(sentence[:1].upper() + sentence[1:] + ".")
        start = end
    return " ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--min-words", type=int, default=2)
    parser.add_argument("--max-words", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.docs < 1 or not 1 <= args.min_words <= args.max_words:
        parser.error("need --docs >= 1 and 1 <= --min-words <= --max-words")
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for _ in range(args.docs):
            handle.write(json.dumps({"text": document(rng, args.min_words, args.max_words)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
