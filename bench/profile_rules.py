"""Where `tlint check` spends its time, per rule, per view and per phase (run by hand).

    python bench/profile_rules.py PATH... [--select ALL] [--top N] [--json]

Runs the linter in this process with one job, instrumented as `tlint check --profile` is
(tlint/profile.py: each rule's `check` and `check_project`, each shared view, each fact
extractor, the pre-filter, the syntax check, the LibCST parse, the index traversal, the
position pass and the cross-file phase). Times are exclusive: a view built on first use
inside a rule is charged to the view, not to the rule. The wrapping costs a few percent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # after PYTHONPATH, so that bench.py can time another checkout


def run(paths: list[str], select: list[str]):
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    linter = Linter(ConfigResolver(), jobs=1, select=select, profile=True)
    start = time.perf_counter()
    result = linter.run([Path(p) for p in paths])
    total = time.perf_counter() - start
    return linter.profile, total, len(result.files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--select", default="ALL", help="comma-separated codes (default ALL)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", action="store_true", help="print {name: seconds} as JSON")
    args = parser.parse_args(argv)
    profile, total, files = run(args.paths, args.select.split(","))
    rows = sorted(profile.seconds.items(), key=lambda item: -item[1])
    if args.json:
        json.dump({"total": total, "files": files, "seconds": dict(rows)}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{files} files, {total:.2f} s in all (one job, instrumented)")
    accounted = sum(profile.seconds.values())
    for name, seconds in rows[: args.top]:
        print(f"{seconds:8.3f} s {100 * seconds / total:5.1f}%  {name}  ({profile.calls[name]} calls)")
    print(f"{total - accounted:8.3f} s {100 * (total - accounted) / total:5.1f}%  (elsewhere: reading, "
          "discovery, suppressions, reporting)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
