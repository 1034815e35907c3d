"""The ecosystem check (issue 18): tlint on real transformer training code, pinned, with
every finding judged.

    python bench/ecosystem.py --mirrors /work/.mirror [--repo OWNER/NAME ...] [--jobs N]
                              [--json OUT] [--update] [--tlint PATH_OR_COMMAND]
    python bench/ecosystem.py --fetch-list         # owner/name of every pinned repository
    python bench/ecosystem.py --sample N --seed S ...   # fresh samples: bench/ecosystem_sample.py

`bench/ecosystem/repos.toml` pins each repository at a full commit SHA, with optional
`take` paths (files or folders) that bound the run. Each pinned tree is materialised from
its mirror (`MIRRORS/owner+name/repo`, or `MIRRORS/owner+name` being the git directory)
with `git archive` into a temporary folder, and linted with `tlint check --select ALL
--format json --no-cache` (this checkout's tlint unless `--tlint` names another checkout
or command, as in bench/realbugs.py).

The findings are compared with the committed snapshot, `bench/ecosystem/snapshot.json`:
findings added and removed per repository, keyed by (repo, path, code, line, message).
`--update` rewrites the snapshot with this run (repositories not run keep their entries).

Every error and warning finding carries a judgement in
`bench/realbugs/judgements/ecosystem.toml` (`repo`, `path`, `line`, `code`, `verdict`
tp | fp | advisory, `reason`), keyed by (repo, path, code, line). Info findings are counted,
not judged; tool findings (TL001/TL002/TL003) are listed apart. Unjudged findings are printed
as paste-ready TOML, and the summary then says "NOT A RESULT: N unjudged findings";
judgements that match no finding of a repository that ran are listed as stale.

A tool failure (as in bench/realbugs.py: tlint could not start, ran past its time limit,
exited other than 0/1 or printed no parsable JSON; or reported a TL003, or a TL001 on a file
that Python itself compiles) gives its repository the status "tool-failure": it is listed,
left out of the snapshot diff and the verdicts, the summary says "NOT A RESULT: N tool
failures", the JSON's `result` is false, and `--update` refuses to write the snapshot (a
crash is never recorded as the expected output). `tlint_commit` (the snapshot's and the
JSON's) is read when the run starts.

Exit status: 0; 1 when there is a tool failure, or with `--check` when the run differs from
the snapshot or a finding is unjudged; 2 when repos.toml or a judgements file is invalid.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import importlib.util
import io
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_realbugs():
    name = "tlint_bench_realbugs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "realbugs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rb = _load_realbugs()


def _load_sample():
    name = "tlint_bench_ecosystem_sample"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "ecosystem_sample.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]

ECOSYSTEM = HERE / "ecosystem"
REPOS_FILE = ECOSYSTEM / "repos.toml"
SNAPSHOT_FILE = ECOSYSTEM / "snapshot.json"
JUDGEMENTS_FILE = rb.JUDGEMENTS_DIR / "ecosystem.toml"
REPO_KEYS = {"repo", "sha", "style", "take"}


@dataclass(frozen=True)
class Pinned:
    repo: str
    sha: str
    style: str
    take: tuple[str, ...]


def validate_repo(raw: object, where: str) -> tuple[Pinned | None, list[str]]:
    problems: list[str] = []

    def bad(message: str) -> None:
        problems.append(f"{where}: {message}")

    if not isinstance(raw, dict):
        bad("a [[repo]] entry is not a table")
        return None, problems
    missing = sorted({"repo", "sha", "style"} - raw.keys())
    unknown = sorted(raw.keys() - REPO_KEYS)
    if missing:
        bad(f"missing key(s): {', '.join(missing)}")
    if unknown:
        bad(f"unknown key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(REPO_KEYS))})")
    repo = raw.get("repo")
    if "repo" in raw and (not isinstance(repo, str) or not rb.REPO_RE.match(repo)):
        bad(f"repo {repo!r} must be owner/name as GitHub spells it")
    sha = raw.get("sha")
    if "sha" in raw and (not isinstance(sha, str) or not rb.HEX40.match(sha)):
        bad(f"sha {sha!r} must be a full 40-hex lower-case commit SHA")
    style = raw.get("style")
    if "style" in raw and (not isinstance(style, str) or not style.strip()):
        bad("style must be a non-empty string (what kind of training code this is)")
    take = raw.get("take", ["."])
    if not (isinstance(take, list) and take and all(rb.valid_relpath(t) for t in take)
            and len(set(take)) == len(take)):
        bad(f"take {take!r} must be a non-empty list of distinct relative paths (no '..', no leading '/')")
    if problems:
        return None, problems
    return Pinned(repo, sha, style.strip(), tuple(take)), []


def load_repos(path: Path = REPOS_FILE) -> list[Pinned]:
    problems: list[str] = []
    data = rb._load_toml(path, problems)
    pinned: list[Pinned] = []
    if data is not None:
        unknown = sorted(set(data) - {"repo"})
        if unknown:
            problems.append(f"{rb._rel(path)}: unknown top-level key(s): {', '.join(unknown)} (only [[repo]])")
        seen: set[str] = set()
        for n, raw in enumerate(data.get("repo", []), 1):
            label = raw.get("repo") if isinstance(raw, dict) and isinstance(raw.get("repo"), str) else str(n)
            entry, errs = validate_repo(raw, f"{rb._rel(path)}: repo {label}")
            problems.extend(errs)
            if entry is None:
                continue
            if entry.repo in seen:
                problems.append(f"{rb._rel(path)}: repo {entry.repo} is pinned twice")
                continue
            seen.add(entry.repo)
            pinned.append(entry)
    if problems:
        raise rb.ManifestError(problems)
    return pinned


def load_judgements(pinned: list[Pinned], path: Path = JUDGEMENTS_FILE,
                    codes: set[str] | None = None) -> dict[tuple[str, str, str, int], rb.Judgement]:
    codes = rb.rule_codes() if codes is None else codes
    problems: list[str] = []
    judgements = rb.load_judgement_file(path, "repo", codes, problems) if path.exists() else []
    by_repo = {p.repo: p for p in pinned}
    for judgement in judgements:
        entry = by_repo.get(judgement.owner)
        if entry is None:
            problems.append(f"{judgement.file}: judgement names repo {judgement.owner}, which repos.toml does not pin")
        elif not rb.inside_take(judgement.path, entry.take):
            problems.append(f"{judgement.file}: {judgement.path} is not inside {judgement.owner}'s take")
    rb.check_duplicate_judgements(judgements, problems)
    if problems:
        raise rb.ManifestError(problems)
    return {j.key: j for j in judgements}


def load_snapshot(path: Path = SNAPSHOT_FILE) -> dict:
    if not path.exists():
        return {"repos": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def snapshot_key(finding: dict) -> tuple[str, str, int, str]:
    return (finding["path"], finding["code"], finding["line"], finding["message"])


def snapshot_finding(f: rb.Finding) -> dict:
    return {"path": f.path, "line": f.line, "code": f.code, "severity": f.severity, "message": f.message}


def run_repo(entry: Pinned, mirrors: Path | None, command) -> dict:
    result: dict = {"repo": entry.repo, "sha": entry.sha, "take": list(entry.take)}
    gitdir = rb.resolve_mirror(mirrors, entry.repo)
    if gitdir is None:
        return {**result, "status": "missing-mirror", "detail": f"no mirror of {entry.repo} under {mirrors}"}
    if not rb.has_commit(gitdir, entry.sha):
        return {**result, "status": "missing-commit", "detail": f"the mirror lacks {entry.sha} (fetch it again)"}
    work = Path(tempfile.mkdtemp(prefix="ecosystem-"))
    try:
        missing, absent = rb.materialise(gitdir, entry.sha, entry.take, work)
        if absent:
            result["absent_files"] = absent
        if missing:
            return {**result, "status": "missing-path", "detail": f"{entry.sha[:12]} has no {', '.join(missing)}"}
        start = time.perf_counter()
        paths = [p for p in entry.take if (work / p).exists()]
        try:
            findings = rb.run_tlint(command, work, paths, extra=["--select", "ALL"]) if paths else []
        except rb.TlintFailed as error:
            failure = {"kind": "tlint-failed", "detail": str(error)}
            return {**result, "status": "tool-failure", "detail": rb.describe_failure(failure),
                    "tool_failures": [failure]}
        seconds = time.perf_counter() - start
        failures = rb.tool_failures(findings, work)
        if failures:
            return {**result, "status": "tool-failure", "detail": rb.describe_failure(failures[0]),
                    "tool_failures": failures}
        files = sum(1 for p in work.rglob("*.py") if p.is_file())
        return {**result, "status": "ok", "seconds": round(seconds, 2), "files": files,
                "findings": [snapshot_finding(f) for f in findings]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def diff_snapshot(results: list[dict], snapshot: dict) -> dict[str, dict]:
    """Per repository that ran: findings added and removed against the snapshot."""
    out = {}
    for r in results:
        if r["status"] != "ok":
            continue
        old = snapshot.get("repos", {}).get(r["repo"])
        old_findings = old["findings"] if old else []
        before = {snapshot_key(f): f for f in old_findings}
        after = {snapshot_key(f): f for f in r["findings"]}
        out[r["repo"]] = {
            "new_repo": old is None,
            "pin_changed": bool(old) and (old.get("sha") != r["sha"] or old.get("take") != r["take"]),
            "added": [after[k] for k in sorted(after.keys() - before.keys())],
            "removed": [before[k] for k in sorted(before.keys() - after.keys())],
        }
    return out


def finding_objects(findings: list[dict]) -> list[rb.Finding]:
    return [rb.Finding(f["path"], f["line"], f["line"], 0, f["code"], f["severity"], f["message"]) for f in findings]


def verdict_table(per_repo: dict[str, dict]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for judged in per_repo.values():
        for f in judged["judged"]:
            table.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0, "info": 0})[f["verdict"]] += 1
        for f in judged["unjudged"]:
            table.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0, "info": 0})["unjudged"] += 1
        for f in judged["info"]:
            table.setdefault(f["code"], {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0, "info": 0})["info"] += 1
    return dict(sorted(table.items()))


def main(argv: list[str] | None = None) -> int:
    sample = _load_sample()
    if sample.wants_sample(sys.argv[1:] if argv is None else argv):
        return sample.main(argv)  # --sample/--report/--headline/--build-pool: bench/ecosystem_sample.py
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Fresh samples (first-sight precision): --sample N --seed S, "
                                            "--report, --headline, --build-pool; `--sample 1 --help` lists "
                                            "their options (bench/ecosystem_sample.py).")
    parser.add_argument("--mirrors", type=Path, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME", help="run only these")
    parser.add_argument("--jobs", type=int, default=1, help="repositories linted at once (one core each)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    parser.add_argument("--update", action="store_true", help="rewrite snapshot.json with this run")
    parser.add_argument("--check", action="store_true", help="exit 1 on a snapshot difference or an unjudged finding")
    parser.add_argument("--tlint", metavar="PATH_OR_COMMAND", help="a tlint checkout (folder) or command line")
    parser.add_argument("--fetch-list", action="store_true", help="print the pinned repositories, and exit")
    parser.add_argument("--quiet-diff", action="store_true", help="print only the counts of the snapshot diff")
    parser.add_argument("--repos-file", type=Path, default=REPOS_FILE, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot-file", type=Path, default=SNAPSHOT_FILE, help=argparse.SUPPRESS)
    parser.add_argument("--judgements-file", type=Path, default=JUDGEMENTS_FILE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        pinned = load_repos(args.repos_file)
        judgements = load_judgements(pinned, args.judgements_file)
    except rb.ManifestError as error:
        print(f"invalid ecosystem manifest ({len(error.problems)} problem(s)):", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    if args.fetch_list:
        for entry in pinned:
            print(entry.repo)
        return 0
    if args.mirrors is None:
        parser.error("--mirrors DIR is required (or --fetch-list)")
    unknown = [r for r in args.repo if r not in {p.repo for p in pinned}]
    if unknown:
        print(f"not pinned in repos.toml: {', '.join(unknown)}", file=sys.stderr)
        return 2
    selected = [p for p in pinned if not args.repo or p.repo in args.repo]
    command = rb.tlint_command(args.tlint)
    commit = rb.tlint_commit(args.tlint)  # before the run: what runs is what the checkout holds now
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda e: run_repo(e, args.mirrors, command), selected))
    wall = time.perf_counter() - started
    snapshot = load_snapshot(args.snapshot_file)
    diffs = diff_snapshot(results, snapshot)

    out = io.StringIO()
    w = out.write
    w(f"{'repository':<50} {'status':<14} {'files':>5} {'secs':>6} {'err':>4} {'warn':>4} {'info':>4} "
      f"{'+':>4} {'-':>4}\n")
    per_repo: dict[str, dict] = {}
    stale: list = []
    for r in results:
        if r["status"] == "tool-failure":
            w(f"{r['repo']:<50} {r['status']:<14} {len(r['tool_failures'])} tool failure(s)\n")
            continue
        if r["status"] != "ok":
            w(f"{r['repo']:<50} {r['status']:<14} {r.get('detail', '')}\n")
            continue
        sev = {s: sum(f["severity"] == s for f in r["findings"]) for s in ("error", "warning", "info")}
        d = diffs[r["repo"]]
        w(f"{r['repo']:<50} {'ok':<14} {r['files']:>5} {r['seconds']:>6.1f} {sev['error']:>4} {sev['warning']:>4} "
          f"{sev['info']:>4} {len(d['added']):>4} {len(d['removed']):>4}\n")
        objects = finding_objects(r["findings"])
        per_repo[r["repo"]] = rb.judge(r["repo"], objects, judgements)
        stale.extend(rb.stale_judgements(r["repo"], objects, judgements))
    lint_seconds = sum(r.get("seconds", 0) for r in results)
    w(f"tlint time, all repositories: {lint_seconds:.1f} s (wall {wall:.1f} s with --jobs {args.jobs})\n")

    changed = {repo: d for repo, d in diffs.items() if d["added"] or d["removed"] or d["new_repo"] or d["pin_changed"]}
    if changed:
        w("\n# Difference from bench/ecosystem/snapshot.json\n")
        for repo, d in changed.items():
            note = " (not in the snapshot)" if d["new_repo"] else " (pin or take changed)" if d["pin_changed"] else ""
            w(f"{repo}{note}: +{len(d['added'])} -{len(d['removed'])}\n")
            if not args.quiet_diff:
                for sign, rows in (("+", d["added"]), ("-", d["removed"])):
                    for f in rows:
                        w(f"  {sign} {f['path']}:{f['line']} {f['code']} {f['severity']}: {f['message'][:140]}\n")
    else:
        w("\nno difference from the snapshot for the repositories run\n")

    table = verdict_table(per_repo)
    if table:
        w(f"\n{'rule':<8} {'tp':>4} {'fp':>4} {'adv':>4} {'unjudged':>8} {'info':>5}\n")
        totals = {k: 0 for k in ("tp", "fp", "advisory", "unjudged", "info")}
        for code, row in table.items():
            w(f"{code:<8} {row['tp']:>4} {row['fp']:>4} {row['advisory']:>4} {row['unjudged']:>8} {row['info']:>5}\n")
            for k in totals:
                totals[k] += row[k]
        w(f"{'total':<8} {totals['tp']:>4} {totals['fp']:>4} {totals['advisory']:>4} {totals['unjudged']:>8} "
          f"{totals['info']:>5}\n")
    tool = [(repo, f) for repo, j in per_repo.items() for f in j["tool"]]
    for repo, f in tool:
        w(f"tool finding: {repo} {f['path']}:{f['line']} {f['code']} {f['message'][:120]}\n")
    for j in stale:
        w(f"stale judgement (no such finding now): {j.owner} {j.path}:{j.line} {j.code}\n")
    unjudged = [(repo, f) for repo, j in per_repo.items() for f in j["unjudged"]]
    if unjudged:
        w("\n# Unjudged findings: paste into bench/realbugs/judgements/ecosystem.toml, "
          "then fill verdict and reason\n\n")
        for repo, f in unjudged:
            w(rb.paste_ready("repo", repo, f) + "\n")
    failed = [r for r in results if r["status"] == "tool-failure"]
    if failed:
        w(f"\n{len(failed)} repositories with a tool failure (tlint did not do its job; left out of the "
          "diff and the verdicts):\n")
        for r in failed:
            for failure in r["tool_failures"]:
                w(f"  {r['repo']}: {rb.describe_failure(failure)}\n")
    unavailable = [r for r in results if r["status"] not in ("ok", "tool-failure")]
    if unavailable:
        w(f"\n{len(unavailable)} repositories not run; fetch these (then run again):\n")
        w("".join(f"  {r['repo']}\n" for r in unavailable))
    if failed:
        w(f"\nNOT A RESULT: {len(failed)} tool failures\n")
    if unjudged:
        w(f"\nNOT A RESULT: {len(unjudged)} unjudged findings\n")
    sys.stdout.write(out.getvalue())

    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if args.update and failed:
        print(f"\nrefusing --update: {len(failed)} tool failures; {rb._rel(args.snapshot_file)} is unchanged",
              file=sys.stderr)
    elif args.update:
        repos = dict(snapshot.get("repos", {}))
        for r in results:
            if r["status"] == "ok":
                repos[r["repo"]] = {"sha": r["sha"], "take": r["take"], "findings": r["findings"]}
        order = [p.repo for p in pinned]
        repos = {repo: repos[repo] for repo in order if repo in repos}
        new = {
            "comment": "tlint check --select ALL on the pinned trees of bench/ecosystem/repos.toml; "
                       "written by python bench/ecosystem.py --mirrors DIR --update",
            "tlint_commit": commit,
            "date": stamp,
            "repos": repos,
        }
        args.snapshot_file.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwrote {rb._rel(args.snapshot_file)} ({sum(len(v['findings']) for v in repos.values())} findings)")
    if args.json:
        payload = {"tool": "bench/ecosystem.py", "date": stamp, "tlint_commit": commit,
                   "results": results, "diff": diffs, "verdicts": table, "judged": per_repo,
                   "unjudged": len(unjudged), "tool_failures": len(failed),
                   "lint_seconds": round(lint_seconds, 2),
                   "result": not failed and not unjudged and all(r["status"] == "ok" for r in results)}
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if failed:
        return 1
    if args.check and (changed or unjudged):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
