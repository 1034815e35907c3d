"""Tiny models and loaders for the watch's tests (real training on CPU, seconds each): a
GPT-2 built from a config (no hub download) and a hand-written transformer whose attention
fills masked scores with -inf (a row with no visible key turns NaN)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.torchutil import import_torch

torch = import_torch()


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny models run faster, and CPU time stays steady on a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
nn = torch.nn

V, S, D = 100, 16, 32   # vocabulary, sequence length, width
PAD = 0


def gpt2(seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=V, n_positions=S, n_embd=D, n_layer=2, n_head=2, pad_token_id=PAD,
                        bos_token_id=1, eos_token_id=1, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def rows(n: int, seed: int = 0, lengths: tuple[int, ...] = (S,), left: bool = False) -> list[dict]:
    """Learnable sequences (arithmetic progressions mod V), padded with PAD to S: the
    length of row i is lengths[i % len(lengths)]; labels ignore the pads."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        start = int(torch.randint(1, V, (1,), generator=gen))
        inc = int(torch.randint(1, 4, (1,), generator=gen))
        ids = torch.tensor([(start + k * inc) % (V - 1) + 1 for k in range(S)])
        length = lengths[i % len(lengths)]
        real = torch.arange(S) >= S - length if left else torch.arange(S) < length
        ids = ids.masked_fill(~real, PAD)
        out.append({"input_ids": ids, "attention_mask": real.long(), "labels": ids.masked_fill(~real, -100)})
    return out


def batches(n_steps: int, batch: int = 8, **kw) -> list[dict]:
    data = rows(n_steps * batch, **kw)
    return [{k: torch.stack([r[k] for r in data[i:i + batch]]) for k in data[0]} for i in range(0, len(data), batch)]


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        allowed = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril() & mask[:, None, :].bool()
        scores = scores.masked_fill(~allowed, float("-inf"))  # a row with no visible key: NaN
        return self.out(scores.softmax(dim=-1) @ v)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(D), Attention(), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Returns the loss; labels are the ids themselves (pads included, as a careless loader does)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed, self.pos = nn.Embedding(V, D), nn.Embedding(S, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, input_ids, attention_mask):
        x = self.embed(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        for block in self.blocks:
            x = block(x, attention_mask)
        logits = self.head(self.norm(x))
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1))


def events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(folder) / "tlint-watch.jsonl").read_text().splitlines()]


def validate(folder: Path) -> list[dict]:
    """The event file, each line checked against the published schema."""
    import jsonschema

    from tlint.watch import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    found = events(folder)
    for event in found:
        validator.validate(event)
    return found
