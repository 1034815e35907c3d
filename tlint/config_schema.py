"""The JSON Schema of tlint's configuration (`[tool.tlint]` in a pyproject.toml, the top
level of a tlint.toml), built from the code that reads it, so that editors complete and
check the table: `tlint --show-config-schema` prints it; `schema/tlint-config.schema.json` is
the committed copy (tests/test_config_schema.py checks that it is current, and that the
schema accepts exactly what the loader accepts).

Built from: the keys `config.TOP_KEYS`, `config.VERIFY_KEYS` and `config.DOCTOR_KEYS`; rule codes, names and
prefixes (`rules.ALL_RULES`, matched without regard to case as `config.validate_selector`
and `rules.lookup` do); `diagnostics.SEVERITIES`; each rule's options, typed by their
defaults as `config._same_type` checks them; the verifier's checks
(`verify.options.KEY_CHECKS`, its call styles, dotted paths, padding sides, the shortest
`seq-len`; `verify.data.FIELDS`). What a schema cannot say is left to tlint's own message:
the same rule both selected and ignored, and an output path (`cache-dir`, `artifacts`)
that resolves outside the config's folder."""

from __future__ import annotations

import json
from typing import Any


def _any_case(words: list[str]) -> str:
    """A regex matching any of `words` whole, each letter in either case (JSON Schema's
    regex dialect has no case-insensitive flag)."""
    def letters(word: str) -> str:
        out = []
        for ch in word:
            if ch.isalpha():
                out.append(f"[{ch.upper()}{ch.lower()}]")
            elif ch in r".^$*+?()[]{}|\-/":
                out.append("\\" + ch)
            else:
                out.append(ch)
        return "".join(out)

    return "^(?:" + "|".join(letters(w) for w in sorted(set(words), key=lambda w: (-len(w), w))) + ")$"


def _selector() -> dict[str, Any]:
    """A rule selector: a code, a code prefix (`TL3`), a name, a kind (`practice`), or `ALL`,
    in any case."""
    from tlint.rules import ALL_RULES
    from tlint.rules.base import KINDS

    codes = [rule.code for rule in ALL_RULES]
    prefixes = sorted({code[:i] for code in codes for i in range(2, len(code))})
    names = [rule.name for rule in ALL_RULES]
    return {"type": "string", "anyOf": [{"enum": ["ALL", *KINDS, *codes, *names, *prefixes]},
                                        {"pattern": _any_case(["ALL", *KINDS, *codes, *names, *prefixes])}]}


def _option_schema(default: Any) -> dict[str, Any]:
    """A rule option's schema, from its default (as `config._same_type` compares)."""
    if isinstance(default, bool):
        return {"type": "boolean", "default": default}
    if isinstance(default, (int, float)):
        return {"type": "number", "default": default}
    if isinstance(default, (list, tuple)):
        return {"type": "array", "default": list(default)}
    if isinstance(default, str):
        return {"type": "string", "default": default}
    return {"type": "object"}


def _rules() -> dict[str, Any]:
    from tlint.rules import ALL_RULES

    properties: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    for rule in ALL_RULES:
        table = {"$ref": f"#/definitions/{rule.code}"}
        properties[rule.name] = table
        patterns[_any_case([rule.code, rule.name])] = table
    return {"type": "object", "description": "[tool.tlint.rules.<rule-name>]: each rule's options",
            "properties": properties, "patternProperties": patterns, "additionalProperties": False}


def _definitions() -> dict[str, Any]:
    """Each rule's options table (`rules.<rule-name>`, by code or name)."""
    from tlint.rules import ALL_RULES

    return {rule.code: {"type": "object", "description": f"{rule.code} ({rule.name}): {rule.summary}",
                        "properties": {option: _option_schema(default) for option, default in rule.options.items()},
                        "additionalProperties": False} for rule in ALL_RULES}


def _severity() -> dict[str, Any]:
    from tlint.diagnostics import SEVERITIES
    from tlint.rules import ALL_RULES

    level = {"type": "string", "enum": list(SEVERITIES)}
    words = [w for rule in ALL_RULES for w in (rule.code, rule.name)]
    return {"type": "object", "description": "a rule's severity, overridden: {TL301 = \"error\"}",
            "properties": {rule.code: level for rule in ALL_RULES},
            "patternProperties": {_any_case(words): level}, "additionalProperties": False}


def _verify() -> dict[str, Any]:
    from tlint.config import VERIFY_KEYS
    from tlint.verify.data import FIELDS
    from tlint.verify.options import _DOTTED, CALL_STYLES, KEY_CHECKS, MIN_SEQ_LEN, PADDING_SIDES

    dotted = {"type": "string", "pattern": _DOTTED.pattern}
    properties: dict[str, Any] = {key: dict(check[2]) for key, (_, check) in KEY_CHECKS.items()}
    properties["model"] = {**dotted, "description": "the model: `package.module:factory` (or an nn.Module class)"}
    properties["optimizer"] = {**dotted, "description": "`package.module:make_optimizer`, callable(model)"}
    properties["data-ab-model"] = {**dotted, "description": "the model data-ab trains instead of `model`: "
                                   "`package.module:factory` (`data-ab-model-kwargs` are passed to it)"}
    properties["call"] = {"type": "string", "description": "how forward is called: a built-in style or "
                          "`package.module:adapter`", "anyOf": [{"enum": list(CALL_STYLES)}, dotted]}
    properties["padding-side"] = {"type": "string", "enum": list(PADDING_SIDES)}
    properties["seq-len"] = {"type": "integer", "minimum": MIN_SEQ_LEN}
    loader = {"type": "string", "pattern": r"^[^:]+:[\s\S]+$",
              "description": "`package.module:name`: a callable returning an iterable of batches, or the iterable"}
    properties["dataloader"] = loader
    properties["eval-dataloader"] = loader
    properties["eos-token-id"] = {"type": "integer"}
    properties["fields"] = {"type": "object", "description": "which batch keys hold the ids, mask and labels",
                            "properties": {name: {"type": "string"} for name in FIELDS},
                            "additionalProperties": False}
    missing = set(VERIFY_KEYS) - set(properties)
    assert not missing, f"verify keys without a schema: {sorted(missing)}"
    return {"type": "object", "description": "[tool.tlint.verify]: settings of tlint verify and tlint scan-data",
            "properties": {key: properties[key] for key in sorted(VERIFY_KEYS)}, "additionalProperties": False}


def _doctor() -> dict[str, Any]:
    from tlint.config import DOCTOR_KEYS

    properties = {
        "train": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                  "description": "the training command tlint doctor traces (tlint trace): [\"python\", \"train.py\", "
                                 "...], `python -m MODULE`, `torchrun ...` or `accelerate launch ...`, run in the "
                                 "config's folder"},
        "train-steps": {"type": "integer", "minimum": 0, "default": 5,
                        "description": "the optimizer steps traced (0: the whole run)"},
    }
    assert set(properties) == DOCTOR_KEYS
    return {"type": "object", "description": "[tool.tlint.doctor]: settings of tlint doctor",
            "properties": properties, "additionalProperties": False}


def config_schema() -> dict[str, Any]:
    """The schema of the `[tool.tlint]` table (or a whole tlint.toml)."""
    from tlint.config import DEFAULT_EXCLUDE, TOP_KEYS

    selectors = {"type": "array", "items": {"$ref": "#/definitions/selector"}}
    strings = {"type": "array", "items": {"type": "string"}}
    properties: dict[str, Any] = {
        "select": {**selectors, "description": "the rules to run: codes, prefixes (TL3), names, kinds "
                                               "(defect, likely-defect, practice) or ALL (replaces the default set)"},
        "ignore": {**selectors, "description": "rules not to run"},
        "extend-select": {**selectors, "description": "rules to run on top of the default set (e.g. \"practice\": "
                                                      "the advice rules, off by default)"},
        "per-file-ignores": {"type": "object", "description": "{\"glob\" = [codes]}: rules not to run on matching "
                                                              "files (globs relative to the config's folder)",
                             "additionalProperties": selectors},
        "exclude": {**strings, "default": list(DEFAULT_EXCLUDE),
                    "description": "folders and files never linted when walking folders (replaces the defaults)"},
        "extend-exclude": {**strings, "description": "more folders and files never linted, on top of the defaults"},
        "force-exclude": {"type": "boolean", "default": False,
                          "description": "skip excluded files even when named on the command line"},
        "severity": _severity(),
        "rules": _rules(),
        "verify": _verify(),
        "doctor": _doctor(),
        "causal-names": {**strings, "description": "class-name parts that mark a causal (decoder) model"},
        "cache-dir": {"type": "string", "pattern": r"\S", "default": ".tlint_cache",
                      "description": "the cache folder, relative to the config's folder (and inside it)"},
    }
    assert set(properties) == set(TOP_KEYS), sorted(set(properties) ^ set(TOP_KEYS))
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "title": "tlint configuration ([tool.tlint] in pyproject.toml, or tlint.toml)",
            "type": "object", "properties": {key: properties[key] for key in sorted(properties)},
            "additionalProperties": False, "definitions": {"selector": _selector(), **_definitions()}}


def pyproject_schema() -> dict[str, Any]:
    """A pyproject.toml's schema where tlint checks only its own table, `[tool.tlint]`
    (everything else is allowed)."""
    table = config_schema()
    definitions = table.pop("definitions")
    del table["$schema"]
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "title": "pyproject.toml, its [tool.tlint] table checked (tlint's part only)",
            "type": "object", "properties": {"tool": {"type": "object", "properties": {"tlint": table}}},
            "definitions": definitions}


SCHEMAS = {"tlint": config_schema, "pyproject": pyproject_schema}
FILES = {"tlint": "schema/tlint-config.schema.json", "pyproject": "schema/pyproject-tlint.schema.json"}


def schema_text(which: str = "tlint") -> str:
    """The schema as `tlint --show-config-schema [tlint|pyproject]` prints it and the committed
    file (`FILES`) holds."""
    return json.dumps(SCHEMAS[which](), indent=2) + "\n"

