"""Validation of SARIF 2.1.0 logs against the official OASIS schema (vendored unmodified as
tests/sarif-schema-2.1.0.json; its source and licence are in tests/SARIF-SCHEMA-LICENSE.txt),
plus what tlint promises beyond it and the cross-references a schema cannot express
(ruleIndex, level vs kind, ordered regions)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

SCHEMA_PATH = Path(__file__).with_name("sarif-schema-2.1.0.json")


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)  # draft-04, as the schema declares
    cls.check_schema(schema)
    return cls(schema)


def check_sarif(log: dict) -> None:
    """Raise when `log` is not a valid SARIF 2.1.0 log as tlint writes it: a
    jsonschema.ValidationError for the schema, an AssertionError for the rest."""
    validator().validate(log)
    assert log["runs"], "tlint writes one run"
    for run in log["runs"]:
        assert run.get("columnKind") == "utf16CodeUnits", "tlint declares UTF-16 columns"
        rules = run["tool"]["driver"].get("rules", [])
        ids = [rule["id"] for rule in rules]
        assert len(ids) == len(set(ids)), "duplicate rule descriptors"
        for result in run.get("results", []):
            if "ruleIndex" in result:
                assert ids[result["ruleIndex"]] == result["ruleId"], result
            if result.get("kind", "fail") != "fail":  # SARIF 2.1.0 §3.27.9
                assert result.get("level", "none") == "none", result
            regions = [loc["physicalLocation"].get("region") for loc in result.get("locations", [])]
            for fix in result.get("fixes", []):
                regions += [r["deletedRegion"] for change in fix["artifactChanges"] for r in change["replacements"]]
            for rng in regions:
                if rng and "endLine" in rng:
                    assert (rng["endLine"], rng.get("endColumn", 0)) >= (rng["startLine"], rng.get("startColumn", 0))
