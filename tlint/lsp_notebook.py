"""Notebook documents in `tlint lsp` (LSP 3.17 `notebookDocument/*`).

A client that syncs notebooks sends each notebook with its cells as text documents
(`notebookDocument/didOpen`, `didChange`, `didSave`, `didClose`; pygls keeps them in its
workspace). The server lints the notebook as `tlint check` lints the `.ipynb` file: the
cells, in order, written as an nbformat 4 notebook (code cells for Python cells, markdown
for the others) and linted as the notebook's path with the project's config, so the
cells are one module and IPython syntax is masked (tlint/notebook.py). Each finding is
published on its cell's text document, its range within the cell (`Diagnostic.cell` is
the cell's 1-based place among the synced cells).

Cells have diagnostics, no code actions: `tlint check --fix` fixes a notebook.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from lsprotocol.converters import get_converter

if TYPE_CHECKING:
    from tlint.lsp_server import TlintServer

logger = logging.getLogger(__name__)
_converter = get_converter()

# notebooks of any type; their Python cells (a client sends only the cells that match)
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")])],
    save=True)


@dataclass(frozen=True)
class SyncedCell:
    uri: str
    code: bool  # a Python code cell (the others are kept as markdown: not linted, counted)
    text: str
    version: int | None


@dataclass
class LintedNotebook:
    """One lint of a notebook: the LSP diagnostics of each cell, by cell URI."""

    cells: tuple[SyncedCell, ...]
    by_cell: dict[str, list[dict]] = field(default_factory=dict)
    error: str | None = None  # a configuration error: nothing was linted


def synced_cells(workspace, notebook: types.NotebookDocument) -> tuple[SyncedCell, ...]:
    """The notebook's cells as the workspace holds them now (a cell whose text document is
    missing counts as an empty markdown cell, keeping the numbering)."""
    out = []
    for cell in notebook.cells:
        document = workspace.text_documents.get(cell.document)
        if document is None:
            out.append(SyncedCell(cell.document, False, "", None))
            continue
        language = (document.language_id or "python").lower()
        code = cell.kind == types.NotebookCellKind.Code and language.startswith("python")
        out.append(SyncedCell(cell.document, code, document.source, document.version))
    return tuple(out)


def notebook_json(cells: tuple[SyncedCell, ...]) -> str:
    """The cells as an nbformat 4 notebook, as `tlint check` would read it from disk."""
    made: list[dict[str, object]] = []
    for cell in cells:
        if cell.code:
            made.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                         "source": cell.text})
        else:
            made.append({"cell_type": "markdown", "metadata": {}, "source": cell.text})
    document = {"cells": made, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def lint_notebook(path: Path, cells: tuple[SyncedCell, ...], encoding: str) -> LintedNotebook:
    """Lint the notebook of `cells` as `path` (absolute). Never raises."""
    from tlint.config import ConfigError
    from tlint.diagnostics import Diagnostic, Range
    from tlint.lsp_server import _new_linter, lsp_payload
    from tlint.reporters import SourceLines

    display = path.as_posix()
    text = notebook_json(cells)
    out = LintedNotebook(cells, {cell.uri: [] for cell in cells})
    if not cells:
        return out
    try:
        result = _new_linter().run([], stdin=(path, text))
        shown = sorted((d for d in result.diagnostics if not d.suppressed and d.path == display),
                       key=Diagnostic.sort_key)
    except ConfigError as exc:
        out.error = str(exc)
        return out
    except Exception as exc:  # a bug in tlint: say so on the first cell, keep serving
        logger.error("tlint failed on %s:\n%s", display, traceback.format_exc())
        shown = [Diagnostic("TL003", "internal-error", "error",
                            f"internal error: {type(exc).__name__}: {exc} (this is a bug in tlint)",
                            display, Range.point(1), cell=1)]
    lines = SourceLines({display: text})
    for diag in shown:
        number = diag.cell if diag.cell is not None and 1 <= diag.cell <= len(cells) else 1
        if diag.cell != number:  # a finding on the whole file: shown on the first cell's first line
            diag = replace(diag, range=Range.point(1), cell=number, fix=None)
        out.by_cell[cells[number - 1].uri].append(lsp_payload(diag, lines, encoding))
    return out


async def publish_notebook(server: TlintServer, uri: str) -> None:
    """Lint the open notebook `uri` and publish each cell's diagnostics (an empty list for
    a cell without findings, and for a cell that left the notebook since the last lint)."""
    from tlint.notebook import is_notebook

    workspace = server.workspace
    notebook = workspace.get_notebook_document(notebook_uri=uri)
    if notebook is None:
        return
    cells = synced_cells(workspace, notebook)
    path = server.document_path(uri)
    if not is_notebook(path):  # an untitled notebook: linted as one in the workspace root
        path = path.with_name("untitled.ipynb")
    loop = asyncio.get_running_loop()
    linted = await loop.run_in_executor(server.lint_pool, lint_notebook, path, cells, server.encoding)
    notebook = workspace.get_notebook_document(notebook_uri=uri)
    if notebook is None or synced_cells(workspace, notebook) != cells:  # changed: the newer lint publishes
        return
    server.report_config_error(linted.error)
    gone = set(server.notebook_cells.get(uri, ())) - {cell.uri for cell in cells}
    server.notebook_cells[uri] = tuple(cell.uri for cell in cells)
    for cell in cells:
        diagnostics = [_converter.structure(p, types.Diagnostic) for p in linted.by_cell.get(cell.uri, [])]
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=diagnostics, version=cell.version))
    for cell_uri in sorted(gone):
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))


def register(server: TlintServer, debounce: float) -> None:
    """The `notebookDocument/*` notifications: lint on open and save, `debounce` seconds
    after a change; on close, clear every cell's diagnostics."""

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def did_open(ls: TlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def did_change(ls: TlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, debounce)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def did_save(ls: TlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)  # the config may have changed: lint again

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    async def did_close(ls: TlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        ls.cancel(uri)
        cells = set(ls.notebook_cells.pop(uri, ())) | {cell.uri for cell in params.cell_text_documents}
        for cell_uri in sorted(cells):
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))
