"""TL313 anomaly-detection-left-on: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL313"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("call", "flagged"),
    [
        ("torch.autograd.set_detect_anomaly(mode=True)", True),
        ("torch.autograd.detect_anomaly(check_nan=True).__enter__()", True),
        ("torch.autograd.set_detect_anomaly(args.detect)", False),
        ("torch.autograd.set_detect_anomaly(DEBUG)", False),
        ("torch.autograd.set_detect_anomaly(True) if DEBUG else None", False),
    ],
)
def test_calls(tmp_path, call, flagged):
    marker = "  # expect: TL313" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch

        DEBUG = False
        {call}{marker}
    """})


def test_argparse_default_true(tmp_path):
    check(tmp_path, {"train.py": """
        import argparse

        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--detect-anomaly", type=bool, default=True)
        args = parser.parse_args()
        torch.autograd.set_detect_anomaly(args.detect_anomaly)  # expect: TL313
    """})
