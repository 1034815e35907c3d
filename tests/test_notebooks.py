"""Jupyter notebooks (issue 27): findings at the right cells and lines in every format,
IPython syntax masked, suppressions in cells, `--fix` and `--add-suppressions` that touch
only the fixed cells' sources, TL001 for broken JSON, notebooks in the project graph."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import jsonschema
import nbformat
import pytest

from tests.cliutil import main_in, make_project, run_tlint
from tests.notebookutil import HAND_LOOP, TRAINER, notebook, write_notebook
from tests.sarifcheck import check_sarif
from tests.test_reporters import SCHEMA
from tlint import notebook as nb
from tlint.diagnostics import Edit, Fix, Position, Range

SELECT = ["--select", "TL101,TL105,TL111,TL309", "--no-cache"]
# (code, cell, line, column) of the findings of HAND_LOOP and TRAINER under SELECT
HAND_LOOP_FOUND = [("TL105", 4, 2, 12), ("TL111", 4, 2, 37), ("TL101", 5, 6, 15), ("TL309", 5, 8, 9)]
TRAINER_FOUND = [("TL111", 4, 2, 34), ("TL101", 6, 3, 10)]


@pytest.fixture
def project(tmp_path):
    root = make_project(tmp_path / "proj", {})
    write_notebook(root / "hand_loop.ipynb", HAND_LOOP)
    write_notebook(root / "trainer.ipynb", TRAINER)
    return root


def run(root, capsys, monkeypatch, *args):
    return main_in(root, "check", *args, capsys=capsys, monkeypatch=monkeypatch)


def json_findings(root, capsys, monkeypatch, *args):
    proc = run(root, capsys, monkeypatch, *args, "--format", "json")
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    return doc, {d["path"]: [(x["code"], x.get("cell"), x["range"]["start"]["line"], x["range"]["start"]["column"])
                             for x in doc["diagnostics"] if x["path"] == d["path"]] for d in doc["diagnostics"]}


# --- findings at the right cells, in every format -------------------------------------------


def test_a_folder_lints_its_notebooks_at_their_cells(project, capsys, monkeypatch):
    doc, found = json_findings(project, capsys, monkeypatch, ".", *SELECT)
    assert doc["summary"]["files"] == 2
    assert found == {"hand_loop.ipynb": HAND_LOOP_FOUND, "trainer.ipynb": TRAINER_FOUND}
    tl101 = next(d for d in doc["diagnostics"] if d["code"] == "TL101" and d["path"] == "trainer.ipynb")
    assert tl101["range"] == {"start": {"line": 3, "column": 10}, "end": {"line": 3, "column": 35}}
    assert [edit["cell"] for edit in tl101["fix"]["edits"]] == [6]


def test_text_format_says_cell_and_line_with_the_cells_code_frame(project, capsys, monkeypatch):
    out = run(project, capsys, monkeypatch, "trainer.ipynb", *SELECT).stdout
    assert "trainer.ipynb:cell 6, line 3, column 10: TL101 [error]" in out
    assert "3 | logits = model(batch['input_ids']).logits\n  |          ^^^^^^^^^^^^^^^^^^^^^^^^^\n" in out
    assert "trainer.ipynb:cell 4, line 2, column 34: TL111" in out


def test_concise_junit_and_github_formats(project, capsys, monkeypatch):
    concise = run(project, capsys, monkeypatch, "hand_loop.ipynb", *SELECT, "--output-format", "concise").stdout
    assert concise.splitlines()[:4] == [
        f"hand_loop.ipynb:cell {cell}, line {line}, column {column}: {code} " + rest
        for (code, cell, line, column), rest in zip(HAND_LOOP_FOUND, [
            concise.splitlines()[i].split(f"{HAND_LOOP_FOUND[i][0]} ", 1)[1] for i in range(4)])]
    junit = run(project, capsys, monkeypatch, "hand_loop.ipynb", *SELECT, "--format", "junit").stdout
    failures = ET.fromstring(junit).findall(".//failure")
    assert [f.text.split(": TL")[0] for f in failures] == [
        f"hand_loop.ipynb:cell {cell}, line {line}, column {column}" for _, cell, line, column in HAND_LOOP_FOUND]
    github = run(project, capsys, monkeypatch, "trainer.ipynb", *SELECT, "--format", "github").stdout.splitlines()
    assert github[1].startswith("::error file=trainer.ipynb,title=TL101 missing-attention-mask::"
                                "cell 6, line 3, column 10: `model(...)`")
    assert "line=" not in github[1]  # GitHub would count the JSON's lines


def test_sarif_and_lsp_formats_use_the_notebooks_own_coordinates(project, capsys, monkeypatch):
    sarif = json.loads(run(project, capsys, monkeypatch, "trainer.ipynb", *SELECT, "--format", "sarif").stdout)
    check_sarif(sarif)
    results = sarif["runs"][0]["results"]
    region = results[1]["locations"][0]["physicalLocation"]["region"]
    assert (results[1]["ruleId"], region) == ("TL101", {"startLine": 3, "startColumn": 10, "endLine": 3,
                                                         "endColumn": 35, "properties": {"cell": 6}})
    change = results[1]["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]
    assert change["properties"] == {"cell": 6} and change["startLine"] == 3
    lines = run(project, capsys, monkeypatch, "trainer.ipynb", *SELECT, "--format", "lsp").stdout.splitlines()
    payload = json.loads(lines[0])
    assert payload["uri"].endswith("/trainer.ipynb")
    tl101 = payload["diagnostics"][1]
    assert tl101["range"] == {"start": {"line": 2, "character": 9}, "end": {"line": 2, "character": 34}}
    assert tl101["data"]["cell"] == 6 and tl101["data"]["fix"]["edits"][0]["cell"] == 6


def test_utf16_columns_come_from_the_cells_line(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    write_notebook(root / "n.ipynb", [("code", "import torch\nfrom transformers import AutoTokenizer\n"
                                               "tok = AutoTokenizer.from_pretrained('x')\n"
                                               "b = tok(['a'], padding=True, return_tensors='pt')"),
                                      ("code", "é = 1; out = model(b['input_ids'])")])
    sarif = json.loads(run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache",
                           "--format", "sarif").stdout)
    region = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["startColumn"] == 14 and region["properties"] == {"cell": 2}


# --- IPython syntax -------------------------------------------------------------------------


def test_magics_are_masked_keeping_every_line_and_column():
    cell = "%%time\nx = 1\n!pip install a \\\n    b\nfiles = !ls\n    %env A=1\nmodel?\n?model"
    masked, lines = nb.mask(cell)
    assert [len(a) for a in masked.split("\n")] == [len(b) for b in cell.split("\n")]
    assert lines == {1, 3, 4, 5, 6, 7, 8}
    assert masked.split("\n")[1] == "x = 1" and masked.split("\n")[4] == "files = 0#s"
    compile(masked.replace("    0#", "0#"), "<cell>", "exec")
    bash = "%%bash\nfor f in *.txt; do\n  echo $f\ndone"
    masked, lines = nb.mask(bash)
    assert all(line.lstrip().startswith("#") for line in masked.split("\n")) and lines == {1, 2, 3, 4}
    # `%` and `!` inside brackets or strings are Python: a cell that compiles is untouched
    python = "x = (a\n% b)\ns = '''\n!important\n'''"
    assert nb.mask(python) == (python, frozenset())


def test_automagics_are_masked_when_the_line_is_not_python():
    """IPython runs a line magic or shell alias without its `%` (`pip install x`, `cd data`):
    such a line is masked like a `%` line when it is not Python by itself; `ls -l`, `pwd`
    and `time.sleep(1)` are Python, and a cell that compiles is never masked."""
    cell = "pip install -q transformers\ncd data\nx = 1\nif x:\n    ls -l\n    run train.py --epochs 1\npwd"
    masked, lines = nb.mask(cell)
    assert [len(a) for a in masked.split("\n")] == [len(b) for b in cell.split("\n")]
    assert lines == {1, 2, 6}
    assert masked.split("\n")[4] == "    ls -l" and masked.split("\n")[5].startswith("    0#")
    compile(masked, "<cell>", "exec")
    python = "pip = 3\nls -l\ntime.sleep(1)\ncd(1)"
    assert nb.mask(python) == (python, frozenset())
    assert nb.mask("pip = 3\n%ls\npip install x") == ("pip = 3\n#ls\n#ip install x", frozenset({2, 3}))


def test_an_automagic_install_cell_hides_no_finding(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    cells = [("code", "pip install -q transformers datasets\ncd /content")] + TRAINER[2:]
    write_notebook(root / "colab.ipynb", cells)
    _, found = json_findings(root, capsys, monkeypatch, "colab.ipynb", *SELECT)
    assert found == {"colab.ipynb": [(code, cell - 1, line, column) for code, cell, line, column in TRAINER_FOUND]}


def test_magic_lines_never_give_findings_and_a_fix_never_touches_them(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    cells = [("code", "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('x')\n"
                      "b = tok(['a'], padding=True, return_tensors='pt')"),
             ("code", "with torch.no_grad():\n    !nvidia-smi\n    out = model(b['input_ids'])")]
    path = write_notebook(root / "n.ipynb", cells)
    before = path.read_bytes()
    doc, found = json_findings(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache")
    assert found == {"n.ipynb": [("TL101", 2, 3, 11)]}
    run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache", "--fix", "--unsafe-fixes")
    after = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    assert after.cells[1].source.split("\n")[1] == "    !nvidia-smi"  # the magic is as it was
    assert "attention_mask=b['attention_mask']" in after.cells[1].source
    assert path.read_bytes() != before


def test_apply_fixes_refuses_an_edit_over_a_magic_line():
    text = notebook([("code", "x = 1\n!ls\ny = 2")])
    over_magic = Fix("safe", (Edit(Range(Position(2, 1), Position(2, 4)), "z = 3", 1),))
    assert nb.apply_fixes(text, [over_magic]) == (text, 0)
    fine = Fix("safe", (Edit(Range(Position(3, 5), Position(3, 6)), "3", 1),))
    new, count = nb.apply_fixes(text, [fine])
    assert count == 1 and nbformat.reads(new, as_version=4).cells[0].source == "x = 1\n!ls\ny = 3"


# --- suppressions ---------------------------------------------------------------------------


def test_suppressions_in_cells(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    cells = list(HAND_LOOP)
    loop = cells[4][1].replace("labels=batch['label'])", "labels=batch['label'])  # tlint: ignore[TL101]")
    cells[4] = ("code", loop + "# tlint: ignore[TL309]")  # a standalone comment ending the cell ...
    cells.append(("code", "optimizer.step()  # tlint: ignore[TL105] unused here"))  # ... does not reach the next
    write_notebook(root / "n.ipynb", cells)
    doc, found = json_findings(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101,TL105,TL309,TL002",
                               "--no-cache", "--show-suppressed")
    shown = {(d["code"], d.get("cell"), d["range"]["start"]["line"], d.get("suppressed", False))
             for d in doc["diagnostics"]}
    assert ("TL101", 5, 6, True) in shown and ("TL105", 4, 2, False) in shown
    assert ("TL002", 7, 1, False) in shown  # the unused suppression, at its cell
    assert any(code == "TL002" and cell == 5 for code, cell, _, _ in shown)  # the TL309 comment matched nothing
    cells.insert(1, ("code", "# tlint: ignore-file[TL105]"))  # file level, in any cell
    write_notebook(root / "n.ipynb", cells)
    _, found = json_findings(root, capsys, monkeypatch, "n.ipynb", "--select", "TL105", "--no-cache")
    assert found == {}


def test_add_suppressions_writes_in_the_cells(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    path = write_notebook(root / "n.ipynb", HAND_LOOP)
    before = path.read_text(encoding="utf-8")
    proc = run(root, capsys, monkeypatch, "n.ipynb", *SELECT, "--add-suppressions", "legacy")
    assert proc.returncode == 0, proc.stderr
    after = path.read_text(encoding="utf-8")
    cells = nbformat.reads(after, as_version=4).cells
    assert cells[4].source.split("\n")[5].endswith("  # tlint: ignore[TL101] legacy")
    assert cells[3].source.split("\n")[1].endswith("  # tlint: ignore[TL105, TL111] legacy")
    assert cells[1].source == HAND_LOOP[1][1]  # the magic cell is as it was
    assert _outside_sources(before) == _outside_sources(after)
    assert json_findings(root, capsys, monkeypatch, "n.ipynb", *SELECT)[1] == {}


# --- --fix ----------------------------------------------------------------------------------


def _outside_sources(text: str) -> list[str]:
    """The JSON text between the cells' `source` values (what --fix must keep byte for byte)."""
    out, cursor = [], 0
    for span in nb.source_spans(text):
        if span is not None:
            out.append(text[cursor:span[0]])
            cursor = span[1]
    out.append(text[cursor:])
    return out


# A notebook JSON written by another tool: 2-space indentation, keys not sorted, a source as
# one string, non-ASCII escaped, no final newline, outputs and metadata everywhere.
ODD = ('{\n  "nbformat": 4,\n  "nbformat_minor": 2,\n'
       '  "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},'
       ' "colab": {"provenance": []}},\n'
       '  "cells": [\n'
       '    {"cell_type": "markdown", "metadata": {}, "source": ["# R\\u00e9glage fin"]},\n'
       '    {"source": "!pip install transformers", "cell_type": "code", "outputs": [], "metadata": {},'
       ' "execution_count": 1},\n'
       '    {\n      "cell_type": "code",\n      "execution_count": 2,\n      "metadata": {"id": "x1"},\n'
       '      "outputs": [{"output_type": "stream", "name": "stdout", "text": ["loaded\\n"]}],\n'
       '      "source": [\n        "from transformers import AutoTokenizer\\n",\n'
       '        "tok = AutoTokenizer.from_pretrained(\'bert-base-cased\')\\n",\n'
       '        "batch = tok([\'a\'], padding=True, return_tensors=\'pt\')"\n      ]\n    },\n'
       '    {\n      "cell_type": "code",\n      "execution_count": 3,\n      "metadata": {},\n'
       '      "outputs": [],\n'
       '      "source": [\n        "%%time\\n",\n        "out = model(batch[\'input_ids\'])\\n",\n'
       '        "print(out)"\n      ]\n    }\n  ]\n}')


def test_fix_rewrites_only_the_fixed_cells_source(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    path = root / "odd.ipynb"
    path.write_bytes(ODD.encode("utf-8"))
    proc = run(root, capsys, monkeypatch, "odd.ipynb", "--select", "TL101", "--no-cache", "--fix", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = path.read_bytes().decode("utf-8")
    assert _outside_sources(after) == _outside_sources(ODD)  # outputs, metadata, order, indentation, no newline
    spans_before, spans_after = nb.source_spans(ODD), nb.source_spans(after)
    assert [ODD[s:e] for s, e in spans_before[:3]] == [after[s:e] for s, e in spans_after[:3]]
    assert after[slice(*spans_after[3])] == (
        '[\n        "%%time\\n",\n        "out = model(batch[\'input_ids\'], '
        'attention_mask=batch[\'attention_mask\'])\\n",\n        "print(out)"\n      ]')
    nbformat.validate(nbformat.reads(after, as_version=4))
    again = run(root, capsys, monkeypatch, "odd.ipynb", "--select", "TL101", "--no-cache", "--fix", "--unsafe-fixes")
    assert again.returncode == 0 and path.read_bytes().decode("utf-8") == after


def test_fix_round_trip_of_a_jupyter_written_notebook(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    path = write_notebook(root / "n.ipynb", TRAINER)
    before = path.read_text(encoding="utf-8")
    diff = run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache", "--diff", "--unsafe-fixes")
    assert diff.returncode == 1 and "+    \"logits = model(batch['input_ids'], attention_mask=" in diff.stdout
    assert path.read_text(encoding="utf-8") == before  # --diff writes nothing
    run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache", "--fix", "--unsafe-fixes")
    after = path.read_text(encoding="utf-8")
    old, new = nbformat.reads(before, as_version=4), nbformat.reads(after, as_version=4)
    assert [c.source for c in old.cells[:5]] == [c.source for c in new.cells[:5]]
    assert new.cells[5].source.endswith("attention_mask=batch['attention_mask']).logits")
    assert after.endswith("}\n") and _outside_sources(before) == _outside_sources(after)
    assert nbformat.writes(new) + "\n" == after  # as Jupyter itself would write it


def test_fix_skips_a_read_only_notebook(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    path = write_notebook(root / "n.ipynb", TRAINER)
    before = path.read_bytes()
    path.chmod(0o444)
    proc = run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL101", "--no-cache", "--fix", "--unsafe-fixes")
    assert "read-only" in proc.stderr and path.read_bytes() == before


def test_fix_from_standard_input_prints_the_fixed_notebook(tmp_path):
    root = make_project(tmp_path / "p", {})
    text = notebook(TRAINER)
    proc = run_tlint("check", "--stdin-filename", "n.ipynb", "--select", "TL101", "--fix", "--unsafe-fixes",
                     cwd=root, stdin=text)
    assert "cell 6" not in proc.stderr, proc.stderr  # fixed, nothing left
    fixed = nbformat.reads(proc.stdout, as_version=4)
    assert "attention_mask" in fixed.cells[5].source and _outside_sources(proc.stdout) == _outside_sources(text)


# --- broken notebooks -------------------------------------------------------------------------


@pytest.mark.parametrize("text, message, line, column", [
    ('{\n "cells": [\n  {"cell_type": "code",\n', "invalid notebook JSON: Expecting property name", 4, 1),
    ('[1, 2]', "not a Jupyter notebook: the JSON is not an object", 1, 1),
    ('{"worksheets": [], "nbformat": 3}', "notebook format 3 is not supported", 1, 1),
    ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1: `source` is neither", 1, 1),
])
def test_a_broken_notebook_is_tl001_for_that_file(tmp_path, capsys, monkeypatch, text, message, line, column):
    root = make_project(tmp_path / "p", {})
    (root / "broken.ipynb").write_text(text, encoding="utf-8")
    write_notebook(root / "good.ipynb", TRAINER)
    doc, found = json_findings(root, capsys, monkeypatch, ".", *SELECT, "--extend-select", "TL001")
    broken = [d for d in doc["diagnostics"] if d["path"] == "broken.ipynb"]
    assert [(d["code"], d["range"]["start"]) for d in broken] == [("TL001", {"line": line, "column": column})]
    assert broken[0]["message"].startswith(message) and "cell" not in broken[0]
    assert found["good.ipynb"] == TRAINER_FOUND and doc["summary"]["parse_errors"] == 1


def test_a_syntax_error_in_a_cell_is_tl001_at_the_cell(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    write_notebook(root / "n.ipynb", [("code", "x = 1"), ("markdown", "text"), ("code", "y = 2\nif x\n")])
    _, found = json_findings(root, capsys, monkeypatch, "n.ipynb", "--no-cache")
    assert found == {"n.ipynb": [("TL001", 3, 2, 5)]}


def test_a_notebook_of_another_language_has_no_code_to_lint(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    write_notebook(root / "r.ipynb", [("code", "library(ggplot2)\nx <- c(1, 2)")],
                   {"kernelspec": {"name": "ir", "language": "R", "display_name": "R"}})
    doc, found = json_findings(root, capsys, monkeypatch, ".", "--no-cache")
    assert found == {} and doc["summary"]["files"] == 1


# --- discovery, the project, the cache, the language server -------------------------------------


def test_extend_exclude_turns_notebooks_off(project, capsys, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.tlint]\nextend-exclude = ["*.ipynb"]\n', encoding="utf-8")
    (project / "train.py").write_text("x = 1\n", encoding="utf-8")
    doc, _ = json_findings(project, capsys, monkeypatch, ".", *SELECT)
    assert doc["summary"]["files"] == 1 and doc["diagnostics"] == []


PADDING_DATA = ("from transformers import AutoTokenizer\n\n"
                "tok = AutoTokenizer.from_pretrained('bert-base-cased')\n\n\n"
                "def encode(texts):\n    return tok(texts, padding=True, return_tensors='pt')\n")


def test_a_notebook_importing_a_project_module_is_related_to_it(tmp_path, capsys, monkeypatch):
    """TL101 holds when the project pads: the padding is in `src/data.py`, which the notebook
    (in another folder) imports; without the import, the two are unrelated."""
    root = make_project(tmp_path / "p", {"src/data.py": PADDING_DATA})
    call = ("code", "batch = encode(['a', 'b c'])\nlogits = model(batch['input_ids']).logits")
    write_notebook(root / "notebooks" / "train.ipynb", [("code", "from src.data import encode"), call])
    _, found = json_findings(root, capsys, monkeypatch, "notebooks/train.ipynb", "--select", "TL101", "--no-cache")
    assert found == {"notebooks/train.ipynb": [("TL101", 2, 2, 10)]}
    write_notebook(root / "notebooks" / "train.ipynb", [("code", "import os"), call])
    _, found = json_findings(root, capsys, monkeypatch, "notebooks/train.ipynb", "--select", "TL101", "--no-cache")
    assert found == {}


def test_a_modules_findings_count_the_facts_of_a_notebook_that_imports_it(tmp_path, capsys, monkeypatch):
    """The other way round: `src/infer.py` calls the model without a mask; the project pads
    only in a notebook that imports it (a file not named on the command line)."""
    infer = "def predict(model, batch):\n    return model(batch['input_ids']).logits\n"
    root = make_project(tmp_path / "p", {"src/infer.py": infer})
    write_notebook(root / "notebooks" / "demo.ipynb", [
        ("code", "from transformers import AutoTokenizer\nfrom src.infer import predict"),
        ("code", "tok = AutoTokenizer.from_pretrained('x')\nbatch = tok(['a'], padding=True, return_tensors='pt')")])
    _, found = json_findings(root, capsys, monkeypatch, "src/infer.py", "--select", "TL101", "--no-cache")
    assert found == {"src/infer.py": [("TL101", None, 2, 12)]}
    (root / "pyproject.toml").write_text('[tool.tlint]\nextend-exclude = ["*.ipynb"]\n', encoding="utf-8")
    _, found = json_findings(root, capsys, monkeypatch, "src/infer.py", "--select", "TL101", "--no-cache")
    assert found == {}


def test_the_cache_keys_on_the_notebooks_content(project, capsys, monkeypatch):
    args = ("trainer.ipynb", "--select", "TL101,TL111", "--format", "json")
    cold = run(project, capsys, monkeypatch, *args).stdout
    warm = run(project, capsys, monkeypatch, *args).stdout
    assert cold == warm and '"cell": 6' in warm
    write_notebook(project / "trainer.ipynb", TRAINER[:5])  # the last cell (TL101) removed
    changed = json.loads(run(project, capsys, monkeypatch, *args).stdout)
    assert [d["code"] for d in changed["diagnostics"]] == ["TL111"]


def test_the_language_server_keeps_to_python_files(tmp_path):
    from tlint.lsp_server import fix_all_text, lint_text

    text = notebook(TRAINER)
    path = make_project(tmp_path / "p", {}) / "n.ipynb"
    assert lint_text(path, text, "utf-16").diagnostics == []
    assert fix_all_text(path, text) is None


def test_an_odd_notebook_name_in_every_format(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    name = "fine tune, ünï: %01.ipynb"
    write_notebook(root / name, TRAINER)
    for fmt in ("text", "concise", "json", "github", "junit", "sarif", "lsp"):
        proc = run(root, capsys, monkeypatch, ".", *SELECT, "--format", fmt)
        assert proc.returncode == 1, (fmt, proc.stderr)
        assert "cell 6" in proc.stdout or '"cell": 6' in proc.stdout or "%01.ipynb" in proc.stdout, fmt


def test_a_notebook_may_be_large_with_outputs_but_its_code_is_bounded(tmp_path, capsys, monkeypatch):
    """Plots make notebooks large: 3 MiB of outputs are read (the limit is 16 MiB for a
    notebook), a notebook over the limit is TL001 without a read, and so is more than MAX_FILE_BYTES of code."""
    from tlint import reading

    root = make_project(tmp_path / "p", {})
    doc = nbformat.reads(notebook(TRAINER), as_version=4)
    doc.cells[5].outputs = [nbformat.v4.new_output("display_data", data={"image/png": "A" * (3 * 2**20)})]
    (root / "plots.ipynb").write_text(nbformat.writes(doc), encoding="utf-8")
    _, found = json_findings(root, capsys, monkeypatch, "plots.ipynb", *SELECT)
    assert found == {"plots.ipynb": TRAINER_FOUND}
    doc.cells[5].outputs[0].data["image/png"] = "A" * (reading.MAX_NOTEBOOK_BYTES + 1)
    (root / "plots.ipynb").write_text(nbformat.writes(doc), encoding="utf-8")
    code = notebook([("code", "x = 1\n" * (reading.MAX_FILE_BYTES // 6 + 1))])
    (root / "code.ipynb").write_text(code, encoding="utf-8")
    doc_out = json.loads(run(root, capsys, monkeypatch, ".", "--select", "TL001", "--no-cache",
                             "--format", "json").stdout)
    messages = {d["path"]: d["message"] for d in doc_out["diagnostics"]}
    assert messages["plots.ipynb"].startswith("file too large to lint (16.0 MiB; the limit is 16 MiB)")
    assert messages["code.ipynb"].startswith("file too large to lint (1.0 MiB; the limit is 1 MiB)")


def test_a_cross_file_message_names_the_other_notebooks_cell(tmp_path, capsys, monkeypatch):
    """TL104 compares the tokenizers of one program (a notebook and the module it imports); a
    notebook's is named by cell and line in the module's message, and the other way round."""
    root = make_project(tmp_path / "p", {"train.py": "from transformers import AutoTokenizer\n\n"
                                                     "tok = AutoTokenizer.from_pretrained('bert-base-cased')\n"})
    load = "from transformers import AutoTokenizer\n"
    write_notebook(root / "infer.ipynb", [("markdown", "# Inference"), ("code", "from train import tok as train_tok"),
                                          ("code", load + "\ntok = AutoTokenizer.from_pretrained('bert-base-uncased')")])
    doc, found = json_findings(root, capsys, monkeypatch, ".", "--select", "TL104", "--no-cache")
    assert found == {"infer.ipynb": [("TL104", 3, 3, 7)], "train.py": [("TL104", None, 3, 7)]}
    messages = {d["path"]: d["message"] for d in doc["diagnostics"]}
    assert "differs from the one built at train.py:3 (" in messages["infer.ipynb"]
    assert "differs from the one built at infer.ipynb:cell 3, line 3 (" in messages["train.py"]


def test_a_notebook_analysed_under_the_parse_guard_keeps_its_cell_map(tmp_path):
    """A file LibCST might crash on is analysed in a child process (tlint/guard.py); a
    notebook's result comes back with its cell map, so its findings still land in cells."""
    from tlint.config import ConfigResolver
    from tlint.engine import Linter, _analyse_guarded

    root = make_project(tmp_path / "p", {})
    path = write_notebook(root / "n.ipynb", TRAINER)
    settings = Linter(ConfigResolver(), jobs=1, select=["TL111"]).settings_for(root)
    result = _analyse_guarded(path, "n.ipynb", settings, None, path.read_bytes(), False, True, 60.0)
    assert result.cells == nb.load(path.read_text(encoding="utf-8")).cell_map
    assert [(p.diagnostic.code, p.diagnostic.range.start.line) for p in result.pending] == [("TL111", 11)]
    placed = nb.to_cells([p.diagnostic for p in result.pending], result.cells)
    assert [(d.cell, d.range.start.line, d.range.start.column) for d in placed] == [(4, 2, 34)]


def test_fix_removes_unused_suppressions_in_cells(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    path = write_notebook(root / "n.ipynb", [("code", "import torch\n# tlint: ignore[TL105]\nx = 1"),
                                             ("markdown", "text"), ("code", "y = 2  # tlint: ignore[TL101]")])
    before = path.read_text(encoding="utf-8")
    proc = run(root, capsys, monkeypatch, "n.ipynb", "--select", "TL002,TL101,TL105", "--no-cache", "--fix")
    assert proc.returncode == 0 and "fixed 2 findings" in proc.stderr
    after = path.read_text(encoding="utf-8")
    assert [c.source for c in nbformat.reads(after, as_version=4).cells] == ["import torch\nx = 1", "text", "y = 2"]
    assert _outside_sources(before) == _outside_sources(after)


@pytest.mark.parametrize("text", ['{"cells": [], "x": ' + "9" * 5000 + "}", "[" * 100000 + "]" * 100000, "\ufeff{"])
def test_hostile_notebook_json_is_tl001_not_a_crash(tmp_path, capsys, monkeypatch, text):
    root = make_project(tmp_path / "p", {})
    (root / "bad.ipynb").write_text(text, encoding="utf-8")
    proc = run(root, capsys, monkeypatch, "bad.ipynb", "--no-cache", "--format", "json")
    doc = json.loads(proc.stdout)
    assert [d["code"] for d in doc["diagnostics"]] == ["TL001"] and proc.returncode == 1
    assert doc["diagnostics"][0]["message"].startswith(("invalid notebook JSON", "not a Jupyter notebook"))


def test_a_notebook_name_that_is_not_utf8(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {})
    name = os.fsdecode(b"r\xe9glage.ipynb")
    write_notebook(root / name, TRAINER)
    concise = run(root, capsys, monkeypatch, ".", *SELECT, "--output-format", "concise").stdout
    assert concise.splitlines()[0].startswith("r\\xe9glage.ipynb:cell 4, line 2, column 34: TL111")
    sarif = json.loads(run(root, capsys, monkeypatch, ".", *SELECT, "--format", "sarif").stdout)
    location = sarif["runs"][0]["results"][1]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "r%E9glage.ipynb" and location["region"]["properties"] == {"cell": 6}
