"""One tlint hook environment for every pre-commit test of a run: the working tree
(tracked and untracked, not ignored, files) committed once in a temporary repository, and
one pre-commit home. pre-commit keys its hook environments by (repository, rev), so the
first `pre-commit run` builds tlint (without torch) and the later ones reuse it. The tests
that use it share one xdist group, so they run on one worker, one after the other."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUP = "pre-commit"  # pytest.mark.xdist_group: one worker builds the environment once

_GIT = ["git", "-c", "user.name=tlint-test", "-c", "user.email=tlint-test@example.invalid",
        "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run([*_GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def snapshot(dest: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) committed in `dest`."""
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() and not path.is_symlink():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return dest


@dataclass(frozen=True)
class HookSource:
    repo: Path  # the snapshot repository, as a project's config names it
    rev: str  # its commit, as the README's snippet pins a full SHA
    home: Path  # PRE_COMMIT_HOME, shared by the run's pre-commit calls

    def env(self) -> dict[str, str]:
        env = dict(os.environ, PRE_COMMIT_HOME=str(self.home))
        env.pop("TLINT_OUTPUT_FORMAT", None)
        return env

    def project(self, where: Path, hooks: str) -> Path:
        """A git repository at `where` whose .pre-commit-config.yaml lists `hooks` (the
        YAML of the `hooks:` list, indented by 4) of the snapshot at its rev."""
        where.mkdir(parents=True, exist_ok=True)
        git(where, "init", "-q")
        config = f"repos:\n-   repo: {self.repo}\n    rev: {self.rev}\n    hooks:\n{hooks}"
        (where / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
        return where


def make_hook_source(base: Path) -> HookSource:
    repo = snapshot(base / "tlint-src")
    return HookSource(repo=repo, rev=git(repo, "rev-parse", "HEAD").strip(), home=base / "pre-commit-home")
