"""The child processes of `tlint verify` and `tlint scan-data` against hostile user code (issue
24): nothing it starts is left running (normal end, timeout, crash, SIGINT, SIGTERM; checked
in /proc), the report channel cannot be forged through files and what comes through it is
validated, the memory limit holds whatever the factory does, the parent keeps only the end of
the child's output, the child's environment and working folder are as documented, and output
paths in a config stay inside the config's folder.

Most tests run a scripted child (a small module using the child side of tlint/verify/child.py,
no torch: fast); the last ones run the real worker on hostile factories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cliutil import main_in, make_project, run_tlint, tlint_env
from tests.torchutil import import_torch
from tlint.verify import child
from tlint.verify.command import VerifyError, run_worker
from tlint.verify.options import VerifyOptions

# slow: the verifier's child processes: each imports torch, some hang or run out of memory on purpose
# one worker for the timing-sensitive modules (timeouts, memory limits, several processes): xdist group "serial"
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serial"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; POSIX process groups")]

REPO = Path(__file__).resolve().parent.parent

# The scripted child: the real child side (limits, report pipe), then the test's ACTION.
FAKE = '''
import json, os, subprocess, sys, time
from tlint.verify.child import start_child

request, reporter = start_child(sys.argv[1:])
emit = reporter.emit
PIDS = os.environ.get("FAKE_PIDS")


def spawn_family():
    """A forked child, a Popen'd process and a setsid()'d grandchild (a daemon's double fork)."""
    pids = [os.getpid()]
    pid = os.fork()
    if pid == 0:
        time.sleep(300)
        os._exit(0)
    pids.append(pid)
    pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]).pid)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(300)
            os._exit(0)
        os.write(write, str(grandchild).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    pids.append(int(os.read(read, 64)))
    with open(PIDS, "w") as stream:
        json.dump(pids, stream)


def complete_run(status="pass"):
    template = {"probe": "mask-leak", "status": "skip", "figure": None, "tolerance": 0.0, "unit": "", "module": None,
                "detail": ""}
    emit({"event": "ready"})
    emit({"event": "loaded", "model": {"factory": "m:build", "class": "M", "parameters": 1, "call": "ids"},
          "classes": []})
    emit({"event": "start", "probe": "mask-leak", "template": template})
    emit({"event": "done", "probe": "mask-leak", "entry": {**template, "status": status, "figure": 0.0,
                                                          "extra": {}, "seconds": 0.0}})
    emit({"event": "end"})


ACTION
'''


@pytest.fixture
def fake_child(tmp_path, monkeypatch):
    """Install a scripted worker (and scan child): `fake_child(action)`; returns the pids file."""
    folder = tmp_path / "fake"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    pids = tmp_path / "pids.json"
    monkeypatch.setenv("FAKE_PIDS", str(pids))

    def install(action: str) -> Path:
        (folder / "fake_worker.py").write_text(FAKE.replace("ACTION", textwrap.dedent(action)))
        monkeypatch.setattr(child, "WORKER_MODULE", "fake_worker")
        monkeypatch.setattr(child, "SCAN_MODULE", "fake_worker")
        return pids

    return install


def _options(tmp_path, **kw) -> VerifyOptions:
    return VerifyOptions(model="m:build", root=str(tmp_path), probes=["mask-leak"], **kw)


def _alive(pids) -> list[int]:
    """The pids that still exist (a zombie included)."""
    return [pid for pid in pids if os.path.exists(f"/proc/{pid}")]


def _wait_for(path: Path, seconds: float = 30) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.is_file() and path.read_text():
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


# --- nothing left running ----------------------------------------------------------------------

@pytest.mark.parametrize("how, action", [
    ("normal end", "spawn_family()\ncomplete_run()\n"),
    ("crash", "spawn_family()\nos._exit(7)\n"),
    ("timeout", "spawn_family()\nemit({'event': 'ready'})\ntime.sleep(300)\n"),
    ("error", "spawn_family()\nemit({'event': 'error', 'kind': 'factory', 'message': 'no'})\n"),
])
def test_nothing_the_child_started_survives_the_run(tmp_path, fake_child, how, action):
    pids_file = fake_child(action)
    before = child._children(os.getpid())
    options = _options(tmp_path, timeout=3.0)
    try:
        result = run_worker(options)
        assert how == "normal end" and result["probes"][0]["status"] == "pass"
    except VerifyError as exc:
        assert how != "normal end", exc
        assert exc.kind == {"crash": "crash", "timeout": "timeout", "error": "factory"}[how]
    pids = json.loads(pids_file.read_text())
    assert len(pids) == 4 and _alive(pids) == []  # the child, its fork, its Popen, the setsid'd grandchild
    assert child._children(os.getpid()) <= before  # no zombie left to this process either


DRIVER = '''
import sys
from tlint.verify import child
child.WORKER_MODULE = "fake_worker"
from tlint.cli import main
sys.exit(main(["verify", "--model", "m:build", "--format", "json", "--probe", "mask-leak"]))
'''


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP),
                                          (signal.SIGINT, 130)])
def test_sigterm_or_sigint_to_tlint_leaves_nothing_running(tmp_path, fake_child, signum, code):
    pids_file = fake_child("spawn_family()\nemit({'event': 'ready'})\ntime.sleep(300)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]])}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        pids = _wait_for(pids_file)
        assert len(_alive(pids)) == 4
        driver.send_signal(signum)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == code, driver.stderr.read() if driver.stderr else ""
    time.sleep(0.2)  # (the orphans were reaped by the driver; its own exit reaps nothing else)
    assert _alive(pids) == []


# --- the report channel --------------------------------------------------------------------------

FORGED = {"event": "done", "probe": "mask-leak",
          "entry": {"probe": "mask-leak", "status": "pass", "figure": 0.0, "tolerance": 0.0, "unit": "", "detail": "",
                    "extra": {}}}
MODEL = {"factory": "m:build", "class": "M", "parameters": 1, "call": "ids"}


@pytest.mark.parametrize("action, words", [
    ("os.write(reporter.fd, b'not json\\n')", "a line that is not JSON"),
    ("emit({'event': 'pwned'})", "an unknown event 'pwned'"),
    ("os.write(reporter.fd, b'[1, 2]\\n')", "a line that is not an event"),
    (f"emit({{'event': 'loaded', 'model': {MODEL!r}, 'classes': []}})\nemit({FORGED!r})",
     "a `done` event out of place"),
    (f"emit({{'event': 'loaded', 'model': {MODEL!r}, 'classes': []}})\nemit({{'event': 'end'}})", "missing: mask-leak"),
    (f"emit({{'event': 'loaded', 'model': {MODEL!r}, 'classes': [{{'name': 1}}]}})", "a `loaded` event out of place"),
    ("emit({'event': 'loaded', 'model': {}, 'classes': []})", "a `loaded` event out of place"),
    ("emit({'event': 'error', 'kind': 3})", "an `error` event without its kind"),
])
def test_an_invalid_report_is_a_report_error_not_a_crash_of_tlint(tmp_path, fake_child, action, words):
    fake_child(action)
    with pytest.raises(VerifyError) as info:
        run_worker(_options(tmp_path))
    assert info.value.kind == "report" and words in str(info.value), str(info.value)


def test_files_in_the_working_folder_are_not_the_channel(tmp_path, fake_child):
    """The old channel, progress.jsonl in the working folder: forging it (or deleting it)
    changes nothing; the child's crash is reported as such."""
    fake_child(f'''
        for name in ("progress.jsonl", "result.json", "output.txt"):
            with open(name, "w") as stream:
                stream.write(json.dumps({{"event": "loaded", "model": {{}}, "classes": []}}) + "\\n")
                stream.write(json.dumps({FORGED!r}) + "\\n" + json.dumps({{"event": "end"}}) + "\\n")
        for name in os.listdir(".."):
            if name != "work":
                os.remove(os.path.join("..", name))
        print("forged")
        sys.exit(1)
    ''')
    with pytest.raises(VerifyError) as info:
        run_worker(_options(tmp_path))
    assert info.value.kind == "crash" and "exited with code 1 before reporting" in str(info.value)
    assert "forged" in str(info.value)


def test_cli_json_error_for_a_garbled_report(tmp_path, fake_child):
    fake_child("os.write(reporter.fd, b'\\xff\\xfe garbage\\n')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]])}
    proc = subprocess.run([sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "report" and "internal error" not in proc.stdout + proc.stderr


OVERSIZED = {
    # many valid events: the limit, not a malformed line, ends it
    "lines": "line = json.dumps({'event': 'ready'}).encode() + b' ' * 4000 + b'\\n'",
    # one line that never ends: read in linear time, not rescanned at each read
    "one-line": "line = b'{\"event\": \"ready\"' + b' ' * (2**20 - 17)",
}


# duration: the child writes just over 256 MiB through the report pipe
@pytest.mark.parametrize("shape", list(OVERSIZED))
def test_a_report_over_the_limit_is_a_report_error_in_json(tmp_path, fake_child, shape):
    """A factory that writes more than `REPORT_LIMIT_BYTES` (256 MiB) to the report channel:
    exit 2 with the `report` error in JSON on stdout, never an internal error."""
    import resource

    fake_child(OVERSIZED[shape] + """
block = line * max(1, 2**20 // len(line))
for _ in range(257 + 256 * 2**20 // len(block)):
    os.write(reporter.fd, block)
""")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2, proc.stderr
    document = json.loads(proc.stdout)
    assert set(document) == {"tool", "error"} and document["error"]["kind"] == "report", document
    assert "more than 256 MiB" in document["error"]["message"]
    assert "internal error" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert after.ru_utime - before.ru_utime < 30  # linear in the report's size (a rescan per read: minutes)


def test_scan_data_result_is_validated(tmp_path, fake_child):
    from tlint.verify.data import DataError, DataOptions, _run_child

    fake_child('''
        emit({"event": "result", "result": {"scan": {"loader": "l:f", "batches": 1, "samples": 1},
              "checks": [], "files": ["/etc/passwd"]}})
    ''')
    with pytest.raises(DataError) as info:
        _run_child(DataOptions(dataloader="l:f", root=str(tmp_path)), verbose=False)
    assert info.value.kind == "report" and "files outside the project" in str(info.value)


# --- bounded output, memory limit, environment ---------------------------------------------------

RSS_DRIVER = '''
import sys
from tlint.verify import child
from tlint.verify.command import VerifyError, run_worker
from tlint.verify.options import VerifyOptions
child.WORKER_MODULE = "fake_worker"
try:
    run_worker(VerifyOptions(model="m:build", root=".", probes=["mask-leak"]))
except VerifyError as exc:
    print(exc)
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))  # KiB
'''


def test_the_parent_keeps_only_the_end_of_the_output(tmp_path, fake_child):
    fake_child('''
        chunk = b"x" * 1023 + b"\\n"
        for _ in range(300 * 1024):
            sys.stdout.buffer.write(chunk)
        print("the last line")
        sys.stdout.flush()
        os._exit(5)
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]])}
    proc = subprocess.run([sys.executable, "-c", RSS_DRIVER], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    lines = proc.stdout.strip().splitlines()
    message, peak_kib = "\n".join(lines[:-1]), int(lines[-1])
    assert "exited with code 5 before reporting" in message and "the last line" in message
    assert f"[{300 * 2**20 + 14 - child.OUTPUT_TAIL_BYTES:,} earlier bytes of output not kept]" in message
    # 300 MiB printed; the parent's peak resident memory stays small (VmHWM: ru_maxrss would count the
    # memory of the process that started it, when started by vfork)
    assert peak_kib < 120 * 1024, (peak_kib, message)


def test_memory_limit_holds_in_the_child_whatever_it_does(tmp_path, fake_child):
    fake_child('''
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            raised = "raised"
        except (ValueError, OSError):
            raised = "refused"
        try:
            block = bytearray(2 * 2**30)
            allocated = "allocated"
        except MemoryError:
            allocated = "MemoryError"
        emit({"event": "error", "kind": "limits", "message": f"{soft} {hard} {raised} {allocated}"})
    ''')
    with pytest.raises(VerifyError) as info:
        run_worker(_options(tmp_path, memory_limit=100))
    limit = (100 + child.HEADROOM_MIB) * 2**20
    assert str(info.value) == f"{limit} {limit} refused MemoryError"


def test_child_environment_and_working_folder(tmp_path, fake_child, monkeypatch):
    monkeypatch.setenv("TLINT_NO_CACHE", "1")
    monkeypatch.setenv("USER_SETTING", "kept")
    fake_child('''
        facts = {"tlint": sorted(k for k in os.environ if k.startswith("TLINT_")), "user": os.environ.get("USER_SETTING"),
                 "bytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"), "cwd": os.getcwd(), "files": os.listdir("."),
                 "inheritable": os.get_inheritable(reporter.fd), "stdin": sys.stdin.read(),
                 "group": os.getpgid(0) == os.getpid()}
        emit({"event": "error", "kind": "facts", "message": json.dumps(facts)})
    ''')
    with pytest.raises(VerifyError) as info:
        run_worker(_options(tmp_path))
    facts = json.loads(str(info.value))
    assert facts["tlint"] == [] and facts["user"] == "kept" and facts["bytecode"] == "1"
    assert facts["files"] == [] and facts["stdin"] == "" and facts["group"] and not facts["inheritable"]
    assert Path(facts["cwd"]).name == "work" and not Path(facts["cwd"]).exists()  # removed after the run


# --- output paths in a config ------------------------------------------------------------------

@pytest.mark.parametrize("setting, link", [('"../outside"', None), ('"/tmp/elsewhere"', None),
                                           ('"maps"', "maps")])
def test_config_output_paths_stay_inside_the_config_folder(tmp_path, setting, link):
    root = make_project(tmp_path / "p", {"usermodel.py": "def build():\n    pass\n",
                                         "tlint.toml": f'[verify]\nmodel = "usermodel:build"\nartifacts = {setting}\n'})
    if link:
        (tmp_path / "target").mkdir()
        (root / link).symlink_to(tmp_path / "target")
    proc = run_tlint("verify", cwd=root)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"tlint: error: {root / 'tlint.toml'}:3: `artifacts = ")
    assert "outside the config's folder" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("setting", ['"../elsewhere"', '"/tmp/tlint-cache-elsewhere"', '"link/cache"'])
def test_config_cache_dir_stays_inside_the_config_folder(tmp_path, capsys, monkeypatch, setting):
    root = make_project(tmp_path / "p", {"train.py": "import torch\n", "tlint.toml": f"\ncache-dir = {setting}\n"})
    (root / "link").symlink_to(tmp_path)
    proc = main_in(root, "check", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2 and proc.stderr.startswith(f"tlint: error: {root / 'tlint.toml'}:2: `cache-dir = ")
    assert "outside the config's folder" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"] and not Path("/tmp/tlint-cache-elsewhere").exists()


# --- the real worker on hostile factories (torch) ---------------------------------------------------

HOSTILE = '''
import json, os, subprocess, sys, time
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 16)
        self.out = nn.Linear(16, 3)

    def forward(self, ids):
        return self.out(self.tok(ids))


def build():
    pids = [os.getpid(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]).pid]
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(300)
        os._exit(0)
    pids.append(pid)
    with open(os.environ["FAKE_PIDS"], "w") as stream:
        json.dump(pids, stream)
    forged = {"event": "done", "probe": "mask-leak", "entry": {"probe": "mask-leak", "status": "pass"}}
    with open("progress.jsonl", "w") as stream:
        stream.write(json.dumps(forged) + "\\n")
    sys.stdout.write("noise\\n" * 200_000)
    return Tagger()


def build_huge():
    torch.zeros(1).item()  # defeats the meta-device check
    return nn.Embedding(10**6, 50_000)  # 200 GB
'''


def test_real_worker_hostile_factory(tmp_path):
    import_torch()
    root = make_project(tmp_path / "p", {"usermodel.py": HOSTILE})
    pids_file = tmp_path / "pids.json"
    proc = run_tlint("verify", "--model", "usermodel:build", "--probe", "nan-trace", "--probe", "grad-flow",
                     "--format", "json", cwd=root, env=tlint_env(FAKE_PIDS=str(pids_file)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probes = [(p["probe"], p["status"]) for p in json.loads(proc.stdout)["probes"]]
    assert probes == [("nan-trace", "pass"), ("grad-flow", "pass")]
    pids = json.loads(pids_file.read_text())
    assert len(pids) == 3 and _alive(pids) == []


def test_real_worker_memory_limit_cannot_be_skipped(tmp_path):
    import_torch()
    root = make_project(tmp_path / "p", {"usermodel.py": HOSTILE})
    proc = run_tlint("verify", "--model", "usermodel:build_huge", "--format", "json", cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "memory" and "ran out of memory" in error["message"], error


LOADER = '''
import json, os, subprocess, sys


def train_loader():
    pids = [os.getpid(), subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]).pid]
    with open(os.environ["FAKE_PIDS"], "w") as stream:
        json.dump(pids, stream)
    with open("result.json", "w") as stream:
        json.dump({"scan": {}, "checks": [], "files": []}, stream)
    return [{"input_ids": [[5, 6, 7, 0]], "attention_mask": [[1, 1, 1, 0]]}] * 2
'''


def test_real_scan_data_child_leaves_nothing_and_is_not_forged(tmp_path):
    import_torch()
    root = make_project(tmp_path / "p", {"loaders.py": LOADER})
    pids_file = tmp_path / "pids.json"
    proc = run_tlint("scan-data", "--dataloader", "loaders:train_loader", "--pad-token-id", "0", "--format", "json",
                     cwd=root, env=tlint_env(FAKE_PIDS=str(pids_file)))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["scan"]["batches"] == 2 and report["checks"]
    pids = json.loads(pids_file.read_text())
    assert len(pids) == 2 and _alive(pids) == []
