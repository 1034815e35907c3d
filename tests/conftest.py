"""Shared test set-up: no test reads or writes tlint's cache unless it asks to (a result
cached by one test, e.g. on fixtures/, must not hide a rule another test patches)."""

import os
import re
import tempfile

import pytest

from tlint.cache import NO_CACHE_ENV

# The cache's signing key (tlint/signed.py) lives in the user cache folder: the tests use
# one of their own, never the user's (subprocesses inherit it).
_USER_CACHE = tempfile.TemporaryDirectory(prefix="tlint-tests-xdg-")
os.environ["XDG_CACHE_HOME"] = _USER_CACHE.name


@pytest.fixture(autouse=True)
def _no_tlint_cache(monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    monkeypatch.delenv("TLINT_OUTPUT_FORMAT", raising=False)  # the user's default format is not the tests


# --- the quick subset and the parallel suite (README "Tests") -------------------------------
#
# `pytest -m "not slow"` is the quick subset. A module whose every test is slow says so in
# one line, `pytestmark = pytest.mark.slow` (or a list starting with it), with the reason
# beside it. Under exactly that expression such a module holds no selected test, so it is
# not imported at all: its module-level imports (torch, transformers, lightning) would cost
# each xdist worker seconds of collection for nothing. Any other expression collects it.

_SLOW_MODULE = re.compile(r"^pytestmark = \[?pytest\.mark\.slow\b", re.MULTILINE)


def module_is_slow(text: str) -> bool:
    return _SLOW_MODULE.search(text) is not None


def _deselects_slow(config: pytest.Config) -> bool:
    return " ".join((config.option.markexpr or "").split()) == "not slow"


def pytest_ignore_collect(collection_path, config):
    if (collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and _deselects_slow(config)):
        try:
            text = collection_path.read_text(encoding="utf-8")
        except OSError:
            return None
        if module_is_slow(text):
            return True
    return None


@pytest.fixture(scope="session")
def hook_source(tmp_path_factory):
    """The tlint repository snapshot and pre-commit home every pre-commit test shares
    (tests/precommitutil.py): one hook environment built per run."""
    from tests.precommitutil import make_hook_source

    return make_hook_source(tmp_path_factory.mktemp("pre-commit"))
