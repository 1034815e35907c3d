"""Write a synthetic copy task (source and target text files, one sequence per line) into a folder.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b3): it writes the
files a sequence-to-sequence script reads for a copy task, `src-{train,val,test}.txt` and
`tgt-{train,val,test}.txt`, each line a random string of ASCII letters whose target is the same
string (optionally reversed), so the script need not generate or download its data.

    python copy_task_text.py FOLDER [--train 256] [--val 16] [--test 16] [--min-len 4] [--max-len 12]
                             [--reverse] [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import string
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--train", type=int, default=256)
    parser.add_argument("--val", type=int, default=16)
    parser.add_argument("--test", type=int, default=16)
    parser.add_argument("--min-len", type=int, default=4)
    parser.add_argument("--max-len", type=int, default=12)
    parser.add_argument("--reverse", action="store_true", help="target is the source reversed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 1 <= args.min_len <= args.max_len:
        parser.error("need 1 <= --min-len <= --max-len")
    rng = random.Random(args.seed)
    letters = string.ascii_letters
    out = Path(args.folder)
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", args.train), ("val", args.val), ("test", args.test)):
        src = ["".join(rng.choice(letters) for _ in range(rng.randint(args.min_len, args.max_len)))
               for _ in range(n)]
        tgt = [s[::-1] if args.reverse else s for s in src]
        (out / f"src-{split}.txt").write_text("".join(s + "\n" for s in src), encoding="utf-8")
        (out / f"tgt-{split}.txt").write_text("".join(t + "\n" for t in tgt), encoding="utf-8")
    print(f"copy task: {args.train}/{args.val}/{args.test} lines in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
