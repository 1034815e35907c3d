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
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_source(text), encoding="utf-8")
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(_source(config), encoding="utf-8")
    result = Linter(ConfigResolver(fallback_root=tmp_path), jobs=1, select=select).run([tmp_path])
    wanted = set(select) | {"TL003"}
    out = []
    for diagnostic in result.diagnostics:
        if diagnostic.code in wanted and not diagnostic.suppressed:
            path = Path(diagnostic.path).resolve()
            try:
                path = path.relative_to(tmp_path.resolve())
            except ValueError:
                pass
            out.append((path.as_posix(), diagnostic.range.start.line, diagnostic.code))
    return sorted(out)
