"""What bounds one run's memory (issue 23): the size limit, constant tables not built as
LibCST trees in large files (tlint/elide.py), and large files analysed one at a time in a
child process (tlint/engine.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.cliutil import run_tlint
from tlint import engine, reading
from tlint.diagnostics import Edit, Fix, Position, Range
from tlint.elide import ELIDE_MIN_BYTES, MIN_CONSTANTS, drop_touching, elide_tables

NUMBERS = ", ".join(str(i) for i in range(MIN_CONSTANTS + 50))
FILLER = "\n".join(f"SETTING_{i} = {i}  # a line of configuration, to make the file large" for i in range(4000))


def _large_file(body: str) -> str:
    text = f"import torch\nimport torch.nn.functional as F\n\n{FILLER}\n\n{body}"
    assert len(text) >= ELIDE_MIN_BYTES
    return text


def _elide(text: str) -> tuple[str, list]:
    return elide_tables(text, ast.parse(text))


def test_a_constant_table_is_blanked_between_its_brackets_and_everything_keeps_its_place():
    text = _large_file(f"TABLE = {{\n    'a': ({NUMBERS}),\n    'b': [-1, 2.5, None, True, b'x', torch.float16],\n}}\n"
                       "after = 1\n")
    out, spans = _elide(text)
    assert len(spans) == 1
    assert len(out) == len(text) and out.splitlines() == [
        line if not line.startswith(("    'a'", "    'b'")) else " " * len(line) for line in text.splitlines()]
    assert "TABLE = {" in out and "\n}\nafter = 1\n" in out
    compile(out, "x", "exec")  # an empty dict at the same place
    line, column, end_line, end_column = spans[0]
    lines = text.splitlines()
    assert lines[line - 1][column - 2] == "{" and lines[end_line - 1][end_column - 1] == "}"


def test_tables_that_are_small_hold_code_or_have_no_brackets_are_parsed_whole():
    small = ", ".join(str(i) for i in range(MIN_CONSTANTS - 1))
    for body in (f"SMALL = [{small}]\n",  # too few constants
                 f"CALLS = [{NUMBERS}, len('x')]\n",  # a call inside
                 f"STARRED = [{NUMBERS}, *other]\n",
                 f"MERGED = {{**base, 'k': [{NUMBERS}]}}\n",  # the inner list alone is a table
                 f"BARE = {NUMBERS}\n"):  # a tuple without parentheses
        out, spans = _elide(_large_file(body))
        if body.startswith("MERGED"):
            assert len(spans) == 1 and "**base, 'k': [" in out
        else:
            assert spans == [] and out == _large_file(body)
    out, spans = _elide(f"SMALL_FILE = [{NUMBERS}]\n")  # a small file is never touched
    assert spans == []


def test_positions_are_kept_on_lines_with_wide_characters_and_lone_carriage_returns():
    body = f"NAMES = 'é∑'; TABLE = ('ü', {NUMBERS})\rLATER = 'x'\r\n"
    text = _large_file(body)
    out, spans = _elide(text)
    assert len(spans) == 1 and len(out) == len(text)
    last = out.split("\n")[-2]
    assert last.startswith("NAMES = 'é∑'; TABLE = (") and last.endswith(")\rLATER = 'x'\r")
    assert set(last[len("NAMES = 'é∑'; TABLE = ("):last.index(")")]) == {" "}
    line, column, _, end_column = spans[0]
    assert text.split("\n")[line - 1][column - 2] == "(" and out.split("\n")[line - 1][end_column - 1] == ")"


def test_findings_are_the_same_with_the_tables_elided_and_a_fix_that_would_render_one_is_dropped(tmp_path):
    text = _large_file(f"TABLE = [\n    {NUMBERS},\n]\n\n\ndef probabilities(scores):\n"
                       f"    first = F.softmax(scores)\n    return F.softmax(torch.tensor([{NUMBERS}]))\n")
    (tmp_path / "big.py").write_text(text)
    done = run_tlint("check", "--select", "ALL", "--no-cache", "--format", "json", "big.py", cwd=tmp_path)
    found = json.loads(done.stdout)["diagnostics"]
    assert done.returncode == 1
    lines = text.splitlines()
    first = lines.index("    first = F.softmax(scores)") + 1
    assert [(d["code"], d["range"]["start"]["line"], d.get("fix") is not None) for d in found] == [
        ("TL209", first, True),  # `F.softmax(scores)`: its fix touches no table
        ("TL209", first + 1, False),  # the call holds a table LibCST did not build: no fix
    ]


def test_drop_touching_keeps_fixes_beside_a_span_and_drops_those_over_it():
    span = [(3, 10, 5, 2)]

    def fix(start: tuple[int, int], end: tuple[int, int]) -> Fix:
        return Fix("safe", (Edit(Range(Position(*start), Position(*end)), "x"),))

    assert drop_touching(fix((1, 1), (3, 10)), span) is not None  # ends where the span starts
    assert drop_touching(fix((5, 2), (6, 1)), span) is not None  # starts where it ends
    assert drop_touching(fix((2, 1), (4, 1)), span) is None
    assert drop_touching(fix((4, 1), (4, 1)), span) is None  # an insertion inside it
    assert drop_touching(fix((3, 10), (3, 10)), span) is None
    assert drop_touching(None, span) is None and drop_touching(fix((4, 1), (4, 2)), []) is not None


def test_the_size_limit_is_one_mebibyte(tmp_path):
    assert reading.MAX_FILE_BYTES == 2**20
    (tmp_path / "huge.py").write_text("x = 1\n" * (2**20 // 6 + 1))
    done = run_tlint("check", "--no-cache", "--output-format", "concise", str(tmp_path / "huge.py"), cwd=tmp_path)
    code, out = done.returncode, done.stdout
    assert code == 1 and "TL001 file too large to lint (1.0 MiB; the limit is 1 MiB)" in out


class _Lock:
    def __init__(self) -> None:
        self.held = 0
        self.entered = 0

    def __enter__(self) -> None:
        self.held += 1
        self.entered += 1
        assert self.held == 1

    def __exit__(self, *exc) -> None:
        self.held -= 1


def test_a_large_file_is_analysed_in_a_child_under_the_runs_lock_with_a_longer_time_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.py"
    path.write_text(_large_file("def f(x):\n    return x\n"))
    lock = _Lock()
    monkeypatch.setattr(engine, "_BIG_FILE_LOCK", lock)
    seen = []
    real = engine._analyse_guarded

    def guarded(*args):
        seen.append((lock.held, args[-1]))
        return real(*args)

    monkeypatch.setattr(engine, "_analyse_guarded", guarded)
    settings = engine.Linter(engine.ConfigResolver(fallback_root=tmp_path)).settings_for(tmp_path)
    result = engine.analyse_file(path, "big.py", settings, time_limit=20.0)
    assert not result.diagnostics and lock.entered == 1 and lock.held == 0
    (held, limit), = seen
    size = len(path.read_text())
    assert held == 1 and limit == pytest.approx(20.0 + engine.LARGE_FILE_SECONDS_PER_MIB * size / 2**20)

    small = tmp_path / "small.py"
    small.write_text("x = 1\n")
    engine.analyse_file(small, "small.py", settings, time_limit=20.0)
    assert lock.entered == 1 and len(seen) == 1  # small files: in-process, no lock


def test_workers_share_one_lock_and_large_files_give_the_same_findings(tmp_path):
    body = "def probabilities(scores):\n    return F.softmax(scores)\n"
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(_large_file(body))
    done = run_tlint("check", "--select", "ALL", "--no-cache", "--jobs", "2", "--output-format", "concise",
                            str(tmp_path), cwd=tmp_path)
    code, out = done.returncode, done.stdout
    assert code == 1
    assert sorted(Path(line.split(":")[0]).name for line in out.splitlines() if "TL209" in line) == [
        "a.py", "b.py", "c.py"]


def test_the_lane_without_a_lock_does_nothing():
    assert engine._BIG_FILE_LOCK is None
    with engine._big_file_lane():
        pass


def test_a_worker_initializer_keeps_the_lock_and_runs_the_profilers(monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "_BIG_FILE_LOCK", None)
    engine._set_big_file_lock("lock", lambda: calls.append(1))
    assert engine._BIG_FILE_LOCK == "lock" and calls == [1]


def test_memory_figures_are_in_the_readme():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "one at a time" in readme and "constant tables" in readme
