"""Configuration errors: exit 2, one line on stderr naming the file and the line (from
tomllib's message for TOML syntax, by a light scan of the file for the rest)."""

from __future__ import annotations

import pytest

from tests.cliutil import main_in, make_project
from tests.test_config import assert_config_error

CASES = {
    "toml-syntax": ("tlint.toml", 'select = ["TL101"\nignore = []\n', "tlint.toml:2:1", "invalid TOML"),
    "toml-unclosed-at-end": ("tlint.toml", "select = [", "tlint.toml:1", "invalid TOML"),
    "toml-duplicate-key": ("pyproject.toml", '[tool.tlint]\nselect = ["TL1"]\nselect = ["TL2"]\n',
                           "pyproject.toml:3:", "invalid TOML"),
    "list-expected": ("pyproject.toml", '[tool.ruff]\nselect = ["E"]\n\n[tool.tlint]\nselect = "TL101"\n',
                      "pyproject.toml:5", "`select` must be a list of strings"),
    "list-of-numbers": ("tlint.toml", "# comment\nexclude = [1, 2]\n", "tlint.toml:2", "`exclude` must be"),
    "table-expected": ("tlint.toml", 'severity = "error"\n', "tlint.toml:1", "`severity` must be a table"),
    "severity-value": ("tlint.toml", "[severity]\nTL101 = 3\n", "tlint.toml:2", "must be one of"),
    "per-file-ignores-value": ("tlint.toml", '[per-file-ignores]\n"tests/*" = "TL101"\n', "tlint.toml:2",
                               "must be a list"),
    "unknown-code-multiline": ("pyproject.toml", '[tool.tlint]\nselect = [\n  "TL101",\n  "TL777",\n]\n',
                               "pyproject.toml:4", "`TL777`"),
    "unknown-code-per-file": ("tlint.toml", '[per-file-ignores]\n"a.py" = ["TL1", "TL0000"]\n', "tlint.toml:2",
                              "`TL0000`"),
    "unknown-rule-table": ("tlint.toml", "[rules.TL999]\nx = 1\n", "tlint.toml:1", "unknown rule `TL999`"),
    "unknown-key": ("pyproject.toml", '[tool.tlint]\nselect = ["TL1"]\nfail-on = "error"\n',
                    "pyproject.toml:3", "unknown key `fail-on`"),
    "unknown-verify-key": ("tlint.toml", '[verify]\nmodle = "m:f"\n', "tlint.toml:2", "`modle`"),
    "conflict-select-ignore": ("tlint.toml", 'select = ["TL101"]\nignore = ["TL102",\n  "missing-attention-mask"]\n',
                               "tlint.toml:3", "conflicting options"),
    # a nesting deeper than the TOML reader's recursion, and a tlint setting of the wrong shape
    "toml-nested-too-deep": ("tlint.toml", "a = " + "[" * 3500 + "]" * 3500 + "\n", "tlint.toml:",
                             "nested too deeply"),
    "toml-inline-tables-too-deep": ("pyproject.toml", "[tool.tlint]\nx = " + "{a = " * 3500 + "1" + "}" * 3500,
                                    "pyproject.toml:", "nested too deeply"),
    "tool-tlint-not-a-table": ("pyproject.toml", "[tool]\ntlint = 5\n", "pyproject.toml:",
                               "`tool.tlint` must be a table"),
    "conflict-severity": ("tlint.toml", '[severity]\nTL101 = "warning"\nmissing-attention-mask = "info"\n',
                          "tlint.toml:3", "conflicting options"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_error_names_file_and_line(tmp_path, capsys, monkeypatch, case):
    name, text, where, what = CASES[case]
    make_project(tmp_path, {"a.py": "x = 1\n", name: text})
    proc = main_in(tmp_path, "check", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert_config_error(proc, where, what)


def test_rule_option_of_the_wrong_type(tmp_path, capsys, monkeypatch):
    from tlint.rules import ALL_RULES

    rule = next(r for r in ALL_RULES if any(not isinstance(v, bool) for v in r.options.values()))
    option, default = next((k, v) for k, v in rule.options.items() if not isinstance(v, bool))
    wrong = "true" if not isinstance(default, bool) else '"yes"'
    make_project(tmp_path, {"a.py": "x = 1\n", "tlint.toml": f"# options\n[rules.{rule.name}]\n{option} = {wrong}\n"})
    proc = main_in(tmp_path, "check", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert_config_error(proc, "tlint.toml:3", option)


def test_same_selector_in_select_and_ignore_of_other_files_is_no_conflict(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"a.py": "x = 1\n", "tlint.toml": 'select = ["TL1"]\nignore = ["TL101"]\n'})
    proc = main_in(tmp_path, "check", "--ignore", "TL1", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("target, needle", [("missing.toml", "config file not found"), ("folder", "is a folder")])
def test_config_flag_pointing_nowhere(tmp_path, capsys, monkeypatch, target, needle):
    make_project(tmp_path, {"a.py": "x = 1\n", "folder/x.txt": ""})
    proc = main_in(tmp_path, "check", "--config", target, ".", capsys=capsys, monkeypatch=monkeypatch)
    assert_config_error(proc, target, needle)


def test_config_flag_with_errors_names_its_line(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"a.py": "x = 1\n", "ci/lint.toml": '\n\nignore = ["nope"]\n'})
    proc = main_in(tmp_path, "check", "--config", "ci/lint.toml", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert_config_error(proc, "lint.toml:3", "`nope`")


def test_a_forced_config_ignores_a_broken_pyproject_on_the_way(tmp_path, capsys, monkeypatch):
    """`--config` decides the settings and the root: a broken `pyproject.toml` in the linted
    folder is not read (not even to find the paths' project)."""
    from tests.cliutil import main_in

    (tmp_path / "pyproject.toml").write_text("[tool.tlint\nbroken", encoding="utf-8")
    (tmp_path / "good.toml").write_text('select = ["TL1"]\n', encoding="utf-8")
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    proc = main_in(tmp_path, "check", "--no-cache", "--config", "good.toml", "a.py", ".", capsys=capsys,
                   monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    proc = main_in(tmp_path, "clean", "--config", "good.toml", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
