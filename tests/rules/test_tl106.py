"""TL106 pad-labels-not-ignored: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected
from tests.rules.conftest import lint as lint_project

CODE = "TL106"

COLLATE = """
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("gpt2")


def collate(batch):
    enc = tokenizer(batch, padding=True, truncation=True, return_tensors="pt")
    {line}
    return enc
"""


def lint(tmp_path, files):
    return set(lint_project(tmp_path, files, [CODE]))


@pytest.mark.parametrize("line", [
    'enc["labels"] = enc["input_ids"]',
    'enc["labels"] = enc.input_ids.clone().detach()',
    'enc["labels"] = list(enc["input_ids"])',
    'enc["labels"] = enc["input_ids"][:, 1:]',
    'labels = enc["input_ids"].copy()',
    'target_ids = enc["input_ids"].to("cuda")',
])
def test_copies_of_padded_ids_are_flagged(tmp_path, line):
    assert lint(tmp_path, {"m.py": COLLATE.format(line=line)}) == {("m.py", 8, CODE)}


@pytest.mark.parametrize("line", [
    'enc["attention_mask"] = enc["input_ids"] != 0',
    'enc["labels"] = enc["label"]',
    'label_mask = enc["input_ids"].clone()',
    'enc["labels"] = [IGNORE_INDEX if t == tokenizer.pad_token_id else t for t in enc["input_ids"]]',
])
def test_other_assignments_and_masked_labels_are_clean(tmp_path, line):
    assert lint(tmp_path, {"m.py": COLLATE.format(line=line)}) == set()


def test_explicit_ignore_index_of_minus_100_is_not_masking(tmp_path):
    src = COLLATE.format(line='enc["labels"] = enc["input_ids"].clone()') + (
        "\n\nimport torch.nn as nn\nloss_fn = nn.CrossEntropyLoss(ignore_index=-100)\n")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 8, CODE)}


def test_masking_in_an_imported_module_counts_but_not_in_an_unrelated_one(tmp_path):
    masking = """
        def mask_pad(labels, pad_id):
            labels[labels == pad_id] = -100
            return labels
    """
    step = """
        {imp}
        from torch.nn.utils.rnn import pad_sequence


        def step(model, samples):
            input_ids = pad_sequence(samples, batch_first=True)
            return model(input_ids=input_ids, labels=input_ids).loss
    """
    imported = lint(tmp_path / "a", {"lib/masking.py": masking,
                                     "train.py": step.format(imp="from lib.masking import mask_pad")})
    assert imported == set()
    unrelated = lint(tmp_path / "b", {"lib/masking.py": masking, "train.py": step.format(imp="import os")})
    assert unrelated == {("train.py", 7, CODE)}


def test_a_project_that_never_pads_is_clean(tmp_path):
    src = """
        def step(model, batch):
            labels = batch["input_ids"].clone()
            return model(input_ids=batch["input_ids"], labels=labels).loss
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_logits_only_calls_are_clean(tmp_path):
    src = COLLATE.format(line="pass") + (
        "\n\ndef logits(model, enc):\n    return model(**enc, labels=enc[\"input_ids\"]).logits\n")
    assert lint(tmp_path, {"m.py": src}) == set()


def test_labels_under_a_dict_key_and_ids_under_any_name(tmp_path):
    """`{"labels": [seq.tolist() for seq in new_input_ids]}` copies padded ids as labels
    (the name ends in `input_ids`); masking the pad positions first is clean."""
    src = """
        import torch


        def pack(samples, pad_token_id, max_tokens):
            new_input_ids = []
            for ids in samples:
                ids = torch.tensor(ids)
                pad = torch.full((max_tokens - ids.numel(),), pad_token_id, dtype=torch.long)
                new_input_ids.append(torch.cat((ids, pad)))
            return {
                "input_ids": [seq.tolist() for seq in new_input_ids],
                "labels": [seq.tolist() for seq in new_input_ids],
            }
    """
    assert lint(tmp_path / "a", {"m.py": src}) == {("m.py", 12, CODE)}
    masked = src.replace(
        '"labels": [seq.tolist() for seq in new_input_ids]',
        '"labels": [[t if t != pad_token_id else -100 for t in seq.tolist()] for seq in new_input_ids]')
    assert lint(tmp_path / "b", {"m.py": masked}) == set()


FOLLOWED = """
import torch
import torch.nn as nn
from transformers import DataCollatorWithPadding

IGNORE_INDEX = -100


def other_labels(labels):
    labels[labels == 0] = IGNORE_INDEX  # masking evidence of the project, for other labels
    return labels


def forward(model, features, tokenizer):
    batch = DataCollatorWithPadding(tokenizer)(features)
    logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    labels = batch["input_ids"].clone()
    {line}
    return loss(logits, labels)


def loss(logits, labels):
    {loss}
"""


@pytest.mark.parametrize(("line", "loss", "reported"), [
    ("pass", "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1))", True),
    ("pass", "fn = nn.CrossEntropyLoss()\n    return fn(logits.view(-1, 5), labels.view(-1))", True),
    ("pass", "fn = nn.CrossEntropyLoss(ignore_index=-100)\n    return fn(logits.view(-1, 5), labels[:, 1:])", True),
    ("labels[labels == tokenizer.pad_token_id] = -100",
     "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1))", False),
    ("labels = labels.masked_fill(batch['attention_mask'] == 0, -100)",
     "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1))", False),
    ("labels.masked_fill_(batch['attention_mask'] == 0, -100)",
     "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1))", False),
    ("pass", "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1), ignore_index=0)", False),
    ("pass", "return torch.where(labels == 0, 0.0, logits.sum())", False),  # no loss reached: project masking
    ("labels = batch['labels']", "return nn.functional.cross_entropy(logits.view(-1, 5), labels.view(-1))", False),
])
def test_labels_followed_to_their_loss_ignore_masking_of_other_labels(tmp_path, line, loss, reported):
    src = FOLLOWED.replace("{line}", line).replace("{loss}", loss)
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", 16, CODE)} if reported else set())


# --- ids known by use (issue 21: aria, open_clip, DALLE-pytorch) -----------------------------

EMBEDDER = """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Model(nn.Module):
        def __init__(self, vocab, dim):
            super().__init__()
            self.text_emb = nn.Embedding(vocab, dim)
            self.pos_emb = nn.Embedding(512, dim)
            self.head = nn.Linear(dim, vocab)

        def encode(self, seq):
            return self.text_emb(seq.long())

        def forward(self, text, seq, positions, other):
            text = F.pad(text, (1, 0), value=0)
            h = self.text_emb(text) + self.pos_emb(positions)
            labels = torch.cat((text[:, 1:], other), dim=1)  # expect: TL106
            targets = seq[:, 1:]  # expect: TL106
            enc = self.encode(seq)
            target_positions = positions.clone()
            labels_other = other.clone()
            logits = self.head(h + enc)
            return F.cross_entropy(logits.transpose(1, 2), labels), targets, target_positions, labels_other
"""


def test_ids_known_by_the_embedding_they_feed(tmp_path):
    """Ids under any name: fed to a token embedding in the function, or through a method of
    the file; not positions fed to a positional table, not other tensors. `F.pad` on such
    ids is padding."""
    files = {"model.py": EMBEDDER}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_ids_known_by_use_need_padding_in_the_program(tmp_path):
    """Without `F.pad` in the forward, the padding must come from a file loaded together with
    the model (the training script's tokenizer module), not from an unrelated script."""
    model = EMBEDDER.replace("            text = F.pad(text, (1, 0), value=0)\n", "")
    tokenize = """
        def tokenize(tokenizer, texts):
            return tokenizer(texts, padding="max_length", max_length=64, return_tensors="pt").input_ids
    """
    train = """
        from model import Model
        from tokenize_text import tokenize
    """
    alone = lint(tmp_path / "alone", {"model.py": model, "other/tokenize_text.py": tokenize})
    assert alone == set()
    together = lint(tmp_path / "together", {"model.py": model, "tokenize_text.py": tokenize, "train.py": train})
    assert together == {("model.py", 18, CODE), ("model.py", 19, CODE)}  # a line up: no `F.pad`


@pytest.mark.parametrize(("default", "reported"), [("-100", True), ("0", False)])
def test_an_ignore_index_parameter_counts_by_its_default(tmp_path, default, reported):
    """`nn.CrossEntropyLoss(ignore_index=pad_id)` with `pad_id=-100` by default (nothing in
    its file passes another) ignores nothing: the labels keep their pads."""
    files = {
        "loss.py": f"""
            from torch import nn


            class CaptionLoss(nn.Module):
                def __init__(self, weight=1.0, pad_id={default}):
                    super().__init__()
                    self.loss = nn.CrossEntropyLoss(ignore_index=pad_id)

                def forward(self, logits, labels):
                    return self.loss(logits.permute(0, 2, 1), labels)
        """,
        "model.py": """
            from torch import nn
            from torch.nn.utils.rnn import pad_sequence


            def collate(rows):
                return pad_sequence(rows, batch_first=True)


            class Captioner(nn.Module):
                def __init__(self, vocab, width):
                    super().__init__()
                    self.token_embedding = nn.Embedding(vocab, width)

                def forward(self, text):
                    labels = text[:, 1:]
                    return self.token_embedding(text[:, :-1]), labels
        """,
        "train.py": """
            from loss import CaptionLoss
            from model import Captioner
        """,
    }
    assert lint(tmp_path, files) == ({("model.py", 15, CODE)} if reported else set())


GATHER = """
import torch.nn.functional as F
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("gpt2")


def scores(model, texts):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    input_ids = enc["input_ids"]
    logits = model(input_ids=input_ids, attention_mask=enc["attention_mask"]).logits[:, :-1]
    targets = input_ids[:, 1:]{mark}
    logp = F.log_softmax(logits, dim=-1)
    per_token = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    {extra}
    return per_token
"""


@pytest.mark.parametrize(("extra", "flagged"), [
    ("pass", False),  # only a gather index: per-token log-probabilities
    ("print(F.cross_entropy(logits.transpose(1, 2), targets))", True),  # also the labels of a loss
])
def test_targets_used_only_as_gather_indices(tmp_path, extra, flagged):
    files = {"m.py": GATHER.format(mark="  # expect: TL106" if flagged else "", extra=extra)}
    assert lint(tmp_path, files) == set(expected(files, CODE))
