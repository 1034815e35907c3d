"""Shared test set-up: no test reads or writes tlint's cache unless it asks to (a result
cached by one test, e.g. on fixtures/, must not hide a rule another test patches)."""

import pytest

from tlint.cache import NO_CACHE_ENV


@pytest.fixture(autouse=True)
def _no_tlint_cache(monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")
