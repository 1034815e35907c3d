"""The engine: parse failures, isolation, determinism, project facts, suppressions, config."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from tests.lintutil import found, lint_paths, lint_tree, write_tree
from tlint import signed
from tlint.config import ConfigError, ConfigResolver, select_rules

UNUSED_MASK = textwrap.dedent(
    """\
    from torch import nn


    class Head(nn.Module):
        def forward(self, x, mask):
            return x.mean(1)
    """
)
PADDING_DATA = textwrap.dedent(
    """\
    from transformers import AutoTokenizer


    def encode(texts):
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        return tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    """
)
UNMASKED_CALL = textwrap.dedent(
    """\
    from data import encode


    def predict(model, texts):
        batch = encode(texts)
        return model(input_ids=batch["input_ids"])
    """
)


def test_syntax_error_is_tl001_and_the_run_goes_on(tmp_path):
    diags = lint_tree(tmp_path, {"bad.py": "def f(:\n    pass\n", "model.py": UNUSED_MASK})
    assert found(diags, tmp_path) == {("bad.py", 1, "TL001"), ("model.py", 5, "TL103")}


def test_undecodable_file_is_tl001(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"x = 1\ns = '\xe9t\xe9'\n")
    write_tree(tmp_path, {"model.py": UNUSED_MASK})
    diags = lint_paths([tmp_path]).diagnostics
    got = found(diags, tmp_path)
    assert ("latin.py", 2, "TL001") in got and ("model.py", 5, "TL103") in got
    assert "decode" in next(d.message for d in diags if d.code == "TL001")


def test_coding_cookie_and_bom_are_honoured(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9t\xe9'\n")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + UNUSED_MASK.encode())
    got = found(lint_paths([tmp_path]).diagnostics, tmp_path)
    assert got == {("bom.py", 5, "TL103")}


def test_crlf_positions(tmp_path):
    (tmp_path / "m.py").write_bytes(UNUSED_MASK.replace("\n", "\r\n").encode())
    diags = lint_paths([tmp_path]).diagnostics
    assert [(d.range.start.line, d.range.start.column) for d in diags] == [(5, 26)]


def test_columns_are_code_points(tmp_path):
    source = UNUSED_MASK.replace("def forward(self, x, mask):", "def forward(self, x, mask):  # é").replace(
        "class Head", "# ünïcode\nclass Head")
    source = source.replace("def forward(self, x, mask)", "def forward(self, x, mask)")
    (tmp_path / "m.py").write_text(source.replace("    def forward(self, x,", "    def forward(self, é, x,"), encoding="utf-8")
    diags = lint_paths([tmp_path]).diagnostics
    line = (tmp_path / "m.py").read_text(encoding="utf-8").splitlines()[diags[0].range.start.line - 1]
    assert line[diags[0].range.start.column - 1:].startswith("mask")


def test_deep_nesting_is_tl001_not_a_crash(tmp_path):
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    write_tree(tmp_path, {"model.py": UNUSED_MASK})
    proc = subprocess.run([sys.executable, "-m", "tlint", "check", str(tmp_path), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert '"TL001"' in proc.stdout and '"TL103"' in proc.stdout


def test_long_binary_chain_does_not_crash(tmp_path):
    write_tree(tmp_path, {"long.py": "x = " + " + ".join(["1"] * 5000) + "\n", "model.py": UNUSED_MASK})
    got = found(lint_paths([tmp_path]).diagnostics, tmp_path)
    assert ("model.py", 5, "TL103") in got


def test_a_rule_that_raises_is_tl003_and_others_stand(tmp_path, monkeypatch):
    from tlint.rules.tl102_missing_key_padding_mask import MissingKeyPaddingMask

    def explode(self, ctx):
        raise RuntimeError("boom")

    monkeypatch.setattr(MissingKeyPaddingMask, "check", explode)
    write_tree(tmp_path, {"model.py": UNUSED_MASK})
    diags = lint_paths([tmp_path]).diagnostics
    codes = sorted(d.code for d in diags)
    assert codes == ["TL003", "TL103"]
    tl003 = next(d for d in diags if d.code == "TL003")
    assert "TL102" in tl003.message and "boom" in tl003.message and "RuntimeError" in tl003.detail


def test_tl003_is_not_suppressible(tmp_path, monkeypatch):
    from tlint.rules.tl102_missing_key_padding_mask import MissingKeyPaddingMask

    monkeypatch.setattr(MissingKeyPaddingMask, "check", lambda self, ctx: 1 / 0)
    write_tree(tmp_path, {"model.py": "# tlint: ignore-file\n" + UNUSED_MASK})
    diags = lint_paths([tmp_path]).diagnostics
    assert [(d.code, d.suppressed) for d in diags if d.code == "TL003"] == [("TL003", False)]


def test_output_is_deterministic_across_jobs(tmp_path, monkeypatch):
    import tlint.engine

    monkeypatch.setattr(tlint.engine, "_PARALLEL_MIN_BYTES", 0)  # use worker processes
    files = {f"pkg{i}/model.py": UNUSED_MASK for i in range(6)}
    files.update({f"pkg{i}/bad.py": "def (\n" for i in range(3)})
    write_tree(tmp_path, files)
    one = [d.to_json() for d in lint_paths([tmp_path], jobs=1).diagnostics]
    two = [d.to_json() for d in lint_paths([tmp_path], jobs=2).diagnostics]
    assert one == two and len(one) == 9
    assert [d["path"] for d in one] == sorted(d["path"] for d in one)


def test_cross_file_facts_do_not_depend_on_named_files(tmp_path):
    write_tree(tmp_path, {"data.py": PADDING_DATA, "predict.py": UNMASKED_CALL})
    whole = found(lint_paths([tmp_path]).diagnostics, tmp_path)
    alone = found(lint_paths([tmp_path / "predict.py"]).diagnostics, tmp_path)
    assert whole == alone == {("predict.py", 6, "TL101")}


def test_unrelated_padding_does_not_count(tmp_path):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {"other/data.py": PADDING_DATA, "app/predict.py": UNMASKED_CALL.replace("from data import encode\n", "from helpers import encode\n")})
    assert lint_paths([tmp_path / "app" / "predict.py"]).diagnostics == []
    assert found(lint_paths([tmp_path]).diagnostics, tmp_path) == set()


def test_import_connected_padding_counts_across_folders(tmp_path):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/data.py": PADDING_DATA,
        "scripts/predict.py": UNMASKED_CALL.replace("from data import encode", "from pkg.data import encode"),
    })
    alone = found(lint_paths([tmp_path / "scripts" / "predict.py"]).diagnostics, tmp_path)
    assert alone == {("scripts/predict.py", 6, "TL101")}


# --- suppressions -----------------------------------------------------------------------


@pytest.mark.parametrize("comment", [
    "# tlint: ignore[TL103]", "# tlint: ignore[unused-mask-argument]", "# tlint: ignore",
    "# noqa: TL103", "# noqa: E501, TL103",
])
def test_inline_suppressions(tmp_path, comment):
    source = UNUSED_MASK.replace("def forward(self, x, mask):", f"def forward(self, x, mask):  {comment}")
    diags = lint_tree(tmp_path, {"m.py": source})
    assert diags == []


def test_suppression_on_the_line_above_and_file_level(tmp_path):
    above = UNUSED_MASK.replace("    def forward", "    # tlint: ignore[TL103]\n    def forward")
    file_level = "# tlint: ignore-file[TL103]\n" + UNUSED_MASK
    other_code = UNUSED_MASK.replace("def forward(self, x, mask):", "def forward(self, x, mask):  # tlint: ignore[TL101]")
    assert lint_tree(tmp_path / "a", {"m.py": above}) == []
    assert lint_tree(tmp_path / "b", {"m.py": file_level}) == []
    assert [d.code for d in lint_tree(tmp_path / "c", {"m.py": other_code})] == ["TL103"]


def test_unused_suppression_tl002_only_when_selected(tmp_path):
    source = "x = 1  # tlint: ignore[TL103]\ny = 2  # tlint: ignore[no-such-rule]\n"
    write_tree(tmp_path, {"m.py": source})
    assert lint_paths([tmp_path]).diagnostics == []
    diags = lint_paths([tmp_path], extend_select=["TL002"]).diagnostics
    assert [(d.code, d.range.start.line) for d in diags] == [("TL002", 1), ("TL002", 2)]
    assert "no-such-rule" in diags[1].message


@pytest.mark.parametrize("comment", ["# tlint: ignore[]", "# tlint: ignore[ , ]"])
def test_an_empty_code_list_suppresses_nothing(tmp_path, comment):
    """`ignore[]` names no rule: like Ruff's `# noqa:` without codes, it suppresses
    nothing (only a bare `# tlint: ignore` suppresses every code), and TL002 says so."""
    inline = UNUSED_MASK.replace("def forward(self, x, mask):", f"def forward(self, x, mask):  {comment}")
    file_level = comment.replace("ignore", "ignore-file") + "\n" + UNUSED_MASK
    assert [d.code for d in lint_tree(tmp_path / "a", {"m.py": inline})] == ["TL103"]
    assert [d.code for d in lint_tree(tmp_path / "b", {"m.py": file_level})] == ["TL103"]
    diags = lint_paths([tmp_path / "a"], extend_select=["TL002"]).diagnostics
    assert sorted(d.code for d in diags) == ["TL002", "TL103"]
    tl002 = next(d for d in diags if d.code == "TL002")
    assert "names no rule" in tl002.message and tl002.fix is not None


# --- selection and config ---------------------------------------------------------------


def test_selection_semantics():
    default = select_rules(None, [], [])
    assert "TL002" not in default and "TL301" not in default and {"TL101", "TL305", "TL001", "TL003"} <= default
    assert "TL002" in select_rules(["ALL"], [], [])
    assert "TL002" in select_rules(["TL0"], [], [])
    assert select_rules(["TL1"], [], ["TL102"]) >= {"TL101", "TL103"}
    assert "TL102" not in select_rules(["TL1"], [], ["TL102"])
    assert "TL102" in select_rules(["TL102"], [], ["TL1"])  # the more specific selector wins
    assert "TL103" not in select_rules(None, [], ["unused-mask-argument"])
    assert "TL003" in select_rules(["TL101"], [], ["ALL"])


def test_config_select_ignore_and_per_file_ignores(tmp_path):
    write_tree(tmp_path, {
        "pyproject.toml": '[tool.tlint]\nignore = ["TL1"]\n[tool.tlint.per-file-ignores]\n"legacy/*" = ["TL201"]\n',
        "m.py": UNUSED_MASK,
    })
    assert lint_paths([tmp_path]).diagnostics == []
    (tmp_path / "pyproject.toml").write_text('[tool.tlint]\n[tool.tlint.per-file-ignores]\n"m.py" = ["TL103"]\n')
    assert lint_paths([tmp_path]).diagnostics == []


def test_severity_override(tmp_path):
    write_tree(tmp_path, {"tlint.toml": '[severity]\nTL103 = "warning"\n', "m.py": UNUSED_MASK})
    assert [d.severity for d in lint_paths([tmp_path]).diagnostics] == ["warning"]


def test_rule_options_reach_the_rule(tmp_path):
    source = PADDING_DATA + "\n\ndef run(policy, texts):\n    enc = encode(texts)\n    return policy(input_ids=enc['input_ids'])\n"
    write_tree(tmp_path, {"a.py": source})
    assert lint_paths([tmp_path]).diagnostics == []
    (tmp_path / "tlint.toml").write_text('[rules.missing-attention-mask]\nmodel-names = ["policy"]\n')
    assert [d.code for d in lint_paths([tmp_path]).diagnostics] == ["TL101"]


@pytest.mark.parametrize(("toml", "needle"), [
    ('[tool.tlint]\nselct = ["TL1"]\n', "selct"),
    ('[tool.tlint]\nselect = ["TL999"]\n', "TL999"),
    ('[tool.tlint.rules.missing-attention-mask]\nmodel-nmes = []\n', "model-nmes"),
    ('[tool.tlint.rules.missing-attention-mask]\nmodel-names = 3\n', "model-names"),
    ('[tool.tlint.verify]\nmodle = "x:y"\n', "modle"),
    ('[tool.tlint\nselect = 1\n', "invalid TOML"),
])
def test_config_errors_name_the_key_and_file(tmp_path, toml, needle):
    write_tree(tmp_path, {"pyproject.toml": toml, "m.py": UNUSED_MASK})
    with pytest.raises(ConfigError) as err:
        lint_paths([tmp_path])
    assert needle in str(err.value) and "pyproject.toml" in str(err.value)


def test_config_walk(tmp_path):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {
        "pyproject.toml": '[tool.tlint]\nignore = ["TL103"]\n',
        "sub/pyproject.toml": '[project]\nname = "x"\n',  # no [tool.tlint]: the walk goes on
        "sub/m.py": UNUSED_MASK,
        "other/tlint.toml": "select = [\"TL2\"]\n",
        "other/pyproject.toml": '[tool.tlint]\nselect = ["TL1"]\n',  # tlint.toml wins
        "other/m.py": UNUSED_MASK,
    })
    assert lint_paths([tmp_path]).diagnostics == []
    settings = ConfigResolver().for_folder(tmp_path / "other")
    assert settings.config_path.name == "tlint.toml"


def test_gitignore_and_exclude(tmp_path):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {
        ".gitignore": "generated/\n*_tmp.py\n!keep_tmp.py\n",
        "generated/m.py": UNUSED_MASK, "x_tmp.py": UNUSED_MASK, "keep_tmp.py": UNUSED_MASK,
        "build/m.py": UNUSED_MASK, "pyproject.toml": '[tool.tlint]\nexclude = ["vendored"]\n',
        "vendored/m.py": UNUSED_MASK, "src/m.py": UNUSED_MASK,
    })
    got = {f[0] for f in found(lint_paths([tmp_path]).diagnostics, tmp_path)}
    assert got == {"keep_tmp.py", "src/m.py", "build/m.py"}
    # a named file is always linted
    assert found(lint_paths([tmp_path / "x_tmp.py"]).diagnostics, tmp_path) == {("x_tmp.py", 5, "TL103")}


def test_check_run_does_not_import_torch(tmp_path):
    write_tree(tmp_path, {"m.py": UNUSED_MASK})
    code = ("import sys; from tlint.cli import main; rc = main(['check', sys.argv[1], '--exit-zero']); "
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith("NO-TORCH"), proc.stdout + proc.stderr


# --- the cross-file rule hook (check_project) -------------------------------------------


@dataclass(frozen=True)
class SeqLen:
    """The data of the test's `seq-len` fact kind (a kind's schema is a dataclass)."""

    value: int


def _seq_len_sites(ctx):
    import libcst as cst

    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            target = assign.targets[0].target
            if isinstance(target, cst.Name) and target.value == "SEQ_LEN" and isinstance(assign.value, cst.Integer):
                yield assign.value, SeqLen(int(assign.value.evaluated_value))


@pytest.fixture
def seq_len_rule(monkeypatch):
    import tlint.config
    import tlint.views.facts as facts
    from tlint.rules.base import Rule

    class SeqLenMismatch(Rule):
        code, name, kind, summary = "TL199", "seq-len-mismatch", "defect", "test rule"

        def check_project(self, path, related):
            mine = [f for f in related[path] if f.kind == "seq-len"]
            for fact in mine:
                others = sorted({f.data.value for p, fs in related.items() if p != path
                                 for f in fs if f.kind == "seq-len"} - {fact.data.value})
                if others:
                    yield fact.range, f"SEQ_LEN {fact.data.value} differs from {others}"

    monkeypatch.setattr(tlint.config, "ALL_RULES", (*tlint.config.ALL_RULES, SeqLenMismatch))
    monkeypatch.setattr(facts, "EXTRACTORS", (*facts.EXTRACTORS, ("seq-len", _seq_len_sites)))
    monkeypatch.setattr(facts, "POSITIONED", frozenset({"seq-len"}))
    signed.register(SeqLen)  # facts are stored signed: their classes must be allowed


def test_check_project_compares_facts_of_related_files(tmp_path, seq_len_rule):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {
        "proj/data.py": "SEQ_LEN = 512\n",
        "proj/model.py": "import os\n\nSEQ_LEN = 256\n",
        "other/cfg.py": "SEQ_LEN = 128\n",
    })
    expected = {("proj/data.py", 1, "TL199"), ("proj/model.py", 3, "TL199")}
    assert {f for f in found(lint_paths([tmp_path]).diagnostics, tmp_path) if f[2] == "TL199"} == expected
    alone = found(lint_paths([tmp_path / "proj" / "model.py"]).diagnostics, tmp_path)
    assert alone == {("proj/model.py", 3, "TL199")}
    reversed_order = lint_paths([tmp_path / "proj" / "model.py", tmp_path / "proj" / "data.py"], jobs=2)
    assert {f for f in found(reversed_order.diagnostics, tmp_path)} == expected
    message = next(d.message for d in lint_paths([tmp_path / "proj" / "model.py"]).diagnostics)
    assert message == "SEQ_LEN 256 differs from [512]"


def test_a_parser_crash_in_a_worker_becomes_tl001(tmp_path, monkeypatch):
    import os

    import tlint.engine

    real_parse = tlint.engine.parse_source

    def crashing_parse(text, display, **kwargs):
        if "CRASH_ME" in text:
            os._exit(139)  # what a segfault in the native parser looks like to the pool
        return real_parse(text, display, **kwargs)

    monkeypatch.setattr(tlint.engine, "parse_source", crashing_parse)
    monkeypatch.setattr(tlint.engine, "_PARALLEL_MIN_BYTES", 0)
    write_tree(tmp_path, {"a/m.py": UNUSED_MASK, "b/m.py": UNUSED_MASK, "c/crash.py": "CRASH_ME = 1\n"})
    diags = lint_paths([tmp_path], jobs=2).diagnostics
    assert found(diags, tmp_path) == {("a/m.py", 5, "TL103"), ("b/m.py", 5, "TL103"), ("c/crash.py", 1, "TL001")}
    assert "crashed" in next(d.message for d in diags if d.code == "TL001")


def test_cli_select_starts_a_new_selection(tmp_path):
    write_tree(tmp_path, {"tlint.toml": 'ignore = ["TL103"]\n', "m.py": UNUSED_MASK})
    assert lint_paths([tmp_path]).diagnostics == []
    assert [d.code for d in lint_paths([tmp_path], select=["TL103"]).diagnostics] == ["TL103"]
    assert lint_paths([tmp_path], select=["TL1"], ignore=["TL103"]).diagnostics == []


MODEL_FILE = textwrap.dedent("""\
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.norm = nn.LayerNorm(d)

        def forward(self, x, mask=None):
            h = self.norm(x)
            return x + self.attn(h, h, h, key_padding_mask=mask)[0]


    def train(model, loader, opt):
        for step, (ids, mask) in enumerate(loader):
            loss, *rest = model(ids, mask).sum(), None
            loss.backward()
            opt.step()
            opt.zero_grad()
    """)


def test_a_files_tree_is_freed_without_the_cycle_collector(tmp_path, monkeypatch):
    """The context releases its views when the file is done, so the file's LibCST tree goes
    with the last reference to it, not at some later collection (the engine pauses the
    collector while a file is analysed and relies on this)."""
    import gc

    import libcst as cst

    from tlint import engine

    path = tmp_path / "model.py"
    path.write_text(MODEL_FILE)
    trees: list[int] = []  # ids: LibCST nodes take no weak references
    built = engine.FileIndex

    def index(module):
        trees.append(id(module))
        return built(module)

    monkeypatch.setattr(engine, "FileIndex", index)
    (tmp_path / "pyproject.toml").write_text('[tool.tlint]\nselect = ["ALL"]\n')
    settings = ConfigResolver().for_folder(tmp_path)
    gc.collect()
    gc.disable()
    try:
        result = engine.analyse_file(path, "model.py", settings, prefilter=False)
        assert not gc.isenabled()  # a collector paused by the caller stays paused
        alive = [o for o in gc.get_objects() if type(o) is cst.Module and id(o) in trees]
    finally:
        gc.enable()
    assert not result.parse_error and not result.diagnostics and len(trees) == 1
    assert not alive  # freed by reference counting alone
    engine.analyse_file(path, "model.py", settings)
    assert gc.isenabled()  # paused for the file only
