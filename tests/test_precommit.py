"""The pre-commit hook works as users install it: a project's config names the tlint
repository at a commit, `pre-commit run` builds tlint in a fresh environment (without
torch) and runs the hook on the named files. The environment is the one every pre-commit
test of the run shares (tests/precommitutil.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.precommitutil import GROUP, ROOT, git

# slow: builds tlint's hook environment (a virtualenv and a pip install) once per run
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(GROUP)]


# duration: builds the hook environment that the other pre-commit test then reuses (tests/precommitutil.py)
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="pre-commit needs git and the tlint repository")
def test_pre_commit_runs_the_hook_on_the_named_files(tmp_path, hook_source):
    project = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", project)  # the hook names one file; tlint reads its project
    hook_source.project(project, "    -   id: tlint\n")
    git(project, "add", "-A")
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "train.py"],
                          cwd=project, capture_output=True, text=True, env=hook_source.env(), timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output  # the demo has findings: the hook fails the commit
    assert "TL301" in output and "TL304" in output and "TL101" in output, output


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="pre-commit needs git and the tlint repository")
def test_the_hook_lints_notebooks_and_stubs_in_one_run(tmp_path, hook_source):
    """`types_or: [python, pyi, jupyter]`: a notebook with the demo's bug fails the commit
    as `tlint check nb.ipynb` does; `require_serial`: 26 files are one tlint run, one summary."""
    from tests.notebookutil import TRAINER, write_notebook

    project = hook_source.project(tmp_path / "many", "    -   id: tlint\n")
    for number in range(24):
        (project / f"mod_{number:02}.py").write_text(f"X_{number} = {number}\n", encoding="utf-8")
    (project / "stub.pyi").write_text("def f(x: int) -> int: ...\n", encoding="utf-8")
    write_notebook(project / "nb.ipynb", TRAINER)
    git(project, "add", "-A")
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                          cwd=project, capture_output=True, text=True, env=hook_source.env(), timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "nb.ipynb:cell 6, line 3, column 10: TL101" in output, output
    summaries = [line for line in output.splitlines() if line.startswith("Found ")]
    assert summaries == ["Found 1 finding in 1 of 26 files."], output  # (TL101; TL111 is a practice rule, off)
