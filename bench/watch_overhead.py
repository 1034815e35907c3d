"""The overhead of `tlint.watch` on a training loop (run by hand, not in CI).

    python bench/watch_overhead.py [--steps 200] [--repeats 5] [--every 50] [--json out.json]

Trains a tiny GPT-2 (built from a config: no download) on CPU with one intra-op thread, in
a plain loop (forward, backward, clip, AdamW step), three ways, interleaved so that a load
on the machine falls on all of them alike:

- `baseline`: no watch;
- `per-step`: `Watch(..., measure=False)`, the per-step checks alone (the loss kept on the
  device, the applied learning rates, the window read every `every` steps);
- `every=N`: the whole watch, sampled steps included (step 1 and every N-th: gradient
  norms, update ratios, activation ranges, attention capture).

CPU time of the training loop (`time.process_time`, which a machine shared with other
processes disturbs less than wall time), best of `--repeats` runs each; the overhead is the
best run of a mode over the best baseline run. The targets (README "Watching a training
run"): at most 3 % at every=50, at most 2 % for the per-step checks."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from tinygpt import add_arguments, model_and_data  # bench/tinygpt.py (the script's folder is on sys.path)

from tlint.watch import Watch


def run(model, opt, data, steps, watch, per_step=None):
    """CPU seconds of `steps` training steps; with `per_step`, appends (step seconds, seconds
    inside the watch's calls, sampled?) for each step."""
    clock = time.process_time
    start = clock()
    for step in range(steps):
        t0 = clock()
        batch = data[step % len(data)]
        sampled = watch is not None and watch.sampled()
        loss = model(**batch).loss
        loss.backward()
        t1 = clock()
        if watch is not None:
            watch.after_backward(loss)
        t2 = clock()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = clock()
        if watch is not None:
            watch.after_step()
        t4 = clock()
        if per_step is not None:
            per_step.append((t4 - t0, (t2 - t1) + (t4 - t3), sampled))
    return clock() - start


def decompose(per_step, every):
    """The watch's cost from within one run (neighbouring steps share the machine's load):
    the per-step calls on plain steps, and what a sampled step costs over its plain
    neighbours (its hooked forward and backward included)."""
    plain = [i for i, (_, _, sampled) in enumerate(per_step) if not sampled]
    step = statistics.median(per_step[i][0] for i in plain)
    calls = statistics.median(per_step[i][1] for i in plain)
    extras = []
    for i, (seconds, _, sampled) in enumerate(per_step):
        if sampled and i > 0:  # step 1 pays for first calls as well
            near = [per_step[j][0] for j in range(max(0, i - 5), min(len(per_step), i + 6)) if j in plain]
            extras.append(seconds - statistics.median(near))
    extra = statistics.median(extras) if extras else 0.0
    return {"plain_step_ms": step * 1000, "per_step_calls_ms": calls * 1000, "sampled_extra_ms": extra * 1000,
            "per_step_percent": calls / (step - calls) * 100,
            "every_percent": (calls + extra / every) / (step - calls) * 100}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--every", type=int, default=50)
    add_arguments(parser, heads=2, vocab=500)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, data = model_and_data(args, padded=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    modes = {"baseline": None, "per-step": {"measure": False}, f"every={args.every}": {}}
    run(model, opt, data, 20, None)  # warm up
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    parts: list[dict[str, float]] = []
    for _ in range(args.repeats):
        for mode, options in modes.items():
            watch = None if options is None else Watch(model, opt, every=args.every, output_dir=None,
                                                       print_summary=False, **options)
            per_step: list = []
            times[mode].append(run(model, opt, data, args.steps, watch, per_step if options == {} else None))
            if options == {}:
                parts.append(decompose(per_step, args.every))
            print(f"  ({mode}: {times[mode][-1]:.3f} s)", file=sys.stderr, flush=True)
            if watch is not None:
                watch.close()
                assert watch.steps == args.steps and not watch.problems, watch.summary()
    best = {mode: min(values) for mode, values in times.items()}
    params = sum(p.numel() for p in model.parameters())
    print(f"tiny GPT-2: {args.layers} layers, d={args.width}, {params / 1e6:.2f}M parameters, batch {args.batch} x "
          f"{args.seq} tokens; {args.steps} steps, CPU time best of {args.repeats} (1 thread)")
    step_ms = best["baseline"] / args.steps * 1000
    for mode, value in best.items():
        over = (value / best["baseline"] - 1) * 100
        print(f"  {mode:<10} {value:7.3f} s  {value / args.steps * 1000:6.2f} ms/step"
              + ("" if mode == "baseline" else f"  {over:+5.2f} %"))
    print(f"  (baseline step {step_ms:.2f} ms; all runs: " + "; ".join(
        f"{m}: {', '.join(f'{v:.2f}' for v in vs)}" for m, vs in times.items()) + ")")
    inside = {key: statistics.median(p[key] for p in parts) for key in parts[0]}
    print(f"  within the every={args.every} runs (medians): plain step {inside['plain_step_ms']:.2f} ms, the watch's "
          f"calls {inside['per_step_calls_ms'] * 1000:.0f} us/step ({inside['per_step_percent']:+.2f} %), "
          f"a sampled step +{inside['sampled_extra_ms']:.2f} ms; overhead at every={args.every}: "
          f"{inside['every_percent']:+.2f} %")
    if args.json:
        args.json.write_text(json.dumps({"config": vars(args) | {"json": None}, "parameters": params,
                                         "best": best, "runs": times,
                                         "within": inside}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
