"""Write synthetic training records (JSON lines) into a dataset folder for TRL-style trainers.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b3): it replaces a
dataset that a case's script would otherwise download, so that `load_dataset(FOLDER)` finds
FOLDER/train.jsonl (and FOLDER/test.jsonl). Text is drawn from the synthetic words of `_words.py`
(the vocabulary of `chat_tokenizer.py`), with varied lengths so that batches need padding.

Shapes (the column layouts of TRL's dataset types):
  text                {"text"}
  prompt-completion   {"prompt", "completion"}        (--chat: lists of messages)
  messages            {"messages"}                     (always conversational)
  preference          {"prompt", "chosen", "rejected"} (--chat: lists of messages)
  unpaired            {"prompt", "completion", "label"}
  prompt              {"prompt"}                       (--chat: a list with one user message)

    python text_records.py FOLDER --shape preference [--chat] [--n 64] [--test 8] [--words 200]
                           [--min-len 3] [--max-len 12] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from _words import words

SHAPES = ["text", "prompt-completion", "messages", "preference", "unpaired", "prompt"]


def record(rng: random.Random, shape: str, chat: bool, vocab: list[str], lo: int, hi: int) -> dict:
    def sentence() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi))) + rng.choice([".", "?", "!"])

    def user(text: str) -> list[dict]:
        return [{"role": "user", "content": text}]

    def assistant(text: str) -> list[dict]:
        return [{"role": "assistant", "content": text}]

    if shape == "text":
        return {"text": " ".join(sentence() for _ in range(rng.randint(1, 3)))}
    if shape == "messages":
        return {"messages": user(sentence()) + assistant(sentence())}
    prompt = sentence()
    if shape == "prompt":
        return {"prompt": user(prompt) if chat else prompt}
    if shape == "preference":
        chosen, rejected = sentence(), sentence()
        if chat:
            return {"prompt": user(prompt), "chosen": assistant(chosen), "rejected": assistant(rejected)}
        return {"prompt": prompt, "chosen": " " + chosen, "rejected": " " + rejected}
    completion = sentence()
    rec: dict = ({"prompt": user(prompt), "completion": assistant(completion)} if chat
                 else {"prompt": prompt, "completion": " " + completion})
    if shape == "unpaired":
        rec["label"] = rng.random() < 0.5
    return rec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--shape", required=True, choices=SHAPES)
    parser.add_argument("--chat", action="store_true", help="conversational records (lists of messages)")
    parser.add_argument("--n", type=int, default=64, help="training records")
    parser.add_argument("--test", type=int, default=8, help="test records (0: no test split)")
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--min-len", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.min_len <= args.max_len:
        parser.error("need 1 <= --min-len <= --max-len")
    rng = random.Random(args.seed)
    vocab = words(args.words)
    out = Path(args.folder)
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", args.n), ("test", args.test)):
        if n <= 0:
            continue
        rows = [record(rng, args.shape, args.chat, vocab, args.min_len, args.max_len) for _ in range(n)]
        (out / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{args.n} train / {args.test} test {args.shape} records in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
