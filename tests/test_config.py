"""Configuration through the command line: where it is found, what it rejects (exit 2,
naming the key and the file), and what it changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cliutil import REPO, SYNTAX_ERROR, main_in, make_project
from tlint.config import load_settings
from tlint.rules import ALL_RULES


@pytest.fixture
def lint(capsys, monkeypatch):
    """lint(root, *flags): `tlint check FLAGS .` in `root`, in-process."""

    def run(root: Path, *args: str):
        return main_in(root, "check", *args, ".", capsys=capsys, monkeypatch=monkeypatch)

    return run


def assert_config_error(proc, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("tlint: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


def test_unknown_key_in_pyproject_names_key_and_file(tmp_path, lint):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR,
                            "pyproject.toml": '[project]\nname = "x"\n\n[tool.tlint]\nselekt = ["TL1"]\n'})
    proc = lint(tmp_path)
    assert_config_error(proc, "selekt", "pyproject.toml:5", "[tool.tlint]")


def test_unknown_code_in_config_is_an_error(tmp_path, lint):
    make_project(tmp_path, {"a.py": "x = 1\n", "tlint.toml": 'ignore = ["TL101", "TL777"]\n'})
    assert_config_error(lint(tmp_path), "TL777", "tlint.toml")


def test_invalid_toml_is_an_error(tmp_path, lint):
    make_project(tmp_path, {"a.py": "x = 1\n", "pyproject.toml": "[tool.tlint\n"})
    assert_config_error(lint(tmp_path), "pyproject.toml", "invalid TOML")


def test_tlint_toml_wins_over_pyproject_in_the_same_folder(tmp_path, lint):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "tlint.toml": 'ignore = ["TL001"]\n',
                            "pyproject.toml": '[tool.tlint]\nunknown-key = 1\n'})
    assert lint(tmp_path).returncode == 0


def test_pyproject_without_tlint_table_does_not_stop_the_walk(tmp_path, lint):
    make_project(tmp_path, {"tlint.toml": 'ignore = ["TL001"]\n', "sub/bad.py": SYNTAX_ERROR,
                            "sub/pyproject.toml": '[project]\nname = "sub"\n'})
    assert lint(tmp_path / "sub").returncode == 0
    # ... while one with a [tool.tlint] table does
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.tlint]\nextend-exclude = []\n', encoding="utf-8")
    assert lint(tmp_path / "sub").returncode == 1


def test_walk_stops_at_the_git_root(tmp_path, lint):
    make_project(tmp_path, {"tlint.toml": 'ignore = ["TL001"]\n'})
    make_project(tmp_path / "repo", {"bad.py": SYNTAX_ERROR})
    assert lint(tmp_path / "repo").returncode == 1


def test_rule_options_are_checked(tmp_path, lint):
    rule = next((r for r in ALL_RULES if r.options), None)
    if rule is None:
        pytest.skip("no rule declares options yet")
    option, default = next(iter(rule.options.items()))
    wrong = 1 if isinstance(default, str) else '"wrong"'
    header = f"[tool.tlint.rules.{rule.name}]"
    make_project(tmp_path, {"a.py": "x = 1\n", "pyproject.toml": f"{header}\n{option} = {wrong}\n"})
    assert_config_error(lint(tmp_path), option, rule.name, "pyproject.toml:2", "must be")
    (tmp_path / "pyproject.toml").write_text(f"{header}\nno-such-option = 1\n", encoding="utf-8")
    assert_config_error(lint(tmp_path), "no-such-option", "pyproject.toml:2")
    (tmp_path / "pyproject.toml").write_text("[tool.tlint.rules.no-such-rule]\n", encoding="utf-8")
    assert_config_error(lint(tmp_path), "no-such-rule", "pyproject.toml")


def test_verify_table_is_validated_by_check(tmp_path, lint):
    make_project(tmp_path, {"a.py": "x = 1\n",
                            "pyproject.toml": '[tool.tlint.verify]\nmodel = "pkg.mod:build"\nmodle = "x"\n'})
    assert_config_error(lint(tmp_path), "modle", "[tool.tlint.verify]", "pyproject.toml:3")
    (tmp_path / "pyproject.toml").write_text('[tool.tlint.verify]\nmodel = "pkg.mod:build"\n', encoding="utf-8")
    assert lint(tmp_path).returncode == 0


def test_severity_override_and_fail_on(tmp_path, lint):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "tlint.toml": '[severity]\nTL001 = "info"\n'})
    assert lint(tmp_path).returncode == 0
    assert lint(tmp_path, "--fail-on", "info").returncode == 1
    assert "TL001 [info]" in lint(tmp_path).stdout
    (tmp_path / "tlint.toml").write_text('[severity]\nparse-error = "warning"\n', encoding="utf-8")
    assert lint(tmp_path).returncode == 1
    assert lint(tmp_path, "--fail-on", "error").returncode == 0


def test_per_file_ignores(tmp_path, lint):
    make_project(tmp_path, {"gen/bad.py": SYNTAX_ERROR, "bad.py": SYNTAX_ERROR,
                            "tlint.toml": '[per-file-ignores]\n"gen/*" = ["parse-error"]\n'})
    proc = lint(tmp_path)
    assert proc.returncode == 1
    assert re.findall(r"^\S+:\d+:\d+: TL\d+", proc.stdout, re.MULTILINE) == ["bad.py:1:10: TL001"]


def test_exclude(tmp_path, lint, capsys, monkeypatch):
    make_project(tmp_path, {"vendored/bad.py": SYNTAX_ERROR, "tlint.toml": 'extend-exclude = ["vendored"]\n'})
    assert lint(tmp_path).returncode == 0
    # a file named on the command line is always linted
    assert main_in(tmp_path, "vendored/bad.py", capsys=capsys, monkeypatch=monkeypatch).returncode == 1


def test_dot_slash_patterns_keep_a_leading_dot(tmp_path, lint):
    """`./.scripts/*` is `.scripts/*` (only the `./` goes), in `per-file-ignores` and
    `exclude`; `./scripts/*` does not reach `.scripts/`."""
    make_project(tmp_path, {".scripts/bad.py": SYNTAX_ERROR, ".tools/bad.py": SYNTAX_ERROR,
                            "scripts/bad.py": SYNTAX_ERROR, "bad.py": SYNTAX_ERROR,
                            "tlint.toml": 'extend-exclude = ["./.tools"]\n'
                                          '[per-file-ignores]\n"./.scripts/*" = ["parse-error"]\n'})
    proc = lint(tmp_path)
    assert re.findall(r"^\S+(?=:\d+:\d+: TL001)", proc.stdout, re.MULTILINE) == ["bad.py", "scripts/bad.py"]
    settings = load_settings(tmp_path / "tlint.toml", tmp_path)
    assert settings.ignored_for(".scripts/bad.py") and not settings.ignored_for("scripts/bad.py")
    assert settings.is_excluded(".tools/bad.py") and not settings.is_excluded("tools/bad.py")
    settings.exclude, settings.per_file_ignores = ["././.tools/", "./scripts"], {"./scripts/*": ["TL001"]}
    assert settings.is_excluded(".tools/x.py") and settings.is_excluded("scripts/x.py")
    assert not settings.is_excluded(".scripts/x.py") and not settings.ignored_for(".scripts/x.py")


def test_command_line_wins_over_config(tmp_path, lint):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "tlint.toml": 'select = ["TL1"]\n'})
    assert lint(tmp_path).returncode == 0
    assert lint(tmp_path, "--select", "TL001").returncode == 1
    assert lint(tmp_path, "--extend-select", "TL0").returncode == 1


def test_forced_config_file(tmp_path, lint):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "tlint.toml": 'select = ["TL001"]\n',
                            "conf/quiet.toml": 'ignore = ["TL001"]\n'})
    assert lint(tmp_path, "--config", "conf/quiet.toml").returncode == 0
    assert_config_error(lint(tmp_path, "--config", "conf/missing.toml"), "conf/missing.toml", "not found")


def test_readme_configuration_example_is_valid(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    example = readme.split("## Configuration", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "pyproject.toml"
    path.write_text(example, encoding="utf-8")
    settings = load_settings(path, tmp_path)
    assert settings.causal_names == ("GPT", "CausalLM", "MyDecoder")


def test_a_config_that_names_no_rule_is_read_without_importing_the_rules(tmp_path):
    """`tlint verify` reads its settings so: the rule registry (and libcst) loads on first use,
    and a config that names a rule is still checked against it."""
    import os
    import subprocess
    import sys

    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "tlint.toml").write_text('[verify]\nmodel = "m:build"\n', encoding="utf-8")
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "tlint.toml").write_text('ignore = ["TL999"]\n', encoding="utf-8")
    code = (
        "import sys; from pathlib import Path; import tlint.config as c\n"
        f"s = c.load_settings(Path({str(tmp_path / 'plain' / 'tlint.toml')!r}), Path('.'))\n"
        "assert s.verify == {'model': 'm:build'}, s.verify\n"
        "assert 'tlint.rules' not in sys.modules and 'libcst' not in sys.modules\n"
        "try:\n"
        f"    c.load_settings(Path({str(tmp_path / 'named' / 'tlint.toml')!r}), Path('.'))\n"
        "except c.ConfigError as exc:\n"
        "    assert 'TL999' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('an unknown code passed')\n"
        "assert 'TL215' in c.BY_CODE and c.lookup('TL215').name == 'partial-pre-norm'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
