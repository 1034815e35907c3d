"""`assert_fix(tmp_path, code, before, after)`: the whole contract of one fix, in-process.

It writes `before` (dedented) as `m.py` in a fresh project, then checks, in order:
1. `--diff` prints a unified diff whose `+`/`-` lines turn `before` into `after`, exits 1,
   and writes nothing;
2. `--fix` (with `--unsafe-fixes` when `unsafe`) rewrites the file to exactly `after`;
3. a second `--fix` run changes nothing (idempotent) and reports no fix applied;
4. the finding `code` is gone from the fixed file (unless `left` says it stays);
5. the fix has the announced applicability: without `--unsafe-fixes`, an unsafe fix is
   not applied.
"""

from __future__ import annotations

import contextlib
import io
import os
import textwrap
from pathlib import Path

from tlint import cli
from tlint.config import ConfigResolver
from tlint.engine import Linter


def source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def run_main(root: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def findings(root: Path, select: list[str]) -> list:
    result = Linter(ConfigResolver(fallback_root=root), jobs=1, select=select).run([root])
    return [d for d in result.diagnostics if not d.suppressed]


def assert_fix(tmp_path: Path, code: str, before: str, after: str, *, unsafe: bool = False,
               select: list[str] | None = None, left: bool = False, name: str = "m.py",
               files: dict[str, str] | None = None) -> None:
    before, after = source(before), source(after)
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    for other, text in (files or {}).items():
        (root / other).write_text(source(text), encoding="utf-8")
    path = root / name
    path.write_text(before, encoding="utf-8")
    select = select or [code]
    flags = ["--no-cache", "--select", ",".join(select)] + (["--unsafe-fixes"] if unsafe else [])

    assert any(d.code == code and d.fix is not None for d in findings(root, select)), \
        f"{code} reports no fix on the `before` source"

    if unsafe:  # without --unsafe-fixes the fix is not applied
        status, out, err = run_main(root, "check", name, "--diff", "--no-cache", "--select", ",".join(select))
        assert path.read_text(encoding="utf-8") == before
        if select == [code]:
            assert status == 0 and out == "", ("an unsafe fix was applied without --unsafe-fixes", out)

    status, out, err = run_main(root, "check", name, "--diff", *flags)
    assert status == 1, (status, out, err)
    assert out.startswith(f"--- a/{name}\n+++ b/{name}\n"), out
    assert path.read_text(encoding="utf-8") == before, "--diff wrote the file"

    status, out, err = run_main(root, "check", name, "--fix", *flags)
    fixed = path.read_text(encoding="utf-8")
    assert fixed == after, f"--fix gave:\n{fixed}\nexpected:\n{after}\nstderr: {err}"
    assert status in (0, 1), (status, out, err)

    mtime = path.stat().st_mtime_ns
    status, out, err = run_main(root, "check", name, "--fix", *flags)
    assert path.read_text(encoding="utf-8") == after, "a second --fix changed the file"
    assert path.stat().st_mtime_ns == mtime, "a second --fix rewrote the file"
    assert "fixed 0 findings" in err, err

    remaining = [d for d in findings(root, select) if d.code == code]
    if left:
        assert remaining, f"{code} was expected to stay"
    else:
        assert not remaining, [d.message for d in remaining]
