"""Benchmark `tlint check` on `hf100k` against LibCST's parse floor (run by hand, not in CI).

    python bench/bench.py [--wheel transformers-5.17.0-py3-none-any.whl] [--work /tmp/tlint-bench]
                          [--peers /tmp/benchvenv] [--tlint-path TREE] [--only cold] [--repeat N]
                          [--compare OLD_TREE]

`hf100k`: the `models/**/*.py` files of the `transformers==5.17.0` wheel, sorted by path,
taken until 100,000 lines are passed (281 files, 100,752 lines), copied under
WORK/hf100k/ with their relative paths. The wheel is `pip download`ed into WORK unless
`--wheel` names one.

Reported, in one run (wall seconds of whole processes, best of `--repeat`):
- the LibCST parse-only floor (read + `libcst.parse_module` per file) with 1 and 2 processes;
- tlint cold (`--no-cache --select ALL`) with `--jobs 1` and `--jobs 2`, as a ratio to the
  floor at the same process count, and jobs 1 / jobs 2;
- tlint warm (cache on, nothing changed) and warm after touching one file, when the cache exists;
- one-file latency on the corpus file closest to 1,752 lines, and `import tlint.cli`;
- peak memory (max RSS of the tlint process and its workers, from `wait4`);
- per-rule / per-view / per-phase seconds (bench/profile_rules.py, one job, in process);
- Fixit 2.2.1 and TorchFix 0.7.0 on the same files when `--peers VENV` has them
  (`python -m venv VENV && VENV/bin/pip install fixit==2.2.1 torchfix==0.7.0`);
- a byte-identity check: the JSON output of jobs 1, jobs 2 (and the warm run) are equal;
- the pre-filter: how many files it keeps from LibCST, the cold `--jobs 2` run without it
  (`TLINT_NO_PREFILTER=1`), and a byte-identity check of the two outputs.

`python bench/bench.py --prefilter-audit PATH...` instead checks the pre-filter on any
folder (e.g. the standard library's `Lib`): identical output with and without it, and every
rule's and extractor's tokens on their own (bench/prefilter_audit.py).

`--tlint-path TREE` times another checkout (e.g. a `git worktree` of an older commit);
`--compare OLD_TREE` times this tree (or `--tlint-path`) against OLD_TREE, interleaved, and
prints new / old (the figure a change's speed target is stated in).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINES = 100_000
ONE_FILE_LINES = 1_752

FLOOR = r"""
import sys, time
from concurrent.futures import ProcessPoolExecutor
import libcst

def parse(path):
    with open(path, "rb") as f:
        libcst.parse_module(f.read().decode("utf-8"))
    return 0

files = sys.argv[2:]
jobs = int(sys.argv[1])
if jobs == 1:
    for f in files:
        parse(f)
else:
    with ProcessPoolExecutor(jobs) as pool:
        list(pool.map(parse, files, chunksize=max(1, len(files) // (jobs * 4))))
"""


def build_corpus(work: Path, wheel: Path | None) -> tuple[Path, list[Path], int]:
    corpus = work / "hf100k"
    if wheel is None:
        found = sorted((work / "wheel").glob("transformers-5.17.0-*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "transformers==5.17.0",
                            "-d", str(work / "wheel")], check=True)
            found = sorted((work / "wheel").glob("transformers-5.17.0-*.whl"))
        wheel = found[0]
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith("transformers/models/") and n.endswith(".py"))
        chosen, total = [], 0
        for name in names:
            text = zf.read(name).decode("utf-8")
            chosen.append((name, text))
            total += len(text.splitlines())
            if total >= LINES:
                break
        if corpus.exists():
            shutil.rmtree(corpus)
        files = []
        for name, text in chosen:
            target = corpus / name[len("transformers/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            files.append(target)
    return corpus, files, total


def timed(cmd: list[str], *, env=None, cwd=None) -> tuple[float, int, bytes]:
    """(wall seconds, peak RSS in KiB of the process and its reaped children, stdout)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        data = out.read()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd[:6])} ...")
    return wall, usage.ru_maxrss, data


def best(n: int, cmd, **kwargs) -> tuple[float, int, bytes]:
    runs = [timed(cmd, **kwargs) for _ in range(n)]
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


def compare(args, tlint, env, cwd) -> int:
    """`--compare OLD`: the cold `--jobs 1 --no-cache` run of this tree and of OLD, one
    after the other `--repeat` times (so load drifts hit both), best of each, the ratio
    new / old, and whether the JSON outputs are identical."""
    old_env = dict(env, PYTHONPATH=str(args.compare.resolve()))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.compare.resolve() / "tlint")],
                   check=False, env=old_env)
    cmd = [*tlint, "--jobs", "1", "--no-cache", "hf100k"]
    walls: dict[str, list[float]] = {"new": [], "old": []}
    outs: dict[str, bytes] = {}
    for _ in range(max(args.repeat, 1)):
        for name, run_env in (("old", old_env), ("new", env)):
            wall, _, out = timed(cmd, env=run_env, cwd=cwd)
            walls[name].append(wall)
            outs[name] = out
    new, old = min(walls["new"]), min(walls["old"])
    print(f"cold --jobs 1: new {new:.2f} s, old {old:.2f} s (best of {len(walls['new'])}; all new "
          f"{', '.join(f'{w:.2f}' for w in walls['new'])}; all old {', '.join(f'{w:.2f}' for w in walls['old'])})")
    print(f"new / old: {new / old:.3f}; identical JSON output: {outs['new'] == outs['old']}")
    return 0


def warm_figures(args, corpus, files, *, warm_cmd, env, fig, expected) -> None:
    """Warm runs in a copy of the corpus: the cache filled once, then nothing changed, then one file touched."""
    warm_dir = args.work / "warm"
    if warm_dir.exists():
        shutil.rmtree(warm_dir)
    shutil.copytree(corpus, warm_dir / "hf100k")
    warm = warm_cmd
    timed(warm, env=env, cwd=str(warm_dir))  # fills the cache
    fig["warm"], _, out = best(max(args.repeat, 3), warm, env=env, cwd=str(warm_dir))
    fig["identical_warm"] = out == expected
    touched = warm_dir / files[len(files) // 2].relative_to(args.work)
    original = touched.read_text(encoding="utf-8")
    walls = []
    for i in range(max(args.repeat, 3)):
        touched.write_text(original + f"\n# touched {i}\n", encoding="utf-8")
        walls.append(timed(warm, env=env, cwd=str(warm_dir))[0])
    touched.write_text(original, encoding="utf-8")
    fig["warm_touched"] = min(walls)
    print(f"warm, nothing changed: {fig['warm']:.2f} s (identical output: {fig['identical_warm']}); "
          f"one file touched: {fig['warm_touched']:.2f} s")


COUNT_PREFILTERED = r"""
import sys
from pathlib import Path
from tlint.config import ConfigResolver
from tlint.engine import Linter, prefilter_skips, read_text
linter = Linter(ConfigResolver(), select=["ALL"])
print(sum(prefilter_skips(text, linter.settings_for(Path(f).resolve().parent))
          for f in sys.argv[1:] for text in [read_text(Path(f), f)] if isinstance(text, str)))
"""


def prefilter_figures(args, fig, rel, *, tlint, env, cwd, expected, has_cache) -> None:
    """Files the pre-filter keeps from LibCST, and the cold `--jobs 2` run without it."""
    counted = subprocess.run([sys.executable, "-c", COUNT_PREFILTERED, *rel], check=False, env=env, cwd=cwd,
                             capture_output=True, text=True)
    if counted.returncode != 0:
        print("pre-filter: not in this tlint")
        return
    fig["prefiltered_files"] = int(counted.stdout)
    cold = [*tlint, "--jobs", "2", *(["--no-cache"] if has_cache else []), "hf100k"]
    fig["cold_j2_no_prefilter"], _, out = best(args.repeat, cold, env=dict(env, TLINT_NO_PREFILTER="1"), cwd=cwd)
    fig["identical_prefilter"] = out == expected
    print(f"pre-filter: {fig['prefiltered_files']} of {len(rel)} files not parsed by LibCST; cold --jobs 2 "
          f"without it {fig['cold_j2_no_prefilter']:.2f} s (with it {fig['cold_j2']:.2f} s); identical JSON "
          f"output: {fig['identical_prefilter']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "tlint-bench")
    parser.add_argument("--wheel", type=Path, help="a transformers-5.17.0 wheel (else pip download)")
    parser.add_argument("--peers", type=Path, help="a venv with fixit and torchfix installed")
    parser.add_argument("--tlint-path", type=Path, default=REPO, help="the tlint checkout to time (default: this one)")
    parser.add_argument("--only", choices=["cold"], help="only the cold runs (jobs 1 and 2) and the floor")
    parser.add_argument("--compare", type=Path, metavar="OLD_TREE",
                        help="only compare cold --jobs 1 runs of --tlint-path and OLD_TREE, interleaved "
                             "(best of --repeat each), and their outputs")
    parser.add_argument("--repeat", type=int, default=1, help="best of N for the corpus runs (default 1)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--prefilter-audit", nargs="+", metavar="PATH",
                        help="only check the pre-filter on these files/folders (bench/prefilter_audit.py)")
    args = parser.parse_args(argv)
    if args.prefilter_audit:
        sys.path.insert(0, str(REPO / "bench"))
        from prefilter_audit import main as audit

        return audit(args.prefilter_audit)

    args.work.mkdir(parents=True, exist_ok=True)
    corpus, files, lines = build_corpus(args.work, args.wheel)
    env = dict(os.environ, PYTHONPATH=str(args.tlint_path.resolve()))
    # Time tlint as an installed package runs: with its bytecode compiled (pip compiles it),
    # not compiling every module in every process as PYTHONDONTWRITEBYTECODE=1 without
    # __pycache__ would make it do (about 0.25 s a process on the machine of the figures).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.tlint_path.resolve() / "tlint")],
                   check=False, env=env)
    py = sys.executable
    tlint = [py, "-m", "tlint", "check", "--select", "ALL", "--format", "json", "--exit-zero"]
    cwd = str(args.work)  # not the checkout: `python -m` must find the tree in PYTHONPATH
    has_cache = "--no-cache" in subprocess.run([*tlint[:4], "--help"], env=env, cwd=cwd,
                                               capture_output=True, text=True).stdout \
        and (args.tlint_path / "tlint" / "cache.py").exists()
    fig: dict[str, float | str | int | bool] = {
        "files": len(files), "lines": lines, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
        "load_before": os.getloadavg()[0]}
    print(f"hf100k: {len(files)} files, {lines} lines in {corpus}")
    print(f"machine: {fig['machine']}; load average {fig['load_before']:.2f}")

    rel = [str(f.relative_to(args.work)) for f in files]
    if args.compare is not None:
        return compare(args, tlint, env, cwd)
    outputs = {}
    for jobs in (1, 2):
        fig[f"floor_j{jobs}"], _, _ = best(args.repeat, [py, "-c", FLOOR, str(jobs), *rel], cwd=cwd)
        cold = [*tlint, "--jobs", str(jobs), *(["--no-cache"] if has_cache else []), "hf100k"]
        fig[f"cold_j{jobs}"], fig[f"rss_j{jobs}_kib"], outputs[jobs] = best(args.repeat, cold, env=env, cwd=cwd)
        ratio = fig[f"cold_j{jobs}"] / fig[f"floor_j{jobs}"]
        fig[f"ratio_j{jobs}"] = ratio
        print(f"jobs {jobs}: LibCST parse floor {fig[f'floor_j{jobs}']:.2f} s; tlint cold {fig[f'cold_j{jobs}']:.2f} s "
              f"= {ratio:.2f} x the floor; peak RSS {fig[f'rss_j{jobs}_kib'] / 1024:.0f} MiB")
    fig["speedup_j2"] = fig["cold_j1"] / fig["cold_j2"]
    fig["identical_j1_j2"] = outputs[1] == outputs[2]
    print(f"--jobs 1 / --jobs 2: {fig['speedup_j2']:.2f} x; identical JSON output: {fig['identical_j1_j2']}")
    prefilter_figures(args, fig, rel, tlint=tlint, env=env, cwd=cwd, expected=outputs[2], has_cache=has_cache)
    findings = json.loads(outputs[2])
    fig["findings"] = len(findings["diagnostics"]) if isinstance(findings, dict) and "diagnostics" in findings \
        else len(findings) if isinstance(findings, list) else -1

    if args.only != "cold":
        if has_cache:
            try:
                warm_figures(args, corpus, files, warm_cmd=[*tlint, "--jobs", "2", "hf100k"], env=env,
                             fig=fig, expected=outputs[2])
            except SystemExit as exc:
                print(f"warm: {exc}")
        else:
            print("warm: no cache in this tlint")
        one = min(files, key=lambda f: abs(len(f.read_text(encoding="utf-8").splitlines()) - ONE_FILE_LINES))
        one_rel = str(one.relative_to(args.work))
        fig["one_file"], _, _ = best(3, [*tlint, *(["--no-cache"] if has_cache else []), one_rel], env=env, cwd=cwd)
        fig["one_file_name"] = one_rel
        fig["import_cli"] = min(
            float(subprocess.run([py, "-c", "import time; t = time.perf_counter(); import tlint.cli; "
                                  "print(time.perf_counter() - t)"], env=env, cwd=cwd, capture_output=True,
                                 text=True, check=True).stdout) for _ in range(5))
        print(f"one file ({one_rel}, {len(one.read_text(encoding='utf-8').splitlines())} lines), whole process: "
              f"{fig['one_file']:.2f} s; import tlint.cli: {fig['import_cli']:.3f} s")

        if args.peers:
            for tool, cmd in (("fixit", [str(args.peers / "bin" / "fixit"), "lint", *rel]),
                              ("torchfix", [str(args.peers / "bin" / "torchfix"), *rel])):
                if not Path(cmd[0]).exists():
                    print(f"{tool}: not installed in {args.peers}")
                    continue
                start = time.perf_counter()
                subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                fig[tool] = time.perf_counter() - start
                print(f"{tool}: {fig[tool]:.2f} s on the same files (one process); "
                      f"tlint --jobs 1 is {fig[tool] / fig['cold_j1']:.2f} x faster")

        prof = subprocess.run([py, str(REPO / "bench" / "profile_rules.py"), "--json", "hf100k"], env=env, cwd=cwd,
                              capture_output=True, text=True, check=False)
        if prof.returncode != 0:  # a tree older than tlint/profile.py
            print(f"per rule / view / phase: not measured ({prof.stderr.strip().splitlines()[-1:]})")
        else:
            data = json.loads(prof.stdout)
            print(f"per rule / view / phase (one job, instrumented, {data['total']:.2f} s in all), top 15:")
            for name, seconds in list(data["seconds"].items())[:15]:
                print(f"  {seconds:7.2f} s  {name}")
            fig["profile"] = data["seconds"]
    fig["load_after"] = os.getloadavg()[0]
    print(f"load average after: {fig['load_after']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
