"""TL101 missing-attention-mask: a model gets input ids but no attention mask in a project
that pads its sequences."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import (
    dotted_name,
    get_arg,
    has_star_kwargs,
    last_name,
    literal_value,
    positional_count,
    snake_parts,
    walk,
)
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.bindings import ASSIGN
from tlint.views.checkpoints import checkpoint_of, right_padding_decoder
from tlint.views.facts import ids_expression, tokenizer_like, unpadded_ids
from tlint.views.model import loss_calls, slice_bounds
from tlint.views.vocabulary import documented_unused, string_literals

if TYPE_CHECKING:
    from tlint.context import FileContext

# `teacher`/`student`: the two models of distillation code (`base_teacher(input_ids=...)`)
_MODEL_WORDS = {"model", "net", "network", "lm", "encoder", "transformer", "gpt", "bert", "backbone", "teacher",
                "student"}
_MODEL_METHODS = {"forward", "generate", "__call__"}


class MissingAttentionMask(Rule):
    code = "TL101"
    name = "missing-attention-mask"
    kind = "defect"
    # pre-filter: model calls count only with input ids (`input_ids=`, `["input_ids"]`, names assigned from them,
    # or from a tokenizer's `convert_tokens_to_ids`)
    tokens = frozenset({"input_ids", "convert_tokens_to_ids"})
    summary = "A model is called with padded input ids but no attention_mask."
    probes = ("mask-leak", "padding-equivalence")
    verify_site = "call-site"
    data_check = "mask-pad-agreement"
    # Extra identifier parts that name a model variable in this project (e.g. "policy").
    options = {"model-names": []}

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        model_vars, maskless = self._model_variables(ctx)
        ids_names = ctx.data.ids_variables
        model_words = _MODEL_WORDS | {name.lower() for name in self.options["model-names"]}
        diffusion = index.imports.imports_module("diffusers")
        causal_file: bool | None = None
        for call in index.calls:
            func = call.func
            receiver = func
            if type(func) is cst.Attribute and func.attr.value in _MODEL_METHODS:
                receiver = func.value
            name = last_name(receiver)
            if name is None or name in maskless:
                continue
            if diffusion and "text_encoder" in name:
                continue  # diffusion pipelines condition on CLIP's unmasked, max-length-padded text
            if name not in model_vars and not (set(snake_parts(name)) & model_words):
                continue
            if type(func) is cst.Attribute and func is not receiver and func.attr.value not in _MODEL_METHODS:
                continue
            if type(receiver) is cst.Attribute and receiver is func and type(receiver.value) is not cst.Name:
                continue
            if _own_method(index, receiver):
                continue  # `self._build_network_inputs(...)`: a helper of the class, not a model
            spread = _maskless_kwargs(ctx, call)
            if spread is not None:  # `model(**inputs)`, every `inputs = {"input_ids": ids}` without a mask
                ids_value = spread
            else:
                ids_arg = get_arg(call, "input_ids")
                if ids_arg is None:
                    first = get_arg(call, None, 0)
                    if first is None or not ids_expression(first.value, ids_names):
                        continue
                if (has_star_kwargs(call) and not _spreads_no_mask(ctx, call)) or positional_count(call) >= 2:
                    continue
                if any(arg.keyword is not None and _mask_keyword(arg.keyword.value)
                       and not ctx.bindings.empty(arg.value) for arg in call.args):
                    continue  # (`attention_mask=None` is no mask)
                ids_value = ids_arg.value if ids_arg is not None else first.value  # type: ignore[union-attr]
            if unpadded_ids(ctx.data, ids_value, index.enclosing_function(call) or index.module):
                continue  # `tokenizer("one prompt")`, `torch.randint(...)`: no pad token to mask
            spelled = dotted_name(func) or "model"
            # A causal model's forward over ids padded at the end: no real position attends to
            # a pad, so only padding that may come first (a tokenizer's side, left) is reported.
            causal = not (type(func) is cst.Attribute and func.attr.value == "generate")
            if causal:
                if causal_file is None:  # the file's loss is a next-token loss: it trains a causal model
                    causal_file = _next_token_loss(ctx)
                # or the model is loaded from a decoder-only checkpoint (`gpt2`, `facebook/opt-1.3b`)
                checkpoint = None if causal_file else checkpoint_of(ctx, receiver)
                causal = causal_file or (checkpoint is not None and right_padding_decoder(checkpoint))
            ctx.report(
                call,
                f"`{spelled}(...)` gets input ids but no `attention_mask` while the project pads its "
                "sequences: pad tokens are attended to as if they were text",
                when=ProjectCondition(any_of=("pads-unsided",) if causal else ("pads",), scope="program"),
                fix=mask_fix(ctx, call, ids_value) if spread is None else None,
            )

    @staticmethod
    def _model_variables(ctx) -> tuple[set[str], set[str]]:
        """Variables holding a model (from `from_pretrained` of a model class or a local
        nn.Module), and those holding a local module whose forward takes no mask at all."""
        index = ctx.index
        models: set[str]
        maskless: set[str]
        models, maskless = set(), set()
        classes = ctx.models.classes
        for node in index.assignments:
            if type(node) is not cst.Assign or type(node.value) is not cst.Call:
                continue
            value = node.value
            targets = [last_name(t.target) for t in node.targets]
            callee = index.call_name(value) or ""
            local = dotted_name(value.func)
            if local in classes:
                params = [p.name.value for p in classes[local].forward_params()]
                forward = classes[local].forward
                applied = [p for p in params if "mask" in p.lower() and not _ignored_mask(forward, p)]
                bucket = models if applied or not params else maskless
                bucket.update(t for t in targets if t)
            elif callee.endswith(".from_pretrained") and "Tokenizer" not in callee and "Processor" not in callee \
                    and "Config" not in callee:
                models.update(t for t in targets if t)
        return models, maskless


def _mask_keyword(keyword: str) -> bool:
    """A keyword that may carry the ids' padding mask: any naming a mask (`attention_mask`,
    `input_mask`, `attn_mask`), but not the masks of something else: Longformer's
    `global_attention_mask` (which tokens attend globally), a `head_mask` (which heads), a
    `decoder_attention_mask` (the decoder's own ids)."""
    return "mask" in keyword and not (keyword.endswith("head_mask")
                                      or keyword in ("global_attention_mask", "decoder_attention_mask"))


def _next_token_loss(ctx: FileContext) -> bool:
    """A loss of the file is a next-token loss: `logits[..., :-1, :]` against `labels[..., 1:]`,
    written in the call or in the assignment of a name it reads (`logits = logits[..., :-1,
    :]`, then `cross_entropy(logits.view(-1, V), targets.view(-1))`)."""
    for _, inp, target in loss_calls(ctx.index):
        if any(upper == -1 for part in _with_bound(ctx, inp) for _, upper in slice_bounds(part)) and any(
                lower == 1 and upper is None for part in _with_bound(ctx, target)
                for lower, upper in slice_bounds(part)):
            return True
    return False


def _with_bound(ctx: FileContext, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`expr` and the values of the local names it reads that are bound once where it runs."""
    parts = [expr]
    for node in walk(expr):
        if type(node) is cst.Name:
            bound = ctx.bindings.reaching(node)
            if len(bound) == 1 and bound[0].kind == ASSIGN and bound[0].value is not None:
                parts.append(bound[0].value)
    return parts


def _mask_free_dict(value) -> bool:
    """A dict literal with string keys, none naming a mask, or a conditional choosing
    between such literals (`{"decoder_input_ids": d} if enc_dec else {}`)."""
    if type(value) is cst.IfExp:
        return _mask_free_dict(value.body) and _mask_free_dict(value.orelse)
    if type(value) is not cst.Dict:
        return False
    return all(type(e) is cst.DictElement and type(e.key) is cst.SimpleString
               and "mask" not in str(e.key.evaluated_value) for e in value.elements)


def _spreads_no_mask(ctx: FileContext, call: cst.Call) -> bool:
    """Every `**x` of the call spreads a dict that holds no mask (`_mask_free`): one built
    here, or a local name every binding of which reaching the call is one, with nothing
    stored into it."""
    for arg in call.args:
        if arg.star == "*":
            return False
        if arg.star != "**":
            continue
        value = arg.value
        if type(value) is cst.Name:
            bound = ctx.bindings.reaching(value)
            if not bound or any(b.kind != ASSIGN or not _mask_free(ctx, b.value, 0) for b in bound) \
                    or _stored_into(ctx, call, value.value):
                return False
        elif not _mask_free(ctx, value, 0):
            return False
    return True


def _mask_free(ctx: FileContext, value, depth: int) -> bool:
    """A dict that cannot hold an `attention_mask` key: a literal without a mask key
    (`_mask_free_dict`), a comprehension that filters the mask out (`{k: v for k, v in
    batch.items() if k not in EXCLUDED}` where the excluded keys hold `"attention_mask"`),
    or a call of a function of this file every `return` of which is one of these (a
    helper that builds the model's extra arguments: `**self._forward_kwargs(batch)`)."""
    if value is None or depth > 2:
        return False
    if _mask_free_dict(value):
        return True
    if type(value) is cst.DictComp:
        return _filters_mask(ctx, value)
    if type(value) is not cst.Call:
        return False
    function = ctx.calls.callee(value)
    if function is None:
        return False
    returns = [node for node in walk(function.body, into_functions=False) if type(node) is cst.Return]
    if not returns:
        return False
    for node in returns:
        returned = node.value
        if type(returned) is cst.Name:  # `out = {...}; return out`: every binding, nothing stored into it
            bound = ctx.bindings.reaching(returned)
            if not bound or any(b.kind != ASSIGN or not _mask_free(ctx, b.value, depth + 1) for b in bound) \
                    or _stored_into(ctx, node, returned.value):
                return False
        elif not _mask_free(ctx, returned, depth + 1):
            return False
    return True


def _filters_mask(ctx: FileContext, comp: cst.DictComp) -> bool:
    """`{k: v for k, v in d.items() if k not in S}` with `"attention_mask"` in S (or `k !=
    "attention_mask"`), or `if k in S` with no mask key in S: the key never is the mask."""
    loop = comp.for_in
    if loop.inner_for_in is not None or type(comp.key) is not cst.Name:
        return False
    key = comp.key.value
    for test in loop.ifs:
        for node in _conjuncts(test.test):
            if type(node) is not cst.Comparison or len(node.comparisons) != 1:
                continue
            if type(node.left) is not cst.Name or node.left.value != key:
                continue
            target = node.comparisons[0]
            operator = type(target.operator)
            if operator is cst.NotEqual and literal_value(target.comparator, default=None) == "attention_mask":
                return True
            if operator is cst.NotIn and "attention_mask" in (_string_set(ctx, target.comparator, 0, True) or ()):
                return True
            keys = _string_set(ctx, target.comparator, 0) if operator is cst.In else None
            if keys is not None and not any("mask" in k for k in keys):
                return True
    return False


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` -> [a, b, c] (each must hold)."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _string_set(ctx: FileContext, expr, depth: int, partial: bool = False) -> set[str] | None:
    """The strings a collection expression holds, when they can be read here: a literal
    set/tuple/list, `set(...)`/`frozenset(...)` of one, `a | b`, a name or `self.<attr>`
    (class attributes included) bound once to one. None when unknown. `partial`: a union
    with an unknown side gives the known side's strings (what it surely holds)."""
    if depth > 4 or expr is None:
        return None
    kind = type(expr)
    if kind in (cst.Set, cst.Tuple, cst.List):
        out = set()
        for element in expr.elements:
            value = literal_value(element.value, default=None) if type(element) is cst.Element else None
            if not isinstance(value, str):
                return None
            out.add(value)
        return out
    if kind is cst.Call and dotted_name(expr.func) in ("set", "frozenset", "tuple", "list") and len(expr.args) == 1:
        return _string_set(ctx, expr.args[0].value, depth + 1, partial)
    if kind is cst.BinaryOperation and type(expr.operator) is cst.BitOr:
        left = _string_set(ctx, expr.left, depth + 1, partial)
        right = _string_set(ctx, expr.right, depth + 1, partial)
        if left is None or right is None:
            return (left or right) if partial else None
        return left | right
    if kind is cst.Name:
        bound = ctx.bindings.expression(expr)
        if bound is None or type(ctx.index.parent(bound)) is cst.Param:
            return None
        return _string_set(ctx, bound, depth + 1, partial)
    if kind is cst.Attribute:
        bindings = ctx.bindings.attribute(expr)
        if len(bindings) == 1 and bindings[0].kind == ASSIGN:
            return _string_set(ctx, bindings[0].value, depth + 1, partial)
    return None


def _stored_into(ctx: FileContext, at: cst.CSTNode, name: str) -> bool:
    """`name[...] = ...`, `name.update(...)`, `name.setdefault(...)` in the scope of `at`."""
    scope = ctx.index.enclosing_function(at) or ctx.index.module
    for node in walk(scope):
        if type(node) is cst.Subscript and type(node.value) is cst.Name and node.value.value == name \
                and type(ctx.index.parent(node)) is cst.AssignTarget:
            return True
        if (type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == name
                and node.attr.value in ("update", "setdefault", "__setitem__")):
            return True
    return False


def _maskless_kwargs(ctx: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    """`model(**inputs)` as the only argument, where every binding of `inputs` that reaches
    the call is a dict literal with an `input_ids` key and no key naming a mask, and nothing
    stores into it (`inputs["attention_mask"] = ...`, `inputs.update(...)`): its ids."""
    if len(call.args) != 1 or call.args[0].star != "**" or type(call.args[0].value) is not cst.Name:
        return None
    name = call.args[0].value
    bound = ctx.bindings.reaching(name)
    if not bound:
        return None
    ids = None
    for binding in bound:
        value = binding.value
        if binding.kind != ASSIGN or type(value) is not cst.Dict:
            return None
        keys = {}
        for element in value.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            keys[element.key.evaluated_value] = element.value
        if "input_ids" not in keys or any("mask" in str(key) for key in keys):
            return None
        ids = ids or keys["input_ids"]
    scope = ctx.index.enclosing_function(call) or ctx.index.module
    for node in walk(scope):
        if type(node) is cst.Subscript and type(node.value) is cst.Name and node.value.value == name.value \
                and type(ctx.index.parent(node)) is cst.AssignTarget:
            return None
        if (type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == name.value
                and node.attr.value in ("update", "setdefault", "__setitem__")):
            return None
    return ids


def _own_method(index, receiver) -> bool:
    """`self.<name>` where `<name>` is a method of the enclosing class."""
    if not (type(receiver) is cst.Attribute and type(receiver.value) is cst.Name
            and receiver.value.value == "self"):
        return False
    cls = index.enclosing_class(receiver)
    body = cls.body.body if cls is not None and type(cls.body) is cst.IndentedBlock else ()
    return any(type(stmt) is cst.FunctionDef and stmt.name.value == receiver.attr.value for stmt in body)


def _ignored_mask(forward, name: str) -> bool:
    """The forward takes the mask but never reads it, or says it is unused (`"attention_mask
    was passed, but it is unused in this model"`, a recurrent model): passing it changes
    nothing, and TL103 judges the forward itself."""
    if forward is None:
        return False
    keywords = {id(node.keyword) for node in walk(forward.body) if type(node) is cst.Arg and node.keyword}
    read = any(type(node) is cst.Name and node.value == name and id(node) not in keywords
               for node in walk(forward.body))
    return not read or documented_unused(string_literals(forward), name)


# --- the fix: pass the mask that is at hand ------------------------------------------------

_MOVES = ("to", "cuda", "cpu", "long", "int", "squeeze", "unsqueeze", "contiguous")
_MASK_ENCODERS = ("__call__", "encode_plus", "batch_encode_plus")  # `encode` gives ids only


def mask_fix(ctx: FileContext, call: cst.Call, ids_value: cst.BaseExpression):
    """Pass `attention_mask=<mask>` when a mask is clearly at hand: a variable of the
    enclosing function (a parameter, an assignment before the call, a loop target) named
    `attention_mask` or assigned from `x["attention_mask"]` / `x.attention_mask`; else the
    mask beside the ids: `enc["input_ids"]` -> `enc["attention_mask"]` (moved the same way,
    `.to(device)`), when `enc` is a tokenizer's output or its mask is read elsewhere in the
    function. Unsafe: the model's outputs change (that is the point), and a mask held under
    another name, or one the model should not get (a causal LM fed packed sequences), is
    not something the rule can know."""
    index = ctx.index
    scope = index.enclosing_function(call) or index.module
    before = _bound_before(ctx, scope, call)
    mask = _mask_variable(before)
    if mask is None:
        mask = _mask_beside(ctx, scope, ids_value, before)
    if mask is None:
        return None
    spelled = index.module.code_for_node(mask)
    new = fixes.with_keyword(call, "attention_mask", mask)
    return fixes.fix("unsafe", f"Pass `attention_mask={spelled}`",
                     fixes.replace(call, fixes.code_at(index, call, new)))


def _bound_before(ctx: FileContext, scope, call) -> dict[str, list]:
    """Names bound in `scope` before `call` (its own statements, not nested functions):
    name -> the values assigned (None for a parameter, a loop/with target, `+=`)."""
    return {name: [b.value if b.kind == ASSIGN else None for b in bound]
            for name, bound in ctx.bindings.before(scope, call).items()}


def _peel(expr):
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _MOVES:
        expr = expr.func.value
    return expr


def _mask_key(expr) -> cst.BaseExpression | None:
    """`x["attention_mask"]` / `x.attention_mask` (under `.to(...)`): the holder `x`."""
    expr = _peel(expr)
    if type(expr) is cst.Attribute and expr.attr.value == "attention_mask":
        return expr.value
    if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        key = expr.slice[0].slice.value
        if type(key) is cst.SimpleString and key.evaluated_value == "attention_mask":
            return expr.value
    return None


def _mask_variable(bound) -> cst.Name | None:
    found = sorted(name for name, values in bound.items()
                   if name == "attention_mask" or (values and all(v is not None and _mask_key(v) is not None
                                                                  for v in values)))
    if "attention_mask" in found:
        return cst.Name("attention_mask")
    return cst.Name(found[0]) if len(found) == 1 else None


def _mask_beside(ctx: FileContext, scope, ids_value, bound, depth: int = 0):
    """The mask next to the ids: the same holder, key `attention_mask`, moved the same way."""
    base = _peel(ids_value)
    if type(base) is cst.Name and depth == 0:
        values = bound.get(base.value) or []
        if len(values) == 1 and values[0] is not None:
            return _mask_beside(ctx, scope, values[0], bound, depth + 1)
        return None
    mask_base: cst.CSTNode
    if type(base) is cst.Attribute and base.attr.value == "input_ids":
        holder, mask_base = base.value, base.with_changes(attr=cst.Name("attention_mask"))
    elif type(base) is cst.Subscript and len(base.slice) == 1 and type(base.slice[0].slice) is cst.Index:
        key = base.slice[0].slice.value
        if not (type(key) is cst.SimpleString and key.evaluated_value == "input_ids"):
            return None
        holder = base.value
        mask_base = base.deep_replace(key, key.with_changes(value=key.value.replace("input_ids", "attention_mask")))
    else:
        return None
    if dotted_name(holder) is None or not _holds_mask(ctx, scope, holder, bound):
        return None
    return mask_base if base is ids_value else ids_value.deep_replace(base, mask_base)


def _holds_mask(ctx: FileContext, scope, holder, bound) -> bool:
    """`holder` is a tokenizer's output (every assignment of it in the scope), or its
    `attention_mask` is read somewhere in the scope."""
    body = scope.body if type(scope) is cst.FunctionDef else scope
    for node in walk(body, into_functions=False):
        found = _mask_key(node) if type(node) in (cst.Subscript, cst.Attribute) else None
        if found is not None and found.deep_equals(holder):
            return True
    if type(holder) is not cst.Name:
        return False
    values = bound.get(holder.value) or []
    return bool(values) and all(v is not None and _tokenizer_output(ctx.data, v) for v in values)


def _tokenizer_output(data, value) -> bool:
    value = _peel(value)
    if type(value) is not cst.Call:
        return False
    func = value.func
    receiver = func
    if type(func) is cst.Attribute and func.attr.value in _MASK_ENCODERS:
        receiver = func.value
    elif type(func) is cst.Attribute:
        return False
    if not tokenizer_like(data, receiver):
        return False
    returned = get_arg(value, "return_attention_mask")
    return returned is None or literal_value(returned.value, default=None) is not False
