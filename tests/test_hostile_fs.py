"""Hostile file systems (issue 23): files that are not regular (FIFOs, devices, links to
them), files over the size limit, files replaced between discovery and reading, folder
links that lead out of the project. The type and size are checked before anything is read,
at most the limit is read, and the run goes on. Cases that would hang on a regression run
`tlint` in a child process with a time limit."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.cliutil import DEEPSPEED_SCRIPT, SELECT_TL301, make_project, run_tlint
from tests.lintutil import found, lint_paths
from tlint import reading

MODEL = (
    "from torch import nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def forward(self, x, mask):\n"
    "        return x.mean(1)\n"
)
MODEL_AT = ("model.py", 5, "TL103")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")


def check_json(root: Path, *args: str, timeout: int = 60) -> tuple[int, dict]:
    """`tlint check --format json ARGS` in a child (a hang fails the test, not the suite)."""
    proc = run_tlint("check", "--no-cache", "--format", "json", *args, cwd=root)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def messages(report: dict, path: str) -> list[str]:
    return [d["message"] for d in report["diagnostics"] if d["path"] == path and d["code"] == "TL001"]


@needs_fifo
@needs_dev_zero
def test_fifos_and_device_links_are_tl001_not_a_regular_file_and_never_read(tmp_path):
    root = make_project(tmp_path, {"model.py": MODEL})
    os.mkfifo(root / "pipe.py")
    (root / "zero.py").symlink_to("/dev/zero")
    # in a folder walk and named on the command line
    for args in ((".",), ("--jobs", "2", "pipe.py", "zero.py", "model.py")):
        code, report = check_json(root, *args)
        assert code == 1
        assert {(d["path"], d["code"]) for d in report["diagnostics"]} >= {("model.py", "TL103")}
        assert messages(report, "pipe.py") == ["not a regular file (a FIFO): it is not read"]
        assert messages(report, "zero.py") == ["not a regular file (a character device): it is not read"]


def test_a_file_over_the_limit_is_rejected_before_it_is_read(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"model.py": MODEL})
    with open(root / "huge.py", "wb") as stream:  # sparse: 1 GiB that costs no disk
        stream.truncate(2**30)
    read = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    diags = lint_paths([root / "huge.py"]).diagnostics
    assert [d.code for d in diags] == ["TL001"]
    assert "too large" in diags[0].message and "1024.0 MiB" in diags[0].message
    assert read == []


def test_a_file_that_grows_past_the_limit_is_read_no_further_than_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "growing.py"
    path.write_bytes(b"x = 1\n")
    real_fstat = os.fstat

    def fstat_then_grow(fd):  # the file grows between the size check and the read
        info = real_fstat(fd)
        with open(path, "ab") as stream:
            stream.write(b"#" * (reading.MAX_FILE_BYTES + 4096))
        return info

    read = []
    real_read = os.read
    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    monkeypatch.setattr(os, "read", lambda fd, n: read.append(len(chunk := real_read(fd, n))) or chunk)
    result = reading.read_source(path, "growing.py")
    assert not isinstance(result, bytes) and "too large" in result.message
    assert sum(read) == reading.MAX_FILE_BYTES + 1


def test_the_size_limit_is_the_measured_one():
    assert reading.MAX_FILE_BYTES == 2**20


@needs_fifo
def test_a_file_replaced_by_a_fifo_after_discovery_is_tl001_and_the_run_goes_on(tmp_path, monkeypatch):
    import tlint.engine

    write = {"model.py": MODEL, "swapped.py": "x = 1\n", "gone.py": "y = 2\n"}
    make_project(tmp_path, write)
    real = tlint.engine.discover

    def discover_then_swap(paths, settings_for, roots=None):
        files, errors = real(paths, settings_for, roots)
        (tmp_path / "swapped.py").unlink()
        os.mkfifo(tmp_path / "swapped.py")
        (tmp_path / "gone.py").unlink()
        return files, errors

    monkeypatch.setattr(tlint.engine, "discover", discover_then_swap)
    diags = lint_paths([tmp_path]).diagnostics
    assert found(diags, tmp_path) == {("swapped.py", 1, "TL001"), ("gone.py", 1, "TL001"), MODEL_AT}
    by_name = {Path(d.path).name: d.message for d in diags if d.code == "TL001"}
    assert by_name["swapped.py"] == "not a regular file (a FIFO): it is not read"
    assert "No such file" in by_name["gone.py"]


@needs_fifo
@needs_dev_zero
def test_a_deepspeed_json_config_that_is_not_a_small_regular_file_is_no_config(tmp_path):
    for kind in ("real", "absent", "fifo", "dev-zero", "huge"):
        folder = tmp_path / kind
        make_project(folder, {"train.py": DEEPSPEED_SCRIPT, "tlint.toml": SELECT_TL301})
        if kind == "real":
            (folder / "ds.json").write_text('{"train_batch_size": 8}')
        elif kind == "fifo":
            os.mkfifo(folder / "ds.json")
        elif kind == "dev-zero":
            (folder / "ds.json").symlink_to("/dev/zero")
        elif kind == "huge":
            with open(folder / "ds.json", "wb") as stream:
                stream.truncate(2**30)
    _, report = check_json(tmp_path, "--select", "TL301", "real", "absent", "fifo", "dev-zero", "huge")
    # a real config is read (TL301: no clipping in it); the others are not: no config, as
    # with no file at all, and no hang, no memory exhausted
    assert [(d["path"], d["code"]) for d in report["diagnostics"]] == [("real/train.py", "TL301")]


def test_folder_links_out_of_the_project_are_not_walked(tmp_path, monkeypatch):
    import tlint.discovery

    outside = make_project(tmp_path / "outside", {"elsewhere.py": MODEL})
    root = make_project(tmp_path / "project", {"model.py": MODEL})
    (root / "to_root").symlink_to("/")
    (root / "to_home").symlink_to(Path.home())
    (root / "to_outside").symlink_to(outside)
    walked: list[str] = []
    real_walk = os.walk

    def walk(top, *args, **kwargs):
        for entry in real_walk(top, *args, **kwargs):
            walked.append(entry[0])
            yield entry

    monkeypatch.setattr(tlint.discovery.os, "walk", walk)
    diags = lint_paths([root]).diagnostics
    assert found(diags, root) == {MODEL_AT}
    assert walked and all(Path(folder).resolve().is_relative_to(root.resolve()) for folder in walked), walked
    assert not any("elsewhere" in d.path for d in diags)


def test_a_named_file_is_opened_without_blocking_and_checked_on_the_open_file(tmp_path):
    from tlint import bounded

    flags = bounded._READ_FLAGS
    assert flags & getattr(os, "O_NONBLOCK", 0) == getattr(os, "O_NONBLOCK", 0)
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    assert reading.read_source(path, "a.py") == b"x = 1\n"
    os.chmod(path, stat.S_IRUSR)
    assert reading.read_source(path, "a.py") == b"x = 1\n"


# --- line ends ----------------------------------------------------------------------------


def test_the_import_scanner_reads_lone_cr_and_crlf_files_as_python_does():
    from tlint.project import scan_imports

    text = "import a.b, c as d\nfrom . import x, y\nfrom ..pkg import (m,\n    n)\nfrom e import f\n"
    expected = scan_imports(text)
    assert expected == ["a.b", "c", ".x", ".y", "..pkg", "e", "e.f"]
    assert scan_imports(text.replace("\n", "\r")) == expected
    assert scan_imports(text.replace("\n", "\r\n")) == expected


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_lone_cr_files_keep_their_cross_file_findings(tmp_path, newline):
    from tests.rules.test_tl101 import PADDING_COLLATOR, _src

    train = _src("""
        \"\"\"Training.\"\"\"
        from data.loading import make_loader


        def train(model, dataset, tokenizer):
            for batch in make_loader(dataset, tokenizer):
                loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
                loss.backward()
    """)
    root = make_project(tmp_path, {})
    for name, text in (("data/loading.py", _src(PADDING_COLLATOR)), ("train.py", train)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.replace("\n", newline).encode())
    diags = lint_paths([root], select=["TL101"]).diagnostics
    assert found(diags, root) == {("train.py", 7, "TL101")}
