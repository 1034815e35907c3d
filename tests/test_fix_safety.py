"""`--fix` and `--add-suppressions` never lose or misplace a write (issue 23): a file saved
while tlint ran keeps the user's edit; nothing outside the given paths is written, even
through a link; read-only files are skipped with a message; a file's owner and hard links
stay; suppressions are real comments only (the tokenizer decides); one fix that breaks the
syntax does not block the others; Ctrl-C never leaves a temporary file."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.cliutil import make_project
from tests.fixutil import run_main
from tlint import fixes
from tlint.diagnostics import Edit, Fix, Position, Range
from tlint.suppressions import parse_suppressions

UNUSED = "x = 1  # tlint: ignore\n"  # TL002 (suppresses nothing), safe fix: remove the comment
FIXED = "x = 1\n"


def fix(root: Path, *paths: str) -> tuple[int, str, str]:
    return run_main(root, "check", "--no-cache", "--select", "TL002", "--fix", *paths)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".tlint-fix" in p.name or p.name.startswith(".tmp-"))


def test_a_file_saved_while_fix_runs_keeps_the_users_edit(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"a.py": UNUSED, "b.py": UNUSED})
    real = fixes.fix_run

    def fix_run_then_save(*args, **kwargs):
        outcome = real(*args, **kwargs)
        (root / "a.py").write_text("x = 2  # saved by the user meanwhile\n")  # between analysis and write
        return outcome

    monkeypatch.setattr(fixes, "fix_run", fix_run_then_save)
    code, out, err = fix(root, ".")
    assert (root / "a.py").read_text() == "x = 2  # saved by the user meanwhile\n"
    assert (root / "b.py").read_text() == FIXED
    assert "a.py not fixed: it changed while tlint was fixing it (run tlint again)" in err
    assert "fixed 1 finding in 1 file" in err
    assert leftovers(root) == []


SAVED_PY = "z = 3  # the user's own comment\n" + UNUSED  # a line added above the finding


def _save_after_the_first_analysis(monkeypatch, path: Path, text: str) -> None:
    """Write `text` to `path` once the first lint pass of `--fix` is done: between the
    analysis the fixes' positions come from and the read of the text they edit."""
    from tlint.engine import Linter

    real = Linter.run
    done: list[bool] = []

    def run_then_save(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        if not done:
            done.append(True)
            path.write_text(text, encoding="utf-8")
        return result

    monkeypatch.setattr(Linter, "run", run_then_save)


@pytest.mark.parametrize("flag", ["--fix", "--diff"])
def test_a_file_saved_between_its_analysis_and_the_fix_is_skipped_not_misedited(tmp_path, monkeypatch, flag):
    root = make_project(tmp_path, {"a.py": UNUSED, "b.py": UNUSED})
    _save_after_the_first_analysis(monkeypatch, root / "a.py", SAVED_PY)
    code, out, err = run_main(root, "check", "--no-cache", "--select", "TL002", flag, ".")
    assert (root / "a.py").read_text() == SAVED_PY  # the edit meant for line 1 never lands on the new line 1
    assert "tlint: warning: a.py not fixed: it changed between its analysis and the fix (run tlint again)" in err
    if flag == "--fix":
        assert (root / "b.py").read_text() == FIXED and "fixed 1 finding in 1 file" in err
    else:
        assert "+++ b/b.py" in out and "a.py" not in out


def test_a_notebook_saved_between_its_analysis_and_the_fix_is_skipped_not_misedited(tmp_path, monkeypatch):
    from tests.notebookutil import notebook

    root = make_project(tmp_path, {})
    path = root / "nb.ipynb"
    path.write_text(notebook([("code", "import torch"), ("code", UNUSED.rstrip("\n"))]), encoding="utf-8")
    saved = notebook([("code", "import torch"), ("code", "z = 3  # the user's own comment\n" + UNUSED.rstrip("\n"))])
    _save_after_the_first_analysis(monkeypatch, path, saved)
    code, out, err = fix(root, ".")
    assert path.read_text(encoding="utf-8") == saved
    assert "nb.ipynb not fixed: it changed between its analysis and the fix (run tlint again)" in err


def test_a_save_just_before_the_rename_is_kept(tmp_path, monkeypatch):
    """The digest is checked again once the fixed text is in its temporary file, just
    before the rename that would replace the file."""
    from tlint import atomic

    root = make_project(tmp_path, {"a.py": UNUSED})
    real_chmod = atomic.os.chmod

    def chmod_then_save(path, mode, *args, **kwargs):  # the writer's last step before its check and rename
        real_chmod(path, mode, *args, **kwargs)
        if ".tlint-fix" in os.fspath(path):
            (root / "a.py").write_text("x = 2  # saved by the user meanwhile\n")

    monkeypatch.setattr(atomic.os, "chmod", chmod_then_save)
    code, out, err = fix(root, ".")
    assert (root / "a.py").read_text() == "x = 2  # saved by the user meanwhile\n"
    assert "a.py not fixed: it changed while tlint was fixing it (run tlint again)" in err
    assert leftovers(root) == []


def test_links_never_lead_a_write_outside_the_given_paths(tmp_path):
    outside = make_project(tmp_path / "outside", {"real.py": UNUSED})
    root = make_project(tmp_path / "project", {"own.py": UNUSED})
    (root / "link.py").symlink_to(outside / "real.py")
    code, out, err = fix(root, ".")
    assert (outside / "real.py").read_text() == UNUSED  # not written through the link
    assert (root / "own.py").read_text() == FIXED
    assert "link.py" in err or "real.py" in err
    assert "not fixed: it leads outside the given paths" in err
    # naming the link itself gives its target: that is a given path
    code, out, err = fix(root, "link.py")
    assert (outside / "real.py").read_text() == FIXED and (root / "link.py").is_symlink()


def test_read_only_files_are_skipped_with_a_message(tmp_path):
    root = make_project(tmp_path, {"locked.py": UNUSED, "open.py": UNUSED})
    os.chmod(root / "locked.py", 0o444)
    try:
        code, out, err = fix(root, ".")
        assert (root / "locked.py").read_text() == UNUSED
        assert (root / "open.py").read_text() == FIXED
        assert "locked.py not fixed: it is read-only" in err
        assert "locked.py" in out  # its finding is still reported: it is still there
    finally:
        os.chmod(root / "locked.py", 0o644)


def test_hard_links_stay_and_the_fixed_text_reaches_every_link(tmp_path):
    root = make_project(tmp_path, {"a.py": UNUSED})
    os.link(root / "a.py", tmp_path / "elsewhere.py")
    before = os.stat(root / "a.py")
    fix(root, ".")
    after = os.stat(root / "a.py")
    assert (after.st_ino, after.st_nlink) == (before.st_ino, 2)
    assert (tmp_path / "elsewhere.py").read_text() == FIXED == (root / "a.py").read_text()
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_a_file_of_another_owner_keeps_its_owner(tmp_path):
    root = make_project(tmp_path, {"theirs.py": UNUSED})
    os.chown(root / "theirs.py", 4321, 4321)
    fix(root, ".")
    info = os.stat(root / "theirs.py")
    assert (info.st_uid, info.st_gid) == (4321, 4321)
    assert (root / "theirs.py").read_text() == FIXED


def test_an_atomic_write_keeps_the_mode_and_replaces_the_file(tmp_path):
    root = make_project(tmp_path, {"a.py": UNUSED})
    os.chmod(root / "a.py", 0o640)
    before = os.stat(root / "a.py").st_ino
    fix(root, ".")
    info = os.stat(root / "a.py")
    assert info.st_mode & 0o777 == 0o640 and info.st_ino != before  # replaced through a rename
    assert (root / "a.py").read_text() == FIXED


# --- suppressions are comments, as the tokenizer finds them ---------------------------------


def test_suppression_text_inside_strings_is_not_a_suppression():
    text = ('x = "# tlint: ignore"\n'
            '"""\n'
            '# tlint: ignore[TL101]\n'
            '# noqa: TL101\n'
            '"""\n'
            "y = f'{1}  # noqa'  # tlint: ignore[TL209]\n")
    (sup,) = parse_suppressions(text)
    assert (sup.line, sup.column, sup.selectors) == (6, 21, ("TL209",))
    # lone CR and CRLF line ends count lines as findings do
    for newline in ("\r", "\r\n"):
        (sup,) = parse_suppressions(text.replace("\n", newline))
        assert (sup.line, sup.column) == (6, 21)


def test_the_tl002_fix_never_edits_strings_or_docstrings(tmp_path):
    text = ('"""Module.\n'
            '\n'
            'x = 1  # tlint: ignore\n'
            '"""\n'
            'MESSAGE = "add # tlint: ignore to silence it"\n'
            'y = 1  # tlint: ignore\n')
    root = make_project(tmp_path, {"m.py": text})
    code, out, err = fix(root, ".")
    assert (root / "m.py").read_text() == text.replace("y = 1  # tlint: ignore\n", "y = 1\n")


def test_a_finding_on_a_line_with_suppression_text_in_a_string_is_reported(tmp_path):
    finding = 'import torch.nn.functional as F\n\n\ndef f(x):\n    return F.softmax(x), "# tlint: ignore"\n'
    root = make_project(tmp_path, {"m.py": finding})
    code, out, err = run_main(root, "check", "--no-cache", "--select", "TL209", ".")
    assert code == 1 and "TL209" in out


# --- one broken fix, Ctrl-C -----------------------------------------------------------------


def _edit(l1, c1, l2, c2, text):
    return Edit(Range(Position(l1, c1), Position(l2, c2)), text)


def test_one_fix_that_does_not_compile_does_not_block_the_others():
    text = "a = 1\nb = 2\nc = 3\n"
    good = Fix("safe", (_edit(1, 5, 1, 6, "10"),))
    broken = Fix("safe", (_edit(2, 5, 2, 6, "f(("),))
    also_good = Fix("safe", (_edit(3, 5, 3, 6, "30"),))
    assert fixes.apply_fixes(text, [good, broken, also_good]) == ("a = 10\nb = 2\nc = 30\n", 2)


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize("when", ["after-create", "before-rename"])
def test_ctrl_c_during_a_write_leaves_no_temporary_file(tmp_path, monkeypatch, when, threads):
    """With `threads`, another thread runs while the write happens (torch's or a pool's,
    in a real run): a signal sent to the process may be delivered to it, and must still
    wait for the write."""
    import tempfile
    import threading

    from tlint import atomic

    if threads:
        stop = threading.Event()
        other = threading.Thread(target=stop.wait, daemon=True)
        other.start()

    target = tmp_path / "a.py"
    target.write_text(UNUSED)
    real_mkstemp, real_replace = tempfile.mkstemp, os.replace

    def mkstemp(*args, **kwargs):
        made = real_mkstemp(*args, **kwargs)
        if when == "after-create":
            os.kill(os.getpid(), signal.SIGINT)
        return made

    def replace(source, destination):
        if when == "before-rename":
            os.kill(os.getpid(), signal.SIGINT)
        return real_replace(source, destination)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):  # raised once the write is done, not in the middle of it
        atomic.write_bytes_atomic(target, FIXED.encode(), durable=True, suffix=".tlint-fix")
    if threads:
        stop.set()
        other.join()
    assert target.read_text() == FIXED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_add_suppressions_writes_as_fix_does(tmp_path):
    finding = 'import torch.nn.functional as F\n\n\ndef f(x):\n    return F.softmax(x)\n'
    outside = make_project(tmp_path / "outside", {"real.py": finding})
    root = make_project(tmp_path / "project", {"own.py": finding, "locked.py": finding})
    (root / "link.py").symlink_to(outside / "real.py")
    os.chmod(root / "locked.py", 0o444)
    try:
        code, out, err = run_main(root, "check", "--no-cache", "--select", "TL209", "--add-suppressions", ".")
    finally:
        os.chmod(root / "locked.py", 0o644)
    assert "# tlint: ignore[TL209]" in (root / "own.py").read_text()
    assert (outside / "real.py").read_text() == finding and (root / "locked.py").read_text() == finding
    assert "not changed: it leads outside the given paths" in err and "not changed: it is read-only" in err
