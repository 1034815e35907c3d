"""Per rule, the verdicts the benchmarks have recorded, and the kind they give the rule.

    python bench/rule_verdicts.py                 # the table (markdown), every rule
    python bench/rule_verdicts.py --codes TL301   # only these rules
    python bench/rule_verdicts.py --json OUT      # the same, as JSON
    python bench/rule_verdicts.py --check         # exit 1 when a rule's kind or default
                                                  # contradicts its records

Nothing is run: the counts come from the committed records only.

- **b0 cases**: the documented bugs of batch 0 (`bench/realbugs/cases/*.toml`) whose
  `rule` is the rule: bugs of its class that a project's own people fixed.
- **b0 fixed**: the judgements of findings on batch 0's fixed trees
  (`bench/realbugs/judgements/<family>.toml`): tp / fp / advisory.
- **eco**: the judgements of the pinned ecosystem repositories
  (`bench/realbugs/judgements/ecosystem.toml`; `bench/ecosystem/repos.toml` holds none).
- **b1, b2, ...**: a batch's cases in the catalogue whose rule is the rule, and how many
  of them were found at first sight (`first_sight.toml`); its near findings judged in
  `described.toml` (or carried in `first_sight.toml`): describing = tp, incidental = fp.
- **samples**: every judged finding of `bench/ecosystem/samples/sample-<k>.toml`, once
  (a finding of both the default run and the `--select ALL` run counts once).

**What the records say** (`records_say`):

- **practice** when the rule's recorded findings are mostly true but deliberate, or
  rejected: (a) at least one finding was judged advisory and advisory + fp > 2 x accepted,
  where accepted = judged tp + cases found at first sight; or (b) nothing was ever
  accepted, no batch documents a bug of its class, and at least 2 findings were rejected.
  A rule that reports a recipe choice is judged advisory where its document calls it
  advice and fp where it does not: both count.
- **on** when the rule has a record (a documented case or a judged finding) and (a) and
  (b) do not hold: it may be a defect or a likely defect, on by default; its severity is
  its document's claim (wrong whatever the intent, or wrong unless meant).
- **no record** otherwise: nothing decides; the rule keeps its default.

`--check` fails when the metadata contradicts the records: a rule the records make
practice that is not, or a defect or likely defect with a record that is off by default.
A practice rule whose records say "on" is allowed (advice that is often taken, such as
weight decay on norms): the records cannot make a rule advice, nor stop it being one.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REALBUGS = HERE / "realbugs"
SAMPLES = HERE / "ecosystem" / "samples"
REPOS = HERE / "ecosystem" / "repos.toml"
FAMILIES = ("data", "model", "training")
VERDICTS = ("tp", "fp", "advisory")
TOOL_CODES = ("TL001", "TL002", "TL003")

# practice when advisory + fp > PRACTICE_RATIO x accepted, or nothing accepted and at least
# PRACTICE_MIN_REJECTED rejected (see the module docstring)
PRACTICE_RATIO = 2
PRACTICE_MIN_REJECTED = 2


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    advisory: int = 0

    def add(self, verdict: str) -> None:
        setattr(self, verdict, getattr(self, verdict) + 1)

    def text(self) -> str:
        return f"{self.tp}/{self.fp}/{self.advisory}" if (self.tp or self.fp or self.advisory) else "–"


@dataclass
class RuleRecord:
    code: str
    name: str = ""
    severity: str = ""
    default: bool = True
    kind: str = ""  # the rule's metadata
    b0_cases: int = 0
    b0_fixed: Counts = field(default_factory=Counts)
    ecosystem: Counts = field(default_factory=Counts)
    batch_cases: int = 0
    batch_found: int = 0
    batch_near: Counts = field(default_factory=Counts)
    samples: Counts = field(default_factory=Counts)

    @property
    def judged(self) -> Counts:
        out = Counts()
        for part in (self.b0_fixed, self.ecosystem, self.batch_near, self.samples):
            out.tp += part.tp
            out.fp += part.fp
            out.advisory += part.advisory
        return out

    @property
    def accepted(self) -> int:
        return self.judged.tp + self.batch_found

    @property
    def has_record(self) -> bool:
        judged = self.judged
        return bool(self.b0_cases or self.batch_cases or judged.tp or judged.fp or judged.advisory)

    @property
    def records_say(self) -> str:
        judged = self.judged
        rejected = judged.advisory + judged.fp
        if self.code in TOOL_CODES:
            return "no record"
        if judged.advisory and rejected > PRACTICE_RATIO * self.accepted:
            return "practice"
        if (not self.accepted and not self.b0_cases and not self.batch_cases
                and rejected >= PRACTICE_MIN_REJECTED):
            return "practice"
        return "on" if self.has_record else "no record"

    def contradiction(self) -> str | None:
        """Why the metadata contradicts the records (None: it does not)."""
        if not self.kind:
            return "the rule has no kind"
        if self.records_say == "practice" and self.kind != "practice":
            return f"the records make it practice, its kind is {self.kind}"
        if self.records_say == "on" and self.kind != "practice" and not self.default:
            return f"a {self.kind} with a record is off by default"
        return None


def _toml(path: Path) -> dict:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _rules() -> list[tuple[str, str, str, bool, str]]:
    sys.path.insert(0, str(ROOT))
    try:
        from tlint.rules import ALL_RULES
    finally:
        sys.path.pop(0)
    return [(r.code, r.name, r.severity, r.default_enabled, getattr(r, "kind", "")) for r in ALL_RULES]


def collect(realbugs: Path = REALBUGS, samples: Path = SAMPLES, repos: Path = REPOS) -> dict[str, RuleRecord]:
    records = {code: RuleRecord(code, name, severity, default, kind)
               for code, name, severity, default, kind in _rules()}

    def record(code: str) -> RuleRecord:
        if code not in records:
            raise SystemExit(f"rule_verdicts: {code} is recorded but is not a rule of this tlint")
        return records[code]

    for path in sorted((realbugs / "cases").glob("*.toml")):
        for case in _toml(path).get("case", []):
            record(case["rule"]).b0_cases += 1
    for path in sorted((realbugs / "judgements").glob("*.toml")):
        target = "ecosystem" if path.stem == "ecosystem" else "b0_fixed"
        for judgement in _toml(path).get("judgement", []):
            getattr(record(judgement["code"]), target).add(judgement["verdict"])
    if repos.is_file():  # the pinned repositories carry no verdicts of their own today
        for repo in _toml(repos).get("repo", []):
            for judgement in repo.get("judgement", []):
                record(judgement["code"]).ecosystem.add(judgement["verdict"])
    for folder in sorted(p for p in (realbugs / "batches").glob("b*") if p.is_dir()):
        rule_of: dict[str, str] = {}
        for path in sorted(folder.glob("cases-*.toml")):
            for case in _toml(path).get("case", []):
                if case.get("in_catalogue") and case.get("rule"):
                    rule_of[case["id"]] = case["rule"]
                    record(case["rule"]).batch_cases += 1
        near: dict[tuple, bool] = {}
        if (folder / "first_sight.toml").is_file():
            for entry in _toml(folder / "first_sight.toml").get("first_sight", []):
                if entry.get("found") and entry["case"] in rule_of:
                    record(rule_of[entry["case"]]).batch_found += 1
                for item in entry.get("near", []):
                    key = (entry["case"], item["path"], item.get("cell"), item["line"], item["code"])
                    near[key] = item["describes"]
        if (folder / "described.toml").is_file():
            for item in _toml(folder / "described.toml").get("near", []):
                near[(item["case"], item["path"], item.get("cell"), item["line"], item["code"])] = item["describes"]
        for key, describes in near.items():
            if key[-1] not in TOOL_CODES:
                record(key[-1]).batch_near.add("tp" if describes else "fp")
    for path in sorted(samples.glob("sample-*.toml")):
        seen: set[tuple] = set()
        for finding in _toml(path).get("finding", []):
            key = (finding["repo"], finding["path"], finding.get("cell"), finding["line"], finding["code"])
            if key in seen or finding.get("verdict") not in VERDICTS:
                continue
            seen.add(key)
            record(finding["code"]).samples.add(finding["verdict"])
    return records


HEADER = ("| rule | severity | default | kind | b0 cases | b0 fixed tp/fp/adv | eco tp/fp/adv "
          "| b1+ cases found/in catalogue | b1+ near tp/fp | samples tp/fp/adv | all judged tp/fp/adv "
          "| the records say |")


def row(r: RuleRecord) -> str:
    judged = r.judged
    batch = f"{r.batch_found}/{r.batch_cases}" if r.batch_cases else "–"
    near = f"{r.batch_near.tp}/{r.batch_near.fp}" if (r.batch_near.tp or r.batch_near.fp) else "–"
    return (f"| {r.code} | {r.severity} | {'on' if r.default else 'off'} | {r.kind or '?'} | {r.b0_cases or '–'} "
            f"| {r.b0_fixed.text()} | {r.ecosystem.text()} | {batch} | {near} | {r.samples.text()} "
            f"| {judged.text()} | {r.records_say} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--codes", nargs="+", metavar="TLNNN", help="only these rules")
    parser.add_argument("--json", metavar="OUT", help="also write the table as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a rule's kind or default contradicts its records")
    args = parser.parse_args(argv)
    records = collect()
    rows = [r for r in records.values() if not args.codes or r.code in {c.upper() for c in args.codes}]
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for r in rows:
        print(row(r))
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{**asdict(r), "records_say": r.records_say} for r in rows], indent=1) + "\n")
    if args.check:
        wrong = [(r.code, r.contradiction()) for r in records.values() if r.contradiction()]
        for code, why in wrong:
            print(f"{code}: {why}", file=sys.stderr)
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
