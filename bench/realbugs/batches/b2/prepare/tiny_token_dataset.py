"""Write a tiny synthetic token dataset: a list of {"tokens": LongTensor[ctx]} saved with torch.save.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
data set that a case's script would otherwise download. Token ids are drawn uniformly from
[0, vocab) with a fixed seed, so every run sees the same batches.

    python tiny_token_dataset.py OUT.pt [--n 24] [--ctx 64] [--vocab 256] [--seed 0]
"""
from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=24, help="number of sequences")
    parser.add_argument("--ctx", type=int, default=64, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=256, help="ids are drawn from [0, vocab)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import torch

    gen = torch.Generator().manual_seed(args.seed)
    rows = [{"tokens": torch.randint(0, args.vocab, (args.ctx,), generator=gen)} for _ in range(args.n)]
    torch.save(rows, args.out)
    print(f"tiny token dataset: {args.n} x {args.ctx} ids < {args.vocab} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
