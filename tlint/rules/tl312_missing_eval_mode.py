"""TL312 missing-eval-mode: evaluation in training mode, or training left in eval mode.

(a) An evaluation loop — a `for` loop over a data loader or batches (or one that fetches a
batch each iteration, `get_batch(split)`), under `no_grad()`/`inference_mode()` (around
the loop, or around every model call inside its body) or in a function named
`eval*`/`valid*`, that computes a loss or a metric (for a generation loop,
`model.generate(...)`, collecting what it generates) — in a function (not an `nn.Module`
method) that never calls `model.eval()`, and whose callers in the same file do not
either. A loop whose results feed a training loop of its function (a rollout before the
update) is not evaluation. (b) A training loop whose iteration
switches the model to eval mode (for validation every N steps, or at the end of each
epoch) and never back to `train()`: dropout stays off for the rest of training.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import assignment_targets, dotted_name, is_literal, last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import ASSIGN, PARAM
from tlint.views.training import BACKWARD, EVAL, FORWARD, LOSS, OPTIMIZER_STEP, TRAIN, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_EVAL_WORDS = ("eval", "valid", "test")
_NOT_EVALUATION = frozenset({"generate", "generation", "sample", "sampling", "ema", "update", "decode", "infer",
                             "inference", "predict", "export", "benchmark", "profile"})
_DATA_WORDS = frozenset({"loader", "dataloader", "loaders", "batches", "batch", "dataset", "data", "ds", "iterator"})
_METRIC_WORDS = frozenset({"correct", "incorrect", "incorrects", "hits", "matches", "acc", "accuracy", "metric",
                           "metrics", "f1", "ppl", "perplexity", "loss", "losses", "bleu", "rouge", "score", "scores",
                           "errors", "mse", "mae"})
# Models that stay in eval mode on purpose inside a training loop.
# Methods that return the module (or a copy of it) in the mode it was in.
_MODE_KEEPING = frozenset({"to", "cuda", "cpu", "half", "float", "bfloat16", "eval", "requires_grad_"})
_FROZEN_WORDS = frozenset({"teacher", "ema", "ref", "reference", "target", "frozen", "old", "vae", "averaged"})


class MissingEvalMode(Rule):
    code = "TL312"
    name = "missing-eval-mode"
    kind = "likely-defect"
    # pre-filter: `eval*`/`valid*` functions or loops without autograd; training loops
    tokens = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "backward"})
    patterns = (r"def[\s\\]+_*(?:eval|valid)",)  # a function whose name starts so (any case)
    summary = "Evaluation runs without model.eval(), or training never returns to model.train()."
    # (b) across files: a training loop calling an evaluation helper of another module
    # that leaves the model in eval mode (`leaves-eval` there, `imported-call-in-training` here)
    project_kinds = ("imported-call-in-training",)
    project_facts = ("leaves-eval", "imported-call-in-training")

    def project_index(self, related):
        return {fact.data.function: (path, fact.range) for path, facts in related.items()
                for fact in facts if fact.kind == "leaves-eval"}

    def check_project(self, path, related):
        """A call, in a training iteration that never switches back to `train()`, of a
        function of another file that leaves the model in eval mode."""
        helpers = self.indexed(related)
        for fact in related.get(path, []):
            if fact.kind != "imported-call-in-training" or fact.range is None:
                continue
            found = helpers.get(fact.data.callee)
            if found is None or found[0] == path:
                continue
            where = related.place(found[0], found[1], path)
            yield fact.range, (f"`{fact.data.callee}` ({where}) switches the model to eval mode and never back; "
                               "the training loop calls it here and never calls model.train() again: dropout "
                               "stays off for the rest of training")

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        view: TrainingView = ctx.training
        self._evaluation_loops(ctx, view)
        self._training_left_in_eval(ctx, view)

    # --- (a) evaluation without eval() ------------------------------------------------

    def _evaluation_loops(self, ctx, view: TrainingView) -> None:
        checked: set[cst.FunctionDef | None] = set()
        no_grad_loops = _loops_around_no_grad(view)
        for loop in ctx.index.loops:
            function = ctx.index.enclosing_function(loop)
            if type(loop) is not cst.For or function in checked:
                continue
            if function is None:  # a script's top level: evaluation when it runs without autograd
                evaluation = True if view.grad_disabled(loop) else (
                    None if id(loop) in no_grad_loops else False)
            else:
                evaluation = self._evaluation_function(ctx, view, function, loop, no_grad_loops)
            if evaluation is False and _periodic_in_training(view, loop):
                evaluation = True  # `if step % eval_every == 0: for x, y in val: ...` inside training
            if evaluation is False:
                continue
            events = view.iteration(loop)
            generates = self._generates(view, loop)
            if evaluation is None and not self._model_calls_without_grad(view, loop, events, generates):
                continue
            if not (self._over_batches(loop) or self._fetches_batches(loop)
                    or self._feeds_batches(loop, events, generates)):
                continue
            kinds = {e.kind for e in events}
            if kinds & {BACKWARD, OPTIMIZER_STEP} or not (self._computes_metric(loop, kinds)
                                                           or (generates and self._collects(loop))):
                continue
            checked.add(function)
            if self._switches_to_eval(view, function, loop) or (
                    function is not None and self._caller_switches(view, function)):
                continue
            if self._feeds_training(view, function, loop):
                continue
            if self._loaded_in_eval_mode(ctx, view, function, loop, events, generates):
                continue
            where = f"`{function.name.value}`" if function is not None else "the script"
            ctx.report(loop, f"{where} evaluates without model.eval(): dropout and batch-norm "
                       "stay in training mode, so the metric is noisy and biased; call model.eval() first")

    @staticmethod
    def _evaluation_function(ctx, view: TrainingView, function: cst.FunctionDef, loop,
                             no_grad_loops: frozenset[int]) -> bool | None:
        """True: an evaluation function or a loop without autograd; False: not evaluation;
        None: evaluation only if every model call of the loop runs without autograd."""
        parts = snake_parts(function.name.value)
        if set(parts) & _NOT_EVALUATION:
            return False
        cls = ctx.index.enclosing_class(function)
        if cls is not None and cls.name.value in ctx.models.classes:
            return False  # nn.Module / LightningModule methods: the framework or caller switches modes
        named = bool(parts) and parts[0].startswith(_EVAL_WORDS[:2])
        if named or view.grad_disabled(loop):
            return True
        return None if id(loop) in no_grad_loops else False

    def _loaded_in_eval_mode(self, ctx, view: TrainingView, function: cst.FunctionDef | None, loop: cst.For,
                             events: list, generates: list[cst.Call]) -> bool:
        """A program that never trains (no backward, no optimiser step, no `train()`, no
        trainer) evaluates its models in the mode they were loaded in, and they were loaded
        in eval mode: every model the loop calls is traced (through assignments and the
        file's callers of its function) to `from_pretrained(...)`, which returns the model
        in eval mode, or to a loader of the file that switches it with `eval()`; or the
        program's loaders return their models switched to eval mode and nothing switches
        them back."""
        if not self._never_trains(view):
            return False
        if self._loaders_switch_to_eval(ctx, view):
            return True
        calls = [e.node for e in events if e.kind == FORWARD and not e.via and type(e.node) is cst.Call] + generates
        receivers = []
        for call in calls:
            receiver = call.func.value if call in generates else call.func  # type: ignore[attr-defined]
            if type(receiver) is cst.Call:  # `accelerator.unwrap_model(model).generate(...)`
                return False
            receivers.append(receiver)
        return bool(receivers) and all(self._origin_in_eval_mode(ctx, view, r, 0) for r in receivers)

    @staticmethod
    def _never_trains(view: TrainingView) -> bool:
        if view.loops or view.hf_trainers or view.lightning_trainers:
            return False
        return not any(view.event_kind(call) in (BACKWARD, OPTIMIZER_STEP, TRAIN) for call in view.index.calls)

    @staticmethod
    def _loaders_switch_to_eval(ctx, view: TrainingView) -> bool:
        """A function of the file that switches a model to eval mode and returns it
        (`model.eval(); return model`, `return model.eval()`)."""
        for call in view.index.calls:
            if view.event_kind(call) != EVAL:
                continue
            function = view.index.enclosing_function(call)
            receiver = last_name(view.receiver(call))
            if function is None or receiver is None:
                continue
            for node in walk(function.body, into_functions=False):
                if type(node) is cst.Return and node.value is not None and (
                        node.value is call or any(type(n) is cst.Name and n.value == receiver
                                                  for n in walk(node.value))):
                    return True
        return False

    def _origin_in_eval_mode(self, ctx, view: TrainingView, expr: cst.BaseExpression, depth: int) -> bool:
        """`expr` holds a model loaded in eval mode: `X.from_pretrained(...)` (and
        `.to(device)`, `.cuda()`, `.half()` of one), or the result of a function of the
        file that switches it with `eval()`; a name, through every binding that reaches it
        and, for a parameter, every argument the file's callers pass."""
        if depth > 4:
            return False
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Attribute and func.attr.value in _MODE_KEEPING:
                return self._origin_in_eval_mode(ctx, view, func.value, depth + 1)
            if last_name(func) == "from_pretrained":
                return True
            callee = view.callee(expr)
            return callee is not None and any(
                view.event_kind(c) == EVAL and ctx.index.is_inside(c, callee) for c in view.index.calls)
        if type(expr) is not cst.Name:
            return False
        reaching = ctx.bindings.reaching(expr)
        if not reaching:
            return False
        for binding in reaching:
            if binding.kind == PARAM:
                function = binding.scope
                sites = ctx.calls.callers(function) if type(function) is cst.FunctionDef else []
                if not sites or any(site.arguments is None or binding.name not in site.arguments
                                    or not self._origin_in_eval_mode(ctx, view, site.arguments[binding.name],
                                                                     depth + 1) for site in sites):
                    return False
            elif binding.kind != ASSIGN or binding.value is None \
                    or not self._origin_in_eval_mode(ctx, view, binding.value, depth + 1):
                return False
        return True

    @staticmethod
    def _model_calls_without_grad(view: TrainingView, loop: cst.For, events: list, generates: list[cst.Call]) -> bool:
        """`with torch.no_grad():` inside the loop body around every model call (its
        forward or its `generate(...)`)."""
        calls = [e.node for e in events if e.kind == FORWARD and not e.via] + generates
        return bool(calls) and all(view.grad_disabled(c) and view.index.is_inside(c, loop) for c in calls)

    @staticmethod
    def _generates(view: TrainingView, loop: cst.For) -> list[cst.Call]:
        """`model.generate(...)` calls in the loop body (a model's generation is its forward),
        also on an unwrapped model (`accelerator.unwrap_model(model).generate(...)`)."""
        out = []
        for node in walk(loop.body):
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "generate":
                receiver = node.func.value
                if type(receiver) is cst.Call:  # `accelerator.unwrap_model(model).generate(...)`
                    receiver = receiver.func
                name = last_name(receiver) or ""
                if view.role(receiver) == "model" or name == "self" or "model" in snake_parts(name):
                    out.append(node)
        return out

    @staticmethod
    def _fetches_batches(loop: cst.For) -> bool:
        """Each iteration fetches a batch: `X, Y = get_batch(split)`, `batch = next(it)`."""
        for node in walk(loop.body):
            if type(node) is cst.Assign and type(node.value) is cst.Call:
                name = last_name(node.value.func) or ""
                if set(snake_parts(name)) & _DATA_WORDS or (name == "next" and node.value.args):
                    return True
        return False

    @staticmethod
    def _collects(loop: cst.For) -> bool:
        """The loop keeps what it computes: `preds.extend(...)`, `outputs.append(...)`, `n += ...`."""
        return any(
            (type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("append", "extend"))
            or type(n) is cst.AugAssign for n in walk(loop.body)
        )

    @staticmethod
    def _feeds_training(view: TrainingView, function: cst.FunctionDef | None, loop: cst.For) -> bool:
        """What the loop fills (`logprobs.append(...)`, `values[i] = ...`) is read by a
        training loop of the same function: a rollout before the update, not evaluation."""
        filled: set[str] = set()
        for node in walk(loop.body):
            if type(node) is cst.Call and type(node.func) is cst.Attribute \
                    and node.func.attr.value in ("append", "extend") and type(node.func.value) is cst.Name:
                filled.add(node.func.value.value)
            elif type(node) in (cst.Assign, cst.AugAssign):
                for target in assignment_targets(node):
                    base = target.value if type(target) is cst.Subscript else target
                    if type(base) is cst.Name:
                        filled.add(base.value)
        if not filled:
            return False
        if _read_in_training(view, function, loop, filled):
            return True
        if function is None or not any(type(n) is cst.Return and n.value is not None and any(
                type(m) is cst.Name and m.value in filled for m in walk(n.value))
                for n in walk(function.body, into_functions=False)):
            return False
        for caller in view.callers(function):  # `logprobs, values = self.forward_pass(...)`
            statement = view.index.parent(caller)
            if type(statement) is not cst.Assign:
                continue
            names = {n.value for t in statement.targets for n in walk(t.target) if type(n) is cst.Name}
            if _read_in_training(view, view.index.enclosing_function(caller), None, names):
                return True
        return False

    @staticmethod
    def _over_batches(loop: cst.For) -> bool:
        names = [n.value for n in walk(loop.iter) if type(n) is cst.Name]
        names += [n.value for n in walk(loop.target) if type(n) is cst.Name]
        return any(set(snake_parts(name)) & _DATA_WORDS for name in names)

    @staticmethod
    def _feeds_batches(loop: cst.For, events: list, generates: list[cst.Call]) -> bool:
        """A loader of any name: the model is called on what the loop yields (directly or
        through a name the iteration binds from it)."""
        fed = {n.value for n in walk(loop.target) if type(n) is cst.Name}
        for node in walk(loop.body):
            if type(node) is cst.Assign and any(type(n) is cst.Name and n.value in fed for n in walk(node.value)):
                fed.update(n.value for t in node.targets for n in walk(t.target) if type(n) is cst.Name)
        calls = [e.node for e in events if e.kind == FORWARD and not e.via and type(e.node) is cst.Call]
        return any(any(type(n) is cst.Name and n.value in fed for a in call.args for n in walk(a.value))
                   for call in calls + generates)

    @staticmethod
    def _computes_metric(loop: cst.For, kinds: set[str]) -> bool:
        if LOSS in kinds:
            return True
        if FORWARD not in kinds:
            return False
        if any(type(n) is cst.AugAssign and not is_literal(n.value) for n in walk(loop.body)):
            return True  # a running total of what the model gives (`tot += dice(pred, mask)`)
        return any(type(n) is cst.Name and set(snake_parts(n.value)) & _METRIC_WORDS for n in walk(loop.body))

    @staticmethod
    def _switches_to_eval(view: TrainingView, scope: cst.CSTNode | None, loop: cst.For) -> bool:
        """A mode switch of `scope` (a function, or the script's top level) reaches `loop`:
        inside it; or the last switch of some model before it (in source order) is its
        `eval()`; or an `eval()` after it inside a loop around both (the next iteration), with
        no `train()` of that model between that loop's start and `loop`. A `train()` of
        unknown mode does not count as switching back."""
        index = view.index
        position, ends = index.position, index.ends
        start = position[id(loop)]
        end = ends[start]
        before: dict[str, str] = {}  # receiver -> the kind of its last switch before the loop
        trains: list[tuple[str, int]] = []  # (receiver, position) of each plain `train()` before the loop
        later: list[tuple[str, cst.Call]] = []  # `eval()` calls after the loop
        for call in index.calls:
            at = position[id(call)]
            kind = view.event_kind(call)
            if kind != EVAL and kind != TRAIN:
                continue
            if (index.enclosing_function(call) is not None) if scope is None else not index.is_inside(call, scope):
                continue
            if start <= at < end:
                if kind == EVAL:
                    return True
                continue
            receiver = dotted_name(view.receiver(call)) or ""
            if at < start:
                if kind == EVAL or not call.args or is_literal(call.args[0].value):
                    before[receiver] = kind
                    if kind == TRAIN:
                        trains.append((receiver, at))
            elif kind == EVAL:
                later.append((receiver, call))
        if EVAL in before.values():
            return True
        for receiver, call in later:
            for around in index.enclosing_loops(loop):
                if index.is_inside(call, around) and not any(
                        name == receiver and at >= position[id(around)] for name, at in trains):
                    return True
        return False

    def _caller_switches(self, view: TrainingView, function: cst.FunctionDef) -> bool:
        callers = view.callers(function)
        if not callers:  # called from elsewhere (another file, a dispatch table): unknown, unless
            # the file switches nowhere but in the function itself (where it did not reach the loop)
            return any(view.event_kind(call) == EVAL and not view.index.is_inside(call, function)
                       for call in view.index.calls)
        order = {id(call): i for i, call in enumerate(view.index.calls)}
        for caller in callers:
            scope = view.index.enclosing_function(caller)
            for call in view.index.calls:
                if order[id(call)] >= order[id(caller)]:
                    break
                if view.event_kind(call) == EVAL and view.index.enclosing_function(call) is scope:
                    return True  # `model.eval()` before the call, in the caller
        return False

    # --- (b) training left in eval mode -----------------------------------------------

    def _training_left_in_eval(self, ctx, view: TrainingView) -> None:
        reported: set[int] = set()
        for loop in view.loops:
            if loop.is_step_function:
                continue
            for node in loop.enclosing:
                events = view.iteration(node)
                if any(e.kind == TRAIN for e in events):
                    break  # an outer iteration that switches back covers the inner ones too
                for event in events:
                    if event.kind != EVAL or id(event.site) in reported or self._frozen(view, event):
                        continue
                    reported.add(id(event.site))
                    ctx.report(event.site, "the training loop switches the model to eval mode here and never back "
                               "to model.train(): dropout stays off for the rest of training")

    @staticmethod
    def _frozen(view: TrainingView, event) -> bool:
        receiver = view.receiver(event.node)
        return bool(set(snake_parts(last_name(receiver) or "")) & _FROZEN_WORDS)


def _periodic_in_training(view: TrainingView, loop: cst.For) -> bool:
    """`loop` runs under an `if` inside a training loop's body (validation every N steps),
    with or without autograd."""
    training = {id(t.node) for t in view.loops if not t.is_step_function}
    if not training:
        return False
    under_if = False
    for ancestor in view.index.ancestors(loop):
        kind = type(ancestor)
        if kind is cst.If:
            under_if = True
        elif id(ancestor) in training:
            return under_if
        elif kind in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return False
    return False


def _loops_around_no_grad(view: TrainingView) -> frozenset[int]:
    """Ids of the loops whose body holds a `with torch.no_grad():` (or `inference_mode`)."""
    index = view.index
    out: set[int] = set()
    if index.identifiers & {"no_grad", "inference_mode", "set_grad_enabled"}:
        for call in index.calls:
            if type(index.parent(call)) is cst.WithItem and view.grad_disabled(call):
                out.update(id(loop) for loop in index.enclosing_loops(call))
    return frozenset(out)


def _read_in_training(view: TrainingView, function: cst.FunctionDef | None, loop: cst.For | None,
                      names: set[str]) -> bool:
    """A training loop of `function` (other than `loop`) feeds one of `names` (or a name
    bound from them in the function) into its update: the loss it runs backward on.
    Printing them, logging them or comparing them with the best so far is not an update."""
    flows: set[str] | None = None
    for training in view.loops:
        node = training.node
        if node is loop or training.function is not function or (loop is not None and view.index.is_inside(node, loop)):
            continue
        if flows is None:
            scope = function.body if function is not None else view.index.module
            flows = _bound_from(walk(scope, into_functions=False), names)
        if flows & _update_inputs(training):
            return True
    return False


def _names(node: cst.CSTNode | None) -> set[str]:
    return {n.value for n in walk(node) if type(n) is cst.Name} if node is not None else set()


def _assigned(nodes) -> list[tuple[set[str], set[str]]]:
    """(target names, value names) of each assignment among `nodes`."""
    out = []
    for node in nodes:
        if type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and node.value is not None:
            targets = set().union(*(_names(t) for t in assignment_targets(node)))
            out.append((targets, _names(node.value)))
    return out


def _closure(assignments: list[tuple[set[str], set[str]]], names: set[str], *, downstream: bool) -> set[str]:
    """`names` grown to a fixed point over `assignments` (from `_assigned`): downstream, by
    the targets of each assignment reading one of them; upstream, by the names read by each
    assignment binding one of them."""
    out = set(names)
    changed = True
    while changed:
        changed = False
        for targets, values in assignments:
            source, grown = (values, targets) if downstream else (targets, values)
            if source & out and not grown <= out:
                out |= grown
                changed = True
    return out


def _bound_from(nodes, names: set[str]) -> set[str]:
    """`names` and every name assigned (transitively) from an expression reading one."""
    return _closure(_assigned(nodes), names, downstream=True)


def _update_inputs(training) -> set[str]:
    """The names a training loop's backward pass depends on that the loop does not bind
    itself (what comes in from before the loop): what its `backward()` calls read (`loss`,
    `scaler.scale(loss)`, `accelerator.backward(loss)`, or the helper call leading to one),
    and what those names are assigned from. A name the loop binds (`outputs = model(...)`)
    is its own, whatever an earlier loop of the function left in it."""
    out: set[str] = set()
    for event in training.events:
        if event.kind == BACKWARD:
            out |= _names(event.site)
    nodes = list(walk(training.node))
    assignments = _assigned(nodes)
    out = _closure(assignments, out, downstream=False)
    bound = set().union(*(targets for targets, _ in assignments)) if assignments else set()
    for node in nodes:
        if type(node) is cst.For:
            bound |= _names(node.target)
        elif type(node) is cst.WithItem and node.asname is not None:
            bound |= _names(node.asname.name)
    return out - bound
