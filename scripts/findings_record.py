"""Which rules gained or lost findings: tlint's findings on the repository's own corpus
(`fixtures/`, linted with `tlint check --select ALL --no-cache`), recorded in
`tests/findings-record.json` for the last release and for the tree as committed, so that
a change of findings is seen, put in the CHANGELOG and answered by a version bump.

    python scripts/findings_record.py                  # the changes per rule, as CHANGELOG lines
    python scripts/findings_record.py --check          # exit 1 if this tree's findings differ from the record
    python scripts/findings_record.py --write          # record this tree's findings as `current`
    python scripts/findings_record.py --release 0.3.0  # at a release: `released` = `current`, version 0.3.0
    python scripts/findings_record.py --tlint CHECKOUT # another checkout's tlint on this corpus

A finding is keyed by (path, code, message): a line that moves is not a change. The record's
`released` findings are the last release's tlint on the same corpus (for 0.1.0: the tree
of the commit before the version became 0.2.0), so that code changes, not corpus changes,
show. tests/test_findings_record.py checks that the record is current, that the
CHANGELOG's top section names, under `### Findings`, each rule whose findings differ from
the release's (`- TL301 gains ...` / `- TL301 loses ...`), and that the version was bumped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD = REPO / "tests" / "findings-record.json"
CORPUS = ["fixtures"]
# `--format`, not `--output-format`: the releases before 0.2.0 know only the former
COMMAND = ["check", "--select", "ALL", "--no-cache", "--exit-zero", "--format", "json", *CORPUS]


def findings(tlint_root: Path = REPO) -> list[dict]:
    """The corpus's findings by the tlint of `tlint_root`, sorted: [{path, line, code, message}]."""
    env = {k: v for k, v in os.environ.items() if k not in ("TLINT_OUTPUT_FORMAT", "NO_COLOR", "FORCE_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tlint_root), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "tlint", *COMMAND], cwd=REPO, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"tlint failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return sorted(({"path": d["path"], "line": d["range"]["start"]["line"], "code": d["code"],
                    "message": d["message"]} for d in json.loads(proc.stdout)["diagnostics"]),
                  key=lambda f: (f["path"], f["line"], f["code"], f["message"]))


def changes(before: list[dict], after: list[dict]) -> dict[str, tuple[int, int]]:
    """{code: (findings gained, findings lost)} for each rule whose findings differ."""
    def keyed(entries: list[dict]) -> Counter:
        return Counter((f["path"], f["code"], f["message"]) for f in entries)

    old, new = keyed(before), keyed(after)
    out: dict[str, list[int]] = {}
    for key, count in (new - old).items():
        out.setdefault(key[1], [0, 0])[0] += count
    for key, count in (old - new).items():
        out.setdefault(key[1], [0, 0])[1] += count
    return {code: (gained, lost) for code, (gained, lost) in sorted(out.items())}


def changelog_lines(delta: dict[str, tuple[int, int]]) -> list[str]:
    """One CHANGELOG line a rule: `- TL301 gains 2 findings and loses 1 on fixtures/: WHY`."""
    lines = []
    for code, (gained, lost) in delta.items():
        parts = ([f"gains {gained} finding{'s' if gained != 1 else ''}"] if gained else []) + \
                ([f"loses {lost} finding{'s' if lost != 1 else ''}"] if lost else [])
        lines.append(f"- {code} {' and '.join(parts)} on {', '.join(c + '/' for c in CORPUS)}: WHY")
    return lines


def load(path: Path = RECORD) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def save(record: dict, path: Path = RECORD) -> None:
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if this tree's findings differ from the record")
    parser.add_argument("--write", action="store_true", help="record this tree's findings as current")
    parser.add_argument("--release", metavar="VERSION", help="record current as the release VERSION")
    parser.add_argument("--tlint", type=Path, metavar="CHECKOUT", help="lint with another checkout's tlint")
    parser.add_argument("--record", type=Path, default=RECORD, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    record = load(args.record)
    if args.release:
        record["released"] = {"version": args.release, "findings": record["current"]["findings"]}
        save(record, args.record)
        return 0
    now = findings(args.tlint.resolve() if args.tlint else REPO)
    if args.write:
        record["current"] = {"findings": now}
        save(record, args.record)
    unrecorded = changes(record["current"]["findings"], now)
    if args.check:
        if unrecorded:
            print("this tree's findings differ from tests/findings-record.json:", file=sys.stderr)
            for line in changelog_lines(unrecorded):
                print(line.replace(": WHY", ""), file=sys.stderr)
            print("run python scripts/findings_record.py --write, and name these rules under ### Findings in "
                  "CHANGELOG.md's top section", file=sys.stderr)
            return 1
        return 0
    delta = changes(record["released"]["findings"], now)
    print(f"since {record['released']['version']}:" if delta else f"no rule gained or lost findings since "
          f"{record['released']['version']}")
    for line in changelog_lines(delta):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
