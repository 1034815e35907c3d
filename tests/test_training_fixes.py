"""Fixes of the training-loop rules: TL303 (unscale before the clip), TL305 (scheduler after
the optimiser), TL310 (zero_grad after the step), TL301 (clip before the step, unsafe)."""

from __future__ import annotations

from tests.fixutil import assert_fix, findings, source


def assert_no_fix(tmp_path, code: str, text: str) -> None:
    """`code` is reported on `text`, without a fix."""
    root = tmp_path / "nofix"
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "m.py").write_text(source(text), encoding="utf-8")
    found = [d for d in findings(root, [code]) if d.code == code]
    assert found, f"{code} not reported"
    assert all(d.fix is None for d in found), [d.fix for d in found]


def fix_message(tmp_path, code: str, text: str) -> str:
    root = tmp_path / "msg"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "m.py").write_text(source(text), encoding="utf-8")
    (found,) = [d for d in findings(root, [code]) if d.code == code]
    return found.fix.message


# --- TL303: scaler.unscale_(optimizer) before the clip ----------------------------------

NANOGPT_TL303 = """\
    import torch
    from model import GPT

    model = GPT.from_pretrained("gpt2")
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
    scaler = torch.cuda.amp.GradScaler(enabled=True)
    ctx = torch.autocast("cuda", dtype=torch.float16)
    grad_clip = 1.0
    X, Y = get_batch("train")
    while True:
        for micro_step in range(8):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / 8
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        # clip the gradient
        if grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
"""


def test_tl303_inserts_unscale_before_the_clip_nanogpt(tmp_path):
    after = NANOGPT_TL303.replace(
        "    if grad_clip != 0.0:\n",
        "    if grad_clip != 0.0:\n            scaler.unscale_(optimizer)\n")
    assert_fix(tmp_path, "TL303", NANOGPT_TL303, after)


def test_tl303_uses_the_loop_s_own_scaler_and_optimizer(tmp_path):
    before = """\
        import torch
        from transformers import AutoModelForCausalLM


        class Trainer:
            def __init__(self, loader):
                self.model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
                self.opt = torch.optim.AdamW(self.model.parameters(), lr=5e-5)
                self.amp_scaler = torch.amp.GradScaler("cuda")
                self.loader = loader

            def update(self, loss):
                self.amp_scaler.scale(loss).backward()
                norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # clip
                self.amp_scaler.step(self.opt)
                self.amp_scaler.update()
                self.opt.zero_grad()
                return norm

            def fit(self):
                for batch in self.loader:
                    with torch.autocast("cuda"):
                        loss = self.model(**batch).loss
                    self.update(loss)
    """
    after = before.replace(
        "        norm = torch.nn", "        self.amp_scaler.unscale_(self.opt)\n                norm = torch.nn")
    assert_fix(tmp_path, "TL303", before, after)
    assert fix_message(tmp_path, "TL303", before) == "Insert `self.amp_scaler.unscale_(self.opt)` before the clip"


def test_tl303_no_fix_when_an_unscale_follows_the_clip(tmp_path):
    # a second unscale_ would raise; the misordered one should be moved, by hand
    assert_no_fix(tmp_path, "TL303", """\
        import torch

        def train(model, loader, optimizer):
            scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.unscale_(optimizer)
                scaler.step(optimizer)
                scaler.update()
    """)


def test_tl303_no_fix_when_the_step_is_in_another_function(tmp_path):
    assert_no_fix(tmp_path, "TL303", """\
        import torch

        def clip(model):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        def train(model, loader, optimizer):
            scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                clip(model)
                scaler.step(optimizer)
                scaler.update()
    """)


# --- TL305: scheduler.step() after optimizer.step() -------------------------------------

HF_TL305 = """\
    import torch
    from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup


    def train(loader, epochs=3):
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        lr_scheduler = get_linear_schedule_with_warmup(optimizer, 100, 1000)
        for epoch in range(epochs):
            model.train()
            for batch in loader:
                outputs = model(**batch)
                outputs.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                # advance the schedule
                lr_scheduler.step()  # per batch
                optimizer.step()
                optimizer.zero_grad()
"""


def test_tl305_moves_the_scheduler_step_after_the_optimizer_step(tmp_path):
    after = HF_TL305.replace(
        "    lr_scheduler.step()  # per batch\n                optimizer.step()\n",
        "    optimizer.step()\n                lr_scheduler.step()  # per batch\n")
    assert after != HF_TL305
    assert_fix(tmp_path, "TL305", HF_TL305, after)
    assert fix_message(tmp_path, "TL305", HF_TL305) == "Move `lr_scheduler.step()` after `optimizer.step()`"


def test_tl305_moves_past_statements_between_and_after_a_scaler_step(tmp_path):
    assert_fix(tmp_path, "TL305", """\
        import torch

        def train(model, loader, optimizer, scaler):
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=1000)
            for x, y in loader:
                scaler.scale(model(x, y)).backward()
                scheduler.step()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
    """, """\
        import torch

        def train(model, loader, optimizer, scaler):
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=1000)
            for x, y in loader:
                scaler.scale(model(x, y)).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scheduler.step()
                scaler.update()
    """)


def test_tl305_no_fix_across_blocks(tmp_path):
    assert_no_fix(tmp_path, "TL305", """\
        import torch

        def train(model, loader, optimizer, accum=4):
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
            for i, (x, y) in enumerate(loader):
                scheduler.step()
                (model(x, y) / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """)


# --- TL310: zero_grad() after step() -----------------------------------------------------


def test_tl310_moves_zero_grad_after_the_step(tmp_path):
    assert_fix(tmp_path, "TL310", """\
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer, epochs=1):
            for epoch in range(epochs):
                for idx, targets in loader:
                    logits = model(idx)
                    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
                    loss.backward()
                    optimizer.zero_grad(set_to_none=True)  # reset
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    print(loss.item())
    """, """\
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer, epochs=1):
            for epoch in range(epochs):
                for idx, targets in loader:
                    logits = model(idx)
                    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)  # reset
                    print(loss.item())
    """)


def test_tl310_moves_after_a_scaler_step(tmp_path):
    before = """\
        import torch

        def train(model, loader, opt):
            scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(**batch).loss
                scaler.scale(loss).backward()
                opt.zero_grad()
                scaler.step(opt)
                scaler.update()
    """
    after = before.replace("    opt.zero_grad()\n                scaler.step(opt)\n",
                           "    scaler.step(opt)\n                opt.zero_grad()\n")
    assert after != before
    assert_fix(tmp_path, "TL310", before, after)
    assert fix_message(tmp_path, "TL310", before) == "Move `opt.zero_grad()` after `scaler.step(opt)`"


def test_tl310_no_fix_when_the_step_is_in_another_block(tmp_path):
    assert_no_fix(tmp_path, "TL310", """\
        def train(model, loader, optimizer, accum=4):
            for i, batch in enumerate(loader):
                model(**batch).loss.backward()
                optimizer.zero_grad()
                if (i + 1) % accum == 0:
                    optimizer.step()
    """)


# --- TL301: clip before the step (unsafe) -----------------------------------------------

TL301_LOOP = """\
    {imports}
    from transformers import AutoModelForCausalLM


    def train(loader, steps=1000):
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        optimizer = AdamW(model.parameters(), lr=3e-4)
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step{clip}
            optimizer.zero_grad()
"""


def _tl301(imports: str, clip: str = "") -> str:
    text = TL301_LOOP.replace("{imports}", imports)
    if clip:
        return text.replace("optimizer.step{clip}", f"{clip}\n            optimizer.step()")
    return text.replace("{clip}", "()")


def test_tl301_inserts_the_clip_with_the_module_s_torch(tmp_path):
    imports = "import torch\n    from torch.optim import AdamW"
    assert_fix(tmp_path, "TL301", _tl301(imports),
               _tl301(imports, "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"), unsafe=True)


def test_tl301_uses_the_torch_alias(tmp_path):
    imports = "import torch as th\n    AdamW = th.optim.AdamW"
    assert_fix(tmp_path, "TL301", _tl301(imports),
               _tl301(imports, "th.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"), unsafe=True)


def test_tl301_uses_an_imported_clip_function(tmp_path):
    imports = "from torch.nn.utils import clip_grad_norm_\n    from torch.optim import AdamW"
    assert_fix(tmp_path, "TL301", _tl301(imports),
               _tl301(imports, "clip_grad_norm_(model.parameters(), 1.0)"), unsafe=True)


def test_tl301_adds_import_torch_after_the_docstring_and_future_imports(tmp_path):
    imports = '"""Fine-tune GPT-2."""\n    from __future__ import annotations\n\n    from torch.optim import AdamW'
    after = _tl301(imports, "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)").replace(
        "annotations\n\n", "annotations\n\n    import torch\n")
    assert_fix(tmp_path, "TL301", _tl301(imports), after, unsafe=True)
    assert fix_message(tmp_path, "TL301", _tl301(imports)) == (
        "Insert `torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` before the step, and `import torch`")


def test_tl301_unscales_first_under_a_grad_scaler(tmp_path):
    before = """\
        import torch
        from model import GPTConfig, GPT
        from transformers import GPT2LMHeadModel

        model = GPT(GPTConfig())
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cuda")
        scaler = torch.cuda.amp.GradScaler(enabled=True)
        while True:
            for micro_step in range(4):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits, loss = model(X, Y)
                    loss = loss / 4
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
    """
    after = before.replace("    scaler.step(optimizer)\n", "    scaler.unscale_(optimizer)\n"
                           "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                           "            scaler.step(optimizer)\n")
    assert_fix(tmp_path, "TL301", before, after, unsafe=True)


def test_tl301_clips_through_accelerate_when_it_runs_the_backward(tmp_path):
    before = """\
        import torch
        from accelerate import Accelerator
        from transformers import AutoModelForSequenceClassification, get_scheduler

        def main(loader, num_epochs=3):
            accelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="fp16")
            model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
            optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
            lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=100, num_training_steps=1000)
            model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
            for epoch in range(num_epochs):
                model.train()
                for batch in loader:
                    with accelerator.accumulate(model):
                        output = model(**batch)
                        accelerator.backward(output.loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
    """
    after = before.replace(
        "    accelerator.backward(output.loss)\n",
        "    accelerator.backward(output.loss)\n"
        "                        if accelerator.sync_gradients:\n"
        "                            accelerator.clip_grad_norm_(model.parameters(), 1.0)\n")
    assert after != before
    assert_fix(tmp_path, "TL301", before, after, unsafe=True)


def test_tl301_no_fix_without_a_known_model_or_for_other_backends(tmp_path):
    assert_no_fix(tmp_path, "TL301", """\
        import torch
        from transformers import AutoModel

        def train(loader, optimizer, compute_loss):
            for batch in loader:
                loss = compute_loss(batch)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """)
    assert_no_fix(tmp_path / "fabric", "TL301", """\
        import torch
        from lightning.fabric import Fabric
        from transformers import AutoModel

        def train(loader):
            fabric = Fabric()
            model = AutoModel.from_pretrained("bert-base-uncased")
            optimizer = torch.optim.AdamW(model.parameters())
            model, optimizer = fabric.setup(model, optimizer)
            for batch in loader:
                loss = model(**batch).loss
                fabric.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
    """)


def test_tl301_fix_is_not_applied_without_unsafe_fixes(tmp_path):
    from tests.fixutil import run_main

    root = tmp_path
    (root / "m.py").write_text(source(_tl301("import torch\n    from torch.optim import AdamW")), encoding="utf-8")
    status, out, err = run_main(root, "check", "m.py", "--fix", "--no-cache", "--select", "TL301", "--fail-on", "info")
    assert status == 1 and "TL301" in out and "fixed 0 findings" in err


def test_tl301_sets_max_grad_norm_of_training_arguments(tmp_path):
    before = """\
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        args = TrainingArguments(
            output_dir="out",
            learning_rate=5e-5,
            max_grad_norm=0,
        )
        Trainer(model=model, args=args).train()
    """
    assert_fix(tmp_path, "TL301", before, before.replace("max_grad_norm=0,", "max_grad_norm=1.0,"), unsafe=True)


def test_tl301_no_fix_for_a_max_grad_norm_from_elsewhere(tmp_path):
    assert_no_fix(tmp_path, "TL301", """\
        from transformers import TrainingArguments

        NO_CLIP = None
        args = TrainingArguments(output_dir="out", max_grad_norm=NO_CLIP)
    """)


def test_tl301_passes_gradient_clip_val_to_a_lightning_trainer(tmp_path):
    before = """\
        import lightning as L
        from transformers import AutoModel

        class LitModel(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.encoder = AutoModel.from_pretrained("bert-base-uncased")

        trainer = L.Trainer(
            max_epochs=3,
            precision="16-mixed",
        )
        trainer.fit(LitModel())
    """
    after = before.replace('    precision="16-mixed",\n', '    precision="16-mixed",\n            gradient_clip_val=1.0,\n')
    assert_fix(tmp_path, "TL301", before, after, unsafe=True)
    assert fix_message(tmp_path, "TL301", before) == "Pass `gradient_clip_val=1.0`"


def test_tl301_keeps_the_layout_of_a_trainer_built_in_a_function(tmp_path):
    before = """\
        import lightning.pytorch as pl
        from transformers import AutoModelForSequenceClassification


        class LitClassifier(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")

            def training_step(self, batch, batch_idx):
                return self.model(**batch).loss


        def main(loader):
            trainer = pl.Trainer(
                max_epochs=3,
                accelerator="gpu",
            )
            trainer.fit(LitClassifier(), train_dataloaders=loader)
    """
    after = before.replace('        accelerator="gpu",\n', '        accelerator="gpu",\n                gradient_clip_val=1.0,\n')
    assert after != before
    assert_fix(tmp_path, "TL301", before, after, unsafe=True)
