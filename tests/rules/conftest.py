"""`lint(tmp_path, files, select=[...])`: write a small project and lint it in-process;
`expected(files, code)`: the findings its `# expect: TLNNN` comments announce.

Sources are dedented, so tests can indent them. The folder has no config and no git root,
so it is the project root (the folder given on the command line); pass `config=` to
write a `pyproject.toml` next to the files.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.lintutil import found, write_tree
from tlint.config import ConfigResolver
from tlint.engine import Linter


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def expected(files: dict[str, str], code: str) -> list[tuple[str, int, str]]:
    """Sorted (path, line, code) of the lines marked `# expect: CODE`."""
    out = []
    for name, text in files.items():
        for number, line in enumerate(_source(text).splitlines(), start=1):
            if re.search(r"#\s*expect:\s*" + code + r"\b", line):
                out.append((name, number, code))
    return sorted(out)


def lint(tmp_path: Path, files: dict[str, str], select: list[str], config: str | None = None) -> list[tuple[str, int, str]]:
    """Sorted (path relative to tmp_path, line, code) of the findings of the selected
    codes, plus TL003 (a rule that crashed must fail the test)."""
    write_tree(tmp_path, {name: _source(text) for name, text in files.items()})
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(_source(config), encoding="utf-8")
    result = Linter(ConfigResolver(fallback_root=tmp_path), jobs=1, select=select).run([tmp_path])
    wanted = set(select) | {"TL003"}
    kept = [d for d in result.diagnostics if d.code in wanted and not d.suppressed]
    return sorted(found(kept, tmp_path))


def lines_of(src: str, code: str, *needles: str, path: str = "m.py") -> set[tuple[str, int, str]]:
    """The findings `code` on the lines of `src` (dedented) containing each needle, which must
    each occur on exactly one line."""
    lines = _source(src).splitlines()
    out = set()
    for needle in needles:
        hits = [i + 1 for i, line in enumerate(lines) if needle in line]
        assert len(hits) == 1, (needle, hits)
        out.add((path, hits[0], code))
    return out
