"""TL301 missing-grad-clipping: every guard of the rule, beyond its document's examples.

Each case marks the lines it expects to be flagged with `# expect: TL301`; a case with no
marker expects no finding.
"""

from __future__ import annotations

import json

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL301"


# TL301 is about transformer training: hand-written loops are judged only in a project
# that builds or loads a transformer. Unless a case says otherwise, one sits beside it.
TRANSFORMER_MODEL = """
    from torch import nn


    class Encoder(nn.Module):
        def __init__(self, d_model=64):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, 4, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)

        def forward(self, x):
            return self.encoder(x)
"""


def check(tmp_path, files, config=None, transformer=True):
    if transformer and "transformer_model.py" not in files:
        # the entry point builds the transformer and imports the training code
        imports = "".join(f"    import {name[:-3].replace('/', '.')}\n" for name in files if name.endswith(".py"))
        files = {**files, "transformer_model.py": imports + TRANSFORMER_MODEL}
    assert lint(tmp_path, files, [CODE], config=config) == expected(files, CODE)


# --- hand-written loops ---------------------------------------------------------------

RAW_LOOP = """
    import torch
    import torch.nn.functional as F


    def train(model, loader, epochs):
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        for epoch in range(epochs):
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                {clip}
                optimizer.step()  {marker}
"""


@pytest.mark.parametrize(
    ("clip", "flagged"),
    [
        ("pass", True),
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)", False),
        ("torch.nn.utils.clip_grad.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("if epoch > 0: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("model.clip_grad_norm_(1.0)  # FSDP", False),
    ],
)
def test_raw_loop(tmp_path, clip, flagged):
    source = RAW_LOOP.replace("{clip}", clip).replace("{marker}", "# expect: TL301" if flagged else "")
    check(tmp_path, {"train.py": source})


@pytest.mark.parametrize(
    "imports, call",
    [
        ("from torch.nn.utils import clip_grad_norm_ as clip", "clip(model.parameters(), 1.0)"),
        ("from torch import nn", "nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        ("import torch.nn.utils as tu", "tu.clip_grad_value_(model.parameters(), 1.0)"),
        ("import torch as th", "th.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
    ],
)
def test_clipping_through_imports_and_aliases(tmp_path, imports, call):
    check(tmp_path, {"train.py": f"""
        import torch
        {imports}


        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                {call}
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_module_level_while_loop_is_flagged(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = 0
        while step < 100:
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()  # expect: TL301
            opt.zero_grad()
            step += 1
    """})


def test_step_in_helper_is_reported_once_in_the_helper(tmp_path):
    check(tmp_path, {"train.py": """
        def train_step(model, batch, optimizer):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()  # expect: TL301
            optimizer.zero_grad()


        def train(model, train_loader, extra_loader, optimizer):
            for batch in train_loader:
                train_step(model, batch, optimizer)
            for batch in extra_loader:
                train_step(model, batch, optimizer)
    """})


def test_clipping_in_a_helper_counts(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model, optimizer

            def _clip(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

            def _update(self):
                self._clip()
                self.optimizer.step()
                self.optimizer.zero_grad()

            def fit(self, loader):
                for batch in loader:
                    self.model(**batch).loss.backward()
                    self._update()
    """})


def test_project_helper_named_like_a_clipper_counts(tmp_path):
    check(tmp_path, {"train.py": """
        from utils import clip_gradients


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                clip_gradients(model, max_norm=1.0)
                optimizer.step()
    """})


def test_gradient_hook_clamp_counts(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer):
            for p in model.parameters():
                p.register_hook(lambda grad: grad.clamp(-1.0, 1.0))
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_amp_loop(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        scaler = torch.cuda.amp.GradScaler()


        def train(model, loader, optimizer):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)  # expect: TL301
                scaler.update()
                optimizer.zero_grad(set_to_none=True)


        def train_clipped(model, loader, optimizer):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
    """})


def test_backward_without_optimizer_step_is_not_a_training_loop(tmp_path):
    check(tmp_path, {"saliency.py": """
        def saliency(model, loader, scheduler):
            maps = []
            for x in loader:
                x.requires_grad_(True)
                model(x).sum().backward()
                maps.append(x.grad.abs())
                scheduler.step()
            return maps
    """})


# --- accelerate, Fabric, Lightning manual optimisation ---------------------------------


def test_accelerate_loop_that_never_clips_is_flagged(tmp_path):
    check(tmp_path, {"train.py": """
        from accelerate import Accelerator


        def main(model, optimizer, loader):
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()  # expect: TL301
                optimizer.zero_grad()
    """})


def test_accelerate_clip(tmp_path):
    check(tmp_path, {"train.py": """
        from accelerate import Accelerator


        def main(model, optimizer, loader):
            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(model(**batch).loss)
                    if accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
    """})


def test_fabric_clip_gradients(tmp_path):
    check(tmp_path, {"train.py": """
        import lightning as L


        def main(model, optimizer, loader):
            fabric = L.Fabric()
            model, optimizer = fabric.setup(model, optimizer)
            for batch in loader:
                fabric.backward(model(batch))
                fabric.clip_gradients(model, optimizer, max_norm=1.0)
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_lightning_manual_optimisation(tmp_path):
    check(tmp_path, {"module.py": """
        import lightning.pytorch as pl
        import torch


        class Manual(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self(batch)
                opt.zero_grad()
                self.manual_backward(loss)
                opt.step()  # expect: TL301


        class ManualClipped(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                self.manual_backward(self(batch))
                self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
                opt.step()
                opt.zero_grad()
    """})


# --- Hugging Face TrainingArguments -----------------------------------------------------

HF_SCRIPT = """
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
    args = TrainingArguments(
        output_dir="out",
        {arguments}
    )
    Trainer(model=model, args=args).train()
"""


@pytest.mark.parametrize(
    "arguments",
    [
        "learning_rate=2e-5,",
        "max_grad_norm=1.0,",
        "max_grad_norm=0.0,  # expect: TL301",
        "max_grad_norm=None,  # expect: TL301",
        "max_grad_norm=MAX_NORM,",
    ],
)
def test_training_arguments(tmp_path, arguments):
    check(tmp_path, {"train.py": HF_SCRIPT.replace("{arguments}", arguments)})


def test_training_arguments_argparse_default_is_read_as_literal(tmp_path):
    check(tmp_path, {"train.py": """
        import argparse

        from transformers import TrainingArguments, Seq2SeqTrainingArguments

        parser = argparse.ArgumentParser()
        parser.add_argument("--max-grad-norm", type=float, default=0.0)
        parser.add_argument("--clip", type=float, default=1.0)
        cli = parser.parse_args()
        a = TrainingArguments(output_dir="out", max_grad_norm=cli.max_grad_norm)  # expect: TL301
        b = Seq2SeqTrainingArguments(output_dir="out", max_grad_norm=cli.clip)
    """})


def test_training_arguments_spread_kwargs_is_unknown(tmp_path):
    check(tmp_path, {"train.py": """
        from trl import SFTConfig

        def config(overrides):
            return SFTConfig(output_dir="out", max_grad_norm=0.0, **overrides)
    """})


def test_trl_config_and_local_subclass(tmp_path):
    check(tmp_path, {"train.py": """
        from dataclasses import dataclass

        from transformers import TrainingArguments
        from trl import SFTConfig


        @dataclass
        class MyArguments(TrainingArguments):
            lora_r: int = 8


        sft = SFTConfig(output_dir="out", max_grad_norm=0)  # expect: TL301
        mine = MyArguments(output_dir="out", max_grad_norm=None)  # expect: TL301
    """})


# --- Lightning Trainer ------------------------------------------------------------------

LIGHTNING = """
    import lightning.pytorch as pl
    import torch.nn as nn


    class Encoder(pl.LightningModule):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)

        def training_step(self, batch, batch_idx):
            return self.encoder(batch).mean()


    trainer = {trainer}
    trainer.fit(Encoder())
"""


@pytest.mark.parametrize(
    "trainer",
    [
        "pl.Trainer(max_epochs=3)  # expect: TL301",
        "pl.Trainer(max_epochs=3, gradient_clip_val=1.0)",
        "pl.Trainer(max_epochs=3, gradient_clip_val=0)  # expect: TL301",
        "pl.Trainer(max_epochs=3, gradient_clip_val=None)  # expect: TL301",
        "pl.Trainer(**trainer_kwargs)",
    ],
)
def test_lightning_trainer(tmp_path, trainer):
    check(tmp_path, {"train.py": LIGHTNING.replace("{trainer}", trainer)})


def test_lightning_trainer_spellings(tmp_path):
    check(tmp_path, {"train.py": """
        import lightning as L
        import pytorch_lightning
        from pytorch_lightning import Trainer
        from transformers import AutoModel

        a = L.Trainer(max_epochs=1)  # expect: TL301
        b = pytorch_lightning.Trainer(max_epochs=1)  # expect: TL301
        c = Trainer(max_epochs=1, gradient_clip_val=0.5)
    """})


def test_lightning_trainer_needs_a_transformer_in_the_project(tmp_path):
    check(tmp_path, {"train.py": """
        import lightning.pytorch as pl
        import torch.nn as nn


        class Regressor(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))


        pl.Trainer(max_epochs=3).fit(Regressor())
    """}, transformer=False)


def test_raw_loop_of_a_non_transformer_project_is_not_flagged(tmp_path):
    source = RAW_LOOP.replace("{clip}", "pass").replace("{marker}", "")
    check(tmp_path, {"train.py": source}, transformer=False)


def test_lightning_transformer_in_an_imported_file(tmp_path):
    check(tmp_path, {
        "model.py": """
            import torch.nn as nn


            class TinyGPT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
        """,
        "train.py": """
            import lightning.pytorch as pl

            from model import TinyGPT

            pl.Trainer(max_epochs=3)  # expect: TL301
        """,
    })


def test_lightning_module_that_clips_in_a_hook(tmp_path):
    check(tmp_path, {"train.py": """
        import lightning.pytorch as pl
        from torch.nn.utils import clip_grad_norm_
        from transformers import AutoModel


        class Module(pl.LightningModule):
            def on_before_optimizer_step(self, optimizer):
                clip_grad_norm_(self.parameters(), 1.0)


        pl.Trainer(max_epochs=3).fit(Module())
    """})


# --- DeepSpeed ----------------------------------------------------------------------------

DEEPSPEED_LOOP = """
    import deepspeed

    {config}


    def train(model, loader):
        model_engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), {arg})
        for batch in loader:
            loss = model_engine(batch)
            model_engine.backward(loss)
            model_engine.step()  {marker}
"""


@pytest.mark.parametrize(
    ("config", "arg", "flagged"),
    [
        ('ds_config = {"train_batch_size": 32, "gradient_clipping": 1.0}', "config=ds_config", False),
        ('ds_config = {"train_batch_size": 32, "fp16": {"enabled": True}}', "config=ds_config", True),
        ("", 'config={"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0.5}', False),
        ("", "args=cmd_args", False),
        ("", "config=cmd_args.deepspeed_config", False),
    ],
)
def test_deepspeed_config(tmp_path, config, arg, flagged):
    source = (DEEPSPEED_LOOP.replace("{config}", config).replace("{arg}", arg)
              .replace("{marker}", "# expect: TL301" if flagged else ""))
    check(tmp_path, {"train.py": source})


@pytest.mark.parametrize(
    ("json_config", "flagged"),
    [
        ({"train_batch_size": 32, "gradient_clipping": 1.0}, False),
        ({"train_batch_size": 32}, True),
        ({"gradient_clipping": "auto"}, False),
        (None, False),  # the path does not exist: the config is not visible
    ],
)
def test_deepspeed_json_config_next_to_the_script(tmp_path, json_config, flagged):
    if json_config is not None:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "ds.json").write_text(json.dumps(json_config))
    source = (DEEPSPEED_LOOP.replace("{config}", "").replace("{arg}", 'config="configs/ds.json"')
              .replace("{marker}", "# expect: TL301" if flagged else ""))
    check(tmp_path, {"train.py": source})


def test_accelerate_deepspeed_plugin_clips(tmp_path):
    check(tmp_path, {"train.py": """
        from accelerate import Accelerator, DeepSpeedPlugin


        def main(model, optimizer, loader):
            plugin = DeepSpeedPlugin(zero_stage=2, gradient_clipping=1.0)
            accelerator = Accelerator(deepspeed_plugin=plugin)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
    """})


# --- options --------------------------------------------------------------------------

CUSTOM_CLIP = {"train.py": """
    from mylib.train import clip_all


    def train(model, loader, optimizer):
        for batch in loader:
            model(**batch).loss.backward()
            clip_all(model)
            optimizer.step()  # expect: TL301
"""}


def test_custom_clip_function_is_unknown_by_default(tmp_path):
    check(tmp_path, CUSTOM_CLIP)


def test_clip_functions_option_reaches_the_rule(tmp_path):
    config = """
        [tool.tlint.rules.missing-grad-clipping]
        clip-functions = ["mylib.train.clip_all"]
    """
    assert lint(tmp_path, CUSTOM_CLIP, [CODE], config=config) == []


def test_deepspeed_engine_configured_elsewhere(tmp_path):
    check(tmp_path, {"engine.py": """
        import deepspeed


        class EngineWrapper:
            def __init__(self, engine):
                self.engine = engine

            def backward(self, loss):
                self.engine.backward(loss)
                self.engine.step()
    """})


def test_accelerate_deepspeed_plugin_from_the_launch_config(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from accelerate import Accelerator
        from accelerate.utils import DummyOptim


        def main(model, loader):
            accelerator = Accelerator()
            uses_ds_optimizer = "optimizer" in accelerator.state.deepspeed_plugin.deepspeed_config
            optimizer_cls = DummyOptim if uses_ds_optimizer else torch.optim.AdamW
            optimizer = optimizer_cls(model.parameters(), lr=1e-4)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("imported", "flagged"), [(True, False), (False, True)])
def test_accelerate_placeholder_is_recognised_by_its_import(tmp_path, imported, flagged):
    """A class of the file named `DummyOptim` is not accelerate's DeepSpeed placeholder."""
    head = "from accelerate.utils import DummyOptim" if imported else (
        "class DummyOptim(torch.optim.AdamW):\n    pass")
    marker = "  # expect: TL301" if flagged else ""
    check(tmp_path, {"train.py": f"""
import torch
from transformers import AutoModelForCausalLM
{head}


def main(loader):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    optimizer = DummyOptim(model.parameters(), lr=1e-4)
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step(){marker}
        optimizer.zero_grad()
"""})


@pytest.mark.parametrize("name", ["tests/test_optim.py", "test_train.py", "train_test.py", "testing/loop.py"])
def test_test_files_are_not_judged(tmp_path, name):
    source = RAW_LOOP.replace("{clip}", "pass").replace("{marker}", "")
    check(tmp_path, {name: source})
    check(tmp_path / "control", {name.replace("test", "run"): source.replace("optimizer.step()  ", "optimizer.step()  # expect: TL301")})


# --- issue 20: benchmark and profiling runs, trainers that only evaluate ---------------

_LOOP = """\
            for _ in {iterable}:
                model(**batch).loss.backward()
                optimizer.step(){marker}
                optimizer.zero_grad()
"""


@pytest.mark.parametrize(("file", "function", "iterable", "flagged"), [
    ("train.py", "train", "range(10)", True),
    ("bench_train.py", "train", "range(10)", False),  # the file says benchmark
    ("train.py", "benchmark_step", "range(10)", False),  # the function says it
    ("train.py", "train", "profile_steps", False),  # the loop runs over a name that says it
])
def test_benchmark_loops_are_not_training(tmp_path, file, function, iterable, flagged):
    marker = "  # expect: TL301" if flagged else ""
    body = _LOOP.format(iterable=iterable, marker=marker)
    check(tmp_path, {file: f"""
        from transformers import AutoModel

        profile_steps = range(5)


        def {function}(batch, optimizer):
            model = AutoModel.from_pretrained("bert-base-uncased")
{body}
    """})


def test_loop_under_the_torch_profiler_is_not_training(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from transformers import AutoModel


        def train(batch, optimizer):
            model = AutoModel.from_pretrained("bert-base-uncased")
            with torch.profiler.profile() as prof:
                for _ in range(5):
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    prof.step()
            for _ in range(5):
                model(**batch).loss.backward()
                optimizer.step()  # expect: TL301
                optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("calls", "flagged"), [
    ("trainer.evaluate(); trainer.predict(test_set)", False),
    ("trainer.evaluate(); trainer.train()", True),
    ("", True),  # nothing called on it here: unknown, judged as training
])
def test_training_arguments_of_a_trainer_that_only_evaluates(tmp_path, calls, flagged):
    marker = "  # expect: TL301" if flagged else ""
    check(tmp_path, {"run.py": f"""
        from transformers import Trainer, TrainingArguments


        def run(model, test_set):
            args = TrainingArguments("out", max_grad_norm=0){marker}
            trainer = Trainer(model, args)
            {calls}
    """})


@pytest.mark.parametrize(("call", "flagged"), [(".test(module)", False), (".predict(module)", False),
                                               (".fit(module)", True)])
def test_lightning_trainer_that_only_tests(tmp_path, call, flagged):
    marker = "  # expect: TL301" if flagged else ""
    check(tmp_path, {"run.py": f"""
        import lightning as L
        from transformers import AutoModel


        def run(module):
            L.Trainer(max_epochs=1){call}{marker}
    """})


@pytest.mark.parametrize(("script_model", "flagged"), [
    ("from model import GPT\nmodel = GPT()", True),  # the script that runs the trainer loads a transformer
    ("from torchvision.models import resnet18\nmodel = resnet18()", False),  # a CNN program
])
def test_a_generic_trainer_is_judged_by_the_program_that_runs_it(tmp_path, script_model, flagged):
    # the trainer imports no model: the scripts that import it decide what it trains
    marker = "  # expect: TL301" if flagged else ""
    check(tmp_path, {
        "trainer.py": f"""
            class Trainer:
                def __init__(self, model, optimizer, loader):
                    self.model, self.optimizer, self.loader = model, optimizer, loader

                def run(self):
                    for x, y in self.loader:
                        loss = self.model(x, y)
                        self.model.zero_grad()
                        loss.backward()
                        self.optimizer.step(){marker}
        """,
        "model.py": """
            from torch import nn


            class GPT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, batch_first=True), 2)
        """,
        "run.py": script_model + "\nfrom trainer import Trainer\nTrainer(model, opt, loader).run()\n",
    }, transformer=False)
