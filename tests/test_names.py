"""Name resolution through imports and aliases, and re-export folding."""

import libcst as cst
import pytest

from tlint.names import canonical
from tlint.source import FileIndex


@pytest.mark.parametrize(("name", "expected"), [
    ("torch.nn.modules.linear.Linear", "torch.nn.Linear"),
    ("torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_"),
    ("torch.optim.adamw.AdamW", "torch.optim.AdamW"),
    ("torch.optim.lr_scheduler.LambdaLR", "torch.optim.lr_scheduler.LambdaLR"),
    ("pytorch_lightning.Trainer", "lightning.pytorch.Trainer"),
    ("lightning.Trainer", "lightning.pytorch.Trainer"),
    ("lightning.pytorch.trainer.trainer.Trainer", "lightning.pytorch.Trainer"),
    ("transformers.models.bert.modeling_bert.BertModel", "transformers.BertModel"),
    ("transformers.AutoTokenizer.from_pretrained", "transformers.AutoTokenizer.from_pretrained"),
    ("transformers.models.auto.AutoModel.from_pretrained", "transformers.AutoModel.from_pretrained"),
    ("transformers.optimization.get_scheduler", "transformers.get_scheduler"),
    ("accelerate.accelerator.Accelerator", "accelerate.Accelerator"),
])
def test_canonical(name, expected):
    assert canonical(name) == expected


@pytest.mark.parametrize(("source", "expr", "expected"), [
    ("import torch.nn as nn", "nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_"),
    ("from torch import nn", "nn.LayerNorm", "torch.nn.LayerNorm"),
    ("from torch.nn.utils import clip_grad_norm_ as clip", "clip", "torch.nn.utils.clip_grad_norm_"),
    ("import torch as th", "th.optim.AdamW", "torch.optim.AdamW"),
    ("import torch\nclip = torch.nn.utils.clip_grad_norm_", "clip", "torch.nn.utils.clip_grad_norm_"),
    ("from transformers import AutoTokenizer as Tok", "Tok.from_pretrained", "transformers.AutoTokenizer.from_pretrained"),
    ("import torch", "model.forward", None),
])
def test_qualify_through_imports_and_aliases(source, expr, expected):
    index = FileIndex(cst.parse_module(source + "\n"))
    assert index.qualify(cst.parse_expression(expr)) == expected
