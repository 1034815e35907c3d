"""The real-bug benchmark runner (issue 18): does tlint find documented bugs, and does the
finding go away with the authors' own fix?

    python bench/realbugs.py --mirrors /work/.mirror [--case ID ...] [--family data|model|training]
                             [--json OUT] [--jobs N] [--tlint PATH_OR_COMMAND]
    python bench/realbugs.py --fetch-list        # owner/name of every repository the cases need

The manifest is `bench/realbugs/cases/<family>.toml` (format: bench/realbugs/README.md) and
the judgements `bench/realbugs/judgements/<family>.toml`. Only coordinates are committed;
each case's trees are materialised from a local mirror with `git archive <sha> -- <the .py
and .gitignore files under take> | tar -x` into a temporary folder (the mirror is never
checked out or written; naming files keeps a blob that a fetched snapshot lacks, files of
4 MiB and more, from failing the whole archive: such files are listed as absent). A mirror of
`owner/name` is `MIRRORS/owner+name/repo` (what the `fetch` tool makes) or
`MIRRORS/owner+name` when that folder is itself the git directory.

tlint runs as a subprocess with its DEFAULT rules plus the case's own rule (`check --format
json --no-cache --exit-zero --jobs 1 --extend-select <rule>`: a rule that is off by
default, such as TL315, is measured too, and nothing else is added), from this checkout by
default (`python -m tlint` with this checkout first on PYTHONPATH); `--tlint DIR` runs
another checkout (e.g. a `git worktree` of an older commit) the same way, and `--tlint
"CMD ..."` any command line that takes tlint's `check` arguments after it. The
materialised tree gets an empty `.git` folder so that tlint's config search and project
root stop there.

Definitions (all lines are 1-based; a finding's line is the start line of its range):

- **found**: the buggy tree has a finding of the case's `rule` in a site's `path` whose
  line is within 3 lines of one of that site's `lines` (|finding - site| <= 3).
- **mapped site**: each site line L of the buggy tree is carried to the fixed tree through
  the hunks of `git diff -U0 -M <buggy> <fixed> -- <take>`. A line outside every hunk moves
  by the net line count of the hunks above it, to one line [L', L']. A line inside a hunk
  (`@@ -a,b +c,d @@`, a <= L < a+b: the fix changed or deleted it) maps to the whole
  new side of that hunk, [c, c+d-1]; when the hunk deleted lines only (d = 0) that is the
  single line [c, c] (the fixed-tree line after which they were removed, at least 1).
  A renamed file maps to its new path; a deleted file maps to nothing.
- **fix-sensitive**: found, and for every site line of the case, the fixed tree has no
  finding of `rule` in the mapped site's path whose line lies in [lo - 3, hi + 3] of the
  mapped range (a site whose file the fix deleted has none by definition).
- **fixed-tree findings**: every error and warning finding on the fixed tree (whatever its
  rule, the case's own included) is looked up in the judgements by (case, path, code,
  line) and counted as tp / fp / advisory, or unjudged. Unjudged findings are printed as
  paste-ready TOML and the summary says "NOT A RESULT". Info findings are counted only.
  Tool findings (TL001 parse errors, TL002 suppression findings, TL003 internal errors)
  are listed apart, not judged. The verdicts are tabled per rule and per family (the
  case's family: data, model, training), with the info findings counted beside them.
- **tool failure**: tlint did not do its job on one of the case's trees: the subprocess
  could not start, ran past its time limit, exited with a status other than 0 or 1, or
  printed output that does not parse as tlint's JSON; or it reported any TL003 (internal
  error); or a TL001 (parse error) on a file that Python itself compiles
  (`compile(source, path, "exec", flags=ast.PyCF_ONLY_AST)` on the materialised file).
  Such a case has status "tool-failure", each failure is listed, the case is left out of
  the figures, and the summary says "NOT A RESULT: N tool failures" (N cases).

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
import datetime
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "realbugs"
CASES_DIR = BENCH / "cases"
JUDGEMENTS_DIR = BENCH / "judgements"

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
JUDGEMENT_KEYS = {"path", "line", "code", "verdict", "reason"}


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
class Site:
    path: str
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Case:
    id: str
    repo: str
    buggy: str
    fixed: str
    rule: str
    take: tuple[str, ...]
    sites: tuple[Site, ...]
    source: str
    summary: str
    recorded: str
    family: str
    file: str


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


def validate_case(raw: object, where: str, family: str | None, codes: set[str]) -> tuple[Case | None, list[str]]:
    """One `[[case]]` table: the Case, or None and its problems. `family` is the file's
    (None for a scratch file whose name starts with `_`: the family follows the rule)."""
    problems: list[str] = []

    def bad(message: str) -> None:
        problems.append(f"{where}: {message}")

    if not isinstance(raw, dict):
        bad("a [[case]] entry is not a table")
        return None, problems
    missing = sorted(CASE_KEYS - raw.keys())
    unknown = sorted(raw.keys() - CASE_KEYS - CASE_OPTIONAL)
    if missing:
        bad(f"missing key(s): {', '.join(missing)}")
    if unknown:
        bad(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(CASE_KEYS | CASE_OPTIONAL))})")
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
                if not isinstance(site, dict) or set(site) != {"path", "lines"}:
                    bad(f"site {n} must have exactly the keys path and lines")
                    continue
                path, lines = site["path"], site["lines"]
                if not valid_relpath(path) or path == ".":
                    bad(f"site {n}: path {path!r} must be a relative file path")
                    continue
                if (not isinstance(lines, list) or not lines
                        or not all(type(x) is int and x >= 1 for x in lines)):
                    bad(f"site {n}: lines {lines!r} must be a non-empty list of line numbers (>= 1)")
                    continue
                if take_ok and not inside_take(path, tuple(take)):
                    bad(f"site {n}: {path} is not inside take {take}")
                parsed_sites.append(Site(path, tuple(lines)))
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
    if problems:
        return None, problems
    return Case(
        id=cid, repo=repo, buggy=raw["buggy"], fixed=raw["fixed"], rule=rule, take=tuple(take),
        sites=tuple(parsed_sites), source=source, summary=summary.strip(), recorded=recorded,
        family=family or rule_family, file=where.split(":")[0],
    ), []


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
        for n, raw in enumerate(entries, 1):
            label = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else f"{n}"
            case, errs = validate_case(raw, f"{_rel(path)}: case {label}", family, codes)
            problems.extend(errs)
            if case is None:
                continue
            if case.id in ids:
                problems.append(f"{_rel(path)}: case id {case.id!r} is not unique (also in {ids[case.id]})")
                continue
            ids[case.id] = _rel(path)
            cases.append(case)
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


LINTED_NAMES = (".gitignore",)  # besides *.py: what tlint's file discovery reads


def tree_files(gitdir: Path, sha: str, take: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """(path, blob) of the regular `.py` and `.gitignore` files under the take paths."""
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
                path.endswith(".py") or path.rsplit("/", 1)[-1] in LINTED_NAMES):
            files.append((path, blob))
    return files


def absent_blobs(gitdir: Path, blobs: list[str]) -> set[str]:
    """The blobs the mirror does not hold (a fetched snapshot lacks files of 4 MiB and more)."""
    if not blobs:
        return set()
    out = git(gitdir, "cat-file", "--batch-check", input="".join(b + "\n" for b in blobs).encode()).stdout
    return {line.split()[0] for line in out.decode().splitlines() if line.endswith(" missing")}


def materialise(gitdir: Path, sha: str, take: tuple[str, ...] | list[str], dest: Path) -> tuple[list[str], list[str]]:
    """Extract the `.py` (and `.gitignore`) files of the `take` paths of commit `sha` into
    `dest` with `git archive <sha> -- <files> | tar -x` (the mirror is only read; naming
    the files, rather than the folders, keeps a blob the mirror lacks from failing the
    whole archive). Returns (take paths the commit does not have, files whose blob the
    mirror lacks and that are therefore not linted). `dest` gets an empty `.git` folder
    so that tlint treats it as the project root."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".git").mkdir(exist_ok=True)
    missing = [p for p in take if not path_exists(gitdir, sha, p)]
    files = tree_files(gitdir, sha, [p for p in take if p not in missing]) if len(missing) < len(take) else []
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

    def as_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "end_line": self.end_line, "column": self.column,
                "code": self.code, "severity": self.severity, "message": self.message}


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
                              diag["severity"], diag["message"])
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
    try:
        compile(source, str(file), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
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


# --------------------------------------------------------------------------- evaluation


def near(findings: list[Finding], code: str, path: str, lo: int, hi: int, radius: int = RADIUS) -> list[Finding]:
    return [f for f in findings if f.code == code and f.path == path and lo - radius <= f.line <= hi + radius]


def evaluate(case: Case, buggy: list[Finding], fixed: list[Finding], diffs: dict[str, FileDiff],
             judgements: dict[tuple[str, str, str, int], Judgement],
             fixed_take: tuple[str, ...] | None = None) -> dict:
    """found, fix-sensitive and the judged fixed-tree findings of one case. `fixed_take`:
    the take paths the fixed commit has (a site mapped outside them cannot be checked,
    so the case is not counted fix-sensitive)."""
    fixed_take = case.take if fixed_take is None else fixed_take
    hits: list[Finding] = []
    for site in case.sites:
        for line in site.lines:
            hits.extend(f for f in near(buggy, case.rule, site.path, line, line) if f not in hits)
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
            remaining.extend(f for f in near(fixed, case.rule, new_path, lo, hi) if f not in remaining)
    fix_sensitive = found and not remaining and not unchecked
    judged = judge(case.id, fixed, judgements)
    return {
        "found": found,
        "fix_sensitive": fix_sensitive,
        "buggy_hits": [f.as_dict() for f in hits],
        "buggy_rule_findings": [f.as_dict() for f in buggy if f.code == case.rule],
        "mapped_sites": mapped,
        "fixed_remaining": [f.as_dict() for f in remaining],
        "unchecked_sites": sorted(set(unchecked)),
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


def run_case(case: Case, mirrors: Path | None, command, judgements: dict, keep: Path | None = None) -> dict:
    result: dict = {"id": case.id, "repo": case.repo, "rule": case.rule, "family": case.family,
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
            missing, absent = materialise(gitdir, getattr(case, side), case.take, tree)
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
                findings[side] = run_tlint(command, tree, paths, extra=["--extend-select", case.rule]) if paths else []
            except TlintFailed as error:
                failures.append({"side": side, "kind": "tlint-failed", "detail": str(error)})
                continue
            failures.extend({"side": side, **failure} for failure in tool_failures(findings[side], tree))
        if failures:
            return {**result, "status": "tool-failure", "detail": describe_failure(failures[0]),
                    "tool_failures": failures}
        diffs = diff_between(gitdir, case.buggy, case.fixed, case.take)
        outcome = evaluate(case, findings["buggy"], findings["fixed"], diffs, judgements,
                           tuple(trees["fixed"][1]))
        stale = stale_judgements(case.id, findings["fixed"], judgements)
        return {**result, "status": "ok", **outcome,
                "stale_judgements": [{"path": j.path, "line": j.line, "code": j.code} for j in stale]}
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [str(error)]
        return {**result, "status": "git-failed", "detail": detail[0]}
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- reporting


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
                 for family in FAMILIES if any(r["family"] == family for r in results)}
    total = empty()
    for r in results:
        for bucket in (per_rule.setdefault(r["rule"], empty()), per_family.setdefault(r["family"], empty()), total):
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
    w(f"{'case':<40} {'rule':<6} {'status':<15} {'found':<6} {'fix-sens':<8} fixed-tree (tp/fp/adv/unjudged)\n")
    for r in results:
        if r["status"] == "tool-failure":
            w(f"{r['id']:<40} {r['rule']:<6} {r['status']:<15} {'-':<6} {'-':<8} "
              f"{len(r['tool_failures'])} tool failure(s)\n")
            for failure in r["tool_failures"]:
                w(f"    tool failure: {describe_failure(failure)}\n")
            continue
        if r["status"] != "ok":
            w(f"{r['id']:<40} {r['rule']:<6} {r['status']:<15} {'-':<6} {'-':<8} {r.get('detail', '')}\n")
            continue
        counts = {v: sum(f["verdict"] == v for f in r["judged"]) for v in VERDICTS}
        w(f"{r['id']:<40} {r['rule']:<6} {'ok':<15} {'yes' if r['found'] else 'no':<6} "
          f"{'yes' if r['fix_sensitive'] else 'no':<8} {counts['tp']}/{counts['fp']}/{counts['advisory']}/"
          f"{len(r['unjudged'])}\n")
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
    return len(unjudged), len(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only these cases")
    parser.add_argument("--family", choices=sorted(FAMILIES), help="run only this family")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (each tlint run uses one core)")
    parser.add_argument("--tlint", metavar="PATH_OR_COMMAND",
                        help="a tlint checkout (folder) or command line to run instead of this checkout's")
    parser.add_argument("--fetch-list", action="store_true", help="print the repositories the cases need, and exit")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the materialised trees under DIR")
    parser.add_argument("--cases-dir", type=Path, default=CASES_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--judgements-dir", type=Path, default=JUDGEMENTS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        manifest = load_manifest(args.cases_dir, args.judgements_dir)
    except ManifestError as error:
        print(f"invalid manifest ({len(error.problems)} problem(s)):", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    if args.fetch_list:
        for repo in sorted({case.repo for case in manifest.cases}):
            print(repo)
        return 0
    if args.mirrors is None:
        parser.error("--mirrors DIR is required (or --fetch-list)")
    cases = manifest.cases
    unknown = [cid for cid in args.case if cid not in {c.id for c in cases}]
    if unknown:
        print(f"unknown case id(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.case:
        cases = [c for c in cases if c.id in args.case]
    if args.family:
        cases = [c for c in cases if c.family == args.family]
    command = tlint_command(args.tlint)
    commit = tlint_commit(args.tlint)  # before the run: what runs is what the checkout holds now
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: run_case(c, args.mirrors, command, manifest.judgements, args.keep), cases))
    figures = tally(results)
    buffer = io.StringIO()
    unjudged, failed = render(results, figures, buffer)
    sys.stdout.write(buffer.getvalue())
    if args.json:
        payload = {
            "tool": "bench/realbugs.py",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tlint": " ".join(command[0]) + (f" (PYTHONPATH={command[1]['PYTHONPATH']})" if command[1] else ""),
            "tlint_commit": commit,
            "radius": RADIUS,
            "cases": results,
            "figures": figures,
            "unjudged": unjudged,
            "tool_failures": failed,
            "result": unjudged == 0 and failed == 0 and all(r["status"] == "ok" for r in results),
        }
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if failed else 0


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
