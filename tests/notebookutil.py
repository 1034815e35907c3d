"""Notebooks for the tests, written by `nbformat` as Jupyter writes them (indent 1, sorted
keys, outputs and metadata kept), mirroring real fine-tuning notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
          "language_info": {"name": "python", "version": "3.11.7"}}


def notebook(cells: list[tuple[str, str]], metadata: dict | None = None) -> str:
    """The JSON of a notebook of ("code" | "markdown", source) cells; code cells carry an
    execution count and a stream output, as a run notebook does."""
    made = []
    for number, (kind, text) in enumerate(cells, start=1):
        if kind == "markdown":
            made.append(new_markdown_cell(text, id=f"cell-{number}"))
        else:
            out = new_output("stream", name="stdout", text=f"ran cell {number}\n")
            made.append(new_code_cell(text, id=f"cell-{number}", execution_count=number, outputs=[out],
                                      metadata={"scrolled": True}))
    # (`nbformat.write` ends the file with a newline, as Jupyter does)
    return nbformat.writes(new_notebook(cells=made, metadata=metadata if metadata is not None else KERNEL)) + "\n"


def write_notebook(path: Path, cells: list[tuple[str, str]], metadata: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(notebook(cells, metadata), encoding="utf-8")
    return path


# A hand-written training loop, as in many tutorial notebooks: an install cell, tokenizing
# with padding, a `%%time` cell whose model call has no mask.
HAND_LOOP = [
    ("markdown", "# Fine-tune DistilBERT on IMDb\n\nA hand-written loop."),
    ("code", "!pip install -q transformers datasets accelerate\n%load_ext autoreload"),
    ("code", "import torch\n"
             "from torch.utils.data import DataLoader\n"
             "from transformers import AutoTokenizer, AutoModelForSequenceClassification\n"
             "\n"
             "tokenizer = AutoTokenizer.from_pretrained('distilbert-base-uncased')\n"
             "model = AutoModelForSequenceClassification.from_pretrained('distilbert-base-uncased', num_labels=2)"),
    ("code", "def encode(batch):\n"
             "    return tokenizer(batch['text'], padding='max_length', max_length=256)\n"
             "\n"
             "train = dataset.map(encode, batched=True)\n"
             "loader = DataLoader(train, batch_size=16, shuffle=True)"),
    ("code", "%%time\n"
             "optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\n"
             "model.train()\n"
             "for epoch in range(3):\n"
             "    for batch in loader:\n"
             "        out = model(batch['input_ids'], labels=batch['label'])\n"
             "        out.loss.backward()\n"
             "        optimizer.step()\n"),
    ("code", "files = !ls\nmodel?"),
]

# The `Trainer` way, with a quick check of the model at the end (`%%capture` install cell).
TRAINER = [
    ("markdown", "# Fine-tune with `Trainer` — ünïcode in markdown"),
    ("code", "%%capture\n!pip install transformers[torch] datasets evaluate"),
    ("code", "from datasets import load_dataset\n"
             "from transformers import AutoTokenizer, AutoModelForSequenceClassification, Trainer, TrainingArguments\n"
             "\n"
             "ds = load_dataset('imdb')\n"
             "tok = AutoTokenizer.from_pretrained('bert-base-cased')"),
    ("code", "def tokenize(examples):\n"
             "    return tok(examples['text'], padding='max_length', truncation=True)\n"
             "\n"
             "ds = ds.map(tokenize, batched=True)"),
    ("code", "model = AutoModelForSequenceClassification.from_pretrained('bert-base-cased', num_labels=2)\n"
             "args = TrainingArguments('out', learning_rate=2e-5, num_train_epochs=3, warmup_ratio=0.1)\n"
             "trainer = Trainer(model=model, args=args, train_dataset=ds['train'])\n"
             "trainer.train()"),
    ("code", "%%time\n"
             "batch = tok(['great movie', 'bad'], padding=True, return_tensors='pt')\n"
             "logits = model(batch['input_ids']).logits"),
]
