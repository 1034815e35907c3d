"""Time `tlint verify` (run by hand, not in CI).

    python bench/verify_bench.py [--repeat N]

For each case (the demo's classifier as configured in fixtures/demo/tlint.toml, and the
zoo's nanoGPT-style model at 2 layers, d=64), it reports:

- the `tlint verify --format json` process: wall seconds and CPU seconds (its own and the
  child process's that runs the model, user + system);
- per probe: the seconds the child measured around the probe (the worker records them; the
  JSON output's schema has no field for them, so they are read from `run_worker` here).

Best of N runs (default 3). CPU only; `torch.set_num_threads(1)` in the worker."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = {
    "demo (fixtures/demo, as configured)": {"cwd": REPO / "fixtures" / "demo", "args": []},
    "zoo gpt, 2 layers, d=64": {
        "cwd": REPO / "fixtures" / "models",
        "args": ["--model", "gpt:build_gpt", "--model-kwargs", '{"n_layer": 2, "d_model": 64, "n_head": 4}',
                 "--seq-len", "32"],
    },
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def time_cli(cwd: Path, args: list[str]) -> tuple[float, float, dict]:
    """(wall s, CPU s of the process and its children, summary) of one `tlint verify` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tlint", "verify", *args, "--format", "json"], cwd=cwd,
                          env=_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode == 2:
        raise SystemExit(f"tlint verify failed: {proc.stdout}{proc.stderr}")
    return wall, cpu, json.loads(proc.stdout)["summary"]


def probe_seconds(cwd: Path, args: list[str]) -> dict[str, float]:
    """Per-probe seconds, as the worker measured them."""
    from tlint.cli import build_parser
    from tlint.verify.command import load_options, run_worker

    saved = Path.cwd()
    os.chdir(cwd)
    try:
        options = load_options(build_parser().parse_args(["verify", *args]))
        result = run_worker(options)
    finally:
        os.chdir(saved)
    return {p["probe"]: p["seconds"] for p in result["probes"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    for name, case in CASES.items():
        runs = [time_cli(case["cwd"], case["args"]) for _ in range(options.repeat)]
        wall, cpu, summary = min(runs, key=lambda r: r[0])
        seconds = min((probe_seconds(case["cwd"], case["args"]) for _ in range(options.repeat)),
                      key=lambda s: sum(s.values()))
        print(f"{name}: wall {wall:.2f} s, CPU {cpu:.2f} s (best of {options.repeat}); "
              f"{summary['probes']} probes, {summary['failed']} failed, {summary['confirmed']} findings confirmed")
        for probe, secs in seconds.items():
            print(f"    {probe:20} {secs:6.3f} s")
        print(f"    {'all probes':20} {sum(seconds.values()):6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
