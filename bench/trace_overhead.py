"""The overhead of `tlint trace`'s hooks on a training loop (run by hand, not in CI).

    python bench/trace_overhead.py [--steps 100] [--repeats 5] [--json out.json]

Trains a tiny GPT-2 (built from a config: no download; 2 layers, d=64, batch 8 x 64 tokens,
the same model as bench/watch_overhead.py) on CPU with one intra-op thread, in a plain loop
(zero_grad, forward, backward, clip, AdamW step, scheduler step), two ways, interleaved so
that a load on the machine falls on both alike:

- `baseline`: no hooks;
- `traced`: the hooks `tlint trace` installs in its child (`tlint.runtime.hooks.Tracer`, with
  the invariants), installed around the loop in this process.

CPU time of the loop (`time.process_time`), best of `--repeats` runs each; the overhead is
the best traced run over the best baseline run. The target (issue 41): at most 10 %. The
child's start (importing torch, the script's own imports) is not counted: it is paid once
per run, not per step."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from tinygpt import add_arguments, model_and_data  # bench/tinygpt.py (the script's folder is on sys.path)

from tlint.runtime.hooks import Tracer
from tlint.runtime.invariants import Invariants


def run(model, data, steps: int) -> float:
    """CPU seconds of `steps` training steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=steps)
    model.train()
    clock = time.process_time
    start = clock()
    for step in range(steps):
        opt.zero_grad()
        loss = model(**data[step % len(data)]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return clock() - start


def traced(model, data, steps: int) -> tuple[float, dict[str, int]]:
    tracer = Tracer(Invariants(), lambda violation: None)
    tracer.install()
    try:
        seconds = run(model, data, steps)
    finally:
        tracer.uninstall()
    assert not tracer.inv.violations, [v.message for v in tracer.inv.violations]
    return seconds, tracer.counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    add_arguments(parser, heads=4, vocab=256)
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, data = model_and_data(args, padded=False)
    run(model, data, 5)  # warm up
    base, hooked, counts = [], [], {}
    for _ in range(args.repeats):
        base.append(run(model, data, args.steps))
        seconds, counts = traced(model, data, args.steps)
        hooked.append(seconds)
    best_base, best_traced = min(base), min(hooked)
    overhead = best_traced / best_base - 1
    result = {"steps": args.steps, "repeats": args.repeats, "threads": 1,
              "parameters": sum(p.numel() for p in model.parameters()),
              "baseline_s": base, "traced_s": hooked, "best_baseline_s": best_base, "best_traced_s": best_traced,
              "ms_per_step_baseline": 1000 * best_base / args.steps,
              "ms_per_step_traced": 1000 * best_traced / args.steps, "overhead": overhead, "events": counts,
              "torch": torch.__version__}
    print(f"baseline {best_base:.3f} s ({1000 * best_base / args.steps:.2f} ms/step), traced {best_traced:.3f} s "
          f"({1000 * best_traced / args.steps:.2f} ms/step): overhead {100 * overhead:+.1f} % "
          f"(target <= 10 %; best of {args.repeats}, {args.steps} steps)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
