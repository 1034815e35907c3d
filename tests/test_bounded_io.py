"""Every file tlint opens goes through one bounded door (`tlint/bounded.py`): a folder seeded
with hostile files (links to /dev/zero and /dev/stdin, FIFOs, 4 GB sparse files, hostile git
and config files) gives findings or clean TL001s in bounded memory and time, in every
format that shows code frames; the reporters never open a file the analysis refused;
outputs never follow a link and never block on a FIFO; and no raw open of a path comes
back into tlint/ (an AST scan, with the justified exceptions listed)."""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cliutil import make_project, tlint_env
from tests.test_hostile import MODEL
from tlint import bounded

REPO = Path(__file__).resolve().parent.parent
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero")
                                or not sys.platform.startswith("linux"), reason="FIFOs, /dev/zero, RLIMIT_AS")
ADDRESS_SPACE = 2 * 2**30  # the cap each hostile run is under
SPARSE = 4 * 2**30


def _sparse(path: Path, size: int = SPARSE) -> None:
    with open(path, "wb") as stream:  # costs no disk
        stream.truncate(size)


def _capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _run_capped(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m tlint ARGS` under a 2 GiB address-space cap, its standard input a pipe
    kept open (a read of /dev/stdin would wait forever), killed after 60 s."""
    read, write = os.pipe()
    try:
        return subprocess.run([sys.executable, "-m", "tlint", *args], cwd=cwd, stdin=read, capture_output=True,
                              text=True, encoding="utf-8", env=env, timeout=60, preexec_fn=_capped)
    finally:
        os.close(read)
        os.close(write)


def _hostile_folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository with every hostile file of the list, and a HOME whose git config names
    a FIFO as the global excludes file."""
    root = make_project(tmp_path / "repo", {"model.py": MODEL, "pkg/__init__.py": ""})
    (root / "zero.py").symlink_to("/dev/zero")
    (root / "stdin.py").symlink_to("/dev/stdin")
    os.mkfifo(root / "fifo.py")
    os.mkfifo(root / "pkg" / "fifo.ipynb")
    _sparse(root / "big.py")
    _sparse(root / "big.ipynb")
    (root / ".gitignore").symlink_to("/dev/zero")
    (root / "pkg" / ".gitignore").symlink_to("/dev/stdin")
    (root / ".git" / "info").mkdir()
    (root / ".git" / "info" / "exclude").symlink_to("/dev/zero")
    (root / ".git" / "config").symlink_to("/dev/zero")
    (root / "tlint.toml").symlink_to("/dev/zero")
    os.mkfifo(root / "pyproject.toml")
    sub = root / "sub"  # a nested work tree whose `.git` file is a link to /dev/zero
    sub.mkdir()
    (sub / ".git").symlink_to("/dev/zero")
    (sub / "ok.py").write_text("x = 1\n")
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "excludes")
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {home / 'excludes'}\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").symlink_to("/dev/zero")
    env = tlint_env(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    env.pop("XDG_CONFIG_HOME", None)
    return root, env


HOSTILE_TL001 = {
    "zero.py": "not a regular file (a character device): it is not read",
    "fifo.py": "not a regular file (a FIFO): it is not read",
    "pkg/fifo.ipynb": "not a regular file (a FIFO): it is not read",
    "big.py": "file too large to lint (4096.0 MiB; the limit is 1 MiB): exclude it in the configuration",
    "big.ipynb": "file too large to lint (4096.0 MiB; the limit is 16 MiB): exclude it in the configuration",
}


# duration: three runs of `tlint check` in a child process (text, SARIF, LSP: the formats with code frames)
@posix_only
def test_a_hostile_folder_gives_findings_and_clean_tl001s_in_bounded_memory_and_time(tmp_path):
    root, env = _hostile_folder(tmp_path)
    for fmt in ("text", "sarif", "lsp"):
        started = time.monotonic()
        proc = _run_capped(["check", "--no-cache", "--output-format", fmt, "."], root, env)
        assert time.monotonic() - started < 30, fmt
        assert proc.returncode == 1, (fmt, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        if fmt == "text":
            assert "model.py:5:" in proc.stdout and "TL103" in proc.stdout
            for name, message in HOSTILE_TL001.items():
                assert f"{name}:1:1: TL001 [error] {message}" in proc.stdout, (name, proc.stdout)
            assert "stdin.py:1:1: TL001 [error] not a regular file" in proc.stdout
            assert "sub/ok.py" not in proc.stdout  # linted, clean
        elif fmt == "sarif":
            results = json.loads(proc.stdout)["runs"][0]["results"]
            assert {r["ruleId"] for r in results} == {"TL001", "TL103"}
            assert sum(r["ruleId"] == "TL001" for r in results) == len(HOSTILE_TL001) + 1
        else:
            published = {json.loads(line)["uri"].rsplit("/repo/", 1)[1]: json.loads(line)["diagnostics"]
                         for line in proc.stdout.splitlines()}
            assert [d["code"] for d in published["zero.py"]] == ["TL001"]
            assert [d["code"] for d in published["model.py"]] == ["TL103"]


@posix_only
def test_a_config_over_the_limit_is_a_clear_error_not_a_read(tmp_path):
    root = make_project(tmp_path, {"model.py": MODEL})
    _sparse(root / "tlint.toml")
    proc = _run_capped(["check", "--no-cache", "."], root, tlint_env())
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"tlint: error: {root / 'tlint.toml'}: cannot read config file (too large: "
                                   "4096.0 MiB, over the 4 MiB limit)")


def test_the_reporters_never_open_a_file_the_analysis_refused(tmp_path, monkeypatch, capsys):
    from tlint import cli

    root = make_project(tmp_path, {"model.py": MODEL})
    _sparse(root / "big.py", 2 * 2**20)
    opened: list[str] = []

    def counting(real):
        def opening(path, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)):
                opened.append(os.path.basename(os.fspath(path)))
            return real(path, *args, **kwargs)
        return opening

    monkeypatch.setattr(os, "open", counting(os.open))
    monkeypatch.setattr(io, "open", counting(io.open))
    monkeypatch.setattr(builtins, "open", counting(builtins.open))
    monkeypatch.chdir(root)
    for fmt in ("text", "sarif", "lsp", "concise", "github", "json", "junit"):
        opened.clear()
        assert cli.main(["check", "--no-cache", "--jobs", "1", "--output-format", fmt, "."]) == 1
        out = capsys.readouterr().out
        assert "big.py" in out and opened.count("big.py") == 1, (fmt, opened)  # the analysis's read only
        assert opened.count("model.py") >= 1


# --- outputs --------------------------------------------------------------------------------


@posix_only
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_check_output_file_is_not_written_through_a_link_nor_into_a_fifo(tmp_path, kind):
    root = make_project(tmp_path / "repo", {"model.py": MODEL})
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = root / "report.txt"
    if kind == "link":
        target.symlink_to(victim)
    else:
        os.mkfifo(target)
    proc = _run_capped(["check", "--no-cache", "-o", "report.txt", "."], root, tlint_env())
    assert proc.returncode == 2, proc.stderr
    words = "a symbolic link: tlint does not write through one" if kind == "link" else "not a regular file: a FIFO"
    assert proc.stderr.strip() == f"tlint: error: cannot write report.txt (--output-file): {words}"
    assert victim.read_text() == "keep me\n"


@posix_only
@pytest.mark.parametrize("kind", ["link", "fifo", "dev-null"])
def test_the_watch_never_opens_its_event_file_through_a_link_or_into_a_fifo(tmp_path, kind):
    from tlint.watch.output import FILE_NAME, JsonLines

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    if kind == "link":
        (run / FILE_NAME).symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(run / FILE_NAME)
    else:
        (run / FILE_NAME).symlink_to("/dev/null")
    with pytest.raises(bounded.Refused) as info:
        JsonLines(run)
    assert f"tlint.watch cannot write its events to {run / FILE_NAME}" in str(info.value)
    assert "pass another output_dir" in str(info.value)
    assert victim.read_text() == "keep me\n"
    writer = JsonLines(tmp_path / "fresh")  # an ordinary folder: written as ever
    writer.write("start", None, framework="plain")
    writer.close()
    assert json.loads((tmp_path / "fresh" / FILE_NAME).read_text())["event"] == "start"


@posix_only
def test_the_atomic_writer_replaces_a_link_but_refuses_a_fifo_or_a_device(tmp_path):
    from tlint.atomic import write_bytes_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    write_bytes_atomic(link, b"<html>")
    assert not link.is_symlink() and link.read_bytes() == b"<html>" and victim.read_text() == "keep me\n"
    os.mkfifo(tmp_path / "fifo.html")
    with pytest.raises(bounded.Refused, match="not a regular file: a FIFO"):
        write_bytes_atomic(tmp_path / "fifo.html", b"<html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


# --- the reader itself ---------------------------------------------------------------------


@posix_only
def test_the_reader_refuses_by_type_on_the_open_file_and_by_size_without_reading(tmp_path, monkeypatch):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(bounded.Refused, match="^not a regular file: a FIFO$"):
        bounded.read_bytes(tmp_path / "fifo", 10)  # returns at once: the open does not wait for a writer
    with pytest.raises(bounded.Refused, match="^not a regular file: a character device$"):
        bounded.read_bytes("/dev/zero", 10)
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    with pytest.raises(bounded.Refused, match="^a symbolic link: not followed$"):
        bounded.read_bytes(tmp_path / "link", 10, follow_links=False)
    _sparse(tmp_path / "big", 2**20)
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(bounded.Refused, match=r"^too large: 1\.0 MiB, over the 1,000 bytes limit$") as info:
        bounded.read_bytes(tmp_path / "big", 1000)
    assert reads == [] and isinstance(info.value, OSError) and info.value.kind == "size"
    (tmp_path / "small").write_bytes(b"abc")
    assert bounded.read_bytes(tmp_path / "small", 3) == b"abc"


# --- no raw open of a path in tlint/ --------------------------------------------------------

# Calls that open a file by path (or write one) other than through tlint/bounded.py.
_OPENING = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "fdopen", "mkstemp", "savefig",
            "EventFileLoader"}
# (module, the call's source) -> why it may open a file itself.
ALLOWED = {
    ("tlint/atomic.py", "tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=target.suffix if suffix is None "
                        "else suffix)"):
        "the replace-by-rename writer's own temporary file, created exclusively (O_EXCL) in the target's folder; "
        "the target is checked by bounded.check_replaceable and replaced, never followed",
    ("tlint/atomic.py", "os.fdopen(fd, 'wb')"): "wraps the temporary file mkstemp just created",
    ("tlint/cli.py", "open(os.devnull, 'w')"): "the null device, to silence the final flush: not a user's path",
    ("tlint/doctor/html.py", "fig.savefig(buffer, format='png', dpi=90)"): "an in-memory buffer",
    ("tlint/diagnose/plots.py", "fig.savefig(stream, format='png', dpi=110)"): "the stream open_output opened",
    ("tlint/verify/activations.py", "fig.savefig(stream, format='png', dpi=100)"): "the stream open_output opened",
    ("tlint/signed.py", "os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 384)"):
        "creates the signing key's temporary file exclusively, never through a link, in the user's cache folder",
    ("tlint/trace/child.py", "request_path.read_text(encoding='utf-8')"):
        "the request tlint wrote into the fresh temporary folder it made for the child",
    ("tlint/verify/worker.py", "request.read_text(encoding='utf-8')"):
        "the request tlint wrote into the fresh temporary folder it made for the child",
    ("tlint/verify/data.py", "request.read_text(encoding='utf-8')"):
        "the request tlint wrote into the fresh temporary folder it made for the child",
    ("tlint/verify/child.py", "request.write_text(self.request, encoding='utf-8')"):
        "writes the request into the fresh temporary folder tlint made for the child",
    ("tlint/trace/launch.py", "request.write_text(json.dumps({'target': target, 'args': script_args, 'module': "
                              "module, 'steps': self.steps, 'rank': rank}), encoding='utf-8')"):
        "writes a launched rank's request into the fresh temporary folder tlint made for the run",
    ("tlint/verify/child.py", "open(f'/proc/{pid}/stat', 'rb')"): "the process table, not a user's path",
    ("tlint/diagnose/readers.py", "EventFileLoader(str(f))"):
        "TensorBoard reads its event file itself: the folder walk passes it regular files only (links skipped), "
        "after a size check",
}


def _opening(tree: ast.AST) -> list[str]:
    """The source of each call in `tree` that opens a file, other than `bounded.*`."""
    found = []
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Name and func.id in ("open", "EventFileLoader"):
            found.append(ast.unparse(node))
        elif type(func) is ast.Attribute and func.attr in _OPENING and not (
                type(func.value) is ast.Name and func.value.id == "bounded"):
            found.append(ast.unparse(node))
    return found


def _opening_calls() -> list[tuple[str, str]]:
    found = []
    for path in sorted((REPO / "tlint").rglob("*.py")):
        module = path.relative_to(REPO).as_posix()
        if module != "tlint/bounded.py":  # the door itself
            found += [(module, call) for call in _opening(ast.parse(path.read_text(encoding="utf-8")))]
    return found


def test_no_raw_open_of_a_path_comes_back_into_tlint():
    calls = _opening_calls()
    unexplained = [call for call in calls if call not in ALLOWED]
    assert unexplained == [], "open files through tlint/bounded.py (or list the call in ALLOWED, saying why)"
    assert set(ALLOWED) <= set(calls), "ALLOWED lists calls that are gone: remove them"


def test_the_scan_sees_each_way_of_opening_a_file():
    tree = ast.parse("open(p)\np.read_text()\np.read_bytes()\np.write_text(t)\np.open()\nos.open(p, 0)\n"
                     "fig.savefig(p)\nbounded.read_text(p, 1)\nEventFileLoader(p)\n")
    assert sorted(_opening(tree)) == sorted(["open(p)", "p.read_text()", "p.read_bytes()", "p.write_text(t)",
                                             "p.open()", "os.open(p, 0)", "fig.savefig(p)", "EventFileLoader(p)"])
