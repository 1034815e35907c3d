"""TL206 positional-table-too-short: literal table sizes against literal data lengths of the
files one entry point loads together; defaults only when they run; precision guards."""

from __future__ import annotations

import pytest

from tests.lintutil import found, lint_paths, write_tree
from tests.rules.conftest import _source, expected, lint

CODE = "TL206"

CONFIG = """
from transformers import GPT2Config


def model_config(vocab_size):
    return GPT2Config(vocab_size=vocab_size, n_positions={size}, n_layer=4, n_head=4)
"""
TRAIN = """
from transformers import AutoTokenizer

from config import model_config

tokenizer = AutoTokenizer.from_pretrained("gpt2")
config = model_config(len(tokenizer))


def tokenize(batch):
    return tokenizer(batch["text"], truncation=True, max_length={length})
"""


def _project(size, length):
    return {"config.py": CONFIG.format(size=size), "train.py": TRAIN.format(length=length)}


def test_config_table_shorter_than_tokenizer_length_is_reported_at_the_literal(tmp_path):
    assert lint(tmp_path, _project(64, 128), [CODE]) == [("config.py", 5, CODE)]
    result = lint_paths([tmp_path], select=[CODE])
    message = result.diagnostics[0].message
    assert "64 positions" in message and "128" in message and "train.py:10" in message


@pytest.mark.parametrize(("size", "length"), [(128, 128), (1024, 128)])
def test_a_table_as_long_or_longer_than_the_data_is_fine(tmp_path, size, length):
    assert lint(tmp_path, _project(size, length), [CODE]) == []


def test_a_file_linted_alone_gives_the_findings_of_the_whole_project(tmp_path):
    write_tree(tmp_path, {name: _source(text) for name, text in _project(64, 512).items()})
    assert found(lint_paths([tmp_path / "config.py"], select=[CODE]).diagnostics, tmp_path) == {("config.py", 5, CODE)}
    assert found(lint_paths([tmp_path / "train.py"], select=[CODE]).diagnostics, tmp_path) == set()


def test_modules_loaded_by_one_script_are_compared(tmp_path):
    files = {
        "model.py": """
            from torch import nn


            class Encoder(nn.Module):
                def __init__(self, vocab_size, d_model):
                    super().__init__()
                    self.pos_emb = nn.Embedding(128, d_model)  # expect: TL206
        """,
        "data.py": """
            def encode(tokenizer, texts):
                return tokenizer(texts, padding="max_length", truncation=True, max_length=256)
        """,
        "train.py": "from model import Encoder\nfrom data import encode\n",
    }
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_independent_scripts_of_one_folder_are_not_compared(tmp_path):
    files = {
        "classifier.py": """
            from torch import nn


            class Classifier(nn.Module):
                def __init__(self, d_model):
                    super().__init__()
                    self.pos_emb = nn.Embedding(64, d_model)
        """,
        "finetune.py": TRAIN.replace("from config import model_config\n", "").replace(
            "config = model_config(len(tokenizer))\n", "").format(length=512),
    }
    assert lint(tmp_path, files, [CODE]) == []


def test_same_variable_in_one_script_is_not_compared(tmp_path):
    files = {"train.py": """
        import numpy as np
        import torch

        from model import GPT, GPTConfig

        block_size = 256
        data = np.memmap("train.bin", dtype=np.uint16, mode="r")
        model = GPT(GPTConfig(block_size=block_size, n_layer=6, n_head=6, vocab_size=50304))
        ix = torch.randint(len(data) - block_size, (8,))
        x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i:i + block_size + 1].astype(np.int64)) for i in ix])
    """}
    assert lint(tmp_path, files, [CODE]) == []
    files["train.py"] = files["train.py"].replace("GPTConfig(block_size=block_size", "GPTConfig(block_size=128")
    assert lint(tmp_path, files, [CODE]) == [("train.py", 8, CODE)]


POSITIONAL = """
import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=100):
        super().__init__()
        self.register_buffer("pe", torch.zeros(max_len, d_model))
"""
DATA = """
def encode(tokenizer, texts):
    return tokenizer(texts, truncation=True, max_length=512)
"""


@pytest.mark.parametrize(("build", "reported"), [
    ("PositionalEncoding(256)", True),
    ("PositionalEncoding(256, 1024)", False),
    ("PositionalEncoding(256, max_len=1024)", False),
    ("PositionalEncoding(**kwargs)", False),
    ("None", False),  # never built here: the default is not known to run
])
def test_a_parameter_default_counts_only_when_no_call_overrides_it(tmp_path, build, reported):
    files = {"positional.py": POSITIONAL, "data.py": DATA,
             "train.py": f"from positional import PositionalEncoding\nfrom data import encode\nkwargs = {{}}\npos = {build}\n"}
    assert lint(tmp_path, files, [CODE]) == ([("positional.py", 6, CODE)] if reported else [])


@pytest.mark.parametrize(("build", "reported"), [
    ("GPTConfig()", True),
    ("GPTConfig(**model_args)", False),
    ("GPTConfig(block_size=1024)", False),
])
def test_a_config_field_default_counts_only_when_it_runs(tmp_path, build, reported):
    files = {
        "model.py": """
            from dataclasses import dataclass


            @dataclass
            class GPTConfig:
                block_size: int = 256
                vocab_size: int = 50304
                n_layer: int = 12
        """,
        "train.py": f"""
            from model import GPTConfig

            model_args = dict(n_layer=6)
            config = {build}


            def tokenize(tokenizer, texts):
                return tokenizer(texts, truncation=True, max_length=512)
        """,
    }
    assert lint(tmp_path, files, [CODE]) == ([("model.py", 6, CODE)] if reported else [])
    files["train.py"] += "\nconfig.block_size = 1024\n"
    assert lint(tmp_path / "set-later", files, [CODE]) == []


def test_option_defaults_give_the_data_length(tmp_path):
    files = {"train.py": """
        import argparse

        from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

        parser = argparse.ArgumentParser()
        parser.add_argument("--max_seq_length", type=int, default=512)
        args = parser.parse_args()
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        model = BertForMaskedLM(BertConfig(max_position_embeddings=256))  # expect: TL206
        enc = tokenizer(["a b c"], truncation=True, max_length=args.max_seq_length)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize("code", [
    # generation length is not the data
    'small = GPT2Config(n_positions=256)\nout = model.generate(ids, max_length=512)',
    # adapter / block-sparse settings named block_size are not positional tables
    'cfg = C3AConfig(block_size=64)\nbatch = tokenizer(texts, truncation=True, max_length=512)',
    # a bank of distance buckets in a positional class is not a table of positions
    'batch = tokenizer(texts, truncation=True, max_length=512)',
])
def test_not_tables_or_not_data(tmp_path, code):
    files = {"train.py": """
        import torch
        from torch import nn
        from transformers import GPT2Config, C3AConfig


        class RelativePositionBias(nn.Module):
            def __init__(self, num_buckets=32, dim=64):
                super().__init__()
                self.buckets = nn.Parameter(torch.zeros(num_buckets, dim))


        bias = RelativePositionBias()
        config = GPT2Config(n_positions=1024)
        model, tokenizer, ids, texts = None, None, None, []
    """ + "\n" + code + "\n"}
    assert lint(tmp_path, files, [CODE]) == []


def test_test_files_are_not_compared(tmp_path):
    files = {"config.py": CONFIG.format(size=64),
             "tests/test_train.py": TRAIN.format(length=512)}
    assert lint(tmp_path, files, [CODE]) == []


def test_sizes_computed_or_imported_are_not_compared(tmp_path):
    files = {
        "config.py": "MAX_LEN = 128\n",
        "model.py": """
            from torch import nn

            from config import MAX_LEN


            class Model(nn.Module):
                def __init__(self, d_model):
                    super().__init__()
                    self.pos_emb = nn.Embedding(MAX_LEN, d_model)
                    self.wpe = nn.Embedding(2 * 64, d_model)
        """,
        "train.py": "from model import Model\n" + DATA,
    }
    assert lint(tmp_path, files, [CODE]) == []


def test_shared_vectors_and_coordinate_projections_are_not_tables(tmp_path):
    # a (1, d) / (1, 1, d) positional parameter is one vector broadcast over every position,
    # and a (2, d) matrix multiplied by 2-D point coordinates (random Fourier features) is a
    # projection: neither has one row per position. A real (1, N, d) table is still compared.
    files = {"train.py": """
        import torch
        from torch import nn


        class PointEmbedding(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.positional_embedding = nn.Parameter(torch.randn((2, d // 2)))
                self.no_memory_pos_enc = nn.Parameter(torch.zeros(1, 1, d))
                self.class_pos_emb = nn.Parameter(torch.randn(1, d))

            def forward(self, coords):
                projected = 2 * torch.pi * (coords @ self.positional_embedding)
                return torch.cat([projected.sin(), projected.cos()], dim=-1) + self.class_pos_emb


        class Tokens(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.pos_emb = nn.Parameter(torch.zeros(1, 64, d))  # expect: TL206


        tokenizer = None
        batch = tokenizer(["a b"], truncation=True, max_length=128)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
