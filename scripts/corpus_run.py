"""Lint real code with every rule on and report what a release must not have: internal
errors (TL003; the goal is zero), files that could not be read (TL001, with the reasons),
and how many findings each rule gives (a sanity check for noisy rules).

Corpora are installed packages, read offline: `stdlib` (the running interpreter's
standard library, without site-packages), `torch`, `transformers`, or any folder.

    python scripts/corpus_run.py stdlib torch transformers
    python scripts/corpus_run.py transformers --list error      # every error-severity finding
    python scripts/corpus_run.py stdlib --sample 200 --seed 1   # a bounded random subset

Exit status: 0, or 1 when any file produced TL003. `--json FILE` writes the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tlint.config import ConfigResolver
from tlint.diagnostics import SEVERITY_RANK
from tlint.engine import Linter

_SKIP_DIRS = {"__pycache__", "site-packages", "dist-packages"}


def corpus_root(name: str) -> Path | None:
    """The folder of a named corpus (None when the package is not installed)."""
    if name == "stdlib":
        return Path(sysconfig.get_paths()["stdlib"])
    if name in ("torch", "transformers"):
        spec = importlib.util.find_spec(name)  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(name)


def python_files(root: Path) -> list[Path]:
    """Every `.py` file under root (sorted), whatever tlint's default excludes say."""
    out = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        out.extend(Path(folder, name) for name in sorted(filenames) if name.endswith(".py"))
    return [p for p in out if p.is_file()]


@dataclass
class CorpusReport:
    name: str
    root: str
    files: int = 0
    lines: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process only: with --jobs > 1 the workers' time is not counted
    internal_errors: list[str] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    per_rule: dict[str, int] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "name": self.name, "root": self.root, "files": self.files, "lines": self.lines,
            "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2),
            "internal_errors": self.internal_errors,
            "parse_errors": self.parse_errors, "per_rule": self.per_rule,
        }


def _count_lines(files: list[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += path.read_bytes().count(b"\n")
        except OSError:
            pass
    return total


def _listed(diag, wanted: set[str]) -> bool:
    if not wanted:
        return False
    return diag.code in wanted or diag.severity in wanted or "all" in wanted


def run_corpus(name: str, *, sample: int | None = None, seed: int = 0, jobs: int = 1,
               select: list[str] | None = None, listing: set[str] = frozenset()) -> CorpusReport:
    root = corpus_root(name)
    if root is None or not root.is_dir():
        raise SystemExit(f"{name}: not installed or not a folder")
    files = python_files(root)
    if sample is not None and sample < len(files):
        files = sorted(random.Random(seed).sample(files, sample))
    report = CorpusReport(name, str(root), files=len(files), lines=_count_lines(files))
    # One project of exactly these files, as a checkout of the package would be: without a
    # config of its own, an enclosing git repository (pyenv's, say) would become the project
    # and pull every other file of the interpreter into the cross-file phase.
    with tempfile.TemporaryDirectory(prefix="tlint-corpus-") as tmp:
        config = Path(tmp, "tlint.toml")
        config.write_text("exclude = []\n", encoding="utf-8")
        linter = Linter(ConfigResolver(forced=config, fallback_root=root), jobs=jobs, select=select or ["ALL"])
        started, cpu_started = time.perf_counter(), time.process_time()
        result = linter.run(files)
        report.seconds = time.perf_counter() - started
        report.cpu_seconds = time.process_time() - cpu_started
    counts: Counter[str] = Counter()
    for diag in result.diagnostics:
        counts[diag.code] += 1
        where = f"{diag.path}:{diag.range.start.line}:{diag.range.start.column}"
        if diag.code == "TL003":
            report.internal_errors.append(f"{where} {diag.message}")
        elif diag.code == "TL001":
            report.parse_errors.append(f"{where} {diag.message}")
        if _listed(diag, listing):
            report.listed.append(f"{where} {diag.code} [{diag.severity}] {diag.message}")
    report.per_rule = dict(sorted(counts.items()))
    return report


def print_report(report: CorpusReport) -> None:
    rate = report.lines / report.cpu_seconds if report.cpu_seconds else 0.0
    print(f"== {report.name} ({report.root})")
    print(f"   {report.files} files, {report.lines} lines, {report.seconds:.1f} s wall, "
          f"{report.cpu_seconds:.1f} s CPU ({rate:,.0f} lines per CPU second)")
    print(f"   internal errors (TL003): {len(report.internal_errors)}")
    for line in report.internal_errors:
        print(f"     {line}")
    reasons = Counter(_reason(line) for line in report.parse_errors)
    print(f"   unreadable files (TL001): {len(report.parse_errors)}")
    for reason, count in reasons.most_common():
        print(f"     {count:5d}  {reason}")
    print("   findings per rule:")
    for code, count in report.per_rule.items():
        print(f"     {code}  {count:6d}")
    for line in report.listed:
        print(f"   {line}")


def _reason(line: str) -> str:
    """The TL001 message without the path and position (and without its variable tail)."""
    message = line.split(" ", 1)[1] if " " in line else line
    return message.split(" (", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="*", default=["stdlib", "torch", "transformers"],
                        help="stdlib, torch, transformers or a folder (default: the three)")
    parser.add_argument("--sample", type=int, help="lint a random subset of N files per corpus")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--select", default="ALL", help="rules to run (default ALL)")
    parser.add_argument("--list", default="", metavar="CODES",
                        help="print every finding of these codes or severities (e.g. error,TL301)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    listing = {item.strip() for item in args.list.split(",") if item.strip()}
    if listing - {"all"} and not all(x.startswith("TL") or x in SEVERITY_RANK for x in listing - {"all"}):
        parser.error("--list takes codes (TL101) or severities (error)")
    reports = []
    for name in args.corpora:
        report = run_corpus(name, sample=args.sample, seed=args.seed, jobs=args.jobs,
                            select=args.select.split(","), listing=listing)
        print_report(report)
        reports.append(report)
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in reports], indent=2) + "\n", encoding="utf-8")
    return 1 if any(r.internal_errors for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
