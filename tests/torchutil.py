"""torch for the tests that need it: skipped where torch is not installed, unless
`TLINT_REQUIRE_TORCH=1` (set by the README's test command and `.ci/run`), where a missing
torch fails the module instead of skipping it silently."""

from __future__ import annotations

import os

import pytest

REQUIRE_TORCH_ENV = "TLINT_REQUIRE_TORCH"


def torch_required() -> bool:
    return os.environ.get(REQUIRE_TORCH_ENV, "") not in ("", "0")


def import_torch():
    """The torch module, or a skip (a failure under TLINT_REQUIRE_TORCH=1)."""
    if not torch_required():
        return pytest.importorskip("torch", reason=f"torch is not installed ({REQUIRE_TORCH_ENV}=1 fails instead)")
    try:
        import torch
    except ImportError as exc:
        pytest.fail(f"{REQUIRE_TORCH_ENV}=1 but torch cannot be imported ({exc}): "
                    "pip install torch==2.13.0 (the README's test command does)", pytrace=False)
    return torch
