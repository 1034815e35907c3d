"""Unit tests of `tlint.views.training`: loops, events, conditions, constructions, literals."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
import pytest

from tlint.config import default_settings
from tlint.source import FileIndex
from tlint.views.training import (
    NO_WARMUP,
    UNKNOWN,
    UNKNOWN_WARMUP,
    WARMUP,
    TrainingView,
    warmup_sites,
)


def view_of(source: str) -> TrainingView:
    return TrainingView(FileIndex(cst.parse_module(textwrap.dedent(source).lstrip("\n"))))


def code(view: TrainingView, node: cst.CSTNode) -> str:
    return view.index.module.code_for_node(node).strip()


def kinds(loop) -> list[str]:
    return [event.kind for event in loop.events]


# --- loops and events ---------------------------------------------------------------------


def test_events_in_evaluation_order_with_helpers_inlined():
    view = view_of("""
        import torch

        def compute_loss(model, batch, criterion):
            return criterion(model(batch["x"]), batch["y"])

        def update(model, optimizer, scheduler):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()

        def train(model, loader, optimizer, scheduler, criterion):
            model.train()
            for batch in loader:
                loss = compute_loss(model, batch, criterion)
                loss.backward()
                update(model, optimizer, scheduler)
    """)
    [loop] = view.loops
    assert kinds(loop) == ["forward", "loss", "backward", "clip", "optimizer_step", "scheduler_step", "zero_grad"]
    clip = loop.first("clip")
    assert [code(view, call) for call in clip.via] == ["update(model, optimizer, scheduler)"]
    assert code(view, clip.site) == "update(model, optimizer, scheduler)"
    assert loop.first("backward").via == ()
    assert not loop.is_step_function and loop.epoch_loop is None
    assert {f.name.value for f in loop.helpers} == {"compute_loss", "update"}


def test_transitive_helpers_and_methods():
    view = view_of("""
        class Runner:
            def training_step(self, batch):
                loss = self.model(**batch).loss
                self.accelerator.backward(loss)
                self._step()

            def _step(self):
                self.optimizer.step()
                self.lr_scheduler.step()

            def fit(self, loader):
                for batch in loader:
                    self.training_step(batch)
    """)
    [loop] = view.loops
    assert code(view, loop.node).startswith("for batch in loader")
    assert kinds(loop) == ["forward", "backward", "optimizer_step", "scheduler_step"]
    assert len(loop.first("optimizer_step").via) == 2


def test_conditions_and_contexts():
    view = view_of("""
        import torch

        def train(model, loader, optimizer, accum, use_clip):
            for i, (x, y) in enumerate(loader):
                with torch.autocast("cuda"):
                    loss = model(x, y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    if use_clip:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
                else:
                    print("accumulating")
    """)
    [loop] = view.loops
    step = loop.first("optimizer_step")
    assert [code(view, c.test) for c in step.conditions] == ["(i + 1) % accum == 0"]
    assert [code(view, c.test) for c in loop.first("clip").conditions] == ["(i + 1) % accum == 0", "use_clip"]
    assert loop.first("backward").conditions == ()
    assert [code(view, c) for c in loop.first("forward").contexts] == ['torch.autocast("cuda")']


def test_else_branch_condition_is_negated():
    view = view_of("""
        def train(model, loader, optimizer, scaler, amp):
            for batch in loader:
                loss = model(batch)
                if amp:
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                else:
                    loss.backward()
                    optimizer.step()
    """)
    [loop] = view.loops
    first, second = loop.of("optimizer_step")
    assert code(view, first.node) == "scaler.step(optimizer)" and not first.conditions[0].negated
    assert code(view, second.node) == "optimizer.step()" and second.conditions[0].negated


def test_while_loop():
    view = view_of("""
        step = 0
        while step < max_steps:
            loss = model(next(batches))
            loss.backward()
            opt.step()
            opt.zero_grad()
            step += 1
    """)
    [loop] = view.loops
    assert isinstance(loop.node, cst.While)
    assert kinds(loop) == ["forward", "backward", "optimizer_step", "zero_grad"]


def test_nested_epoch_and_batch_loops():
    view = view_of("""
        def train(model, loader, optimizer, scheduler, epochs):
            for epoch in range(epochs):
                model.train()
                for batch in loader:
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                scheduler.step()
                model.eval()
    """)
    [loop] = view.loops
    assert code(view, loop.node).startswith("for batch in loader")
    assert code(view, loop.epoch_loop).startswith("for epoch in range(epochs)")
    assert loop.outer == (loop.epoch_loop,)
    assert not loop.has("scheduler_step")
    epoch = view.iteration(loop.epoch_loop)
    assert [(e.kind, e.loop_depth) for e in epoch] == [
        ("train", 0), ("forward", 1), ("backward", 1), ("optimizer_step", 1), ("zero_grad", 1),
        ("scheduler_step", 0), ("eval", 0),
    ]
    assert epoch[1].loops == (loop.node,)


def test_epoch_loop_in_the_caller():
    view = view_of("""
        def train_one_epoch(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()

        def main(model, loader, optimizer, scheduler):
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
                scheduler.step()
    """)
    [loop] = view.loops
    assert code(view, loop.node).startswith("for batch in loader")
    assert code(view, loop.epoch_loop).startswith("for epoch in range(10)")


def test_accumulation_micro_steps_make_the_outer_loop_the_training_loop():
    view = view_of("""
        for it in range(max_iters):
            for micro in range(grad_accum):
                loss = model(*get_batch()) / grad_accum
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    """)
    [loop] = view.loops
    assert code(view, loop.node).startswith("for it in range")
    backward = loop.first("backward")
    assert backward.loop_depth == 1 and code(view, backward.loops[0]).startswith("for micro")
    assert loop.first("optimizer_step").loop_depth == 0


def test_step_function_whose_loop_is_elsewhere():
    view = view_of("""
        import lightning.pytorch as pl

        class Module(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                self.manual_backward(self(batch))
                opt.step()
                opt.zero_grad()
    """)
    [loop] = view.loops
    assert loop.is_step_function and loop.node.name.value == "training_step"
    assert kinds(loop) == ["forward", "backward", "optimizer_step", "zero_grad"]
    [module] = view.lightning_modules
    assert module.manual_optimization and "training_step" in module.methods


def test_only_the_outermost_step_function_is_kept():
    view = view_of("""
        def inner(model, batch, optimizer):
            model(batch).backward()
            optimizer.step()

        def outer(model, batch, optimizer):
            inner(model, batch, optimizer)
    """)
    assert [loop.node.name.value for loop in view.loops] == ["outer"]


def test_recursive_helpers_terminate():
    view = view_of("""
        def step(model, batch, optimizer, depth):
            if depth:
                return step(model, batch, optimizer, depth - 1)
            model(batch).backward()
            optimizer.step()

        for batch in loader:
            step(model, batch, optimizer, 3)
    """)
    [loop] = view.loops
    assert kinds(loop) == ["forward", "backward", "optimizer_step"]


def test_lbfgs_closure_is_inlined_before_the_step():
    view = view_of("""
        for x, y in loader:
            def closure():
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                return loss
            optimizer.step(closure)
    """)
    [loop] = view.loops
    assert kinds(loop) == ["zero_grad", "forward", "loss", "backward", "optimizer_step"]


def test_what_is_an_optimizer_step():
    view = view_of("""
        import deepspeed
        import torch

        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        warm = torch.optim.lr_scheduler.LinearLR(opt)
        adam = torch.optim.Adam(params)
        engine, ds_opt, _, ds_sched = deepspeed.initialize(model=net, config=cfg)
        for batch in loader:
            engine.backward(engine(batch))
            engine.step()
            sched.step()
            warm.step()
            lr_scheduler.step()
            adam.step()
            env.step(action)
            optimizers[0].step()
            p.grad = None
    """)
    [loop] = view.loops
    steps = [(event.kind, code(view, event.node)) for event in loop.events if "step" in event.kind]
    assert steps == [
        ("optimizer_step", "engine.step()"),
        ("scheduler_step", "sched.step()"),
        ("scheduler_step", "warm.step()"),
        ("scheduler_step", "lr_scheduler.step()"),
        ("optimizer_step", "adam.step()"),
        ("optimizer_step", "optimizers[0].step()"),
    ]
    assert code(view, loop.first("zero_grad").node) == "p.grad = None"


def test_the_name_gate_admits_every_event_of_its_kinds():
    # `may_be` (the cheap gate of `wrapper_functions`) must never turn away a call that
    # `event_kind` classifies as one of the gated kinds, whatever its spelling.
    view = view_of("""
        import torch
        import torch_xla.core.xla_model as xm
        from torch.nn.utils import clip_grad_norm_ as clip
        from torch.nn.utils.clip_grad import clip_grad_value_
        from torch_xla.core.xla_model import optimizer_step as xla_step

        def wrapped(model, opt, sched, scaler, engine):
            clip(model.parameters(), 1.0)
            clip_grad_value_(model.parameters(), 1.0)
            torch.nn.utils.clip_grad_norm(model.parameters(), 1.0)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            self.clip_gradients(opt, 1.0)
            for p in model.parameters():
                p.grad.data.clamp_(-1, 1)
            xm.optimizer_step(opt)
            xla_step(opt)
            scaler.step(opt)
            engine.step()
            optimizers[0].step()
            sched.step()
            model(batch)
            print(opt)
            getattr(opt, "step")()
    """)
    gated = ("clip", "optimizer_step", "scheduler_step")
    seen = set()
    for call in view.index.calls:
        kind = view.event_kind(call)
        if kind in gated:
            seen.add(kind)
            assert view.may_be(call, (kind,)), code(view, call)
    assert seen == set(gated)
    turned_away = [code(view, call) for call in view.index.calls if not view.may_be(call, gated)]
    assert sorted(turned_away) == sorted(
        ["model.parameters()"] * 5 + ["model(batch)", "print(opt)", 'getattr(opt, "step")()', 'getattr(opt, "step")'])
    # a kind without a name table is never gated
    assert all(view.may_be(call, ("backward",)) for call in view.index.calls)


def test_no_backward_means_no_loops():
    view = view_of("""
        for batch in loader:
            optimizer.step()
    """)
    assert view.loops == []


# --- constructions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "warmup"),
    [
        ("LambdaLR(opt, lambda s: min(1.0, s / 100))", WARMUP),
        ("LambdaLR(opt, lambda e: 0.9 ** e)", NO_WARMUP),
        ("LambdaLR(opt, schedule_fn)", WARMUP),
        ("LinearLR(opt)", WARMUP),
        ("LinearLR(opt, start_factor=1.0, end_factor=0.0)", NO_WARMUP),
        ("ConstantLR(opt)", WARMUP),
        ("OneCycleLR(opt, max_lr=1e-3, total_steps=100)", WARMUP),
        ("OneCycleLR(opt, 1e-3, 100, None, None, 0)", NO_WARMUP),
        ("CyclicLR(opt, 1e-5, 1e-3)", WARMUP),
        ("CosineAnnealingWarmRestarts(opt, 10)", NO_WARMUP),
        ("ReduceLROnPlateau(opt)", NO_WARMUP),
        ("SequentialLR(opt, [LinearLR(opt, 0.1), StepLR(opt, 5)], [10])", WARMUP),
        ("SequentialLR(opt, schedulers, [10])", UNKNOWN_WARMUP),
        ("transformers.get_scheduler('linear', opt, 0, 100)", NO_WARMUP),
        ("transformers.get_scheduler('linear', opt, 10, 100)", WARMUP),
        ("transformers.get_scheduler('linear', opt, num_warmup_steps=n, num_training_steps=100)", WARMUP),
        ("transformers.get_scheduler(**kwargs)", UNKNOWN_WARMUP),
        ("transformers.get_constant_schedule(opt)", NO_WARMUP),
        ("transformers.get_constant_schedule_with_warmup(opt, 0)", NO_WARMUP),
        ("transformers.get_inverse_sqrt_schedule(opt)", NO_WARMUP),
        ("timm.scheduler.CosineLRScheduler(opt, t_initial=100, warmup_t=5)", WARMUP),
        ("timm.scheduler.CosineLRScheduler(opt, t_initial=100)", NO_WARMUP),
        ("pytorch_warmup.LinearWarmup(opt, warmup_period=100)", WARMUP),
        ("mysched.build_scheduler(opt, cfg)", UNKNOWN_WARMUP),
        ("WarmupCosine(opt, 10)", WARMUP),
    ],
)
def test_scheduler_classification(call, warmup):
    view = view_of(f"""
        import pytorch_warmup
        import timm.scheduler
        import transformers
        import mysched
        from torch.optim.lr_scheduler import *
        from torch.optim.lr_scheduler import (
            LambdaLR, LinearLR, ConstantLR, OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts,
            ReduceLROnPlateau, SequentialLR, StepLR, LRScheduler,
        )

        class WarmupCosine(LRScheduler):
            pass

        scheduler = {call}
    """)
    site = next(s for s in view.schedulers if s.target == "scheduler")
    assert site.warmup == warmup


def test_optimizer_sites():
    view = view_of("""
        import bitsandbytes as bnb
        import torch
        from torch import optim

        class Module:
            def configure_optimizers(self):
                return optim.AdamW(self.parameters())

        sgd = torch.optim.SGD(params, lr=0.1)
        radam = torch.optim.RAdam(params)
        paged = bnb.optim.PagedAdamW8bit(params)
    """)
    sites = {site.name: site for site in view.optimizers}
    assert set(sites) == {"torch.optim.AdamW", "torch.optim.SGD", "torch.optim.RAdam", "bitsandbytes.optim.PagedAdamW8bit"}
    assert [n for n, s in sites.items() if s.adam_family] == ["torch.optim.AdamW", "bitsandbytes.optim.PagedAdamW8bit"]
    assert sites["torch.optim.AdamW"].function.name.value == "configure_optimizers"
    assert sites["torch.optim.SGD"].target == "sgd"


def test_framework_calls():
    view = view_of("""
        import deepspeed
        import lightning as L
        from accelerate import Accelerator
        from transformers import Trainer, TrainingArguments
        from trl import SFTConfig, SFTTrainer

        args = TrainingArguments(output_dir="out")
        sft = SFTConfig(output_dir="out")
        Trainer(model=m, args=args)
        SFTTrainer(model=m, args=sft)
        L.Trainer(max_epochs=1)
        L.Fabric()
        Accelerator()
        deepspeed.initialize(model=m, config="ds.json")
    """)
    assert len(view.training_arguments) == 2
    assert len(view.hf_trainers) == 2
    assert len(view.lightning_trainers) == 1
    assert len(view.fabrics) == 1 and len(view.accelerators) == 1 and len(view.deepspeed_initializations) == 1


def test_deepspeed_configs(tmp_path):
    (tmp_path / "ds.json").write_text('{"gradient_clipping": 1.0, "scheduler": {"type": "WarmupLR"}}')
    view = view_of("""
        import deepspeed

        base = {"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}}
        deepspeed.initialize(model=a, config=base)
        deepspeed.initialize(model=b, config="ds.json")
        deepspeed.initialize(model=c, config="missing.json")
    """)
    assert view.deepspeed_configs(tmp_path)[0][1:] == []  # a view with no reader reads no file
    from tlint.cache import read_input

    view = TrainingView(view.index, read_input)
    configs, unresolved = view.deepspeed_configs(tmp_path)
    assert [c.clips() for c in configs] == [False, True]
    assert [c.warms_up() for c in configs] == [False, True]
    assert unresolved == 1


# --- literals -------------------------------------------------------------------------------


def test_literals_as_they_run_by_default():
    view = view_of("""
        import argparse
        from dataclasses import dataclass, field

        WARMUP = 100
        A, B = 3, 4

        @dataclass
        class Config:
            warmup_ratio: float = field(default=0.0)
            lr: float = 3e-4

        parser = argparse.ArgumentParser()
        parser.add_argument("--warmup-steps", type=int, default=WARMUP)
        parser.add_argument("--fp16", action="store_true")
        parser.add_argument("--seed", type=int)

        def main(args, cfg, total, scale=2):
            local = 7
            return (args.warmup_steps, args.fp16, args.seed, cfg.warmup_ratio * total, cfg.lr, scale,
                    local, int(0.1 * 1000), A + B, total)
    """)
    result = view.index.functions_by_name["main"][0].body.body[-1].body[0].value
    values = [view.literal(element.value) for element in result.elements]
    assert values == [100, False, UNKNOWN, 0, 3e-4, 2, 7, 100, 7, UNKNOWN]


def test_reassigned_names_are_unknown():
    view = view_of("""
        steps = 0
        if resume:
            steps = 100
        use(steps)
    """)
    call = view.index.calls[-1]
    assert view.literal(call.args[0].value) is UNKNOWN


# --- warmup sites -----------------------------------------------------------------------------


def _ctx(source: str, tmp_path: Path, options: dict | None = None):
    view = view_of(source)
    settings = default_settings(tmp_path)
    if options:
        settings.rule_options["missing-warmup"] = options
    return SimpleNamespace(index=view.index, training=view, path=tmp_path / "train.py", settings=settings,
                           view_options=settings.view_options())


def test_warmup_sites(tmp_path):
    ctx = _ctx("""
        import torch
        from transformers import TrainingArguments, get_linear_schedule_with_warmup

        no = torch.optim.lr_scheduler.StepLR(opt, 10)
        yes = get_linear_schedule_with_warmup(opt, 100, 1000)
        args = TrainingArguments(output_dir="o", warmup_ratio=0.1)
        zero = TrainingArguments(output_dir="o", warmup_steps=0)
        for g in opt.param_groups:
            g["lr"] = base_lr * min(1, step / 500)
    """, tmp_path)
    sites = [code(ctx.training, node) for node in warmup_sites(ctx)]
    assert sites == [
        "get_linear_schedule_with_warmup(opt, 100, 1000)",
        "warmup_ratio=0.1",
        'g["lr"] = base_lr * min(1, step / 500)',
    ]


def test_warmup_sites_read_the_option(tmp_path):
    source = """
        from mylib import ramp
        ramp.install(opt, 100)
    """
    assert list(warmup_sites(_ctx(source, tmp_path))) == []
    assert len(list(warmup_sites(_ctx(source, tmp_path, {"warmup-schedulers": ["mylib.ramp.install"]})))) == 1


# --- queries added for TL302-TL316 ----------------------------------------------------------


def test_scale_event_and_branch_exclusion():
    view = view_of("""
        def run(model, batch, optimizer, scaler, use_amp):
            loss = model(**batch).loss
            if use_amp:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
            else:
                loss.backward()
                optimizer.step()
    """)
    [loop] = view.loops
    scale = loop.first("scale")
    plain_backward = loop.of("backward")[1]
    assert scale is not None and scale.excludes(plain_backward)
    assert not scale.excludes(loop.of("backward")[0])
    assert [code(view, view.optimizer_of(e)) for e in loop.of("optimizer_step")] == ["optimizer", "optimizer"]


def test_origin_resolve_and_grad_disabled():
    view = view_of("""
        import torch
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()

        @torch.no_grad()
        def evaluate(model, x):
            probs = model(x).softmax(-1)
            return criterion(probs, x)

        def train(model, x):
            with torch.inference_mode():
                a = model(x)
            with torch.set_grad_enabled(False):
                b = model(x)
            return model(x)
    """)
    calls = {code(view, c): c for c in view.index.calls}
    assert view.origin(calls["criterion(probs, x)"].func) == "torch.nn.CrossEntropyLoss"
    probs = calls["criterion(probs, x)"].args[0].value
    assert code(view, view.resolve(probs)) == "model(x).softmax(-1)"
    disabled = [view.grad_disabled(c) for c in view.index.calls if code(view, c) == "model(x)"]
    assert disabled == [True, True, True, False]


def test_literals_of_infinity_and_callers():
    view = view_of("""
        import math

        A = float("inf")
        B = math.inf

        def helper():
            pass

        def main():
            helper()
    """)
    values = {a.targets[0].target.value: a.value for a in view.index.assignments}
    assert view.literal(values["A"]) == float("inf") and view.literal(values["B"]) == float("inf")
    [helper] = [f for f in view.index.functions if f.name.value == "helper"]
    assert [code(view, c) for c in view.callers(helper)] == ["helper()"]


def test_pretrained_tokenizer_is_not_a_model():
    view = view_of("""
        from transformers import AutoModel, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        model = AutoModel.from_pretrained("gpt2")
    """)
    assert [code(view, c) for c in view.calls_of("model")] == ['AutoModel.from_pretrained("gpt2")']


# --- what a receiver holds, through ctx.bindings and ctx.calls (issue 19) ------------------


def test_roles_of_parameters_come_from_every_call_site():
    view = view_of("""
        import torch

        def run(model, o, s, loader):
            for batch in loader:
                model(batch).loss.backward()
                o.step()
                s.step()
                o.zero_grad()

        def main(model, loader):
            opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
            sched = torch.optim.lr_scheduler.LinearLR(opt)
            run(model, opt, sched, loader)
    """)
    [loop] = view.loops
    assert kinds(loop) == ["forward", "backward", "optimizer_step", "scheduler_step", "zero_grad"]


def test_role_unknown_when_call_sites_disagree():
    view = view_of("""
        import torch

        def tick(x):
            x.step()

        tick(torch.optim.AdamW(params))
        tick(torch.optim.lr_scheduler.LinearLR(opt))
    """)
    step = next(c for c in view.index.calls if view.index.module.code_for_node(c.func) == "x.step")
    assert view.event_kind(step) is None


def test_a_wrappers_step_method_is_inlined_through_its_instance():
    view = view_of("""
        class Stepper:
            def __init__(self, optimizer):
                self.optimizer = optimizer

            def advance(self):
                self.optimizer.step()
                self.optimizer.zero_grad()

        class Other:
            def advance(self):
                pass

        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.helper = Stepper(optimizer)

            def fit(self, loader):
                for batch in loader:
                    loss = self.model(batch).loss
                    loss.backward()
                    self.helper.advance()
    """)
    [loop] = view.loops
    assert kinds(loop) == ["forward", "backward", "optimizer_step", "zero_grad"]


def test_self_attribute_value_set_in_init_reaches_another_method():
    view = view_of("""
        class Trainer:
            def __init__(self, accum=1):
                self.accum = accum

            def fit(self):
                return self.accum

        trainer = Trainer(accum=8)
    """)
    ret = next(n for n in view.index.order if type(n) is cst.Return)
    assert view.literal(ret.value) == 8
