"""What the training set-up of a file is used for: benchmark and profiling runs (not
training runs to judge), throughput runs, and trainers that only evaluate or predict. A mixin of
`tlint.views.training.TrainingView`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, snake_parts, walk

if TYPE_CHECKING:
    from tlint.source import FileIndex
    from tlint.views.bindings import BindingsView

_BENCHMARK_PREFIXES = ("bench", "profil")
_PROFILERS = ("torch.profiler.", "torch.autograd.profiler.")
_TRAINS = frozenset({"train", "fit"})
_ONLY_EVALUATES = frozenset({"evaluate", "predict", "test", "validate"})
# what a throughput measure is called: `model_flops_per_token`, `mfu`, `tokens_per_second`
_THROUGHPUT_PARTS = frozenset({"flops", "tflops", "gflops", "mfu", "throughput", "tps"})
_SECONDS = frozenset({"second", "seconds", "sec", "secs", "s"})
# a file that evaluates its model: `.eval()`, `no_grad`, `inference_mode`, `evaluate(...)`
_EVALUATES = ("eval", "evaluate", "no_grad", "inference_mode", "validate", "validation_step")


def says_benchmark(name: str) -> bool:
    """`bench_step`, `benchmarkModel`, `profile_memory`, `profiler`."""
    return any(part.startswith(_BENCHMARK_PREFIXES) for part in snake_parts(name))


def says_throughput(name: str) -> bool:
    """`model_flops_per_token`, `mfu`, `tokens_per_second`, `throughput`."""
    parts = snake_parts(name)
    return bool(_THROUGHPUT_PARTS.intersection(parts)) or ("per" in parts and bool(_SECONDS.intersection(parts)))


class TrainingUsage:
    """`TrainingView`'s judgement of what a loop or a trainer is run for."""

    if TYPE_CHECKING:  # set by TrainingView
        index: FileIndex
        bindings: BindingsView

        @property
        def hf_trainers(self) -> list[cst.Call]: ...

    def benchmark(self, node: cst.CSTNode, path: Path | None = None) -> bool:
        """`node` runs in a benchmark or a profiling run: its file, a function around it,
        or a loop around it (its iterable or target) is named `bench*`/`profil*`, or a
        `with` around it opens a torch profiler."""
        if path is not None and says_benchmark(path.stem):
            return True
        index = self.index
        for around in (node, *index.ancestors(node)):
            if type(around) is cst.FunctionDef and says_benchmark(around.name.value):
                return True
            if type(around) is cst.For and any(type(n) is cst.Name and says_benchmark(n.value)
                                               for part in (around.iter, around.target) for n in walk(part)):
                return True
            if type(around) is cst.With:
                for item in around.items:
                    called = item.item.func if type(item.item) is cst.Call else item.item
                    qualified = index.qualify(called) or ""
                    if qualified.startswith(_PROFILERS) or qualified in ("torch.profiler", "torch.autograd.profiler"):
                        return True
        return False

    def measures_throughput(self, loop: cst.For | cst.While) -> bool:
        """`loop` is a performance run: its body reads a throughput measure (a FLOPs or MFU
        figure, tokens per second) and the file never evaluates the model (no `.eval()`,
        `no_grad`, `inference_mode`, `evaluate`): what it produces is a speed, not a model
        judged on its quality. A training run that also reports its throughput evaluates."""
        identifiers = self.index.identifiers
        if any(name in identifiers for name in _EVALUATES):
            return False
        return any(type(n) is cst.Name and says_throughput(n.value) for n in walk(loop.body))

    def only_evaluates(self, trainer: cst.Call) -> bool:
        """The trainer built by `trainer` is only asked to evaluate, test or predict: at
        least one such method is called on it and neither `train` nor `fit`."""
        methods = self._methods_called_on(trainer)
        return bool(methods) and not methods & _TRAINS and methods <= _ONLY_EVALUATES | {"save_model", "log_metrics"}

    def arguments_only_evaluate(self, arguments: cst.Call) -> bool:
        """Every trainer of this file given these `TrainingArguments` only evaluates (and
        there is one): nothing is trained with them."""
        trainers = [t for t in self.hf_trainers if self._receives(t, arguments)]
        return bool(trainers) and all(self.only_evaluates(t) for t in trainers)

    def _receives(self, trainer: cst.Call, arguments: cst.Call) -> bool:
        arg = get_arg(trainer, "args", 1)
        if arg is None:
            return False
        if arg.value is arguments:
            return True
        return type(arg.value) is cst.Name and any(b.value is arguments for b in self.bindings.reaching(arg.value))

    def _methods_called_on(self, construction: cst.Call) -> set[str]:
        """Methods called on the names bound to `construction` (`trainer.evaluate()`)."""
        out: set[str] = set()
        parent = self.index.parent(construction)
        if type(parent) is cst.Attribute and type(self.index.parent(parent)) is cst.Call:
            out.add(parent.attr.value)  # `Trainer(...).test(model)`
        for call in self.index.calls:
            func = call.func
            if type(func) is not cst.Attribute or type(func.value) is not cst.Name:
                continue
            if any(b.value is construction for b in self.bindings.reaching(func.value)):
                out.add(func.attr.value)
        return out
