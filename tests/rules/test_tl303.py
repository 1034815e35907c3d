"""TL303 clip-without-unscale: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL303"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("clip", "flagged"),
    [
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", True),
        ("model.clip_grad_norm_(1.0)", True),  # FSDP
        ("accelerator.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("fabric.clip_gradients(model, optimizer, max_norm=1.0)", False),
    ],
)
def test_which_clips_are_judged(tmp_path, clip, flagged):
    marker = "  # expect: TL303" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch

        scaler = torch.amp.GradScaler()


        def train(model, loader, optimizer, accelerator, fabric):
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                {clip}{marker}
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """})


def test_no_scaler_no_finding(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_unscale_in_a_helper(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def prepare_clip(scaler, optimizer):
            scaler.unscale_(optimizer)


        def train(model, loader, optimizer, scaler):
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                prepare_clip(scaler, optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """})


def test_unscale_only_under_accumulation_boundary(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer, scaler, accum=4):
            for i, batch in enumerate(loader):
                scaler.scale(model(**batch).loss / accum).backward()
                if (i + 1) % accum == 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
    """})


_LOOP = """
    import torch

    {imports}


    def train(model, loader, optimizer):
        scaler = torch.amp.GradScaler()
        for batch in loader:
            optimizer.zero_grad()
            scaler.scale(model(**batch).loss).backward()
            {call}
            scaler.step(optimizer)
            scaler.update()
"""


@pytest.mark.parametrize(
    ("helper", "flagged"),
    [
        # clips the scaled gradients
        ("def clip_gradients(model, max_norm):\n"
         "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)", True),
        # through the method of an FSDP model
        ("def clip_gradients(model, max_norm):\n"
         "    return model.clip_grad_norm_(max_norm)", True),
        # only when a norm is set: still the scaled gradients
        ("def clip_gradients(model, max_norm):\n"
         "    if max_norm > 0:\n"
         "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)", True),
        # unscales first (when it is given a scaler)
        ("def clip_gradients(model, max_norm, scaler=None, optimizer=None):\n"
         "    if scaler is not None:\n"
         "        scaler.unscale_(optimizer)\n"
         "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)", False),
        # clips only when no scaler is used
        ("def clip_gradients(model, max_norm, use_amp=True):\n"
         "    if not use_amp:\n"
         "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)", False),
        # unscaling by accelerate's own clip
        ("def clip_gradients(model, max_norm, accelerator=None):\n"
         "    accelerator.clip_grad_norm_(model.parameters(), max_norm)", False),
    ],
)
def test_clipping_helper_of_the_same_file(tmp_path, helper, flagged):
    marker = "  # expect: TL303" if flagged else ""
    source = textwrap.dedent(_LOOP).format(imports="", call=f"clip_gradients(model, 1.0){marker}") + "\n\n" + helper
    check(tmp_path, {"train.py": source})


_HELPERS = """
    import torch


    def clip_gradients(model, max_norm):
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


    def clip_unscaled(model, optimizer, max_norm, scaler=None):
        if scaler is not None:
            scaler.unscale_(optimizer)
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


    def maybe_clip(model, max_norm, use_amp):
        if not use_amp:  # under AMP the caller unscales and clips itself
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


    class GradClipper:
        def __init__(self, max_norm):
            self.max_norm = max_norm

        def clip(self, parameters):
            return torch.nn.utils.clip_grad_norm_(parameters, self.max_norm)
"""


@pytest.mark.parametrize(
    ("imports", "call", "flagged"),
    [
        ("from train_utils import clip_gradients", "clip_gradients(model, 1.0)", True),
        ("from train_utils import clip_gradients as clip", "clip(model, 1.0)", True),
        ("import train_utils", "train_utils.clip_gradients(model, 1.0)", True),
        ("from train_utils import GradClipper", "GradClipper(1.0).clip(model.parameters())", True),
        ("from train_utils import clip_unscaled", "clip_unscaled(model, optimizer, 1.0, scaler)", False),
        ("from train_utils import maybe_clip", "maybe_clip(model, 1.0, use_amp=False)", False),
        # the module imported is not the helpers' module (although it imports it)
        ("from other import clip_gradients", "clip_gradients(model, 1.0)", False),
    ],
)
def test_clipping_helper_of_another_module(tmp_path, imports, call, flagged):
    marker = "  # expect: TL303" if flagged else ""
    other = "import train_utils\n\n\ndef clip_gradients(model, max_norm):\n    train_utils.maybe_clip(model, max_norm, False)\n"
    check(tmp_path, {"train_utils.py": _HELPERS, "other.py": other,
                     "train.py": _LOOP.format(imports=imports, call=call + marker)})


def test_wrapper_instance_held_by_a_trainer(tmp_path):
    check(tmp_path, {"train_utils.py": _HELPERS, "trainer.py": """
        import torch

        from train_utils import GradClipper


        class Trainer:
            def __init__(self, model, optimizer, max_norm):
                self.model, self.optimizer = model, optimizer
                self.scaler = torch.amp.GradScaler()
                self.clipper = GradClipper(max_norm)

            def fit(self, loader):
                for batch in loader:
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = self.model(**batch).loss
                    self.scaler.scale(loss).backward()
                    self.clipper.clip(self.model.parameters())  # expect: TL303
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad()
    """})


@pytest.mark.parametrize(
    ("loop", "flagged"),
    [
        # the loop unscales before calling the helper
        ("scaler.scale(loss).backward()\nscaler.unscale_(optimizer)\nclip_gradients(model, 1.0)\n"
         "scaler.step(optimizer)\nscaler.update()", False),
        # bf16: no scaler, plain gradients
        ("loss.backward()\nclip_gradients(model, 1.0)\noptimizer.step()", False),
        # the helper runs after the step (unscaled by it): not this rule's mistake
        ("scaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()\nclip_gradients(model, 1.0)", False),
        # the scaled loss handed to a helper that runs backward and clips
        ("clip_gradients(model, 1.0)  # expect: TL303\nscaler.step(optimizer)\nscaler.update()", True),
    ],
)
def test_where_the_loop_calls_a_clipping_helper_of_another_module(tmp_path, loop, flagged):
    if flagged:  # the scale before the call
        loop = "scaler.scale(loss).backward()\n" + loop
    body = "\n".join("        " + line for line in loop.splitlines())
    check(tmp_path, {"train_utils.py": _HELPERS, "train.py": f"""
import torch

from train_utils import clip_gradients


def train(model, loader, optimizer, scaler):
    for batch in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(**batch).loss
{body}
"""})


@pytest.mark.parametrize("imports", ["from utils import clip_gradients", "from utils.grad import clip_gradients",
                                     "from .utils.grad import clip_gradients"])
def test_helper_in_a_package(tmp_path, imports):
    check(tmp_path, {"pkg/__init__.py": "", "pkg/utils/__init__.py": "from .grad import clip_gradients\n",
                     "pkg/utils/grad.py": _HELPERS,
                     "pkg/train.py": _LOOP.format(imports=imports.replace("from utils", "from pkg.utils"),
                                                  call="clip_gradients(model, 1.0)  # expect: TL303")})


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        # the wrapper clips, then unscales: the clip saw scaled gradients
        ("norm = self.fp32_optimizer.clip_grad_norm(max_norm)  # expect: TL303\n"
         "self.scaler.unscale_(self.optimizer)\nreturn norm", True),
        ("norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)  # expect: TL303\n"
         "if self.scaler.is_enabled():\n    self.scaler.unscale_(self.optimizer)\nreturn norm", True),
        ("self.scaler.unscale_(self.optimizer)\nreturn self.fp32_optimizer.clip_grad_norm(max_norm)", False),
        # one optimiser unscaled and clipped after the other
        ("self.scaler.unscale_(self.opt_g)\ntorch.nn.utils.clip_grad_norm_(self.gen, max_norm)\n"
         "self.scaler.unscale_(self.opt_d)\ntorch.nn.utils.clip_grad_norm_(self.disc, max_norm)", False),
        # the clip runs only without AMP, the unscale only with it
        ("if self.amp:\n    self.scaler.unscale_(self.optimizer)\nelse:\n"
         "    torch.nn.utils.clip_grad_norm_(self.params, max_norm)", False),
        # accelerate's clip unscales itself
        ("self.accelerator.clip_grad_norm_(self.params, max_norm)\nself.accelerator.unscale_gradients()", False),
    ],
)
def test_a_function_that_clips_before_its_unscale(tmp_path, body, flagged):
    lines = "\n".join("        " + line for line in body.splitlines())
    check(tmp_path, {"amp_optimizer.py": f"""
import torch


class AMPOptimizer:
    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def clip_grad_norm(self, max_norm):
{lines}
"""})


def test_a_wrapper_method_named_unscale_before_the_helper(tmp_path):
    check(tmp_path, {"train_utils.py": _HELPERS, "train.py": _LOOP.format(
        imports="from train_utils import clip_gradients",
        call="optimizer.unscale_grads(scaler)\n            clip_gradients(model, 1.0)")})


# An updater (or trainer) method handed the GradScaler clips, then steps through it; the
# scaled backward runs in the engine, another file (rwth-i6/returnn@41c3a52
# returnn/torch/updater.py:185-189, `Updater.step(self, *, grad_scaler=None)`).
_UPDATER = """
    import torch


    class Updater:
        def __init__(self, network, optimizer):
            self.network = network
            self.optimizer = optimizer

        def step(self, *, grad_scaler=None):
            {unscale}
            torch.nn.utils.clip_grad_norm_(self.network.parameters(), 1.0){marker}
            if grad_scaler is not None:
                grad_scaler.step(self.optimizer)
                grad_scaler.update()
            else:
                self.optimizer.step()
"""
_ENGINE = """
    import torch

    from .updater import Updater


    class Engine:
        def __init__(self, network, optimizer):
            self.network = network
            self.updater = Updater(network, optimizer)
            self.grad_scaler = torch.cuda.amp.GradScaler()

        def train_epoch(self, loader):
            for batch in loader:
                self.updater.optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = self.network(batch)
                self.grad_scaler.scale(loss).backward()
                {unscale}
                self.updater.step(grad_scaler=self.grad_scaler)
"""


@pytest.mark.parametrize(
    ("in_updater", "in_engine", "flagged"),
    [
        ("", "", True),
        ("if grad_scaler is not None:\n                grad_scaler.unscale_(self.optimizer)", "", False),  # the fix
        ("", "self.grad_scaler.unscale_(self.updater.optimizer)", False),  # the caller unscales first
    ],
)
def test_a_method_handed_the_scaler_clips_before_its_step(tmp_path, in_updater, in_engine, flagged):
    marker = "  # expect: TL303" if flagged else ""
    check(tmp_path, {
        "engine/__init__.py": "",
        "engine/updater.py": _UPDATER.replace("{unscale}", in_updater).replace("{marker}", marker),
        "engine/engine.py": _ENGINE.replace("{unscale}", in_engine),
    })


def test_a_scaler_held_as_an_attribute_of_the_trainer(tmp_path):
    """The role carried through `__init__`: `self.scaler = scaler`, the step in another method."""
    check(tmp_path, {"trainer.py": """
        import torch


        class Trainer:
            def __init__(self, model, optimizer, scaler: torch.cuda.amp.GradScaler):
                self.model = model
                self.optimizer = optimizer
                self.scaler = scaler

            def backward(self, loss):
                self.scaler.scale(loss).backward()

            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # expect: TL303
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad()
    """})


def test_a_clip_only_without_the_scaler(tmp_path):
    """The clip sits on the other branch of the AMP test: it sees unscaled gradients."""
    check(tmp_path, {"updater.py": """
        import torch


        def step(model, optimizer, scaler=None):
            if scaler is None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            else:
                scaler.step(optimizer)
                scaler.update()
    """})
