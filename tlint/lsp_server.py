"""`tlint lsp`: a language server over stdio (pygls 2.x), for editors.

Diagnostics are published on didOpen, on didSave and, debounced (`DEBOUNCE` seconds after
the last keystroke; the latest text wins), on didChange; they are cleared on didClose.
Each lint runs `Linter.run([], stdin=(path, text))` on the editor's in-memory text with the
project's config (a fresh `ConfigResolver` each time, so config edits take effect), off
the thread that serves requests, on a pool of `LINT_THREADS` threads: one document's
lints run one after another, while a slow document (a file parsed in the guard's child
for up to its time limit) holds back neither the server nor the other documents. A file
that does not parse gets TL001 like any other finding. Notebooks (LSP 3.17
`notebookDocument/*`, diagnostics per cell): tlint/lsp_notebook.py.

The diagnostics are those of `--format lsp` (tlint/reporters/lsp.py): 0-based lines, UTF-16
characters unless the client negotiated another position encoding (utf-8/utf-32: pygls
picks the client's first choice), severity, code, codeDescription, source, data.fix.

Code actions: one quick fix per finding that has a fix (unsafe ones say so in the title),
"Disable TLxxx for this line" and "Disable TLxxx for this file" (the comments `tlint check
--add-suppressions` writes, tlint/baseline.py), and "Fix all safe tlint findings" (kind
`source.fixAll.tlint`): the whole-document result of the `--fix` loop (tlint/fixes.py
`fix_run`) on the in-memory text.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from tlint import __version__
from tlint.diagnostics import Diagnostic, Position, Range
from tlint.lsp_notebook import NOTEBOOK_SYNC, publish_notebook
from tlint.lsp_notebook import register as register_notebooks
from tlint.reporters import SourceLines
from tlint.reporters.lsp import lsp_diagnostic, utf16_character

DEBOUNCE = 0.3  # seconds between the last change and the lint
LINT_THREADS = 4  # documents linted at the same time
FIX_ALL_KIND = "source.fixAll.tlint"
FIX_ALL_TITLE = "Fix all safe tlint findings"

logger = logging.getLogger(__name__)
_converter = get_converter()
_NEWLINE = re.compile(r"\r\n|\r|\n")


# --- positions in the client's encoding -----------------------------------------------


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _character(line: str | None, column: int, encoding: str) -> int:
    """The 0-based offset, in `encoding` units, of a 1-based code-point column."""
    if encoding == types.PositionEncodingKind.Utf16:
        return utf16_character(line, column)
    index = column - 1
    if line is None:
        return index
    return _units(line[:index], encoding) + max(0, index - len(line))


def _range(lines: SourceLines, path: str, rng: Range, encoding: str, cell: int | None = None) -> dict:
    def position(pos: Position) -> dict:
        return {"line": pos.line - 1, "character": _character(lines.line(path, pos.line, cell), pos.column, encoding)}

    return {"start": position(rng.start), "end": position(rng.end)}


def lsp_payload(diag: Diagnostic, lines: SourceLines, encoding: str) -> dict:
    """`--format lsp`'s diagnostic, its positions in the client's encoding."""
    payload = lsp_diagnostic(diag, lines)
    if encoding != types.PositionEncodingKind.Utf16:
        payload["range"] = _range(lines, diag.path, diag.range, encoding, diag.cell)
        fix = payload["data"]["fix"]
        if fix is not None and diag.fix is not None:
            for edit, original in zip(fix["edits"], diag.fix.edits):
                edit["range"] = _range(lines, diag.path, original.range, encoding, original.cell)
    return payload


def _document_end(text: str, encoding: str) -> types.Position:
    lines = _NEWLINE.split(text)
    return types.Position(line=len(lines) - 1, character=_units(lines[-1], encoding))


# --- linting --------------------------------------------------------------------------


@dataclass
class Linted:
    """One lint of one text: the findings shown and their LSP form, index for index."""

    text: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    payloads: list[dict] = field(default_factory=list)
    error: str | None = None  # a configuration error: nothing was linted

    def lsp(self) -> list[types.Diagnostic]:
        return [_converter.structure(p, types.Diagnostic) for p in self.payloads]


_MEMORY = None  # the project's facts and import scans, kept between lints (one per server)
_MEMORY_LOCK = threading.Lock()


def _new_linter():
    """A fresh linter per lint (the configuration is read again: an edited config holds at
    once), sharing the server's `ProjectMemory`: only the edited text, and files changed
    on disk, are analysed again (tlint/project_memory.py)."""
    global _MEMORY
    from tlint.config import ConfigResolver
    from tlint.engine import Linter
    from tlint.project_memory import ProjectMemory

    with _MEMORY_LOCK:
        if _MEMORY is None:
            _MEMORY = ProjectMemory()
    return Linter(ConfigResolver(), jobs=1, cache=False, memory=_MEMORY)


def lint_text(path: Path, text: str, encoding: str) -> Linted:
    """Lint the in-memory `text` as `path` (absolute). Never raises. A notebook is not
    linted here (no notebook sync: `tlint check` lints notebooks)."""
    from tlint.config import ConfigError
    from tlint.notebook import is_notebook

    if is_notebook(path):
        return Linted(text)
    display = path.as_posix()
    try:
        result = _new_linter().run([], stdin=(path, text))
    except ConfigError as exc:
        return Linted(text, error=str(exc))
    except Exception as exc:  # a bug in tlint: say so on the file, keep serving
        logger.error("tlint failed on %s:\n%s", display, traceback.format_exc())
        diag = Diagnostic("TL003", "internal-error", "error",
                          f"internal error: {type(exc).__name__}: {exc} (this is a bug in tlint)",
                          display, Range.point(1), kind="defect")
        return Linted(text, [diag], [lsp_payload(diag, SourceLines({display: text}), encoding)])
    shown = sorted((d for d in result.diagnostics if not d.suppressed and d.path == display),
                   key=Diagnostic.sort_key)
    lines = SourceLines({display: text})
    return Linted(text, shown, [lsp_payload(d, lines, encoding) for d in shown])


def fix_all_text(path: Path, text: str) -> str | None:
    """The text after the safe-fix loop, or None when it would change nothing (or for a
    notebook, which the server does not lint)."""
    from tlint.config import ConfigError
    from tlint.fixes import fix_run
    from tlint.notebook import is_notebook

    if is_notebook(path):
        return None
    try:
        outcome = fix_run(_new_linter(), [], unsafe=False, stdin=(path, text))
    except ConfigError:
        return None
    except Exception:
        logger.error("tlint's fix loop failed on %s:\n%s", path, traceback.format_exc())
        return None
    new = outcome.texts.get(path, text)
    return new if new != text else None


# --- the server -----------------------------------------------------------------------


class TlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("tlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.notebook_cells: dict[str, tuple[str, ...]] = {}  # notebook uri -> its cells last published
        self.linted: dict[str, Linted] = {}  # uri -> the last lint of its text
        self.pending: dict[str, asyncio.Task] = {}  # uri -> the scheduled lint
        self.fix_all: dict[str, tuple[str, str | None]] = {}  # uri -> (text, fixed text)
        self.lint_pool = ThreadPoolExecutor(max_workers=LINT_THREADS, thread_name_prefix="tlint-lint")
        self.lint_locks: dict[str, asyncio.Lock] = {}  # uri -> held while that document is linted
        self.shown_error: str | None = None

    # where a document lints from: its file, or an untitled buffer in the workspace root
    def document_path(self, uri: str) -> Path:
        fs_path = to_fs_path(uri)
        if fs_path:
            return Path(fs_path).absolute()
        return Path(self.workspace.root_path or Path.cwd()).absolute() / "untitled.py"

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)

    def is_open(self, uri: str) -> bool:
        return uri in self.workspace.text_documents

    def schedule(self, uri: str, delay: float) -> None:
        """Lint `uri` after `delay` seconds, replacing any lint scheduled before."""
        self.cancel(uri)
        self.pending[uri] = asyncio.ensure_future(self._lint_later(uri, delay))

    def cancel(self, uri: str) -> None:
        task = self.pending.pop(uri, None)
        if task is not None and not task.done():
            task.cancel()

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            await self.lint_and_publish(uri)
        except Exception:  # a bug in the server: log it, keep serving the other files
            logger.exception("cannot publish the diagnostics of %s", uri)
        finally:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]

    async def lint(self, uri: str) -> Linted | None:
        """The lint of the document's current text (the last one if the text has not changed);
        None for a notebook cell (its notebook is linted whole: tlint/lsp_notebook.py)."""
        if not self.is_open(uri) or self.workspace.get_notebook_document(cell_uri=uri) is not None:
            return None
        text = self.workspace.get_text_document(uri).source
        async with self.lint_locks.setdefault(uri, asyncio.Lock()):  # this document's lints in turn
            last = self.linted.get(uri)
            if last is not None and last.text == text:
                return last
            loop = asyncio.get_running_loop()
            linted = await loop.run_in_executor(self.lint_pool, lint_text, self.document_path(uri), text,
                                                self.encoding)
            if self.is_open(uri) and self.workspace.get_text_document(uri).source == text:
                self.linted[uri] = linted
        return linted

    async def lint_and_publish(self, uri: str) -> None:
        if self.workspace.get_notebook_document(notebook_uri=uri) is not None:
            await publish_notebook(self, uri)
            return
        if not self.is_open(uri):
            return
        document = self.workspace.get_text_document(uri)
        text, version = document.source, document.version
        linted = await self.lint(uri)
        if linted is None or not self.is_open(uri):
            return
        document = self.workspace.get_text_document(uri)
        if document.source != text:  # changed while linting: the newer text's lint publishes
            return
        self.report_config_error(linted.error)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=linted.lsp(), version=version))

    def report_config_error(self, error: str | None) -> None:
        if error and error != self.shown_error:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error,
                                                             message=f"tlint: {error}"))
        self.shown_error = error

    def clear(self, uri: str) -> None:
        self.cancel(uri)
        self.linted.pop(uri, None)
        self.fix_all.pop(uri, None)
        self.lint_locks.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # --- code actions ---

    def workspace_edit(self, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        caps = self.client_capabilities.workspace
        versioned = bool(caps and caps.workspace_edit and caps.workspace_edit.document_changes)
        if versioned:
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits)])
        return types.WorkspaceEdit(changes={uri: edits})

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        linted = await self.lint(uri)
        if linted is None or linted.error:
            return None
        document = self.workspace.get_text_document(uri)
        if document.source != linted.text:  # edited while linting: the next request has it
            return None
        only = list(params.context.only or [])

        def wanted(kind: str) -> bool:
            return not only or any(kind == o or kind.startswith(f"{o}.") for o in only)

        actions: list[types.CodeAction] = []
        request = params.range
        if wanted(types.CodeActionKind.QuickFix):
            for diag, payload in zip(linted.diagnostics, linted.payloads):
                fix = payload["data"]["fix"]
                if diag.fix is None or fix is None or not _overlaps(payload["range"], request):
                    continue
                title = diag.fix.message or f"Fix {diag.code}"
                if diag.fix.applicability != "safe":
                    title += " (unsafe)"
                edits = [types.TextEdit(range=_converter.structure(e["range"], types.Range), new_text=e["newText"])
                         for e in fix["edits"]]
                actions.append(types.CodeAction(
                    title=f"tlint: {title}", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[_converter.structure(payload, types.Diagnostic)],
                    is_preferred=diag.fix.applicability == "safe",
                    edit=self.workspace_edit(uri, document.version, edits)))
        if wanted(types.CodeActionKind.QuickFix):
            actions += self.disable_actions(uri, document.version, linted, request)
        safe = any(d.fix is not None and d.fix.applicability == "safe" for d in linted.diagnostics)
        if safe and wanted(FIX_ALL_KIND):
            fixed = await self.fixed_text(uri, linted.text)
            if fixed is not None and self.workspace.get_text_document(uri).source == linted.text:
                whole = types.Range(start=types.Position(line=0, character=0),
                                    end=_document_end(linted.text, self.encoding))
                actions.append(types.CodeAction(
                    title=FIX_ALL_TITLE, kind=FIX_ALL_KIND,
                    edit=self.workspace_edit(uri, document.version, [types.TextEdit(range=whole, new_text=fixed)])))
        return actions

    def disable_actions(self, uri: str, version: int | None, linted: Linted,
                        request: types.Range) -> list[types.CodeAction]:
        """"Disable TLxxx for this line" and "for this file" for each finding in the range:
        the comments `tlint check --add-suppressions` writes (tlint/baseline.py), one action
        per code and line, one per code for the file."""
        from tlint.baseline import NOT_SUPPRESSIBLE, add_file_suppression, add_suppressions

        actions: list[types.CodeAction] = []
        line_done: set[tuple[str, int]] = set()
        file_done: set[str] = set()
        text = linted.text
        for diag, payload in zip(linted.diagnostics, linted.payloads):
            if diag.code in NOT_SUPPRESSIBLE or not _overlaps(payload["range"], request):
                continue
            diagnostic = _converter.structure(payload, types.Diagnostic)
            key = (diag.code, diag.range.start.line)
            if key not in line_done:
                line_done.add(key)
                done = add_suppressions(text, [diag])
                if done.added and done.text != text:
                    actions.append(types.CodeAction(
                        title=f"tlint: Disable {diag.code} for this line", kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=self.workspace_edit(uri, version, [text_edit(text, done.text, self.encoding)])))
            if diag.code not in file_done:
                file_done.add(diag.code)
                new = add_file_suppression(text, diag.code)
                if new is not None:
                    actions.append(types.CodeAction(
                        title=f"tlint: Disable {diag.code} for this file", kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=self.workspace_edit(uri, version, [text_edit(text, new, self.encoding)])))
        return actions

    async def fixed_text(self, uri: str, text: str) -> str | None:
        cached = self.fix_all.get(uri)
        if cached is not None and cached[0] == text:
            return cached[1]
        loop = asyncio.get_running_loop()
        async with self.lint_locks.setdefault(uri, asyncio.Lock()):
            fixed = await loop.run_in_executor(self.lint_pool, fix_all_text, self.document_path(uri), text)
        self.fix_all[uri] = (text, fixed)
        return fixed


def _position(text: str, offset: int, encoding: str) -> types.Position:
    """The LSP position of a code-point offset into `text`."""
    lines = _NEWLINE.split(text[:offset])
    return types.Position(line=len(lines) - 1, character=_units(lines[-1], encoding))


def text_edit(old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit that turns `old` into `new`: the span between their common start and end
    (never splitting a `\r\n`)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if 0 < end and old[len(old) - end - 1:len(old) - end + 1] == "\r\n":
        end -= 1
    rng = types.Range(start=_position(old, start, encoding), end=_position(old, len(old) - end, encoding))
    return types.TextEdit(range=rng, new_text=new[start:len(new) - end])


def _overlaps(rng: dict, request: types.Range) -> bool:
    start = (rng["start"]["line"], rng["start"]["character"])
    end = (rng["end"]["line"], rng["end"]["character"])
    return not (end < (request.start.line, request.start.character)
                or start > (request.end.line, request.end.character))


def create_server() -> TlintServer:
    server = TlintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: TlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.linted.pop(params.text_document.uri, None)
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: TlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, DEBOUNCE)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: TlintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.linted.pop(params.text_document.uri, None)  # the config may have changed: lint again
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: TlintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.clear(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]))
    async def code_action(ls: TlintServer, params: types.CodeActionParams):
        return await ls.code_actions(params)

    register_notebooks(server, DEBOUNCE)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TlintServer, *args) -> None:
        for uri in list(ls.pending):
            ls.cancel(uri)
        ls.lint_pool.shutdown(wait=False, cancel_futures=True)

    return server


def serve() -> int:
    """Serve over stdin/stdout until the client says `exit` (or closes the pipe)."""
    logging.basicConfig(level=logging.WARNING, format="tlint lsp: %(levelname)s: %(message)s")
    create_server().start_io()
    return 0
