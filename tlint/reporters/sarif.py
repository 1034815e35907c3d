"""`--format sarif`: one SARIF 2.1.0 log (`tlint check` and `tlint verify`).

One run; `tool.driver.rules` holds a descriptor for each code reported (sorted), and each
result points at its rule by `ruleId` and `ruleIndex`. Regions are 1-based lines and 1-based
columns in UTF-16 code units (`columnKind: "utf16CodeUnits"`), computed from each line's
text. Relative paths are URIs against `%SRCROOT%`, the working directory. In a notebook,
a region is in the notebook's own coordinates: lines and columns within one cell, named by
the region's `properties.cell` (1-based, over all the notebook's cells).

`tlint verify` builds its results with `result()` too: a finding's verdict maps to the
result's `kind` and `level` and travels, with the probe and its figure, in `properties`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from tlint import __version__
from tlint.diagnostics import Diagnostic, Range
from tlint.encoding import printable, raw_name
from tlint.reporters import OutputReport, SourceLines

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
INFORMATION_URI = "https://github.com/tlint/tlint"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def utf16_column(line: str | None, column: int) -> int:
    """The 1-based UTF-16 column of a 1-based code-point column on `line`."""
    from tlint.reporters.lsp import utf16_character

    return utf16_character(line, column) + 1


def artifact_location(path: str) -> dict[str, str]:
    """A path relative to the working directory as a `%SRCROOT%`-relative URI; any other
    absolute path as a file URI. The URI percent-encodes the name's bytes, those that are
    not valid UTF-8 included (`bad%FF.py`)."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(Path.cwd().resolve())
        except (ValueError, OSError):
            return {"uri": candidate.as_uri()}
    return {"uri": quote(raw_name(candidate.as_posix())), "uriBaseId": SRCROOT}


def region(sources: SourceLines, path: str, rng: Range, cell: int | None = None) -> dict[str, Any]:
    """A SARIF region; in a notebook, lines and columns within `cell`, which the region's
    property bag names (`"properties": {"cell": N}`)."""
    start, end = rng.start, rng.end
    out: dict[str, Any] = {
        "startLine": start.line,
        "startColumn": utf16_column(sources.line(path, start.line, cell), start.column),
        "endLine": end.line,
        "endColumn": utf16_column(sources.line(path, end.line, cell), end.column),
    }
    if cell is not None:
        out["properties"] = {"cell": cell}
    return out


def location(sources: SourceLines, path: str, rng: Range, cell: int | None = None) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": artifact_location(path),
                                 "region": region(sources, path, rng, cell)}}


def rule_descriptor(code: str, name: str | None = None, severity: str | None = None) -> dict[str, Any]:
    """`reportingDescriptor` of a rule: its name, summary, link and default level."""
    from tlint.docs import rule_doc, rule_url
    from tlint.rules import lookup

    rule = lookup(code)
    name = rule.name if rule is not None else (name or code)
    summary = getattr(rule, "summary", None) or name
    default = rule.severity if rule is not None else (severity or "warning")
    descriptor: dict[str, Any] = {"id": code, "name": name, "shortDescription": {"text": summary}}
    doc = rule_doc(code)
    what = _WHAT_IT_DOES.search(doc) if doc else None
    if what and what.group(1).strip():
        descriptor["fullDescription"] = {"text": " ".join(what.group(1).split())}
    descriptor["helpUri"] = rule_url(code)
    if doc:  # the rule's document (rules/TLxxx-name.md): code scanning shows it as the rule's help
        descriptor["help"] = {"text": doc, "markdown": doc}
    descriptor["defaultConfiguration"] = {"level": LEVELS.get(default, "warning")}
    if rule is not None:  # defect, likely-defect or practice (a tag too, which code scanning filters by)
        descriptor["properties"] = {"kind": rule.kind, "tags": [rule.kind]}
    return descriptor


_WHAT_IT_DOES = re.compile(r"^## What it does[ \t]*\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)


@dataclass
class SarifLog:
    """Results of one run, with the rule descriptors they refer to."""

    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    def rule_index(self, code: str, name: str | None = None, severity: str | None = None) -> int:
        if code not in self.rules:
            self.rules[code] = rule_descriptor(code, name, severity)
        return list(self.rules).index(code)

    def result(self, code: str, message: str, *, level: str, locations: list[dict[str, Any]],
               kind: str | None = None, properties: dict[str, Any] | None = None,
               name: str | None = None, severity: str | None = None, **more: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"ruleId": code, "ruleIndex": self.rule_index(code, name, severity)}
        if kind is not None:
            entry["kind"] = kind
        entry.update({"level": level, "message": {"text": message}, "locations": locations})
        entry.update(more)
        if properties:
            entry["properties"] = properties
        self.results.append(entry)
        return entry

    def document(self, *, properties: dict[str, Any] | None = None,
                 invocation: dict[str, Any] | None = None) -> dict[str, Any]:
        # rules sorted by code, result indices renumbered to match
        order = sorted(self.rules)
        position = {code: i for i, code in enumerate(order)}
        results = [{**r, "ruleIndex": position[r["ruleId"]]} for r in self.results]
        run: dict[str, Any] = {
            "tool": {"driver": {"name": "tlint", "version": __version__, "semanticVersion": __version__,
                                "informationUri": INFORMATION_URI,
                                "rules": [self.rules[code] for code in order]}},
            "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().resolve().as_uri().rstrip("/") + "/"}},
            "columnKind": "utf16CodeUnits",
            "results": results,
        }
        if invocation is not None:
            run["invocations"] = [invocation]
        if properties:
            run["properties"] = properties
        return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def error_log(kind: str, message: str) -> dict[str, Any]:
    """A log with no results and a failed invocation: how a usage or user-code error (exit 2)
    is reported in SARIF."""
    invocation = {"executionSuccessful": False, "exitCode": 2,
                  "toolExecutionNotifications": [{"level": "error", "message": {"text": message},
                                                  "descriptor": {"id": kind}}]}
    return SarifLog().document(invocation=invocation)


def fixes(diag: Diagnostic, sources: SourceLines) -> list[dict[str, Any]]:
    if diag.fix is None:
        return []
    replacements = [{"deletedRegion": region(sources, diag.path, edit.range, edit.cell),
                     "insertedContent": {"text": edit.content}} for edit in diag.fix.edits]
    return [{"description": {"text": diag.fix.message or f"{diag.fix.applicability} fix"},
             "artifactChanges": [{"artifactLocation": artifact_location(diag.path),
                                  "replacements": replacements}],
             "properties": {"applicability": diag.fix.applicability}}]


def write(document: dict[str, Any], stream: TextIO) -> None:
    stream.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def render(report: OutputReport, stream: TextIO) -> None:
    log = SarifLog()
    for diag in report.diagnostics:
        more: dict[str, Any] = {}
        fix_list = fixes(diag, report.sources)
        if fix_list:
            more["fixes"] = fix_list
        if diag.suppressed:  # only present with --show-suppressed
            more["suppressions"] = [{"kind": "inSource"}]
        log.result(diag.code, printable(diag.message), level=LEVELS[diag.severity],
                   locations=[location(report.sources, diag.path, diag.range, diag.cell)],
                   properties={"name": diag.name, "severity": diag.severity,
                               **({"kind": diag.kind} if diag.kind else {}),
                               **({"evidence": list(diag.evidence)} if diag.evidence else {})},
                   name=diag.name, severity=diag.severity, **more)
    write(log.document(properties={"files": len(report.files), "parseErrors": report.parse_errors}), stream)
