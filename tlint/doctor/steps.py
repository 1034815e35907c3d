"""The steps of `tlint doctor`, each through its command's own functions (in this process,
or in the verifier's child processes for user code): `check` (the linter), `scan-data`,
`verify`, `trace` (the configured training command) and `diagnose`. A step that fails is
reported (status `error`, exit 2) and the other steps still run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlint.doctor.plan import Plan

# the stage of the procedure each step's findings belong to
STAGES = ("data", "model", "training", "ab", "logs")


@dataclass
class Step:
    name: str                       # check | scan-data | verify | trace | diagnose
    status: str = "ran"             # ran | skipped | error
    reason: str = ""                # why skipped, or the error
    exit_code: int | None = None    # the exit code the command itself would give
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.name, "status": self.status, "reason": self.reason, "exit_code": self.exit_code,
                "seconds": round(self.seconds, 2), "summary": self.summary}


@dataclass
class Results:
    """What the steps found, in the shapes their own reports use."""

    check: dict[str, Any] | None = None        # tlint check's JSON document
    scan: dict[str, Any] | None = None         # scan-data's report (checks with `extra`, findings)
    verify: dict[str, Any] | None = None       # {"model", "probes" (with `extra`), "findings"}
    diagnose: dict[str, Any] | None = None     # tlint diagnose's JSON document (its runs)
    trace: dict[str, Any] | None = None        # tlint trace's JSON document
    steps: list[Step] = field(default_factory=list)


def skipped(name: str, reason: str) -> Step:
    return Step(name, status="skipped", reason=reason)


def run_check(plan: Plan, no_cache: bool) -> tuple[Step, dict[str, Any] | None]:
    """`tlint check PATH` in this process (the linter's own worker pool)."""
    from tlint.config import ConfigError, ConfigResolver
    from tlint.engine import Linter
    from tlint.reporters import OutputReport, SourceLines
    from tlint.reporters.json import document
    from tlint.results import exit_code

    started = time.monotonic()
    step = Step("check")
    try:
        linter = Linter(ConfigResolver(forced=plan.forced_config), cache=not no_cache)
        result = linter.run([plan.path])
    except ConfigError as exc:
        return Step("check", "error", str(exc), 2, time.monotonic() - started), None
    shown = [d for d in result.diagnostics if not d.suppressed]
    doc = document(OutputReport(shown, result.files, result.parse_errors, SourceLines(None, result.unread)))
    for entry in doc["diagnostics"]:  # where the file is, for matching with verify's findings
        entry["abspath"] = str((Path.cwd() / entry["path"]).resolve())
    step.exit_code = exit_code(result)
    step.seconds = time.monotonic() - started
    if result.errors:
        step.status, step.reason = "error", "; ".join(result.errors)
    by_severity: dict[str, int] = {}
    for d in shown:
        by_severity[d.severity] = by_severity.get(d.severity, 0) + 1
    step.summary = {"files": len(result.files), "findings": len(shown), "by_severity": by_severity}
    return step, doc


def torch_missing(what: str) -> str | None:
    from importlib.util import find_spec

    try:
        if find_spec("torch") is not None:
            return None
    except (ImportError, ValueError):
        pass
    from tlint.cli import DISTRIBUTION

    return (f"{what} needs PyTorch, which is not installed: pip install torch "
            f"(or pip install '{DISTRIBUTION}[verify]')")


def run_scan(plan: Plan, verbose: bool) -> tuple[Step, dict[str, Any] | None]:
    """`tlint scan-data` on the configured loaders (their child process)."""
    from tlint.verify.data import DataError, exit_code, report_json, scan

    missing = torch_missing("scan-data (the data loaders' batches)")
    if missing:
        return Step("scan-data", "error", missing, 2), None
    started = time.monotonic()
    try:
        report = scan(plan.data, verbose=verbose)
    except DataError as exc:
        return Step("scan-data", "error", str(exc), 2, time.monotonic() - started), None
    summary = report_json(report)["summary"]
    step = Step("scan-data", exit_code=exit_code(report), seconds=time.monotonic() - started,
                summary={**summary, "loaders": report["scan"]})
    return step, report


def run_verify(plan: Plan, verbose: bool, bar: Any) -> tuple[Step, dict[str, Any] | None]:
    """`tlint verify` on the configured model: the default probes, the training probes and
    `data-ab` (when the verifier has it) in one child process, then the verdicts."""
    from tlint.verify import output
    from tlint.verify.command import VerifyError, match_findings, run_worker

    missing = torch_missing("verify (the model's probes)")
    if missing:
        return Step("verify", "error", missing, 2), None
    started = time.monotonic()
    try:
        result = run_worker(plan.verify, verbose=verbose, bar=bar)
        findings = match_findings(result, plan.verify)
    except VerifyError as exc:
        return Step("verify", "error", str(exc), 2, time.monotonic() - started), None
    probes = result["probes"]
    counts = output.summary(probes, findings)
    stages: dict[str, dict[str, int]] = {}
    for p in probes:
        bucket = stages.setdefault(probe_stage(p["probe"]), {"pass": 0, "fail": 0, "skip": 0})
        bucket[p["status"]] += 1
    step = Step("verify", exit_code=output.exit_code(probes, findings), seconds=time.monotonic() - started,
                summary={**counts, "by_stage": stages, "model": result["model"].get("class")})
    return step, {"model": result["model"], "probes": probes, "findings": findings}


def run_trace(plan: Plan, verbose: bool) -> tuple[Step, dict[str, Any] | None]:
    """`tlint trace` on the configured training command (its child process, in the config's
    folder), paired with `tlint check` on the files the run went through; paths shown from
    here, as `check`'s are."""
    from tlint.trace.command import failure, report_json, trace

    missing = torch_missing("trace (the training command)")
    if missing:
        return Step("trace", "error", missing, 2), None
    assert plan.trace is not None
    started = time.monotonic()
    run, status = trace(plan.trace.target, plan.trace.steps, plan.trace.cwd, verbose=verbose)
    doc = report_json(run, plan.trace.target, plan.trace.steps, Path.cwd(), status)
    step = Step("trace", exit_code=status, seconds=time.monotonic() - started)
    if status == 2:
        step.status, step.reason = "error", failure(run)
    errors = sum(f["severity"] == "error" for f in doc["findings"])
    step.summary = {"command": " ".join(plan.trace.words), "steps": doc["steps"], "stopped": doc["stopped"],
                    "findings": len(doc["findings"]), "by_severity": {"error": errors,
                                                                    "warning": len(doc["findings"]) - errors}}
    return step, doc


def probe_stage(name: str) -> str:
    from tlint.verify.options import PROBES

    if name == "data-ab":
        return "ab"
    return "model" if name in PROBES else "training"


def doctor_probes() -> list[str]:
    """The probes doctor runs: the default ones, then the training probes, `data-ab` (the
    clean-data A/B, the procedure's last stage) among them."""
    from tlint.verify.options import PROBES, TRAINING_PROBES

    return [*PROBES, *TRAINING_PROBES]


def run_diagnose(plan: Plan, plots: Path | None) -> tuple[Step, dict[str, Any] | None]:
    """`tlint diagnose` on each run folder (one at a time: doctor does not compare runs).
    A run named with --run that cannot be read is an error (exit 2); a folder doctor found
    that holds no usable log is a note."""
    from tlint.diagnose.command import report_json
    from tlint.diagnose.findings import diagnose
    from tlint.diagnose.readers import DiagnoseError, read_run

    started = time.monotonic()
    runs: list[Any] = []
    findings: list[Any] = []
    notes: list[str] = []
    errors: list[str] = []
    for path in plan.runs:
        try:
            run = read_run(path)
        except DiagnoseError as exc:
            (errors if plan.runs_given else notes).append(str(exc))
            continue
        runs.append(run)
        findings.append(diagnose(run))
    artifacts: list[str] = []
    if plots is not None and runs:
        try:
            from tlint.diagnose.plots import write_plots

            for run, found in zip(runs, findings):
                artifacts += write_plots([run], [found], None, plots / f"run{len(artifacts)}")
        except DiagnoseError as exc:
            notes.append(f"no run plots: {exc}")
    doc = report_json(runs, findings, None, artifacts) if runs else None
    step = Step("diagnose", seconds=time.monotonic() - started)
    if errors:
        step.status, step.reason, step.exit_code = "error", "; ".join(errors), 2
    elif doc is None:
        step.status, step.reason = "skipped", "; ".join(notes) or "no run to diagnose"
    else:
        step.exit_code = doc["exit_code"]
    if doc is not None:
        step.summary = {"runs": [r["path"] for r in doc["runs"]], **doc["summary"]}
    if notes:
        step.summary["notes"] = notes
    return step, doc
