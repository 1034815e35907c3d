"""TL114 training-loader-not-shuffled: the `DataLoader` that feeds training draws its
map-style dataset in order.

A `torch.utils.data.DataLoader` with neither `shuffle=True` (absent, or known False through
the bindings view) nor a `sampler`/`batch_sampler`, that feeds training: the name it is
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
    severity = "warning"
    # off by default: on bench/ecosystem, accelerate's parallelism and throughput examples read
    # their data in order on purpose (5 findings judged fp), against 1 tp (BERT-pytorch)
    default_enabled = False
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
            if dataset is None or self._iterable_or_ordered(ctx, dataset.value):
                continue
            names = self._names(index, call)
            if any(_says(n, _EVAL_PARTS, ("val", "eval", "test")) or _parts(n) & _ORDERED_PARTS for n in names):
                continue
            if not any(_says(n, _TRAIN_PARTS, ("train",)) for n in names):
                if iterated is None:
                    iterated = self._iterated_by_training(ctx)
                if not any(n in iterated for n in names):
                    continue
            ctx.report(call, "this DataLoader feeds training but draws its dataset in order (no shuffle=True, no "
                             "sampler): every epoch sees the same batches in the same order, and any ordering in the "
                             "data (by class, length, source, date) becomes a schedule the model follows; pass "
                             "shuffle=True", fix=self._fix(ctx, call))

    @staticmethod
    def _fix(ctx: FileContext, call: cst.Call):
        shuffle = get_arg(call, "shuffle", 2)
        if shuffle is not None:
            if literal_value(shuffle.value, None) is False:
                return fixes.fix("unsafe", "Set `shuffle=True`", fixes.replace(shuffle.value, "True"))
            return None
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
