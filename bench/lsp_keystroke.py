"""Time the language server's lint of one edited file that imports a 150-file package
(run by hand, not in CI): `python bench/lsp_keystroke.py [--files 150] [--work DIR] [--tlint-path=OLD_TREE]`.

The package is made of copies of the installed transformers' `modeling_*.py` files (real
code of real size; 150 by default) under WORK/proj/pkg/, with an `__init__.py` importing
every module, and WORK/proj/train.py imports the package. Reported: the first lint (the
project's facts read and analysed) and the median of ten keystrokes after it (the edited
text changes; the package does not), as the server's `lint_text` does them, in-process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

_TREE = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--tlint-path=")), None)
sys.path.insert(0, _TREE or str(Path(__file__).resolve().parent.parent))

TRAIN = '''import torch
from pkg import *  # noqa: F403


def train(model, loader, optimizer):
    for batch in loader:
        loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        loss.backward()
        optimizer.step()
'''


def make_project(work: Path, count: int) -> Path:
    import transformers

    sources = sorted(Path(transformers.__file__).parent.glob("models/*/modeling_*.py"))[:count]
    if len(sources) < count:
        raise SystemExit(f"only {len(sources)} modeling files in the installed transformers")
    root = work / "proj"
    if root.exists():
        shutil.rmtree(root)
    (root / ".git").mkdir(parents=True)
    (root / "pkg").mkdir()
    names = []
    for i, source in enumerate(sources):
        name = f"m{i:03d}"
        shutil.copyfile(source, root / "pkg" / f"{name}.py")
        names.append(name)
    (root / "pkg" / "__init__.py").write_text("".join(f"from . import {n}\n" for n in names))
    (root / "train.py").write_text(TRAIN)
    old = time.time() - 60  # settled files, as in an editor session
    for path in root.rglob("*.py"):
        import os

        os.utime(path, (old, old))
    return root


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "tlint-lsp-bench")
    parser.add_argument("--keystrokes", type=int, default=10)
    parser.add_argument("--tlint-path", help="time another checkout (`--tlint-path=TREE`)")
    args = parser.parse_args()
    root = make_project(args.work, args.files)
    time.sleep(2.1)  # change times settle (tlint/project_memory.py)
    from tlint import lsp_server

    path = root / "train.py"
    text = TRAIN
    started = time.perf_counter()
    first = lsp_server.lint_text(path, text, "utf-16")
    cold = time.perf_counter() - started
    times = []
    for i in range(args.keystrokes):
        text = text + f"# {i}\n"
        started = time.perf_counter()
        lsp_server.lint_text(path, text, "utf-16")
        times.append(time.perf_counter() - started)
    size = sum(p.stat().st_size for p in (root / "pkg").glob("*.py")) / 2**20
    print(f"package: {args.files} files, {size:.1f} MiB; findings on the edited file: {len(first.diagnostics)}")
    print(f"first lint: {cold:.2f} s; keystroke: median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s over {len(times)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
