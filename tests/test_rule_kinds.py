"""The three kinds of rule (defect, likely defect, practice): the default set, the `practice`
preset in the configuration and on the command line, suppressions of a practice rule that
is off, the kind in the JSON and SARIF output, the verdict table that classifies the
rules; and bounded messages (a long list of evidence: "and N more", the whole list in
JSON, a concise line of at most 200 characters)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.cliutil import main_in, make_project
from tlint.config import expand_selectors, select_rules
from tlint.reporters.concise import MAX_LINE, bounded
from tlint.rules import ALL_RULES, BY_CODE
from tlint.rules.base import listing

REPO = Path(__file__).resolve().parent.parent
PRACTICE = {rule.code for rule in ALL_RULES if rule.kind == "practice"}
DEFAULT = {rule.code for rule in ALL_RULES if rule.default_enabled}

# A fine-tuning loop with no warmup and no clipping: TL304 and TL301 (practice, line 11), and
# nothing that is on by default.
LOOP = (
    "import torch\n"
    "from transformers import AutoModelForCausalLM\n\n\n"
    "def train(loader):\n"
    '    model = AutoModelForCausalLM.from_pretrained("gpt2")\n'
    "    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\n"
    "    for batch in loader:\n"
    "        loss = model(**batch).loss\n"
    "        loss.backward()\n"
    "        optimizer.step()  # tlint: ignore[TL301]\n"
    "        optimizer.zero_grad()\n"
)


def test_the_default_set_is_the_defects_and_likely_defects():
    assert PRACTICE >= {"TL301", "TL304", "TL307"}
    assert not PRACTICE & DEFAULT
    assert select_rules(None, [], []) == DEFAULT | {"TL003"}
    assert all(BY_CODE[code].kind != "practice" for code in select_rules(None, [], []))


def test_the_practice_preset_and_its_precedence():
    assert select_rules(None, ["practice"], []) == DEFAULT | PRACTICE | {"TL003"}
    assert select_rules(None, ["PRACTICE"], []) == DEFAULT | PRACTICE | {"TL003"}
    assert select_rules(["ALL"], [], []) == {rule.code for rule in ALL_RULES}
    assert select_rules(["practice"], [], []) == PRACTICE | {"TL003"}
    # a code or a prefix is more specific than a kind, a kind more than ALL
    assert "TL307" not in select_rules(None, ["practice"], ["TL307"])
    assert "TL301" in select_rules(None, ["TL301"], ["practice"])
    assert not select_rules(["ALL"], [], ["practice"]) & PRACTICE
    assert "TL101" not in select_rules(None, [], ["defect"]) and "TL105" in select_rules(None, [], ["defect"])
    assert expand_selectors(["practice"]) == PRACTICE


def test_practice_from_the_command_line_and_the_configuration(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": LOOP.replace("  # tlint: ignore[TL301]", "")})
    plain = main_in(root, "check", "--output-format", "concise", "--no-cache", capsys=capsys, monkeypatch=monkeypatch)
    assert plain.returncode == 0 and "TL301" not in plain.stdout
    asked = main_in(root, "check", "--extend-select", "practice", "--output-format", "concise", "--no-cache",
                    capsys=capsys, monkeypatch=monkeypatch)
    assert "TL301" in asked.stdout and asked.returncode == 0  # advice is info: it does not fail the run
    failing = main_in(root, "check", "--extend-select", "practice", "--fail-on", "info", "--no-cache",
                      capsys=capsys, monkeypatch=monkeypatch)
    assert failing.returncode == 1
    (root / "tlint.toml").write_text('extend-select = ["practice"]\nignore = ["TL304"]\n')
    configured = main_in(root, "check", "--output-format", "concise", "--no-cache", capsys=capsys,
                         monkeypatch=monkeypatch)
    assert "TL301" in configured.stdout and "TL304" not in configured.stdout
    (root / "tlint.toml").write_text('extend-select = ["advice"]\n')
    bad = main_in(root, "check", "--no-cache", capsys=capsys, monkeypatch=monkeypatch)
    assert bad.returncode == 2 and "advice" in bad.stderr
    (root / "tlint.toml").unlink()
    (root / "pyproject.toml").write_text('[tool.tlint]\nper-file-ignores = { "train.py" = ["practice"] }\n')
    ignored = main_in(root, "check", "--select", "ALL", "--output-format", "concise", "--no-cache", capsys=capsys,
                      monkeypatch=monkeypatch)
    assert "TL301" not in ignored.stdout


def test_a_suppression_of_a_practice_rule_that_is_off_is_not_unused(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": LOOP})
    off = main_in(root, "check", "--extend-select", "TL002", "--output-format", "concise", "--no-cache",
                  capsys=capsys, monkeypatch=monkeypatch)
    assert "TL002" not in off.stdout and "TL301" not in off.stdout
    on = main_in(root, "check", "--extend-select", "TL002,practice", "--show-suppressed", "--output-format",
                 "concise", "--no-cache", capsys=capsys, monkeypatch=monkeypatch)
    assert "TL002" not in on.stdout and "TL301" in on.stdout and "[suppressed]" in on.stdout
    (root / "train.py").write_text(LOOP.replace("optimizer.step()", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                                                "        optimizer.step()"))
    stale = main_in(root, "check", "--extend-select", "TL002,practice", "--output-format", "concise", "--no-cache",
                    capsys=capsys, monkeypatch=monkeypatch)
    assert "TL002" in stale.stdout  # on, and it suppressed nothing: reported as ever


def test_json_and_sarif_carry_the_kind(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": LOOP.replace("  # tlint: ignore[TL301]", "")})
    out = main_in(root, "check", "--select", "ALL", "--output-format", "json", "--no-cache", capsys=capsys,
                  monkeypatch=monkeypatch)
    found = {d["code"]: d for d in json.loads(out.stdout)["diagnostics"]}
    assert found["TL301"]["kind"] == "practice" and found["TL301"]["severity"] == "info"
    assert all(d["kind"] == BY_CODE[code].kind for code, d in found.items())
    sarif = json.loads(main_in(root, "check", "--select", "ALL", "--output-format", "sarif", "--no-cache",
                               capsys=capsys, monkeypatch=monkeypatch).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["TL301"]["properties"] == {"kind": "practice", "tags": ["practice"]}
    results = sarif["runs"][0]["results"]
    assert {r["properties"]["kind"] for r in results if r["ruleId"] == "TL301"} == {"practice"}
    listed = main_in(root, "rule", "--list", "--output-format", "json", capsys=capsys, monkeypatch=monkeypatch)
    assert {entry["code"]: entry["kind"] for entry in json.loads(listed.stdout)} == {
        rule.code: rule.kind for rule in ALL_RULES}


def _verdicts():
    name = "tlint_bench_rule_verdicts"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "rule_verdicts.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_every_kind_and_default_agrees_with_the_recorded_verdicts(capsys):
    rv = _verdicts()
    assert rv.main(["--check"]) == 0, capsys.readouterr().err
    records = rv.collect()
    assert {code for code, r in records.items() if r.records_say == "practice"} <= PRACTICE
    # the rule is mechanical: an advisory-heavy record, or rejections and nothing accepted
    r = rv.RuleRecord("TL999", severity="warning", kind="likely-defect")
    r.ecosystem.advisory, r.samples.tp = 3, 1
    assert r.records_say == "practice" and r.contradiction()
    r.samples.tp = 2
    assert r.records_say == "on" and r.contradiction() is None
    r = rv.RuleRecord("TL998", severity="error", kind="defect", default=False)
    r.samples.fp = 2
    assert r.records_say == "practice"
    r.b0_cases = 1
    assert r.records_say == "on" and "off by default" in r.contradiction()


# --- bounded messages ------------------------------------------------------------------------

def test_a_listing_names_the_first_items_and_how_many_more():
    assert str(listing(["a", "b"])) == "a, b"
    assert str(listing(["a", "b", "c", "d", "e"])) == "a, b, c and 2 more"
    long = [f"file_{i}.py:{i} ({'x' * 40})" for i in range(10)]
    text = str(listing(long))
    assert text.startswith(long[0]) and text.endswith("and 9 more") and len(text) <= 100 + len(" and 9 more")
    assert listing(long).items == tuple(long)
    assert bounded("short", 10) == "short"
    cut = bounded("first clause: second clause; third clause, and a tail", 30)
    assert cut == "first clause: second clause…" and len(cut) <= 30


def test_a_long_evidence_list_gives_a_bounded_concise_line_and_the_whole_list_in_json(tmp_path, capsys,
                                                                                      monkeypatch):
    files = {f"tok_{i}.py": ("from transformers import AutoTokenizer\n\n"
                             f'tokenizer = AutoTokenizer.from_pretrained("org/a-long-checkpoint-name-{i}")\n')
             for i in range(12)}
    files["train.py"] = ("import " + ", ".join(f"tok_{i}" for i in range(12)) + "\n"
                         "from transformers import AutoTokenizer\n\n"
                         'tokenizer = AutoTokenizer.from_pretrained("org/the-training-checkpoint")\n')
    root = make_project(tmp_path / "p", files)
    concise = main_in(root, "check", "--select", "TL104", "--output-format", "concise", "--no-cache",
                      capsys=capsys, monkeypatch=monkeypatch)
    lines = concise.stdout.splitlines()[:-1]
    assert len(lines) == 13 and all(len(line) <= MAX_LINE for line in lines), lines
    train = next(line for line in lines if line.startswith("train.py:"))
    assert "and 11 more" in train
    as_json = json.loads(main_in(root, "check", "--select", "TL104", "--output-format", "json", "--no-cache",
                                 capsys=capsys, monkeypatch=monkeypatch).stdout)
    finding = next(d for d in as_json["diagnostics"] if d["path"] == "train.py")
    assert len(finding["evidence"]) == 12 and "and 11 more" in finding["message"]
    assert {e.split(":")[0] for e in finding["evidence"]} == {f"tok_{i}.py" for i in range(12)}


@pytest.mark.parametrize("code", sorted(PRACTICE))
def test_a_practice_rule_says_how_to_turn_it_on_in_its_document(code):
    rule = BY_CODE[code]
    text = (REPO / "rules" / f"{rule.code}-{rule.name}.md").read_text(encoding="utf-8")
    assert "- Kind: practice" in text and "`--extend-select practice`" in text
