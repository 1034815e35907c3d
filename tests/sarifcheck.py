"""A structural check of SARIF 2.1.0 logs: the essentials of the OASIS schema
(sarif-schema-2.1.0.json is not available offline) written as a JSON Schema subset — the
required properties, the enumerations and the closed property sets of every object tlint
writes — plus the cross-references a schema cannot express (ruleIndex, level vs kind)."""

from __future__ import annotations

import jsonschema

_MESSAGE = {"type": "object", "required": ["text"], "additionalProperties": False,
            "properties": {"text": {"type": "string", "minLength": 1}}}
_URI = {"type": "string", "minLength": 1}
_ARTIFACT_LOCATION = {"type": "object", "required": ["uri"], "additionalProperties": False,
                      "properties": {"uri": _URI, "uriBaseId": {"type": "string"}}}
_REGION = {"type": "object", "required": ["startLine"], "additionalProperties": False,
           "properties": {key: {"type": "integer", "minimum": 1}
                          for key in ("startLine", "startColumn", "endLine", "endColumn")}}
_PHYSICAL_LOCATION = {"type": "object", "required": ["artifactLocation"], "additionalProperties": False,
                      "properties": {"artifactLocation": _ARTIFACT_LOCATION, "region": _REGION}}
_LOCATION = {"type": "object", "additionalProperties": False,
             "properties": {"physicalLocation": _PHYSICAL_LOCATION}}
_PROPERTY_BAG = {"type": "object"}
_LEVEL = {"enum": ["none", "note", "warning", "error"]}
_FIX = {"type": "object", "required": ["artifactChanges"], "additionalProperties": False, "properties": {
    "description": _MESSAGE,
    "artifactChanges": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["artifactLocation", "replacements"], "additionalProperties": False,
        "properties": {"artifactLocation": _ARTIFACT_LOCATION, "replacements": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["deletedRegion"], "additionalProperties": False,
            "properties": {"deletedRegion": _REGION, "insertedContent": {
                "type": "object", "additionalProperties": False, "properties": {"text": {"type": "string"}}}}}}}}}}}
_RESULT = {"type": "object", "required": ["message"], "additionalProperties": False, "properties": {
    "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1},
    "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
    "level": _LEVEL, "message": _MESSAGE,
    "locations": {"type": "array", "items": _LOCATION},
    "fixes": {"type": "array", "items": _FIX},
    "suppressions": {"type": "array", "items": {
        "type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["inSource", "external"]}}}},
    "properties": _PROPERTY_BAG}}
_RULE = {"type": "object", "required": ["id"], "additionalProperties": False, "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "shortDescription": _MESSAGE,
    "fullDescription": _MESSAGE, "helpUri": _URI, "properties": _PROPERTY_BAG,
    "defaultConfiguration": {"type": "object", "additionalProperties": False,
                             "properties": {"level": _LEVEL, "enabled": {"type": "boolean"}}}}}
_NOTIFICATION = {"type": "object", "required": ["message"], "properties": {
    "message": _MESSAGE, "level": _LEVEL,
    "descriptor": {"type": "object", "properties": {"id": {"type": "string"}}}}}
_INVOCATION = {"type": "object", "required": ["executionSuccessful"], "additionalProperties": False, "properties": {
    "executionSuccessful": {"type": "boolean"}, "exitCode": {"type": "integer"},
    "toolExecutionNotifications": {"type": "array", "items": _NOTIFICATION}}}
_RUN = {"type": "object", "required": ["tool"], "additionalProperties": False, "properties": {
    "tool": {"type": "object", "required": ["driver"], "additionalProperties": False, "properties": {
        "driver": {"type": "object", "required": ["name"], "additionalProperties": False, "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}, "semanticVersion": {"type": "string"},
            "informationUri": _URI, "rules": {"type": "array", "items": _RULE}}}}},
    "originalUriBaseIds": {"type": "object", "additionalProperties": {
        "type": "object", "required": ["uri"], "properties": {"uri": {"type": "string", "pattern": "/$"}}}},
    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
    "results": {"type": "array", "items": _RESULT},
    "invocations": {"type": "array", "items": _INVOCATION},
    "properties": _PROPERTY_BAG}}
SARIF_SUBSET = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object", "required": ["version", "runs"], "additionalProperties": False,
    "properties": {"$schema": {"type": "string", "format": "uri"}, "version": {"const": "2.1.0"},
                   "runs": {"type": "array", "minItems": 1, "items": _RUN}},
}


def check_sarif(log: dict) -> None:
    """Raise when `log` is not a structurally valid SARIF 2.1.0 log as tlint writes it."""
    jsonschema.validate(log, SARIF_SUBSET)
    for run in log["runs"]:
        rules = run["tool"]["driver"].get("rules", [])
        ids = [rule["id"] for rule in rules]
        assert len(ids) == len(set(ids)), "duplicate rule descriptors"
        for result in run.get("results", []):
            if "ruleIndex" in result:
                assert ids[result["ruleIndex"]] == result["ruleId"], result
            if result.get("kind", "fail") != "fail":  # SARIF 2.1.0 §3.27.9
                assert result.get("level", "none") == "none", result
            for loc in result.get("locations", []):
                rng = loc["physicalLocation"].get("region")
                if rng and "endLine" in rng:
                    assert (rng["endLine"], rng.get("endColumn", 0)) >= (rng["startLine"], rng.get("startColumn", 0))
