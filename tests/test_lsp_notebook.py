"""`tlint lsp` and notebook documents (LSP 3.17 `notebookDocument/*`): a client that syncs
notebooks sends the cells as text documents; the server lints the notebook as `tlint check`
lints the file and publishes each finding on its cell, its range within the cell."""

from __future__ import annotations

import pytest

from tests.cliutil import make_project
from tests.notebookutil import TRAINER
from tests.test_lsp import CONFIG, SOFTMAX, SOFTMAX_AT, SOFTMAX_LINE, Client, code_actions, start, stop


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "proj", {"pyproject.toml": CONFIG})


NOTEBOOK_CAPABILITIES = {"notebookDocument": {"synchronization": {}}}
FIXED_CELL = TRAINER[5][1].replace("model(batch['input_ids'])",
                                   "model(batch['input_ids'], attention_mask=batch['attention_mask'])")


def cell_uri(notebook, number: int) -> str:
    return f"vscode-notebook-cell:{notebook.as_posix()}#cell{number}"  # as VS Code names cells


def open_notebook(client: Client, notebook, cells) -> list[str]:
    uris = [cell_uri(notebook, number) for number in range(1, len(cells) + 1)]
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": notebook.as_uri(), "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": 2 if kind == "code" else 1, "document": uri}
                                       for uri, (kind, _) in zip(uris, cells)]},
        "cellTextDocuments": [{"uri": uri, "languageId": "python" if kind == "code" else "markdown", "version": 1,
                               "text": text} for uri, (kind, text) in zip(uris, cells)]})
    return uris


def found(client: Client, uris: list[str], after: int = 0) -> dict[int, list[tuple]]:
    """Per cell number, the (code, line, character) of its published diagnostics."""
    out = {}
    for number, uri in enumerate(uris, start=1):
        _, params = client.published(uri, after=after)
        out[number] = [(d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"])
                       for d in params["diagnostics"]]
    return out


def test_notebook_cells_get_their_findings_and_lose_them(project):
    notebook = project / "train.ipynb"  # never written: the server lints the editor's cells
    # the Trainer notebook of tests/notebookutil.py, its install cell in automagic form (Colab's)
    cells = [TRAINER[0], ("code", "pip install -q transformers datasets"), *TRAINER[2:]]
    client = Client(project)
    try:
        capabilities = start(client, project, NOTEBOOK_CAPABILITIES)["capabilities"]
        (selector,) = capabilities["notebookDocumentSync"]["notebookSelector"]
        assert selector["cells"] == [{"language": "python"}]
        uris = open_notebook(client, notebook, cells)
        # TL101 in cell 6 (as `tlint check` reports the file with the default rules), nothing else
        assert found(client, uris) == {1: [], 2: [], 3: [], 4: [], 5: [], 6: [("TL101", 2, 9)]}
        assert code_actions(client, uris[5], (2, 0), (2, 40)) == []  # cells: diagnostics only

        # a cell's text changes: its finding goes, the others stay
        seen = len(client.notifications)
        client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": notebook.as_uri(), "version": 2},
            "change": {"cells": {"textContent": [{"document": {"uri": uris[5], "version": 2},
                                                  "changes": [{"text": FIXED_CELL}]}]}}})
        assert found(client, uris, after=seen) == {1: [], 2: [], 3: [], 4: [], 5: [], 6: []}

        # a cell is removed (the structure changes): its diagnostics are cleared
        seen = len(client.notifications)
        client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": notebook.as_uri(), "version": 3},
            "change": {"cells": {"structure": {"array": {"start": 3, "deleteCount": 1, "cells": []},
                                               "didClose": [{"uri": uris[3]}]}}}})
        left = uris[:3] + uris[4:]
        assert found(client, left + [uris[3]], after=seen) == {1: [], 2: [], 3: [], 4: [], 5: [], 6: []}

        # didClose clears every cell
        seen = len(client.notifications)
        client.notify("notebookDocument/didClose", {"notebookDocument": {"uri": notebook.as_uri()},
                                                     "cellTextDocuments": [{"uri": uri} for uri in left]})
        assert found(client, left, after=seen) == {1: [], 2: [], 3: [], 4: [], 5: []}
        stop(client)
        assert "Traceback" not in client.errors()
    finally:
        client.close()


def test_cell_positions_in_the_negotiated_encoding(project):
    """utf-8 positions: a cell's characters are counted on the cell's own line."""
    notebook = project / "emoji.ipynb"
    client = Client(project)
    try:
        result = start(client, project, {**NOTEBOOK_CAPABILITIES, "general": {"positionEncodings": ["utf-8"]}})
        assert result["capabilities"]["positionEncoding"] == "utf-8"
        uris = open_notebook(client, notebook, [("markdown", "# ünï"), ("code", SOFTMAX)])
        assert found(client, uris) == {1: [], 2: [("TL209", SOFTMAX_LINE, SOFTMAX_AT["utf-8"][0])]}
        stop(client)
    finally:
        client.close()


def test_a_client_without_notebook_sync_is_offered_none(project):
    client = Client(project)
    try:
        assert "notebookDocumentSync" not in start(client, project)["capabilities"]
        stop(client)
    finally:
        client.close()
