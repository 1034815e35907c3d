"""Parse isolation (issue 23): a file LibCST might crash on (Python refuses it, so the depth
guards cannot look) or spend minutes on (deeply nested `match` patterns, a file over
`GUARD_BYTES`) is analysed in a child process under a time limit; a crash is TL001 "parser
crashed", a parse over the limit TL001 "parse took longer than N s", and the run (in one
process or in workers) and the language server go on. The crash and the exponential parse
are small generated inputs, run here in a child `python` with a time limit of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.cliutil import REPO, make_project, tlint_env
from tlint import reading
from tlint.diagnostics import Diagnostic

# LibCST 1.9 accepts `(*a) = 1`, which every Python refuses; 8,000 dotted names crash its
# native parser (a segfault) within a second.
CRASH = "(*a) = 1\nimport a" + ".b" * 8000 + "\n"
MODEL = (
    "from torch import nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def forward(self, x, mask):\n"
    "        return x.mean(1)\n"
)


def nested_mapping_pattern(depth: int) -> str:
    pattern = "1"
    for _ in range(depth):
        pattern = "{'k': " + pattern + "}"
    return f"import torch\n\nmatch x:\n    case {pattern}:\n        pass\n"


def nested_pattern(open_: str, close: str, depth: int, inner: str = "1") -> str:
    """A `case` whose pattern nests `open_ ... close` `depth` times (class patterns holding
    groups, or-patterns in groups: each level a bracket or two)."""
    return f"import torch\n\nmatch x:\n    case 0:\n        pass\n    case {open_ * depth}{inner}{close * depth}:\n        pass\n"


def run_script(script: str, timeout: float = 90) -> dict:
    """`script` in a child python (this tree first on the path); its last line is JSON."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout, env=tlint_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


LINT = """
    import json, sys, time
    from pathlib import Path
    import tlint.engine
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    if {parallel}:
        tlint.engine._PARALLEL_MIN_BYTES = 0  # workers even for a small run
    started = time.perf_counter()
    result = Linter(ConfigResolver(), jobs={jobs}, parse_time_limit={limit}).run([Path({root!r})])
    print(json.dumps({{"seconds": time.perf_counter() - started,
                      "found": sorted([Path(d.path).name, d.code, d.message] for d in result.diagnostics)}}))
"""


@pytest.mark.parametrize("jobs", [1, 2], ids=["in-process", "workers"])
def test_a_native_parser_crash_and_a_slow_parse_are_tl001_and_the_run_goes_on(tmp_path, jobs):
    root = make_project(tmp_path, {"model.py": MODEL, "crash.py": CRASH, "slow.py": nested_mapping_pattern(11),
                                   "slow_class.py": nested_pattern("A((", "))", 12)})
    out = run_script(LINT.format(parallel=jobs > 1, jobs=jobs, limit=1.5, root=str(root)))
    assert out["found"] == [
        ["crash.py", "TL001", "parser crashed on this file (SIGSEGV): the file was not checked"],
        ["model.py", "TL103", out["found"][1][2]],
        ["slow.py", "TL001", "parse took longer than 1.5 s: the file was not checked"],
        ["slow_class.py", "TL001", "parse took longer than 1.5 s: the file was not checked"],
    ]
    assert out["seconds"] < 30  # depth 11 alone takes LibCST 10 to 30 s; the class pattern minutes


def test_a_guarded_file_that_parses_in_time_gives_its_findings(tmp_path):
    # Python refuses the file (a starred assignment target), LibCST parses it in the child:
    # the findings come back from the child as from an in-process analysis
    root = make_project(tmp_path, {"model.py": "(*a) = 1\n" + MODEL})
    out = run_script(LINT.format(parallel=False, jobs=1, limit=20, root=str(root)))
    assert [code for _, code, _ in out["found"]] == ["TL103"]


def test_only_the_files_at_risk_are_guarded(monkeypatch):
    monkeypatch.setattr(reading, "GUARD_BYTES", 4096)  # (1 MiB: the same, slower)
    text = "x = 1\n"
    assert reading.parse_source(text, "a.py", guard=True).code == text  # plain code: parsed here
    for risky, why in ((CRASH, "Python refuses it"), (nested_mapping_pattern(6), "nested match patterns"),
                       (nested_pattern("A((", "))", 3), "nested match patterns"),
                       (nested_pattern("((1) | (", "))", 3, "2"), "nested match patterns"),
                       (nested_pattern("(", ")", 6), "nested match patterns"),
                       (nested_pattern("A(x=", ")", 6), "nested match patterns"),
                       (nested_pattern("[(", ") as y]", 3), "nested match patterns"),
                       ("x = 1\n" * 700, "large")):
        with pytest.raises(reading.NeedsGuard) as caught:
            reading.parse_source(risky, "a.py", guard=True)
        assert caught.value.reason == why
    # five levels of patterns (LibCST: milliseconds) and `case` used as a name are not at risk
    for safe in (nested_mapping_pattern(5), "case = 1\ncase\n", nested_pattern("A(", ")", 5),
                 nested_pattern("A(", ")", 2, "'((((((('") + '"""\ncase ((((((((\n"""\n',
                 "match x:\n    case [{'a': (1, 2)}, C(y=[1])] if f(g(h(i(j(k(1)))))):\n        pass\n"):
        assert not isinstance(reading.parse_source(safe, "a.py", guard=True), Diagnostic)
    # without the guard (the guard's child), nothing is refused for these reasons
    assert not isinstance(reading.parse_source(nested_mapping_pattern(6), "a.py"), Diagnostic)


def test_the_guard_costs_one_fork_and_reports_a_crash_or_a_timeout():
    from tlint.guard import GuardFailed, run_guarded

    started = time.perf_counter()
    assert run_guarded(sum, ((1, 2),), 30) == 3
    assert time.perf_counter() - started < 5
    with pytest.raises(GuardFailed) as crash:
        run_guarded(__import__("os").abort, (), 30)
    assert crash.value.crashed and crash.value.detail == "SIGABRT"
    with pytest.raises(GuardFailed) as slow:
        run_guarded(time.sleep, (30,), 0.5)
    assert not slow.value.crashed and slow.value.detail == "took longer than 0.5 s"
    with pytest.raises(ZeroDivisionError):
        run_guarded(divmod, (1, 0), 30)


def test_the_language_server_survives_a_parser_crash(tmp_path):
    from tests.test_lsp import Client, open_document, start, stop

    project = make_project(tmp_path / "proj", {})
    client = Client(project)
    try:
        start(client, project)
        crash = (project / "crash.py").as_uri()
        open_document(client, crash, CRASH)
        _, params = client.published(crash, version=1)
        assert [d["message"] for d in params["diagnostics"]] == [
            "parser crashed on this file (SIGSEGV): the file was not checked"]
        model = (project / "model.py").as_uri()
        open_document(client, model, MODEL)
        _, params = client.published(model, version=1)
        assert [d["code"] for d in params["diagnostics"]] == ["TL103"]
        stop(client)
    finally:
        client.close()
