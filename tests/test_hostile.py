"""Hostile inputs and failures inside tlint: the run never crashes, every file that cannot be
read or parsed is a TL001 saying why, a failure inside tlint is a TL003 (exit 2), and the
other files' and rules' results stand. Positions stay right whatever the line endings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cliutil import main_in, make_project
from tests.lintutil import found, lint_paths, write_tree

# TL103 (unused-mask-argument) at line 5, column 26 (the `mask` parameter).
MODEL = (
    "from torch import nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def forward(self, x, mask):\n"
    "        return x.mean(1)\n"
)
MODEL_AT = ("model.py", 5, "TL103")


def lint_dir(root: Path, **kwargs):
    return lint_paths([root], **kwargs).diagnostics


def tl001(diags, name: str) -> str:
    messages = [d.message for d in diags if d.code == "TL001" and Path(d.path).name == name]
    assert len(messages) == 1, [(d.path, d.code, d.message) for d in diags]
    return messages[0]


def run_json(root: Path, capsys, monkeypatch, *flags: str):
    proc = main_in(root, "check", "--format", "json", *flags, ".", capsys=capsys, monkeypatch=monkeypatch)
    return proc.returncode, json.loads(proc.stdout)


# --- encodings, line ends, odd bytes ------------------------------------------------------


def test_non_utf8_bytes_are_tl001_with_the_position_and_the_run_goes_on(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"x = 1\ns = 'caf\xe9'\n")
    write_tree(tmp_path, {"model.py": MODEL})
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {("bad.py", 2, "TL001"), MODEL_AT}
    bad = next(d for d in diags if d.code == "TL001")
    assert bad.range.start.column == 9 and "cannot decode" in bad.message and "0xe9" in bad.message


def test_unknown_coding_cookie_is_tl001(tmp_path):
    (tmp_path / "odd.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    assert "no-such-codec" in tl001(lint_dir(tmp_path), "odd.py")


def test_utf8_bom_keeps_positions(tmp_path):
    (tmp_path / "model.py").write_bytes(b"\xef\xbb\xbf" + MODEL.encode())
    diags = lint_dir(tmp_path)
    assert [(d.code, d.range.start.line, d.range.start.column) for d in diags] == [("TL103", 5, 26)]


def test_pep263_latin1_cookie_with_non_ascii(tmp_path):
    source = "# -*- coding: latin-1 -*-\n# café\n" + MODEL.replace("self, x, mask", "self, xé, mask")
    (tmp_path / "model.py").write_bytes(source.encode("latin-1"))
    diags = lint_dir(tmp_path)
    # `xé` is one code point, two UTF-8 bytes: the column counts code points.
    assert [(d.code, d.range.start.line, d.range.start.column) for d in diags] == [("TL103", 7, 27)]


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_crlf_and_lone_cr_keep_positions_in_every_format(tmp_path, capsys, monkeypatch, newline):
    make_project(tmp_path, {})
    (tmp_path / "model.py").write_bytes(("# 😀 emoji\n" + MODEL).replace("\n", newline).encode())
    code, report = run_json(tmp_path, capsys, monkeypatch)
    assert code == 1
    assert [(d["code"], d["range"]["start"]) for d in report["diagnostics"]] == [("TL103", {"line": 6, "column": 26})]
    proc = main_in(tmp_path, "check", "--format", "lsp", ".", capsys=capsys, monkeypatch=monkeypatch)
    (payload,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert payload["diagnostics"][0]["range"]["start"] == {"line": 5, "character": 25}
    text = main_in(tmp_path, "check", ".", capsys=capsys, monkeypatch=monkeypatch).stdout
    assert "model.py:6:26: TL103" in text and "def forward(self, x, mask):" in text


def test_lsp_columns_count_utf16_units_on_the_finding_line(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {})
    # `𝑦𝑦` is two code points outside the BMP: four UTF-16 code units.
    source = MODEL.replace("self, x, mask", "self, x, 𝑦𝑦, mask").replace("\n", "\r\n")
    (tmp_path / "model.py").write_bytes(b"\xef\xbb\xbf" + source.encode())
    code, report = run_json(tmp_path, capsys, monkeypatch)
    assert code == 1 and report["diagnostics"][0]["range"]["start"] == {"line": 5, "column": 30}
    proc = main_in(tmp_path, "check", "--format", "lsp", ".", capsys=capsys, monkeypatch=monkeypatch)
    (payload,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert payload["diagnostics"][0]["range"]["start"] == {"line": 4, "character": 31}


def test_form_feeds(tmp_path):
    (tmp_path / "model.py").write_text("\f\n" + MODEL.replace("class Head", "\f\nclass Head"), encoding="utf-8")
    diags = lint_dir(tmp_path)
    assert [(d.code, d.range.start.line, d.range.start.column) for d in diags] == [("TL103", 7, 26)]


def test_nul_bytes_are_tl001(tmp_path):
    (tmp_path / "nul.py").write_bytes(b"x = 1\ny = 2\x00\n")
    write_tree(tmp_path, {"model.py": MODEL})
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {("nul.py", 2, "TL001"), MODEL_AT}
    assert "null" in tl001(diags, "nul.py")


def test_empty_file(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    result = lint_paths([tmp_path], select=["ALL"])
    assert result.diagnostics == [] and len(result.files) == 1 and result.parse_errors == 0


# --- size and depth -----------------------------------------------------------------------


def test_a_10_mb_file_is_reported_not_parsed(tmp_path, capsys, monkeypatch):
    import time

    make_project(tmp_path, {"model.py": MODEL})
    line = "    1234567890,\n"
    (tmp_path / "table.py").write_text("DATA = [\n" + line * (10 * 2**20 // len(line)) + "]\n")
    started = time.perf_counter()
    code, report = run_json(tmp_path, capsys, monkeypatch)
    assert time.perf_counter() - started < 30 and code == 1
    got = {(d["path"], d["code"]) for d in report["diagnostics"]}
    assert got == {("model.py", "TL103"), ("table.py", "TL001")}
    message = next(d["message"] for d in report["diagnostics"] if d["code"] == "TL001")
    assert "too large" in message and "10.0 MiB" in message and "exclude" in message


@pytest.mark.parametrize("expression", [
    "(" * 5000 + "1" + ")" * 5000,    # brackets
    "y" + "[0]" * 5000,               # subscripts
    "not " * 5000 + "y",              # unary operators
    "a" + ".b" * 5000,                # attribute chain
    "1 if c else " * 5000 + "2",      # conditional expressions
    " and ".join(["a"] * 8000),       # flat for CPython, nested for LibCST
], ids=["brackets", "subscripts", "nots", "attributes", "ifexp", "boolop"])
def test_nesting_beyond_recursion_is_tl001(tmp_path, expression):
    (tmp_path / "deep.py").write_text(f"x = {expression}\n")
    write_tree(tmp_path, {"model.py": MODEL})
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {("deep.py", 1, "TL001"), MODEL_AT}
    assert "nested" in tl001(diags, "deep.py")


def test_compare_chains_and_long_lists_still_parse(tmp_path):
    write_tree(tmp_path, {"flat.py": "x = " + " < ".join(["a"] * 1000) + "\ny = [" + "1, " * 5000 + "]\n"})
    assert lint_dir(tmp_path, select=["ALL"]) == []


# --- newer syntax -------------------------------------------------------------------------

NEW_SYNTAX = {
    "pep695": "def first[T](items: list[T]) -> T:\n    return items[0]\n\n\nclass Box[T]:\n    pass\n\n\ntype Pair = tuple[int, int]\n",
    "pep701": 'names = ["a"]\nx = f"{", ".join(names)}"\ny = f"{f"{1 + 1}"}"\n',
    "except_star": "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "pep758": "try:\n    pass\nexcept ValueError, TypeError:\n    pass\n",
}


@pytest.mark.parametrize("name", sorted(NEW_SYNTAX))
def test_python_312_to_314_syntax_parses_or_is_a_clear_tl001(tmp_path, name):
    write_tree(tmp_path, {f"{name}.py": NEW_SYNTAX[name], "model.py": MODEL})
    diags = lint_dir(tmp_path, select=["ALL"])
    mine = [d for d in diags if Path(d.path).name == f"{name}.py"]
    assert all(d.code == "TL001" and "syntax" in d.message for d in mine), mine
    assert MODEL_AT in found(diags, tmp_path)
    assert not any(d.code == "TL003" for d in diags)


def test_libcst_1_9_parses_the_new_syntax():
    """Documents what the pinned LibCST accepts (all four, on any Python)."""
    import libcst as cst

    from tlint.engine import parse_source

    assert all(isinstance(parse_source(text, name), cst.Module) for name, text in NEW_SYNTAX.items())


# --- the file system ----------------------------------------------------------------------


def test_unreadable_file_is_tl001(tmp_path, monkeypatch):
    write_tree(tmp_path, {"secret.py": "x = 1\n", "model.py": MODEL})
    real = os.open

    def open_file(path, flags, *args):
        if os.fspath(path).endswith("secret.py"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, flags, *args)

    monkeypatch.setattr(os, "open", open_file)
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {("secret.py", 1, "TL001"), MODEL_AT}
    assert "Permission denied" in tl001(diags, "secret.py")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_by_permissions(tmp_path):
    write_tree(tmp_path, {"secret.py": "x = 1\n", "model.py": MODEL})
    (tmp_path / "secret.py").chmod(0)
    try:
        diags = lint_dir(tmp_path)
    finally:
        (tmp_path / "secret.py").chmod(0o644)
    assert found(diags, tmp_path) == {("secret.py", 1, "TL001"), MODEL_AT}


def test_unreadable_folder_is_an_error_exit_2(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"locked/a.py": "x = 1\n", "model.py": MODEL})
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    proc = main_in(tmp_path, "check", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2
    assert "model.py:5:26: TL103" in proc.stdout
    assert "locked: cannot read folder (Permission denied)" in proc.stderr


def test_broken_symlink_is_tl001(tmp_path):
    write_tree(tmp_path, {"model.py": MODEL})
    (tmp_path / "gone.py").symlink_to(tmp_path / "missing.py")
    diags = lint_dir(tmp_path)
    assert sorted((Path(d.path).name, d.code) for d in diags) == [("gone.py", "TL001"), ("model.py", "TL103")]
    assert "broken symbolic link" in tl001(diags, "gone.py")
    named = lint_paths([tmp_path / "gone.py"]).diagnostics
    assert [d.code for d in named] == ["TL001"]


def test_symlink_loops_in_a_folder(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"pkg/model.py": MODEL})
    (tmp_path / "pkg" / "up").symlink_to(tmp_path)                 # a folder loop
    (tmp_path / "pkg" / "self.py").symlink_to(tmp_path / "pkg" / "self.py")  # a file loop
    code, report = run_json(tmp_path, capsys, monkeypatch)
    got = {(d["path"], d["code"]) for d in report["diagnostics"]}
    assert got == {("pkg/model.py", "TL103"), ("pkg/self.py", "TL001")}
    assert code == 1


def test_file_deleted_while_the_run_is_in_progress(tmp_path, monkeypatch):
    import tlint.engine

    write_tree(tmp_path, {"model.py": MODEL, "vanishing.py": "x = 1\n"})
    real = tlint.engine.discover

    def discover_then_delete(paths, settings_for, roots=None):
        files, errors = real(paths, settings_for, roots)
        (tmp_path / "vanishing.py").unlink()
        return files, errors

    monkeypatch.setattr(tlint.engine, "discover", discover_then_delete)
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {("vanishing.py", 1, "TL001"), MODEL_AT}
    assert "No such file" in tl001(diags, "vanishing.py")


def test_a_folder_named_like_a_python_file(tmp_path):
    write_tree(tmp_path, {"pkg.py/model.py": MODEL})
    assert found(lint_dir(tmp_path), tmp_path) == {("pkg.py/model.py", 5, "TL103")}
    assert found(lint_paths([tmp_path / "pkg.py"]).diagnostics, tmp_path) == {("pkg.py/model.py", 5, "TL103")}


# --- failures inside tlint ----------------------------------------------------------------


def _tl003(diags):
    return [d for d in diags if d.code == "TL003"]


def test_a_failing_view_is_one_tl003_and_the_other_rules_stand(tmp_path, monkeypatch):
    import tlint.views.model

    def broken(*args):
        raise KeyError("boom in the model view")

    monkeypatch.setattr(tlint.views.model, "ModelView", broken)
    write_tree(tmp_path, {"model.py": MODEL, "bad.py": "def (\n"})
    diags = lint_dir(tmp_path, select=["ALL"])
    (failure,) = _tl003(diags)
    assert failure.path.endswith("model.py") and "`models` view" in failure.message
    assert "KeyError" in failure.message and "rules skipped here: TL" in failure.message
    assert "report" in failure.message and "Traceback" in failure.detail
    assert ("bad.py", 1, "TL001") in found(diags, tmp_path)


def test_a_failing_fact_extractor_keeps_the_other_facts(tmp_path, monkeypatch):
    from tlint.views import facts

    def broken(ctx):
        raise ValueError("boom in an extractor")
        yield  # pragma: no cover

    monkeypatch.setattr(facts, "EXTRACTORS", (("broken-kind", broken), *facts.EXTRACTORS))
    write_tree(tmp_path, {"model.py": MODEL})
    diags = lint_dir(tmp_path)
    assert found(diags, tmp_path) == {MODEL_AT, ("model.py", 1, "TL003")}
    assert "`broken-kind` fact extractor" in _tl003(diags)[0].message


def test_a_failing_check_project_is_tl003(tmp_path, monkeypatch):
    from tlint.rules import ALL_RULES
    from tlint.rules.base import Rule

    project_rules = [r for r in ALL_RULES if r.check_project is not Rule.check_project]
    assert project_rules, "no cross-file rule to break"
    rule = project_rules[0]

    def boom(self, path, related):
        raise RuntimeError("boom in check_project")

    monkeypatch.setattr(rule, "check_project", boom)
    monkeypatch.setattr(rule, "project_kinds", ())  # run it for a file without its facts too
    write_tree(tmp_path, {"model.py": MODEL})
    diags = lint_dir(tmp_path, select=["ALL"])
    assert any(rule.code in d.message and "boom in check_project" in d.message for d in _tl003(diags))
    assert MODEL_AT in found(diags, tmp_path)


def test_a_failing_project_phase_is_tl003(tmp_path, monkeypatch):
    import tlint.project_phase

    def boom(*args, **kwargs):
        raise OSError("boom in the import graph")

    monkeypatch.setattr(tlint.project_phase, "ImportGraph", boom)
    # a file a cross-file rule compares (a tokenizer), so that the project is needed
    tokenizer = 'from transformers import AutoTokenizer\n\ntok = AutoTokenizer.from_pretrained("gpt2")\n'
    write_tree(tmp_path, {"model.py": MODEL, "data.py": tokenizer})
    diags = lint_dir(tmp_path, select=["ALL"])
    assert any("cross-file phase" in d.message for d in _tl003(diags))
    assert MODEL_AT in found(diags, tmp_path)


def test_an_unexpected_failure_anywhere_in_a_file_is_tl003(tmp_path, monkeypatch):
    import tlint.engine

    def boom(module):
        raise AssertionError("boom in the index")

    monkeypatch.setattr(tlint.engine, "FileIndex", boom)
    write_tree(tmp_path, {"model.py": MODEL})
    (failure,) = lint_dir(tmp_path)
    assert failure.code == "TL003" and "the file was not checked" in failure.message


def test_internal_error_exit_code_and_verbose_traceback(tmp_path, capsys, monkeypatch):
    import tlint.views.model

    def broken(*args):
        raise KeyError("boom")

    monkeypatch.setattr(tlint.views.model, "ModelView", broken)
    make_project(tmp_path, {"model.py": MODEL})
    proc = main_in(tmp_path, "check", "--exit-zero", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2 and "TL003" in proc.stdout and "Traceback" not in proc.stderr
    proc = main_in(tmp_path, "check", "--verbose", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2 and "Traceback" in proc.stderr and "KeyError: 'boom'" in proc.stderr


@pytest.mark.parametrize("source", [
    # a DeepSpeed config built from a spread: its keys are known, its values are not
    "import deepspeed\n\nbase = {'train_batch_size': 8}\nds_config = dict(**base, zero_optimization={'stage': 2})\n\n\n"
    "def train(model, loader):\n"
    "    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)\n"
    "    for batch in loader:\n        loss = engine(batch)\n        engine.backward(loss)\n        engine.step()\n",
    # labels under a bytes key
    "import torch\n\n\ndef collate(batch, tok):\n    batch[b'labels'][batch[b'labels'] == tok.pad_token_id] = -100\n"
    "    return batch\n",
], ids=["deepspeed-dict-spread", "bytes-label-key"])
def test_odd_but_valid_code_is_no_internal_error(tmp_path, source):
    write_tree(tmp_path, {"train.py": source})
    assert _tl003(lint_dir(tmp_path, select=["ALL"])) == []
