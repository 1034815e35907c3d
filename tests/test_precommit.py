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
