"""Variants of batch 1's models that the tests use (tests/test_verify_unseen.py): each a real
class from a tiny config, with one setting of its own."""

from __future__ import annotations

import torch
from batch1 import qwen2


def qwen2_small_embedding(num_hidden_layers=2, scale=0.01):
    """Qwen2 (pre-norm, RMSNorm) whose token embedding is drawn 100x smaller than its
    config's initializer_range gives: the stream entering block 0 is tiny."""
    model = qwen2(num_hidden_layers)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(scale)
    return model
