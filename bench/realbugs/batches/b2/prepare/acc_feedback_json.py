"""Write a JSON file of synthetic preference feedback (chat prompts with labelled responses).

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it stands in
for a labelled feedback file (or a hub preference set) that an alignment script reads with
`json.load`. Each record is one response to one prompt, in chat-message form:

- binary:   {"type": "binary_feedback", "prompt_id", "prompt": [messages], "output": [messages],
             "label": 0 or 1, "reward", "split"}
- pairwise: {"type": "pairwise_feedback", "prompt_id", "prompt": [messages], "output_A": [messages],
             "output_B": [messages], "label": 1 if A is preferred else 0, "reward_A", "reward_B",
             "split"}

Every prompt gets `--responses` binary records (at least one desirable, one undesirable) or one
pairwise record. The last `--test` prompts carry split "test", the others "train". Text lengths
vary so that batches need padding. Seeded and repeatable.

    python acc_feedback_json.py OUT.json [--kind binary|pairwise] [--prompts N] [--test K]
                                [--responses R] [--min-words A] [--max-words B] [--seed S]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = ("the a of in to and for with river city school music history king town family game "
         "player island mountain village road bridge was is are had became built named known "
         "north south east west old new first second large small early late one two three").split()


def sentence(rng: random.Random, lo: int, hi: int) -> str:
    """A capitalised run of `lo`..`hi` words ending in a full stop."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    text = " ".join(words)
    return text[:1].upper() + text[1:] + "."


def records(args: argparse.Namespace) -> list[dict]:
    """The feedback records, prompt by prompt."""
    rng = random.Random(args.seed)
    out: list[dict] = []
    for pid in range(args.prompts):
        split = "test" if pid >= args.prompts - args.test else "train"
        prompt = [{"role": "user", "content": sentence(rng, args.min_words, args.max_words)}]

        def reply() -> list[dict]:
            return [{"role": "assistant", "content": sentence(rng, args.min_words, args.max_words)}]

        if args.kind == "binary":
            for r in range(args.responses):
                label = 1 if r % 2 == 0 else 0
                out.append({"type": "binary_feedback", "prompt_id": f"p{pid}", "prompt": prompt,
                            "output": reply(), "label": label,
                            "reward": round(rng.uniform(0.5, 1.0) if label else rng.uniform(0.0, 0.5), 4),
                            "split": split})
        else:
            reward_a, reward_b = round(rng.random(), 4), round(rng.random(), 4)
            out.append({"type": "pairwise_feedback", "prompt_id": f"p{pid}", "prompt": prompt,
                        "output_A": reply(), "output_B": reply(), "label": int(reward_a >= reward_b),
                        "reward_A": reward_a, "reward_B": reward_b, "split": split})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--kind", choices=["binary", "pairwise"], default="binary")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--test", type=int, default=8, help="prompts (the last ones) with split 'test'")
    parser.add_argument("--responses", type=int, default=2, help="binary records per prompt")
    parser.add_argument("--min-words", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.prompts < 1 or not 0 <= args.test < args.prompts:
        parser.error("need --prompts >= 1 and 0 <= --test < --prompts")
    if args.responses < 2 or not 1 <= args.min_words <= args.max_words:
        parser.error("need --responses >= 2 and 1 <= --min-words <= --max-words")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records(args), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
