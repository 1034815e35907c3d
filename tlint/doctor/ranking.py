"""One list from every step's findings, ranked by likely impact.

An item is a rule (all its static findings), or a failing probe, data check or run-log
finding that no rule's item takes. Evidence joins an item when it tests the same bug: the
verifier's verdict on the rule's findings, a failing probe that tests a finding the verifier matched to the model
(`Rule.probes`, or the probe that gave the verdict), a failing data check that confirmed a
finding in the loaders' files, a failing `data-ab` on the items of the data checks it names,
tlint trace's findings of the rule (the configured training command run for a few steps) and
its verdicts on the rule's static findings, a run-log finding whose likely causes name the
rule. The score (README "tlint doctor"):

- severity: error 3, warning 2, info 1;
- +3 when the bug was seen at run time: a confirmed verdict, a failing probe or data check,
  a trace finding (an item made of a failing probe or check has it by construction);
- +2 when a run's logs show an error (a loss spike, NaN, divergence, ...) it is the likeliest
  cause of, +1 when it is the second or third likeliest (one less for a warning symptom);
- -2 when the verifier did not reproduce it (a probe that could see it passed), or trace
  refuted it (the line ran where the invariant could fail, and it held);
- a run-log finding: its severity, +3 for an error (seen in a real run), +1 for a warning.

Impact: high from 5, medium from 3, else low. Ties follow the procedure's order (data,
model, training dynamics, A/B, logs), then the location.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tlint.doctor.fixes import check_fix, probe_fix, rule_fix
from tlint.doctor.steps import STAGES, Results, probe_stage

SEVERITY = {"error": 3, "warning": 2, "info": 1}
SEEN_AT_RUN_TIME = 3
NOT_REPRODUCED = -2
HIGH, MEDIUM = 5, 3
LINKED_CAUSES = 3   # a run-log finding joins the static findings of its three likeliest causes
# probes that test a rule without the rule naming them (its verdict comes from another probe)
EXTRA_PROBE_RULES = {"attention-maps": ("TL101", "TL102", "TL103", "TL113", "TL213")}
_VERDICT_ORDER = ("confirmed", "inconclusive", "not-reproduced", "not-checkable")


@dataclass
class Item:
    key: str
    stage: str
    severity: str
    title: str
    fix: str
    codes: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    runtime: str | None = None        # the strongest run-time verdict: confirmed, inconclusive, not-reproduced, ...
    seen: bool = False                # seen at run time (probe, data check, confirmed verdict)
    logs: int = 0                     # the run-log bonus
    log_item: bool = False
    score: int = 0
    where: str = ""                   # sort key: the first location

    def add(self, evidence: dict[str, Any]) -> None:
        if evidence not in self.evidence:
            self.evidence.append(evidence)

    def verdict(self, verdict: str) -> None:
        if verdict == "confirmed":
            self.seen = True
        if self.runtime is None or _VERDICT_ORDER.index(verdict) < _VERDICT_ORDER.index(self.runtime):
            self.runtime = verdict

    def finish(self) -> None:
        score = SEVERITY.get(self.severity, 1)
        if self.log_item:
            score += 3 if self.severity == "error" else 1 if self.severity == "warning" else 0
        else:
            score += SEEN_AT_RUN_TIME if self.seen else 0
            score += self.logs
            if self.runtime == "not-reproduced" and not self.seen:
                score += NOT_REPRODUCED
        self.score = score

    @property
    def impact(self) -> str:
        return "high" if self.score >= HIGH else "medium" if self.score >= MEDIUM else "low"

    def as_dict(self, rank: int) -> dict[str, Any]:
        return {"rank": rank, "impact": self.impact, "score": self.score, "stage": self.stage,
                "severity": self.severity, "title": self.title, "codes": self.codes, "runtime": self.runtime,
                "evidence": self.evidence, "fix": self.fix}


def _rule_stage(code: str) -> str:
    return {"1": "data", "2": "model", "3": "training"}.get(code[2:3], "model")


def _rule_info(code: str) -> tuple[str, str, tuple[str, ...]]:
    from tlint.rules import lookup

    rule = lookup(code)
    if rule is None:
        return code, "warning", ()
    return f"{code} {rule.name}: {rule.summary}", rule.severity, tuple(rule.probes)


def rank(results: Results) -> list[dict[str, Any]]:
    items: dict[str, Item] = {}

    def rule_item(code: str, severity: str | None = None) -> Item:
        item = items.get(code)
        if item is None:
            title, default, _ = _rule_info(code)
            item = items[code] = Item(code, _rule_stage(code), severity or default, title, rule_fix(code), [code])
        elif severity and SEVERITY.get(severity, 0) > SEVERITY.get(item.severity, 0):
            item.severity = severity
        return item

    static: set[str] = set()
    for d in (results.check or {}).get("diagnostics", []):
        item = rule_item(d["code"], d["severity"])
        start = d["range"]["start"]
        item.add({"source": "check", "path": d["path"], "line": start["line"], "column": start["column"],
                  "text": d["message"]})
        item.where = item.where or f"{d['path']}:{start['line']:06d}"
        static.add(d["code"])
    _verify_evidence(results, items, rule_item)
    _trace_evidence(results, items, rule_item)
    _data_evidence(results, items, rule_item)
    _ab_evidence(results, items)
    _log_evidence(results, items, static)
    ranked = list(items.values())
    for item in ranked:
        item.finish()
    ranked.sort(key=lambda i: (-i.score, STAGES.index(i.stage), i.where, i.key))
    return [item.as_dict(n) for n, item in enumerate(ranked, 1)]


def _figure(entry: dict[str, Any]) -> dict[str, Any]:
    return {"figure": entry.get("figure"), "unit": entry.get("unit", ""), "tolerance": entry.get("tolerance")}


def _static_note(results: Results, codes: list[str]) -> dict[str, Any] | None:
    """Evidence naming the static findings of `codes` the run-time evidence was not matched
    with (e.g. in a file the model or the loaders do not import)."""
    where = [f"{d['code']} at {d['path']}:{d['range']['start']['line']}"
             for d in (results.check or {}).get("diagnostics", []) if d["code"] in codes]
    if not where:
        return None
    return {"source": "check", "text": "static findings of the same rules elsewhere: " + ", ".join(where[:6])
            + (f" (+{len(where) - 6} more)" if len(where) > 6 else "")}


def _verify_evidence(results: Results, items: dict[str, Item], rule_item) -> None:
    """The verdicts on the static findings in the model's files; a failing probe joins the
    items of those findings whose rule it tests (and that it did not clear), else stands alone."""
    if results.verify is None:
        return
    findings = results.verify["findings"]
    for f in findings:
        item = rule_item(f["code"])
        item.verdict(f["verdict"])
        item.add({"source": "verify", "probe": f.get("probe"), "verdict": f["verdict"],
                  "path": f.get("path"), "line": (f.get("range") or {}).get("start", {}).get("line"),
                  "text": f.get("reason", "")})
    for probe in results.verify["probes"]:
        if probe["status"] != "fail":
            continue
        name = probe["probe"]
        related: list[str] = []
        for f in findings:
            tests = f.get("probe") == name or name in _rule_info(f["code"])[2] \
                or f["code"] in EXTRA_PROBE_RULES.get(name, ())
            if tests and f["verdict"] != "not-reproduced" and f["code"] not in related:
                related.append(f["code"])
        evidence = {"source": "verify", "probe": name, "status": "fail", **_figure(probe), "text": probe["detail"]}
        for code in related:
            rule_item(code).add(evidence)
            items[code].seen = True
        if related:
            continue
        item = items[f"probe:{name}"] = Item(f"probe:{name}", probe_stage(name), "error",
                                             f"probe {name} fails", probe_fix(name))
        item.add(evidence)
        item.seen = True


def _trace_evidence(results: Results, items: dict[str, Item], rule_item) -> None:
    """tlint trace's findings (the training command run for a few steps): each joins its
    rule's item, seen at run time; its verdicts on the static findings count as the
    verifier's (`refuted`, the line ran and the invariant held: not reproduced)."""
    if results.trace is None:
        return
    for f in results.trace.get("findings", []):
        item = rule_item(f["code"], f["severity"])
        count = f" (×{f['count']})" if f.get("count", 1) > 1 else ""
        item.add({"source": "trace", "path": f.get("path"), "line": f.get("line"), "step": f.get("step"),
                  "text": f"{f['message']}{count}"})
        item.seen = True
        if f.get("path") and f.get("line"):
            item.where = item.where or f"{f['path']}:{f['line']:06d}"
    for c in (results.trace.get("check") or {}).get("findings", []):
        verdict = {"confirmed": "confirmed", "refuted": "not-reproduced"}.get(c.get("verdict", ""))
        if verdict is None:
            continue
        item = rule_item(c["code"])
        item.verdict(verdict)
        if verdict != "confirmed":  # (a confirmed one is the trace finding above)
            item.add({"source": "trace", "path": c.get("path"), "line": c.get("line"), "verdict": c["verdict"],
                      "text": "the line ran where the invariant could fail within the steps traced, and it held"})


def _data_evidence(results: Results, items: dict[str, Item], rule_item) -> None:
    """The data scan's verdicts on the static findings in the loaders' files; a failing check
    joins the items of the findings it confirmed, else stands alone (naming the static
    findings of its rules elsewhere)."""
    if results.scan is None:
        return
    confirmed: dict[str, list[str]] = {}
    for f in results.scan.get("findings", []):
        item = rule_item(f["code"])
        item.verdict(f["verdict"])
        item.add({"source": "scan-data", "check": f.get("check"), "verdict": f["verdict"], "path": f.get("path"),
                  "line": (f.get("range") or {}).get("start", {}).get("line"), "text": f.get("reason", "")})
        if f["verdict"] == "confirmed" and f.get("check"):
            confirmed.setdefault(f["check"], []).append(f["code"])
    for c in results.scan["checks"]:
        if c["status"] != "fail":
            continue
        evidence = {"source": "scan-data", "check": c["check"], "loader": c["loader"], "status": "fail",
                    **_figure(c), "text": c["detail"]}
        related = confirmed.get(c["check"], [])
        for code in related:
            items[code].add(evidence)
            items[code].seen = True
        if related:
            continue
        key = f"data:{c['check']}"
        item = items.get(key)
        if item is None:
            rules = list(c.get("rules", []))
            severities = [_rule_info(code)[1] for code in rules]
            severity = max(severities, key=lambda s: SEVERITY.get(s, 0)) if severities else "warning"
            item = items[key] = Item(key, "data", severity, f"data check {c['check']} fails", check_fix(c["check"]),
                                     rules)
            note = _static_note(results, rules)
            item.where = f"~data:{c['check']}"
            item.add(evidence)
            if note:
                item.add(note)
        else:
            item.evidence.insert(len(item.evidence) - (1 if item.evidence[-1].get("source") == "check" else 0),
                                 evidence)
        item.seen = True


def _ab_evidence(results: Results, items: dict[str, Item]) -> None:
    """A failing `data-ab` (the cleaned batches train clearly better) joins the items of the
    data checks it names as the cleaning's targets."""
    if results.verify is None:
        return
    for probe in results.verify["probes"]:
        if probe["probe"] != "data-ab" or probe["status"] != "fail":
            continue
        evidence = {"source": "verify", "probe": "data-ab", "status": "fail", **_figure(probe), "text": probe["detail"]}
        # (not loader-order or pad-ratio: the cleaning does not fix them, so the A/B is no evidence on them)
        named = {c.get("check") for c in (probe.get("extra") or {}).get("data_checks", [])
                 if isinstance(c, dict) and c.get("cleaned", True)}
        for item in items.values():
            checks = {e.get("check") for e in item.evidence if e.get("source") == "scan-data"}
            if item.stage == "data" and checks & named:
                item.add(evidence)


def _log_evidence(results: Results, items: dict[str, Item], static: set[str]) -> None:
    if results.diagnose is None:
        return
    for run in results.diagnose["runs"]:
        for f in run["findings"]:
            if f["severity"] == "info":
                continue  # e.g. the schedule applied: part of the run's summary, not a problem
            steps = f["steps"]
            evidence = {"source": "diagnose", "run": run["path"], "kind": f["kind"], "severity": f["severity"],
                        "steps": steps, "text": f["message"]}
            linked = []
            for cause in f["causes"][:LINKED_CAUSES]:
                for code in cause["rules"]:
                    if code in static and code not in linked:
                        linked.append(code)
                        items[code].add({**evidence, "cause": cause["rank"]})
                        bonus = (2 if cause["rank"] == 1 else 1) - (0 if f["severity"] == "error" else 1)
                        items[code].logs = max(items[code].logs, bonus)
            causes = "; ".join(f"{c['rank']}. {c['cause']}"
                               + (f" ({', '.join(c['rules'] + [f'verify --probe {p}' for p in c['probes']])})"
                                  if c["rules"] or c["probes"] else "") for c in f["causes"][:3])
            span = f" at steps {steps['first']}-{steps['last']}" if steps else ""
            key = f"log:{run['path']}:{f['kind']}:{steps['first'] if steps else ''}"
            fix = f"likely causes, most likely first: {causes}" if causes else "see tlint diagnose's report"
            codes = sorted({c for x in f["causes"] for c in x["rules"]})
            item = items[key] = Item(key, "logs", f["severity"], f"{f['kind']} in run {run['path']}{span}", fix, codes)
            item.log_item = True
            item.where = f"{run['path']}:{steps['first'] if steps else 0:09d}"
            item.add(evidence)
            if linked:
                item.add({"source": "check", "text": "static findings of likely causes: " + ", ".join(linked)})
