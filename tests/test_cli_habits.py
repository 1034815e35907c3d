"""Ruff's habits on tlint's command line: --output-format (and TLINT_OUTPUT_FORMAT), the
concise format, -o, -q/--silent, --show-settings/--show-files/--show-fixes, --fix-only,
--exit-non-zero-on-fix, --exclude/--extend-exclude/--force-exclude, --statistics' fixable
column, `tlint rule --list`; and a default output that does not change on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cliutil import main_in, make_project, run_tlint, tlint_env
from tests.fixutil import source
from tlint.rules import ALL_RULES

# TL305 (scheduler before the optimiser: a safe fix) and TL304 (no warmup: no fix)
TRAIN = """\
    \"\"\"Fine-tune BERT on a classification task.\"\"\"
    import torch
    from transformers import AutoModelForSequenceClassification


    def train(loader, epochs=3):
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
        for epoch in range(epochs):
            model.train()
            for batch in loader:
                loss = model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scheduler.step()
                optimizer.step()
                optimizer.zero_grad()
"""
TL304 = ("train.py:8:17: TL304 AdamW trains a transformer with no learning-rate warmup; ramp the rate up over the "
         "first steps (e.g. get_linear_schedule_with_warmup, or LinearLR(start_factor=0.01))")
TL305 = ("train.py:16:13: TL305 scheduler.step() before optimizer.step() skips the first value of the schedule "
         "(the start of the warmup); step the scheduler after the optimiser [*]")


# TL304 is a practice rule (info, off by default): the project turns it on as a warning, so
# that a run has a finding with no fix that fails it, beside TL305's fixable one.
CONFIG = 'extend-select = ["TL304"]\nseverity = { TL304 = "warning" }\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path, {"train.py": source(TRAIN), "legacy/old.py": source(TRAIN), "tlint.toml": CONFIG})


def run(project: Path, *args: str, capsys, monkeypatch):
    return main_in(project, *args, capsys=capsys, monkeypatch=monkeypatch)


# --- formats ----------------------------------------------------------------------------


def test_concise_is_one_line_a_finding_then_a_summary(project, capsys, monkeypatch):
    proc = run(project, "check", "--output-format", "concise", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [TL304, TL305, "Found 2 findings in 1 of 1 file; 1 fixable with --fix."]
    assert proc.stderr == ""


def test_format_is_an_alias_of_output_format(project, capsys, monkeypatch):
    new = run(project, "check", "--output-format", "json", ".", capsys=capsys, monkeypatch=monkeypatch)
    old = run(project, "check", "--format", "json", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert new.stdout == old.stdout and json.loads(new.stdout)["summary"]["diagnostics"] == 4
    for command in (["rule", "TL101"], ["verify", "--list-probes"]):
        assert run(project, *command, "--output-format", "json" if command[0] == "rule" else "text",
                   capsys=capsys, monkeypatch=monkeypatch).returncode == 0


def test_output_format_environment_variable(project, capsys, monkeypatch):
    monkeypatch.setenv("TLINT_OUTPUT_FORMAT", "concise")
    proc = run(project, "check", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.stdout.splitlines()[:2] == [TL304, TL305]
    flag = run(project, "check", "--output-format", "json", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert json.loads(flag.stdout)["summary"]["diagnostics"] == 2  # the flag wins
    rule = run(project, "rule", "--list", capsys=capsys, monkeypatch=monkeypatch)  # rule has no concise: text
    assert rule.returncode == 0 and rule.stdout.startswith("TL001  parse-error")
    monkeypatch.setenv("TLINT_OUTPUT_FORMAT", "json")
    rule = run(project, "rule", "--list", capsys=capsys, monkeypatch=monkeypatch)
    assert json.loads(rule.stdout)[0]["code"] == "TL001"
    monkeypatch.setenv("TLINT_OUTPUT_FORMAT", "xml")
    bad = run(project, "check", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("tlint: error: TLINT_OUTPUT_FORMAT='xml' is not an output format of tlint check "
                          "(one of: text, concise, json, github, lsp, sarif, junit)\n")


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """stdout of `python -m tlint ARGS` written to a pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tlint", *args], cwd=cwd, stdout=slave,
                            stderr=subprocess.DEVNULL, env=tlint_env())
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
@pytest.mark.parametrize("args", [["check", "."], ["rule", "TL101"]])
def test_default_output_is_the_same_on_a_terminal(project, args):
    """On a terminal the text format only adds colour; `tlint rule` prints its Markdown as is."""
    terminal = _on_a_terminal(args, project)
    piped = run_tlint(*args, cwd=project).stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", terminal) == piped
    assert ("\x1b[" in terminal) == (args[0] == "check")


# --- where the report goes, and how much of it -------------------------------------------


def test_output_file_takes_the_report(project, capsys, monkeypatch):
    plain = run(project, "check", "--output-format", "concise", ".", capsys=capsys, monkeypatch=monkeypatch)
    for flag in ("-o", "--output-file"):
        proc = run(project, "check", "--output-format", "concise", flag, "report.txt", ".",
                   capsys=capsys, monkeypatch=monkeypatch)
        assert proc.returncode == 1 and proc.stdout == ""
        assert (project / "report.txt").read_text(encoding="utf-8") == plain.stdout
    blocked = run(project, "check", "-o", "legacy", ".", capsys=capsys, monkeypatch=monkeypatch)  # a folder
    assert blocked.returncode == 2 and blocked.stderr.startswith("tlint: error: cannot write legacy (--output-file)")


def test_quiet_prints_only_the_findings_and_silent_nothing(project, capsys, monkeypatch):
    quiet = run(project, "check", "-q", "--output-format", "concise", "train.py", capsys=capsys,
                monkeypatch=monkeypatch)
    assert quiet.returncode == 1 and quiet.stdout.splitlines() == [TL304, TL305]
    text = run(project, "check", "--quiet", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert "TL305" in text.stdout and "Found" not in text.stdout and "fixable" not in text.stdout
    fixed = run(project, "check", "--fix", "-q", "--output-format", "concise", "train.py", capsys=capsys,
                monkeypatch=monkeypatch)
    assert fixed.stdout.splitlines() == [TL304] and fixed.stderr == ""  # no "fixed 1 finding" line
    for flag in ("-s", "--silent"):
        silent = run(project, "check", flag, ".", capsys=capsys, monkeypatch=monkeypatch)
        assert (silent.returncode, silent.stdout, silent.stderr) == (1, "", "")
    missing = run(project, "check", "--silent", "nowhere.py", capsys=capsys, monkeypatch=monkeypatch)
    assert missing.returncode == 2 and "nowhere.py: no such file or folder" in missing.stderr  # errors still


# --- show-settings, show-files, show-fixes ------------------------------------------------


def test_show_files_lists_what_a_run_would_lint(project, capsys, monkeypatch):
    proc = run(project, "check", "--show-files", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert (proc.returncode, proc.stdout) == (0, "legacy/old.py\ntrain.py\n")
    excluded = run(project, "check", "--show-files", "--extend-exclude", "legacy", ".", capsys=capsys,
                   monkeypatch=monkeypatch)
    assert excluded.stdout == "train.py\n"


def test_show_settings_prints_the_first_paths_settings(project, capsys, monkeypatch):
    (project / "tlint.toml").write_text('ignore = ["TL304"]\nextend-exclude = ["legacy"]\nforce-exclude = true\n',
                                        encoding="utf-8")
    proc = run(project, "check", "--show-settings", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0
    settings = dict(line.split(" = ", 1) for line in proc.stdout.splitlines())
    assert json.loads(settings["config"]) == (project / "tlint.toml").as_posix()
    assert json.loads(settings["root"]) == project.resolve().as_posix()
    assert json.loads(settings["ignore"]) == ["TL304"]
    assert "TL304" not in json.loads(settings["rules"]) and "TL305" in json.loads(settings["rules"])
    assert json.loads(settings["exclude"])[-1] == "legacy" and ".git" in json.loads(settings["exclude"])
    assert json.loads(settings["force-exclude"]) is True
    replaced = run(project, "check", "--show-settings", "--exclude", "a,b", "--exclude", "c", "--no-force-exclude",
                   ".", capsys=capsys, monkeypatch=monkeypatch)
    settings = dict(line.split(" = ", 1) for line in replaced.stdout.splitlines())
    assert json.loads(settings["exclude"]) == ["a", "b", "c"] and json.loads(settings["force-exclude"]) is False


def test_show_fixes_lists_what_fix_would_do_and_did(project, capsys, monkeypatch):
    would = run(project, "check", "--show-fixes", "-q", "--output-format", "concise", ".", capsys=capsys,
                monkeypatch=monkeypatch)
    assert would.stdout.splitlines()[-5:] == ["Would fix 2 findings:", "- legacy/old.py:",
                                              "    1 \u00d7 TL305 (scheduler-before-optimizer)", "- train.py:",
                                              "    1 \u00d7 TL305 (scheduler-before-optimizer)"]
    did = run(project, "check", "--fix", "--show-fixes", "--output-format", "concise", "train.py", capsys=capsys,
              monkeypatch=monkeypatch)
    assert did.returncode == 1  # TL304 is left
    assert did.stdout.splitlines() == [TL304, "Found 1 finding in 1 of 1 file.", "Fixed 1 finding:",
                                       "- train.py:", "    1 \u00d7 TL305 (scheduler-before-optimizer)"]
    assert did.stderr == "tlint: fixed 1 finding in 1 file, 1 left\n"
    again = run(project, "check", "--fix", "--show-fixes", "-q", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert again.stdout.splitlines()[-1] == "No fixes applied."


# --- fix-only, exit-non-zero-on-fix -------------------------------------------------------


def test_fix_only_fixes_and_reports_nothing(project, capsys, monkeypatch):
    proc = run(project, "check", "--fix-only", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert (proc.returncode, proc.stdout) == (0, "")  # TL304 is left, and --fix-only exits 0
    assert proc.stderr == "tlint: fixed 1 finding in 1 file\n"
    fixed = (project / "train.py").read_text(encoding="utf-8")
    assert fixed.index("optimizer.step()") < fixed.index("scheduler.step()")
    proc = run(project, "check", "--fix-only", "--exit-non-zero-on-fix", "legacy/old.py", capsys=capsys,
               monkeypatch=monkeypatch)
    assert proc.returncode == 1  # a fix was applied
    proc = run(project, "check", "--fix-only", "--exit-non-zero-on-fix", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0  # nothing left to fix
    usage = run(project, "check", "--fix-only", "--diff", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert usage.returncode == 2


def test_exit_non_zero_on_fix_with_nothing_left(tmp_path, capsys, monkeypatch):
    no_warmup = source(TRAIN).replace("model.parameters(), lr=2e-5)", "model.parameters(), lr=2e-5)  # noqa: TL304")
    project = make_project(tmp_path, {"train.py": no_warmup})
    proc = run(project, "check", "--fix", "--exit-non-zero-on-fix", "train.py", capsys=capsys,
               monkeypatch=monkeypatch)
    assert proc.returncode == 1 and proc.stdout.startswith("No findings in 1 file")  # fixed, nothing left: 1
    assert run(project, "check", "--fix", "--exit-non-zero-on-fix", "train.py", capsys=capsys,
               monkeypatch=monkeypatch).returncode == 0  # nothing fixed this time
    project.joinpath("train.py").write_text(no_warmup, encoding="utf-8")
    assert run(project, "check", "--fix", "train.py", capsys=capsys, monkeypatch=monkeypatch).returncode == 0


# --- exclude on the command line, force-exclude -------------------------------------------


def test_exclude_and_extend_exclude_flags(project, capsys, monkeypatch):
    (project / "tlint.toml").write_text(CONFIG + 'extend-exclude = ["legacy"]\n', encoding="utf-8")
    files = lambda *flags: run(project, "check", "--show-files", *flags, ".",  # noqa: E731
                               capsys=capsys, monkeypatch=monkeypatch).stdout.splitlines()
    assert files() == ["train.py"]
    assert files("--exclude", "nothing") == ["legacy/old.py", "train.py"]  # replaces the configured list
    assert files("--exclude", "nothing", "--extend-exclude", "train.py") == ["legacy/old.py"]
    proc = run(project, "check", "--output-format", "concise", "--extend-exclude", "train.py", ".", capsys=capsys,
               monkeypatch=monkeypatch)
    assert proc.stdout.splitlines()[-1] == "No findings in 0 files."


def test_force_exclude_skips_excluded_files_named_on_the_command_line(project, capsys, monkeypatch):
    (project / "tlint.toml").write_text(CONFIG + 'extend-exclude = ["legacy"]\n', encoding="utf-8")
    named = run(project, "check", "--output-format", "concise", "legacy/old.py", capsys=capsys,
                monkeypatch=monkeypatch)
    assert named.returncode == 1 and "legacy/old.py:16:13: TL305" in named.stdout  # named: linted
    forced = run(project, "check", "--output-format", "concise", "--force-exclude", "legacy/old.py", "train.py",
                 capsys=capsys, monkeypatch=monkeypatch)
    assert forced.stdout.splitlines() == [TL304, TL305, "Found 2 findings in 1 of 1 file; 1 fixable with --fix."]
    (project / "tlint.toml").write_text(CONFIG + 'extend-exclude = ["legacy"]\nforce-exclude = true\n', encoding="utf-8")
    configured = run(project, "check", "--output-format", "concise", "legacy/old.py", capsys=capsys,
                     monkeypatch=monkeypatch)
    assert (configured.returncode, configured.stdout) == (0, "No findings in 0 files.\n")
    overridden = run(project, "check", "--no-force-exclude", "-q", "--output-format", "concise", "legacy/old.py",
                     capsys=capsys, monkeypatch=monkeypatch)
    assert overridden.returncode == 1
    (project / "tlint.toml").write_text('force-exclude = "yes"\n', encoding="utf-8")
    bad = run(project, "check", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert bad.returncode == 2 and "`force-exclude` must be true or false" in bad.stderr


# --- statistics, rule --list --------------------------------------------------------------


def test_statistics_has_a_fixable_column(project, capsys, monkeypatch):
    proc = run(project, "check", "--statistics", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.stdout.splitlines() == [
        "  count  fixable  code   name                        severity",
        "      2        0  TL304  missing-warmup              warning",
        "      2        2  TL305  scheduler-before-optimizer  error",
    ]
    concise = run(project, "check", "--statistics", "--output-format", "concise", ".", capsys=capsys,
                  monkeypatch=monkeypatch)
    assert concise.stdout == proc.stdout
    as_json = run(project, "check", "--statistics", "--output-format", "json", ".", capsys=capsys,
                  monkeypatch=monkeypatch)
    assert [(row["code"], row["count"], row["fixable"]) for row in json.loads(as_json.stdout)] == [
        ("TL304", 2, 0), ("TL305", 2, 2)]


def test_rule_list_one_line_a_rule(project, capsys, monkeypatch):
    proc = run(project, "rule", "--list", capsys=capsys, monkeypatch=monkeypatch)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == len(ALL_RULES)
    for line, rule in zip(lines, ALL_RULES):
        code, name, kind, severity, state, summary = line.split(maxsplit=5)
        assert (code, name, kind, severity, state, summary) == (
            rule.code, rule.name, rule.kind, rule.severity, "on" if rule.default_enabled else "off", rule.summary)
    as_json = json.loads(run(project, "rule", "--list", "--output-format", "json", capsys=capsys,
                             monkeypatch=monkeypatch).stdout)
    assert [entry["code"] for entry in as_json] == [rule.code for rule in ALL_RULES] and "doc" not in as_json[0]
    both = run(project, "rule", "--list", "TL101", capsys=capsys, monkeypatch=monkeypatch)
    assert both.returncode == 2 and "--all or --list" in both.stderr
