"""Write synthetic conversations or instruction records as JSON for a case's fine-tuning script.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b4). The text is made
of the words `w<i>` that data_tiny_lm.py's word-level tokenizer knows (one id per word), drawn with a
fixed seed, so every record tokenises without unknown tokens.

    python data_chat_json.py OUT.json [--n 64] [--turns 1] [--words-from 16] [--words-to 200]
                             [--min-words 4] [--max-words 24] [--format messages|alpaca|conversations]
                             [--lines] [--seed 0] [--text-field output] [--response-key "w5 w6"]

Formats (one record each):
  messages       {"messages": [{"role": "user", "content": ...}, {"role": "assistant", "content": ...}, ...]}
  conversations  {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}
  alpaca         {"instruction": ..., "input": ..., "output": ...}
  completion     {TEXT_FIELD: "<prompt words> RESPONSE_KEY <response words>"} (one text with a response marker
                 made of vocabulary words, for completion-only collators given that marker)
--lines writes JSON lines (one record a line) instead of one JSON list.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path


def sentence(rng: random.Random, args: argparse.Namespace) -> str:
    n = rng.randint(args.min_words, args.max_words)
    return " ".join(f"w{rng.randint(args.words_from, args.words_to)}" for _ in range(n))


def record(rng: random.Random, args: argparse.Namespace) -> dict:
    if args.format == "alpaca":
        return {"instruction": sentence(rng, args), "input": sentence(rng, args) if rng.random() < 0.5 else "",
                "output": sentence(rng, args)}
    turns = []
    for _ in range(args.turns):
        turns += [("user", "human", sentence(rng, args)), ("assistant", "gpt", sentence(rng, args))]
    if args.format == "completion":
        return {args.text_field: f"{sentence(rng, args)} {args.response_key} {sentence(rng, args)}"}
    if args.format == "messages":
        return {"messages": [{"role": role, "content": text} for role, _, text in turns]}
    return {"conversations": [{"from": who, "value": text} for _, who, text in turns]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--words-from", type=int, default=16)
    parser.add_argument("--words-to", type=int, default=200)
    parser.add_argument("--min-words", type=int, default=4)
    parser.add_argument("--max-words", type=int, default=24)
    parser.add_argument("--format", default="messages", choices=["messages", "conversations", "alpaca", "completion"])
    parser.add_argument("--text-field", default="output")
    parser.add_argument("--response-key", default="w5 w6")
    parser.add_argument("--lines", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not (0 < args.min_words <= args.max_words) or not (0 <= args.words_from <= args.words_to):
        print("data_chat_json: need 0 < --min-words <= --max-words and --words-from <= --words-to",
              file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    records = [record(rng, args) for _ in range(args.n)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.lines:
        out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        out.write_text(json.dumps(records, indent=1), encoding="utf-8")
    print(f"data_chat_json: {len(records)} {args.format} records written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
