"""The pre-commit hook works as users install it: `pre-commit try-repo` builds tlint in a
fresh environment (without torch) and runs it on the named files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")
def test_pre_commit_try_repo_runs_the_hook(tmp_path):
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "tlint", "--files", "fixtures/demo/train.py"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output  # the demo has findings: the hook fails the commit
    assert "TL301" in output and "TL304" in output and "TL101" in output, output
