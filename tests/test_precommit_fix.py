"""The `tlint-fix` and `tlint` pre-commit hooks, run as users install them.

A project's `.pre-commit-config.yaml` lists both hooks of the tlint repository, the fix
hook first; one `pre-commit run` builds tlint in a fresh environment (without torch) and
runs the hooks in order on a training file with a safe-fixable finding and one that has no
fix. The fix hook rewrites the file and fails the commit; the check hook, run on the
rewritten file, reports only what is left.

The tlint repository is a snapshot of the working tree (tracked and untracked, not
ignored, files) committed in a temporary repository: `pre-commit try-repo` on the working
tree would make a shadow commit of the tracked files' changes only (`git add -u`), missing
new modules, and try-repo builds its environment anew at every call (its store is a
temporary folder), while `pre-commit run` builds it once for both hooks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixutil import source

ROOT = Path(__file__).resolve().parent.parent

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

_GIT = ["git", "-c", "user.name=tlint-test", "-c", "user.email=tlint-test@example.invalid",
        "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run([*_GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _snapshot(dest: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) committed in `dest`."""
    listed = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() and not path.is_symlink():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def _config(repo: Path) -> str:
    rev = _git(repo, "rev-parse", "HEAD").strip()
    return (f"repos:\n-   repo: {repo}\n    rev: {rev}\n    hooks:\n"
            "    -   id: tlint-fix\n    -   id: tlint\n")


def _hook_outputs(output: str) -> dict[str, str]:
    """The output of each hook, by hook id (pre-commit prints `- hook id: ID` first)."""
    out = {}
    for part in output.split("- hook id: ")[1:]:
        hook, _, rest = part.partition("\n")
        out[hook.strip()] = rest
    return out


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="pre-commit needs git and the tlint repository")
def test_pre_commit_fix_hook_rewrites_then_check_hook_reports_what_is_left(tmp_path):
    repo = _snapshot(tmp_path / "tlint-src")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "train.py").write_text(source(TRAIN), encoding="utf-8")
    (project / ".pre-commit-config.yaml").write_text(_config(repo), encoding="utf-8")
    _git(project, "add", "train.py", ".pre-commit-config.yaml")
    _git(project, "commit", "-q", "-m", "train")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "train.py"],
                          cwd=project, capture_output=True, text=True, env=env, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    hooks = _hook_outputs(output)
    assert set(hooks) == {"tlint-fix", "tlint"}, output

    # tlint-fix applied the safe fix (TL305: scheduler after the optimiser) and failed
    assert "files were modified by this hook" in hooks["tlint-fix"], output
    fixed = (project / "train.py").read_text(encoding="utf-8")
    assert fixed == source(TRAIN).replace(
        "        scheduler.step()\n            optimizer.step()\n",
        "        optimizer.step()\n            scheduler.step()\n"), fixed
    assert fixed != source(TRAIN)

    # tlint (check), run next on the rewritten file, reports only what has no fix (TL304)
    assert "TL304" in hooks["tlint"] and "TL305" not in hooks["tlint"], output
    assert "files were modified by this hook" not in hooks["tlint"], output
