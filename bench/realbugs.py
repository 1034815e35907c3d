"""The real-bug benchmark runner (issue 18): does tlint find documented bugs, and does the
finding go away with the authors' own fix?

    python bench/realbugs.py --mirrors /work/.mirror [--batch ID ...] [--case ID ...]
                             [--family data|model|training] [--json OUT] [--jobs N]
                             [--tlint PATH_OR_COMMAND] [--headline]
    python bench/realbugs.py --mirrors /work/.mirror --batch b1 --record-first-sight
    python bench/realbugs.py --mirrors /work/.mirror --batch b2 [--run-timeout S] [--venv-cache DIR]
    python bench/realbugs.py --headline          # first-sight recall per batch (markdown), no run
    python bench/realbugs.py --fetch-list [--batch ID]   # owner/name of every repository needed

Batch 0 is `bench/realbugs/cases/<family>.toml` with the judgements
`bench/realbugs/judgements/<family>.toml`; batches 1, 2, ... are the folders
`bench/realbugs/batches/<id>/` (cases-<part>.toml, log-<part>.toml, SEARCH*.md,
described.toml, first_sight.toml). Formats, first sight and how the figures are defined:
bench/realbugs/README.md. Only coordinates are committed;
each case's trees are materialised from a local mirror with `git archive <sha> -- <the .py
(batches b1, ...: and .ipynb) and .gitignore files under take> | tar -x` into a temporary folder (the mirror is never
checked out or written; naming files keeps a blob that a fetched snapshot lacks, files of
4 MiB and more, from failing the whole archive: such files are listed as absent). A mirror of
`owner/name` is `MIRRORS/owner+name/repo` (what the `fetch` tool makes) or
`MIRRORS/owner+name` when that folder is itself the git directory.

tlint runs as a subprocess with its DEFAULT rules plus the case's own rule (`check --format
json --no-cache --exit-zero --jobs 1 --extend-select <rule>`: a rule that is off by
default, such as TL315, is measured too, and nothing else is added; an out-of-catalogue
case has no rule and runs with the defaults), from this checkout by
default (`python -m tlint` with this checkout first on PYTHONPATH); `--tlint DIR` runs
another checkout (e.g. a `git worktree` of an older commit) the same way, and `--tlint
"CMD ..."` any command line that takes tlint's `check` arguments after it. The
materialised tree gets an empty `.git` folder so that tlint's config search and project
root stop there.

Definitions (all lines are 1-based; a finding's line is the start line of its range):

- **found**: the buggy tree has a finding of the case's `rule` in a site's `path` whose
  line is within 3 lines of one of that site's `lines` (|finding - site| <= 3).
  Outside the catalogue (`in_catalogue = false`): every finding of any rule and severity
  (the tool codes TL001-TL003 aside) within 3 lines of a site line is "near"; each is
  judged in the batch's described.toml (describes = true | false); found when one near
  finding describes the bug; the others are "incidental". An unjudged near finding makes
  the run NOT A RESULT (printed as paste-ready [[near]] TOML).
- **notebooks**: a finding in a `.ipynb` has a cell and a line in it; a notebook site is
  `cell = N` with lines in the cell, or lines of the .ipynb file itself (carried to
  cell and line through the cells' `source` values). Both sides are compared in one
  numbering, the cells laid end to end (`notebook_lines`), and the fix's line mapping
  comes from difflib on those laid-out lines (git's hunks are of the JSON).
- **mapped site**: each site line L of the buggy tree is carried to the fixed tree through
  the hunks of `git diff -U0 -M <buggy> <fixed> -- <take>`. A line outside every hunk moves
  by the net line count of the hunks above it, to one line [L', L']. A line inside a hunk
  (`@@ -a,b +c,d @@`, a <= L < a+b: the fix changed or deleted it) maps to the whole
  new side of that hunk, [c, c+d-1]; when the hunk deleted lines only (d = 0) that is the
  single line [c, c] (the fixed-tree line after which they were removed, at least 1).
  A renamed file maps to its new path; a deleted file maps to nothing.
- **fix-sensitive**: found, and for every site line of the case, the fixed tree has no
  finding of `rule` in the mapped site's path whose line lies in [lo - 3, hi + 3] of the
  mapped range (a site whose file the fix deleted has none by definition). Outside the
  catalogue: no finding of the code of any describing near finding lies there.
- **fixed-tree findings**: every error and warning finding on the fixed tree (whatever its
  rule, the case's own included) is looked up in the judgements by (case, path, code,
  line) and counted as tp / fp / advisory, or unjudged. Unjudged findings are printed as
  paste-ready TOML and the summary says "NOT A RESULT". Info findings are counted only.
  Tool findings (TL001 parse errors, TL002 suppression findings, TL003 internal errors)
  are listed apart, not judged. The verdicts are tabled per rule and per family (the
  case's family: data, model, training), with the info findings counted beside them.
  Batch cases (b1, ...) count their fixed-tree findings without judging them (precision
  is measured on fresh samples by bench/ecosystem.py).
- **first sight** (batches b1, ...): `--record-first-sight --batch ID` scores the
  batch's cases that have no first sight at HEAD and appends `[[first_sight]]` entries to
  its first_sight.toml; refused unless tlint/ and rules/ are clean, the batch's cases,
  log and SEARCH files are committed as they are, nothing under tlint/ or rules/ changed
  since each case's adding commit, and the run is a result. Entries are never rewritten;
  `check_first_sight_history` checks them against git history (tests/test_realbugs_batches.py).
  Every run prints, per batch, first-sight recall (from first_sight.toml) and "found now"
  (this run), in and outside the catalogue; the JSON's `batches` carries both.
- **tool failure**: tlint did not do its job on one of the case's trees: the subprocess
  could not start, ran past its time limit, exited with a status other than 0 or 1, or
  printed output that does not parse as tlint's JSON; or it reported any TL003 (internal
  error); or a TL001 (parse error) on a file that Python itself compiles
  (`compile(source, path, "exec", flags=ast.PyCF_ONLY_AST)` on the materialised file).
  Such a case has status "tool-failure", each failure is listed, the case is left out of
  the figures, and the summary says "NOT A RESULT: N tool failures" (N cases).

- **runnable cases** (a batch case with `[case.run]`): both WHOLE trees are materialised,
  edited, prepared and run under `python -m tlint trace --format json` (this checkout's
  tlint, `--tlint DIR` another's) in a venv of the case's pinned packages over this
  interpreter's (`--system-site-packages`, cached by the pinned list under
  `--venv-cache`), each tree within `--run-timeout` seconds; found / near / fix-sensitive
  are scored on the trace reports' run-time and static findings, and `evidence` says
  which (confirmed / new / static-only). A run that fails has a status that says how
  (install-failed, prepare-failed, trace-failed, timeout, ...) and is not run.
- **set aside**: `--record-first-sight` records no first sight for a case added before
  a change under tlint/ or rules/ (it is listed) and records the batch's others.

A case whose mirror, commit or take paths are missing is reported as unavailable (with
the fetch list) and left out of the figures. The JSON's `result` is true only when every
case ran ("ok"), no finding is unjudged and there is no tool failure; `tlint_commit` is
the commit of the tlint that runs ("+dirty" when its tlint/ has uncommitted changes), read
when the run starts. Exit status: 0; 1 when there is a tool failure; 2 when the manifest
or the judgements are invalid (every problem is printed, one per line, with its file).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import datetime
import difflib
import fcntl
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import site as site_module
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "realbugs"
CASES_DIR = BENCH / "cases"
JUDGEMENTS_DIR = BENCH / "judgements"
BATCHES_DIR = BENCH / "batches"
BATCH0 = "b0"  # the cases of cases/*.toml: no first sight
BATCH_RE = re.compile(r"^b[0-9]+$")
KINDS = ("library", "script", "notebook")
MAX_PER_REPO = 2  # cases per repository within a batch

FAMILIES = {"data": "TL1", "model": "TL2", "training": "TL3"}
VERDICTS = ("tp", "fp", "advisory")
RADIUS = 3
TOOL_CODES = ("TL001", "TL002", "TL003")
HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9._-]+$")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
CODE_RE = re.compile(r"^TL[0-9]{3}$")
URL_RE = re.compile(r"^https?://[^\s/]+\.[^\s]+$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

CASE_KEYS = {"id", "repo", "buggy", "fixed", "rule", "take", "sites", "source", "summary", "recorded"}
CASE_OPTIONAL = {"notes"}
BATCH_CASE_KEYS = (CASE_KEYS - {"rule"}) | {"in_catalogue", "kind", "candidate"}
BATCH_CASE_OPTIONAL = {"notes", "rule", "run", "family"}  # rule: exactly when in_catalogue = true
PART_RE = re.compile(r"^(cases|log)-([a-z0-9][a-z0-9_]*)\.toml$")  # a batch's files, per family or per search
OTHER_FAMILY = "other"  # the family of an out-of-catalogue case in a non-family file that names none
# [case.run] of a runnable case (batch b2 on: `tlint trace` runs the script; see README)
RUN_KEYS = {"command", "steps"}
RUN_OPTIONAL = {"python", "prepare", "edits", "fixed_edits", "env"}
EDIT_KEYS = {"path", "line", "text"}
PREPARE_DIR = "prepare"  # the batch folder's tlint-authored helpers, named {prepare}/FILE in a command
PIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
LOG_KEYS = {"n", "repo", "ref", "found_by", "verdict", "criterion", "note"}
LOG_VERDICTS = ("accept", "reject")
NEAR_KEYS = {"case", "path", "line", "code", "describes", "reason"}
FIRST_SIGHT_KEYS = {"case", "commit", "found", "fix_sensitive", "recorded"}
FIRST_SIGHT_OPTIONAL = {"in_catalogue", "rule", "near", "evidence"}  # evidence: a runnable case's
JUDGEMENT_KEYS = {"path", "line", "code", "verdict", "reason"}
EVIDENCE = ("confirmed", "new", "static-only")  # a runnable case's: how the findings that found it came


class ManifestError(Exception):
    """The manifest or the judgements are invalid; `problems` lists every one."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# --------------------------------------------------------------------------- manifest


def rule_codes() -> set[str]:
    """The rule codes of this checkout's tlint (its registry, read from this checkout)."""
    sys.path.insert(0, str(ROOT))
    try:
        from tlint.rules import ALL_RULES
    finally:
        sys.path.pop(0)
    return {rule.code for rule in ALL_RULES}


def family_of(code: str) -> str | None:
    for family, prefix in FAMILIES.items():
        if code.startswith(prefix):
            return family
    return None


@dataclass(frozen=True)
class Edit:
    path: str
    line: int
    text: str


@dataclass(frozen=True)
class Run:
    """How a runnable case's script runs on a CPU: after `prepare` in the materialised tree,
    with the (size/data-only) `edits` applied, `tlint trace --steps N -- command`."""
    command: tuple[str, ...]
    steps: int
    python: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    edits: tuple[Edit, ...] = ()
    fixed_edits: tuple[Edit, ...] | None = None  # None: the buggy tree's edits apply to the fixed tree too
    env: tuple[tuple[str, str], ...] = ()

    def edits_for(self, side: str) -> tuple[Edit, ...]:
        if side == "fixed" and self.fixed_edits is not None:
            return self.fixed_edits
        return self.edits


@dataclass(frozen=True)
class Site:
    path: str
    lines: tuple[int, ...]
    cell: int | None = None  # a notebook's site: the cell (1-based over all cells), lines within it


@dataclass(frozen=True)
class Case:
    id: str
    repo: str
    buggy: str
    fixed: str
    rule: str | None
    take: tuple[str, ...]
    sites: tuple[Site, ...]
    source: str
    summary: str
    recorded: str
    family: str
    file: str
    batch: str = BATCH0  # rule (above) is None for an out-of-catalogue case
    in_catalogue: bool = True
    kind: str | None = None
    candidate: int | None = None
    run: Run | None = None  # a runnable case (its [case.run] table)
    part: str | None = None  # a batch case's file: cases-<part>.toml, paired with log-<part>.toml


@dataclass(frozen=True)
class Judgement:
    owner: str  # the case id, or the repository (ecosystem.toml)
    path: str
    line: int
    code: str
    verdict: str
    reason: str
    file: str

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.owner, self.path, self.code, self.line)


def _load_toml(path: Path, problems: list[str]) -> dict | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as error:
        problems.append(f"{_rel(path)}: cannot be read as TOML: {error}")
        return None


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def valid_relpath(value: object) -> bool:
    """A relative POSIX path inside the repository ('.' is the root)."""
    if not isinstance(value, str) or not value or value.startswith("/") or "\\" in value:
        return False
    if value == ".":
        return True
    parts = value.rstrip("/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def inside_take(path: str, take: tuple[str, ...]) -> bool:
    for entry in take:
        entry = entry.rstrip("/")
        if entry == "." or path == entry or path.startswith(entry + "/"):
            return True
    return False


def validate_cases(path: Path, entries: list, family: str | None, codes: set[str], ids: dict[str, str],
                   problems: list[str], batch: str | None = None, labels: set[str] | None = None,
                   part: str | None = None) -> list[Case]:
    """The valid `[[case]]` tables of one file, each id unique over `ids` (updated); every
    problem goes to `problems`. `labels` collects each entry's id (or number), valid or not."""
    out = []
    for n, raw in enumerate(entries, 1):
        label = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else f"{n}"
        if labels is not None:
            labels.add(label)
        case, errs = validate_case(raw, f"{_rel(path)}: case {label}", family, codes, batch=batch, part=part)
        problems.extend(errs)
        if case is None:
            continue
        if case.id in ids:
            problems.append(f"{_rel(path)}: case id {case.id!r} is not unique (also in {ids[case.id]})")
            continue
        ids[case.id] = _rel(path)
        out.append(case)
    return out


def validate_case(raw: object, where: str, family: str | None, codes: set[str],
                  batch: str | None = None, part: str | None = None) -> tuple[Case | None, list[str]]:
    """One `[[case]]` table: the Case, or None and its problems. `family` is the file's
    (None for a scratch file whose name starts with `_`: the family follows the rule).
    `batch`: the batch of a `batches/<id>/cases-<family>.toml` case (the extended schema:
    in_catalogue, kind, candidate; rule exactly when in_catalogue); None for batch 0.
    `part`: a batch file's name part (cases-<part>.toml; by default the family). A batch case
    in a file not named after a family takes its family from its rule, else from its own
    `family` key, else OTHER_FAMILY."""
    problems: list[str] = []
    required, optional = (CASE_KEYS, CASE_OPTIONAL) if batch is None else (BATCH_CASE_KEYS, BATCH_CASE_OPTIONAL)

    def bad(message: str) -> None:
        problems.append(f"{where}: {message}")

    if not isinstance(raw, dict):
        bad("a [[case]] entry is not a table")
        return None, problems
    missing = sorted(required - raw.keys())
    unknown = sorted(raw.keys() - required - optional)
    if missing:
        bad(f"missing key(s): {', '.join(missing)}")
    if unknown:
        bad(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(required | optional))})")
    in_catalogue = True
    if batch is not None:
        in_catalogue = raw.get("in_catalogue")
        if "in_catalogue" in raw and not isinstance(in_catalogue, bool):
            bad(f"in_catalogue {in_catalogue!r} must be true or false")
        elif in_catalogue is True and "rule" not in raw:
            bad("in_catalogue = true needs rule (the rule whose document covers the bug)")
        elif in_catalogue is False and "rule" in raw:
            bad("rule is given only when in_catalogue = true (an out-of-catalogue case is scored with any rule)")
        kind = raw.get("kind")
        if "kind" in raw and kind not in KINDS:
            bad(f"kind {kind!r} must be one of {', '.join(KINDS)}")
        candidate = raw.get("candidate")
        if "candidate" in raw and (type(candidate) is not int or candidate < 1):
            bad(f"candidate {candidate!r} must be the case's n (>= 1) in the family's log")
    run = validate_run(raw["run"], bad) if batch is not None and "run" in raw else None
    cid = raw.get("id")
    if "id" in raw and (not isinstance(cid, str) or not ID_RE.match(cid)):
        bad(f"id {cid!r} must be lower-case letters, digits, '.', '_' or '-' (e.g. nanogpt-warmup-lr0)")
    repo = raw.get("repo")
    if "repo" in raw and (not isinstance(repo, str) or not REPO_RE.match(repo)):
        bad(f"repo {repo!r} must be owner/name as GitHub spells it")
    for key in ("buggy", "fixed"):
        sha = raw.get(key)
        if key in raw and (not isinstance(sha, str) or not HEX40.match(sha)):
            bad(f"{key} {sha!r} must be a full 40-hex lower-case commit SHA")
    if isinstance(raw.get("buggy"), str) and raw.get("buggy") == raw.get("fixed"):
        bad("buggy and fixed are the same commit")
    rule = raw.get("rule")
    rule_family = None
    if "rule" in raw:
        if not isinstance(rule, str) or not CODE_RE.match(rule):
            bad(f"rule {rule!r} must be a code like TL301")
        elif rule not in codes:
            bad(f"rule {rule} does not exist in tlint")
        else:
            rule_family = family_of(rule)
            if rule_family is None:
                bad(f"rule {rule} is a tool rule, not in the data/model/training catalogue")
            elif family is not None and rule_family != family:
                bad(f"rule {rule} belongs to family {rule_family!r}, but the case is in {family}.toml "
                    f"({FAMILIES[family]}xx rules only)")
    take = raw.get("take")
    take_ok = (isinstance(take, list) and take and all(valid_relpath(t) for t in take)
               and len(set(take)) == len(take))
    if "take" in raw and not take_ok:
        bad(f"take {take!r} must be a non-empty list of distinct relative paths (no '..', no leading '/')")
    sites = raw.get("sites")
    parsed_sites: list[Site] = []
    if "sites" in raw:
        if not isinstance(sites, list) or not sites:
            bad("sites must be a non-empty list of { path = ..., lines = [...] }")
        else:
            for n, site in enumerate(sites, 1):
                if not isinstance(site, dict) or set(site) not in ({"path", "lines"}, {"path", "cell", "lines"}):
                    bad(f"site {n} must have exactly the keys path and lines (and cell, in a notebook)")
                    continue
                path, lines, cell = site["path"], site["lines"], site.get("cell")
                if not valid_relpath(path) or path == ".":
                    bad(f"site {n}: path {path!r} must be a relative file path")
                    continue
                if is_notebook(path) and "cell" in site and (type(cell) is not int or cell < 1):
                    bad(f"site {n}: cell {cell!r} must be a cell number (1-based over all the notebook's cells, "
                        "as tlint numbers them)")
                    continue
                if not is_notebook(path) and "cell" in site:
                    bad(f"site {n}: cell is for a notebook (.ipynb) site only")
                    continue
                if (not isinstance(lines, list) or not lines
                        or not all(type(x) is int and x >= 1 for x in lines)):
                    bad(f"site {n}: lines {lines!r} must be a non-empty list of line numbers (>= 1)")
                    continue
                if take_ok and not inside_take(path, tuple(take)):
                    bad(f"site {n}: {path} is not inside take {take}")
                parsed_sites.append(Site(path, tuple(lines), cell))
    source = raw.get("source")
    if "source" in raw and (not isinstance(source, str) or not URL_RE.match(source)):
        bad(f"source {source!r} must be an http(s) URL of the issue, PR or commit")
    summary = raw.get("summary")
    if "summary" in raw and (not isinstance(summary, str) or not summary.strip()):
        bad("summary must be a non-empty string")
    recorded = raw.get("recorded")
    if isinstance(recorded, datetime.date) and not isinstance(recorded, datetime.datetime):
        recorded = recorded.isoformat()
    if "recorded" in raw:
        try:
            if not isinstance(recorded, str) or not DATE_RE.match(recorded):
                raise ValueError
            datetime.date.fromisoformat(recorded)
        except ValueError:
            bad(f"recorded {raw.get('recorded')!r} must be a date YYYY-MM-DD")
    own = raw.get("family")
    if batch is not None and "family" in raw:
        if own not in FAMILIES:
            bad(f"family {own!r} must be one of {', '.join(FAMILIES)}")
        elif (family or rule_family) not in (None, own):
            bad(f"family {own!r} differs from the case's {family or rule_family!r} (its file's or its rule's)")
    if problems:
        return None, problems
    return Case(
        id=cid, repo=repo, buggy=raw["buggy"], fixed=raw["fixed"], rule=rule, take=tuple(take),
        sites=tuple(parsed_sites), source=source, summary=summary.strip(), recorded=recorded,
        family=family or rule_family or own or (OTHER_FAMILY if batch is not None else None),
        file=where.split(":")[0], batch=batch or BATCH0, in_catalogue=in_catalogue, kind=raw.get("kind"),
        candidate=raw.get("candidate"), run=run, part=(part or family) if batch is not None else None,
    ), []


def _edits(value: object, key: str, bad) -> tuple[Edit, ...] | None:
    if not isinstance(value, list):
        bad(f"run.{key} must be a list of {{ path = ..., line = N, text = ... }}")
        return None
    edits: list[Edit] = []
    seen: set[tuple[str, int]] = set()
    for n, edit in enumerate(value, 1):
        if not isinstance(edit, dict) or set(edit) != EDIT_KEYS:
            bad(f"run.{key} {n} must have exactly the keys path, line and text (a whole-line replacement)")
            continue
        path, line, text = edit["path"], edit["line"], edit["text"]
        if not valid_relpath(path) or path == ".":
            bad(f"run.{key} {n}: path {path!r} must be a relative file path in the materialised tree")
        elif type(line) is not int or line < 1:
            bad(f"run.{key} {n}: line {line!r} must be a line number (>= 1)")
        elif not isinstance(text, str) or "\n" in text or "\r" in text:
            bad(f"run.{key} {n}: text must be one line (the whole replacement line, indentation included)")
        elif (path, line) in seen:
            bad(f"run.{key} {n}: {path}:{line} is edited twice")
        else:
            seen.add((path, line))
            edits.append(Edit(path, line, text))
    return tuple(edits)


def validate_run(raw: object, bad) -> Run | None:
    """A case's [case.run] table (see the README's 'Runnable cases'); problems go to `bad`."""
    if not isinstance(raw, dict):
        bad("run must be a table ([case.run])")
        return None
    errors: list[str] = []

    def fail(message: str) -> None:
        errors.append(message)
        bad(message)

    _check_keys(raw, RUN_KEYS, RUN_OPTIONAL, lambda message: fail(f"run: {message}"))

    command = raw.get("command")
    if "command" in raw and (not isinstance(command, list) or not command
                             or not all(isinstance(a, str) and a for a in command) or command[0] != "python"):
        fail("run.command must be a non-empty list of strings starting with \"python\" "
             "(what follows `tlint trace --`)")
    steps = raw.get("steps")
    if "steps" in raw and (type(steps) is not int or steps < 1):
        fail(f"run.steps {steps!r} must be the number of optimizer steps to trace (>= 1)")
    python = raw.get("python", [])
    if not isinstance(python, list) or not all(isinstance(p, str) and PIN_RE.match(p) for p in python):
        fail(f"run.python {python!r} must be a list of pinned PyPI requirements (name==version)")
    prepare = raw.get("prepare", [])
    if not isinstance(prepare, list) or not all(isinstance(c, str) and c.strip() for c in prepare):
        fail("run.prepare must be a list of commands")
        prepare = []
    else:
        for cmd in prepare:
            argv = cmd.split()
            if len(argv) < 2 or argv[0] != "python" or not argv[1].startswith("{prepare}/") \
                    or not valid_relpath(argv[1][len("{prepare}/"):]):
                fail(f"run.prepare {cmd!r} must run a tlint-authored helper: python {{prepare}}/FILE ARGS "
                     "(FILE in the batch folder's prepare/)")
    edits = _edits(raw["edits"], "edits", fail) if "edits" in raw else ()
    fixed_edits = _edits(raw["fixed_edits"], "fixed_edits", fail) if "fixed_edits" in raw else None
    if "fixed_edits" in raw and "edits" not in raw:
        fail("run.fixed_edits is given only beside run.edits (the fixed tree's form of the same edits)")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and ENV_RE.match(k) and isinstance(v, str)
                                            for k, v in env.items()):
        fail("run.env must be a table of environment variables (NAME = \"value\")")
        env = {}
    if errors:
        return None
    return Run(command=tuple(command), steps=steps, python=tuple(python), prepare=tuple(prepare),
               edits=edits or (), fixed_edits=fixed_edits, env=tuple(sorted(env.items())))


def prepare_helpers(cmd: str) -> list[str]:
    """The helper file a prepare command runs (relative to the batch's prepare/)."""
    argv = cmd.split()
    return [argv[1][len("{prepare}/"):]] if len(argv) > 1 and argv[1].startswith("{prepare}/") else []


def is_notebook(path: str) -> bool:
    return path[-6:].lower() == ".ipynb"


def validate_judgement(raw: object, where: str, owner_key: str, codes: set[str]) -> tuple[Judgement | None, list[str]]:
    """One `[[judgement]]` table; `owner_key` is "case" or "repo" (ecosystem.toml)."""
    problems: list[str] = []

    def bad(message: str) -> None:
        problems.append(f"{where}: {message}")

    if not isinstance(raw, dict):
        bad("a [[judgement]] entry is not a table")
        return None, problems
    keys = JUDGEMENT_KEYS | {owner_key}
    missing = sorted(keys - raw.keys())
    unknown = sorted(raw.keys() - keys)
    if missing:
        bad(f"missing key(s): {', '.join(missing)}")
    if unknown:
        bad(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(keys))})")
    owner = raw.get(owner_key)
    if owner_key in raw:
        pattern = REPO_RE if owner_key == "repo" else ID_RE
        if not isinstance(owner, str) or not pattern.match(owner):
            bad(f"{owner_key} {owner!r} is not a valid {'owner/name' if owner_key == 'repo' else 'case id'}")
    path = raw.get("path")
    if "path" in raw and (not valid_relpath(path) or path == "."):
        bad(f"path {path!r} must be a relative file path")
    line = raw.get("line")
    if "line" in raw and (type(line) is not int or line < 1):
        bad(f"line {line!r} must be a line number (>= 1)")
    code = raw.get("code")
    if "code" in raw:
        if not isinstance(code, str) or not CODE_RE.match(code):
            bad(f"code {code!r} must be a code like TL301")
        elif code not in codes:
            bad(f"code {code} does not exist in tlint")
    verdict = raw.get("verdict")
    if "verdict" in raw and verdict not in VERDICTS:
        bad(f"verdict {verdict!r} must be one of {', '.join(VERDICTS)}")
    reason = raw.get("reason")
    if "reason" in raw and (not isinstance(reason, str) or not reason.strip()):
        bad("reason must be a non-empty string (one line: why the authors would (not) agree)")
    elif isinstance(reason, str) and "\n" in reason.strip():
        bad("reason must be one line")
    if problems:
        return None, problems
    return Judgement(owner, path, line, code, verdict, reason.strip(), where.split(":")[0]), []


def load_judgement_file(path: Path, owner_key: str, codes: set[str], problems: list[str]) -> list[Judgement]:
    data = _load_toml(path, problems)
    if data is None:
        return []
    unknown = sorted(set(data) - {"judgement"})
    if unknown:
        problems.append(f"{_rel(path)}: unknown top-level key(s): {', '.join(unknown)} (only [[judgement]])")
    entries = data.get("judgement", [])
    if not isinstance(entries, list):
        problems.append(f"{_rel(path)}: judgement must be an array of tables ([[judgement]])")
        return []
    out = []
    for n, raw in enumerate(entries, 1):
        judgement, errs = validate_judgement(raw, f"{_rel(path)}: judgement {n}", owner_key, codes)
        problems.extend(errs)
        if judgement:
            out.append(judgement)
    return out


def check_duplicate_judgements(judgements: list[Judgement], problems: list[str]) -> None:
    seen: dict[tuple, Judgement] = {}
    for judgement in judgements:
        if judgement.key in seen:
            first = seen[judgement.key]
            problems.append(f"{judgement.file}: judgement of {judgement.owner} {judgement.path}:{judgement.line} "
                            f"{judgement.code} is given twice (also in {first.file})")
        else:
            seen[judgement.key] = judgement


@dataclass
class Manifest:
    cases: list[Case]
    judgements: dict[tuple[str, str, str, int], Judgement]


def load_manifest(cases_dir: Path = CASES_DIR, judgements_dir: Path = JUDGEMENTS_DIR,
                  codes: set[str] | None = None) -> Manifest:
    """Every cases/*.toml and judgements/<family>.toml, validated; raises ManifestError
    listing every problem. A cases file is named after its family (data, model,
    training); a scratch file whose name starts with `_` may hold any family."""
    codes = rule_codes() if codes is None else codes
    problems: list[str] = []
    cases: list[Case] = []
    ids: dict[str, str] = {}
    for path in sorted(cases_dir.glob("*.toml")):
        stem = path.stem
        if stem not in FAMILIES and not stem.startswith("_"):
            problems.append(f"{_rel(path)}: a cases file is named after its family "
                            f"({', '.join(f + '.toml' for f in FAMILIES)})")
            continue
        family = stem if stem in FAMILIES else None
        data = _load_toml(path, problems)
        if data is None:
            continue
        unknown = sorted(set(data) - {"case"})
        if unknown:
            problems.append(f"{_rel(path)}: unknown top-level key(s): {', '.join(unknown)} (only [[case]])")
        entries = data.get("case", [])
        if not isinstance(entries, list):
            problems.append(f"{_rel(path)}: case must be an array of tables ([[case]])")
            continue
        cases.extend(validate_cases(path, entries, family, codes, ids, problems))
    by_id = {case.id: case for case in cases}
    judgements: list[Judgement] = []
    for path in sorted(judgements_dir.glob("*.toml")):
        if path.stem == "ecosystem":
            continue  # bench/ecosystem.py's, keyed by repo
        if path.stem not in FAMILIES and not path.stem.startswith("_"):
            problems.append(f"{_rel(path)}: a judgements file is named after its family "
                            f"({', '.join(f + '.toml' for f in FAMILIES)}) or is ecosystem.toml")
            continue
        for judgement in load_judgement_file(path, "case", codes, problems):
            case = by_id.get(judgement.owner)
            if case is None:
                if judgement.owner not in ids:
                    problems.append(f"{judgement.file}: judgement names case {judgement.owner!r}, "
                                    "which no cases file defines")
                continue
            if path.stem in FAMILIES and case.family != path.stem:
                problems.append(f"{judgement.file}: case {case.id} is a {case.family} case; "
                                f"its judgements go in judgements/{case.family}.toml")
            if not inside_take(judgement.path, case.take):
                problems.append(f"{judgement.file}: {judgement.path} is not inside case {case.id}'s take")
            judgements.append(judgement)
    check_duplicate_judgements(judgements, problems)
    if problems:
        raise ManifestError(problems)
    return Manifest(cases, {j.key: j for j in judgements})


# --------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Described:
    """A `[[near]]` verdict of described.toml: does this finding describe the bug?"""
    case: str
    path: str
    line: int
    code: str
    describes: bool
    reason: str
    cell: int | None = None

    @property
    def key(self) -> tuple:
        return (self.case, self.path, self.cell, self.line, self.code)


@dataclass
class Batch:
    id: str
    folder: Path
    cases: list[Case] = field(default_factory=list)
    log: dict[str, list[dict]] = field(default_factory=dict)  # part (log-<part>.toml) -> [[candidate]] entries
    first_sight: dict[str, dict] = field(default_factory=dict)  # case id -> its [[first_sight]] entry
    described: dict[tuple, Described] = field(default_factory=dict)
    search: list[str] = field(default_factory=list)  # SEARCH*.md file names


def _one_line(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip()) and "\n" not in value.strip()


def _date_ok(value: object) -> bool:
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return True
    try:
        return isinstance(value, str) and bool(DATE_RE.match(value)) and bool(datetime.date.fromisoformat(value))
    except ValueError:
        return False


def _entries(path: Path, key: str, problems: list[str]) -> list | None:
    data = _load_toml(path, problems)
    if data is None:
        return None
    unknown = sorted(set(data) - {key})
    if unknown:
        problems.append(f"{_rel(path)}: unknown top-level key(s): {', '.join(unknown)} (only [[{key}]])")
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(f"{_rel(path)}: {key} must be an array of tables ([[{key}]])")
        return None
    return entries


def _check_keys(raw: dict, required: set[str], optional: set[str], bad) -> None:
    missing = sorted(required - raw.keys())
    unknown = sorted(raw.keys() - required - optional)
    if missing:
        bad(f"missing key(s): {', '.join(missing)}")
    if unknown:
        bad(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(required | optional))})")


def validate_log(path: Path, family: str, problems: list[str]) -> list[dict]:
    """log-<family>.toml: the ordered [[candidate]] log (n = 1, 2, 3 ... in file order)."""
    entries = _entries(path, "candidate", problems)
    if entries is None:
        return []
    out = []
    for index, raw in enumerate(entries, 1):
        where = f"{_rel(path)}: candidate {raw.get('n', index)}"

        def bad(message: str, where: str = where) -> None:
            problems.append(f"{where}: {message}")

        _check_keys(raw, LOG_KEYS, {"case"}, bad)
        n = raw.get("n")
        if "n" in raw and n != index:
            bad(f"n = {n!r} but it is entry {index} of the log: n counts the candidates in the order "
                "considered, 1, 2, 3 ... with none left out")
        if "repo" in raw and (not isinstance(raw["repo"], str) or not REPO_RE.match(raw["repo"])):
            bad(f"repo {raw['repo']!r} must be owner/name as GitHub spells it")
        if "ref" in raw and (not isinstance(raw["ref"], str) or not URL_RE.match(raw["ref"])):
            bad(f"ref {raw['ref']!r} must be an http(s) URL (commit, issue or PR)")
        for key in ("found_by", "criterion", "note"):
            if key in raw and not _one_line(raw[key]):
                bad(f"{key} must be a non-empty one-line string")
        verdict = raw.get("verdict")
        if "verdict" in raw and verdict not in LOG_VERDICTS:
            bad(f"verdict {verdict!r} must be accept or reject")
        if verdict == "accept" and not (isinstance(raw.get("case"), str) and ID_RE.match(raw["case"])):
            bad("an accepted candidate names its case id (case = \"...\")")
        if verdict == "reject" and "case" in raw:
            bad("a rejected candidate has no case")
        out.append(raw)
    return out


def validate_first_sight(path: Path, cases: dict[str, Case], codes: set[str], problems: list[str]) -> dict[str, dict]:
    entries = _entries(path, "first_sight", problems)
    if entries is None:
        return {}
    out: dict[str, dict] = {}
    for index, raw in enumerate(entries, 1):
        cid = raw.get("case")
        where = f"{_rel(path)}: first_sight {cid if isinstance(cid, str) else index}"

        def bad(message: str, where: str = where) -> None:
            problems.append(f"{where}: {message}")

        _check_keys(raw, FIRST_SIGHT_KEYS, FIRST_SIGHT_OPTIONAL, bad)
        if "case" in raw and cid not in cases:
            bad(f"case {cid!r} is not a case of this batch")
        if isinstance(cid, str) and cid in out:
            bad("a case has one first sight; this one is given twice")
        if "commit" in raw and (not isinstance(raw["commit"], str) or not HEX40.match(raw["commit"])):
            bad(f"commit {raw['commit']!r} must be a full 40-hex tlint commit")
        for key in ("found", "fix_sensitive") + (("in_catalogue",) if "in_catalogue" in raw else ()):
            if key in raw and not isinstance(raw[key], bool):
                bad(f"{key} must be true or false")
        if raw.get("fix_sensitive") is True and raw.get("found") is False:
            bad("fix_sensitive = true needs found = true")
        if "recorded" in raw and not _date_ok(raw["recorded"]):
            bad(f"recorded {raw['recorded']!r} must be a date YYYY-MM-DD")
        if "evidence" in raw and raw["evidence"] not in EVIDENCE:
            bad(f"evidence {raw['evidence']!r} must be one of {', '.join(EVIDENCE)} (a found runnable case's)")
        for n, item in enumerate(raw.get("near", []) if isinstance(raw.get("near", []), list) else [None], 1):
            if not isinstance(item, dict) or not {"path", "line", "code", "describes"} <= set(item) \
                    or not set(item) <= {"path", "line", "code", "describes", "cell"}:
                bad(f"near {n} must be {{ path, line, code, describes }} (and cell in a notebook)")
        if isinstance(cid, str) and cid not in out:
            out[cid] = raw
    return out


def validate_described(path: Path, cases: dict[str, Case], codes: set[str], problems: list[str]) -> dict:
    entries = _entries(path, "near", problems)
    if entries is None:
        return {}
    out: dict[tuple, Described] = {}
    for index, raw in enumerate(entries, 1):
        where = f"{_rel(path)}: near {index}"

        def bad(message: str, where: str = where) -> None:
            problems.append(f"{where}: {message}")

        before = len(problems)
        _check_keys(raw, NEAR_KEYS, {"cell"}, bad)
        case = cases.get(raw.get("case"))
        if "case" in raw and case is None:
            bad(f"case {raw['case']!r} is not a case of this batch")
        elif case is not None and case.in_catalogue:
            bad(f"case {case.id} is in the catalogue (scored by its rule, {case.rule}): no described verdicts")
        p = raw.get("path")
        if "path" in raw and (not valid_relpath(p) or p == "."):
            bad(f"path {p!r} must be a relative file path")
        elif case is not None and not inside_take(p, case.take):
            bad(f"{p} is not inside case {case.id}'s take")
        line = raw.get("line")
        if "line" in raw and (type(line) is not int or line < 1):
            bad(f"line {line!r} must be a line number (>= 1)")
        cell = raw.get("cell")
        if isinstance(p, str) and is_notebook(p) and (type(cell) is not int or cell < 1):
            bad("a notebook's finding names its cell (cell = N) and its line within the cell")
        elif isinstance(p, str) and not is_notebook(p) and "cell" in raw:
            bad("cell is for a notebook (.ipynb) finding only")
        code = raw.get("code")
        if "code" in raw and (not isinstance(code, str) or code not in codes):
            bad(f"code {code!r} is not a tlint rule code")
        if "describes" in raw and not isinstance(raw["describes"], bool):
            bad(f"describes {raw['describes']!r} must be true or false")
        if "reason" in raw and not _one_line(raw["reason"]):
            bad("reason must be a non-empty one-line string (why it does or does not describe the bug)")
        if len(problems) > before:
            continue
        verdict = Described(raw["case"], p, line, code, raw["describes"], raw["reason"].strip(), cell)
        if verdict.key in out:
            bad(f"{raw['case']} {p}:{line} {code} is judged twice")
            continue
        out[verdict.key] = verdict
    return out


def load_batch(folder: Path, codes: set[str], ids: dict[str, str], problems: list[str]) -> Batch:
    """One batch folder, validated (problems appended); `ids` (case id -> file) spans all
    batches so far and is extended."""
    batch = Batch(folder.name, folder)
    batch.search = sorted(p.name for p in folder.glob("SEARCH*.md"))
    known = {"first_sight.toml", "described.toml"}
    invalid: set[str] = set()  # ids of every [[case]], valid or not (no second problem for an invalid one)
    for path in sorted(folder.glob("*.toml")):
        match = PART_RE.match(path.name)
        if path.name in known:
            continue
        if match is None:
            problems.append(f"{_rel(path)}: a batch holds cases-<part>.toml, log-<part>.toml (part: a family, "
                            f"{', '.join(FAMILIES)}, or a search's name in lower-case letters, digits and '_'), "
                            "first_sight.toml and described.toml")
            continue
        kind, part = match.groups()
        if kind == "log":
            batch.log[part] = validate_log(path, part, problems)
            continue
        entries = _entries(path, "case", problems)
        batch.cases.extend(validate_cases(path, entries or [], part if part in FAMILIES else None, codes, ids,
                                          problems, batch=batch.id, labels=invalid, part=part))
    for case in batch.cases:
        for cmd in case.run.prepare if case.run else ():
            for helper in prepare_helpers(cmd):
                if not (folder / PREPARE_DIR / helper).is_file():
                    problems.append(f"{_rel(folder)}: case {case.id}: run.prepare names {{prepare}}/{helper}, "
                                    f"which is not a file in {_rel(folder / PREPARE_DIR)}")
    if (batch.cases or batch.log) and not batch.search:
        problems.append(f"{_rel(folder)}: no SEARCH*.md (the search procedure, committed before the cases)")
    per_repo: dict[str, list[str]] = {}
    for case in batch.cases:
        per_repo.setdefault(case.repo.lower(), []).append(case.id)
    for repo, cids in sorted(per_repo.items()):
        if len(cids) > MAX_PER_REPO:
            problems.append(f"{_rel(folder)}: {len(cids)} cases from {repo} ({', '.join(cids)}); "
                            f"at most {MAX_PER_REPO} per repository in a batch")
    by_id = {case.id: case for case in batch.cases}
    for case in batch.cases:
        log = batch.log.get(case.part)
        where = f"{_rel(folder / f'cases-{case.part}.toml')}: case {case.id}"
        if log is None:
            problems.append(f"{where}: there is no log-{case.part}.toml with its candidate {case.candidate}")
            continue
        entry = log[case.candidate - 1] if case.candidate <= len(log) else None
        if entry is None or entry.get("n") != case.candidate:
            problems.append(f"{where}: candidate {case.candidate} is not in log-{case.part}.toml")
        elif entry.get("verdict") != "accept" or entry.get("case") != case.id:
            problems.append(f"{where}: log-{case.part}.toml candidate {case.candidate} does not say "
                            f"verdict = \"accept\" with case = \"{case.id}\"")
        elif isinstance(entry.get("repo"), str) and entry["repo"].lower() != case.repo.lower():
            problems.append(f"{where}: log-{case.part}.toml candidate {case.candidate} is {entry['repo']}, "
                            f"the case is {case.repo}")
    for part, log in sorted(batch.log.items()):
        for entry in log:
            cid = entry.get("case")
            if entry.get("verdict") == "accept" and isinstance(cid, str):
                case = by_id.get(cid)
                if case is None and cid in invalid:
                    continue
                if case is None or case.part != part or case.candidate != entry.get("n"):
                    problems.append(f"{_rel(folder / f'log-{part}.toml')}: candidate {entry.get('n')} is accepted "
                                    f"as case {cid!r}, but cases-{part}.toml has no such case with "
                                    f"candidate = {entry.get('n')}")
    if (folder / "described.toml").is_file():
        batch.described = validate_described(folder / "described.toml", by_id, codes, problems)
    if (folder / "first_sight.toml").is_file():
        batch.first_sight = validate_first_sight(folder / "first_sight.toml", by_id, codes, problems)
    return batch


def load_batches(batches_dir: Path, codes: set[str], ids: dict[str, str], problems: list[str]) -> dict[str, Batch]:
    """Every `batches/<id>/` folder (id b1, b2, ...), validated into problems."""
    batches: dict[str, Batch] = {}
    if not batches_dir.is_dir():
        return batches
    for folder in sorted(p for p in batches_dir.iterdir() if p.is_dir()):
        if not BATCH_RE.match(folder.name) or folder.name == BATCH0:
            problems.append(f"{_rel(folder)}: a batch folder is named b1, b2, ... (b0 is cases/)")
            continue
        batches[folder.name] = load_batch(folder, codes, ids, problems)
    return dict(sorted(batches.items(), key=lambda item: int(item[0][1:])))


def load_all(cases_dir: Path = CASES_DIR, judgements_dir: Path = JUDGEMENTS_DIR, batches_dir: Path = BATCHES_DIR,
             codes: set[str] | None = None) -> tuple[Manifest, dict[str, Batch]]:
    """Batch 0 (cases/, judgements/) and every batch folder, validated together (ids are
    unique over all of them); raises ManifestError listing every problem."""
    codes = rule_codes() if codes is None else codes
    problems: list[str] = []
    try:
        manifest = load_manifest(cases_dir, judgements_dir, codes)
    except ManifestError as error:
        problems.extend(error.problems)
        manifest = None
    ids: dict[str, str] = {}
    if manifest is not None:
        ids = {case.id: case.file for case in manifest.cases}
    batches = load_batches(batches_dir, codes, ids, problems)
    if problems:
        raise ManifestError(problems)
    return manifest, batches


# --------------------------------------------------------------------------- mirrors and trees


def resolve_mirror(mirrors: Path | None, repo: str) -> Path | None:
    """The git directory of `owner/name` under MIRRORS, or None."""
    if mirrors is None:
        return None
    base = mirrors / repo.replace("/", "+")
    for candidate in (base / "repo", base):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
        if (candidate / ".git").is_dir() and (candidate / ".git" / "HEAD").is_file():
            return candidate / ".git"
    return None


def git(gitdir: Path, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, GIT_DIR=str(gitdir), LC_ALL="C")
    env.pop("GIT_WORK_TREE", None)
    return subprocess.run(
        ["git", "-c", "core.quotepath=false", "-c", "diff.noprefix=false", *args],
        env=env, input=input, capture_output=True, check=check,
    )


def has_commit(gitdir: Path, sha: str) -> bool:
    return git(gitdir, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def path_exists(gitdir: Path, sha: str, path: str) -> bool:
    if path == ".":
        return True
    return git(gitdir, "cat-file", "-e", f"{sha}:{path.rstrip('/')}", check=False).returncode == 0


LINTED_NAMES = (".gitignore",)  # besides the linted suffixes: what tlint's file discovery reads
PY_ONLY = (".py",)  # batch 0 (its figures were defined on .py files) and bench/ecosystem.py
LINTED_SUFFIXES = (".py", ".ipynb")  # batches b1, ...: notebooks are linted too


def tree_files(gitdir: Path, sha: str, take: tuple[str, ...] | list[str],
               suffixes: tuple[str, ...] | None = PY_ONLY) -> list[tuple[str, str]]:
    """(path, blob) of the regular files with these suffixes, and `.gitignore` files,
    under the take paths (`suffixes` None: every regular file, as a runnable case needs)."""
    spec = [] if "." in take else [f":(literal){p.rstrip('/')}" for p in take]
    out = git(gitdir, "ls-tree", "-r", "-z", "--full-tree", sha, "--", *spec).stdout
    files = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind == "blob" and mode in ("100644", "100755") and (
                suffixes is None or path.lower().endswith(suffixes) or path.rsplit("/", 1)[-1] in LINTED_NAMES):
            files.append((path, blob))
    return files


def absent_blobs(gitdir: Path, blobs: list[str]) -> set[str]:
    """The blobs the mirror does not hold (a fetched snapshot lacks files of 4 MiB and more)."""
    if not blobs:
        return set()
    out = git(gitdir, "cat-file", "--batch-check", input="".join(b + "\n" for b in blobs).encode()).stdout
    return {line.split()[0] for line in out.decode().splitlines() if line.endswith(" missing")}


def materialise(gitdir: Path, sha: str, take: tuple[str, ...] | list[str], dest: Path,
                suffixes: tuple[str, ...] | None = PY_ONLY) -> tuple[list[str], list[str]]:
    """Extract the `.py` (`suffixes`: also `.ipynb`; None: every regular file) and `.gitignore`
    files of the `take` paths of commit `sha` into
    `dest` with `git archive <sha> -- <files> | tar -x` (the mirror is only read; naming
    the files, rather than the folders, keeps a blob the mirror lacks from failing the
    whole archive). Returns (take paths the commit does not have, files whose blob the
    mirror lacks and that are therefore not linted). `dest` gets an empty `.git` folder
    so that tlint treats it as the project root."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".git").mkdir(exist_ok=True)
    missing = [p for p in take if not path_exists(gitdir, sha, p)]
    files = tree_files(gitdir, sha, [p for p in take if p not in missing], suffixes) if len(missing) < len(take) else []
    absent = absent_blobs(gitdir, [blob for _, blob in files])
    wanted = [path for path, blob in files if blob not in absent]
    for start in range(0, len(wanted), 500):
        chunk = [f":(literal){path}" for path in wanted[start:start + 500]]
        archive = git(gitdir, "archive", "--format=tar", sha, "--", *chunk).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            members = [m for m in tar.getmembers() if _safe_member(m)]
            try:
                tar.extractall(dest, members=members, filter="tar")
            except TypeError:  # a Python without extraction filters (members are checked above)
                tar.extractall(dest, members=members)
    return missing, sorted(path for path, blob in files if blob in absent)


def _safe_member(member: tarfile.TarInfo) -> bool:
    # no links (a symlink could point anywhere), no absolute or escaping names
    name = member.name
    if member.issym() or member.islnk() or name.startswith("/") or ".." in name.split("/"):
        return False
    return member.isfile() or member.isdir()


# --------------------------------------------------------------------------- running tlint


def tlint_command(spec: str | None) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment for running tlint. None: this checkout;
    a folder holding a `tlint` package: that checkout; otherwise a shell-style command."""
    if spec is None:
        spec = str(ROOT)
    path = Path(spec)
    if path.is_dir() and (path / "tlint" / "__init__.py").is_file():
        old = os.environ.get("PYTHONPATH")
        pythonpath = str(path.resolve()) + (os.pathsep + old if old else "")
        return [sys.executable, "-m", "tlint"], {"PYTHONPATH": pythonpath}
    return shlex.split(spec), {}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    end_line: int
    column: int
    code: str
    severity: str
    message: str
    cell: int | None = None  # in a notebook: the cell `line` is in (tlint's numbering)
    pos: int | None = None  # in a notebook: the line in its cells laid end to end (notebook_lines)
    origin: str | None = None  # a runnable case's: "trace:confirmed", "trace:new", "check:<verdict>"

    @property
    def at(self) -> int:
        """The line compared with sites: `line`, or in a notebook `pos`."""
        return self.line if self.pos is None else self.pos

    def as_dict(self) -> dict:
        out = {"path": self.path, "line": self.line, "end_line": self.end_line, "column": self.column,
               "code": self.code, "severity": self.severity, "message": self.message}
        if self.cell is not None:
            out["cell"] = self.cell
        if self.origin is not None:
            out["origin"] = self.origin
        return out


class TlintFailed(Exception):
    pass


def run_tlint(command: tuple[list[str], dict[str, str]], tree: Path, paths: list[str] | tuple[str, ...],
              extra: list[str] | None = None, timeout: float = 900) -> list[Finding]:
    """tlint's findings on `paths` (relative to `tree`, linted from inside it). Raises
    TlintFailed when tlint cannot be started, runs past `timeout`, exits with a status other
    than 0 or 1 (`--exit-zero` is passed: 2 is a usage, configuration or internal error) or
    prints output that is not tlint's JSON. TL003/TL001 findings are returned as findings:
    `tool_failures` tells which of them are failures."""
    argv, env_extra = command
    env = dict(os.environ, **env_extra)
    env["TLINT_NO_CACHE"] = "1"
    env.pop("PYTHONHASHSEED", None)
    args = [*argv, "check", "--format", "json", "--no-cache", "--exit-zero", "--jobs", "1",
            *(extra or []), *paths]
    try:
        proc = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TlintFailed(f"tlint ran past {timeout:.0f} s") from None
    except OSError as error:
        raise TlintFailed(f"tlint could not be started ({' '.join(argv)}): {error}") from None
    tail = " | ".join((proc.stderr or proc.stdout or "").strip().splitlines()[-5:])
    try:
        findings = parse_tlint_json(proc.stdout)
    except ValueError as error:
        raise TlintFailed(f"tlint exited {proc.returncode} with output that is not its JSON ({error}): "
                          f"{tail}") from None
    if proc.returncode not in (0, 1):
        internal = [f"{f.path}:{f.line} {f.code} {' '.join(f.message.split())[:120]}"
                    for f in findings if f.code == "TL003"][:3]
        raise TlintFailed(f"tlint exited {proc.returncode}"
                          + (f" (internal errors: {'; '.join(internal)})" if internal else f": {tail}"))
    return findings


def parse_tlint_json(text: str) -> list[Finding]:
    """The findings of tlint's `--format json` output; ValueError when it is not that."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("diagnostics"), list):
        raise ValueError("no list of diagnostics")
    findings = []
    try:
        for diag in data["diagnostics"]:
            path = diag["path"].replace(os.sep, "/")
            while path.startswith("./"):
                path = path[2:]
            start, end = diag["range"]["start"], diag["range"]["end"]
            finding = Finding(path, start["line"], end["line"], start["column"], diag["code"],
                              diag["severity"], diag["message"], diag.get("cell"))
            if not (isinstance(finding.line, int) and isinstance(finding.code, str)
                    and isinstance(finding.severity, str) and isinstance(finding.message, str)):
                raise TypeError("a field has the wrong type")
            findings.append(finding)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"a diagnostic lacks {error}") from None
    return findings


def python_compiles(file: Path) -> bool:
    """Whether Python itself compiles `file` (to an AST; encoding declarations honoured)."""
    try:
        source = file.read_bytes()
    except OSError:
        return False
    if is_notebook(file.name):
        # a notebook: its JSON loads and each code cell compiles once IPython's line
        # magics and shell escapes (lines starting with % or !) are set aside
        try:
            cells = json.loads(source)["cells"]
            sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                       for c in cells if c.get("cell_type") == "code"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return False
        chunks = ["\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))
                  for text in sources]
    else:
        chunks = [source]
    for chunk in chunks:
        try:
            compile(chunk, str(file), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def tool_failures(findings: list[Finding], tree: Path) -> list[dict]:
    """The findings that show tlint failing rather than the code being wrong: every TL003,
    and every TL001 on a file of the materialised `tree` that Python compiles (or that the
    tree does not have)."""
    failures = []
    for f in findings:
        if f.code == "TL003":
            failures.append({"kind": "internal-error", **f.as_dict()})
        elif f.code == "TL001":
            file = tree / f.path
            if not file.is_file():
                failures.append({"kind": "parse-error-no-such-file", **f.as_dict()})
            elif python_compiles(file):
                failures.append({"kind": "parse-error-python-compiles", **f.as_dict()})
    return failures


def describe_failure(failure: dict) -> str:
    """One line for a tool failure (of run_case or bench/ecosystem.py's run_repo)."""
    side = f"{failure['side']}: " if failure.get("side") else ""
    if failure["kind"] == "tlint-failed":
        return f"{side}{failure['detail']}"
    message = " ".join(failure["message"].split())[:120]
    what = {"internal-error": "internal error",
            "parse-error-python-compiles": "parse error on a file Python compiles",
            "parse-error-no-such-file": "parse error on a file not in the tree"}[failure["kind"]]
    return f"{side}{what}: {failure['path']}:{failure['line']} {failure['code']} {message}"


# --------------------------------------------------------------------------- line mapping


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass
class FileDiff:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)


HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _unquote(path: str) -> str:
    """A path as git prints it in a patch header (C-quoted when it has odd characters)."""
    if path.startswith('"') and path.endswith('"'):
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1").decode("utf-8", "replace")
    return path


def parse_diff(patch: str) -> dict[str, FileDiff]:
    """`git diff -U0` output → {old path: FileDiff} (old path None for added files are
    left out: nothing of the buggy tree maps to them)."""
    files: dict[str, FileDiff] = {}
    current: FileDiff | None = None
    old_path: str | None = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current, old_path = None, None
        elif line.startswith("--- "):
            name = _unquote(line[4:].rstrip("\t"))
            old_path = None if name == "/dev/null" else name[2:] if name.startswith("a/") else name
        elif line.startswith("+++ "):
            name = _unquote(line[4:].rstrip("\t"))
            new_path = None if name == "/dev/null" else name[2:] if name.startswith("b/") else name
            current = FileDiff(old_path, new_path)
            if old_path is not None:
                files[old_path] = current
        elif line.startswith("rename from "):
            old_path = _unquote(line[len("rename from "):])
        elif line.startswith("rename to ") and old_path is not None:
            # a pure rename has no ---/+++ lines: record it now (hunks, if any, follow)
            files[old_path] = current = FileDiff(old_path, _unquote(line[len("rename to "):]))
        elif line.startswith("@@") and current is not None:
            match = HUNK_RE.match(line)
            if match:
                a, b, c, d = match.groups()
                current.hunks.append(Hunk(int(a), 1 if b is None else int(b), int(c), 1 if d is None else int(d)))
    return files


def map_line(hunks: list[Hunk], line: int) -> tuple[int, int]:
    """The fixed-tree range [lo, hi] of buggy-tree `line` (see the module docstring)."""
    offset = 0
    for hunk in hunks:
        if hunk.old_count == 0:
            # pure insertion after old line old_start: lines after it move down
            if line > hunk.old_start:
                offset += hunk.new_count
                continue
            break
        if line < hunk.old_start:
            break
        if line < hunk.old_start + hunk.old_count:
            if hunk.new_count == 0:
                return max(hunk.new_start, 1), max(hunk.new_start, 1)
            return hunk.new_start, hunk.new_start + hunk.new_count - 1
        offset += hunk.new_count - hunk.old_count
    return line + offset, line + offset


def diff_between(gitdir: Path, buggy: str, fixed: str, take: tuple[str, ...]) -> dict[str, FileDiff]:
    spec = [] if "." in take else [p.rstrip("/") for p in take]
    patch = git(gitdir, "diff", "--no-color", "--no-ext-diff", "-U0", "-M", "--src-prefix=a/",
                "--dst-prefix=b/", buggy, fixed, "--", *spec).stdout.decode("utf-8", "replace")
    return parse_diff(patch)


def map_site(diffs: dict[str, FileDiff], path: str, line: int) -> tuple[str, int, int] | None:
    """(fixed path, lo, hi) of a buggy-tree site line; None when the fix deleted the file."""
    diff = diffs.get(path)
    if diff is None:
        return path, line, line
    if diff.new_path is None:
        return None
    lo, hi = map_line(diff.hunks, line)
    return diff.new_path, lo, hi


_NEWLINE = re.compile(r"\r\n|\r|\n")


def notebook_lines(file: Path) -> tuple[list[str], list[int]] | None:
    """A notebook's cells laid end to end: (lines, starts) where `lines` holds each cell's
    lines (split as tlint splits them) followed by one boundary line, and cell N's line L
    is `lines[starts[N-1] + L - 1]`, position `starts[N-1] + L`. Cells are numbered over
    all the notebook's cells, markdown included, as tlint numbers them. None when the file
    is not a notebook that loads."""
    try:
        cells = json.loads(file.read_bytes())["cells"]
        lines: list[str] = []
        starts: list[int] = []
        for cell in cells:
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else source
            starts.append(len(lines))
            parts = _NEWLINE.split(text) if text else []
            if parts and parts[-1] == "":
                parts.pop()
            lines.extend(parts)
            lines.append("\0 cell boundary")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return lines, starts


def notebook_hunks(old: list[str], new: list[str]) -> list[Hunk]:
    """`git diff -U0`'s hunks between two notebooks' laid-out lines (difflib; a pure
    insertion starts after old line `old_start`, a pure deletion after new line `new_start`)."""
    hunks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        hunks.append(Hunk(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1))
    return hunks


class NotebookSiteError(Exception):
    pass


_SOURCE_KEY = re.compile(r'"source"\s*:\s*')


def notebook_file_lines(file: Path) -> dict[int, tuple[int, int]] | None:
    """{line of the .ipynb file itself (as GitHub shows it): (cell, line in the cell)} for
    every line of a cell's source, found by reading the cells' `source` values in order
    through the file's text. None when the file does not load or a value is not found."""
    try:
        text = file.read_text(encoding="utf-8")
        cells = json.loads(text)["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    out: dict[int, tuple[int, int]] = {}
    cursor = 0
    for number, cell in enumerate(cells, 1):
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        key = _SOURCE_KEY.search(text, cursor)
        if key is None:
            return None
        cursor = key.end()
        parts = source if isinstance(source, list) else [source]
        line_in_cell = 1
        for part in parts:
            if not isinstance(part, str):
                return None
            for encoded in (json.dumps(part, ensure_ascii=False), json.dumps(part)):
                at = text.find(encoded, cursor)
                if at >= 0:
                    break
            else:
                return None
            out.setdefault(text.count("\n", 0, at) + 1, (number, line_in_cell))
            line_in_cell += len(_NEWLINE.findall(part))  # an item is a line (with its line end) in nbformat
            cursor = at + len(encoded)
    return out


def notebook_positions(case: Case, trees: dict[str, Path], findings: dict[str, list[Finding]],
                       diffs: dict[str, FileDiff]) -> tuple[Case, dict[str, list[Finding]], dict[str, FileDiff]]:
    """Carry a case's notebooks into one line numbering (notebook_lines): each notebook
    finding gets its `pos`, each notebook site its positions, and each notebook site's
    file its hunks (difflib on the laid-out lines: git's hunks are of the JSON)."""
    tables: dict[tuple[str, str], tuple[list[str], list[int]] | None] = {}

    def table(side: str, path: str):
        if (side, path) not in tables:
            tables[side, path] = notebook_lines(trees[side] / path)
        return tables[side, path]

    def position(side: str, path: str, cell: int, line: int) -> int | None:
        laid = table(side, path)
        if laid is None or not 1 <= cell <= len(laid[1]):
            return None
        return laid[1][cell - 1] + line

    out_findings = {}
    for side, items in findings.items():
        out_findings[side] = [dataclasses.replace(f, pos=position(side, f.path, f.cell, f.line))
                              if f.cell is not None and is_notebook(f.path) else f for f in items]
    sites = []
    diffs = dict(diffs)
    for site in case.sites:
        if not is_notebook(site.path):
            sites.append(site)
            continue
        if site.cell is None:  # lines of the .ipynb file itself
            in_file = notebook_file_lines(trees["buggy"] / site.path) or {}
            places = [in_file.get(line) for line in site.lines]
            if None in places:
                raise NotebookSiteError(f"line {site.lines[places.index(None)]} of the buggy tree's {site.path} "
                                        "is not a line of a cell's source (give cell = N and lines in the cell)")
            lines = tuple(position("buggy", site.path, cell, line) for cell, line in places)
        else:
            lines = tuple(position("buggy", site.path, site.cell, line) for line in site.lines)
        if None in lines:
            raise NotebookSiteError(f"the buggy tree's {site.path} has no cell {site.cell} (or does not load)")
        sites.append(Site(site.path, lines))
        diff = diffs.get(site.path)
        new_path = site.path if diff is None else diff.new_path
        if new_path is not None and table("buggy", site.path) and table("fixed", new_path):
            diffs[site.path] = FileDiff(site.path, new_path,
                                        notebook_hunks(table("buggy", site.path)[0], table("fixed", new_path)[0]))
    return dataclasses.replace(case, sites=tuple(sites)), out_findings, diffs


# --------------------------------------------------------------------------- evaluation


def near(findings: list[Finding], code: str | None, path: str, lo: int, hi: int,
         radius: int = RADIUS) -> list[Finding]:
    """The findings of `code` (None: of any rule but the tool codes) in `path` whose line
    (a notebook's: its position) lies in [lo - radius, hi + radius]."""
    return [f for f in findings
            if (f.code == code if code is not None else f.code not in TOOL_CODES)
            and f.path == path and lo - radius <= f.at <= hi + radius]


def evaluate(case: Case, buggy: list[Finding], fixed: list[Finding], diffs: dict[str, FileDiff],
             judgements: dict[tuple[str, str, str, int], Judgement],
             fixed_take: tuple[str, ...] | None = None, described: dict | None = None) -> dict:
    """found, fix-sensitive and the judged fixed-tree findings of one case. `fixed_take`:
    the take paths the fixed commit has (a site mapped outside them cannot be checked,
    so the case is not counted fix-sensitive). `described`: the batch's described.toml
    verdicts (an out-of-catalogue case's near findings)."""
    fixed_take = case.take if fixed_take is None else fixed_take
    hits: list[Finding] = []
    for site in case.sites:
        for line in site.lines:
            hits.extend(f for f in near(buggy, case.rule, site.path, line, line) if f not in hits)
    extra: dict = {}
    codes: tuple[str | None, ...] = (case.rule,)
    if not case.in_catalogue:
        # outside the catalogue: every finding near a site is judged in described.toml;
        # found when one of them describes the bug
        verdicts = {} if described is None else described
        near_out, unjudged_near = [], []
        for f in hits:
            verdict = verdicts.get((case.id, f.path, f.cell, f.line, f.code))
            if verdict is None:
                unjudged_near.append(f.as_dict())
            else:
                near_out.append({**f.as_dict(), "describes": verdict.describes, "reason": verdict.reason})
        describing = [f for f in near_out if f["describes"]]
        extra = {"near": near_out, "near_unjudged": unjudged_near,
                 "incidental": [f for f in near_out if not f["describes"]]}
        codes = tuple(sorted({f["code"] for f in describing}))
        found = bool(describing)
    else:
        found = bool(hits)
    mapped, remaining, unchecked = [], [], []
    for site in case.sites:
        for line in site.lines:
            target = map_site(diffs, site.path, line)
            if target is None:
                mapped.append({"path": site.path, "line": line, "fixed": None})
                continue
            new_path, lo, hi = target
            linted = inside_take(new_path, fixed_take)
            mapped.append({"path": site.path, "line": line,
                           "fixed": {"path": new_path, "lo": lo, "hi": hi, "linted": linted}})
            if not linted:
                unchecked.append(new_path)
            for code in codes:
                remaining.extend(f for f in near(fixed, code, new_path, lo, hi) if f not in remaining)
    fix_sensitive = found and not remaining and not unchecked
    if case.batch == BATCH0:
        judged = judge(case.id, fixed, judgements)
    else:
        # a batch's fixed-tree findings are counted, not judged (precision: bench/ecosystem samples)
        split = judge(case.id, fixed, {})
        judged = {"judged": [], "unjudged": [], "info": split["info"], "tool": split["tool"],
                  "fixed_findings": len(split["unjudged"])}
    return {
        "found": found,
        "fix_sensitive": fix_sensitive,
        "buggy_hits": [f.as_dict() for f in hits] if case.in_catalogue else [f for f in extra["near"]
                                                                                if f["describes"]],
        "buggy_rule_findings": [f.as_dict() for f in buggy if case.rule is not None and f.code == case.rule],
        "mapped_sites": mapped,
        "fixed_remaining": [f.as_dict() for f in remaining],
        "unchecked_sites": sorted(set(unchecked)),
        **extra,
        **judged,
    }


def judge(owner: str, findings: list[Finding], judgements: dict[tuple[str, str, str, int], Judgement]) -> dict:
    """Split findings into judged (with verdict), unjudged, info and tool findings."""
    judged, unjudged, info, tool = [], [], [], []
    for f in findings:
        if f.code in TOOL_CODES:
            tool.append(f.as_dict())
        elif f.severity == "info":
            info.append(f.as_dict())
        else:
            judgement = judgements.get((owner, f.path, f.code, f.line))
            if judgement is None:
                unjudged.append(f.as_dict())
            else:
                judged.append({**f.as_dict(), "verdict": judgement.verdict, "reason": judgement.reason})
    return {"judged": judged, "unjudged": unjudged, "info": info, "tool": tool}


def stale_judgements(owner: str, findings: list[Finding], judgements: dict) -> list[Judgement]:
    keys = {(owner, f.path, f.code, f.line) for f in findings}
    return [j for key, j in sorted(judgements.items()) if key[0] == owner and key not in keys]


def toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def paste_ready(owner_key: str, owner: str, finding: dict) -> str:
    """A [[judgement]] table to paste, verdict and reason left for the judge to fill."""
    message = " ".join(finding["message"].split())
    return (
        f"[[judgement]]\n"
        f"{owner_key} = {toml_string(owner)}\n"
        f"path = {toml_string(finding['path'])}\n"
        f"line = {finding['line']}\n"
        f"code = {toml_string(finding['code'])}\n"
        f"verdict = \"\"  # fp | tp | advisory\n"
        f"reason = \"\"\n"
        f"# {finding['severity']}: {message}\n"
    )


def run_case(case: Case, mirrors: Path | None, command, judgements: dict, keep: Path | None = None,
             described: dict | None = None) -> dict:
    """One case's trees materialised and linted; `described`: its batch's described.toml
    verdicts (out-of-catalogue cases)."""
    result: dict = {"id": case.id, "repo": case.repo, "rule": case.rule, "family": case.family,
                    "batch": case.batch, "in_catalogue": case.in_catalogue, "kind": case.kind,
                    "buggy": case.buggy, "fixed": case.fixed, "source": case.source}
    gitdir = resolve_mirror(mirrors, case.repo)
    if gitdir is None:
        return {**result, "status": "missing-mirror",
                "detail": f"no mirror of {case.repo} under {mirrors} (fetch it)"}
    absent = [sha for sha in (case.buggy, case.fixed) if not has_commit(gitdir, sha)]
    if absent:
        return {**result, "status": "missing-commit",
                "detail": f"{case.repo}'s mirror lacks commit(s) {', '.join(absent)} (fetch it again)"}
    work = Path(tempfile.mkdtemp(prefix=f"realbugs-{case.id}-", dir=keep))
    try:
        trees = {}
        for side in ("buggy", "fixed"):
            tree = work / side
            suffixes = PY_ONLY if case.batch == BATCH0 else LINTED_SUFFIXES
            missing, absent = materialise(gitdir, getattr(case, side), case.take, tree, suffixes)
            if absent:
                result.setdefault("absent_files", []).extend(f"{side}:{path}" for path in absent)
            if side == "buggy" and missing:
                return {**result, "status": "missing-path",
                        "detail": f"the buggy commit has no {', '.join(missing)}"}
            trees[side] = (tree, [p for p in case.take if p not in missing and (tree / p).exists()])
        findings: dict[str, list[Finding]] = {}
        failures: list[dict] = []
        for side, (tree, paths) in trees.items():
            try:
                extra = ["--extend-select", case.rule] if case.rule else []  # outside the catalogue: defaults
                findings[side] = run_tlint(command, tree, paths, extra=extra) if paths else []
            except TlintFailed as error:
                failures.append({"side": side, "kind": "tlint-failed", "detail": str(error)})
                continue
            failures.extend({"side": side, **failure} for failure in tool_failures(findings[side], tree))
        if failures:
            return {**result, "status": "tool-failure", "detail": describe_failure(failures[0]),
                    "tool_failures": failures}
        diffs = diff_between(gitdir, case.buggy, case.fixed, case.take)
        try:
            scored, findings, diffs = notebook_positions(case, {side: tree for side, (tree, _) in trees.items()},
                                                         findings, diffs)
        except NotebookSiteError as error:
            return {**result, "status": "missing-path", "detail": str(error)}
        outcome = evaluate(scored, findings["buggy"], findings["fixed"], diffs, judgements,
                           tuple(trees["fixed"][1]), described)
        stale = stale_judgements(case.id, findings["fixed"], judgements)
        return {**result, "status": "ok", **outcome,
                "stale_judgements": [{"path": j.path, "line": j.line, "code": j.code} for j in stale]}
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [str(error)]
        return {**result, "status": "git-failed", "detail": detail[0]}
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- runnable cases


RUN_TIMEOUT = 300.0  # seconds per tree: its prepare commands and its trace together
INSTALL_TIMEOUT = 900.0  # seconds for one venv's pip install
OUTPUT_TAIL_BYTES = 64 * 1024  # of a command's stdout and stderr, the end kept
DETAIL_LINES = 15  # of that tail, the lines a failure's detail shows
STOP_GRACE_S = 10.0  # between SIGTERM and SIGKILL to a command's process group
VENV_OK = "tlint-bench-venv.json"  # written into a venv once its packages are installed
# set for prepare and trace unless the case's env says otherwise: nothing is downloaded from a hub
RUN_ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "WANDB_MODE": "disabled"}
RUN_FAILURES = ("no-checkout", "install-failed", "wrong-tlint", "edit-failed", "prepare-failed", "trace-failed",
                "timeout", "too-few-steps")


class RunFailed(Exception):
    """A runnable case's tree could not be run to a trace report: `status` (RUN_FAILURES) and one line or a tail."""

    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def venv_cache() -> Path:
    """The default folder of the runnable cases' venvs: $XDG_CACHE_HOME (or ~/.cache)/tlint-bench/venvs."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tlint-bench" / "venvs"


def venv_key(pins: tuple[str, ...] | list[str]) -> str:
    """The cache key of a venv: the pinned list (sorted, lower-case) and the interpreter that makes it."""
    text = json.dumps({"pins": sorted(p.lower() for p in pins), "python": os.path.realpath(sys.executable),
                       "version": sys.version}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _tail(data: bytes, lines: int = DETAIL_LINES) -> str:
    text = data.decode("utf-8", "replace").rstrip()
    return "\n".join(text.splitlines()[-lines:])


def run_bounded(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, bytes]:
    """Run `argv` in its own process group with stdin from /dev/null; return (exit status, the
    last OUTPUT_TAIL_BYTES of its stdout and stderr). Past `timeout` the group gets SIGTERM
    (tlint trace then stops its own child), then SIGKILL after STOP_GRACE_S, and the status
    is None. Whatever of the group is left when the command ends is killed."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as error:
        return 127, f"{argv[0]} could not be started: {error}".encode()
    tail = bytearray()

    def pump() -> None:
        assert proc.stdout is not None
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                return
            tail.extend(chunk)
            del tail[:-OUTPUT_TAIL_BYTES]

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    status: int | None
    try:
        status = proc.wait(timeout=max(timeout, 0.1))
    except subprocess.TimeoutExpired:
        status = None
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(timeout=5)
    return status, bytes(tail)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def ensure_venv(pins: tuple[str, ...], cache: Path, timeout: float = INSTALL_TIMEOUT) -> Path:
    """The python of a venv holding `pins` over this interpreter's packages
    (`--system-site-packages`: torch and the rest are reused), made once per pinned list and
    kept under `cache` (a lock file keeps two runs from making one venv at once). Raises
    RunFailed("install-failed") with pip's output."""
    cache.mkdir(parents=True, exist_ok=True)
    key = venv_key(pins)
    folder = cache / key
    python = folder / "bin" / "python"
    want = {"pins": sorted(pins), "python": os.path.realpath(sys.executable)}
    with (cache / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if json.loads((folder / VENV_OK).read_text(encoding="utf-8")) == want and python.is_file():
                return python
        except (OSError, ValueError):
            pass
        shutil.rmtree(folder, ignore_errors=True)
        status, out = run_bounded([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                                   str(folder)], cache, dict(os.environ), 120)
        if status != 0:
            raise RunFailed("install-failed", f"python -m venv failed:\n{_tail(out)}")
        if sys.prefix != sys.base_prefix:
            # this interpreter is itself a venv: its packages, not only its base's, are the "system" ones
            purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                           "['purelib'])"], capture_output=True, text=True).stdout.strip())
            (purelib / "_tlint_bench_parent.pth").write_text(
                "".join(p + "\n" for p in site_module.getsitepackages()), encoding="utf-8")
        if pins:
            env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
            env.pop("PYTHONPATH", None)
            status, out = run_bounded([str(python), "-m", "pip", "install", *pins], cache, env, timeout)
            if status != 0:
                why = f"ran past {timeout:.0f} s" if status is None else f"exited {status}"
                raise RunFailed("install-failed", f"pip install {' '.join(pins)} {why}:\n{_tail(out)}")
        (folder / VENV_OK).write_text(json.dumps(want), encoding="utf-8")
    return python


def check_tlint(python: Path, checkout: Path, env: dict[str, str], cwd: Path) -> None:
    """RunFailed("wrong-tlint") unless `python`, run in `cwd` with `env` as `tlint trace` will
    be, imports tlint from `checkout`."""
    try:
        proc = subprocess.run([str(python), "-c", "import tlint; print(tlint.__file__)"], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RunFailed("wrong-tlint", f"the venv's python could not import tlint: {error}") from None
    where = proc.stdout.strip()
    if proc.returncode != 0 or not where or Path(where).resolve().parent != (checkout / "tlint").resolve():
        raise RunFailed("wrong-tlint", f"the venv's python imports tlint from {where or '(nothing)'}, not from "
                        f"{checkout}/tlint: {_tail(proc.stderr.encode(), 3)}")


def apply_edits(tree: Path, edits: tuple[Edit, ...]) -> None:
    """Each edit replaces one whole line of a file of the tree (its line ending kept)."""
    for edit in edits:
        file = tree / edit.path
        try:
            lines = file.read_bytes().splitlines(keepends=True)
        except OSError:
            raise RunFailed("edit-failed", f"edit {edit.path}:{edit.line}: the tree has no such file") from None
        if edit.line > len(lines):
            raise RunFailed("edit-failed", f"edit {edit.path}:{edit.line}: the file has {len(lines)} lines")
        old = lines[edit.line - 1]
        ending = old[len(old.rstrip(b"\r\n")):]
        lines[edit.line - 1] = edit.text.encode("utf-8") + ending
        file.write_bytes(b"".join(lines))


def run_env(run: Run, venv_python: Path, checkout: Path) -> dict[str, str]:
    """The environment of a runnable case's prepare and trace: this one, RUN_ENV_DEFAULTS, the
    case's env, the venv first on PATH, and the checkout's tlint on PYTHONPATH after the case's own
    PYTHONPATH entries (and nothing else)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLINT_") and k != "PYTHONHOME"}
    env.update(RUN_ENV_DEFAULTS)
    env.update(dict(run.env))
    bindir = venv_python.parent
    env["VIRTUAL_ENV"] = str(bindir.parent)
    env["PATH"] = os.pathsep.join(filter(None, [str(bindir), os.environ.get("PATH")]))
    # the case's own PYTHONPATH (a tree whose script imports its package from the tree) first,
    # then the checkout whose tlint is under test
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [dict(run.env).get("PYTHONPATH"), str(checkout)]))
    env["TLINT_NO_CACHE"] = "1"
    return env


def trace_tree(run: Run, tree: Path, python: Path, env: dict[str, str], prepare_dir: Path, report: Path,
               timeout: float) -> dict:
    """Run the case's prepare commands, then `tlint trace`, in `tree`, within `timeout` seconds
    in all; return trace's JSON report. Raises RunFailed."""
    deadline = time.monotonic() + timeout
    for cmd in run.prepare:
        argv = shlex.split(cmd)
        argv[0] = str(python)
        argv[1] = str(prepare_dir / argv[1][len("{prepare}/"):])
        status, out = run_bounded(argv, tree, env, deadline - time.monotonic())
        if status is None:
            raise RunFailed("timeout", f"prepare `{cmd}` ran past the {timeout:.0f} s limit of the tree:\n{_tail(out)}")
        if status != 0:
            raise RunFailed("prepare-failed", f"prepare `{cmd}` exited {status}:\n{_tail(out)}")
    argv = [str(python), "-m", "tlint", "trace", "--steps", str(run.steps), "--format", "json", "-o", str(report),
            "--", *run.command]
    status, out = run_bounded(argv, tree, env, deadline - time.monotonic())
    if status is None:
        raise RunFailed("timeout", f"tlint trace ran past the {timeout:.0f} s limit of the tree:\n{_tail(out)}")
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
            raise ValueError("not tlint trace's report")
    except (OSError, ValueError) as error:
        raise RunFailed("trace-failed", f"tlint trace exited {status} without its JSON report ({error}):\n"
                        f"{_tail(out)}") from None
    if status not in (0, 1) or data.get("error"):
        error = data.get("error") or {}
        raise RunFailed("trace-failed", f"tlint trace exited {status}"
                        + (f" ({error.get('kind')}: {error.get('message')})" if error else "") + f":\n{_tail(out)}")
    if not data.get("stopped") and data.get("steps", 0) < run.steps:
        raise RunFailed("too-few-steps", f"the script ended after {data.get('steps', 0)} optimizer step(s), fewer "
                        f"than the case's steps = {run.steps}:\n{_tail(out)}")
    return data


def trace_findings(report: dict, tree: Path) -> list[Finding]:
    """The findings of a trace report, run-time and static, at paths relative to `tree`: each
    run-time finding with its pairing (origin "trace:confirmed" or "trace:new"), each static
    finding of `tlint check` on the files the run went through with its verdict ("check:confirmed",
    "check:refuted", "check:not-observed")."""
    root = tree.resolve()

    def rel(path: object) -> str | None:
        if not isinstance(path, str):
            return None
        candidate = Path(path)
        if candidate.is_absolute():
            try:
                candidate = candidate.resolve().relative_to(root)
            except ValueError:
                return None  # outside the tree: never near a site
        return candidate.as_posix()

    out: list[Finding] = []
    check = report.get("check") or {}
    sources = [(f, f"trace:{f.get('static') or 'new'}") for f in report.get("findings", [])]
    sources += [(f, f"check:{f.get('verdict')}") for f in check.get("findings", [])]
    for f, origin in sources:
        path, line = rel(f.get("path")), f.get("line")
        if path is None or type(line) is not int or not isinstance(f.get("code"), str):
            continue
        out.append(Finding(path, line, line, 1, f["code"], str(f.get("severity")), str(f.get("message")),
                           origin=origin))
    return out



def run_evidence(hits: list[dict]) -> str | None:
    """The run-time evidence of the findings that found a case: "confirmed" (trace saw it and
    tlint check reports it), "new" (trace only), "static-only" (tlint check only: the run
    refuted it or did not observe it), None (not found)."""
    origins = {str(h.get("origin")) for h in hits}
    if "trace:confirmed" in origins:
        return "confirmed"
    if "trace:new" in origins:
        return "new"
    return "static-only" if hits else None


def run_runnable_case(case: Case, mirrors: Path | None, checkout: Path | None, prepare_dir: Path,
                      keep: Path | None = None, described: dict | None = None, timeout: float = RUN_TIMEOUT,
                      cache: Path | None = None) -> dict:
    """A runnable case (its [case.run]): both whole trees materialised, edited, prepared and
    traced with the tlint of `checkout` in the case's venv, and scored on the trace reports
    (run-time and static findings) as run_case scores tlint check's."""
    assert case.run is not None
    run = case.run
    result: dict = {"id": case.id, "repo": case.repo, "rule": case.rule, "family": case.family,
                    "batch": case.batch, "in_catalogue": case.in_catalogue, "kind": case.kind,
                    "buggy": case.buggy, "fixed": case.fixed, "source": case.source, "runnable": True}
    gitdir = resolve_mirror(mirrors, case.repo)
    if gitdir is None:
        return {**result, "status": "missing-mirror", "detail": f"no mirror of {case.repo} under {mirrors} (fetch it)"}
    absent = [sha for sha in (case.buggy, case.fixed) if not has_commit(gitdir, sha)]
    if absent:
        return {**result, "status": "missing-commit",
                "detail": f"{case.repo}'s mirror lacks commit(s) {', '.join(absent)} (fetch it again)"}
    if checkout is None:
        return {**result, "status": "no-checkout",
                "detail": "a runnable case runs `python -m tlint trace` from a checkout: --tlint must be a folder"}
    work = Path(tempfile.mkdtemp(prefix=f"realbugs-{case.id}-", dir=keep)).resolve()
    sides: dict[str, dict] = {}
    try:
        started = time.monotonic()
        python = ensure_venv(run.python, cache or venv_cache())
        result["venv"] = {"python": str(python), "pins": list(run.python),
                          "seconds": round(time.monotonic() - started, 1)}
        env = run_env(run, python, checkout)
        reports, trees = {}, {}
        for side in ("buggy", "fixed"):
            started = time.monotonic()
            tree = work / side
            sides[side] = {"tree": str(tree)}
            missing, absent_files = materialise(gitdir, getattr(case, side), (".",), tree, None)
            if absent_files:
                result.setdefault("absent_files", []).extend(f"{side}:{path}" for path in absent_files)
            try:
                check_tlint(python, checkout, env, tree)
                apply_edits(tree, run.edits_for(side))
                reports[side] = trace_tree(run, tree, python, env, prepare_dir, work / f"{side}.trace.json", timeout)
            except RunFailed as error:
                raise RunFailed(error.status, f"{side}: {error.detail}") from None
            finally:
                sides[side]["seconds"] = round(time.monotonic() - started, 1)
            trees[side] = tree
            sides[side].update(steps=reports[side].get("steps"), stopped=reports[side].get("stopped"),
                               exit=reports[side].get("exit"), events=reports[side].get("events", {}),
                               findings=[f.as_dict() for f in trace_findings(reports[side], tree)])
        findings = {side: trace_findings(reports[side], trees[side]) for side in reports}
        diffs = diff_between(gitdir, case.buggy, case.fixed, case.take)
        fixed_take = tuple(p for p in case.take if (trees["fixed"] / p).exists())
        outcome = evaluate(case, findings["buggy"], findings["fixed"], diffs, {}, fixed_take, described)
        return {**result, "status": "ok", **outcome, "evidence": run_evidence(outcome["buggy_hits"]),
                "run": sides}
    except RunFailed as error:
        return {**result, "status": error.status, "detail": error.detail, "run": sides}
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [str(error)]
        return {**result, "status": "git-failed", "detail": detail[0], "run": sides}
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def checkout_of(spec: str | None) -> Path | None:
    """The tlint checkout that `--tlint spec` names (None: this one); None for a command line."""
    path = ROOT if spec is None else Path(spec)
    return path.resolve() if path.is_dir() and (path / "tlint" / "__init__.py").is_file() else None


# --------------------------------------------------------------------------- reporting


OUTSIDE = "outside"  # the rule column of an out-of-catalogue case


def tally(results: list[dict]) -> dict:
    """Per rule and per family: cases, run, found, fix-sensitive (cases that are not "ok",
    tool failures included, count as cases, never as run); the fixed-tree verdicts per rule
    (the finding's) and per family (the case's: tp / fp / advisory / unjudged, and info)."""
    def empty() -> dict:
        return {"cases": 0, "run": 0, "found": 0, "fix_sensitive": 0}

    per_rule: dict[str, dict] = {}
    per_family: dict[str, dict] = {}
    verdicts: dict[str, dict[str, int]] = {}
    info: dict[str, int] = {}
    by_family = {family: {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0, "info": 0}
                 for family in [*FAMILIES, OTHER_FAMILY] if any(r["family"] == family for r in results)}
    total = empty()
    for r in results:
        rule_key = r["rule"] or OUTSIDE
        for bucket in (per_rule.setdefault(rule_key, empty()), per_family.setdefault(r["family"], empty()), total):
            bucket["cases"] += 1
            if r["status"] == "ok":
                bucket["run"] += 1
                bucket["found"] += r["found"]
                bucket["fix_sensitive"] += r["fix_sensitive"]
        if r["status"] != "ok":
            continue
        for f in r["judged"]:
            row = verdicts.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0})
            row[f["verdict"]] += 1
        for f in r["unjudged"]:
            verdicts.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0})["unjudged"] += 1
        for f in r["info"]:
            info[f["code"]] = info.get(f["code"], 0) + 1
        row = by_family[r["family"]]
        for f in r["judged"]:
            row[f["verdict"]] += 1
        row["unjudged"] += len(r["unjudged"])
        row["info"] += len(r["info"])
    by_family_total = {key: sum(row[key] for row in by_family.values())
                       for key in ("tp", "fp", "advisory", "unjudged", "info")}
    return {"per_rule": dict(sorted(per_rule.items())), "per_family": dict(sorted(per_family.items())),
            "total": total, "fixed_tree_verdicts": dict(sorted(verdicts.items())), "info": dict(sorted(info.items())),
            "fixed_tree_verdicts_per_family": by_family, "fixed_tree_verdicts_total": by_family_total}


def render(results: list[dict], figures: dict, out) -> tuple[int, int]:
    """Print the readable report; returns (unjudged findings, cases with a tool failure)."""
    w = out.write
    w(f"{'case':<40} {'rule':<7} {'status':<15} {'found':<6} {'fix-sens':<8} fixed-tree (tp/fp/adv/unjudged)\n")
    for r in results:
        rule = r["rule"] or OUTSIDE
        if r["status"] == "tool-failure":
            w(f"{r['id']:<40} {rule:<7} {r['status']:<15} {'-':<6} {'-':<8} "
              f"{len(r['tool_failures'])} tool failure(s)\n")
            for failure in r["tool_failures"]:
                w(f"    tool failure: {describe_failure(failure)}\n")
            continue
        if r["status"] != "ok":
            first, *more = str(r.get("detail", "")).splitlines() or [""]
            w(f"{r['id']:<40} {rule:<7} {r['status']:<15} {'-':<6} {'-':<8} {first}\n")
            w("".join(f"    | {line}\n" for line in more))
            continue
        counts = {v: sum(f["verdict"] == v for f in r["judged"]) for v in VERDICTS}
        verdicts = (f"{counts['tp']}/{counts['fp']}/{counts['advisory']}/{len(r['unjudged'])}"
                    if r.get("batch", BATCH0) == BATCH0 else f"{r.get('fixed_findings', 0)} (not judged)")
        w(f"{r['id']:<40} {rule:<7} {'ok':<15} {'yes' if r['found'] else 'no':<6} "
          f"{'yes' if r['fix_sensitive'] else 'no':<8} {verdicts}\n")
        if r.get("runnable"):
            sides = ", ".join(f"{side} {run.get('steps')} steps in {run.get('seconds')} s"
                              for side, run in r.get("run", {}).items())
            w(f"    traced: {sides}; run-time evidence: {r.get('evidence') or 'none (not found)'}\n")
        for f in r.get("near", []):
            w(f"    near the site: {where(f)} {f['code']} "
              f"{'DESCRIBES the bug' if f['describes'] else 'incidental'}: {f['reason']}\n")
        for f in r.get("near_unjudged", []):
            w(f"    near the site, unjudged: {where(f)} {f['code']}\n")
        if not r["found"] and r["buggy_rule_findings"]:
            lines = ", ".join(f"{f['path']}:{f['line']}" for f in r["buggy_rule_findings"][:5])
            w(f"    {r['rule']} elsewhere in the buggy tree: {lines}\n")
        for f in r["fixed_remaining"]:
            w(f"    still on the fixed tree: {f['path']}:{f['line']} {f['code']}\n")
        for path in r["unchecked_sites"]:
            w(f"    a site maps to {path} in the fixed tree, outside take: not fix-sensitive\n")
        for f in r["tool"]:
            w(f"    tool finding: {f['path']}:{f['line']} {f['code']} {f['message'][:100]}\n")
        for j in r.get("stale_judgements", []):
            w(f"    stale judgement (no such finding now): {j['path']}:{j['line']} {j['code']}\n")

    def table(title: str, rows: dict) -> None:
        w(f"\n{title:<10} {'cases':>5} {'run':>5} {'found':>5} {'fix-sens':>8}\n")
        for key, row in rows.items():
            w(f"{key:<10} {row['cases']:>5} {row['run']:>5} {row['found']:>5} {row['fix_sensitive']:>8}\n")

    table("rule", figures["per_rule"])
    table("family", figures["per_family"])
    t = figures["total"]
    w(f"{'total':<10} {t['cases']:>5} {t['run']:>5} {t['found']:>5} {t['fix_sensitive']:>8}\n")
    if figures["fixed_tree_verdicts"]:
        w(f"\nfixed-tree findings (error/warning) {'tp':>4} {'fp':>4} {'adv':>4} {'unjudged':>8}\n")
        for code, row in figures["fixed_tree_verdicts"].items():
            w(f"{code:<36} {row['tp']:>4} {row['fp']:>4} {row['advisory']:>4} {row['unjudged']:>8}\n")
    if figures["info"]:
        w("info findings on fixed trees (not judged): "
          + ", ".join(f"{code} {n}" for code, n in figures["info"].items()) + "\n")
    if figures["fixed_tree_verdicts_per_family"]:
        w(f"\nfixed-tree findings by family {'tp':>4} {'fp':>4} {'adv':>4} {'unjudged':>8} {'info':>5}\n")
        rows = {**figures["fixed_tree_verdicts_per_family"], "total": figures["fixed_tree_verdicts_total"]}
        for family, row in rows.items():
            w(f"{family:<29} {row['tp']:>4} {row['fp']:>4} {row['advisory']:>4} {row['unjudged']:>8} "
              f"{row['info']:>5}\n")
    unjudged = [(r["id"], f) for r in results if r["status"] == "ok" for f in r["unjudged"]]
    near_unjudged = [(r, f) for r in results if r["status"] == "ok" for f in r.get("near_unjudged", [])]
    if near_unjudged:
        w("\n# Unjudged findings near an out-of-catalogue case's site: paste into "
          "bench/realbugs/batches/<batch>/described.toml, then fill describes and reason\n\n")
        for r, f in near_unjudged:
            w(paste_ready_near(r["id"], f) + "\n")
    if unjudged:
        w("\n# Unjudged fixed-tree findings: paste into bench/realbugs/judgements/<family>.toml, "
          "then fill verdict and reason\n\n")
        for cid, f in unjudged:
            w(paste_ready("case", cid, f) + "\n")
    failed = [r for r in results if r["status"] == "tool-failure"]
    if failed:
        w(f"\n{len(failed)} case(s) with a tool failure (tlint did not do its job; left out of the figures):\n")
        for r in failed:
            for failure in r["tool_failures"]:
                w(f"  {r['id']}: {describe_failure(failure)}\n")
    unavailable = [r for r in results if r["status"] not in ("ok", "tool-failure")]
    if unavailable:
        repos = sorted({r["repo"] for r in unavailable if r["status"] in ("missing-mirror", "missing-commit")})
        w(f"\n{len(unavailable)} case(s) not run")
        if repos:
            w("; fetch these repositories (then run again):\n" + "".join(f"  {repo}\n" for repo in repos))
        else:
            w("\n")
    if failed:
        w(f"\nNOT A RESULT: {len(failed)} tool failures\n")
    if unjudged:
        w(f"\nNOT A RESULT: {len(unjudged)} unjudged findings\n")
    if near_unjudged:
        w(f"\nNOT A RESULT: {len(near_unjudged)} unjudged findings near out-of-catalogue sites\n")
    return len(unjudged) + len(near_unjudged), len(failed)


def where(finding: dict) -> str:
    """`path:line`, or `path cell N line L` in a notebook."""
    if finding.get("cell") is not None:
        return f"{finding['path']} cell {finding['cell']} line {finding['line']}"
    return f"{finding['path']}:{finding['line']}"


def paste_ready_near(case_id: str, finding: dict) -> str:
    """A described.toml [[near]] table to paste, describes and reason left for the judge."""
    message = " ".join(finding["message"].split())
    cell = f"cell = {finding['cell']}\n" if finding.get("cell") is not None else ""
    return (
        f"[[near]]\n"
        f"case = {toml_string(case_id)}\n"
        f"path = {toml_string(finding['path'])}\n"
        f"{cell}"
        f"line = {finding['line']}\n"
        f"code = {toml_string(finding['code'])}\n"
        f"describes = \"\"  # true (it describes the bug) | false (incidental)\n"
        f"reason = \"\"\n"
        f"# {finding['severity']}: {message}\n"
    )


# --------------------------------------------------------------------------- batches: figures


def _split() -> dict:
    return {"cases": 0, "found": 0, "fix_sensitive": 0}


def first_sight_figures(batch: Batch) -> dict:
    """A batch's first-sight figures, from first_sight.toml only: found and fix-sensitive
    over the cases recorded, in and outside the catalogue (as recorded)."""
    by_id = {case.id: case for case in batch.cases}
    parts = {"in_catalogue": _split(), "outside": _split(), "all": _split()}
    commits, dates = set(), set()
    for cid, entry in batch.first_sight.items():
        inside = entry.get("in_catalogue", by_id[cid].in_catalogue if cid in by_id else True)
        for key in ("in_catalogue" if inside else "outside", "all"):
            parts[key]["cases"] += 1
            parts[key]["found"] += bool(entry.get("found"))
            parts[key]["fix_sensitive"] += bool(entry.get("fix_sensitive"))
        commits.add(entry.get("commit"))
        dates.add(str(entry.get("recorded")))
    return {**parts, "batch_cases": len(batch.cases), "unrecorded": len(batch.cases) - parts["all"]["cases"],
            "commits": sorted(c for c in commits if c), "recorded": sorted(dates)}


def found_now_figures(results: list[dict]) -> dict:
    """This run's found / fix-sensitive over the cases that ran, in and outside the catalogue."""
    parts = {"in_catalogue": _split(), "outside": _split(), "all": _split()}
    parts["not_run"] = 0
    for r in results:
        if r["status"] != "ok":
            parts["not_run"] += 1
            continue
        for key in ("in_catalogue" if r.get("in_catalogue", True) else "outside", "all"):
            parts[key]["cases"] += 1
            parts[key]["found"] += r["found"]
            parts[key]["fix_sensitive"] += r["fix_sensitive"]
    return parts


def batch_figures(results: list[dict] | None, batches: dict[str, Batch], selected: list[str]) -> dict:
    """Per selected batch: first sight (None for batch 0) and found now (None when not run);
    "all": the first-sight sums over the batches with first sights, and found now over the run."""
    out: dict = {}
    for bid in selected:
        first = first_sight_figures(batches[bid]) if bid in batches else None
        now = None if results is None else found_now_figures([r for r in results if r.get("batch", BATCH0) == bid])
        out[bid] = {"first_sight": first, "found_now": now}
    total: dict = {key: _split() for key in ("in_catalogue", "outside", "all")}
    for row in out.values():
        if row["first_sight"]:
            for key in total:
                for field_name in ("cases", "found", "fix_sensitive"):
                    total[key][field_name] += row["first_sight"][key][field_name]
    out["all"] = {"first_sight": total, "found_now": None if results is None else found_now_figures(results)}
    return out


def _ratio(part: dict, key: str = "found") -> str:
    if not part["cases"]:
        return "–"
    return f"{part[key]}/{part['cases']} ({100 * part[key] / part['cases']:.0f} %)"


def render_batches(figures: dict, out) -> None:
    w = out.write
    w(f"\n{'batch':<6} {'first sight: in catalogue':>26} {'outside':>15} {'fix-sens':>15} │ "
      f"{'found now: in catalogue':>24} {'outside':>15} {'fix-sens':>15}\n")
    for bid, row in figures.items():
        first, now = row["first_sight"], row["found_now"]
        left = (f"{_ratio(first['in_catalogue']):>26} {_ratio(first['outside']):>15} "
                f"{_ratio(first['all'], 'fix_sensitive'):>15}") if first else f"{'(no first sight)':>26} {'':>31}"
        right = (f"{_ratio(now['in_catalogue']):>24} {_ratio(now['outside']):>15} "
                 f"{_ratio(now['all'], 'fix_sensitive'):>15}") if now else f"{'(not run)':>24}"
        w(f"{bid:<6} {left} │ {right}\n")
        if first and first.get("unrecorded"):
            w(f"       {first['unrecorded']} of the batch's {first['batch_cases']} cases have no first sight yet\n")


def headline(figures: dict, commit: str | None) -> str:
    """The README's markdown: first-sight recall per batch and overall, found now beneath."""
    lines = ["| first sight | cases | in the catalogue | outside it | fix-sensitive | recorded (tlint commit) |",
             "|---|---:|---:|---:|---:|---|"]
    for bid, row in figures.items():
        first = row["first_sight"]
        if bid == "all" or first is None:
            continue
        when = ", ".join(first["recorded"]) + " (" + ", ".join(c[:10] for c in first["commits"]) + ")" \
            if first["commits"] else "not recorded"
        pending = f" ({first['unrecorded']} not recorded)" if first["unrecorded"] else ""
        lines.append(f"| {bid} | {first['all']['cases']}{pending} | {_ratio(first['in_catalogue'])} | "
                     f"{_ratio(first['outside'])} | {_ratio(first['all'], 'fix_sensitive')} | {when} |")
    total = figures["all"]["first_sight"]
    lines.append(f"| **all batches** | {total['all']['cases']} | {_ratio(total['in_catalogue'])} | "
                 f"{_ratio(total['outside'])} | {_ratio(total['all'], 'fix_sensitive')} | |")
    lines.append("")
    if figures["all"]["found_now"] is None:
        lines.append("Found now: not run (give --mirrors).")
        return "\n".join(lines) + "\n"
    lines += [f"| found now (tlint {commit[:10] if commit else 'unknown'}) | cases run | in the catalogue | "
              "outside it | fix-sensitive |", "|---|---:|---:|---:|---:|"]
    for bid, row in figures.items():
        now = row["found_now"]
        if now is None:
            continue
        name = "**all**" if bid == "all" else bid
        lines.append(f"| {name} | {now['all']['cases']} | {_ratio(now['in_catalogue'])} | "
                     f"{_ratio(now['outside'])} | {_ratio(now['all'], 'fix_sensitive')} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- first sight: git checks


class HistoryMissing(Exception):
    """A shallow clone lacks the history a first-sight check needs."""


def gitc(top: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    return subprocess.run(["git", "-C", str(top), "-c", "core.quotepath=false", *args], env=env,
                          capture_output=True, text=True, check=check)


def git_toplevel(path: Path) -> Path | None:
    proc = gitc(path, "rev-parse", "--show-toplevel")
    return Path(proc.stdout.strip()) if proc.returncode == 0 else None


def shallow_commits(top: Path) -> set[str]:
    proc = gitc(top, "rev-parse", "--git-path", "shallow")
    if proc.returncode != 0:
        return set()
    path = Path(proc.stdout.strip())
    path = path if path.is_absolute() else top / path
    return set(path.read_text().split()) if path.is_file() else set()


def is_ancestor(top: Path, older: str, newer: str) -> bool:
    return gitc(top, "merge-base", "--is-ancestor", older, newer).returncode == 0


def tool_changes(top: Path, older: str, newer: str) -> list[str]:
    """The files under tlint/ and rules/ that differ between two commits."""
    proc = gitc(top, "diff", "--name-only", older, newer, "--", "tlint", "rules", check=True)
    return proc.stdout.split()


class History:
    """Reads of one repository's history, cached (the first-sight checks)."""

    def __init__(self, top: Path):
        self.top = top
        self.shallow = shallow_commits(top)
        self._ids: dict[tuple[str, str], set[str]] = {}

    def show(self, commit: str, path: str) -> str | None:
        proc = gitc(self.top, "show", f"{commit}:{path}")
        return proc.stdout if proc.returncode == 0 else None

    def case_ids(self, commit: str, folder: str) -> set[str]:
        """The case ids of the cases-*.toml files of `folder` at `commit`."""
        key = (commit, folder)
        if key not in self._ids:
            ids: set[str] = set()
            listing = gitc(self.top, "ls-tree", "--name-only", f"{commit}:{folder}").stdout.split()
            for name in listing:
                if re.fullmatch(r"cases-.+\.toml", name):
                    try:
                        data = tomllib.loads(self.show(commit, f"{folder}/{name}") or "")
                    except tomllib.TOMLDecodeError:
                        continue
                    ids |= {c.get("id") for c in data.get("case", []) if isinstance(c, dict)}
            self._ids[key] = ids
        return self._ids[key]

    def adding_commit(self, folder: str, case_id: str, upto: str = "HEAD") -> str | None:
        """The first commit (oldest first) in `upto`'s history whose cases file in `folder`
        holds `case_id`."""
        commits = gitc(self.top, "log", "--topo-order", "--reverse", "--format=%H", upto, "--",
                       f":(glob){folder}/cases-*.toml").stdout.split()
        for commit in commits:
            if case_id in self.case_ids(commit, folder):
                if commit in self.shallow:
                    raise HistoryMissing(f"{case_id}: its first commit here is a shallow clone's boundary")
                return commit
        return None

    def entries(self, commit: str | None, path: str) -> dict[str, dict] | None:
        """{case: entry} of a first_sight.toml at `commit` (None: the working tree); None
        when it cannot be read as TOML, {} when absent."""
        if commit is None:
            file = self.top / path
            text = file.read_text(encoding="utf-8") if file.is_file() else ""
        else:
            text = self.show(commit, path) or ""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        out: dict[str, dict] = {}
        for entry in data.get("first_sight", []):
            if isinstance(entry, dict):
                out.setdefault(str(entry.get("case")), entry)
        return out


def check_entry(history: History, folder: str, entry: dict, head: str = "HEAD") -> list[str]:
    """One first-sight entry against git history: its commit exists and is HEAD or an
    ancestor of it; the case's adding commit is its commit or an ancestor; nothing under
    tlint/ or rules/ changed between them."""
    top, cid, commit = history.top, entry.get("case"), entry.get("commit")
    where = f"{folder}/first_sight.toml: {cid}"
    if not isinstance(commit, str) or gitc(top, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        if history.shallow:
            raise HistoryMissing(f"{where}: commit {commit} is not in this shallow clone")
        return [f"{where}: commit {commit} does not exist"]
    if not is_ancestor(top, commit, head):
        return [f"{where}: commit {commit[:12]} is not HEAD nor an ancestor of it"]
    adding = history.adding_commit(folder, cid, head)
    if adding is None:
        return [f"{where}: no commit's cases file in {folder} holds case {cid}"]
    if not is_ancestor(top, adding, commit):
        return [f"{where}: the commit that added the case, {adding[:12]}, is not {commit[:12]} nor an ancestor "
                "of it (first sight before the case was committed)"]
    changed = tool_changes(top, adding, commit)
    if changed:
        return [f"{where}: tlint/ or rules/ changed between the commit that added the case ({adding[:12]}) "
                f"and the first sight ({commit[:12]}): {', '.join(changed[:5])}"]
    return []


def check_first_sight_history(top: Path = ROOT, batches_rel: str = "bench/realbugs/batches") -> list[str]:
    """Every first sight of every batch against git history (check_entry), and no entry
    present in a parent version of a first_sight.toml changed or removed in a later one
    (every commit that touched one, merges against each parent; then the working tree
    against HEAD). Returns the problems; raises HistoryMissing when a shallow clone lacks
    history the checks need."""
    history = History(top)
    glob = f":(glob){batches_rel}/*/first_sight.toml"
    paths = set(gitc(top, "log", "--format=", "--name-only", "--full-history", "HEAD", "--", glob).stdout.split())
    paths |= {str(p.relative_to(top)) for p in (top / batches_rel).glob("*/first_sight.toml")}
    problems: list[str] = []
    for path in sorted(paths):
        folder = path.rsplit("/", 1)[0]
        seen: set[tuple] = set()
        for version in ("HEAD", None):
            entries = history.entries(version, path)
            if entries is None:
                problems.append(f"{path} ({version or 'working tree'}): cannot be read as TOML")
                continue
            for cid, entry in entries.items():
                key = (cid, entry.get("commit"))
                if key not in seen:
                    seen.add(key)
                    problems.extend(check_entry(history, folder, entry))
        log = gitc(top, "log", "--topo-order", "--reverse", "--full-history", "--format=%H %P", "HEAD", "--",
                   path).stdout.splitlines()
        steps = [(line.split()[0], line.split()[1:]) for line in log]
        steps.append((None, ["HEAD"]))  # the working tree against HEAD
        for commit, parents in steps:
            if commit in history.shallow and history.entries(commit, path):
                raise HistoryMissing(f"{path}: its history goes back past this shallow clone's boundary")
            new = history.entries(commit, path)
            if new is None:
                continue
            for parent in parents:
                old = history.entries(parent, path) or {}
                for cid, entry in old.items():
                    label = commit[:12] if commit else "the working tree"
                    if cid not in new:
                        problems.append(f"{path}: {label} removes the first sight of {cid} (recorded in "
                                        f"{parent[:12]})")
                    elif new[cid] != entry:
                        problems.append(f"{path}: {label} changes the first sight of {cid}: {entry} -> {new[cid]}")
    return problems


# --------------------------------------------------------------------------- first sight: recording


def record_refusals(top: Path, batch: Batch, cases: list[Case], named: list[str],
                    set_aside: list[tuple[str, str]] | None = None) -> list[str]:
    """Why --record-first-sight may not run now (empty: it may). A case that can no longer
    get a first sight (tlint/ or rules/ changed since the commit that added it) is a reason
    to refuse when it is named (`named`); otherwise, when `set_aside` is given, it goes there
    as (case id, why) and the others are recorded."""
    problems = []
    dirty = gitc(top, "status", "--porcelain", "--", "tlint", "rules").stdout.strip()
    if dirty:
        problems.append("tlint/ or rules/ has uncommitted changes:\n    " + dirty.replace("\n", "\n    "))
    folder = batch.folder.resolve().relative_to(top.resolve()).as_posix()
    for path in sorted(batch.folder.glob("cases-*.toml")) + sorted(batch.folder.glob("log-*.toml")) \
            + sorted(batch.folder.glob("SEARCH*.md")):
        rel = f"{folder}/{path.name}"
        tracked = gitc(top, "ls-files", "--error-unmatch", "--", rel).returncode == 0
        if not tracked or gitc(top, "diff", "--quiet", "HEAD", "--", rel).returncode != 0:
            problems.append(f"{rel} is not committed as it is (commit it first: first sight scores committed cases)")
    for cid in named:
        if cid in batch.first_sight:
            problems.append(f"case {cid} has a first sight already (recorded {batch.first_sight[cid].get('recorded')}"
                            f" at {str(batch.first_sight[cid].get('commit'))[:12]}); it is never rewritten")
    if problems:
        return problems
    history = History(top)
    for case in cases:
        try:
            adding = history.adding_commit(folder, case.id)
        except HistoryMissing as error:
            problems.append(str(error))
            continue
        if adding is None:
            problems.append(f"case {case.id}: no commit holds it in {folder}/cases-*.toml")
        elif tool_changes(top, adding, "HEAD"):
            why = (f"tlint/ or rules/ changed since the commit that added it ({adding[:12]}): its first sight can "
                   "no longer be recorded")
            if set_aside is None or case.id in named:
                problems.append(f"case {case.id}: {why}")
            else:
                set_aside.append((case.id, why))
    return problems


def first_sight_entry(result: dict, commit: str, today: str) -> str:
    lines = ["[[first_sight]]", f"case = {toml_string(result['id'])}", f"commit = {toml_string(commit)}",
             f"found = {'true' if result['found'] else 'false'}",
             f"fix_sensitive = {'true' if result['fix_sensitive'] else 'false'}",
             f"recorded = {toml_string(today)}",
             f"in_catalogue = {'true' if result['in_catalogue'] else 'false'}"]
    if result.get("evidence"):
        lines.append(f"evidence = {toml_string(result['evidence'])}")
    if result["in_catalogue"]:
        lines.append(f"rule = {toml_string(result['rule'])}")
    else:
        lines.append("near = [")
        for f in result.get("near", []):
            cell = f"cell = {f['cell']}, " if f.get("cell") is not None else ""
            lines.append(f"  {{ path = {toml_string(f['path'])}, {cell}line = {f['line']}, "
                         f"code = {toml_string(f['code'])}, describes = {'true' if f['describes'] else 'false'} }},")
        lines.append("]")
    return "\n".join(lines) + "\n"


def record_first_sight(batch: Batch, results: list[dict], commit: str, today: str | None = None) -> int:
    """Append one [[first_sight]] per result to the batch's first_sight.toml (the file is
    only ever appended to). Returns the number appended."""
    today = today or datetime.date.today().isoformat()
    file = batch.folder / "first_sight.toml"
    text = "".join("\n" + first_sight_entry(r, commit, today) for r in results)
    if not file.exists():
        text = ("# First sight (issue 40): written by `bench/realbugs.py --record-first-sight`, one entry per case,\n"
                "# never rewritten. Format: bench/realbugs/README.md.\n") + text
    with file.open("a", encoding="utf-8") as fh:
        fh.write(text)
    return len(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only these cases")
    parser.add_argument("--family", choices=sorted(FAMILIES), help="run only this family")
    parser.add_argument("--batch", action="append", default=[], metavar="ID",
                        help="run only this batch (b0: cases/*.toml; b1, b2, ...: batches/<id>/)")
    parser.add_argument("--record-first-sight", action="store_true",
                        help="with --batch: score the batch's cases that have no first sight and append them to "
                             "its first_sight.toml (refused unless everything it scores is committed)")
    parser.add_argument("--headline", action="store_true",
                        help="print the README's markdown table: first-sight recall per batch, found now beneath "
                             "(found now only with --mirrors)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (each tlint run uses one core)")
    parser.add_argument("--tlint", metavar="PATH_OR_COMMAND",
                        help="a tlint checkout (folder) or command line to run instead of this checkout's")
    parser.add_argument("--fetch-list", action="store_true", help="print the repositories the cases need, and exit")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the materialised trees under DIR")
    parser.add_argument("--run-timeout", type=float, default=RUN_TIMEOUT, metavar="S",
                        help=f"a runnable case: seconds per tree for its prepare and trace (default {RUN_TIMEOUT:.0f})")
    parser.add_argument("--venv-cache", type=Path, metavar="DIR",
                        help="a runnable case: where its venvs are kept (default $XDG_CACHE_HOME or "
                             "~/.cache, then tlint-bench/venvs)")
    parser.add_argument("--cases-dir", type=Path, default=CASES_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--judgements-dir", type=Path, default=JUDGEMENTS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--batches-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    batches_dir = args.batches_dir or args.cases_dir.parent / "batches"
    try:
        manifest, batches = load_all(args.cases_dir, args.judgements_dir, batches_dir)
    except ManifestError as error:
        print(f"invalid manifest ({len(error.problems)} problem(s)):", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    known = [BATCH0, *batches]
    unknown_batches = [b for b in args.batch if b not in known]
    if unknown_batches:
        print(f"unknown batch(es): {', '.join(unknown_batches)} (there are: {', '.join(known)})", file=sys.stderr)
        return 2
    selected = [b for b in known if b in args.batch] if args.batch else known
    all_cases = list(manifest.cases) + [case for batch in batches.values() for case in batch.cases]
    cases = [c for c in all_cases if c.batch in selected]
    if args.fetch_list:
        for repo in sorted({case.repo for case in cases}):
            print(repo)
        return 0
    unknown = [cid for cid in args.case if cid not in {c.id for c in cases}]
    if unknown:
        print(f"unknown case id(s){' in ' + ', '.join(selected) if args.batch else ''}: {', '.join(unknown)}",
              file=sys.stderr)
        return 2
    if args.case:
        cases = [c for c in cases if c.id in args.case]
    if args.family:
        cases = [c for c in cases if c.family == args.family]
    if args.headline and args.mirrors is None and not args.record_first_sight:
        sys.stdout.write(headline(batch_figures(None, batches, selected), None))
        return 0
    if args.mirrors is None:
        parser.error("--mirrors DIR is required (or --fetch-list, or --headline alone)")
    record_batch, head = None, None
    if args.record_first_sight:
        if len(selected) != 1 or not args.batch or selected[0] == BATCH0:
            print("--record-first-sight needs --batch ID, one batch other than b0 (batch 0 has no first sight)",
                  file=sys.stderr)
            return 2
        if args.tlint:
            print("--record-first-sight runs this checkout's tlint: --tlint is refused", file=sys.stderr)
            return 2
        record_batch = batches[selected[0]]
        top = git_toplevel(record_batch.folder)
        if top is None:
            print(f"--record-first-sight: {record_batch.folder} is not in a git repository", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.id not in record_batch.first_sight or c.id in args.case]
        set_aside: list[tuple[str, str]] = []
        refusals = record_refusals(top, record_batch, cases, args.case, set_aside)
        if refusals:
            print(f"refusing --record-first-sight ({len(refusals)} reason(s)):", file=sys.stderr)
            for problem in refusals:
                print(f"  {problem}", file=sys.stderr)
            return 2
        for cid, why in set_aside:
            print(f"no first sight for {cid}: {why}")
        cases = [c for c in cases if c.id not in {cid for cid, _ in set_aside}]
        if not cases and set_aside:
            print(f"refusing --record-first-sight: no case of {record_batch.id} without a first sight can get one "
                  "(each was added before a change under tlint/ or rules/)", file=sys.stderr)
            return 2
        if not cases:
            print(f"every case of {record_batch.id} has a first sight: nothing to record")
            return 0
        head = gitc(top, "rev-parse", "HEAD", check=True).stdout.strip()
        args.tlint = str(top)
    command = tlint_command(args.tlint)
    commit = tlint_commit(args.tlint)  # before the run: what runs is what the checkout holds now
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)

    checkout = checkout_of(args.tlint)

    def one(case: Case) -> dict:
        described = batches[case.batch].described if case.batch in batches else None
        if case.run is not None:
            return run_runnable_case(case, args.mirrors, checkout, batches[case.batch].folder / PREPARE_DIR,
                                     args.keep, described, args.run_timeout, args.venv_cache)
        return run_case(case, args.mirrors, command, manifest.judgements, args.keep, described)

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(one, cases))
    figures = tally(results)
    per_batch = batch_figures(results, batches, [b for b in selected if any(c.batch == b for c in cases)])
    buffer = io.StringIO()
    unjudged, failed = render(results, figures, buffer)
    render_batches(per_batch, buffer)
    if args.headline:
        buffer.write("\n" + headline(per_batch, commit))
    sys.stdout.write(buffer.getvalue())
    result = unjudged == 0 and failed == 0 and all(r["status"] == "ok" for r in results)
    if args.json:
        payload = {
            "tool": "bench/realbugs.py",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tlint": " ".join(command[0]) + (f" (PYTHONPATH={command[1]['PYTHONPATH']})" if command[1] else ""),
            "tlint_commit": commit,
            "radius": RADIUS,
            "cases": results,
            "figures": figures,
            "batches": per_batch,
            "unjudged": unjudged,
            "tool_failures": failed,
            "result": result,
        }
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if record_batch is not None:
        return finish_recording(record_batch, results, top, head, result)
    return 1 if failed else 0


def finish_recording(batch: Batch, results: list[dict], top: Path, head: str, result: bool) -> int:
    """Append the first sights when the run is a result and nothing under tlint/ or rules/
    moved while it ran; otherwise refuse (exit 2)."""
    problems = []
    if not result:
        problems.append("the run is not a result (a case not run, a tool failure or an unjudged finding near an "
                        "out-of-catalogue site: judge them in described.toml, commit nothing under tlint/ or rules/, "
                        "and run again)")
    if gitc(top, "status", "--porcelain", "--", "tlint", "rules").stdout.strip():
        problems.append("tlint/ or rules/ changed while the cases ran")
    now = gitc(top, "rev-parse", "HEAD", check=True).stdout.strip()
    if now != head and tool_changes(top, head, now):
        problems.append(f"HEAD moved to {now[:12]} with changes under tlint/ or rules/ while the cases ran")
    if problems:
        print(f"refusing --record-first-sight ({len(problems)} reason(s)):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    n = record_first_sight(batch, results, head)
    print(f"\nrecorded the first sight of {n} case(s) of {batch.id} at {head} in "
          f"{_rel(batch.folder / 'first_sight.toml')} (commit it)")
    return 0


def checkout_commit(root: Path = ROOT) -> str | None:
    """The commit of a tlint checkout, with "+dirty" when its tlint/ has uncommitted changes."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "tlint"],
                               capture_output=True, text=True)
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def tlint_commit(spec: str | None) -> str | None:
    """The commit of the tlint that `--tlint spec` runs (None: this checkout; a command: unknown)."""
    if spec is None:
        return checkout_commit(ROOT)
    path = Path(spec)
    if path.is_dir() and (path / "tlint" / "__init__.py").is_file():
        return checkout_commit(path)
    return None


if __name__ == "__main__":
    sys.exit(main())
