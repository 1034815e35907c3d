"""TL114 training-loader-not-shuffled: the `DataLoader` that feeds training draws its
map-style dataset in order.

A `torch.utils.data.DataLoader` with neither `shuffle=True` (absent, or a name known False
through the bindings view) nor a `sampler`/`batch_sampler`, that feeds training: the name it is
bound to (or the `train_dataloader` method returning it) says "train", or a training loop of
the file iterates it. Silent when

- it is an evaluation loader (`val`, `eval`, `test`, `dev`, `predict` in its name);
- its dataset is iterable (a class deriving from `IterableDataset`/`IterDataPipe`,
  `load_dataset(..., streaming=True)`, `.to_iterable_dataset()`, a WebDataset): the stream
  decides the order;
- the file shuffles its data upstream: `random.shuffle`, a permutation (`np.random
  .permutation`, `torch.randperm`), a shuffled dataset object (`ds.shuffle(...)`,
  `df.sample(frac=...)`), `random_split`, `train_test_split`;
- the data is a sequence or time series whose order is the point (`time`, `series`,
  `temporal`, `forecast`, `window`, `sequential`, `bptt`, `stream` in the dataset's or the
  loader's names);
- the author wrote `shuffle=False` at the call (a literal: the order is their stated choice);
- the dataset is synthetic: a `TensorDataset` (or a tensor) built only from torch's tensor
  factories (`torch.randn`, `torch.arange`, ...): its rows carry no order;
- the training loop that iterates it measures throughput (FLOPs, MFU, tokens per second)
  and the file never evaluates the model: a performance run, not training to judge;
- the file is a test file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.facts_data import DATA_LOADERS

if TYPE_CHECKING:
    from tlint.context import FileContext

_EVAL_PARTS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "testing", "dev", "predict",
                         "prediction", "inference", "infer", "calib", "calibration", "holdout", "score", "scoring"})
_TRAIN_PARTS = frozenset({"train", "training", "trn", "fit", "finetune", "pretrain"})
_ORDERED_PARTS = frozenset({"time", "series", "timeseries", "temporal", "forecast", "forecasting", "window",
                            "windows", "windowed", "sliding", "sequential", "ordered", "bptt", "stream", "streaming",
                            "curriculum", "chronological"})
_SHUFFLES = frozenset({"random.shuffle", "numpy.random.shuffle", "numpy.random.permutation", "torch.randperm",
                       "torch.utils.data.random_split", "sklearn.model_selection.train_test_split",
                       "sklearn.utils.shuffle", "random.sample"})
_SHUFFLE_METHODS = frozenset({"shuffle", "permutation", "random_split", "train_test_split"})
_ITERABLE_BASES = ("IterableDataset", "IterDataPipe", "WebDataset")
# a dataset named as a stream of items (`train_iterator`, `train_iter`, `datapipe`)
_ITERABLE_PARTS = frozenset({"iterator", "iter", "iterable", "pipe", "datapipe", "generator", "gen"})
# torch's tensor factories: a dataset built only from these is synthetic (its rows carry no order)
_FACTORIES = frozenset({f"torch.{name}" for name in (
    "randn", "rand", "randint", "randperm", "normal", "arange", "linspace", "zeros", "ones", "full", "empty", "eye",
    "randn_like", "rand_like", "randint_like", "zeros_like", "ones_like", "full_like", "empty_like")})
# methods that reshape or convert a tensor without reading anything else
_SHAPE_METHODS = frozenset({"view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "flatten", "transpose",
                            "permute", "t", "contiguous", "clone", "to", "long", "int", "float", "half",
                            "bfloat16", "cuda", "cpu", "type"})


def _ignores_index(method: cst.FunctionDef) -> bool:
    """`__getitem__(self, index)` whose body never reads `index`."""
    params = method.params.params
    if len(params) < 2:
        return False
    name = params[1].name.value
    return not any(type(n) is cst.Name and n.value == name for n in walk(method.body))


def _parts(name: str | None) -> set[str]:
    return set(snake_parts(name)) if name else set()


def _says(name: str, words: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    """A word of `name` is one of `words` or starts with a prefix (`trainloader`, `testset`)."""
    return any(p in words or p.startswith(prefixes) for p in _parts(name))


class TrainingLoaderNotShuffled(Rule):
    code = "TL114"
    name = "training-loader-not-shuffled"
    kind = "likely-defect"
    # off by default since issue 25, when accelerate's parallelism and throughput examples (read
    # in order on purpose) were 5 fp against 1 tp on bench/ecosystem; issue 21's guards (literal
    # `shuffle=False`, synthetic data, throughput runs) removed those 5, the default is unchanged
    tokens = frozenset({"dataloader"})  # pre-filter: a `DataLoader` is built here
    summary = "The DataLoader that feeds training has no shuffle=True and no sampler."
    verify_site = "data"
    data_check = "loader-order"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        if ctx.is_test_file:
            return
        loaders = [call for call in index.calls if index.qualify(call.func) in DATA_LOADERS]
        if not loaders or self._shuffled_upstream(ctx):
            return
        iterated: set[str] | None = None
        for call in loaders:
            if not self._unshuffled(ctx, call):
                continue
            dataset = get_arg(call, "dataset", 0)
            if dataset is None or self._iterable_or_ordered(ctx, dataset.value) \
                    or _synthetic(ctx, dataset.value, 0) == _SYNTHETIC:
                continue
            names = self._names(index, call)
            if any(_says(n, _EVAL_PARTS, ("val", "eval", "test")) or _parts(n) & _ORDERED_PARTS for n in names):
                continue
            if not any(_says(n, _TRAIN_PARTS, ("train",)) for n in names):
                if iterated is None:
                    iterated = self._iterated_by_training(ctx)
                if not any(n in iterated for n in names):
                    continue
            if self._throughput_run(ctx, names):
                continue
            ctx.report(call, "this DataLoader feeds training but draws its dataset in order (no shuffle=True, no "
                             "sampler): every epoch sees the same batches in the same order, and any ordering in the "
                             "data (by class, length, source, date) becomes a schedule the model follows; pass "
                             "shuffle=True", fix=self._fix(ctx, call))

    @staticmethod
    def _fix(ctx: FileContext, call: cst.Call):
        if get_arg(call, "shuffle", 2) is not None:
            return None  # `shuffle=flag`: the flag's default is the author's to change
        new = fixes.with_keyword(call, "shuffle", "True")
        return fixes.fix("unsafe", "Pass `shuffle=True`", fixes.replace(call, fixes.code_at(ctx.index, call, new)))

    @staticmethod
    def _unshuffled(ctx: FileContext, call: cst.Call) -> bool:
        """No sampler, and `shuffle` absent or known False; no `**kwargs` that may carry either."""
        if any(arg.star == "**" for arg in call.args):
            return False
        for keyword, position in (("sampler", 3), ("batch_sampler", 4)):
            arg = get_arg(call, keyword, position)
            if arg is not None and not (type(arg.value) is cst.Name and arg.value.value == "None"):
                return False
        shuffle = get_arg(call, "shuffle", 2)
        if shuffle is None:
            return True
        if type(shuffle.value) is cst.Name and shuffle.value.value == "False":
            return False  # `shuffle=False` written at the call: the author chose the order
        return ctx.bindings.value(shuffle.value, None) is False

    @staticmethod
    def _names(index, call: cst.Call) -> list[str]:
        """What the loader is called: the names it is assigned to, the method returning it,
        the keyword it is passed under (`train_dataloaders=`), and its dataset's names."""
        out: list[str] = []
        parent = index.parent(call)
        if type(parent) is cst.Assign:
            out += [n for t in parent.targets if (n := last_name(t.target))]
        elif type(parent) is cst.AnnAssign:
            out += [n for n in (last_name(parent.target),) if n]
        elif type(parent) is cst.Arg and parent.keyword is not None:
            out.append(parent.keyword.value)
        elif type(parent) is cst.DictElement:
            key = literal_value(parent.key, None)
            if isinstance(key, str):
                out.append(key)
        function = index.enclosing_function(call)
        if function is not None and type(parent) is cst.Return:
            out.append(function.name.value)
        dataset = get_arg(call, "dataset", 0)
        if dataset is not None:
            out += [n for node in walk(dataset.value) if type(node) in (cst.Name, cst.Attribute)
                    if (n := last_name(node))]
        return out

    @staticmethod
    def _throughput_run(ctx: FileContext, names: list[str]) -> bool:
        """A training loop of the file iterates the loader and measures throughput, and the
        file never evaluates: a performance run (see `TrainingUsage.measures_throughput`)."""
        for loop in ctx.training.loops:
            node = loop.node
            if type(node) is cst.For and any(type(n) in (cst.Name, cst.Attribute) and last_name(n) in names
                                             for n in walk(node.iter)):
                if ctx.training.measures_throughput(node):
                    return True
        return False

    @staticmethod
    def _iterated_by_training(ctx: FileContext) -> set[str]:
        """Names a training loop of the file iterates (`for batch in loader`, `enumerate(tqdm(loader))`)."""
        out: set[str] = set()
        for loop in ctx.training.loops:
            node = loop.node
            if type(node) is not cst.For:
                continue
            for inner in walk(node.iter):
                if type(inner) in (cst.Name, cst.Attribute):
                    name = last_name(inner)
                    if name:
                        out.add(name)
        return out

    @staticmethod
    def _shuffled_upstream(ctx: FileContext) -> bool:
        index = ctx.index
        for call in index.calls:
            qualified = index.qualify(call.func)
            if qualified in _SHUFFLES:
                return True
            func = call.func
            if type(func) is cst.Attribute and func.attr.value in _SHUFFLE_METHODS:
                return True
            if type(func) is cst.Attribute and func.attr.value == "sample" and get_arg(call, "frac", None) is not None:
                return True  # pandas: `df.sample(frac=1)`
        return False

    def _iterable_or_ordered(self, ctx: FileContext, dataset: cst.BaseExpression) -> bool:
        """The dataset streams (an IterableDataset) or is ordered data (a time series)."""
        current: cst.BaseExpression | None = dataset
        for _ in range(4):
            if current is None:
                return False
            for node in walk(current):
                if type(node) in (cst.Name, cst.Attribute) \
                        and _parts(last_name(node)) & (_ORDERED_PARTS | _ITERABLE_PARTS):
                    return True
            if type(current) is cst.Call:
                return self._iterable_call(ctx, current)
            if type(current) is cst.Name:
                current = ctx.bindings.expression(current)
            elif type(current) is cst.Attribute:
                bound = ctx.bindings.attribute(current)
                current = bound[0].value if len(bound) == 1 else None
            else:
                return False
        return False

    @staticmethod
    def _iterable_call(ctx: FileContext, call: cst.Call) -> bool:
        index = ctx.index
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in ("to_iterable_dataset", "with_format"):
            return func.attr.value == "to_iterable_dataset"
        qualified = index.qualify(func) or ""
        if qualified.endswith(_ITERABLE_BASES):
            return True
        if qualified.endswith("load_dataset"):
            streaming = get_arg(call, "streaming", None)
            return streaming is not None and ctx.bindings.value(streaming.value, None) is not False
        cls = index.classes_by_name.get(func.value) if type(func) is cst.Name else None
        for _ in range(4):
            if cls is None:
                return False
            bases = [index.qualify(b.value) or dotted_name(b.value) or "" for b in cls.bases]
            if any(b.endswith(_ITERABLE_BASES) for b in bases):
                return True
            methods = {s.name.value: s for s in cls.body.body if type(s) is cst.FunctionDef}
            if "__iter__" in methods and "__getitem__" not in methods:
                return True
            if "__getitem__" in methods and _ignores_index(methods["__getitem__"]):
                return True  # it draws a random item whatever the index: the order means nothing
            local = [index.classes_by_name.get(last_name(b.value) or "") for b in cls.bases]
            cls = next((c for c in local if c is not None), None)
        return False


_SYNTHETIC, _CONSTANT = "synthetic", "constant"


def _synthetic(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> str | None:
    """`_SYNTHETIC` when `expr` is data made up by torch's factories (`TensorDataset(ids,
    labels)` with `ids = torch.arange(n * t).view(n, t) + 100`, `torch.randn(64, 16)`),
    reshaped, converted or shifted by constants; `_CONSTANT` for a number; None otherwise."""
    if depth > 10:
        return None
    if type(expr) in (cst.Integer, cst.Float):
        return _CONSTANT
    if type(expr) is cst.Name:
        bound = ctx.bindings.expression(expr)
        if bound is None or type(ctx.index.parent(bound)) is cst.Param:
            return None
        return _synthetic(ctx, bound, depth + 1)
    if type(expr) is cst.UnaryOperation:
        return _synthetic(ctx, expr.expression, depth + 1)
    if type(expr) is cst.BinaryOperation:
        sides = {_synthetic(ctx, expr.left, depth + 1), _synthetic(ctx, expr.right, depth + 1)}
        return None if None in sides else (_SYNTHETIC if _SYNTHETIC in sides else _CONSTANT)
    if type(expr) is not cst.Call:
        return None
    call = expr
    qualified = ctx.index.qualify(call.func) or ""
    if qualified in _FACTORIES:
        return _SYNTHETIC
    if type(call.func) is cst.Attribute and call.func.attr.value in _SHAPE_METHODS:
        return _synthetic(ctx, call.func.value, depth + 1)
    if qualified.endswith("TensorDataset"):
        tensors = [_synthetic(ctx, arg.value, depth + 1) for arg in call.args]
        return _SYNTHETIC if tensors and all(t == _SYNTHETIC for t in tensors) else None
    return None
