"""Write a tiny synthetic text-classification data set as a local folder of JSON-lines splits.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
classification data set that a case's script loads by name from a hub. `datasets.load_dataset(NAME)`
reads a local folder of that name before it looks anywhere else, so writing `NAME/train.jsonl` and
`NAME/test.jsonl` under the script's working directory serves the script's own call, unchanged.

Each record is {"text", "label", "label_text"}: short pseudo-sentences drawn with a fixed seed,
whose words lean towards their class so that a classifier has something to learn.

    python more_text_label_splits.py FOLDER [--train 64] [--test 32] [--labels 2] [--words 10] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SHARED = "the a of and to in is it that was for on with as this by at from".split()
CLASS_WORDS = [
    "good great fine lovely bright warm happy clever kind pleasant".split(),
    "bad poor dull awful grim cold sad clumsy rude tedious".split(),
    "odd plain quiet mild vague brief usual modest neutral average".split(),
    "fast loud sharp bold wild fierce quick rapid sudden intense".split(),
]


def record(rng: random.Random, label: int, words: int) -> dict:
    """One {"text", "label", "label_text"} record of class `label`."""
    own = CLASS_WORDS[label % len(CLASS_WORDS)]
    text = " ".join(rng.choice(own) if rng.random() < 0.4 else rng.choice(SHARED) for _ in range(words))
    return {"text": text, "label": label, "label_text": f"class{label}"}


def write_split(path: Path, n: int, labels: int, words: int, rng: random.Random) -> None:
    """`n` records, the classes taking turns so that every class is present."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            out.write(json.dumps(record(rng, i % labels, words)) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the data set's folder (created; train.jsonl and test.jsonl go in it)")
    parser.add_argument("--train", type=int, default=64, help="training records")
    parser.add_argument("--test", type=int, default=32, help="test records")
    parser.add_argument("--labels", type=int, default=2, help="classes (2 to 4)")
    parser.add_argument("--words", type=int, default=10, help="words per text")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 2 <= args.labels <= len(CLASS_WORDS):
        parser.error(f"--labels must be between 2 and {len(CLASS_WORDS)}")
    if args.train < args.labels or args.test < args.labels or args.words < 1:
        parser.error("--train and --test must be at least --labels, and --words at least 1")
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    write_split(folder / "train.jsonl", args.train, args.labels, args.words, rng)
    write_split(folder / "test.jsonl", args.test, args.labels, args.words, rng)
    print(f"{args.train} + {args.test} records, {args.labels} classes, in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
