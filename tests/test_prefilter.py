"""The pre-filter (tlint/engine.py): files with none of the tokens of the enabled rules and
fact extractors are not parsed by LibCST, and the output never changes for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import libcst
import pytest

from tests.cliutil import REPO, main_in, make_project
from tests.doc_examples import examples, rule_documents, variants
from tlint import engine, reading
from tlint.config import ConfigResolver
from tlint.engine import Linter, needed_tokens
from tlint.rules import ALL_RULES, ENGINE_CODES
from tlint.views import facts as facts_view

sys.path.append(str(REPO / "bench"))
from prefilter_audit import soundness  # noqa: E402

FIXTURES = REPO / "fixtures"

# No rule or extractor token: lowered, this mentions nothing a rule looks for.
PLAIN = '''"""A plain module."""

import os


def listing(folder):
    return sorted(os.listdir(folder))


class Box:
    def __init__(self, items):
        self.items = list(items)
'''


def _json(root: Path, *args: str, prefilter: bool, capsys, monkeypatch) -> str:
    monkeypatch.delenv("TLINT_NO_PREFILTER", raising=False)
    flags = [] if prefilter else ["--no-prefilter"]
    done = main_in(root, "check", "--format", "json", "--no-cache", "--exit-zero", "--jobs", "1", *flags, *args,
                   capsys=capsys, monkeypatch=monkeypatch)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _example_projects(root: Path, which: str) -> dict[str, Path]:
    """Every rule document's examples and their variants, by code: one project per rule
    (its config selects that rule alone), one folder per example in it. `which`:
    "examples" (as written) or "variants" (their spelling variants alone)."""
    out: dict[str, Path] = {}
    for code, path in rule_documents().items():
        project = make_project(root / code, {"pyproject.toml": f'[tool.tlint]\nselect = ["{code}"]\n'})
        for example in examples(path):
            sets = {"": example.files} if which == "examples" else {}
            if which == "variants" and example.kind == "bad" and example.vary and code not in ENGINE_CODES:
                sets.update(variants(example.files))
            for name, files in sets.items():
                folder = project / f"{example.kind}{example.number}{'-' + name if name else ''}"
                for file, text in files.items():
                    (folder / file).parent.mkdir(parents=True, exist_ok=True)
                    (folder / file).write_text(text, encoding="utf-8")
        out[code] = project
    return out


# The spelling variants (imports aliased, code moved into a helper or a method) are
# generated mutations of the examples: the quick subset checks the examples as written.
EXAMPLE_SETS = ["examples", pytest.param("variants", marks=pytest.mark.slow)]


def test_every_rule_and_extractor_declares_tokens():
    for rule in ALL_RULES:
        if rule.code not in ENGINE_CODES:
            assert rule.tokens is not None, f"{rule.code} declares no pre-filter tokens"
            assert all(t == t.lower() for t in rule.tokens), rule.code
    for kind, _ in facts_view.EXTRACTORS:
        assert kind in facts_view.TOKENS, f"fact extractor `{kind}` declares no pre-filter tokens"
    assert needed_tokens(Linter(ConfigResolver(), select=["ALL"]).settings_for(FIXTURES)) is not None


# duration: the whole fixtures/ tree linted twice with every rule on
def test_fixtures_output_identical_with_and_without(capsys, monkeypatch):
    with_ = _json(FIXTURES, "--select", "ALL", ".", prefilter=True, capsys=capsys, monkeypatch=monkeypatch)
    without = _json(FIXTURES, "--select", "ALL", ".", prefilter=False, capsys=capsys, monkeypatch=monkeypatch)
    assert json.loads(with_)  # findings there are
    assert with_ == without


# duration: every rule's examples (or variants) linted with and without the pre-filter: the identity is the claim
@pytest.mark.parametrize("which", EXAMPLE_SETS)
def test_rule_examples_identical_with_and_without(tmp_path, capsys, monkeypatch, which):
    """Each example (and variant) under its own rule alone (its project's config selects
    it: that rule's tokens and the extractors' decide which files are parsed)."""
    every = sorted(_example_projects(tmp_path, which))
    with_ = _json(tmp_path, *every, prefilter=True, capsys=capsys, monkeypatch=monkeypatch)
    without = _json(tmp_path, *every, prefilter=False, capsys=capsys, monkeypatch=monkeypatch)
    assert json.loads(with_)
    assert with_ == without


# duration: each file analysed alone with every rule on, so that a finding is traced to its own file's tokens
@pytest.mark.parametrize("which", EXAMPLE_SETS)
def test_tokens_sound_on_fixtures_and_examples(tmp_path, which):
    """Per rule and per extractor (not only their union): whatever reports in a file, or
    yields a fact, has one of its tokens there; `call-args` from Python's tree equal LibCST's."""
    projects = _example_projects(tmp_path, which)
    files = sorted(FIXTURES.rglob("*.py")) if which == "examples" else []
    files += sorted(p for project in projects.values() for p in project.rglob("*.py"))
    problems, _, read = soundness(files)
    assert read > 300
    assert problems == []


def test_plain_file_is_not_parsed_by_libcst(tmp_path, monkeypatch):
    make_project(tmp_path, {"plain.py": PLAIN})
    monkeypatch.delenv("TLINT_NO_PREFILTER", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("LibCST parsed a pre-filtered file")

    monkeypatch.setattr(libcst, "parse_module", refuse)
    linter = Linter(ConfigResolver(), select=["ALL"], jobs=1)
    result = linter.run([tmp_path])
    assert result.diagnostics == [] and linter.prefiltered == 1


def test_no_prefilter_parses_every_file(tmp_path, monkeypatch):
    make_project(tmp_path, {"plain.py": PLAIN})
    monkeypatch.delenv("TLINT_NO_PREFILTER", raising=False)
    linter = Linter(ConfigResolver(), select=["ALL"], jobs=1, prefilter=False)
    linter.run([tmp_path])
    assert linter.prefiltered == 0
    assert "TLINT_NO_PREFILTER" not in __import__("os").environ  # an argument, not the environment
    # the environment variable is read by the command line, which passes it down
    from tlint import cli

    made = []
    real = cli.__dict__.get("Linter")
    import tlint.engine

    class Recording(tlint.engine.Linter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(tlint.engine, "Linter", Recording)
    monkeypatch.setenv("TLINT_NO_PREFILTER", "1")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "--no-cache", "--select", "ALL", "--exit-zero", "."]) == 0
    assert real is None and made and made[0].prefilter is False and made[0].prefiltered == 0


def test_a_custom_rule_without_tokens_needs_every_file():
    from tlint.rules.base import Rule

    class Custom(Rule):
        code, name, kind, summary = "TL999", "custom", "likely-defect", "custom"

    settings = Linter(ConfigResolver(), select=["ALL"]).settings_for(FIXTURES)
    ruleset = settings.ruleset()
    original = list(ruleset.rules)
    try:
        ruleset.rules[:] = [*original, Custom()]
        reading._TOKENS.clear()
        assert needed_tokens(settings) is None
        assert not engine.prefilter_skips(PLAIN, settings)
    finally:
        ruleset.rules[:] = original
        reading._TOKENS.clear()


@pytest.mark.parametrize("prefilter", [True, False])
def test_syntax_errors_and_suppressions_unchanged(tmp_path, capsys, monkeypatch, prefilter):
    """TL001 of a token-less file comes from Python's compiler either way; its suppression
    comments are all unused (TL002), bare or not."""
    files = {
        "broken.py": "def listing(folder:\n    return folder\n",
        "quiet.py": PLAIN.replace("import os\n", "import os  # tlint: ignore\n")
        .replace("class Box:\n", "class Box:  # tlint: ignore[TL101]\n")
        + "# noqa: TL203\n",
    }
    make_project(tmp_path, files)
    out = json.loads(_json(tmp_path, "--select", "ALL", ".", prefilter=prefilter, capsys=capsys,
                           monkeypatch=monkeypatch))
    diagnostics = out["diagnostics"] if isinstance(out, dict) else out
    got = sorted((d["path"], d["code"], d["range"]["start"]["line"]) for d in diagnostics)
    assert got == [("broken.py", "TL001", 1), ("quiet.py", "TL002", 3), ("quiet.py", "TL002", 10)]


def test_cross_file_call_args_of_a_prefiltered_file(tmp_path, capsys, monkeypatch):
    """TL206 counts a parameter default only where no call overrides it: the call sits in a
    file with no token at all (its `call-args` facts come from Python's tree)."""
    files = {
        "model.py": (
            "import torch.nn as nn\n\n\n"
            "class Positions(nn.Module):\n"
            "    def __init__(self, d, max_len=128):\n"
            "        super().__init__()\n"
            "        self.pos_emb = nn.Embedding(max_len, d)\n\n"
            "    def forward(self, x):\n"
            "        return x + self.pos_emb.weight[: x.size(1)]\n"
        ),
        "data.py": (
            "from model import Positions\n"
            "from train_data import make\n\n"
            "def build(tokenizer, texts):\n"
            "    return tokenizer(texts, max_length=512, truncation=True, padding=True)\n"
        ),
        # leaves `max_len` at its default: the table of 128 meets the data's 512
        "main.py": "import data\nfrom model import Positions\n\nlayer = Positions(64)\n",
    }
    make_project(tmp_path, files)
    assert engine.prefilter_skips(files["main.py"], Linter(ConfigResolver(), select=["ALL"]).settings_for(tmp_path))
    with_ = _json(tmp_path, "--select", "ALL", ".", prefilter=True, capsys=capsys, monkeypatch=monkeypatch)
    without = _json(tmp_path, "--select", "ALL", ".", prefilter=False, capsys=capsys, monkeypatch=monkeypatch)
    assert with_ == without
    assert '"TL206"' in with_


def test_profile_prints_timings_with_jobs(tmp_path, capsys, monkeypatch):
    files = {f"m{i}.py": (FIXTURES / "demo" / name).read_text(encoding="utf-8")
             for i, name in enumerate(sorted(p.name for p in (FIXTURES / "demo").glob("*.py"))[:3])}
    files["plain.py"] = PLAIN
    make_project(tmp_path, files)
    monkeypatch.setattr(engine, "_PARALLEL_MIN_BYTES", 0)  # worker processes even for a few files
    for jobs in ("1", "2"):
        done = main_in(tmp_path, "check", "--no-cache", "--exit-zero", "--profile", "--jobs", jobs, ".",
                       capsys=capsys, monkeypatch=monkeypatch)
        assert done.returncode == 0, done.stderr
        err = done.stderr
        assert f"profile of 4 files ({jobs} job" in err
        assert "pre-filter: 1 of the analysed files not parsed by LibCST" in err
        for name in ("phase: LibCST parse", "rule: TL203", "view: ctx.models", "facts: pads",
                     "phase: syntax check"):
            assert name in err, (jobs, name, err)
    from tlint import profile

    assert profile.ACTIVE is None  # nothing stays wrapped after a profiled run
    assert not hasattr(libcst.parse_module, "__wrapped__")


def test_minus_100_however_written_goes_to_libcst(tmp_path, monkeypatch):
    """`-100` is a `masks-pad-labels` fact, and no word finds `-1e2` or `-0x64`: Python's
    tree sends such a file to LibCST."""
    monkeypatch.delenv("TLINT_NO_PREFILTER", raising=False)
    settings = Linter(ConfigResolver(), select=["ALL"]).settings_for(tmp_path)
    for value in ("-1e2", "-(0x64)", 'float("-100")', "-1_00.0"):
        text = f"LOW = {value}\n"
        assert engine.prefilter_skips(text, settings)  # no token...
        result = engine.analyse_file(tmp_path / "low.py", "low.py", settings, text=text)
        assert not result.prefiltered and "masks-pad-labels" in result.fact_kinds(), value
    result = engine.analyse_file(tmp_path / "low.py", "low.py", settings, text="LOW = 100 - 1e2\n")
    assert result.prefiltered and result.fact_kinds() == set()


def test_what_libcst_refuses_keeps_its_tl001(tmp_path, capsys, monkeypatch):
    """`(x): int = 1` compiles, LibCST refuses it: Python's tree sends the file to LibCST,
    so its TL001 is the same with the pre-filter."""
    make_project(tmp_path, {"ann.py": "import os\n\n(pars): bool = True\n"})
    with_ = _json(tmp_path, "--select", "ALL", ".", prefilter=True, capsys=capsys, monkeypatch=monkeypatch)
    without = _json(tmp_path, "--select", "ALL", ".", prefilter=False, capsys=capsys, monkeypatch=monkeypatch)
    assert '"TL001"' in without
    assert with_ == without
