"""The JSON Schema of `[tool.tlint]` (tlint/config_schema.py): the committed files are the
generated ones, every key and option the loader knows is in it, and on a few hundred
generated configurations the schema accepts exactly what tlint's loader accepts."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests.cliutil import REPO, run_tlint
from tlint.config import DOCTOR_KEYS, TOP_KEYS, VERIFY_KEYS, ConfigError, load_settings
from tlint.config_schema import FILES, config_schema, pyproject_schema, schema_text
from tlint.diagnostics import SEVERITIES
from tlint.rules import ALL_RULES
from tlint.verify.data import resolve_data
from tlint.verify.options import OptionsError, resolve


def _validator(schema: dict) -> jsonschema.Draft7Validator:
    """A draft-07 validator whose `integer` is TOML's: 2.0 is a float in TOML (and to the
    loader), though JSON Schema counts a float without a fraction as an integer."""
    checker = jsonschema.Draft7Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    cls = jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=checker)
    return cls(schema)


SCHEMA = _validator(config_schema())


@pytest.mark.parametrize("which", sorted(FILES))
def test_committed_schema_is_the_generated_one(which):
    committed = (REPO / FILES[which]).read_text(encoding="utf-8")
    assert committed == schema_text(which), f"regenerate: tlint --show-config-schema {which} > {FILES[which]}"
    jsonschema.Draft7Validator.check_schema(json.loads(committed))


def test_command_prints_the_schema(tmp_path):
    proc = run_tlint("--show-config-schema", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == schema_text("tlint")
    proc = run_tlint("--show-config-schema", "pyproject", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout) == pyproject_schema()
    proc = run_tlint("--show-config-schema", "yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_every_key_and_option_is_in_the_schema():
    schema = config_schema()
    assert set(schema["properties"]) == TOP_KEYS
    assert set(schema["properties"]["verify"]["properties"]) == VERIFY_KEYS
    assert set(schema["properties"]["doctor"]["properties"]) == DOCTOR_KEYS
    for rule in ALL_RULES:
        table = schema["definitions"][rule.code]
        assert set(table["properties"]) == set(rule.options)
        for option, default in rule.options.items():
            kind = table["properties"][option]["type"]
            assert kind == ("boolean" if isinstance(default, bool) else "number" if isinstance(default, (int, float))
                            else "array" if isinstance(default, (list, tuple)) else "string"), (rule.code, option)
        assert schema["properties"]["rules"]["properties"][rule.name] == {"$ref": f"#/definitions/{rule.code}"}
    severity = schema["properties"]["severity"]
    assert {tuple(level["enum"]) for level in severity["properties"].values()} == {tuple(SEVERITIES)}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


VALUES = [
    True, 0, 3, -1, 0.5, 2.0, "", " ", "x", "a:b", "pkg.mod:make", "a:", "TL101", "tl101", "TL3", "ALL", "TL999",
    "missing-attention-mask", "right", "left", "ids,mask", "error", [], ["x"], ["TL101", "tl3", "all"], ["TL999"],
    ["T"], [1], {}, {"x": 1}, {"ids": "src"}, {"labels": "y", "extra": "z"}, {"mask": 1}, {"TL101": "error"},
    {"tl101": "warning", "TL3": "info"}, {"tl101": "warning"}, {"missing-grad-clipping": "error"},
    {"missing-grad-clipping": "ERROR"}, {"TL3": "error"},
    {"missing-grad-clipping": {"clip-functions": ["f"]}}, {"TL307": {"max-lr-scratch": 1}},
    {"tl307": {"max-lr-scratch": "x"}}, {"TL307": {"max-lr-scratch": True}}, {"TL307": {"nope": 1}}, {"TL101": []},
    {"TL999": {}}, {"gen/*": ["TL101"]}, {"gen/*": ["TL999"]}, {"gen/*": "TL101"}, {"n_layer": 2},
]


def _loader_accepts(tmp_path: Path, table: dict) -> bool:
    """What tlint says of this `[tool.tlint]` table: the loader, and for the verifier's keys
    the checks `tlint verify` and `tlint scan-data` make before running anything."""
    path = tmp_path / "tlint.toml"
    lines = [f"{json.dumps(key)} = {_toml(value)}" for key, value in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        settings = load_settings(path, tmp_path)
        if "verify" in table:
            resolve(settings.verify, path, tmp_path, {})
            resolve_data(settings.verify, path, tmp_path, {})
    except (ConfigError, OptionsError):
        return False
    return True


def _cases():
    for key, value in itertools.product(sorted(TOP_KEYS - {"verify"}), VALUES):
        yield {key: value}
    for key, value in itertools.product(sorted(DOCTOR_KEYS), VALUES):
        yield {"doctor": {key: value}}
    base = {"model": "pkg.mod:make", "dataloader": "pkg.data:loader"}
    for key, value in itertools.product(sorted(VERIFY_KEYS), VALUES):
        yield {"verify": {**base, key: value}}
    yield {"verify": "x"}
    yield {"verify": {**base, "no-such-key": 1}}
    yield {"no-such-key": 1}


def test_schema_accepts_what_the_loader_accepts(tmp_path):
    cases = list(_cases())
    assert len(cases) > 1000
    disagree = []
    verdicts = {True: 0, False: 0}
    for table in cases:
        loader = _loader_accepts(tmp_path, table)
        schema = SCHEMA.is_valid(table)
        verdicts[loader] += 1
        if loader != schema:
            disagree.append((table, "loader" if loader else "schema"))
    assert disagree == [], f"{len(disagree)} disagreements (table, the side that accepts it): {disagree[:10]}"
    assert verdicts[True] > 100 and verdicts[False] > 500, verdicts


def test_readme_examples_validate():
    from tlint.config import tomllib

    readme = (REPO / "README.md").read_text(encoding="utf-8")

    tables = 0
    for block in re.findall(r"```toml\n(.*?)```", readme, re.DOTALL):
        data = tomllib.loads(block)
        table = data.get("tool", {}).get("tlint")
        if table is not None:  # a pyproject.toml
            assert _validator(pyproject_schema()).is_valid(data)
        elif data and set(data) <= TOP_KEYS:  # a tlint.toml
            table = data
        if table is not None:
            tables += 1
            assert SCHEMA.is_valid(table), [e.message for e in SCHEMA.iter_errors(table)]
    assert tables >= 2


def test_what_a_schema_cannot_say_is_left_to_the_loader(tmp_path):
    """The two checks no schema can make: a rule both selected and ignored, and an output
    path outside the config's folder. The schema accepts them; tlint says why not."""
    for table in ({"select": ["TL101"], "ignore": ["TL101"]}, {"cache-dir": "../elsewhere"}):
        assert SCHEMA.is_valid(table)
        assert not _loader_accepts(tmp_path, table)
