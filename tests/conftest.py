"""Shared test set-up: no test reads or writes tlint's cache unless it asks to (a result
cached by one test, e.g. on fixtures/, must not hide a rule another test patches)."""

import os
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
