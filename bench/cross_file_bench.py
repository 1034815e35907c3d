"""The cross-file phase alone, on a synthetic import-connected project (run by hand):

    PYTHONPATH=TREE python bench/cross_file_bench.py N

A package of N modules whose `__init__` imports every module, each module importing a
shared `utils` and its neighbour; facts are given (every file `pads` and `transformer`,
every tenth a `tokenizer`), nothing is parsed; prints the seconds of
`project_phase.resolve_projects`. The project is written under /tmp/tlint-cross-file-N."""
import argparse
import shutil
import sys
import time
from pathlib import Path

from tlint.config import ConfigResolver
from tlint.diagnostics import Position, Range
from tlint.discovery import discover
from tlint.engine import Fact, FileResult, Linter, analyse_file, display_path
from tlint.fact_data import TokenizerFact
from tlint.project_phase import resolve_projects

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("n", type=int, help="modules in the synthetic package (e.g. 3000)")
n = parser.parse_args().n
if n < 1:
    parser.error("N must be at least 1")
root = Path(f"/tmp/tlint-cross-file-{n}")
if root.exists():
    shutil.rmtree(root)
(root / "pkg").mkdir(parents=True)
(root / "pkg" / "__init__.py").write_text("".join(f"from .sub{i // 50}.m{i} import *\n" for i in range(n)))
(root / "pkg" / "utils.py").write_text("X = 1\n")
for i in range(n):
    d = root / "pkg" / f"sub{i // 50}"
    d.mkdir(exist_ok=True)
    (d / "__init__.py").touch()
    (d / f"m{i}.py").write_text("from ...utils import X\n" + (f"from .m{i-1} import *\n" if i % 50 else ""))
linter = Linter(ConfigResolver(), jobs=1, select=["ALL"])
files, _ = discover([root], linter.settings_for)
tasks = [(f, display_path(f), linter.settings_for(f.parent, r)) for f, r in files]
results = []
for k, (f, disp, _) in enumerate(tasks):
    r = FileResult(f, disp)
    r.facts = [Fact("pads", None, {}), Fact("transformer", None, {})]
    if k % 10 == 0:
        data = TokenizerFact("gpt2", var="tok")
        r.facts.append(Fact("tokenizer", Range(Position(1, 1), Position(1, 2)), data))
    results.append(r)
start = time.perf_counter()


def facts_of(path, settings, text):  # an unnamed file's facts (none here: every file is named)
    return analyse_file(path, display_path(path), settings, text=text, facts_only=True)


resolve_projects(results, {t[0]: t[2] for t in tasks}, linter.settings_for, {}, None, facts_of)
seconds = time.perf_counter() - start
failed = sorted({d.message for r in results for d in r.diagnostics if d.code == "TL003"})
if failed:  # the given facts must be what the rules read: a TL003 here measures its traceback
    sys.exit(f"the cross-file rules failed on the given facts: {failed[0]}")
print(f"{n} files: cross-file phase {seconds:.2f} s; findings {sum(len(r.diagnostics) for r in results)}")
