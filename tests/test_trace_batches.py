"""The batches a run feeds its model and its loss (tlint/runtime/batches.py and the data
invariants of tlint/runtime/invariants.py): a buggy script and its fixed twin for each, with
a tiny GPT-2 built from a config (the Hugging Face interface: input_ids, attention_mask,
labels, a loss computed inside the model) and with the loss written in the loop."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

from tests.torchutil import import_torch

import_torch()
pytest.importorskip("transformers")

from tests.traceutil import run_traced  # noqa: E402
from tlint.runtime.hooks import Tracer  # noqa: E402
from tlint.runtime.invariants import Invariants, Violation  # noqa: E402

HEAD = """
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=32, bos_token_id=1,
                    eos_token_id=2, pad_token_id=0)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


def batch(left=False):
    ids = torch.randint(3, 50, (4, 12))
    mask = torch.ones_like(ids)
    for row, length in enumerate([12, 10, 8, 6]):
        ids[row, length - 1] = 2  # each text ends with EOS
        ids[row, length:] = 0
        mask[row, length:] = 0
    if left:
        ids, mask = ids.flip(1), mask.flip(1)
    return ids, mask, ids.masked_fill(mask == 0, -100)
"""


def run(tmp_path: Path, body: str) -> tuple[list[Violation], Path]:
    script = tmp_path / "train.py"
    script.write_text(HEAD + "\nfor step in range(3):\n" + textwrap.indent(textwrap.dedent(body), "    ")
                      + "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n", encoding="utf-8")
    found, _ = traced(script)
    return found, script


def traced(script: Path) -> tuple[list[Violation], Tracer]:
    """Run the script in this process with the hooks installed: its violations, and the tracer."""
    found, tracer = run_traced(script)
    assert not tracer.counts.get("internal_errors"), tracer.counts
    return found, tracer


def line(script: Path, marker: str) -> int:
    return next(i for i, text in enumerate(script.read_text().splitlines(), 1) if marker in text)


# (code, severity or None for no finding, the loop body; the marked line is where it is reported)
TWINS = {
    "TL106": ("error", """
        ids, mask, labels = batch()
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss  # HERE
        """, """
        ids, mask, labels = batch()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss  # HERE
        """),
    "TL109": ("error", """
        ids, mask, labels = batch()
        shifted = torch.cat([labels[:, 1:], torch.full((4, 1), -100)], 1)
        loss = model(input_ids=ids, attention_mask=mask, labels=shifted).loss  # HERE
        """, """
        ids, mask, labels = batch()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss  # HERE
        """),
    "TL109-unshifted": ("warning", """
        ids, mask, labels = batch()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.cross_entropy(logits.reshape(-1, 50), labels.reshape(-1))  # HERE
        """, """
        ids, mask, labels = batch()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))  # HERE
        """),
    "TL314": ("error", """
        ids, mask, labels = batch()
        probs = model(input_ids=ids, attention_mask=mask).logits.softmax(-1)
        loss = F.cross_entropy(probs[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))  # HERE
        """, """
        ids, mask, labels = batch()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))  # HERE
        """),
    "TL314-nll": ("error", """
        ids, mask, labels = batch()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.nll_loss(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))  # HERE
        """, """
        ids, mask, labels = batch()
        logp = model(input_ids=ids, attention_mask=mask).logits.log_softmax(-1)
        loss = F.nll_loss(logp[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))  # HERE
        """),
    "TL101-left": ("error", """
        ids, mask, labels = batch(left=True)
        loss = model(input_ids=ids, labels=labels).loss  # HERE
        """, """
        ids, mask, labels = batch(left=True)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss  # HERE
        """),
    "TL107": ("warning", """
        ids, mask, labels = batch()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels.masked_fill(ids == 2, -100)).loss  # HERE
        """, """
        ids, mask, labels = batch()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss  # HERE
        """),
    "TL110": ("error", """
        ids, mask, labels = batch()
        embeds = model.transformer.wte(ids).detach()
        embeds[0, 0, 0] = float("nan")
        loss = model(inputs_embeds=embeds, attention_mask=mask, labels=labels).loss  # HERE
        """, """
        ids, mask, labels = batch()
        embeds = model.transformer.wte(ids).detach()
        loss = model(inputs_embeds=embeds, attention_mask=mask, labels=labels).loss  # HERE
        """),
}


@pytest.mark.parametrize("case", sorted(TWINS))
def test_the_buggy_batch_gives_the_finding_at_its_line(tmp_path, case):
    severity, buggy, _ = TWINS[case]
    found, script = run(tmp_path, buggy)
    assert {(v.code, v.severity, v.site.line if v.site else 0) for v in found} == {
        (case.split("-")[0], severity, line(script, "# HERE"))}


@pytest.mark.parametrize("case", sorted(TWINS))
def test_the_fixed_twin_gives_none(tmp_path, case):
    found, _ = run(tmp_path, TWINS[case][2])
    assert not found, [v.message for v in found]


def test_a_head_that_predicts_two_ahead_beside_a_next_token_loss_is_no_finding(tmp_path):
    found, _ = run(tmp_path, """
        ids, mask, labels = batch()
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), labels[:, 1:].reshape(-1))
        loss = loss + F.cross_entropy(logits[:, :-2].reshape(-1, 50), labels[:, 2:].reshape(-1))
        """)
    assert not found, [v.message for v in found]


def test_an_encoder_decoder_whose_targets_copy_its_source_is_no_finding(tmp_path):
    """A copy task (most of a correction's target repeats its source): the targets are not
    the model's own next tokens, since the decoder reads its own inputs."""
    script = tmp_path / "seq2seq.py"
    script.write_text(textwrap.dedent("""
        import torch
        from transformers import T5Config, T5ForConditionalGeneration

        torch.manual_seed(0)
        model = T5ForConditionalGeneration(T5Config(vocab_size=40, d_model=16, d_kv=8, d_ff=32, num_layers=1,
                                                    num_heads=2, decoder_start_token_id=0))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(3):
            ids = torch.randint(3, 40, (4, 12))
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone()).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """), encoding="utf-8")
    found, tracer = traced(script)
    assert not found, [v.message for v in found]
    assert tracer.counts.get("loss_input") == 3


@pytest.mark.parametrize("sigmoid", [True, False], ids=["sigmoid-twice", "logits"])
def test_bce_with_logits_on_a_sigmoid_s_output_is_a_warning(tmp_path, sigmoid):
    found, script = run(tmp_path, f"""
        ids, mask, labels = batch()
        scores = model(input_ids=ids, attention_mask=mask).logits[:, -1, :4]
        scores = scores.sigmoid() if {sigmoid} else scores
        loss = F.binary_cross_entropy_with_logits(scores, torch.rand(4, 4).round())  # HERE
        """)
    expected = {("TL314", "warning", line(script, "# HERE"))} if sigmoid else set()
    assert {(v.code, v.severity, v.site.line if v.site else 0) for v in found} == expected


def test_every_rule_trace_observes_and_only_those_document_their_run_time_evidence():
    from tlint.runtime.invariants import RULES

    docs = Path(__file__).resolve().parent.parent / "rules"
    with_section = {p.name[:5] for p in docs.glob("TL*.md") if "\n## Run-time evidence\n" in p.read_text()}
    assert with_section == set(RULES)


LOADER = """
import random

import torch
from torch.utils.data import DataLoader
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=40, pad_token_id=0))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
rows = [torch.randint(3, 50, (random.Random(i).randint(4, 32),)) for i in range(200)]
if ORDER == "sorted":
    rows.sort(key=len)


def collate(items):
    width = max(len(r) for r in items)
    ids = torch.zeros(len(items), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(items):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


loader = DataLoader(rows, batch_size=4, shuffle=SHUFFLE, collate_fn=collate)
for step, batch in enumerate(loader):  # HERE
    loss = model(**batch).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 2:
        break
AFTER = torch.rand(3)
"""


@pytest.mark.parametrize("order,shuffle,expected", [("sorted", False, True), ("sorted", True, False),
                                                     ("unsorted", False, False)])
def test_a_training_loader_read_in_an_order_that_follows_length_is_a_warning(tmp_path, order, shuffle, expected):
    script = tmp_path / "loop.py"
    script.write_text(LOADER.replace("ORDER", repr(order)).replace("SHUFFLE", str(shuffle)), encoding="utf-8")
    plain = runpy.run_path(str(script))["AFTER"]
    found: list[Violation] = []
    tracer = Tracer(Invariants(), found.append)
    tracer.install()
    try:
        after = runpy.run_path(str(script))["AFTER"]
    finally:
        tracer.uninstall()
    assert torch_equal(plain, after)  # the dataset read for the order leaves the generators as they were
    assert {(v.code, v.severity, v.site.line if v.site else 0) for v in found} == (
        {("TL114", "warning", line(script, "# HERE"))} if expected else set()), [v.message for v in found]


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


@pytest.mark.parametrize("orientation", ["real-is-one", "pad-is-true"])
def test_a_mask_passed_under_another_name_is_read_by_its_shape_and_values(tmp_path, orientation):
    """A model of its own, called with the ids and a mask by position or by another name
    (1 on real tokens, or True on padding as torch's key_padding_mask): the loss on the
    padded targets is seen through that mask."""
    mask_expr = "mask" if orientation == "real-is-one" else "mask == 0"
    script = tmp_path / "own.py"
    script.write_text(textwrap.dedent(f"""
        import torch
        import torch.nn.functional as F
        from torch import nn

        torch.manual_seed(0)


        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.out = nn.Embedding(50, 16), nn.Linear(16, 50)

            def forward(self, ids, padding):
                return self.out(self.emb(ids))


        model = TinyLM()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            ids = torch.randint(3, 50, (4, 12))
            mask = torch.ones_like(ids)
            for row, length in enumerate([12, 10, 8, 6]):
                ids[row, length:], mask[row, length:] = 0, 0
            logits = model(ids, {mask_expr})
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), ids[:, 1:].reshape(-1))  # HERE
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """), encoding="utf-8")
    found, _ = traced(script)
    assert {(v.code, v.site.line if v.site else 0) for v in found} == {("TL106", line(script, "# HERE"))}


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_padding_after_the_text_with_no_mask_is_a_warning_unless_the_forward_ran_causal_attention(tmp_path, family):
    """A bidirectional encoder's real tokens attend to unmasked trailing padding (a warning at
    the call); a causal LM's never do (its forward ran SDPA with is_causal=True: no finding)."""
    build = {"bert": "BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, "
                     "num_attention_heads=2, intermediate_size=32, max_position_embeddings=32, pad_token_id=0))",
             "gpt2": "GPT2LMHeadModel(config)"}[family]
    found, script = run(tmp_path, f"""
        from transformers import BertConfig, BertForMaskedLM
        net = {build} if step == 0 else net
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3) if step == 0 else optimizer
        ids, mask, labels = batch()
        loss = net(input_ids=ids).logits.pow(2).mean()  # HERE
        """)
    expected = {("TL101", "warning", line(script, "# HERE"))} if family == "bert" else set()
    assert {(v.code, v.severity, v.site.line if v.site else 0) for v in found} == expected, [v.message for v in found]
