"""TL112 nonfinite-padding-value: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import lint as lint_project

CODE = "TL112"

HEADER = """
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence as pad_seq
"""


def lint(tmp_path, line):
    return set(lint_project(tmp_path, {"m.py": HEADER + line + "\n"}, [CODE]))


@pytest.mark.parametrize("line", [
    'x = pad_seq(seqs, True, float("nan"))',
    "x = pad_seq(seqs, batch_first=True, padding_value=np.nan)",
    "x = pad_seq(seqs, batch_first=True, padding_value=-torch.inf)",
    "x = F.pad(inputs, (0, 3), value=-math.inf)",
    'x = F.pad(inputs, (0, 3), "constant", float("inf"))',
    "padded = torch.full((4, 10), torch.nan)",
    "batch = torch.full_like(example, np.inf)",
    'inputs = example.new_full((4, 10), float("nan"))',
])
def test_nonfinite_input_padding_is_flagged(tmp_path, line):
    assert lint(tmp_path, line) == {("m.py", 7, CODE)}


@pytest.mark.parametrize("line", [
    "x = pad_seq(seqs, batch_first=True, padding_value=0.0)",
    "x = pad_seq(seqs, batch_first=True, padding_value=-1e9)",
    "x = F.pad(inputs, (0, 3), value=0)",
    'x = F.pad(attn_mask, (0, 3), value=float("-inf"))',
    'scores = F.pad(q @ k, (0, 3), value=float("-inf"))',
    'mask = torch.full((8, 8), float("-inf"))',
    'best = torch.full((8,), float("inf"))',
    'x = torch.full((8, 8), float("-inf")).triu(1)',
    "inputs = torch.full((8, 8), pad_value)",
])
def test_finite_or_score_padding_is_clean(tmp_path, line):
    assert lint(tmp_path, line) == set()


def test_a_triangular_mask_built_from_an_input_named_tensor_is_clean(tmp_path):
    line = 'x = torch.full((8, 8), float("-inf"))\ncausal = torch.triu(x, diagonal=1)'
    assert lint(tmp_path, line) == set()
