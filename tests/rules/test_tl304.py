"""TL304 missing-warmup: every guard of the rule, beyond its document's examples.

Each case marks the lines it expects to be flagged with `# expect: TL304`; a case with no
marker expects no finding.
"""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL304"


def check(tmp_path, files, config=None):
    assert lint(tmp_path, files, [CODE], config=config) == expected(files, CODE)


# A transformer trained with AdamW; {scheduler} is replaced per case.
SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.optim.lr_scheduler import (
        ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts, ExponentialLR, LambdaLR, LinearLR,
        OneCycleLR, ReduceLROnPlateau, SequentialLR, StepLR,
    )
    from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup, get_scheduler

    WARMUP = 500
    TOTAL = 10_000

    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=6)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)  {marker}
    {scheduler}
"""

NO_WARMUP_SCHEDULERS = [
    "",
    "scheduler = StepLR(optimizer, step_size=1000, gamma=0.5)",
    "scheduler = ExponentialLR(optimizer, gamma=0.999)",
    "scheduler = CosineAnnealingLR(optimizer, T_max=TOTAL)",
    "scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=1000)",
    "scheduler = ReduceLROnPlateau(optimizer, patience=2)",
    "scheduler = LinearLR(optimizer, start_factor=1.0, end_factor=0.1, total_iters=TOTAL)",
    "scheduler = ConstantLR(optimizer, factor=1.0)",
    "scheduler = LambdaLR(optimizer, lambda epoch: 0.95 ** epoch)",
    "scheduler = OneCycleLR(optimizer, max_lr=3e-4, total_steps=TOTAL, pct_start=0.0)",
    "scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=TOTAL)",
    "scheduler = get_linear_schedule_with_warmup(optimizer, 0, TOTAL)",
    "scheduler = get_scheduler('linear', optimizer, 0, TOTAL)",
    "scheduler = get_scheduler('cosine', optimizer=optimizer, num_training_steps=TOTAL)",
    "scheduler = get_scheduler('constant', optimizer, num_warmup_steps=WARMUP)",
    "scheduler = SequentialLR(optimizer, [StepLR(optimizer, 10), ExponentialLR(optimizer, 0.9)], [10])",
]

WARMUP_SCHEDULERS = [
    "scheduler = LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP))",
    "scheduler = LambdaLR(optimizer, lr_lambda=noam)",
    "scheduler = LinearLR(optimizer, total_iters=WARMUP)",
    "scheduler = LinearLR(optimizer, start_factor=0.01, total_iters=WARMUP)",
    "scheduler = ConstantLR(optimizer, factor=0.5, total_iters=100)",
    "scheduler = OneCycleLR(optimizer, max_lr=3e-4, total_steps=TOTAL)",
    "warm = LinearLR(optimizer, 0.1, total_iters=WARMUP)\n"
    "    scheduler = SequentialLR(optimizer, [warm, CosineAnnealingLR(optimizer, TOTAL)], [WARMUP])",
    "scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=WARMUP, num_training_steps=TOTAL)",
    "scheduler = get_cosine_schedule_with_warmup(optimizer, 100, TOTAL)",
    "scheduler = get_scheduler('cosine', optimizer, num_warmup_steps=int(0.06 * TOTAL), num_training_steps=TOTAL)",
    "scheduler = get_scheduler('linear', optimizer, num_warmup_steps=compute_warmup(), num_training_steps=TOTAL)",
]


@pytest.mark.parametrize("scheduler", NO_WARMUP_SCHEDULERS)
def test_no_warmup_scheduler_is_flagged(tmp_path, scheduler):
    check(tmp_path, {"train.py": SCRIPT.replace("{scheduler}", scheduler).replace("{marker}", "# expect: TL304")})


@pytest.mark.parametrize("scheduler", WARMUP_SCHEDULERS)
def test_warmup_scheduler_is_not_flagged(tmp_path, scheduler):
    check(tmp_path, {"train.py": SCRIPT.replace("{scheduler}", scheduler).replace("{marker}", "")})


def test_not_a_transformer_project(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        model = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    """})


@pytest.mark.parametrize(
    ("construction", "flagged"),
    [
        ("torch.optim.Adam(model.parameters())", True),
        ("torch.optim.NAdam(model.parameters())", True),
        ("torch.optim.Adamax(model.parameters())", True),
        ("torch.optim.RAdam(model.parameters())", False),
        ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)", False),
        ("bnb.optim.AdamW8bit(model.parameters())", True),
        ("bnb.optim.PagedAdamW32bit(model.parameters())", True),
        ("FusedAdam(model.parameters())", True),
        ("functools.partial(torch.optim.AdamW, lr=1e-4)", True),
        ("transformers.Adafactor(model.parameters())", False),
    ],
)
def test_optimizer_families(tmp_path, construction, flagged):
    marker = "# expect: TL304" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import functools

        import bitsandbytes as bnb
        import torch
        import transformers
        from apex.optimizers import FusedAdam

        model = transformers.AutoModelForCausalLM.from_pretrained("gpt2")
        optimizer = {construction}  {marker}
    """})


# --- literals as they run by default --------------------------------------------------------


@pytest.mark.parametrize(("default", "flagged"), [("0", True), ("100", False), ("None", True)])
def test_argparse_default_is_read_as_literal(tmp_path, default, flagged):
    marker = "# expect: TL304" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import argparse

        import torch
        from transformers import AutoModelForCausalLM, get_scheduler


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--warmup-steps", type=int, default={default})
            parser.add_argument("--lr", type=float, default=5e-5)
            args = parser.parse_args()
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)  {marker}
            scheduler = get_scheduler("linear", optimizer, num_warmup_steps=args.warmup_steps, num_training_steps=1000)
    """})


def test_argparse_option_without_default_is_unknown(tmp_path):
    check(tmp_path, {"train.py": """
        import argparse

        import torch
        from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup

        parser = argparse.ArgumentParser()
        parser.add_argument("--num_warmup_steps", type=int, required=True)
        args = parser.parse_args()
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        optimizer = torch.optim.AdamW(model.parameters())
        scheduler = get_linear_schedule_with_warmup(optimizer, args.num_warmup_steps, 1000)
    """})


def test_dataclass_and_click_defaults(tmp_path):
    check(tmp_path, {"train.py": """
        from dataclasses import dataclass, field

        import click
        import torch
        from transformers import AutoModel, HfArgumentParser, get_linear_schedule_with_warmup


        @dataclass
        class Config:
            warmup_ratio: float = field(default=0.0, metadata={"help": "fraction of steps"})


        @click.command()
        @click.option("--warmup-steps", default=0)
        def main(warmup_steps):
            config = HfArgumentParser(Config).parse_args_into_dataclasses()[0]
            model = AutoModel.from_pretrained("bert-base-uncased")
            optimizer = torch.optim.AdamW(model.parameters())  # expect: TL304
            a = get_linear_schedule_with_warmup(optimizer, warmup_steps, 1000)
            b = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * 1000), 1000)
    """})


# --- hand-written warmups -------------------------------------------------------------------


def test_nanogpt_get_lr_warmup(tmp_path):
    check(tmp_path, {"train.py": """
        import math

        import torch
        import torch.nn.functional as F

        learning_rate, min_lr, warmup_iters, lr_decay_iters = 6e-4, 6e-5, 2000, 600000


        def get_lr(it):
            if it < warmup_iters:
                return learning_rate * (it + 1) / (warmup_iters + 1)
            ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
            return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


        def train(model, get_batch, max_iters):
            optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95))
            for it in range(max_iters):
                lr = get_lr(it)
                for param_group in optimizer.param_groups:
                    param_group["lr"] = lr
                x, y = get_batch()
                logits = model(x)
                F.scaled_dot_product_attention  # the project is a transformer
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """})


def test_lightning_optimizer_step_ramp(tmp_path):
    check(tmp_path, {"module.py": """
        import lightning.pytorch as pl
        import torch
        from transformers import AutoModel


        class Module(pl.LightningModule):
            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)

            def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure):
                optimizer.step(closure=optimizer_closure)
                if self.trainer.global_step < 500:
                    scale = min(1.0, float(self.trainer.global_step + 1) / 500.0)
                    for pg in optimizer.param_groups:
                        pg["lr"] = scale * self.hparams.lr
    """})


def test_lr_store_without_a_ramp_is_not_a_warmup(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # expect: TL304
        for epoch in range(10):
            for group in optimizer.param_groups:
                group["lr"] = 1e-4 * 0.9 ** epoch
    """})


def test_factory_configure_optimizers_is_flagged(tmp_path):
    check(tmp_path, {"module.py": """
        import lightning.pytorch as pl
        import torch
        from transformers import AutoModelForSequenceClassification


        class Classifier(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.model = AutoModelForSequenceClassification.from_pretrained("roberta-base")

            def configure_optimizers(self):
                optimizer = torch.optim.AdamW(self.parameters(), lr=2e-5)  # expect: TL304
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
                return [optimizer], [scheduler]
    """})


# --- Hugging Face TrainingArguments -------------------------------------------------------

HF_SCRIPT = """
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("gpt2")
    args = TrainingArguments(  {marker}
        output_dir="out",
        {arguments}
    )
    Trainer(model=model, args=args).train()
"""


@pytest.mark.parametrize(
    ("arguments", "flagged"),
    [
        ("learning_rate=5e-5,", True),
        ("warmup_ratio=0.1,", False),
        ("warmup_steps=500,", False),
        ("warmup_steps=cfg.warmup,", False),
        ("optim='adafactor',", False),
        ("optim='sgd',", False),
        ("optim='adamw_torch_fused',", True),
        ("**overrides,", False),
    ],
)
def test_training_arguments(tmp_path, arguments, flagged):
    source = HF_SCRIPT.replace("{arguments}", arguments).replace("{marker}", "# expect: TL304" if flagged else "")
    check(tmp_path, {"train.py": source})


def test_training_arguments_explicit_zero_points_at_the_keyword(tmp_path):
    check(tmp_path, {"train.py": """
        from transformers import AutoModelForCausalLM
        from trl import SFTConfig

        config = SFTConfig(
            output_dir="out",
            warmup_ratio=0.0,  # expect: TL304
        )
    """})


def test_training_arguments_subclass_field_default(tmp_path):
    check(tmp_path, {"train.py": """
        from dataclasses import dataclass, field

        from transformers import HfArgumentParser, TrainingArguments


        @dataclass
        class Arguments(TrainingArguments):
            warmup_ratio: float = field(default=0.03)


        args = Arguments(output_dir="out")
        parsed = HfArgumentParser(Arguments).parse_args_into_dataclasses()
    """})


def test_trainer_with_custom_optimizer_reports_the_optimizer(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # expect: TL304
        args = TrainingArguments(output_dir="out")
        Trainer(model=model, args=args, optimizers=(optimizer, None)).train()
    """})


# --- DeepSpeed ----------------------------------------------------------------------------


def test_deepspeed_warmup_scheduler_in_config(tmp_path):
    check(tmp_path, {"train.py": """
        import deepspeed
        import torch
        from transformers import AutoModel

        ds_config = {
            "train_batch_size": 32,
            "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 1000, "total_num_steps": 50000}},
        }
        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    """})


def test_deepspeed_json_config_with_warmup(tmp_path):
    (tmp_path / "ds.json").write_text('{"train_batch_size": 8, "scheduler": {"type": "WarmupLR"}}')
    check(tmp_path, {"train.py": """
        import deepspeed
        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")
    """})


# --- across files -----------------------------------------------------------------------------

OPTIM = """
    import torch


    def build_optimizer(model, lr):
        return torch.optim.AdamW(model.parameters(), lr=lr)  {marker}
"""


def test_warmup_in_an_importing_file(tmp_path):
    check(tmp_path, {
        "optim.py": OPTIM.replace("{marker}", ""),
        "train.py": """
            from transformers import AutoModel, get_cosine_schedule_with_warmup

            from optim import build_optimizer

            model = AutoModel.from_pretrained("bert-base-uncased")
            optimizer = build_optimizer(model, 1e-4)
            scheduler = get_cosine_schedule_with_warmup(optimizer, 1000, 100_000)
        """,
    })


def test_no_warmup_in_the_importing_file(tmp_path):
    check(tmp_path, {
        "optim.py": OPTIM.replace("{marker}", "# expect: TL304"),
        "train.py": """
            import torch
            from transformers import AutoModel

            from optim import build_optimizer

            model = AutoModel.from_pretrained("bert-base-uncased")
            optimizer = build_optimizer(model, 1e-4)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1000)
        """,
    })


def test_warmup_in_an_unconnected_script_does_not_count(tmp_path):
    check(tmp_path, {
        "optim.py": OPTIM.replace("{marker}", "# expect: TL304"),
        "train.py": """
            from transformers import AutoModel

            from optim import build_optimizer

            optimizer = build_optimizer(AutoModel.from_pretrained("bert-base-uncased"), 1e-4)
        """,
        "other.py": """
            import torch

            def schedule(optimizer):
                return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=100)
        """,
    })


def test_warmup_in_a_package_module(tmp_path):
    check(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/optim.py": OPTIM.replace("{marker}", ""),
        "pkg/schedule.py": """
            from transformers import get_linear_schedule_with_warmup

            from .optim import build_optimizer


            def build(model, total):
                optimizer = build_optimizer(model, 1e-4)
                return optimizer, get_linear_schedule_with_warmup(optimizer, total // 20, total)
        """,
        "pkg/model.py": """
            import torch.nn as nn

            encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4), 2)
        """,
    })


# --- options ----------------------------------------------------------------------------------


def test_optimizers_option_reaches_the_rule(tmp_path):
    files = {"train.py": """
        from mylib.optim import Lamb
        from transformers import AutoModel

        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = Lamb(model.parameters(), lr=1e-3)  # expect: TL304
    """}
    assert lint(tmp_path, files, [CODE]) == []
    config = """
        [tool.tlint.rules.missing-warmup]
        optimizers = ["mylib.optim.Lamb"]
    """
    assert lint(tmp_path, files, [CODE], config=config) == expected(files, CODE)


def test_warmup_schedulers_option_reaches_the_facts(tmp_path):
    files = {"train.py": """
        import torch
        from transformers import AutoModel

        from mylib import ramp

        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # expect: TL304
        ramp.install(optimizer, steps=1000)
    """}
    check(tmp_path, files)
    config = """
        [tool.tlint.rules.missing-warmup]
        warmup-schedulers = ["mylib.ramp.install"]
    """
    assert lint(tmp_path, files, [CODE], config=config) == []


def test_option_reassigned_after_parsing_is_unknown(tmp_path):
    check(tmp_path, {"train.py": """
        import argparse

        import torch
        from transformers import AutoModel, get_scheduler

        parser = argparse.ArgumentParser()
        parser.add_argument("--num_warmup_steps", type=int, default=0)
        parser.add_argument("--warmup_ratio", type=float, default=0.1)
        args = parser.parse_args()
        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.AdamW(model.parameters())
        if args.warmup_ratio:
            args.num_warmup_steps = int(args.warmup_ratio * 10_000)
        scheduler = get_scheduler("linear", optimizer, num_warmup_steps=args.num_warmup_steps, num_training_steps=10_000)
    """})


def test_lightning_hparams_default(tmp_path):
    check(tmp_path, {"module.py": """
        import lightning.pytorch as pl
        import torch
        from transformers import AutoModel, get_linear_schedule_with_warmup


        class Module(pl.LightningModule):
            def __init__(self, lr=1e-4, warmup_steps=0):
                super().__init__()
                self.save_hyperparameters()
                self.warmup_steps = warmup_steps
                self.model = AutoModel.from_pretrained("bert-base-uncased")

            def configure_optimizers(self):
                optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)  # expect: TL304
                scheduler = get_linear_schedule_with_warmup(optimizer, self.hparams.warmup_steps, 10_000)
                return [optimizer], [scheduler]
    """})


def test_test_files_are_not_judged(tmp_path):
    from tests.rules.conftest import lint

    source = """
        import torch
        from transformers import AutoModel


        def test_adamw_step():
            model = AutoModel.from_pretrained("tiny")
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model(**{"input_ids": torch.ones(1, 4, dtype=torch.long)}).last_hidden_state.sum().backward()
            optimizer.step()
    """
    assert lint(tmp_path, {"tests/test_models.py": source}, ["TL304"]) == []
    assert lint(tmp_path / "x", {"train.py": source}, ["TL304"]) == [("train.py", 7, "TL304")]


# --- issue 20: benchmark runs, trainers that only evaluate ------------------------------


@pytest.mark.parametrize(("file", "function", "flagged"), [
    ("train.py", "build", True),
    ("benchmarks.py", "build", False),
    ("train.py", "profile_memory", False),
])
def test_benchmark_optimisers_are_not_training(tmp_path, file, function, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {file: f"""
        import torch
        from transformers import AutoModel


        def {function}():
            model = AutoModel.from_pretrained("bert-base-uncased")
            return torch.optim.AdamW(model.parameters(), lr=1e-4){marker}
    """})


@pytest.mark.parametrize(("calls", "flagged"), [
    ("trainer.evaluate(); trainer.predict(test_set)", False),
    ("trainer.predict(test_set); trainer.train()", True),
])
def test_training_arguments_of_a_trainer_that_only_evaluates(tmp_path, calls, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"run.py": f"""
        from transformers import AutoModel, Trainer, TrainingArguments


        def run(test_set):
            model = AutoModel.from_pretrained("bert-base-uncased")
            trainer = Trainer(model, TrainingArguments(output_dir="out")){marker}
            {calls}
    """})


@pytest.mark.parametrize(
    ("default", "flagged"),
    [('"AdamW"', True), ('"Adam"', True), ('"SGD"', False), ('"RAdam"', False), ("None", False)],
)
def test_optimizer_named_by_a_cli_default(tmp_path, default, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import argparse

        import torch
        import torch.nn as nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--optim", default={default})
        args = parser.parse_args()
        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
        optimizer_cls = getattr(torch.optim, args.optim)
        optimizer = optimizer_cls(model.parameters(), lr=3e-4){marker}
    """})


@pytest.mark.parametrize(("warmup", "flagged"), [("0", True), ("100", False), ("args.warmup", False)])
def test_hand_written_warmup_by_value(tmp_path, warmup, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"model.py": f"""
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=3e-4){marker}
    """, "train.py": f"""
        import argparse

        from model import Net

        parser = argparse.ArgumentParser()
        parser.add_argument("--warmup", type=int)
        args = parser.parse_args()
        warmup_steps = {warmup}
        model = Net()
        optimizer = model.configure_optimizers()
        for step, batch in enumerate(loader):
            scale = step / warmup_steps if step < warmup_steps else 1.0
            for group in optimizer.param_groups:
                group["lr"] = 3e-4 * scale
            model(batch).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("warmup", "flagged"), [("0", True), ("500", False)])
def test_lambda_function_of_the_file_judged_by_its_warmup_length(tmp_path, warmup, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"module.py": f"""
        import lightning.pytorch as pl
        import torch
        from transformers import AutoModelForCausalLM


        class Module(pl.LightningModule):
            def __init__(self, lr=1e-4, max_steps=100_000, warmup_steps={warmup}):
                super().__init__()
                self.save_hyperparameters()
                self.model = AutoModelForCausalLM.from_pretrained("gpt2")

            def configure_optimizers(self):
                optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr){marker}
                warmup_steps = self.hparams.warmup_steps

                def lr_lambda(step):
                    if step < warmup_steps:
                        return step / max(1, warmup_steps)
                    return max(0.0, 1.0 - (step - warmup_steps) / self.hparams.max_steps)

                scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
                return [optimizer], [{{"scheduler": scheduler, "interval": "step"}}]
    """})


@pytest.mark.parametrize(
    ("scheduler", "flagged"),
    [
        ("scheduler = LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / (WARMUP_STEPS + 1)))", True),
        # a scheduler of another library or of the project, given its warmup length
        ("scheduler = build_scheduler(optimizer, warmup_steps=WARMUP_STEPS, total_steps=TOTAL)", True),
        ("scheduler = build_scheduler(optimizer, num_warmup_steps=500, total_steps=TOTAL)", False),
        ("scheduler = build_scheduler(optimizer, warmup_lr_init=0.0, total_steps=TOTAL)", False),  # a start value
        ("scheduler = build_scheduler(optimizer, TOTAL)", False),  # shape unknown
        # a masking schedule takes no optimiser: no learning rate to ramp
        ("mask_ratio = cosine_schedule(torch.rand(8))", True),
        ("scheduler = build_scheduler(**scheduler_kwargs)", False),  # may be given the optimiser
    ],
)
def test_schedules_judged_by_their_warmup_length(tmp_path, scheduler, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch
        import torch.nn as nn
        from torch.optim.lr_scheduler import LambdaLR

        from mylib.schedules import build_scheduler, cosine_schedule

        WARMUP_STEPS = 0
        TOTAL = 10_000

        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4){marker}
        {scheduler}
    """})


@pytest.mark.parametrize(("choices", "flagged"), [(("torch.optim.AdamW", "Lion"), True),
                                                  (("torch.optim.SGD", "torch.optim.Adagrad"), False)])
def test_optimizer_class_chosen_by_a_config_string(tmp_path, choices, flagged):
    marker = "  # expect: TL304" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch
        import torch.nn as nn

        from lion_pytorch import Lion


        def build(model, config):
            if config.optimizer == "adamw":
                optimizer_cls = {choices[0]}
            elif config.optimizer == "lion":
                optimizer_cls = {choices[1]}
            else:
                raise ValueError(config.optimizer)
            return optimizer_cls(model.parameters(), lr=config.lr){marker}


        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
    """})
