"""The one pre-commit hook, run as users install it, in a real git repository.

A project's `.pre-commit-config.yaml` lists the tlint repository's `tlint` hook with
`args: [--fix]` and, on another file, its alias id `tlint-fix`; one `pre-commit run`
builds tlint in a fresh environment (without torch) and runs both. Each rewrites its file
(the safe fix of TL305), fails the commit, and reports once, one concise line, what has
no fix (TL304); a file the project's config excludes is skipped although pre-commit names
it (`--force-exclude` in the hook's entry).

The tlint repository is a snapshot of the working tree (tracked and untracked, not
ignored, files) committed in a temporary repository, shared with the other pre-commit
tests (tests/precommitutil.py): `pre-commit try-repo` on the working tree would make a
shadow commit of the tracked files' changes only (`git add -u`), missing new modules, and
try-repo builds its environment anew at every call (its store is a temporary folder),
while `pre-commit run` builds it once for every hook and test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.fixutil import source
from tests.precommitutil import GROUP, ROOT, git

# slow: builds tlint's hook environment (a virtualenv and a pip install) once per run
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(GROUP)]

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


def _hook_outputs(output: str) -> dict[str, str]:
    """The output of each hook, by hook id (pre-commit prints `- hook id: ID` first)."""
    out = {}
    for part in output.split("- hook id: ")[1:]:
        hook, _, rest = part.partition("\n")
        out[hook.strip()] = rest
    return out


FIXED = source(TRAIN).replace("        scheduler.step()\n            optimizer.step()\n",
                              "        optimizer.step()\n            scheduler.step()\n")
LEFT = ("{name}:8:17: TL304 AdamW trains a transformer with no learning-rate warmup; ramp the rate up over the first "
        "steps (e.g. get_linear_schedule_with_warmup, or LinearLR(start_factor=0.01))")


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="pre-commit needs git and the tlint repository")
def test_one_hook_fixes_and_reports_once(tmp_path, hook_source):
    project = hook_source.project(
        tmp_path / "project",
        "    -   id: tlint\n        args: [--fix]\n        files: ^(train\\.py|legacy/.*)$\n"
        "    -   id: tlint-fix\n        files: ^alias\\.py$\n")
    for name in ("train.py", "alias.py", "legacy/old.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(source(TRAIN), encoding="utf-8")
    # TL304 (practice, off by default) on, as a warning: a finding with no fix, left and reported
    (project / "tlint.toml").write_text('extend-exclude = ["legacy"]\nextend-select = ["TL304"]\n'
                                        'severity = { TL304 = "warning" }\n', encoding="utf-8")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "train")
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                          cwd=project, capture_output=True, text=True, env=hook_source.env(), timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    hooks = _hook_outputs(output)
    assert set(hooks) == {"tlint", "tlint-fix"}, output
    for hook, name in (("tlint", "train.py"), ("tlint-fix", "alias.py")):
        # the safe fix (TL305: the scheduler after the optimiser) is applied, and the commit fails
        assert "files were modified by this hook" in hooks[hook], output
        assert (project / name).read_text(encoding="utf-8") == FIXED != source(TRAIN)
        # what has no fix is reported once, on one line; what was fixed is not reported
        lines = [line for line in hooks[hook].splitlines() if ": TL" in line]
        assert lines == [LEFT.format(name=name)], output
        assert "tlint: fixed 1 finding in 1 file, 1 left" in hooks[hook], output
    # legacy/ is excluded by the config: named by pre-commit, skipped (force-exclude)
    assert (project / "legacy" / "old.py").read_text(encoding="utf-8") == source(TRAIN)
    assert "legacy" not in output, output
