"""TL101's fix (unsafe): pass the attention mask that is at hand."""

from __future__ import annotations

from tests.fixutil import assert_fix, findings, source

CODE = "TL101"


def test_mask_beside_the_ids_of_a_tokenizer_output(tmp_path):
    assert_fix(tmp_path, CODE, """\
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
    model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=2)

    enc = tokenizer(["great film", "a long plot"], padding=True, truncation=True, return_tensors="pt")
    logits = model(input_ids=enc['input_ids']).logits
    other = model.forward(input_ids=enc.input_ids.to("cuda")).logits
""", """\
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
    model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=2)

    enc = tokenizer(["great film", "a long plot"], padding=True, truncation=True, return_tensors="pt")
    logits = model(input_ids=enc['input_ids'], attention_mask=enc['attention_mask']).logits
    other = model.forward(input_ids=enc.input_ids.to("cuda"), attention_mask=enc.attention_mask.to("cuda")).logits
""", unsafe=True)


def test_batch_mask_read_elsewhere_in_the_function_multiline_call(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch
    from transformers import AutoModelForCausalLM, DataCollatorWithPadding

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    collator = DataCollatorWithPadding(tokenizer)


    @torch.no_grad()
    def generate_all(loader, device):
        outputs = []
        for batch in loader:
            ids = batch["input_ids"].to(device)
            generated = model.generate(
                ids,
                max_new_tokens=64,
            )
            outputs.append((generated, batch["attention_mask"].sum(-1)))
        return outputs
""", """\
    import torch
    from transformers import AutoModelForCausalLM, DataCollatorWithPadding

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    collator = DataCollatorWithPadding(tokenizer)


    @torch.no_grad()
    def generate_all(loader, device):
        outputs = []
        for batch in loader:
            ids = batch["input_ids"].to(device)
            generated = model.generate(
                ids,
                max_new_tokens=64,
                attention_mask=batch["attention_mask"].to(device),
            )
            outputs.append((generated, batch["attention_mask"].sum(-1)))
        return outputs
""", unsafe=True)


def test_mask_variable_in_scope(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch.nn as nn
    from torch.nn.utils.rnn import pad_sequence


    class Wrapper(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask=None):
            return self.model(input_ids)


    def train(model, loader):
        for ids, mask in loader:
            pad_mask = mask.bool()
            loss = model(input_ids=ids).loss
            loss.backward()


    def collate(rows):
        return pad_sequence(rows, batch_first=True)
""", """\
    import torch.nn as nn
    from torch.nn.utils.rnn import pad_sequence


    class Wrapper(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask=None):
            return self.model(input_ids, attention_mask=attention_mask)


    def train(model, loader):
        for ids, mask in loader:
            pad_mask = mask.bool()
            loss = model(input_ids=ids).loss
            loss.backward()


    def collate(rows):
        return pad_sequence(rows, batch_first=True)
""", unsafe=True, left=True)


def test_no_fix_without_a_mask_at_hand(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "m.py").write_text(source("""\
    import torch
    from torch.nn.utils.rnn import pad_sequence


    def collate(examples):
        ids = pad_sequence([torch.tensor(e["ids"]) for e in examples], batch_first=True, padding_value=0)
        return {"input_ids": ids, "labels": torch.tensor([e["label"] for e in examples])}


    def train(model, loader, attention_mask_after=None):
        for batch in loader:
            logits = model(batch["input_ids"])
            encoded = model.forward(input_ids=batch["input_ids"])
            attention_mask = batch["labels"] != -100
"""), encoding="utf-8")
    found = [d for d in findings(root, [CODE]) if d.code == CODE]
    assert len(found) == 2 and [d.fix for d in found] == [None, None]
