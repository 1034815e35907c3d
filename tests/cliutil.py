"""Helpers for end-to-end tests: small projects on disk, and `python -m tlint` on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tlint import cli

REPO = Path(__file__).resolve().parent.parent

# A file TL001 reports deterministically: the error is after the `+`, at line 1 column 10.
SYNTAX_ERROR = 'x = "😀" +\n'

# A DeepSpeed loop whose clipping lives in `ds.json` (a file the analysis reads): TL301
# holds while the JSON has no `gradient_clipping`.
DEEPSPEED_SCRIPT = (
    "import deepspeed\nfrom transformers import AutoModelForCausalLM\n\n\n"
    "def train(loader):\n"
    '    model = AutoModelForCausalLM.from_pretrained("gpt2")\n'
    '    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds.json")\n'
    "    for batch in loader:\n"
    '        loss = engine(batch["input_ids"], labels=batch["labels"]).loss\n'
    "        engine.backward(loss)\n"
    "        engine.step()\n"
)
# TL301 is a practice rule (off by default): the projects that lint DEEPSPEED_SCRIPT turn it on.
SELECT_TL301 = 'extend-select = ["TL301"]\n'


def make_project(root: Path, files: dict[str, str]) -> Path:
    """Write `files` under `root`, made a git root so the config walk stops there."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def tlint_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TLINT_OUTPUT_FORMAT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


def run_tlint(*args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None):
    """`python -m tlint ARGS` in `cwd`; the CompletedProcess (text, UTF-8)."""
    return subprocess.run(
        [sys.executable, "-m", "tlint", *args], cwd=cwd, input=stdin, capture_output=True,
        text=True, encoding="utf-8", env=env or tlint_env(), timeout=120,
    )


def main_in(root: Path, *args: str, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """`tlint ARGS` in-process (`cli.main`) in folder `root`: faster than a subprocess,
    for the many small cases; the result reads like `run_tlint`'s."""
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["tlint", *args], code, out, err)
