"""Time `tlint verify` (run by hand, not in CI); score it on a batch of real models.

    python bench/verify_bench.py [--repeat N]
    python bench/verify_bench.py --batch bench/verify_models/batch-1.toml [--record first-sight|after]

For each case (the demo's classifier as configured in fixtures/demo/tlint.toml, and the
zoo's nanoGPT-style model at 2 layers, d=64), it reports:

- the `tlint verify --format json` process: wall seconds and CPU seconds (its own and the
  child process's that runs the model, user + system);
- per probe: the seconds the child measured around the probe (the worker records them; the
  JSON output's schema has no field for them, so they are read from `run_worker` here).

Best of N runs (default 3). CPU only; `torch.set_num_threads(1)` in the worker.

With `--batch FILE` (a TOML list of `[[case]]`: `id`, `kind` = "correct" or "bug",
`factory`, optional `call`, a bug's `expect`: the probes whose failure shows it), each case
is verified once from the batch file's folder (`tlint verify --model FACTORY --format json`)
and scored: on a correct model a failing probe or a confirmed finding is a false alarm; a
planted bug is `confirmed` (a probe fails), `inconclusive` (none fails, but a probe of
`expect` or a key probe was skipped, or causality was left inconclusive) or `not-reproduced`.
It prints each case, the counts and the median CPU seconds per verify. `--record NAME` writes
the figures to `<batch>.<NAME>.json` beside the batch file, with the commit; a record that
exists is never overwritten (the first-sight record stays as it was taken)."""

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


def _verify_case(folder: Path, case: dict) -> dict:
    """One `tlint verify` run of a batch case: its exit code, CPU seconds and report."""
    args = ["--model", case["factory"], "--format", "json", *(["--call", case["call"]] if case.get("call") else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tlint", "verify", *args], cwd=folder, env=_env(),
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = {"error": {"kind": "output", "message": (proc.stdout + proc.stderr)[-500:]}}
    return {"rc": proc.returncode, "cpu": round(cpu, 2), "wall": round(wall, 2), "report": report}


def score_case(case: dict, run: dict) -> dict:
    """The case's verdict from one run (see the module docstring)."""
    report = run["report"]
    out: dict = {"id": case["id"], "kind": case["kind"], "rc": run["rc"], "cpu": run["cpu"]}
    if "error" in report:
        out.update(verdict="error", detail=report["error"]["message"][:300])
        return out
    probes = {p["probe"]: p for p in report["probes"]}
    failed = sorted(name for name, p in probes.items() if p["status"] == "fail")
    confirmed = sorted({f["code"] for f in report["findings"] if f["verdict"] == "confirmed"})
    causal = report["model"].get("causal")
    out.update(failed=failed, confirmed=confirmed, causal=causal,
               causal_evidence=report["model"].get("causal_evidence", ""))
    if case["kind"] == "correct":
        out["verdict"] = "false-alarm" if failed or confirmed else "clean"
        out["detail"] = "; ".join(f"{name}: {probes[name]['detail'][:200]}" for name in failed)
        return out
    expect = case.get("expect", [])
    skipped = [name for name in expect if name in probes and probes[name]["status"] == "skip"]
    key = report["summary"].get("skipped_key_probes", [])
    if failed or confirmed:
        out["verdict"] = "confirmed"
        out["expected_failed"] = sorted(set(failed) & set(expect))
    elif skipped or key or causal == "inconclusive":
        out["verdict"] = "inconclusive"
        out["detail"] = "; ".join(f"{name} skipped: {probes[name]['detail'][:160]}" for name in skipped + key)
    else:
        out["verdict"] = "not-reproduced"
        out["detail"] = "; ".join(f"{name} {probes[name]['status']}: {probes[name]['detail'][:160]}"
                                  for name in expect if name in probes)
    return out


def run_batch(path: Path, record: str | None) -> int:
    import statistics

    import tomllib

    cases = tomllib.loads(path.read_text(encoding="utf-8"))["case"]
    target = path.with_name(f"{path.stem}.{record}.json") if record else None
    if target is not None and target.exists():
        raise SystemExit(f"{target} exists: a record is never rewritten (name another one)")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=False).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "tlint"], cwd=REPO, capture_output=True,
                                text=True, check=False).stdout.strip())
    scored = []
    for case in cases:
        result = score_case(case, _verify_case(path.parent, case))
        scored.append(result)
        print(f"{result['id']:28} {result['kind']:8} {result['verdict']:15} rc {result['rc']}  "
              f"CPU {result['cpu']:5.2f} s  failed {','.join(result.get('failed', [])) or '-'}"
              + (f"  causal {result['causal']}" if result.get("causal") else ""), flush=True)
    counts: dict[str, int] = {}
    for result in scored:
        counts[f"{result['kind']}:{result['verdict']}"] = counts.get(f"{result['kind']}:{result['verdict']}", 0) + 1
    cpu_all = statistics.median(r["cpu"] for r in scored)
    cpu_correct = statistics.median(r["cpu"] for r in scored if r["kind"] == "correct")
    print(f"counts: {counts}; median CPU per verify: {cpu_all:.2f} s (all), {cpu_correct:.2f} s (correct models)")
    if target is not None:
        target.write_text(json.dumps({"batch": path.name, "record": record, "commit": commit,
                                      "tlint_changed_since_commit": dirty, "counts": counts,
                                      "median_cpu_s": round(cpu_all, 2), "median_cpu_correct_s": round(cpu_correct, 2),
                                      "machine": f"{os.cpu_count()} CPUs", "cases": scored}, indent=1) + "\n")
        print(f"recorded in {target}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=Path, help="a batch of real models (TOML) to verify and score")
    parser.add_argument("--record", help="write the batch's figures to <batch>.<RECORD>.json (never overwritten)")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if options.batch is not None:
        return run_batch(options.batch.resolve(), options.record)
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
