"""TL315 weight-decay-on-norm-and-bias: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL315"


@pytest.mark.parametrize(
    ("call", "flagged"),
    [
        ("torch.optim.AdamW(list(model.parameters()), weight_decay=0.01)", True),
        ("torch.optim.AdamW(model.parameters())", False),
        ("torch.optim.Adam(model.parameters(), weight_decay=0.01)", False),
        ("torch.optim.AdamW(model.parameters(), weight_decay=wd)", True),
        ("torch.optim.AdamW(groups, weight_decay=0.1)", False),
    ],
)
def test_calls(tmp_path, call, flagged):
    marker = "  # expect: TL315" if flagged else ""
    files = {"opt.py": f"""
        import torch


        def make(model, groups, wd=0.05):
            return {call}{marker}
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_off_by_default(tmp_path):
    from tlint.rules import BY_CODE

    assert BY_CODE[CODE].default_enabled is False
