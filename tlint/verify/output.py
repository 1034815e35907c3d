"""`tlint verify` reports: text (rich tables, one row per probe and one per finding),
JSON (the stable schema of README "tlint verify"), and SARIF and LSP for the static findings, which have
a source location (the same writers as `tlint check`'s, in `tlint.reporters`)."""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from tlint import __version__

_STATUS_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow",
                 "confirmed": "bold red", "not-reproduced": "green", "not-checkable": "yellow",
                 "inconclusive": "magenta"}
# A probe skipped for one of these reasons did not run as it should (not a probe that does not
# apply to this model): it is a skipped key probe.
_BROKEN_SKIPS = ("could not run", "stopped", "not run", "the process running the model")


def skipped_key_probes(probes: list[dict], findings: list[dict]) -> list[str]:
    """Probes that a static finding's rule maps to, or that crashed, timed out or could not
    run, and were skipped."""
    needed: set[str] = set()
    if findings:  # (the rule tables import every rule: only when there is a finding to look up)
        from tlint.verify.matching import PROBES_OF_RULE

        needed = {name for f in findings for name in PROBES_OF_RULE.get(f["code"], ())}
    return [p["probe"] for p in probes if p["status"] == "skip"
            and (p["probe"] in needed or p["detail"].startswith(_BROKEN_SKIPS))]


def summary(probes: list[dict], findings: list[dict]) -> dict[str, Any]:
    return {"probes": len(probes), "failed": sum(p["status"] == "fail" for p in probes),
            "confirmed": sum(f["verdict"] == "confirmed" for f in findings),
            "inconclusive": sum(f["verdict"] == "inconclusive" for f in findings),
            "skipped_key_probes": skipped_key_probes(probes, findings)}


def exit_code(probes: list[dict], findings: list[dict], strict: bool = False) -> int:
    """1 when a probe failed or a finding was confirmed; with `strict`, also when a key probe
    was skipped."""
    counts = summary(probes, findings)
    return 1 if counts["failed"] or counts["confirmed"] or (strict and counts["skipped_key_probes"]) else 0


def causal_json(model: dict[str, Any]) -> dict[str, Any]:
    """`yes`, `no`, or `inconclusive` when only the model's own behaviour could tell and it
    sees later tokens (a bidirectional model, or a causal one with a broken mask)."""
    answer = "inconclusive" if model.get("causal_inconclusive") else "yes" if model.get("causal") else "no"
    return {"causal": answer, "causal_evidence": model.get("causal_reason", "")}


# data-ab's figures in its JSON entry: `curves` (per-step training loss and the eval losses of
# both arms, first seed), `data_checks` (the data scan's failing checks) and `ab` (the rest; its
# `model` names the model trained when `data-ab-model` is set).
_AB_KEYS = ("kind", "optimizer", "steps", "seeds", "threshold", "noise_factor", "noise", "lost", "initial_eval_loss",
            "eval_source", "runs", "cleaning", "model")


def data_ab_fields(probe: dict[str, Any]) -> dict[str, Any]:
    extra = probe.get("extra") or {}
    if probe.get("probe") != "data-ab" or not extra:
        return {}
    out: dict[str, Any] = {"data_checks": extra.get("data_checks", [])}
    if "curves" in extra:
        out["curves"] = extra["curves"]
    ab = {k: extra[k] for k in _AB_KEYS if k in extra}
    if ab:
        out["ab"] = ab
    if "control" in extra:  # the planted bug a pass must catch (as other probes' `control`)
        out["control"] = extra["control"]
    return out


def report_json(model: dict[str, Any], probes: list[dict], findings: list[dict]) -> dict[str, Any]:
    from tlint.verify.activations_report import json_fields

    keys = ("probe", "status", "figure", "tolerance", "unit", "module", "detail")
    return {
        "tool": "tlint", "version": __version__,
        "model": {**{k: model[k] for k in ("factory", "class", "parameters", "call")}, **causal_json(model),
                  "layout": model.get("layout", "batch-first")},
        "probes": [{**{k: p[k] for k in keys}, **json_fields(p), **data_ab_fields(p),
                    **{k: p[k] for k in ("control", "seeds") if p.get(k) is not None}} for p in probes],
        "findings": findings,
        "summary": summary(probes, findings),
    }


def render_json(model: dict, probes: list[dict], findings: list[dict], stream: TextIO) -> None:
    stream.write(json.dumps(report_json(model, probes, findings), indent=2, ensure_ascii=False) + "\n")


def error_json(kind: str, message: str) -> str:
    return json.dumps({"tool": "tlint", "error": {"kind": kind, "message": message}}, ensure_ascii=False) + "\n"


def render_text(model: dict, probes: list[dict], findings: list[dict], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    color = stream.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, emoji=False,
                      markup=False, width=None if color else 160)
    causal = causal_json(model)
    console.print(f"model {model['class']} from {model['factory']}: {model['parameters']:,} parameters, "
                  f"vocabulary {model.get('vocab_size')}")
    console.print(f"causal: {causal['causal']} ({causal['causal_evidence']})")
    console.print(f"call style \"{model['call']}\": {model.get('convention', '')}")
    table = Table(title="probes", title_justify="left")
    for column in ("probe", "status", "figure", "tolerance", "unit", "detail"):
        table.add_column(column, overflow="fold")
    for p in probes:
        figure = "" if p["figure"] is None else f"{p['figure']:.4g}"
        detail = p["detail"]
        if p.get("seeds"):
            seeds = p["seeds"]
            detail += (f" [near the tolerance: seeds {seeds['seeds']} gave {seeds['figures']}, median "
                       f"{seeds['median']}, spread {seeds['spread']}]")
        if p.get("control"):
            control = p["control"]
            detail += (f" [positive control, {control['injected']}: "
                       + ("caught" if control["caught"] else "NOT caught") + f" ({control['figure']})]")
        table.add_row(p["probe"], Text(p["status"], style=_STATUS_STYLE[p["status"]]), figure,
                      f"{p['tolerance']:g}", p["unit"], detail)
    console.print(table)
    from tlint.verify.activations_report import render_text_extras

    render_text_extras(console, probes)
    if findings:
        table = Table(title="static findings", title_justify="left")
        for column in ("finding", "location", "verdict", "probe", "reason"):
            table.add_column(column, overflow="fold")
        for f in findings:
            where = f"{f['path']}:{f['range']['start']['line']}:{f['range']['start']['column']}"
            table.add_row(f["code"], where, Text(f["verdict"], style=_STATUS_STYLE[f["verdict"]]),
                          f["probe"] or "", f["reason"])
        console.print(table)
    counts = summary(probes, findings)
    from tlint.reporters import plural

    console.print(f"{plural(counts['probes'], 'probe')}, {counts['failed']} failed; "
                  f"{plural(len(findings), 'static finding')}, {counts['confirmed']} confirmed"
                  + (f", {counts['inconclusive']} inconclusive" if counts["inconclusive"] else ""))
    if counts["skipped_key_probes"]:
        console.print("key probes skipped (--strict fails on them): " + ", ".join(counts["skipped_key_probes"]))


# --- SARIF and LSP: the static findings, which have a source location ---------------------

# verdict -> (SARIF kind, SARIF level, LSP severity). A SARIF result whose kind is not
# "fail" must have level "none" (SARIF 2.1.0 §3.27.9): a cleared finding is a "pass", an
# untested one is left for "review".
VERDICT_KINDS = {"confirmed": ("fail", "error", 1), "not-checkable": ("review", "none", 2),
                 "inconclusive": ("review", "none", 2), "not-reproduced": ("pass", "none", 3)}


def _finding_order(finding: dict) -> tuple:
    start = finding["range"]["start"]
    return finding["path"], start["line"], start["column"], finding["code"]


def _finding_message(finding: dict) -> str:
    probe = f" ({finding['probe']})" if finding.get("probe") else ""
    return f"{finding['code']} {finding['verdict']}{probe}: {finding['reason']}"


def _finding_properties(finding: dict, probes: list[dict]) -> dict[str, Any]:
    """verdict, probe and the probe's figure (with its tolerance and unit) of a finding."""
    probe = next((p for p in probes if p["probe"] == finding.get("probe")), None)
    return {"verdict": finding["verdict"], "probe": finding.get("probe"), "reason": finding["reason"],
            "status": probe["status"] if probe else None, "figure": probe["figure"] if probe else None,
            "tolerance": probe["tolerance"] if probe else None, "unit": probe["unit"] if probe else None,
            "control": probe.get("control") if probe else None}


def sarif_document(model: dict, probes: list[dict], findings: list[dict], strict: bool = False) -> dict[str, Any]:
    """A SARIF log: one result per static finding (kind/level from its verdict; verdict,
    probe and figure in its properties); the model, every probe's result and the summary in
    the run's properties; the exit code in the invocation."""
    from tlint.diagnostics import Range
    from tlint.reporters import SourceLines
    from tlint.reporters.sarif import SarifLog, location

    sources, log = SourceLines(), SarifLog()
    for finding in sorted(findings, key=_finding_order):
        kind, level, _ = VERDICT_KINDS[finding["verdict"]]
        rng = Range.from_json(finding["range"])
        log.result(finding["code"], _finding_message(finding), kind=kind, level=level,
                   locations=[location(sources, finding["path"], rng)],
                   properties=_finding_properties(finding, probes))
    document = report_json(model, probes, findings)
    code = exit_code(probes, findings, strict)
    return log.document(
        properties={"model": document["model"], "probes": document["probes"], "summary": document["summary"]},
        invocation={"executionSuccessful": True, "exitCode": code})


def render_sarif(model: dict, probes: list[dict], findings: list[dict], stream: TextIO, strict: bool = False) -> None:
    from tlint.reporters.sarif import write

    write(sarif_document(model, probes, findings, strict), stream)


def sarif_error(kind: str, message: str) -> str:
    from tlint.reporters.sarif import error_log

    return json.dumps(error_log(kind, message), indent=2, ensure_ascii=False) + "\n"


def render_lsp(model: dict, probes: list[dict], findings: list[dict], stream: TextIO) -> None:
    """JSON Lines of LSP `publishDiagnostics` params, one per file with findings (0-based
    lines, UTF-16 characters); the verdict, probe and figure in each diagnostic's `data`."""
    from tlint.diagnostics import Range
    from tlint.docs import rule_url
    from tlint.reporters import SourceLines
    from tlint.reporters.lsp import file_uri, lsp_range

    sources = SourceLines()
    by_path: dict[str, list[dict]] = {}
    for finding in findings:
        by_path.setdefault(finding["path"], []).append(finding)
    for path in sorted(by_path):
        diagnostics = []
        for finding in sorted(by_path[path], key=_finding_order):
            diagnostics.append({
                "range": lsp_range(sources, path, Range.from_json(finding["range"])),
                "severity": VERDICT_KINDS[finding["verdict"]][2],
                "code": finding["code"],
                "codeDescription": {"href": rule_url(finding["code"])},
                "source": "tlint verify",
                "message": _finding_message(finding),
                "data": _finding_properties(finding, probes),
            })
        stream.write(json.dumps({"uri": file_uri(path), "diagnostics": diagnostics}, ensure_ascii=False) + "\n")
