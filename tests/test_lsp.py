"""`tlint lsp`: the language server, spoken to over its stdin/stdout as an editor would,
with LSP's Content-Length framing written here by hand."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.cliutil import make_project, run_tlint, tlint_env

TIMEOUT = 60.0  # seconds for any one answer: a broken server fails the test, never hangs it

# TL209 (softmax without dim) after an emoji: 2 UTF-16 units, 1 code point, 4 UTF-8 bytes.
SOFTMAX = 'import torch.nn.functional as F\n\n\ndef f(x):\n    s = "😀"; return F.softmax(x)\n'
SOFTMAX_LINE = 4
SOFTMAX_AT = {"utf-16": (21, 33), "utf-8": (23, 35)}
# TL002 (a suppression that suppresses nothing) has a safe fix: remove the comment.
UNUSED = 's = "😀"  # tlint: ignore\n'
UNUSED_FIXED = 's = "😀"\n'
CONFIG = '[tool.tlint]\nextend-select = ["TL002"]\n'
DISABLE = "tlint: Disable "


class Client:
    """A minimal LSP client: requests wait for their response, notifications are kept."""

    def __init__(self, cwd: Path) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen([sys.executable, "-m", "tlint", "lsp"], cwd=cwd, env=tlint_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.inbox: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                headers = {}
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    if not line.strip():
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = stream.read(int(headers["content-length"]))
                self.inbox.put(json.loads(body.decode("utf-8")))
        finally:
            self.inbox.put(None)

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict:
        try:
            message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no answer from the server in time; stderr:\n{self.errors()}") from None
        if message is None:
            raise AssertionError(f"the server closed its output; stderr:\n{self.errors()}")
        return message

    def request(self, method: str, params) -> object:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._next(deadline)
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message
                return message["result"]
            if "id" in message and "method" in message:  # a request from the server
                self.send({"id": message["id"], "result": None})
            else:
                self.notifications.append(message)

    def notify(self, method: str, params) -> None:
        self.send({"method": method, "params": params})

    def published(self, uri: str, version: int | None = None, after: int = 0) -> tuple[int, dict]:
        """The first publishDiagnostics for `uri` (of `version`, if given) among the
        notifications from index `after` on: (its index, its params)."""
        deadline = time.monotonic() + TIMEOUT
        index = after
        while True:
            while index < len(self.notifications):
                message = self.notifications[index]
                params = message.get("params") or {}
                if (message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri
                        and (version is None or params.get("version") == version)):
                    return index, params
                index += 1
            message = self._next(deadline)
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})
            else:
                self.notifications.append(message)

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        self.stderr.close()


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "proj", {"pyproject.toml": CONFIG})


def start(client: Client, root: Path, capabilities: dict | None = None) -> dict:
    result = client.request("initialize", {"processId": None, "rootUri": root.as_uri(),
                                           "capabilities": capabilities or {}})
    client.notify("initialized", {})
    return result


def stop(client: Client) -> None:
    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=TIMEOUT) == 0


def open_document(client: Client, uri: str, text: str, version: int = 1) -> None:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                           "version": version, "text": text}})


def change(client: Client, uri: str, text: str, version: int) -> None:
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"text": text}]})


def code_actions(client: Client, uri: str, start: tuple[int, int], end: tuple[int, int],
                 only: list[str] | None = None) -> list[dict]:
    context: dict = {"diagnostics": []}
    if only is not None:
        context["only"] = only
    def position(at: tuple[int, int]) -> dict:
        return {"line": at[0], "character": at[1]}

    return client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": position(start), "end": position(end)},
        "context": context}) or []


def text_edits(action: dict, uri: str) -> list[dict]:
    edit = action["edit"]
    if edit.get("documentChanges"):
        (change,) = edit["documentChanges"]
        assert change["textDocument"]["uri"] == uri
        return change["edits"]
    return edit["changes"][uri]


def apply_edits(text: str, edits: list[dict], encoding: str = "utf-16") -> str:
    """`text` with LSP edits applied, their characters counted in `encoding` units."""
    lines = text.splitlines(keepends=True) + [""]

    def offset(position: dict) -> int:
        line = lines[position["line"]]
        data = line.encode(encoding.replace("utf-16", "utf-16-le"))
        width = 2 if encoding == "utf-16" else 1
        head = data[: position["character"] * width].decode(encoding.replace("utf-16", "utf-16-le"))
        return sum(len(x) for x in lines[: position["line"]]) + len(head)

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits),
                   reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def test_diagnostics_code_actions_and_close(project):
    path = project / "pkg" / "train.py"  # never written: the server lints the editor's text
    uri = path.as_uri()
    client = Client(project)
    try:
        result = start(client, project)
        capabilities = result["capabilities"]
        assert set(capabilities["codeActionProvider"]["codeActionKinds"]) == {"quickfix", "source.fixAll.tlint"}
        assert capabilities.get("positionEncoding", "utf-16") == "utf-16"

        # didOpen: a finding after an emoji, its characters in UTF-16 units
        open_document(client, uri, SOFTMAX)
        _, params = client.published(uri, version=1)
        (diag,) = params["diagnostics"]
        assert diag["code"] == "TL209" and diag["severity"] == 1 and diag["source"] == "tlint"
        assert "TL209" in diag["codeDescription"]["href"]
        assert diag["range"] == {"start": {"line": SOFTMAX_LINE, "character": SOFTMAX_AT["utf-16"][0]},
                                 "end": {"line": SOFTMAX_LINE, "character": SOFTMAX_AT["utf-16"][1]}}
        actions = code_actions(client, uri, (SOFTMAX_LINE, 0), (SOFTMAX_LINE, 40))
        assert [a["title"] for a in actions if DISABLE in a["title"]] == [
            "tlint: Disable TL209 for this line", "tlint: Disable TL209 for this file"]
        actions = [a for a in actions if DISABLE not in a["title"]]
        if diag["data"]["fix"] is None:
            assert actions == []
        else:  # an unsafe fix: marked in its title, never part of "fix all"
            assert diag["data"]["fix"]["applicability"] == "unsafe"
            (quick,) = actions
            assert quick["kind"] == "quickfix" and quick["title"].endswith("(unsafe)")
            assert apply_edits(SOFTMAX, text_edits(quick, uri)) != SOFTMAX

        # didChange, twice in a row: debounced, only the latest text is linted and published
        seen = len(client.notifications)
        change(client, uri, "x = (\n", 2)
        change(client, uri, UNUSED, 3)
        index, params = client.published(uri, version=3, after=seen)
        assert not [n for n in client.notifications[seen:index]
                    if n.get("method") == "textDocument/publishDiagnostics"]
        (diag,) = params["diagnostics"]  # the project's config selects TL002
        assert diag["code"] == "TL002" and diag["severity"] == 3
        assert diag["range"]["start"] == {"line": 0, "character": 10}
        fix = diag["data"]["fix"]
        assert fix["applicability"] == "safe"
        assert apply_edits(UNUSED, fix["edits"]) == UNUSED_FIXED

        # code actions: the finding's quick fix and the whole-document fix-all
        actions = code_actions(client, uri, (0, 12), (0, 12))
        by_kind = {action["kind"]: action for action in actions}
        assert sorted(by_kind) == ["quickfix", "source.fixAll.tlint"], actions
        quick = by_kind["quickfix"]
        assert quick["title"].startswith("tlint: ") and "unsafe" not in quick["title"]
        assert quick["diagnostics"][0]["code"] == "TL002"
        assert apply_edits(UNUSED, text_edits(quick, uri)) == UNUSED_FIXED
        fix_all = by_kind["source.fixAll.tlint"]
        assert fix_all["title"] == "Fix all safe tlint findings"
        (whole,) = text_edits(fix_all, uri)
        assert whole["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
        assert whole["newText"] == UNUSED_FIXED
        # `only` filters by kind (a parent kind matches); a range elsewhere has no quick fix
        (only,) = code_actions(client, uri, (0, 0), (0, 0), only=["source.fixAll"])
        assert only["kind"] == "source.fixAll.tlint"
        assert [a["kind"] for a in code_actions(client, uri, (1, 0), (1, 0))] == ["source.fixAll.tlint"]

        # didSave publishes again
        seen = len(client.notifications)
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        _, params = client.published(uri, after=seen)
        assert [d["code"] for d in params["diagnostics"]] == ["TL002"]

        # a code action right after a change answers for the new text, before the debounced lint
        change(client, uri, SOFTMAX + UNUSED, 4)
        (quick,) = [a for a in code_actions(client, uri, (5, 0), (5, 30)) if a["kind"] == "quickfix"]
        assert apply_edits(SOFTMAX + UNUSED, text_edits(quick, uri)) == SOFTMAX + UNUSED_FIXED

        # a file that does not parse: TL001, and the server keeps serving
        broken = (project / "broken.py").as_uri()
        open_document(client, broken, 'x = "😀" +\n')
        _, params = client.published(broken, version=1)
        (diag,) = params["diagnostics"]
        assert diag["code"] == "TL001" and diag["range"]["start"] == {"line": 0, "character": 10}

        # didClose clears the file's diagnostics
        seen = len(client.notifications)
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        _, params = client.published(uri, after=seen)
        assert params["diagnostics"] == []
        stop(client)
        assert "Traceback" not in client.errors()
    finally:
        client.close()


def test_disable_for_this_line_and_file_write_what_add_suppressions_writes(project):
    """The quick fixes that suppress a finding: the edit "for this line" gives the text
    `tlint check --add-suppressions` writes for the same finding, "for this file" a
    `# tlint: ignore-file[CODE]` line (merged into one that is there); after either, the
    server shows no finding. TL002 (an engine code) offers neither."""
    disk = project / "on_disk.py"
    disk.write_text(SOFTMAX, encoding="utf-8")
    assert run_tlint("check", "--add-suppressions", "on_disk.py", cwd=project).returncode == 0
    expected_line = disk.read_text(encoding="utf-8")
    assert expected_line != SOFTMAX and "# tlint: ignore[TL209]" in expected_line
    uri = (project / "edited.py").as_uri()
    client = Client(project)
    try:
        start(client, project, {"workspace": {"workspaceEdit": {"documentChanges": True}}})
        open_document(client, uri, SOFTMAX, version=1)
        _, params = client.published(uri, version=1)
        assert [d["code"] for d in params["diagnostics"]] == ["TL209"]
        actions = {a["title"]: a for a in code_actions(client, uri, (SOFTMAX_LINE, 22), (SOFTMAX_LINE, 22))
                   if DISABLE in a["title"]}
        assert sorted(actions) == ["tlint: Disable TL209 for this file", "tlint: Disable TL209 for this line"]
        line = actions["tlint: Disable TL209 for this line"]
        assert line["kind"] == "quickfix" and line["diagnostics"][0]["code"] == "TL209"
        (document_change,) = line["edit"]["documentChanges"]
        assert document_change["textDocument"] == {"uri": uri, "version": 1}
        (edit,) = document_change["edits"]  # one small edit at the end of the line, after the emoji
        assert edit["range"]["start"]["line"] == SOFTMAX_LINE and edit["newText"] == "  # tlint: ignore[TL209]"
        assert apply_edits(SOFTMAX, [edit]) == expected_line
        whole_file = apply_edits(SOFTMAX, text_edits(actions["tlint: Disable TL209 for this file"], uri))
        assert whole_file == "# tlint: ignore-file[TL209]\n" + SOFTMAX

        # each applied: nothing is shown any more
        for version, text in ((2, expected_line), (3, whole_file)):
            seen = len(client.notifications)
            change(client, uri, text, version)
            _, params = client.published(uri, version=version, after=seen)
            assert params["diagnostics"] == []
            assert [a for a in code_actions(client, uri, (0, 0), (SOFTMAX_LINE + 1, 0)) if DISABLE in a["title"]] == []

        # a file-level comment that is there takes the code; an engine code offers no disable
        merged = "# tlint: ignore-file[TL101]\n" + SOFTMAX + UNUSED
        change(client, uri, merged, 4)
        actions = code_actions(client, uri, (0, 0), (SOFTMAX_LINE + 2, 0))
        titles = [a["title"] for a in actions if DISABLE in a["title"]]
        assert titles == ["tlint: Disable TL209 for this line", "tlint: Disable TL209 for this file"]
        file_action = next(a for a in actions if a["title"].endswith("for this file"))
        assert apply_edits(merged, text_edits(file_action, uri)).startswith("# tlint: ignore-file[TL101, TL209]\n")
        stop(client)
    finally:
        client.close()


def test_negotiated_utf8_positions_and_versioned_edits(project):
    uri = (project / "model.py").as_uri()
    client = Client(project)
    try:
        result = start(client, project, {"general": {"positionEncodings": ["utf-8", "utf-16"]},
                                         "workspace": {"workspaceEdit": {"documentChanges": True}}})
        assert result["capabilities"]["positionEncoding"] == "utf-8"
        open_document(client, uri, SOFTMAX + UNUSED, version=7)
        _, params = client.published(uri, version=7)
        starts = {d["code"]: d["range"]["start"] for d in params["diagnostics"]}
        assert starts == {"TL209": {"line": SOFTMAX_LINE, "character": SOFTMAX_AT["utf-8"][0]},
                          "TL002": {"line": SOFTMAX_LINE + 1, "character": 12}}
        (quick,) = [a for a in code_actions(client, uri, (5, 0), (5, 30)) if a["kind"] == "quickfix"]
        (document_change,) = quick["edit"]["documentChanges"]
        assert document_change["textDocument"] == {"uri": uri, "version": 7}
        assert apply_edits(SOFTMAX + UNUSED, document_change["edits"], "utf-8") == SOFTMAX + UNUSED_FIXED
        stop(client)
    finally:
        client.close()


def test_config_error_is_reported_not_raised(tmp_path):
    from tlint.lsp_server import lint_text

    root = make_project(tmp_path, {"pyproject.toml": '[tool.tlint]\nselect = ["TL999"]\n'})
    linted = lint_text(root / "a.py", SOFTMAX, "utf-16")
    assert linted.diagnostics == [] and "TL999" in linted.error


def test_lsp_without_pygls_exits_2(tmp_path):
    code = "import sys; sys.modules['pygls'] = None; from tlint.cli import main; sys.exit(main(['lsp']))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=tlint_env(), capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 2
    assert "pip install 'tlint-pytorch[lsp]'" in proc.stderr


def test_lsp_rejects_unknown_arguments(tmp_path):
    proc = run_tlint("lsp", "--model", "pkg.mod:factory", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unrecognized arguments" in proc.stderr
