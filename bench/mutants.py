"""The mutation benchmark (issue 20): plant one known bug at a time in real training code
and count how often tlint reports it.

    python bench/mutants.py --mirrors /work/.mirror [--operator NAME ...] [--repo OWNER/NAME ...]
                            [--max-per-operator N] [--jobs N] [--json OUT] [--tlint PATH_OR_COMMAND]
    python bench/mutants.py --list-operators

Run by hand, like bench/realbugs.py and bench/ecosystem.py (it is not part of CI: a full
run lints a few hundred mutated trees). The real code is the trees those two benchmarks
pin: every repository of `bench/ecosystem/repos.toml` (its `take`) and the fixed tree of
every case of `bench/realbugs/cases/<family>.toml` for the families of the operators run,
materialised from the mirrors with the
same helpers (`realbugs.materialise`; a mirror is `MIRRORS/owner+name/repo`).

**Operators** (`OPERATORS`, one `Operator` each: a name, the family of rules it probes, the
codes a mutant of it is expected to draw, the words a file must hold to be searched, and a
`sites` function giving the mutations possible in one parsed file). Each mutation is ONE
LibCST edit of one file (`RemoveStatement`, `MoveStatement`, `ReplaceExpression`, all
`cst.CSTTransformer`s keyed on the original node): a gradient clip removed (TL301/TL316),
`model.eval()` removed before an evaluation loop (TL312), a warmup set to 0 (TL304), a
`zero_grad()` removed (TL309/TL310), the scheduler step (one without an argument: not a
`ReduceLROnPlateau` stepped on a metric) moved before the optimiser step (TL305), the clip
moved after the optimiser step (TL302) or before the AMP scaler's `unscale_` (TL303).
Sites are found by the names of the calls (`clip_grad_norm_`, `opt.step()`,
`scheduler.step()`), never by tlint's own analysis, so the benchmark does not grade tlint
against itself. A site must plant a bug: the only clip or reset of its loop
(not one of two copies, not a reset before the loop, not a wrapper's `zero_grad()` passing
the call on), the mode switch of a model (not a loss module's) outside generation code, a
warmup length (not a switch such as `warmup_init`, not one of two spellings in one call).
Data operators (issue 21): the `attention_mask=` of a call that also passes input ids
removed (TL101, or TL103 when the enclosing forward's mask is then unused), a
`key_padding_mask=` argument removed (TL102/TL103); they search only files that mention
padding (not `attention_mask=None`: removing it plants nothing), and run on the fixed trees
of every family's cases (`EVERY_TREE`: masks are passed in model and training code too). The model operators (a causal
mask, a padding mask, the positional addition, the attention scaling removed; a residual
dropped; a norm moved: TL207, TL103, TL205, TL208, TL203, TL201) live in
`bench/mutants_model.py` and are appended here.

**Adding an operator** (model and data families too): write a function `(module: cst.Module,
text: str) -> list[Mutation]` (use `statements_with`, `block_pairs` and the call
predicates below, or your own visitor), and append an `Operator(name, family, expected,
needles, sites, summary)` to `OPERATORS`. `tests/test_mutants_bench.py` runs every
operator on a small in-repository example; give yours one there too.

**Found**: tlint runs (`check --format json --no-cache --select <the expected codes of the
operators run>`) on the mutated file together with the other `.py` files of its folder
that the operators search (at most `FOLDER_FILES`), from the tree's root, once on the
original files and once per mutant. A mutant is found when some file of that run has more
findings of an expected code than the original run had (counted per file, code and
message with its numbers blanked, since lines move: a loop that stops clipping changes
TL316's message). A mutant whose run fails (tlint crashed, or the edit broke the file) is a tool
failure, listed and left out of the figures.

Output: per operator found/total and the ratio, every miss (repository, file, line, what
was changed), tool failures; `--json OUT` writes all of it. Exit status 0; 1 when a
mutant's run is a tool failure; 2 on bad arguments or manifests.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import importlib.util
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

HERE = Path(__file__).resolve().parent
FOLDER_FILES = 12  # files linted with the mutated one (its folder's searched files, first in name order)


def _load(name: str, file: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rb = _load("tlint_bench_realbugs", "realbugs.py")
eco = _load("tlint_bench_ecosystem", "ecosystem.py")


# --------------------------------------------------------------------------- mutations


@dataclass
class Mutation:
    """One edit of one file: `transformer` applied to the parsed module gives the mutant."""

    line: int  # where (1-based), for the report
    what: str  # what was changed, in words
    transformer: cst.CSTTransformer

    def apply(self, module: cst.Module) -> str:
        return module.visit(self.transformer).code


def _body_edit(transformer: cst.CSTTransformer, original: cst.CSTNode, updated: cst.CSTNode,
               block: cst.CSTNode, edit: Callable[[list], list]) -> cst.CSTNode:
    """`updated` with its statement list edited, when `original` is `block` (the list is
    indexed as the original's: nothing below a block's statements is changed here)."""
    if original is not block:
        return updated
    body = edit(list(updated.body))
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    return updated.with_changes(body=body)


class RemoveStatement(cst.CSTTransformer):
    """Remove the statement at `index` of `block` (an empty block gets `pass`)."""

    def __init__(self, block: cst.CSTNode, index: int) -> None:
        super().__init__()
        self.block, self.index = block, index

    def _edit(self, body: list) -> list:
        return body[:self.index] + body[self.index + 1:]

    def leave_IndentedBlock(self, original, updated):
        return _body_edit(self, original, updated, self.block, self._edit)

    def leave_Module(self, original, updated):
        return _body_edit(self, original, updated, self.block, self._edit)


class MoveStatement(cst.CSTTransformer):
    """Move the statement at `index` of `block` to just before the statement at `to`
    (`to` = len(body) moves it to the end; indices are the original block's)."""

    def __init__(self, block: cst.CSTNode, index: int, to: int) -> None:
        super().__init__()
        self.block, self.index, self.to = block, index, to

    def _edit(self, body: list) -> list:
        moved = body[self.index]
        marked = [*body, None]
        out = []
        for position, statement in enumerate(marked):
            if position == self.to:
                out.append(moved)
            if position != self.index and statement is not None:
                out.append(statement)
        return out

    def leave_IndentedBlock(self, original, updated):
        return _body_edit(self, original, updated, self.block, self._edit)

    def leave_Module(self, original, updated):
        return _body_edit(self, original, updated, self.block, self._edit)


class ReplaceExpression(cst.CSTTransformer):
    """Replace one expression node (by identity in the original tree) with `new`."""

    def __init__(self, target: cst.CSTNode, new: cst.BaseExpression) -> None:
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original, updated):
        return self.new if original is self.target else updated


# --------------------------------------------------------------------------- site helpers


def dotted(expr: cst.CSTNode | None) -> str:
    """`a.b.c` of a Name/Attribute chain (subscripts and calls kept as `[]`/`()`), else ""."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{dotted(expr.value)}.{expr.attr.value}"
    if isinstance(expr, cst.Subscript):
        return f"{dotted(expr.value)}[]"
    if isinstance(expr, cst.Call):
        return f"{dotted(expr.func)}()"
    return ""


def callee(call: cst.Call) -> str:
    """The last name of a call's callee (`clip_grad_norm_`, `step`), else ""."""
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""


def receiver(call: cst.Call) -> str:
    """The lower-case dotted text a method is called on (`self.optimizer`), else ""."""
    return dotted(call.func.value).lower() if isinstance(call.func, cst.Attribute) else ""


def is_clip(call: cst.Call) -> bool:
    name = callee(call)
    return name.startswith("clip_grad") or name == "clip_gradients"


def is_scheduler_step(call: cst.Call) -> bool:
    return callee(call) == "step" and "sched" in receiver(call)


def is_optimizer_step(call: cst.Call) -> bool:
    if callee(call) == "optimizer_step":
        return True
    text = receiver(call)
    return callee(call) == "step" and "sched" not in text and any(
        word in text for word in ("opt", "scaler", "engine"))


def is_unscale(call: cst.Call) -> bool:
    return callee(call) in ("unscale_", "unscale_gradients")


def is_zero_grad(call: cst.Call) -> bool:
    return callee(call) == "zero_grad"


def is_eval_switch(call: cst.Call) -> bool:
    return callee(call) == "eval" and not call.args and "trainer" not in receiver(call)


class _Calls(cst.CSTVisitor):
    """The calls under a node, nested functions and classes left out."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    visitor = _Calls()
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return []
    node.visit(visitor)
    return visitor.calls


class _Blocks(cst.CSTVisitor):
    def __init__(self) -> None:
        self.blocks: list[cst.CSTNode] = []

    def visit_Module(self, node: cst.Module) -> None:
        self.blocks.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)


@dataclass
class Parsed:
    """A file parsed for the site functions: its blocks, and where each node starts."""

    module: cst.Module
    blocks: list[cst.CSTNode]
    positions: dict
    parents: dict
    # names the tree raises to a negative power with `**` (`warmup ** -1.5`, see `crash_names`)
    crash_names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, module: cst.Module, crash_names: frozenset[str] = frozenset()) -> Parsed:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        parents = wrapper.resolve(ParentNodeProvider)
        visitor = _Blocks()
        module.visit(visitor)
        return cls(module, visitor.blocks, positions, parents, crash_names)

    def line(self, node: cst.CSTNode) -> int:
        found = self.positions.get(node)
        return found.start.line if found is not None else 0

    def function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function (or method) `node` is in."""
        current = self.parents.get(node)
        while current is not None and not isinstance(current, cst.FunctionDef):
            current = self.parents.get(current)
        return current

    def loop(self, node: cst.CSTNode) -> cst.For | cst.While | None:
        """The innermost loop `node` is in, within its own function."""
        current = self.parents.get(node)
        while current is not None and not isinstance(current, (cst.For, cst.While)):
            if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            current = self.parents.get(current)
        return current

    def scope(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost loop `node` is in, else its function, else the module."""
        return self.loop(node) or self.function(node) or self.module


def delegates(parsed: Parsed, call: cst.Call) -> bool:
    """`call` is the body of a wrapper that passes the same operation on (`def zero_grad(self):
    self.optimizer.zero_grad()`, `def clip_grad_norm(...): return self.inner.clip_grad_norm(...)`):
    not training code of its own."""
    function = parsed.function(call)
    name = callee(call)
    return function is not None and (function.name.value == name or (
        name.startswith("clip") and function.name.value.startswith("clip")))


def alone(parsed: Parsed, call: cst.Call, test: Callable[[cst.Call], bool]) -> bool:
    """`call` is the only call passing `test` in its loop (or function): removing it removes
    the operation, not one of two copies (`if amp: ... else: ...`, a reset before and after)."""
    return sum(1 for other in calls_in_scope(parsed.scope(call)) if test(other)) == 1


def calls_in_scope(node: cst.CSTNode) -> list[cst.Call]:
    """The calls under a loop or function (its body, nested functions left out)."""
    body = node.body if isinstance(node, (cst.FunctionDef, cst.For, cst.While)) else node
    return calls_in(body) if not isinstance(body, cst.Module) else [
        c for statement in body.body for c in calls_in(statement)]


def statements_with(parsed: Parsed, test: Callable[[cst.Call], bool], *, simple_only: bool = True
                    ) -> list[tuple[cst.CSTNode, int, cst.Call]]:
    """(block, index, call) for each statement of a block holding a call that passes
    `test`; with `simple_only`, only a one-line statement (`x.zero_grad()`, `n = clip(...)`)."""
    out = []
    for block in parsed.blocks:
        for index, statement in enumerate(block.body):
            if simple_only and not isinstance(statement, cst.SimpleStatementLine):
                continue
            for call in calls_in(statement):
                if test(call):
                    out.append((block, index, call))
                    break
    return out


def block_pairs(parsed: Parsed, first: Callable[[cst.Call], bool], second: Callable[[cst.Call], bool]
                ) -> list[tuple[cst.CSTNode, int, int, cst.Call, cst.Call]]:
    """(block, i, j, call_i, call_j): statement i of a block holds a `first` call and no
    `second` one, statement j > i the reverse, with no statement between them holding
    either (the nearest such pair of each block)."""
    out = []
    for block in parsed.blocks:
        marks = []
        for statement in block.body:
            calls = calls_in(statement)
            marks.append((next((c for c in calls if first(c)), None), next((c for c in calls if second(c)), None)))
        for i, (a, b) in enumerate(marks):
            if a is None or b is not None:
                continue
            for j in range(i + 1, len(marks)):
                a2, b2 = marks[j]
                if a2 is not None:
                    break
                if b2 is not None:
                    out.append((block, i, j, a, b2))
                    break
    return out


def _code(parsed: Parsed, node: cst.CSTNode) -> str:
    return " ".join(parsed.module.code_for_node(node).split())[:80]


# --------------------------------------------------------------------------- operators


def remove_clip(parsed: Parsed) -> list[Mutation]:
    """The clip of a loop or function that clips once (not a wrapper passing it on)."""
    return [Mutation(parsed.line(call), f"removed `{_code(parsed, call)}`", RemoveStatement(block, index))
            for block, index, call in statements_with(parsed, is_clip)
            if not delegates(parsed, call) and alone(parsed, call, is_clip)]


def _resets(call: cst.Call) -> bool:
    return is_zero_grad(call) or callee(call) == "zero_grad_"


def remove_zero_grad(parsed: Parsed) -> list[Mutation]:
    """The one `zero_grad()` of a loop (a reset before the loop, or one of two in it, is
    not the loop's only reset: removing it plants no bug)."""
    return [Mutation(parsed.line(call), f"removed `{_code(parsed, call)}`", RemoveStatement(block, index))
            for block, index, call in statements_with(parsed, is_zero_grad)
            if parsed.loop(call) is not None and not delegates(parsed, call) and alone(parsed, call, _resets)
            and not _grad_set_to_none(parsed.loop(call))]


def _grad_set_to_none(loop: cst.CSTNode | None) -> bool:
    """The loop also resets by assignment (`p.grad = None`)."""
    found = []

    class Assigns(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets):
                found.append(node)

    if loop is not None:
        loop.visit(Assigns())
    return bool(found)


def _loops(node: cst.CSTNode) -> list[cst.For | cst.While]:
    """The loops under `node`, nested functions left out."""
    found: list[cst.For | cst.While] = []

    class Loops(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.append(node)

        def visit_While(self, node: cst.While) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    node.visit(Loops())
    return found


def _evaluates(loop: cst.For | cst.While, model: str) -> bool:
    """`loop` runs the switched model (its name, `model` or `self.model`, is read in it) and
    does not train (no `backward()` and no `step()`): an evaluation loop, not the training
    loop of a frozen encoder (`encoder.eval()` before it) nor a loop over its parameters."""
    calls = calls_in(loop)
    if any(callee(call) in ("backward", "step", "optimizer_step") for call in calls):
        return False

    class Reads(cst.CSTVisitor):
        seen = False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if dotted(node).lower() == model:
                Reads.seen = True
            return True

        def visit_Name(self, node: cst.Name) -> None:
            if node.value.lower() == model:
                Reads.seen = True

    loop.body.visit(Reads())
    over = calls_in(loop.iter) if isinstance(loop, cst.For) else []
    return Reads.seen and not any(callee(call) in ("parameters", "named_parameters", "modules") and
                                  receiver(call) == model for call in over)


_NO_MODE = ("criterion", "loss", "metric")  # modules without dropout or batch-norm: their switch is a no-op
_NOT_EVALUATION = ("generat", "sampl", "predict", "infer", "decode")  # TL312's document: not evaluation


def remove_eval(parsed: Parsed) -> list[Mutation]:
    """`model.eval()` removed where an evaluation loop of that model follows it in its block
    (one that reads the model and neither runs `backward()` nor steps: not the training loop
    of a frozen encoder, nor a loop over its parameters); not a loss or metric module's
    switch, nor in a generation or sampling function."""
    out = []
    for block, index, call in statements_with(parsed, is_eval_switch):
        function = parsed.function(call)
        if any(word in receiver(call).rsplit(".", 1)[-1] for word in _NO_MODE) or (
                function is not None and any(w in function.name.value.lower() for w in _NOT_EVALUATION)):
            continue
        model = receiver(call)
        if any(_evaluates(loop, model) for later in block.body[index + 1:] for loop in _loops(later)):
            out.append(Mutation(parsed.line(call), f"removed `{_code(parsed, call)}`", RemoveStatement(block, index)))
    return out


def scheduler_before_step(parsed: Parsed) -> list[Mutation]:
    """A scheduler stepped without an argument: one stepped on a metric or an epoch
    (`ReduceLROnPlateau.step(val_score)`) sets its state itself and has no order with the
    optimiser step to break (PyTorch neither warns nor skips a value), so moving it plants
    no TL305 bug."""
    return [Mutation(parsed.line(sched), f"moved `{_code(parsed, sched)}` before `{_code(parsed, step)}`",
                     MoveStatement(block, j, i))
            for block, i, j, step, sched in block_pairs(parsed, is_optimizer_step, is_scheduler_step)
            if not sched.args]


def clip_after_step(parsed: Parsed) -> list[Mutation]:
    return [Mutation(parsed.line(clip), f"moved `{_code(parsed, clip)}` after `{_code(parsed, step)}`",
                     MoveStatement(block, i, j + 1))
            for block, i, j, clip, step in block_pairs(parsed, is_clip, is_optimizer_step)]


def clip_before_unscale(parsed: Parsed) -> list[Mutation]:
    return [Mutation(parsed.line(clip), f"moved `{_code(parsed, clip)}` before `{_code(parsed, unscale)}`",
                     MoveStatement(block, j, i))
            for block, i, j, unscale, clip in block_pairs(parsed, is_unscale, is_clip)]


_WARMUP_ZERO = cst.Integer("0")


def _says_warmup(name: str) -> bool:
    return "warmup" in name.lower().replace("_", "")


def _warmup_length(keyword: str, value: cst.BaseExpression) -> bool:
    """A keyword that gives a warmup its length (not a switch such as Adafactor's `warmup_init`)."""
    return not keyword.endswith("init") and not (isinstance(value, cst.Name) and value.value in ("True", "False"))


def _nonzero(expr: cst.BaseExpression) -> bool:
    return not (isinstance(expr, (cst.Integer, cst.Float)) and float(expr.value.replace("_", "")) == 0)


class _Warmups(cst.CSTVisitor):
    """Expressions that give a warmup its length: a `warmup*=` keyword, the warmup length
    passed to a `*_with_warmup` schedule by position, a `warmup*` variable, field or
    parameter bound to a number, and an option `--warmup*`'s default."""

    def __init__(self) -> None:
        self.sites: list[tuple[cst.BaseExpression, str, set[str]]] = []  # (value, where, names it goes by)
        self.zero_options: set[str] = set()  # `--warmup_steps` options whose default is 0

    def visit_Call(self, node: cst.Call) -> bool:
        name = callee(node)
        if "profiler" in dotted(node.func):
            return False  # `torch.profiler.schedule(warmup=...)`: profiling steps, not a learning rate
        flag = node.args[0].value if node.args else None
        option = isinstance(flag, cst.SimpleString) and flag.value.strip("'\"").startswith("-") \
            and _says_warmup(flag.value) and name == "add_argument"
        keywords = [a.keyword.value for a in node.args if a.keyword is not None and _says_warmup(a.keyword.value)]
        for position, arg in enumerate(node.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if option and keyword == "default" and not _nonzero(arg.value):
                self.zero_options.add(flag.value.strip("'\""))
            if option and keyword == "default" and _nonzero(arg.value):
                flags = {a.value.value.strip("'\"").lstrip("-").replace("-", "_").lower() for a in node.args
                         if a.keyword is None and isinstance(a.value, cst.SimpleString)}
                self.sites.append((arg.value, f"default of {flag.value}", flags))
            elif keyword is not None and _says_warmup(keyword) and _nonzero(arg.value) and len(keywords) == 1 \
                    and _warmup_length(keyword, arg.value):
                self.sites.append((arg.value, f"{keyword}=", {keyword.lower()}))
            elif keyword is None and position == 1 and "with_warmup" in name and _nonzero(arg.value):
                self.sites.append((arg.value, f"the warmup length of {name}", set()))
        return True

    def _bound(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        name = target.value if isinstance(target, cst.Name) else ""
        if value is not None and _says_warmup(name) and isinstance(value, (cst.Integer, cst.Float)) \
                and _nonzero(value):
            self.sites.append((value, f"{name} =", {name.lower()}))

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None:  # `def train(..., warmup_steps=500)`
            self._bound(node.name, node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._bound(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound(node.target, node.value)


def remove_warmup(parsed: Parsed) -> list[Mutation]:
    """Each warmup length set to 0, unless it already runs as 0 by default (`args.warmup_steps`
    whose option in the file defaults to 0: setting it to 0 changes nothing), it is one of
    the alternatives of a scheduler choice (another branch of its `if` chain warms up too:
    the default choice still warms up), or the tree raises it to a negative power (a Noam
    `warmup ** -1.5`: 0 crashes, see `crash_names`)."""
    visitor = _Warmups()
    parsed.module.visit(visitor)
    zero = {flag.lstrip("-").replace("-", "_") for flag in visitor.zero_options}
    values = [expr for expr, _, _ in visitor.sites]
    return [Mutation(parsed.line(expr), f"{where} `{_code(parsed, expr)}` -> 0", ReplaceExpression(expr, _WARMUP_ZERO))
            for expr, where, names in visitor.sites
            if not _runs_as_zero(expr, zero) and not names & parsed.crash_names
            and not _alternative(parsed, expr, values)]


def _runs_as_zero(expr: cst.BaseExpression, zero: set[str]) -> bool:
    """`args.num_warmup_steps` whose option defaults to 0, or a product with one
    (`args.num_warmup_steps * args.gradient_accumulation_steps`)."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in zero
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _runs_as_zero(expr.left, zero) or _runs_as_zero(expr.right, zero)
    return False


def _branches(parsed: Parsed, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The bodies of the `if`/`elif`/`else` chain whose branch holds `node` (its innermost
    one), with the branch holding it first; [] outside any `if`."""
    child, current = node, parsed.parents.get(node)
    while current is not None and not (isinstance(current, (cst.If, cst.Else)) and child is current.body):
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            return []
        child, current = current, parsed.parents.get(current)
    if current is None:
        return []
    top = current
    while isinstance(parsed.parents.get(top), cst.If) and parsed.parents[top].orelse is top:
        top = parsed.parents[top]
    bodies, link = [], top
    while link is not None:
        bodies.append(link.body)
        link = link.orelse if isinstance(link, cst.If) else None
    return [current.body] + [body for body in bodies if body is not current.body]


def _alternative(parsed: Parsed, expr: cst.CSTNode, values: list[cst.CSTNode]) -> bool:
    """Another branch of the `if` chain `expr` sits in also sets a warmup length."""
    branches = _branches(parsed, expr)
    if len(branches) < 2:
        return False

    def inside(node: cst.CSTNode, body: cst.CSTNode) -> bool:
        current = parsed.parents.get(node)
        while current is not None and current is not body:
            current = parsed.parents.get(current)
        return current is body

    return any(inside(other, body) for body in branches[1:] for other in values if other is not expr)


class RemoveArgument(cst.CSTTransformer):
    """Remove one argument (by identity in the original tree) from its call."""

    def __init__(self, call: cst.Call, arg: cst.Arg) -> None:
        super().__init__()
        self.call, self.arg = call, arg

    def leave_Call(self, original, updated):
        if original is not self.call:
            return updated
        keep = [new for old, new in zip(original.args, updated.args, strict=True) if old is not self.arg]
        if keep:  # the last argument keeps no trailing comma it did not have
            last = original.args[-1]
            keep[-1] = keep[-1].with_changes(comma=last.comma)
        return updated.with_changes(args=keep)


_MODEL_WORDS = ("model", "net", "lm", "encoder", "decoder", "transformer", "gpt", "bert", "backbone", "policy",
                "teacher", "student", "critic", "actor")
_ATTENTION_WORDS = ("attn", "attention", "transformer", "encoder", "decoder", "layer", "block")


def _model_like(call: cst.Call, words: Sequence[str]) -> bool:
    """The call runs a model or a module by its name: `model(...)`, `self.encoder(...)`,
    `model.generate(...)`, `self.self_attn(...)` (the name, or for `forward`/`generate` the
    receiver's, holds one of `words`); not a private helper (`self._build(...)`), a class
    (`InputFeatures(...)`) or a tokenizer."""
    func = call.func
    name = callee(call)
    if name in ("forward", "generate", "__call__") and isinstance(func, cst.Attribute):
        name = dotted(func.value).rsplit(".", 1)[-1]
    if not name or name.startswith("_") or name[:1].isupper() or "token" in name.lower():
        return False
    return any(word in name.lower() for word in words)
_KEY_PADDING_KEYWORDS = ("key_padding_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                         "memory_key_padding_mask")


def _none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


class _AllCalls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)


def _calls(parsed: Parsed) -> list[cst.Call]:
    visitor = _AllCalls()
    parsed.module.visit(visitor)
    return visitor.calls


def remove_attention_mask(parsed: Parsed) -> list[Mutation]:
    """`attention_mask=` removed from a model call (by its name: `model(...)`,
    `self.encoder(...)`, `model.generate(...)`) that also passes input ids (`input_ids=`,
    or ids as the first positional argument); not `attention_mask=None` (no mask to lose)."""
    out = []
    for call in _calls(parsed):
        arg = _keyword(call, "attention_mask")
        if arg is None or _none(arg.value) or not _model_like(call, _MODEL_WORDS):
            continue  # removing `attention_mask=None` changes nothing
        ids = _keyword(call, "input_ids") or (call.args[0] if call.args and call.args[0].keyword is None
                                              and not call.args[0].star else None)
        if ids is None or "mask" in dotted(ids.value).lower():
            continue
        out.append(Mutation(parsed.line(arg), f"removed `{_code(parsed, arg)}` from `{_code(parsed, call.func)}(...)`",
                            RemoveArgument(call, arg)))
    return out


def remove_key_padding_mask(parsed: Parsed) -> list[Mutation]:
    """A `key_padding_mask=` (`src_`/`tgt_`/`memory_` too) removed from the call of an
    attention or transformer module by its name (`self.self_attn(...)`, `self.encoder(...)`,
    `layer(...)`)."""
    out = []
    for call in _calls(parsed):
        if not _model_like(call, _ATTENTION_WORDS):
            continue
        for keyword in _KEY_PADDING_KEYWORDS:
            arg = _keyword(call, keyword)
            if arg is not None and not _none(arg.value):
                out.append(Mutation(parsed.line(arg), f"removed `{_code(parsed, arg)}` from "
                                    f"`{_code(parsed, call.func)}(...)`", RemoveArgument(call, arg)))
    return out


@dataclass(frozen=True)
class Operator:
    name: str
    family: str  # the rule family probed: training | model | data
    expected: tuple[str, ...]  # a mutant is found by a new finding of one of these codes
    needles: tuple[str, ...]  # a file holding none of these words has no site (a cheap pre-filter)
    sites: Callable[[Parsed], list[Mutation]]
    summary: str = field(default="")
    # and one of these too, when given (the file trains or sets training up)
    requires: tuple[str, ...] = ()
    # files not searched: a name (of the file or a folder above it) starting with one of these
    skip_names: tuple[str, ...] = ("test", "bench", "profil")

    def searches(self, path: str, text: str) -> bool:
        """Whether `path` (relative, `/`-separated) with this text may hold a site."""
        if any(part.lower().startswith(self.skip_names) for part in path.split("/")):
            return False
        return any(n in text for n in self.needles) and (not self.requires or any(w in text for w in self.requires))


OPERATORS: list[Operator] = [
    Operator("remove-clip", "training", ("TL301", "TL316"), ("clip_grad",), remove_clip,
             "a gradient-clipping statement removed"),
    Operator("remove-eval", "training", ("TL312",), (".eval()",), remove_eval,
             "`model.eval()` removed before the evaluation loop that follows it",
             # sampling and generation scripts are not evaluation (TL312's document)
             skip_names=("test", "bench", "profil", "sample", "generat", "infer", "predict", "demo")),
    Operator("remove-warmup", "training", ("TL304",), ("warmup",), remove_warmup,
             "a warmup length (keyword, schedule argument, variable, option default) set to 0",
             requires=("optim", "sched", "Trainer", "Arguments", "backward")),
    Operator("remove-zero-grad", "training", ("TL309", "TL310"), ("zero_grad",), remove_zero_grad,
             "a `zero_grad()` statement removed"),
    Operator("scheduler-before-step", "training", ("TL305",), (".step(",), scheduler_before_step,
             "the scheduler step moved before the optimiser step of its block"),
    Operator("clip-after-step", "training", ("TL302",), ("clip_grad",), clip_after_step,
             "the clip moved after the optimiser step of its block"),
    Operator("clip-before-unscale", "training", ("TL303",), ("unscale_",), clip_before_unscale,
             "the clip moved before the AMP scaler's `unscale_` of its block"),
    # A mask matters only where sequences are padded: files that say nothing of padding are
    # not searched (a mask of a project that never pads is all ones, and dropping it is no bug).
    Operator("remove-attention-mask", "data", ("TL101", "TL103"), ("attention_mask=",), remove_attention_mask,
             "the `attention_mask=` of a model call that gets input ids removed",
             requires=("pad",)),
    Operator("remove-key-padding-mask", "data", ("TL102", "TL103"), ("key_padding_mask=",), remove_key_padding_mask,
             "a `key_padding_mask=` (`src_`/`tgt_`/`memory_`) argument removed"),
]


OPERATORS += _load("tlint_bench_mutants_model", "mutants_model.py").operators(sys.modules[__name__])


_NEGATIVE_POWER = re.compile(r"(\w*warm_?up\w*)\s*\*\*\s*\(?\s*-", re.IGNORECASE)


def crash_names(texts: Sequence[str]) -> frozenset[str]:
    """Warmup names the tree raises to a negative power with Python's `**` (a Noam
    schedule's `step * warmup ** (-1.5)`): 0 there raises ZeroDivisionError, so setting
    that warmup to 0 plants a crash, not a missing warmup (`np.power(w, -1.5)` gives inf
    and runs on without warmup: not listed)."""
    return frozenset(name.lower() for text in texts for name in _NEGATIVE_POWER.findall(text))


def mutations_of(operator: Operator, text: str, path: str = "", crash: frozenset[str] = frozenset()) -> list[Mutation]:
    """The mutations `operator` finds in one file's text ([] when it does not parse);
    `crash`: the tree's `crash_names`."""
    if not operator.searches(path, text):
        return []
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return []
    return operator.sites(Parsed.of(module, crash))


def mutate(text: str, operator: Operator, index: int, crash: frozenset[str] = frozenset()) -> str:
    """The file's text with the `index`-th mutation of `operator` applied (parsed afresh:
    the transformers are keyed on the nodes of the parse their sites came from)."""
    module = cst.parse_module(text)
    return operator.sites(Parsed.of(module, crash))[index].apply(module)


# --------------------------------------------------------------------------- running


# Operators of these families search the fixed trees of every family's cases: masks are
# passed in model and training code as much as in data code (a trainer's `model(input_ids,
# attention_mask=...)`, a model's `self.encoder(..., src_key_padding_mask=...)`).
EVERY_TREE = frozenset({"data"})


@dataclass(frozen=True)
class Tree:
    repo: str
    sha: str
    take: tuple[str, ...]
    origin: str  # "ecosystem" or the realbugs case id
    family: str = ""  # the case's family ("" for the ecosystem's trees)

    def runs(self, operator: Operator) -> bool:
        """Whether `operator` searches this tree."""
        return not self.family or self.family == operator.family or operator.family in EVERY_TREE


def trees(repos: Sequence[str] = (), families: Sequence[str] = ("training",)) -> list[Tree]:
    """The ecosystem's pinned trees and the fixed trees of the realbugs cases of the
    operators' families (every family's when one of them is in `EVERY_TREE`; one tree per
    repository and commit)."""
    out: dict[tuple[str, str], Tree] = {}
    for entry in eco.load_repos():
        out.setdefault((entry.repo, entry.sha), Tree(entry.repo, entry.sha, tuple(entry.take), "ecosystem"))
    manifest = rb.load_manifest()
    every = bool(EVERY_TREE & set(families))
    for case in manifest.cases:
        family = rb.family_of(case.rule)
        if every or family in families:
            out.setdefault((case.repo, case.fixed), Tree(case.repo, case.fixed, tuple(case.take), case.id, family))
    return [tree for tree in out.values() if not repos or tree.repo in repos]


def counts(findings: list, codes: set[str]) -> collections.Counter:
    """Findings per (file, code, message with its numbers blanked: lines move)."""
    return collections.Counter((f.path, f.code, re.sub(r"\d+", "#", f.message)) for f in findings if f.code in codes)


def is_found(before: collections.Counter, after: collections.Counter, expected: Sequence[str]) -> bool:
    """More findings of an expected code, with some message, in some file than the
    original run had (a loop that no longer clips: TL316's message changes too)."""
    return any(after[key] > before.get(key, 0) for key in after if key[1] in expected)


def spread(items: list, limit: int) -> list:
    """At most `limit` items, evenly spread over the list (deterministic)."""
    if limit <= 0 or len(items) <= limit:
        return items
    return [items[(k * len(items)) // limit] for k in range(limit)]


def run_tree(tree: Tree, mirrors: Path, command, operators: list[Operator], limit: int) -> dict:
    """Every mutant of one tree: {"repo", "status", "mutants": [...]}."""
    result: dict = {"repo": tree.repo, "sha": tree.sha, "origin": tree.origin, "mutants": []}
    gitdir = rb.resolve_mirror(mirrors, tree.repo)
    if gitdir is None or not rb.has_commit(gitdir, tree.sha):
        return {**result, "status": "unavailable"}
    operators = [op for op in operators if tree.runs(op)]
    work = Path(tempfile.mkdtemp(prefix="mutants-"))
    codes = sorted({code for op in operators for code in op.expected})
    extra = ["--select", ",".join(codes)]
    try:
        missing, _ = rb.materialise(gitdir, tree.sha, tree.take, work)
        texts = {}
        for path in sorted(work.rglob("*.py")):
            rel = path.relative_to(work).as_posix()
            try:
                texts[rel] = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
        searched = {rel for rel, text in texts.items() if any(op.searches(rel, text) for op in operators)}
        crash = crash_names(list(texts.values()))
        plan = []  # (operator, file, index, mutation)
        for op in operators:
            found = [(rel, k, m) for rel in sorted(searched)
                     for k, m in enumerate(mutations_of(op, texts[rel], rel, crash))]
            plan += [(op, rel, k, m) for rel, k, m in spread(found, limit)]
        baselines: dict[str, collections.Counter] = {}
        for op, rel, k, mutation in plan:
            folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
            mates = [p for p in sorted(searched) if (p.rsplit("/", 1)[0] if "/" in p else "") == folder]
            paths = [rel] + [p for p in mates if p != rel][:FOLDER_FILES - 1]
            key = rel
            entry = {"operator": op.name, "path": rel, "line": mutation.line, "what": mutation.what}
            try:
                if key not in baselines:
                    baselines[key] = counts(rb.run_tlint(command, work, paths, extra=extra), set(codes))
                (work / rel).write_text(mutate(texts[rel], op, k, crash), encoding="utf-8")
                try:
                    findings = rb.run_tlint(command, work, paths, extra=extra)
                finally:
                    (work / rel).write_text(texts[rel], encoding="utf-8")
            except (rb.TlintFailed, cst.ParserSyntaxError, IndexError) as error:
                result["mutants"].append({**entry, "status": "tool-failure", "detail": str(error)[:300]})
                continue
            failures = [f for f in findings if f.code in rb.TOOL_CODES and f.code != "TL002"]
            if failures:
                detail = f"{failures[0].code} {failures[0].path}:{failures[0].line} {failures[0].message[:200]}"
                result["mutants"].append({**entry, "status": "tool-failure", "detail": detail})
                continue
            found = is_found(baselines[key], counts(findings, set(codes)), op.expected)
            new = sorted({f"{f.code} {f.path}:{f.line}" for f in findings if f.code in op.expected})
            result["mutants"].append({**entry, "status": "found" if found else "missed", "findings": new[:6]})
        return {**result, "status": "ok", "missing_take": missing}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tally(results: list[dict], operators: list[Operator]) -> dict[str, dict]:
    table = {op.name: {"found": 0, "total": 0} for op in operators}
    for result in results:
        for mutant in result["mutants"]:
            if mutant["status"] in ("found", "missed"):
                row = table[mutant["operator"]]
                row["total"] += 1
                row["found"] += mutant["status"] == "found"
    return table


def render(results: list[dict], table: dict[str, dict], operators: list[Operator], out) -> None:
    expected = {op.name: "/".join(op.expected) for op in operators}
    found = sum(row["found"] for row in table.values())
    total = sum(row["total"] for row in table.values())
    print("operator                 expected     found/total  ratio", file=out)
    for name, row in table.items():
        ratio = f"{row['found'] / row['total']:.2f}" if row["total"] else "-"
        print(f"{name:24} {expected[name]:12} {row['found']:>5}/{row['total']:<5}  {ratio}", file=out)
    print(f"{'all':24} {'':12} {found:>5}/{total:<5}  {found / total if total else 0:.2f}", file=out)
    misses = [(r["repo"], m) for r in results for m in r["mutants"] if m["status"] == "missed"]
    if misses:
        print("\nmissed:", file=out)
        for repo, m in misses:
            print(f"  {m['operator']}: {repo} {m['path']}:{m['line']} {m['what']}", file=out)
    failures = [(r["repo"], m) for r in results for m in r["mutants"] if m["status"] == "tool-failure"]
    for repo, m in failures:
        print(f"TOOL FAILURE {m['operator']}: {repo} {m['path']}:{m['line']} {m['detail']}", file=out)
    for r in results:
        if r["status"] != "ok":
            print(f"unavailable: {r['repo']} {r['sha'][:12]} (no mirror or commit)", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--operator", action="append", default=[], help="run only these operators")
    parser.add_argument("--repo", action="append", default=[], help="run only these repositories")
    parser.add_argument("--max-per-operator", type=int, default=4,
                        help="mutants of each operator per tree, spread over its sites (0: all; default 4)")
    parser.add_argument("--jobs", type=int, default=1, help="trees run at once (each tlint run uses one core)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--tlint", help="a tlint checkout (folder) or command line to run instead of this checkout's")
    parser.add_argument("--list-operators", action="store_true", help="print the operators and exit")
    args = parser.parse_args(argv)
    known = {op.name: op for op in OPERATORS}
    if args.list_operators:
        for op in OPERATORS:
            print(f"{op.name:24} {op.family:9} {'/'.join(op.expected):12} {op.summary}")
        return 0
    unknown = [name for name in args.operator if name not in known]
    if unknown:
        parser.error(f"unknown operator {', '.join(unknown)} (known: {', '.join(known)})")
    if args.mirrors is None or not args.mirrors.is_dir():
        parser.error("--mirrors must name the folder of fetched mirrors")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    operators = [known[name] for name in args.operator] if args.operator else list(OPERATORS)
    try:
        selected = trees(args.repo, sorted({op.family for op in operators}))
    except rb.ManifestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    command = rb.tlint_command(args.tlint)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda t: run_tree(t, args.mirrors, command, operators, args.max_per_operator),
                                selected))
    table = tally(results, operators)
    render(results, table, operators, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps({"operators": table, "trees": results}, indent=1) + "\n", encoding="utf-8")
    return 1 if any(m["status"] == "tool-failure" for r in results for m in r["mutants"]) else 0


if __name__ == "__main__":
    sys.exit(main())
