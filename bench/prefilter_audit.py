"""Check that the pre-filter never changes a finding (run by hand; tests/test_prefilter.py
runs the same checks on the fixtures and the rules' examples).

    python bench/prefilter_audit.py PATH... [--jobs N] [--no-identity] [--no-soundness]

Two checks:
- identity: `tlint check --select ALL --format json --no-cache` with and without the
  pre-filter (`TLINT_NO_PREFILTER=1`) print the same bytes;
- soundness, per file (each file analysed once, pre-filter off, every rule on): a rule
  that reports in a file (a finding, a pending cross-file finding, a TL003) has one of its
  tokens in the file, so does a fact extractor that yields a fact, and the `call-args` facts
  Python's tree gives a pre-filtered file equal those of LibCST's. This checks each rule's
  and extractor's tokens on their own, not only their union, which is what the identity
  check sees.

Also reported: how many files the pre-filter skips (with every rule on).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))


def identity(paths: list[str], *, jobs: int = 2, cwd: str | None = None) -> tuple[bool, float, float]:
    """(same JSON bytes, seconds with, seconds without) of two cold `--select ALL` runs."""
    cmd = [sys.executable, "-m", "tlint", "check", "--select", "ALL", "--format", "json", "--exit-zero",
           "--no-cache", "--jobs", str(jobs), *paths]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("TLINT_NO_PREFILTER", None)
    outputs, walls = [], []
    for extra in ({}, {"TLINT_NO_PREFILTER": "1"}):
        start = time.perf_counter()
        done = subprocess.run(cmd, env={**env, **extra}, cwd=cwd, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        outputs.append(done.stdout)
    return outputs[0] == outputs[1], walls[0], walls[1]


def _mentions(lowered: str, tokens, patterns=()) -> bool:
    import re

    return any(t.lower() in lowered for t in tokens) or any(re.search(p, lowered) for p in patterns)


def soundness(files: list[Path]) -> tuple[list[str], int, int]:
    """(problems, files the pre-filter skips with every rule on, files read)."""
    from tlint.config import ConfigResolver
    from tlint.engine import Linter, analyse_file, display_path, prefilter_skips, read_text
    from tlint.rules import BY_CODE, ENGINE_CODES
    from tlint.views import facts as facts_view

    linter = Linter(ConfigResolver(), select=["ALL"])
    problems: list[str] = []
    skipped = read = 0
    for path in files:
        path = path.resolve()
        settings = linter.settings_for(path.parent)
        text = read_text(path, str(path))
        if not isinstance(text, str):
            continue
        read += 1
        lowered = text.lower()
        try:
            tree = compile(text, str(path), "exec", flags=0x400, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        from_ast = facts_view.ast_facts(tree) if tree is not None else None
        # as the engine decides: no token, Python compiles it, its tree shows no `-100`
        would_skip = prefilter_skips(text, settings) and tree is not None and from_ast is not None
        skipped += would_skip
        result = analyse_file(path, display_path(path), settings, text=text, prefilter=False)
        codes = {d.code for d in result.diagnostics} | {p.diagnostic.code for p in result.pending}
        if would_skip and codes - {"TL001"}:
            problems.append(f"{path}: pre-filtered, but gives {sorted(codes)}")
        if would_skip and "TL001" in codes:
            problems.append(f"{path}: pre-filtered, but LibCST gives TL001 (Python compiles it)")
        rules = {rule.code: rule for rule in settings.ruleset().rules}
        for code in sorted(codes - set(ENGINE_CODES)):
            rule = rules.get(code) or BY_CODE[code]()
            tokens = rule.needed_tokens()
            if tokens is not None and not _mentions(lowered, tokens, rule.patterns):
                problems.append(f"{path}: {code} reports here but the file has none of its tokens")
        kinds = {fact.kind for fact in result.facts}
        for kind in sorted(kinds):
            tokens = facts_view.TOKENS.get(kind)
            if kind == "masks-pad-labels" and tree is not None and from_ast is None:
                continue  # a `-100`: Python's tree sends the file to LibCST
            if tokens and not _mentions(lowered, tokens):
                problems.append(f"{path}: a `{kind}` fact but none of its extractor's tokens")
        if from_ast is not None and not result.parse_error and facts_view.ast_facts_exact(text):
            got = sorted(repr(d) for _, d in from_ast)
            want = sorted(repr(f.data) for f in result.facts if f.kind == "call-args")
            if got != want:
                problems.append(f"{path}: `call-args` facts from Python's tree differ from LibCST's")
    return problems, skipped, read


def python_files(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-identity", action="store_true")
    parser.add_argument("--no-soundness", action="store_true")
    args = parser.parse_args(argv)
    failed = False
    if not args.no_soundness:
        files = python_files(args.paths)
        start = time.perf_counter()
        problems, skipped, read = soundness(files)
        print(f"soundness: {read} files, {skipped} pre-filtered ({100 * skipped / max(read, 1):.1f} %), "
              f"{len(problems)} problems ({time.perf_counter() - start:.0f} s)")
        for line in problems[:50]:
            print(f"  {line}")
        failed |= bool(problems)
    if not args.no_identity:
        same, with_, without = identity(args.paths, jobs=args.jobs)
        print(f"identity: JSON output with and without the pre-filter identical: {same} "
              f"(cold, --jobs {args.jobs}: {with_:.1f} s with, {without:.1f} s without)")
        failed |= not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
