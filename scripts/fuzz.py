"""The long fuzz run: lint many generated and mutated programs with every rule on and
check that tlint never raises (no TL003), gives the same output twice, and reports every
range inside its file. tests/test_fuzz.py is the short run of the same properties.

Programs come from Python's grammar and from LibCST's node types (hypothesmith), and from
mutations of the rules' examples and the fixtures (tests/fuzzing.py). The run is
reproducible from `--seed` and `--jobs` (each worker draws from its own seed). Every
K-th program is linted twice in this process, and a sample of the programs again in a
child process with another PYTHONHASHSEED, to catch output that depends on set or dict
order.

    python scripts/fuzz.py --n 10000 --seed 0 --out /tmp/tlint-fuzz

Exit status 1 when any property failed; the failing inputs are written under `--out`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzzing import Outcome, check_files, mutate, seed_projects


def _digest(outcome: Outcome) -> str:
    return hashlib.sha256(json.dumps(outcome.diagnostics, sort_keys=True).encode()).hexdigest()


class Run:
    def __init__(self, out: Path | None, twice_every: int, name: str = "") -> None:
        self.out, self.twice_every, self.name = out, twice_every, name
        self.twice = 0
        self.programs: Counter[str] = Counter()
        self.parsed: Counter[str] = Counter()
        self.findings: Counter[str] = Counter()
        self.failures: list[tuple[str, list[str]]] = []
        self.kept: list[tuple[str, dict[str, str], str]] = []  # (label, files, digest)

    def check(self, source: str, label: str, files: dict[str, str]) -> None:
        self.programs[source] += 1
        if sum(self.programs.values()) % 500 == 0:
            print(f"... {self.name}{sum(self.programs.values())} programs, {len(self.failures)} failures",
                  file=sys.stderr, flush=True)
        twice = sum(self.programs.values()) % self.twice_every == 0
        self.twice += twice
        try:
            outcome = check_files(files, twice=twice)
        except Exception:  # noqa: BLE001 - an exception out of tlint is a failure like the others
            outcome = Outcome([], [traceback.format_exc()])
        self.parsed[source] += outcome.parsed
        for diag in outcome.diagnostics:
            self.findings[diag["code"]] += 1
        if outcome.problems:
            self.failures.append((label, outcome.problems))
            if self.out is not None:
                folder = self.out / f"failure-{self.name}{len(self.failures):04d}"
                folder.mkdir(parents=True, exist_ok=True)
                for name, text in files.items():
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    (folder / name).write_text(text, encoding="utf-8", newline="")
                (folder / "PROBLEMS.txt").write_text(label + "\n" + "\n".join(outcome.problems) + "\n")
        else:
            self.kept.append((label, files, _digest(outcome)))


def generated(run: Run, source: str, count: int, seed: int) -> None:
    """`count` programs from hypothesmith (`source` is "grammar" or "cst"), each checked."""
    import hypothesmith
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    strategy = hypothesmith.from_grammar() if source == "grammar" else hypothesmith.from_node()

    @hypothesis_seed(seed)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(program: str) -> None:
        run.check(source, f"{source}:{run.programs[source]}", {"generated.py": program})

    collect()


def mutations(run: Run, count: int, seed: int) -> None:
    seeds = seed_projects()
    rng = random.Random(seed)
    for number in range(count):
        label, files = rng.choice(seeds)
        mutated, applied = mutate(files, rng, rng.randint(1, 4))
        run.check("mutation", f"mutation:{number} {label} {'+'.join(applied)}", mutated)


def cross_check(kept: list, count: int, seed: int) -> list[str]:
    """Lint `count` of the programs again in a child process with another hash seed."""
    sample = random.Random(seed).sample(kept, min(count, len(kept)))
    if not sample:
        return []
    payload = json.dumps([files for _, files, _ in sample])
    other = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {**os.environ, "PYTHONHASHSEED": other}
    child = subprocess.run([sys.executable, __file__, "--replay"], input=payload, env=env,
                           capture_output=True, text=True, check=True)
    digests = json.loads(child.stdout)
    return [label for (label, _, digest), other in zip(sample, digests) if digest != other]


def shard(task) -> Run:
    """Shard `index` of `jobs`: its share of each kind of program, from its own seed."""
    index, jobs, counts, seed, out, twice_every = task
    run = Run(out, twice_every, f"{index}-" if jobs > 1 else "")
    grammar, cst, mutated = (n // jobs + (index < n % jobs) for n in counts)
    own_seed = seed * 1000 + index
    if grammar:
        generated(run, "grammar", grammar, own_seed)
    if cst:
        generated(run, "cst", cst, own_seed)
    mutations(run, mutated, own_seed)
    return run


def replay() -> int:
    programs = json.loads(sys.stdin.read())
    print(json.dumps([_digest(check_files(files)) for files in programs]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="programs in all (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mix", default="0.1,0.02,0.88", metavar="G,C,M",
                        help="shares of grammar, CST and mutation programs (default 0.1,0.02,0.88)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--twice-every", type=int, default=10, metavar="K",
                        help="lint every K-th program twice in the same process (default 10)")
    parser.add_argument("--cross-check", type=int, default=300, metavar="K",
                        help="programs linted again under another PYTHONHASHSEED (default 300)")
    parser.add_argument("--out", type=Path, help="write failing inputs here")
    parser.add_argument("--replay", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replay:
        return replay()
    shares = [float(x) for x in args.mix.split(",")]
    if len(shares) != 3 or sum(shares) <= 0:
        parser.error("--mix takes three shares, e.g. 0.1,0.02,0.88")
    counts = [round(args.n * s / sum(shares)) for s in shares]
    counts[2] = args.n - counts[0] - counts[1]
    started = time.perf_counter()
    tasks = [(i, args.jobs, counts, args.seed, args.out, max(1, args.twice_every)) for i in range(args.jobs)]
    if args.jobs == 1:
        shards = [shard(tasks[0])]
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            shards = list(pool.map(shard, tasks))
    run = Run(args.out, max(1, args.twice_every))
    for part in shards:
        run.twice += part.twice
        run.programs.update(part.programs)
        run.parsed.update(part.parsed)
        run.findings.update(part.findings)
        run.failures.extend(part.failures)
        run.kept.extend(part.kept)
    differing = cross_check(run.kept, args.cross_check, args.seed)
    seconds = time.perf_counter() - started
    total = sum(run.programs.values())
    print(f"{total} programs in {seconds:.0f} s ({total / seconds:.1f}/s), seed {args.seed}, jobs {args.jobs}")
    for source in ("grammar", "cst", "mutation"):
        print(f"  {source:9s} {run.programs[source]:6d} programs, {run.parsed[source]:6d} parsed (no TL001)")
    print(f"  failures: {len(run.failures)}; determinism: {run.twice} programs linted twice in "
          f"this process, {min(args.cross_check, len(run.kept))} again in a child process with "
          f"another PYTHONHASHSEED ({len(differing)} differed)")
    print("  findings: " + ", ".join(f"{code} {n}" for code, n in sorted(run.findings.items())))
    for label, problems in run.failures[:20]:
        print(f"  FAIL {label}")
        for problem in problems[:5]:
            print("    " + problem.strip().replace("\n", "\n    "))
    for label in differing[:20]:
        print(f"  DIFFERENT OUTPUT IN ANOTHER PROCESS {label}")
    return 1 if run.failures or differing else 0


if __name__ == "__main__":
    sys.exit(main())
