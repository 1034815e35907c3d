"""The command line end to end: subcommands, flags, exit codes (README "What tlint guarantees")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tlint
from tests.cliutil import REPO, SYNTAX_ERROR, main_in, make_project, run_tlint, tlint_env
from tlint.rules import ALL_RULES

CLEAN = "import torch\n\nx = torch.zeros(3)\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "good.py": CLEAN})


# --- exit codes -------------------------------------------------------------------------


def test_syntax_error_is_a_finding_exit_1(project):
    proc = run_tlint("check", ".", cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert "bad.py:1:10: TL001 [error] syntax error" in proc.stdout
    assert "(parse-error)" in proc.stdout
    assert "= hint: tlint rule TL001" in proc.stdout
    assert "Found 1 finding in 1 of 2 files" in proc.stdout
    assert "\x1b[" not in proc.stdout  # not a terminal: no colour
    assert proc.stderr == ""


def test_clean_files_exit_0(project):
    proc = run_tlint("good.py", cwd=project)
    assert proc.returncode == 0
    assert "No findings in 1 file." in proc.stdout


def test_exit_zero_forces_0(project):
    assert run_tlint("--exit-zero", ".", cwd=project).returncode == 0


def test_default_subcommand_is_check(project):
    implicit = run_tlint(".", "--format", "json", cwd=project)
    explicit = run_tlint("check", ".", "--format", "json", cwd=project)
    assert implicit.returncode == explicit.returncode == 1
    assert implicit.stdout == explicit.stdout


def test_subcommand_name_wins_over_folder_of_that_name(tmp_path):
    make_project(tmp_path, {"rule/bad.py": SYNTAX_ERROR})
    as_command = run_tlint("rule", cwd=tmp_path)
    assert as_command.returncode == 2
    assert "tlint rule TL101" in as_command.stderr
    as_folder = run_tlint("./rule", cwd=tmp_path)
    assert as_folder.returncode == 1
    assert "rule/bad.py:1:10: TL001" in as_folder.stdout


def test_missing_path_exit_2_after_linting_the_others(project):
    proc = run_tlint("nope", "bad.py", "good.py", cwd=project)
    assert proc.returncode == 2
    assert "nope: no such file or folder" in proc.stderr
    assert "bad.py:1:10: TL001" in proc.stdout


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_unknown_code_in_selection_flags_exit_2(project, flag):
    proc = run_tlint(flag, "TL101,TL999", ".", cwd=project)
    assert proc.returncode == 2
    assert "TL999" in proc.stderr and flag in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_selection_by_name_prefix_and_all(project):
    assert run_tlint("--select", "parse-error", ".", cwd=project).returncode == 1
    assert run_tlint("--select", "ALL", "--ignore", "TL0", ".", cwd=project).returncode == 0
    assert run_tlint("--select", "TL1,TL2", ".", cwd=project).returncode == 0
    assert run_tlint("--ignore", "parse-error", ".", cwd=project).returncode == 0


def test_bad_arguments_are_one_line_usage_errors(project):
    for args in (["--format", "xml", "."], ["--jobs", "many", "."], ["--fail-on", "fatal", "."], ["--bogus", "."]):
        proc = run_tlint(*args, cwd=project)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("tlint: error: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_no_arguments_is_a_usage_error(tmp_path):
    proc = run_tlint(cwd=tmp_path)
    assert proc.returncode == 2
    assert "usage: tlint" in proc.stderr


def test_fail_on_threshold(project):
    assert run_tlint("--fail-on", "error", ".", cwd=project).returncode == 1
    assert run_tlint("--fail-on", "info", "good.py", cwd=project).returncode == 0


def test_internal_error_exit_2_even_with_exit_zero(tmp_path, monkeypatch, capsys):
    make_project(tmp_path, {"a.py": CLEAN})
    rule = next(r for r in ALL_RULES if r.code == "TL101")

    def boom(self, ctx):
        raise RuntimeError("boom in a rule")

    monkeypatch.setattr(rule, "check", boom)
    proc = main_in(tmp_path, "check", "a.py", "--jobs", "1", "--exit-zero", "--verbose",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2
    assert "a.py:1:1: TL003 [error] rule TL101 (missing-attention-mask) failed" in proc.stdout
    assert "Traceback" in proc.stderr and "RuntimeError: boom in a rule" in proc.stderr
    assert re.search(r"checked 1 files in [0-9.]+s", proc.stderr)


# --- flags ------------------------------------------------------------------------------


def test_stdin_filename(tmp_path):
    make_project(tmp_path, {"quiet/tlint.toml": 'ignore = ["TL001"]\n'})
    proc = run_tlint("check", "--stdin-filename", "pkg/mod.py", "--format", "json", cwd=tmp_path, stdin=SYNTAX_ERROR)
    assert proc.returncode == 1
    diags = json.loads(proc.stdout)["diagnostics"]
    assert [(d["path"], d["code"], d["range"]["start"]) for d in diags] == [
        ("pkg/mod.py", "TL001", {"line": 1, "column": 10})]
    # the config is looked up from the named file's folder, which need not exist
    quiet = run_tlint("--stdin-filename", "quiet/mod.py", "-", cwd=tmp_path, stdin=SYNTAX_ERROR)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    clash = run_tlint("--stdin-filename", "x.py", "other.py", cwd=tmp_path, stdin="")
    assert clash.returncode == 2


def test_stdin_text_report_shows_the_stdin_source(tmp_path):
    proc = run_tlint("--stdin-filename", "mod.py", cwd=make_project(tmp_path, {}), stdin=SYNTAX_ERROR)
    assert proc.returncode == 1
    assert '1 | x = "😀" +' in proc.stdout


def test_statistics(project):
    (project / "worse.py").write_text("def f(:\n", encoding="utf-8")
    proc = run_tlint("--statistics", ".", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "  count  fixable  code   name         severity",
        "      2        0  TL001  parse-error  error",
    ]
    as_json = run_tlint("--statistics", "--format", "json", ".", cwd=project)
    assert json.loads(as_json.stdout) == [{"code": "TL001", "name": "parse-error", "severity": "error", "count": 2,
                                           "fixable": 0}]
    assert run_tlint("--statistics", "--format", "github", ".", cwd=project).returncode == 2


def test_show_suppressed(tmp_path):
    make_project(tmp_path, {"sup.py": "x = (1,  # tlint: ignore[TL001]\n"})
    hidden = run_tlint(".", cwd=tmp_path)
    assert hidden.returncode == 0
    assert "TL001" not in hidden.stdout
    assert "1 suppressed" in hidden.stdout
    shown = run_tlint("--show-suppressed", ".", cwd=tmp_path)
    assert shown.returncode == 0  # suppressed findings never count
    assert "sup.py:1:5: TL001 [error]" in shown.stdout and "[suppressed]" in shown.stdout
    as_json = json.loads(run_tlint("--show-suppressed", "--format", "json", ".", cwd=tmp_path).stdout)
    assert [d["suppressed"] for d in as_json["diagnostics"]] == [True]


def test_output_independent_of_jobs(tmp_path):
    files = {f"m{i}.py": (SYNTAX_ERROR if i % 2 else CLEAN) for i in range(6)}
    make_project(tmp_path, files)
    one = run_tlint("--jobs", "1", "--format", "json", ".", cwd=tmp_path)
    many = run_tlint("--jobs", "2", "--format", "json", ".", cwd=tmp_path)
    assert one.returncode == many.returncode == 1
    assert one.stdout == many.stdout
    assert run_tlint("--no-cache", ".", cwd=tmp_path).returncode == 1


def test_version(tmp_path):
    proc = run_tlint("--version", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == f"tlint {tlint.__version__}\n"


def test_cli_imports_neither_torch_nor_heavy_modules(tmp_path):
    make_project(tmp_path, {"a.py": CLEAN, "tlint.toml": '[verify]\nmodel = "pkg.mod:factory"\n'})
    code = (
        "import sys, tlint.cli\n"
        "print(sorted(m for m in ('torch', 'rich', 'libcst') if m in sys.modules))\n"
        "code = tlint.cli.main(['check', '.', '--format', 'json'])\n"
        "print(code, 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=tlint_env(), timeout=60)
    lines = proc.stdout.splitlines()
    assert lines[0] == "[]", proc.stderr
    assert lines[-1] == "0 False"


# --- tlint rule -------------------------------------------------------------------------


def test_rule_prints_its_document(tmp_path):
    doc = (REPO / "rules" / "TL001-parse-error.md").read_text(encoding="utf-8")
    by_code = run_tlint("rule", "TL001", cwd=tmp_path)
    assert by_code.returncode == 0
    assert by_code.stdout == doc
    assert run_tlint("rule", "parse-error", cwd=tmp_path).stdout == doc


def test_rule_unknown_exit_2(tmp_path):
    proc = run_tlint("rule", "TL999", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown rule `TL999`" in proc.stderr


def test_rule_without_document_prints_its_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tlint.docs.rule_doc", lambda code: None)
    proc = main_in(tmp_path, "rule", "TL003", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0
    out = proc.stdout
    assert out.startswith("# TL003 internal-error\n")
    assert next(r for r in ALL_RULES if r.code == "TL003").summary in out


def test_rule_all_json(tmp_path):
    proc = run_tlint("rule", "--all", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0
    entries = json.loads(proc.stdout)
    assert [e["code"] for e in entries] == [r.code for r in ALL_RULES]
    for entry, rule in zip(entries, ALL_RULES):
        assert set(entry) == {"code", "name", "kind", "severity", "default_enabled", "summary", "doc"}
        assert (entry["name"], entry["kind"], entry["severity"], entry["default_enabled"], entry["summary"]) == (
            rule.name, rule.kind, rule.severity, rule.default_enabled, rule.summary)
        path = REPO / "rules" / f"{rule.code}-{rule.name}.md"
        assert entry["doc"] == (path.read_text(encoding="utf-8") if path.exists() else None)
    single = json.loads(run_tlint("rule", "TL001", "--format", "json", cwd=tmp_path).stdout)
    assert single == entries[0]


# --- packaging and README -----------------------------------------------------------------


@pytest.mark.slow  # builds the wheel
def test_wheel_ships_rule_docs_and_prints_them_installed(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("tlint_pytorch-*.whl")  # the distribution's name (README "Install")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    docs = sorted(p.name for p in (REPO / "rules").glob("TL*.md"))
    assert docs and all(f"tlint/_rules_docs/{name}" in names for name in docs)
    assert "tlint/cli.py" in names and not any(n.startswith(("tests/", "fixtures/")) for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "tlint = tlint.cli:main" in (tmp_path / "site" / entry_points).read_text()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = tlint_env(PYTHONPATH=str(tmp_path / "site"))
    where = subprocess.run([sys.executable, "-c", "import tlint.docs; print(tlint.docs.docs_dir())"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(tmp_path / "site" / "tlint" / "_rules_docs"), where.stderr
    code = docs[0].split("-")[0]
    proc = run_tlint("rule", code, cwd=elsewhere, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (REPO / "rules" / docs[0]).read_text(encoding="utf-8")


def test_readme_rule_list_is_generated():
    script = REPO / "scripts" / "gen_readme_rules.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = quick_start.strip().splitlines()
    assert commands == ["pip install . && tlint check fixtures/demo",
                        "pip install torch==2.13.0 -e '.[dev]' && TLINT_REQUIRE_TORCH=1 python -m pytest -q -n auto "
                        "--dist loadgroup"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == commands[1]
    words = commands[1].split("-m pytest", 1)[1].split()
    assert "-n" in words and "-m" not in words and "-k" not in words  # in parallel, and every test
    assert '-m "not slow"' in readme.split("## Quick start", 1)[1].split("## ", 1)[0]  # the quick subset
    assert "export TLINT_REQUIRE_TORCH=1" in ci  # the house checks' own steps run with it too


def test_verify_memory_limit_help_says_the_cap_is_per_process(capsys):
    """The child's memory cap is per process: DataLoader workers each inherit it, so a
    loader with N workers can take N+1 times it (README "Memory" says how to bound a run)."""
    from tlint.cli import main

    assert main(["verify", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "per process: each DataLoader worker has its own, so N workers can take N+1 times it" in help_text
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "a loader with N workers can take N+1 times `memory-limit` plus 1 GiB in all" in readme
