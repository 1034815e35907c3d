"""`tlint doctor [PATH]`: plan, say what user code will run, run the steps in the order of
the procedure (data, model, training dynamics, A/B; the logs), rank, report.

Exit codes: the largest of the steps' own (each as its command gives it: `check` 1 for a
finding at or above warning, `scan-data` 1 for a failing check, `verify` 1 for a failing
probe or a confirmed finding, `diagnose` 1 for an error finding; 2 when a step could not
run, e.g. the model cannot be loaded, and the other steps still run); 2 before any step for
a missing PATH, a bad config or setting, or an HTML file that cannot be written.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tlint.doctor.plan import DoctorError, make_plan
from tlint.doctor.progress import Display
from tlint.doctor.report import document, error_document, render_text, step_outcome
from tlint.doctor.steps import Results, doctor_probes, run_check, run_diagnose, run_scan, run_trace, run_verify, skipped


def run_command(args: Any) -> int:
    fmt = args.format
    try:
        plan = make_plan(args, doctor_probes())
        html = _html_target(args.html)
    except DoctorError as exc:
        return _fail(fmt, exc.kind, str(exc))
    user_code = plan.user_code()
    if user_code:  # said before it happens, on every format (stderr: JSON on stdout stays clean)
        sys.stderr.write("tlint doctor: runs your code, in child processes, with your permissions: "
                         + "; ".join(user_code) + " (--no-run skips it)\n")
        sys.stderr.flush()
    display = Display(enabled=fmt == "text" and sys.stderr.isatty())
    results = Results()
    with tempfile.TemporaryDirectory(prefix="tlint-doctor-") as tmp:
        images = Path(tmp)
        if html is not None and plan.verify is not None and not plan.verify.artifacts:
            plan.verify.artifacts = str(images / "maps")  # attention-map PNGs for the HTML file
        try:
            _run_steps(plan, args, results, display, images / "runs" if html is not None else None)
        finally:
            display.finish()
        if results.verify is not None and html is not None:
            for probe in results.verify["probes"]:  # the maps live on in the HTML file, not in the temporary folder
                probe["detail"] = probe["detail"].replace(f" in {images / 'maps'}", " (in the HTML report)")
        from tlint.doctor.ranking import rank

        items = rank(results)
        code = max((s.exit_code or 0 for s in results.steps), default=0)
        doc = document(plan, results, items, user_code, str(html) if html is not None else None, code)
        if html is not None:
            from tlint.doctor.html import write_html

            try:
                write_html(doc, results, html, images)
            except OSError as exc:
                return _fail(fmt, "usage", f"{html}: cannot write the HTML report ({exc.strerror or exc})")
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    else:
        render_text(doc, sys.stdout)
    return code


def _run_steps(plan, args, results: Results, display: Display, plots: Path | None) -> None:
    """check (every stage's static findings) → scan-data (data) → verify (model, training
    dynamics, A/B) → trace (the training step, in a real run) → diagnose (the logs)."""
    display.begin("check (static analysis)")
    step, results.check = run_check(plan, args.no_cache)
    _done(results, step, display)
    if plan.data is not None:
        display.begin("scan-data (your loaders' batches)")
        step, results.scan = run_scan(plan, args.verbose)
    else:
        step = skipped("scan-data", plan.skipped.get("scan-data", ""))
    _done(results, step, display)
    if plan.verify is not None:
        display.begin("verify (your model: probes, training probes, A/B)", total=len(plan.verify.probes))
        step, results.verify = run_verify(plan, args.verbose, display)
    else:
        step = skipped("verify", plan.skipped.get("verify", ""))
    _done(results, step, display)
    if plan.trace is not None:
        display.begin("trace (your training command)")
        step, results.trace = run_trace(plan, args.verbose)
    else:
        step = skipped("trace", plan.skipped.get("trace", ""))
    _done(results, step, display)
    if plan.runs:
        display.begin("diagnose (run logs)")
        step, results.diagnose = run_diagnose(plan, plots)
    else:
        step = skipped("diagnose", plan.skipped.get("diagnose", ""))
    _done(results, step, display)


def _done(results: Results, step, display: Display) -> None:
    results.steps.append(step)
    if step.status != "skipped":
        display.end(step_outcome(step.as_dict()))


def _html_target(path: Path | None) -> Path | None:
    if path is None:
        return None
    if path.is_dir():
        raise DoctorError("usage", f"{path}: --html names a file, not a folder")
    if not path.parent.is_dir():
        raise DoctorError("usage", f"{path}: the folder {path.parent} does not exist (--html)")
    return path


def _fail(fmt: str, kind: str, message: str) -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps(error_document(kind, message), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2
