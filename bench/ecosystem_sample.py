"""Fresh-sample precision (issue 40, items 3 and 7): tlint on repositories it has never met,
drawn at random from a pool, with every error and warning judged before any change.

    python bench/ecosystem.py --build-pool                         # pool.toml from pool-queries/
    python bench/ecosystem.py --sample N --seed S --draw [--show M] # print the ordered draw
    python bench/ecosystem.py --sample N --seed S --write-draw      # samples/sample-<k>.toml, state "drawn"
    python bench/ecosystem.py --sample N --seed S --mirrors DIR     # lint the draw, state "linted"
    python bench/ecosystem.py --report [--sample-id K]              # precision, once every finding is judged
    python bench/ecosystem.py --headline                            # the README's table (all samples)

(`bench/ecosystem.py` hands these options to this module; every other mode of it is unchanged.)

**The pool** is `bench/ecosystem/pool.toml`: `[[repo]] repo, sha, found_by`, built once by the
search in `bench/ecosystem/POOL.md` (the search answers are kept in `pool-queries/q*.txt`;
`--build-pool` applies the filter rules to them and writes the pool, sorted by owner/name).

**The draw.** The pool, in its file order, is shuffled with `random.Random(seed).shuffle`; the
repositories judged before are then removed, keeping the order: those in
`bench/ecosystem/repos.toml`, those named by any `bench/realbugs` case file (batch 0's
`cases/*.toml` and every `batches/*/cases-*.toml`) and those drawn by an earlier sample
(`samples/sample-<j>.toml`, j < k). What was removed is recorded in the sample as `excluded`.

**The sample.** `--write-draw` writes `samples/sample-<k>.toml` (k: the next free number) with
the seed, N, the pool's commit, the date and the first `--draw-size` repositories of the draw
(status "pending"); it is committed before tlint runs on any of them. The lint mode reads
that file (it refuses one whose draw differs from what the seed gives, and, unless told
otherwise, one that is not committed), and takes the repositories in order:

- **skipped** (status "skipped", with the reason): its mirror is missing (`MIRRORS/owner+name`)
  because the fetch tool could not bring it (`--unfetchable OWNER/NAME=ANSWER`; any other
  missing mirror stops the run and nothing is written: fetch in draw order first), its pinned
  sha is not in the mirror, or it has **no transformer training code** by this test:
  among its `.py` and `.ipynb` files, one that imports torch or a torch-based training library
  (torch, transformers, peft, trl, accelerate, lightning, pytorch_lightning, deepspeed) mentions
  "attention" or "transformer" (any case), and one that imports such a library trains
  (`.backward(`, `optimizer.step(`, `.fit(`, or a name ending in `Trainer`);
- **linted**: its pinned tree (every `.py`, `.ipynb` and `.gitignore` file, by `git archive
  <sha>`, into a temporary folder with an empty `.git`) is linted whole, as a new user runs
  `tlint check .`, twice: with the default rules and with `--select ALL` (`python -m tlint
  check --format json --no-cache --exit-zero --jobs 1`);
- **tool-failure**: tlint failed on it (as in bench/realbugs.py); listed, not counted as linted.

It stops after the repository with which at least N are linted AND the default run has
collected at least `--min-findings` (30) error/warning findings. Every error and warning
finding of both runs (tool findings TL001-TL003 apart) is written as `[[finding]] repo, path,
line, code, severity, message, run = "default" | "all", verdict = "", reason = ""`; info
findings are counted per repository. The judge fills `verdict` (tp | fp | advisory: advisory
only where the rule's document at the sample's tlint commit says the rule is advice) and
`reason`.

**The figures** (`--report`): per run, first-sight precision = tp / (tp + fp) with a 95 %
Wilson score interval, and the advisory share = advisory / (tp + fp + advisory). While any
finding is unjudged the report says "NOT A RESULT" and exits 1.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import io
import math
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ECOSYSTEM = HERE / "ecosystem"
POOL_FILE = ECOSYSTEM / "pool.toml"
QUERIES_DIR = ECOSYSTEM / "pool-queries"
SAMPLES_DIR = ECOSYSTEM / "samples"
REPOS_FILE = ECOSYSTEM / "repos.toml"
REALBUGS_DIR = HERE / "realbugs"

MIN_FINDINGS = 30
POOL_MIN = 300
HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9._-]+$")
QUERY_RE = re.compile(r"^q[0-9]+$")
VERDICTS = ("tp", "fp", "advisory")
RUNS = ("default", "all")
TOOL_CODES = ("TL001", "TL002", "TL003")
Z95 = 1.959963984540054

TORCH_IMPORT = re.compile(
    r"(?:^|[\s\"';])(?:import|from)\s+(?:torch|transformers|peft|trl|accelerate|lightning|pytorch_lightning"
    r"|deepspeed)\b", re.M)
TRANSFORMER_WORD = re.compile(r"attention|transformer", re.I)
TRAINS = re.compile(r"\.backward\(|optimizer\.step\(|\.fit\(|\w*Trainer\b")
TRANSFORMER_TEST = ("a .py/.ipynb file that imports torch or a torch-based training library mentions "
                    "'attention' or 'transformer' (any case), and such a file trains (.backward(, "
                    "optimizer.step(, .fit( or a *Trainer name)")


def _rb():
    """bench/realbugs.py, loaded once under the name bench/ecosystem.py gives it."""
    name = "tlint_bench_realbugs"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "realbugs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class SampleError(Exception):
    pass


class NotFetched(Exception):
    """A drawn repository has no mirror and was not declared unfetchable: fetch it first."""


# --------------------------------------------------------------------------- the pool


@dataclass(frozen=True)
class PoolEntry:
    repo: str
    sha: str
    found_by: str


def judged_batch0(repos_file: Path = REPOS_FILE, realbugs_dir: Path = REALBUGS_DIR) -> set[str]:
    """Repositories judged before the pool was built: bench/ecosystem/repos.toml and batch 0's
    bench/realbugs/cases/*.toml (lower-cased owner/name)."""
    names = set()
    if repos_file.exists():
        names |= {r["repo"].lower() for r in tomllib.loads(repos_file.read_text(encoding="utf-8")).get("repo", [])}
    for path in sorted((realbugs_dir / "cases").glob("*.toml")):
        names |= {c["repo"].lower() for c in tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])}
    return names


def judged_now(repos_file: Path = REPOS_FILE, realbugs_dir: Path = REALBUGS_DIR) -> set[str]:
    """Batch 0's judged repositories and those of every later realbugs batch's case files."""
    names = judged_batch0(repos_file, realbugs_dir)
    for path in sorted((realbugs_dir / "batches").glob("*/cases-*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise SampleError(f"{path}: {error}") from None
        names |= {c["repo"].lower() for c in data.get("case", []) if isinstance(c.get("repo"), str)}
    return names


def read_queries(queries_dir: Path = QUERIES_DIR) -> list[tuple[str, list[tuple[str, str]]]]:
    """The recorded search answers, in query order: (query id, [(repo, sha), ...])."""
    out = []
    files = sorted(queries_dir.glob("q*.txt"), key=lambda p: int(p.stem[1:]))
    for path in files:
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or not REPO_RE.match(parts[0]) or not HEX40.match(parts[1]):
                raise SampleError(f"{path.name}:{n}: not 'owner/name <40-hex sha>': {line!r}")
            rows.append((parts[0], parts[1]))
        out.append((path.stem, rows))
    return out


def build_pool(queries: list[tuple[str, list[tuple[str, str]]]], judged: set[str]) -> tuple[list[PoolEntry], dict]:
    """The filter rules of POOL.md, applied to the answers in query order, then row order:
    F1 a repository is listed once (its first row wins); F2 none judged before (`judged`);
    F3 one repository per owner (the first met). Sorted by owner/name, case-insensitively."""
    seen: set[str] = set()
    owners: set[str] = set()
    kept: list[PoolEntry] = []
    dropped = {"F1-duplicate": 0, "F2-judged": 0, "F3-same-owner": 0}
    for query, rows in queries:
        for repo, sha in rows:
            key = repo.lower()
            if key in seen:
                dropped["F1-duplicate"] += 1
                continue
            seen.add(key)
            if key in judged:
                dropped["F2-judged"] += 1
                continue
            owner = key.split("/")[0]
            if owner in owners:
                dropped["F3-same-owner"] += 1
                continue
            owners.add(owner)
            kept.append(PoolEntry(repo, sha, query))
    kept.sort(key=lambda e: (e.repo.lower(), e.repo))
    return kept, dropped


def write_pool(entries: list[PoolEntry], path: Path, dropped: dict) -> None:
    head = ("# The pool of fresh-sample precision (issue 40, item 3): repositories of transformer training\n"
            "# code, each pinned to the commit the search answered with. Built by the search in POOL.md\n"
            "# (`python bench/ecosystem.py --build-pool` from pool-queries/q*.txt); coordinates only.\n"
            f"# {len(entries)} repositories, sorted by owner/name; rows dropped by the filter rules: "
            + ", ".join(f"{k} {v}" for k, v in dropped.items()) + ".\n\n")
    body = "".join(f'[[repo]]\nrepo = "{e.repo}"\nsha = "{e.sha}"\nfound_by = "{e.found_by}"\n\n' for e in entries)
    path.write_text(head + body.rstrip("\n") + "\n", encoding="utf-8")


def load_pool(path: Path = POOL_FILE, judged: set[str] | None = None, minimum: int = 0) -> list[PoolEntry]:
    """pool.toml, validated: keys, owner/name, 40-hex shas, query ids, no repository twice,
    sorted order, none in `judged`, at least `minimum` entries. SampleError lists problems."""
    problems = []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SampleError(f"{path}: {error}") from None
    entries = []
    seen = set()
    for n, raw in enumerate(data.get("repo", []), 1):
        where = f"{path.name}: repo {n}"
        if not isinstance(raw, dict) or set(raw) != {"repo", "sha", "found_by"}:
            problems.append(f"{where}: keys must be exactly repo, sha, found_by")
            continue
        repo, sha, query = raw["repo"], raw["sha"], raw["found_by"]
        if not (isinstance(repo, str) and REPO_RE.match(repo)):
            problems.append(f"{where}: repo {repo!r} is not owner/name")
            continue
        if not (isinstance(sha, str) and HEX40.match(sha)):
            problems.append(f"{where}: {repo} sha {sha!r} is not 40 lower-case hex")
        if not (isinstance(query, str) and QUERY_RE.match(query)):
            problems.append(f"{where}: {repo} found_by {query!r} is not a query id (q1, q2, ...)")
        if repo.lower() in seen:
            problems.append(f"{where}: {repo} is listed twice")
        seen.add(repo.lower())
        if judged is not None and repo.lower() in judged:
            problems.append(f"{where}: {repo} was judged before (repos.toml or a realbugs case file)")
        entries.append(PoolEntry(repo, sha, query))
    if set(data) - {"repo"}:
        problems.append(f"{path.name}: unknown top-level keys {sorted(set(data) - {'repo'})}")
    if [e.repo for e in entries] != [e.repo for e in sorted(entries, key=lambda e: (e.repo.lower(), e.repo))]:
        problems.append(f"{path.name}: not sorted by owner/name")
    if len(entries) < minimum:
        problems.append(f"{path.name}: {len(entries)} repositories, fewer than {minimum}")
    if problems:
        raise SampleError("\n".join(problems))
    return entries


# --------------------------------------------------------------------------- the draw


def shuffled(pool: list[PoolEntry], seed: int) -> list[PoolEntry]:
    order = list(pool)
    random.Random(seed).shuffle(order)
    return order


def draw_order(pool: list[PoolEntry], seed: int, excluded: set[str]) -> list[PoolEntry]:
    """The pool shuffled by the seed, less the excluded repositories (order kept)."""
    return [e for e in shuffled(pool, seed) if e.repo.lower() not in excluded]


def sample_files(samples_dir: Path) -> dict[int, Path]:
    out = {}
    for path in samples_dir.glob("sample-*.toml"):
        m = re.fullmatch(r"sample-([0-9]+)\.toml", path.name)
        if m:
            out[int(m.group(1))] = path
    return out


def earlier_drawn(samples_dir: Path, before: int) -> set[str]:
    names = set()
    for k, path in sample_files(samples_dir).items():
        if k < before:
            names |= {d["repo"].lower() for d in tomllib.loads(path.read_text(encoding="utf-8")).get("draw", [])}
    return names


def exclusions(pool: list[PoolEntry], samples_dir: Path, sample_id: int, repos_file: Path,
               realbugs_dir: Path) -> list[str]:
    judged = judged_now(repos_file, realbugs_dir) | earlier_drawn(samples_dir, sample_id)
    return sorted((e.repo for e in pool if e.repo.lower() in judged), key=str.lower)


# --------------------------------------------------------------------------- the sample file


def _s(value: str) -> str:
    return _rb().toml_string(value)


def render_sample(sample: dict) -> str:
    out = io.StringIO()
    w = out.write
    w("# A fresh sample for first-sight precision (issue 40, items 3 and 7); written by\n"
      "# bench/ecosystem.py (bench/ecosystem_sample.py documents the fields). Coordinates only.\n"
      "# verdict: tp | fp | advisory (advisory only where the rule's document at tlint_commit says\n"
      "# it is advice), with a one-line reason; empty = unjudged.\n")
    for key in ("sample", "seed", "n", "min_findings"):
        w(f"{key} = {sample[key]}\n")
    for key in ("state", "date", "pool_commit", "tlint_commit", "transformer_test"):
        w(f"{key} = {_s(sample.get(key) or '')}\n")
    w(f"pool_size = {sample['pool_size']}\n")
    w("excluded = [" + ", ".join(_s(r) for r in sample["excluded"]) + "]\n")
    if sample.get("summary"):
        w("\n[summary]\n")
        for key, value in sample["summary"].items():
            w(f"{key} = {str(value).lower() if isinstance(value, bool) else value}\n")  # (TOML's booleans)
    for d in sample["draw"]:
        w("\n[[draw]]\n")
        w(f"order = {d['order']}\nrepo = {_s(d['repo'])}\nsha = {_s(d['sha'])}\nfound_by = {_s(d['found_by'])}\n")
        w(f"status = {_s(d['status'])}\n")
        if d.get("reason"):
            w(f"reason = {_s(d['reason'])}\n")
        for key in ("files", "seconds", "default_findings", "all_findings", "default_info", "all_info",
                    "tool_findings"):
            if key in d:
                w(f"{key} = {d[key]}\n")
    for f in sample.get("finding", []):
        w("\n[[finding]]\n")
        w(f"repo = {_s(f['repo'])}\npath = {_s(f['path'])}\nline = {f['line']}\ncode = {_s(f['code'])}\n"
          f"severity = {_s(f['severity'])}\nmessage = {_s(f['message'])}\nrun = {_s(f['run'])}\n"
          f"verdict = {_s(f.get('verdict', ''))}\nreason = {_s(f.get('reason', ''))}\n")
    return out.getvalue()


def load_sample(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SampleError(f"{path}: {error}") from None
    return load_sample_text(text, path.name)


def load_sample_text(text: str, name: str = "sample") -> dict:
    """A sample file's data, validated (keys, runs, verdicts and their reasons)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SampleError(f"{name}: {error}") from None
    problems = []
    for key in ("sample", "seed", "n", "min_findings", "state", "pool_size", "excluded", "draw"):
        if key not in data:
            problems.append(f"{name}: missing {key}")
    for n, f in enumerate(data.get("finding", []), 1):
        if f.get("run") not in RUNS:
            problems.append(f"{name}: finding {n}: run {f.get('run')!r} is not default or all")
        verdict = f.get("verdict", "")
        if verdict and verdict not in VERDICTS:
            problems.append(f"{name}: finding {n}: verdict {verdict!r} is not tp, fp or advisory")
        if verdict and not str(f.get("reason", "")).strip():
            problems.append(f"{name}: finding {n}: a verdict needs a one-line reason")
    if problems:
        raise SampleError("\n".join(problems))
    data.setdefault("finding", [])
    return data


def git_commit_of(path: Path) -> str:
    proc = subprocess.run(["git", "-C", str(path.parent), "log", "-1", "--format=%H", "--", path.name],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def is_committed(path: Path) -> bool:
    """Whether `path` is tracked by git and has no change from HEAD."""
    tracked = subprocess.run(["git", "-C", str(path.parent), "ls-files", "--error-unmatch", path.name],
                             capture_output=True, text=True)
    if tracked.returncode != 0:
        return False
    diff = subprocess.run(["git", "-C", str(path.parent), "diff", "--quiet", "HEAD", "--", path.name])
    return diff.returncode == 0


# --------------------------------------------------------------------------- one repository


LINTED_SUFFIXES = (".py", ".ipynb")


def materialise_whole(gitdir: Path, sha: str, dest: Path) -> list[str]:
    """Every `.py`, `.ipynb` and `.gitignore` file of `sha` into `dest` (with an empty `.git`),
    by `git archive`; returns the files whose blob the mirror lacks (not extracted)."""
    rb = _rb()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".git").mkdir(exist_ok=True)
    files = rb.tree_files(gitdir, sha, (".",), LINTED_SUFFIXES)  # the whole tree
    absent = rb.absent_blobs(gitdir, [blob for _, blob in files])
    wanted = [path for path, blob in files if blob not in absent]
    for start in range(0, len(wanted), 500):
        chunk = [f":(literal){path}" for path in wanted[start:start + 500]]
        archive = rb.git(gitdir, "archive", "--format=tar", sha, "--", *chunk).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            members = [m for m in tar.getmembers() if rb._safe_member(m)]
            try:
                tar.extractall(dest, members=members, filter="tar")
            except TypeError:
                tar.extractall(dest, members=members)
    return sorted(path for path, blob in files if blob in absent)


def has_transformer_training_code(tree: Path) -> bool:
    """The documented test (TRANSFORMER_TEST) on a materialised tree."""
    mentions = trains = False
    for file in sorted(tree.rglob("*")):
        if not file.is_file() or not file.name.endswith(LINTED_SUFFIXES) or ".git" in file.relative_to(tree).parts:
            continue
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not TORCH_IMPORT.search(text):
            continue
        mentions = mentions or bool(TRANSFORMER_WORD.search(text))
        trains = trains or bool(TRAINS.search(text))
        if mentions and trains:
            return True
    return False


def lint_repo(entry: dict, mirrors: Path, command,
              unfetchable: dict[str, str] | None = None) -> tuple[dict, list[dict]]:
    """One drawn repository: (its draw record with status, its error/warning findings). A
    missing mirror is a skip only when `unfetchable` names the repository (with the fetch
    tool's answer); otherwise NotFetched is raised, and nothing is recorded."""
    rb = _rb()
    record = {k: entry[k] for k in ("order", "repo", "sha", "found_by")}
    gitdir = rb.resolve_mirror(mirrors, entry["repo"])
    if gitdir is None:
        why = (unfetchable or {}).get(entry["repo"])
        if why is None:
            raise NotFetched(f"{entry['repo']} (draw order {entry['order']}) has no mirror under {mirrors}")
        return {**record, "status": "skipped", "reason": f"missing-mirror: {why}"}, []
    if not rb.has_commit(gitdir, entry["sha"]):
        return {**record, "status": "skipped", "reason": "missing-commit: the pinned sha is not in the mirror"}, []
    work = Path(tempfile.mkdtemp(prefix="ecosample-"))
    try:
        absent = materialise_whole(gitdir, entry["sha"], work)
        files = sum(1 for p in work.rglob("*") if p.is_file() and p.name.endswith(LINTED_SUFFIXES))
        if not has_transformer_training_code(work):
            return {**record, "status": "skipped", "files": files,
                    "reason": "no-transformer-training-code: " + TRANSFORMER_TEST}, []
        findings: list[dict] = []
        counts: dict = {"files": files}
        start = time.perf_counter()
        tool = 0
        for run, extra in (("default", []), ("all", ["--select", "ALL"])):
            try:
                raw = rb.run_tlint(command, work, ["."], extra=extra)
            except rb.TlintFailed as error:
                return {**record, "status": "tool-failure", "reason": f"{run}: {error}"}, []
            failures = rb.tool_failures(raw, work)
            if failures:
                return {**record, "status": "tool-failure",
                        "reason": f"{run}: {rb.describe_failure(failures[0])}"}, []
            kept = [f for f in raw if f.code not in TOOL_CODES and f.severity in ("error", "warning")]
            tool += sum(f.code in TOOL_CODES for f in raw)
            counts[f"{run}_findings"] = len(kept)
            counts[f"{run}_info"] = sum(f.code not in TOOL_CODES and f.severity == "info" for f in raw)
            kept.sort(key=lambda f: (f.path, f.line, f.code, f.message))
            findings += [{"repo": entry["repo"], "path": f.path, "line": f.line, "code": f.code,
                          "severity": f.severity, "message": f.message, "run": run, "verdict": "", "reason": ""}
                         for f in kept]
        counts["seconds"] = round(time.perf_counter() - start, 1)
        counts["tool_findings"] = tool
        reason = f"{len(absent)} file(s) over the snapshot's size limit not linted" if absent else ""
        return {**record, "status": "linted", **({"reason": reason} if reason else {}), **counts}, findings
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_sample(sample: dict, extension: list[PoolEntry], mirrors: Path, command, tlint_commit: str | None,
               log=print, unfetchable: dict[str, str] | None = None) -> dict:
    """Lint the draw in order until >= n linted and >= min_findings default error/warning
    findings; the draw is extended from `extension` (the rest of the seed's order) when needed."""
    pending = [dict(d) for d in sample["draw"]]
    known = {d["repo"] for d in pending}
    more = [e for e in extension if e.repo not in known]
    done: list[dict] = []
    findings: list[dict] = []
    linted = default_found = 0
    while linted < sample["n"] or default_found < sample["min_findings"]:
        if not pending:
            if not more:
                break
            e = more.pop(0)
            pending.append({"order": len(done) + 1, "repo": e.repo, "sha": e.sha, "found_by": e.found_by})
        entry = pending.pop(0)
        record, found = lint_repo(entry, mirrors, command, unfetchable)
        done.append(record)
        findings += found
        if record["status"] == "linted":
            linted += 1
            default_found += record["default_findings"]
        log(f"{record['order']:>3} {record['repo']:<55} {record['status']:<12} "
            f"{record.get('default_findings', ''):>4} {record.get('all_findings', ''):>4} "
            f"{record.get('reason', '')[:60]}")
    complete = linted >= sample["n"] and default_found >= sample["min_findings"]
    statuses = [d["status"] for d in done]
    summary = {
        "complete": "true" if complete else "false",
        "drawn": len(done), "linted": linted,
        "skipped": statuses.count("skipped"), "tool_failures": statuses.count("tool-failure"),
        "default_findings": sum(f["run"] == "default" for f in findings),
        "all_findings": sum(f["run"] == "all" for f in findings),
    }
    return {**sample, "state": "linted", "tlint_commit": tlint_commit or "",
            "date": datetime.date.today().isoformat(), "summary": summary, "draw": done, "finding": findings}


# --------------------------------------------------------------------------- the figures


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for a proportion successes / n (None when n is 0)."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def figures(sample: dict) -> dict:
    """Per run: counts, precision, its interval and the advisory share; 'unjudged' counts."""
    out = {}
    for run in RUNS:
        rows = [f for f in sample["finding"] if f["run"] == run]
        c = {v: sum(f.get("verdict") == v for f in rows) for v in VERDICTS}
        unjudged = sum(not f.get("verdict") for f in rows)
        judged = c["tp"] + c["fp"]
        out[run] = {**c, "unjudged": unjudged, "findings": len(rows),
                    "precision": c["tp"] / judged if judged else None,
                    "interval": wilson(c["tp"], judged),
                    "advisory_share": c["advisory"] / (judged + c["advisory"]) if judged + c["advisory"] else None,
                    "per_rule": _per_rule(rows)}
    return out


def _per_rule(rows: list[dict]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for f in rows:
        row = table.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0})
        row[f.get("verdict") or "unjudged"] += 1
    return dict(sorted(table.items()))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def report(sample: dict, out) -> int:
    w = out.write
    s = sample.get("summary", {})
    w(f"sample {sample['sample']}: seed {sample['seed']}, N {sample['n']}, "
      f"tlint {sample.get('tlint_commit', '')[:12]}, "
      f"{sample.get('date', '')}; drawn {s.get('drawn', '?')}, linted {s.get('linted', '?')}, "
      f"skipped {s.get('skipped', '?')}, tool failures {s.get('tool_failures', '?')}\n")
    if sample.get("state") != "linted":
        w("NOT A RESULT: the sample has not been linted\n")
        return 1
    figs = figures(sample)
    unjudged = sum(f["unjudged"] for f in figs.values())
    for run in RUNS:
        f = figs[run]
        w(f"\n{run}: {f['findings']} error/warning findings: tp {f['tp']}, fp {f['fp']}, advisory {f['advisory']}, "
          f"unjudged {f['unjudged']}\n")
        if not unjudged:
            lo_hi = f["interval"]
            ci = f"{_pct(lo_hi[0])}-{_pct(lo_hi[1])}" if lo_hi else "n/a"
            w(f"  first-sight precision tp/(tp+fp) = {_pct(f['precision'])} (95 % Wilson {ci}); "
              f"advisory share {_pct(f['advisory_share'])}\n")
        w(f"  {'rule':<8} {'tp':>4} {'fp':>4} {'adv':>4} {'unjudged':>8}\n")
        for code, row in f["per_rule"].items():
            w(f"  {code:<8} {row['tp']:>4} {row['fp']:>4} {row['advisory']:>4} {row['unjudged']:>8}\n")
    if unjudged:
        w(f"\nNOT A RESULT: {unjudged} unjudged findings\n")
        return 1
    return 0


def headline(samples: list[dict], out) -> int:
    """The README's markdown table: one row per judged sample and run."""
    w = out.write
    w("| sample | date | tlint commit | repositories linted | run | findings | tp | fp | advisory "
      "| first-sight precision (95 % CI) | advisory share |\n")
    w("|---|---|---|---|---|---|---|---|---|---|---|\n")
    rc = 0
    for sample in samples:
        figs = figures(sample) if sample.get("state") == "linted" else None
        if figs is None or any(f["unjudged"] for f in figs.values()):
            w(f"| {sample['sample']} | {sample.get('date', '')} | {sample.get('tlint_commit', '')[:12]} | "
              f"{sample.get('summary', {}).get('linted', '')} | | | | | | NOT A RESULT (unjudged) | |\n")
            rc = 1
            continue
        for run in RUNS:
            f = figs[run]
            ci = f["interval"]
            ci_text = f"{_pct(ci[0])}–{_pct(ci[1])}" if ci else "n/a"
            label = "default" if run == "default" else "`--select ALL`"
            w(f"| {sample['sample']} | {sample.get('date', '')} | `{sample.get('tlint_commit', '')[:12]}` | "
              f"{sample['summary']['linted']} | {label} | {f['findings']} | {f['tp']} | {f['fp']} | {f['advisory']} | "
              f"**{_pct(f['precision'])}** ({ci_text}) | {_pct(f['advisory_share'])} |\n")
    return rc


# --------------------------------------------------------------------------- command line


SAMPLE_FLAGS = ("--sample", "--seed", "--draw", "--write-draw", "--report", "--headline", "--build-pool",
                "--sample-id")


def wants_sample(argv: list[str]) -> bool:
    return any(a.split("=")[0] in SAMPLE_FLAGS for a in argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/ecosystem.py (samples)", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-pool", action="store_true", help="write pool.toml from pool-queries/q*.txt")
    parser.add_argument("--sample", type=int, metavar="N", help="repositories to lint (at least)")
    parser.add_argument("--seed", type=int, help="the draw's seed (random.Random(seed))")
    parser.add_argument("--min-findings", type=int, default=MIN_FINDINGS,
                        help="default-run error/warning findings to collect (at least)")
    parser.add_argument("--draw", action="store_true", help="print the ordered draw (owner/name sha), and exit")
    parser.add_argument("--show", type=int, default=60, help="how many of the draw --draw prints")
    parser.add_argument("--write-draw", action="store_true", help="write samples/sample-<k>.toml, state drawn")
    parser.add_argument("--draw-size", type=int, default=60, help="repositories --write-draw records")
    parser.add_argument("--mirrors", type=Path, help="lint the sample's draw from these mirrors")
    parser.add_argument("--sample-id", type=int, metavar="K", help="the sample number (default: by seed, or next)")
    parser.add_argument("--report", action="store_true", help="print the sample's figures")
    parser.add_argument("--headline", action="store_true", help="print the README's table of every sample")
    parser.add_argument("--tlint", metavar="PATH_OR_COMMAND", help="a tlint checkout (folder) or command line")
    parser.add_argument("--unfetchable", action="append", default=[], metavar="OWNER/NAME=WHY",
                        help="a drawn repository the fetch tool could not bring, and its answer (recorded as a "
                             "skip); any other missing mirror stops the run, writing nothing")
    parser.add_argument("--allow-uncommitted-draw", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pool-file", type=Path, default=POOL_FILE, help=argparse.SUPPRESS)
    parser.add_argument("--queries-dir", type=Path, default=QUERIES_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--samples-dir", type=Path, default=SAMPLES_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--repos-file", type=Path, default=REPOS_FILE, help=argparse.SUPPRESS)
    parser.add_argument("--realbugs-dir", type=Path, default=REALBUGS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        return _main(args, parser)
    except SampleError as error:
        print(f"invalid: {error}", file=sys.stderr)
        return 2


def _main(args, parser) -> int:
    if args.build_pool:
        entries, dropped = build_pool(read_queries(args.queries_dir), judged_batch0(args.repos_file, args.realbugs_dir))
        write_pool(entries, args.pool_file, dropped)
        print(f"wrote {args.pool_file} ({len(entries)} repositories; dropped {dropped})")
        return 0
    samples = sample_files(args.samples_dir)
    if args.headline:
        out = io.StringIO()
        rc = headline([load_sample(samples[k]) for k in sorted(samples)], out)
        sys.stdout.write(out.getvalue())
        return rc
    if args.report:
        k = args.sample_id if args.sample_id is not None else (max(samples) if samples else None)
        if k not in samples:
            parser.error("no such sample")
        out = io.StringIO()
        rc = report(load_sample(samples[k]), out)
        sys.stdout.write(out.getvalue())
        return rc
    if args.sample is None or args.seed is None:
        if args.sample_id is None:
            parser.error("--sample N --seed S (or --sample-id K) is required")
    pool = load_pool(args.pool_file)
    if args.draw or args.write_draw:
        k = args.sample_id if args.sample_id is not None else (max(samples) + 1 if samples else 1)
        excluded = exclusions(pool, args.samples_dir, k, args.repos_file, args.realbugs_dir)
        order = draw_order(pool, args.seed, {r.lower() for r in excluded})
        if args.draw:
            print(f"# sample {k}: seed {args.seed}; {len(order)} of the pool's {len(pool)} repositories may be drawn "
                  f"({len(excluded)} excluded); in draw order:")
            for i, e in enumerate(order[:args.show], 1):
                print(f"{i:>3} {e.repo} {e.sha}")
            return 0
        path = args.samples_dir / f"sample-{k}.toml"
        if path.exists():
            print(f"refusing: {path} exists", file=sys.stderr)
            return 2
        sample = {"sample": k, "seed": args.seed, "n": args.sample, "min_findings": args.min_findings,
                  "state": "drawn", "date": datetime.date.today().isoformat(),
                  "pool_commit": git_commit_of(args.pool_file), "tlint_commit": "",
                  "transformer_test": TRANSFORMER_TEST, "pool_size": len(pool), "excluded": excluded,
                  "draw": [{"order": i, "repo": e.repo, "sha": e.sha, "found_by": e.found_by, "status": "pending"}
                           for i, e in enumerate(order[:args.draw_size], 1)]}
        args.samples_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(render_sample(sample), encoding="utf-8")
        print(f"wrote {path}: the first {len(sample['draw'])} of the draw; commit it before linting")
        return 0
    if args.mirrors is None:
        parser.error("--draw, --write-draw or --mirrors DIR is required")
    if args.sample_id is not None:
        k = args.sample_id
    else:
        matching = [j for j, p in samples.items()
                    if (d := load_sample(p))["seed"] == args.seed and d["n"] == args.sample]
        if len(matching) != 1:
            print(f"no single sample file with seed {args.seed} and N {args.sample}: write it with --write-draw "
                  "and commit it first", file=sys.stderr)
            return 2
        k = matching[0]
    path = samples.get(k)
    if path is None:
        print(f"no sample {k}: write it with --write-draw and commit it first", file=sys.stderr)
        return 2
    sample = load_sample(path)
    if sample["state"] != "drawn":
        print(f"refusing: {path.name} is already {sample['state']} (a sample is linted once)", file=sys.stderr)
        return 2
    if not args.allow_uncommitted_draw and not is_committed(path):
        print(f"refusing: {path} is not committed (commit the draw before tlint runs on it)", file=sys.stderr)
        return 2
    order = draw_order(pool, sample["seed"], {r.lower() for r in sample["excluded"]})
    recorded = [(d["repo"], d["sha"]) for d in sample["draw"]]
    if recorded != [(e.repo, e.sha) for e in order[:len(recorded)]]:
        print(f"refusing: {path.name}'s draw is not what seed {sample['seed']} gives from the pool", file=sys.stderr)
        return 2
    rb = _rb()
    command = rb.tlint_command(args.tlint)
    commit = rb.tlint_commit(args.tlint)
    unfetchable = {}
    for item in args.unfetchable:
        repo, sep, why = item.partition("=")
        if not sep or not why.strip():
            parser.error(f"--unfetchable {item!r}: give OWNER/NAME=WHY")
        unfetchable[repo] = why.strip()
    print(f"{'#':>3} {'repository':<55} {'status':<12} {'dflt':>4} {'all':>4} reason")
    try:
        result = run_sample(sample, order[len(recorded):], args.mirrors, command, commit, unfetchable=unfetchable)
    except NotFetched as error:
        print(f"stopped, nothing written: {error}; fetch it (or name it with --unfetchable) and run again",
              file=sys.stderr)
        return 3
    path.write_text(render_sample(result), encoding="utf-8")
    s = result["summary"]
    print(f"\nwrote {path}: drawn {s['drawn']}, linted {s['linted']}, skipped {s['skipped']}, "
          f"tool failures {s['tool_failures']}; findings: default {s['default_findings']}, ALL {s['all_findings']} "
          "(unjudged)")
    if s["complete"] != "true":
        print("NOT COMPLETE: the draw ran out before both thresholds were met", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
