"""Write a tiny synthetic instruction / chat / text data set as JSON or JSON lines.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
data set that a case's fine-tuning script would otherwise download. Records are made of short
pseudo-words drawn with a fixed seed, in one of the common record shapes:

- sharegpt: {"id", "conversations": [{"from": "human"|"gpt", "value"}, ...]}
- alpaca:   {"instruction", "input", "output"}
- text:     {"text"}
- pair:     {"source", "target"}
- label:    {"sentence", "label"} (label is an int below --labels)
- nli:      {"premise", "hypothesis", "label"} (label is an int below --labels)
- sts:      {"sentence1", "sentence2", "score"} (score is a float in [0, 1])
- qa:       {"query", "answer"}
- ranking:  {"instruction", "input", "output": [chosen, rejected]}

    python hf_text_records.py OUT.json --shape sharegpt [--n 32] [--words 12] [--turns 2]
                              [--lines] [--labels 2] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SHAPES = ["sharegpt", "alpaca", "text", "pair", "label", "nli", "sts", "qa", "ranking"]
SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "va", "zu", "he"]


def words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(n))


def record(shape: str, rng: random.Random, i: int, n_words: int, turns: int, labels: int) -> dict:
    if shape == "sharegpt":
        conv = []
        for _ in range(turns):
            conv.append({"from": "human", "value": words(rng, n_words)})
            conv.append({"from": "gpt", "value": words(rng, n_words)})
        return {"id": f"r{i}", "conversations": conv}
    if shape == "alpaca":
        return {"instruction": words(rng, n_words), "input": words(rng, n_words // 2) if i % 2 else "",
                "output": words(rng, n_words)}
    if shape == "pair":
        return {"source": words(rng, n_words), "target": words(rng, n_words)}
    if shape == "label":
        return {"sentence": words(rng, n_words), "label": rng.randrange(labels)}
    if shape == "nli":
        return {"premise": words(rng, n_words), "hypothesis": words(rng, n_words), "label": rng.randrange(labels)}
    if shape == "ranking":
        return {"instruction": words(rng, n_words), "input": "", "output": [words(rng, n_words), words(rng, n_words)]}
    if shape == "qa":
        return {"query": words(rng, n_words), "answer": words(rng, n_words)}
    if shape == "sts":
        return {"sentence1": words(rng, n_words), "sentence2": words(rng, n_words), "score": round(rng.random(), 3)}
    return {"text": words(rng, n_words)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--shape", default="text", choices=SHAPES)
    parser.add_argument("--n", type=int, default=32, help="number of records")
    parser.add_argument("--words", type=int, default=12, help="words per field")
    parser.add_argument("--turns", type=int, default=2, help="human/gpt turn pairs (sharegpt)")
    parser.add_argument("--labels", type=int, default=2, help="classes (label)")
    parser.add_argument("--lines", action="store_true", help="JSON lines instead of one JSON list")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    rows = [record(args.shape, rng, i, args.words, args.turns, args.labels) for i in range(args.n)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        if args.lines:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
        else:
            json.dump(rows, fh)
    print(f"{args.n} {args.shape} records in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
