"""The language server keeps the project's facts between edits (issue 23): only the edited
text is analysed again on a keystroke, a file on disk only when its stat key changed; the
findings are those of a fresh lint. Measured by hand with bench/lsp_keystroke.py."""

from __future__ import annotations

import os
import time

from tests.cliutil import make_project
from tests.rules.test_tl101 import PADDING_COLLATOR, _src
from tlint import lsp_server, project_memory
from tlint.project_memory import ProjectMemory

TRAIN = _src("""
    from data.loading import make_loader


    def train(model, dataset, tokenizer):
        for batch in make_loader(dataset, tokenizer):
            loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
            loss.backward()
""")
NO_PADDING = "def make_loader(dataset, tokenizer):\n    return iter(dataset)\n"


def settle(root, *names):
    old = time.time() - 60
    for name in names:
        os.utime(root / name, (old, old))


def test_keystrokes_reuse_the_project_facts_and_see_changes_on_disk(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"data/loading.py": _src(PADDING_COLLATOR), "data/other.py": "import torch\n",
                                   "train.py": TRAIN})
    settle(root, "data/loading.py", "data/other.py")
    memory = ProjectMemory()
    monkeypatch.setattr(lsp_server, "_MEMORY", memory)
    monkeypatch.setattr(project_memory, "_SETTLE_NS", 0)  # (else: wait 2 s for the change times to settle)

    def codes(text):
        return [d.code for d in lsp_server.lint_text(root / "train.py", text, "utf-16").diagnostics]

    assert codes(TRAIN) == ["TL101"]
    first = memory.misses
    assert first >= 1 and memory.hits == 0
    assert codes(TRAIN + "# typing\n") == ["TL101"]  # a keystroke: nothing on disk analysed again
    assert memory.misses == first and memory.hits >= 1
    (root / "data" / "loading.py").write_text(NO_PADDING)  # the package changes on disk
    settle(root, "data/loading.py")
    assert codes(TRAIN + "# typing more\n") == []  # seen at once, as a fresh lint sees it
    assert memory.misses == first + 1


def test_a_file_written_just_now_is_not_remembered(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"data/loading.py": _src(PADDING_COLLATOR), "train.py": TRAIN})
    memory = ProjectMemory()
    monkeypatch.setattr(lsp_server, "_MEMORY", memory)
    for _ in range(2):  # loading.py is "racy" (written within the timestamp tick): analysed each time
        lsp_server.lint_text(root / "train.py", TRAIN, "utf-16")
    assert memory.hits == 0 and memory.facts == {}


def test_a_slow_document_holds_back_neither_the_server_nor_the_other_documents(monkeypatch):
    """Each document is linted off the thread that serves the others: while one lint is
    stuck (a file parsed in the guard's child for up to its time limit), another document's
    lint finishes; the same document's lints still run one after another."""
    import asyncio
    import threading
    from types import SimpleNamespace

    release = threading.Event()
    running: list[str] = []

    def lint_text(path, text, encoding):
        running.append(text)
        if text == "slow":
            assert release.wait(30)
        return lsp_server.Linted(text)

    documents = {"file:///p/slow.py": "slow", "file:///p/fast.py": "fast"}
    workspace = SimpleNamespace(text_documents=documents, position_encoding=None, root_path="/p",
                                get_text_document=lambda uri: SimpleNamespace(source=documents[uri]),
                                get_notebook_document=lambda **kwargs: None)
    monkeypatch.setattr(lsp_server, "lint_text", lint_text)
    monkeypatch.setattr(lsp_server.TlintServer, "workspace", property(lambda self: workspace))
    server = lsp_server.TlintServer()

    async def scenario():
        slow = asyncio.ensure_future(server.lint("file:///p/slow.py"))
        again = asyncio.ensure_future(server.lint("file:///p/slow.py"))
        fast = await asyncio.wait_for(server.lint("file:///p/fast.py"), 10)
        assert fast.text == "fast" and not slow.done() and not again.done()
        release.set()
        assert (await slow).text == "slow" and (await again) is server.linted["file:///p/slow.py"]

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        server.lint_pool.shutdown(wait=True)
    assert running == ["slow", "fast"]  # the second lint of the unchanged text reused the first
