"""The training view's loops: the walk over one loop iteration (`_Iteration`: events in
evaluation order, helper bodies inlined at their call site) and the `TrainingView` members
built on it (`loops`, `iteration`, `calls_in`, `clip_calls`, `callers`,
`wrapper_functions`). A mixin of
`tlint.views.training.TrainingView`; it reads the event kinds of `TrainingEvents`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import libcst as cst

from tlint.cst import children, get_arg, literal_value
from tlint.views.training_common import (
    BACKWARD,
    CALL,
    CLIP,
    OPTIMIZER_STEP,
    UNKNOWN,
    ZERO_GRAD,
    Condition,
    Event,
    TrainingLoop,
    _names_under,
)

if TYPE_CHECKING:
    from tlint.source import FileIndex

_MAX_INLINE = 8  # helper call depth followed from a loop
_INLINE_BUDGET = 2_000  # helper bodies walked per iteration (bounds fan-out on generated code)


# --- the walk over one iteration ----------------------------------------------------------


class _State(NamedTuple):
    loops: tuple[cst.For | cst.While, ...] = ()
    conditions: tuple[Condition, ...] = ()
    contexts: tuple[cst.BaseExpression, ...] = ()
    via: tuple[cst.Call, ...] = ()
    active: frozenset[cst.FunctionDef | None] = frozenset()


class _Iteration:
    """Walks the statements of one loop iteration (or function body) in evaluation order:
    arguments before the call they feed, helper bodies inlined at their call site."""

    def __init__(self, view: TrainingLoops, every_call: bool = False) -> None:
        self.view = view
        self.every_call = every_call
        self.events: list[Event] = []
        self.kinds: set[str] = set()
        self.loops_seen: list[cst.For | cst.While] = []
        self.inlined: set[cst.FunctionDef] = set()
        self.budget = _INLINE_BUDGET

    def run(self, root: cst.For | cst.While | cst.FunctionDef) -> _Iteration:
        function = root if type(root) is cst.FunctionDef else self.view.index.enclosing_function(root)
        state = _State(active=frozenset([function]) if function is not None else frozenset())
        if type(root) is cst.While:
            self.expression(root.test, state)
        self.suite(root.body, state)
        return self

    def suite(self, suite: cst.BaseSuite, state: _State) -> None:
        if type(suite) is cst.IndentedBlock:
            for statement in suite.body:
                self.statement(statement, state)
        else:  # a SimpleStatementSuite (mypy narrows no `type(x) is` negatively)
            for small in suite.body:
                self.small(small, state)  # type: ignore[arg-type]

    def statement(self, node: Any, state: _State) -> None:
        # `node: Any`: a statement, dispatched on `type(node)` read once into `kind` (mypy
        # narrows only a `type(node) is` test written out in each branch)
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                self.small(small, state)
        elif kind is cst.If:
            self.branch(node, state)
        elif kind is cst.For or kind is cst.While:
            inner = state._replace(loops=state.loops + (node,))
            self.loops_seen.append(node)
            if kind is cst.For:
                self.expression(node.iter, state)
            else:
                self.expression(node.test, inner)
            self.suite(node.body, inner)
            if node.orelse is not None:
                self.suite(node.orelse.body, state)
        elif kind is cst.With:
            for item in node.items:
                self.expression(item.item, state)
            self.suite(node.body, state._replace(contexts=state.contexts + tuple(i.item for i in node.items)))
        elif kind is cst.Try or kind is cst.TryStar:
            self.suite(node.body, state)
            for handler in node.handlers:
                self.suite(handler.body, state)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.suite(extra.body, state)
        elif kind is cst.Match:
            self.expression(node.subject, state)
            for case in node.cases:
                self.suite(case.body, state)
        # Nested function and class definitions run only when called (see `call`).

    def branch(self, node: cst.If, state: _State) -> None:
        """An if/elif/else chain, iteratively: the branches of a long `elif` chain sit
        under the negated tests of the branches before them."""
        while True:
            self.expression(node.test, state)
            self.suite(node.body, state._replace(conditions=state.conditions + (Condition(node.test),)))
            state = state._replace(conditions=state.conditions + (Condition(node.test, True),))
            if type(node.orelse) is cst.If:
                node = node.orelse
                continue
            if type(node.orelse) is cst.Else:
                self.suite(node.orelse.body, state)
            return

    def small(self, node: cst.BaseSmallStatement, state: _State) -> None:
        self.expression(node, state)
        if type(node) is cst.Assign and literal_value(node.value, UNKNOWN) is None and any(
            type(t.target) is cst.Attribute and t.target.attr.value == "grad" for t in node.targets
        ):
            self.emit(ZERO_GRAD, node, state)

    def expression(self, node: cst.CSTNode, state: _State) -> None:
        """Post-order over the calls under `node`, iteratively (expressions nest deeply)."""
        stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
        while stack:
            current, done = stack.pop()
            if done:
                self.call(current, state)  # type: ignore[arg-type]  # pushed as done only when a Call
                continue
            kind = type(current)
            if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
                continue
            if kind is cst.Call:
                stack.append((current, True))
            kids = list(children(current))
            kids.reverse()
            stack.extend((kid, False) for kid in kids)

    def call(self, call: cst.Call, state: _State) -> None:
        view = self.view
        if self.every_call:
            self.emit(CALL, call, state)
        kind = view.event_kind(call)
        if kind is not None and call in view.named_like_events:
            function = view.callee(call)
            if function is not None:  # `compute_loss(...)`, `train_model(...)` of this file: look inside
                self.inline(call, function, state)
                return
        if kind is not None:
            if kind == OPTIMIZER_STEP:
                closure = get_arg(call, "closure", 0)
                if closure is not None and type(closure.value) is cst.Name:
                    self.inline(call, view.local_function(closure.value), state)
            if not self.every_call:
                self.emit(kind, call, state)
            self.kinds.add(kind)
            return
        self.inline(call, view.callee(call), state)

    def inline(self, call: cst.Call, function: cst.FunctionDef | None, state: _State) -> None:
        if function is None or function in state.active or len(state.via) >= _MAX_INLINE or self.budget <= 0:
            return
        self.budget -= 1
        self.inlined.add(function)
        self.suite(function.body, state._replace(via=state.via + (call,), active=state.active | {function}))

    def emit(self, kind: str, node: cst.CSTNode, state: _State) -> None:
        self.events.append(Event(kind, node, state.loops, state.conditions, state.contexts, state.via))
        self.kinds.add(kind)

    def trains(self) -> bool:
        return BACKWARD in self.kinds and OPTIMIZER_STEP in self.kinds


class TrainingLoops:
    """`TrainingView`'s training loops and the walks they are found by."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts (TrainingEvents)
        index: FileIndex
        named_like_events: set[cst.Call]
        _walks: dict[cst.CSTNode, _Iteration]

        def event_kind(self, call: cst.Call) -> str | None: ...
        def may_be(self, call: cst.Call, kinds: tuple[str, ...]) -> bool: ...
        def callee(self, call: cst.Call) -> cst.FunctionDef | None: ...
        def local_function(self, name: cst.Name) -> cst.FunctionDef | None: ...

    # --- training loops -----------------------------------------------------------------

    def iteration(self, root: cst.For | cst.While | cst.FunctionDef) -> list[Event]:
        """The events of one pass through a loop body (or a function body), helpers inlined."""
        return list(self._walk(root).events)

    def _walk(self, root: cst.For | cst.While | cst.FunctionDef) -> _Iteration:
        """The walk of one pass through `root`, once per root (`loops`, TL305's outer loops,
        TL312's evaluation loops and the wrappers of TL302/TL305 ask for the same ones)."""
        walk = self._walks.get(root)
        if walk is None:
            walk = self._walks[root] = _Iteration(self).run(root)
        return walk

    def calls_in(self, loop: TrainingLoop) -> list[Event]:
        """Every call of one iteration of `loop` (kind CALL), helpers inlined."""
        return _Iteration(self, every_call=True).run(loop.node).events

    @cached_property
    def clip_calls(self) -> list[cst.Call]:
        """Every gradient-clipping call of the file, wherever it is."""
        return [call for call in self.index.calls if self.event_kind(call) == CLIP]

    @cached_property
    def clips_by_hook(self) -> bool:
        """Gradients clamped by a tensor hook (`p.register_hook(lambda g: g.clamp(-c, c))`)."""
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "register_hook" and call.args:
                hook = call.args[0].value
                if type(hook) is cst.Lambda and any(
                    type(n) is cst.Name and n.value in ("clamp", "clamp_", "clip", "clip_")
                    for n in _names_under(hook.body)
                ):
                    return True
        return False

    @cached_property
    def loops(self) -> list[TrainingLoop]:
        """Training loops (innermost loops running backward and an optimiser step) and step
        functions (functions running both whose loop is not in this file), source order."""
        index = self.index
        if not index.identifiers & {"backward", "manual_backward"}:
            return []
        walks = {loop: self._walk(loop) for loop in index.loops}
        training = {loop for loop, walk in walks.items() if walk.trains()}
        innermost = [loop for loop in index.loops
                     if loop in training and not any(sub in training for sub in walks[loop].loops_seen)]
        out = [self._training_loop(loop, walks[loop]) for loop in innermost]
        covered = set().union(*(walks[loop].inlined for loop in training)) if training else set()
        steps = []
        for function in index.functions:
            if function in covered:
                continue
            walk = self._walk(function)
            if walk.trains() and not any(sub in training for sub in walk.loops_seen):
                steps.append((function, walk))
        nested = set().union(*(walk.inlined for _, walk in steps)) if steps else set()
        out += [TrainingLoop(function, function, tuple(walk.events), helpers=frozenset(walk.inlined))
                for function, walk in steps if function not in nested]
        return out

    def _training_loop(self, loop: cst.For | cst.While, walk: _Iteration) -> TrainingLoop:
        outer = tuple(self.index.enclosing_loops(loop))
        function = self.index.enclosing_function(loop)
        epoch = outer[0] if outer else None
        if epoch is None and function is not None:
            for caller in self._callers.get(function, ()):
                around = self.index.enclosing_loops(caller)
                if around:
                    epoch = around[0]
                    break
        return TrainingLoop(loop, function, tuple(walk.events), outer, epoch, frozenset(walk.inlined))

    def wrapper_functions(self, *kinds: str) -> list[cst.FunctionDef]:
        """Functions (or methods) of this file whose own body, outside any loop of theirs,
        makes an event of every one of `kinds` (a wrapper `step()` that advances a scheduler
        and steps the optimiser), in source order; training loops need not be in the file."""
        index = self.index
        found: dict[int, set[str]] = {}
        functions: dict[int, cst.FunctionDef] = {}
        for call in index.calls:
            if not self.may_be(call, kinds) or index.enclosing_loops(call):
                continue
            kind = self.event_kind(call)
            function = index.enclosing_function(call) if kind in kinds else None
            if function is not None and kind is not None:
                found.setdefault(id(function), set()).add(kind)
                functions[id(function)] = function
        return [functions[key] for key, seen in found.items() if len(seen) == len(set(kinds))]

    def callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of this file that run `function` (as far as `callee` can tell)."""
        return list(self._callers.get(function, ()))

    @cached_property
    def _callers(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        out: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.index.calls:
            function = self.callee(call)
            if function is not None:
                out.setdefault(function, []).append(call)
        return out
