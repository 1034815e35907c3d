"""Weight initialisation: the calls that set a tensor's initial values, and what the
tensor is (which module kind, under which name).

`find_init_calls(index)` lists `torch.nn.init.*` calls and in-place tensor initialisers
(`w.zero_()`, `w.data.fill_(0)`, `w.normal_(0, 1)`) with the scheme and its literal
constant or std; `init_target(ctx, init)` says what the tensor belongs to: a sub-module
attribute (`self.q_proj.weight`), a module narrowed by `isinstance` in an HF-style
`_init_weights(self, module)` / `for m in self.modules()` loop, a local module, or a raw
`nn.Parameter`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from tlint.cst import dotted_name, get_arg, literal_value, walk

_CONSTANT_FUNCTIONS = {"zeros_": 0.0, "zeros": 0.0, "ones_": 1.0, "ones": 1.0}
_VALUE_FUNCTIONS = frozenset({"constant_", "constant"})
_NORMAL_FUNCTIONS = frozenset({"normal_", "normal", "trunc_normal_"})
# Initialisers that draw fresh, non-constant values (they re-initialise a tensor).
_RANDOM_NAMES = frozenset({
    "normal_", "normal", "trunc_normal_", "trunc_normal_tf_", "uniform_", "uniform", "xavier_uniform_",
    "xavier_normal_", "xavier_uniform", "xavier_normal", "kaiming_uniform_", "kaiming_normal_",
    "kaiming_uniform", "kaiming_normal", "orthogonal_", "orthogonal", "sparse_", "eye_", "dirac_",
    "lecun_normal_", "variance_scaling_", "init_weights", "reset_parameters",
})
_TENSOR_METHODS = frozenset({"zero_", "fill_", "normal_", "uniform_", "copy_", "mul_", "div_"})
# Method and function names an init call has (besides `torch.nn.init.*`): the pre-filter's tokens.
INIT_CALL_NAMES = _TENSOR_METHODS | _RANDOM_NAMES

LINEAR_KINDS = frozenset({"torch.nn.Linear", "torch.nn.LazyLinear", "torch.nn.Bilinear", "transformers.Conv1D",
                          "transformers.pytorch_utils.Conv1D",
                          "torch.nn.modules.linear.NonDynamicallyQuantizableLinear"})
EMBEDDING_KINDS = frozenset({"torch.nn.Embedding", "torch.nn.EmbeddingBag"})
ATTENTION_KINDS = frozenset({"torch.nn.MultiheadAttention"})
CONV_KINDS = frozenset({"torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d"})
# Weights of a MultiheadAttention that project q, k and v.
ATTENTION_INPUT_WEIGHTS = frozenset({"in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"})
# Attribute names of the Linear layers that project an attention's input to q, k and v
# (fused or not): nanoGPT/GPT-2 `c_attn`, HF `q_proj`/`query`/`query_key_value`, MPT `Wqkv`,
# lucidrains `to_q`/`to_kv`, LLaMA `wq`, T5 `q`. Used when the module's class is not visible.
_ATTENTION_INPUT_NAME = re.compile(r"^(?:w_?|to_|in_)?(?:q|k|v|qk|kv|qkv|query|key|value|query_key_value)"
                                   r"(?:_?(?:proj|projection|lin|linear|dense|layer))?$|^(?:in_proj|c_attn)$")


def is_attention_input_name(name: str) -> bool:
    """`qkv`, `q_proj`, `key`, `in_proj`, `c_attn`, `Wqkv`, `to_q`: the name of a q/k/v
    input projection of an attention module."""
    return bool(_ATTENTION_INPUT_NAME.match(name.lower()))


# `einsum` is left out: its equations are as often batched dot products as matmuls.
_MATMUL_FUNCTIONS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.nn.functional.linear"})


@dataclass
class InitCall:
    """One initialisation of `target` (`.data` stripped): `scheme` is "constant" (with
    `value`, None when not a literal), "normal" (with `value` = the std, None when not a
    literal) or "random" (any other initialiser that draws fresh values)."""

    call: cst.Call
    target: cst.BaseExpression
    scheme: str
    value: float | None


@dataclass
class InitTarget:
    """What an initialised tensor is: `kind` is "linear", "embedding", "attention-input",
    "conv", "parameter" or None (unknown); `name` is the attribute or variable name of the
    module (None when only an `isinstance` test tells the kind); `ctor_call` is the
    module's constructor call (`nn.Linear(d, 1)`) or the `nn.Parameter(...)` call of a raw
    parameter, when known."""

    kind: str | None
    name: str | None
    ctor_call: cst.Call | None = None


def _number(expr) -> float | None:
    value = literal_value(expr, default=None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def strip_data(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`w.data` -> `w` (also `w.data.data`)."""
    while type(expr) is cst.Attribute and expr.attr.value == "data":
        expr = expr.value
    return expr


def _function_init(call: cst.Call, qualified: str) -> InitCall | None:
    last = qualified.rsplit(".", 1)[-1]
    tensor = get_arg(call, "tensor", 0)
    if tensor is None:
        return None
    target = strip_data(tensor.value)
    if qualified.startswith("torch.nn.init."):
        if last in _CONSTANT_FUNCTIONS:
            return InitCall(call, target, "constant", _CONSTANT_FUNCTIONS[last])
        if last in _VALUE_FUNCTIONS:
            value = get_arg(call, "val", 1)
            return InitCall(call, target, "constant", _number(value.value) if value else None)
        if last in _NORMAL_FUNCTIONS:
            std = get_arg(call, "std", 2)
            return InitCall(call, target, "normal", 1.0 if std is None else _number(std.value))
    if last in _RANDOM_NAMES:
        return InitCall(call, target, "random", None)
    return None


def _method_init(call: cst.Call) -> InitCall | None:
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value not in _TENSOR_METHODS:
        return None
    target = strip_data(func.value)
    method = func.attr.value
    if method == "zero_" and not call.args:
        return InitCall(call, target, "constant", 0.0)
    if method == "fill_" and len(call.args) == 1:
        return InitCall(call, target, "constant", _number(call.args[0].value))
    if method == "normal_":
        std = get_arg(call, "std", 1)
        return InitCall(call, target, "normal", 1.0 if std is None else _number(std.value))
    # uniform_, copy_ and in-place rescaling give the tensor other values
    return InitCall(call, target, "random", None)


def find_init_calls(index) -> list[InitCall]:
    """Every initialisation call of the file, in source order."""
    out = []
    for call in index.calls:
        func = call.func
        qualified = index.qualify(func)
        if qualified is not None and qualified.startswith("torch.nn.init."):
            found = _function_init(call, qualified)
        elif type(func) is cst.Attribute and func.attr.value in _TENSOR_METHODS:
            found = _method_init(call)
        else:
            name = qualified or dotted_name(func)
            found = _function_init(call, name) if name and name.rsplit(".", 1)[-1] in _RANDOM_NAMES else None
        if found is not None:
            out.append(found)
    return out


def kind_of_ctor(ctor: str | None) -> str | None:
    if ctor in LINEAR_KINDS:
        return "linear"
    if ctor in EMBEDDING_KINDS:
        return "embedding"
    if ctor in ATTENTION_KINDS:
        return "attention"
    if ctor in CONV_KINDS:
        return "conv"
    return None


def _isinstance_kinds(index, test: cst.BaseExpression, variable: str) -> list[str] | None:
    """Qualified classes that an `isinstance(variable, ...)` in `test` narrows to."""
    for node in walk(test):
        if (type(node) is cst.Call and dotted_name(node.func) == "isinstance" and len(node.args) == 2
                and dotted_name(node.args[0].value) == variable):
            classes = node.args[1].value
            elements = classes.elements if type(classes) is cst.Tuple or type(classes) is cst.List else None
            exprs = [el.value for el in elements] if elements is not None else [classes]
            return [index.qualify(expr) or dotted_name(expr) or "" for expr in exprs]
    return None


def narrowed_classes(index, node: cst.CSTNode, variable: str) -> list[str] | None:
    """The classes an enclosing `if isinstance(variable, ...)` (the call in its body)
    narrows `variable` to, innermost first; None when no such test encloses `node`."""
    child = node
    for anc in index.ancestors(node):
        if type(anc) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return None
        if type(anc) is cst.If and child is anc.body:
            kinds = _isinstance_kinds(index, anc.test, variable)
            if kinds is not None:
                return kinds
        child = anc
    return None


_NEUTRAL_CALLS = frozenset({"isinstance", "hasattr", "getattr", "callable", "type"})


def _neutral_test(test: cst.BaseExpression) -> bool:
    """A test that only asks what an object is (`isinstance`, `hasattr`, `is None`),
    not which option the user chose."""
    if type(test) is cst.BooleanOperation:
        return _neutral_test(test.left) and _neutral_test(test.right)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _neutral_test(test.expression)
    if type(test) is cst.Call:
        return dotted_name(test.func) in _NEUTRAL_CALLS
    if type(test) is cst.Comparison:
        return all(type(target.operator) in (cst.Is, cst.IsNot) and dotted_name(target.comparator) == "None"
                   for target in test.comparisons)
    return False


def under_option(index, node: cst.CSTNode) -> bool:
    """Whether `node` runs only under a user's choice: inside an `if`/`elif`/`else` or a
    conditional expression whose test is more than an `isinstance`/`is None` check (a
    config flag, an argument, a parameter name), within its function."""
    child = node
    for anc in index.ancestors(node):
        if type(anc) in (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module):
            return False
        if type(anc) is cst.If and child is not anc.test and not _neutral_test(anc.test):
            return True
        if type(anc) is cst.IfExp and child is not anc.test and not _neutral_test(anc.test):
            return True
        child = anc
    return False


def is_matmul_operand(index, expr: cst.CSTNode) -> bool:
    """Whether `expr` (a reference to a tensor, possibly transposed or indexed) is an
    operand of a matrix product (`x @ W`, `W @ x`, `torch.matmul`/`mm`/`bmm`,
    `x.matmul(W)`) or `F.linear`'s weight."""
    node = expr
    parent = index.parent(node)
    while type(parent) in (cst.Subscript, cst.SubscriptElement, cst.Index) or (
            type(parent) is cst.Attribute and parent.attr.value in ("T", "t", "mT", "transpose")):
        node = parent
        parent = index.parent(node)
        if type(parent) is cst.Call and type(parent.func) is cst.Attribute and parent.func is node:
            node = parent
            parent = index.parent(node)
    if type(parent) is cst.BinaryOperation and type(parent.operator) is cst.MatrixMultiply:
        return True
    if type(parent) is cst.Arg:
        call = index.parent(parent)
        if type(call) is not cst.Call:
            return False
        qualified = index.qualify(call.func) or ""
        position = [arg for arg in call.args if arg.keyword is None].index(parent) if parent.keyword is None else -1
        if qualified == "torch.nn.functional.linear":
            return position == 1 or (parent.keyword is not None and parent.keyword.value == "weight")
        if qualified in _MATMUL_FUNCTIONS:
            return position in (0, 1) or (parent.keyword is not None and parent.keyword.value in ("input", "other"))
        if type(call.func) is cst.Attribute and call.func.attr.value in ("matmul", "mm", "bmm"):
            return position == 0
    return False


def is_scaled_use(index, expr: cst.CSTNode) -> bool:
    """Whether a reference to a tensor, or the matrix product it enters, is multiplied or
    divided right away (`x @ W * s`, `W / math.sqrt(d)`, `W.mul(s)`)."""
    node = expr
    for _ in range(6):
        parent = index.parent(node)
        if parent is None:
            return False
        if type(parent) is cst.BinaryOperation and type(parent.operator) in (cst.Multiply, cst.Divide):
            return True
        if type(parent) is cst.Call and type(parent.func) is cst.Attribute and parent.func.attr.value in (
                "mul", "div", "mul_", "div_"):
            return True
        through = (type(parent) in (cst.Attribute, cst.Subscript, cst.SubscriptElement, cst.Index, cst.Arg)
                   or (type(parent) is cst.Call and (parent.func is node or type(node) is cst.Arg))
                   or (type(parent) is cst.BinaryOperation and type(parent.operator) is cst.MatrixMultiply))
        if not through:
            return False
        node = parent
    return False


# --- where a layer's output goes ------------------------------------------------------------

# methods that reshape or split a tensor without computing anything learned
_RESHAPES = frozenset({"view", "reshape", "transpose", "permute", "chunk", "split", "flatten", "unflatten",
                       "contiguous", "squeeze", "unsqueeze", "float", "to", "type_as", "view_as", "reshape_as"})
_COMBINES = (cst.Add, cst.Subtract, cst.Multiply)


def _consumer(index, node: cst.CSTNode) -> tuple[cst.CSTNode | None, cst.CSTNode]:
    """The node that uses the value of `node`, past reshapes (`y.chunk(2, dim=1)`,
    `y.transpose(1, 2)`) and subscripts (`y[:, 0]`), and the value it uses."""
    while True:
        parent = index.parent(node)
        if type(parent) is cst.Attribute and parent.value is node and parent.attr.value in _RESHAPES:
            call = index.parent(parent)
            if type(call) is cst.Call and call.func is parent:
                node = call
                continue
        if type(parent) is cst.Subscript and parent.value is node:
            node = parent
            continue
        return parent, node


def _ends_here(index, node: cst.CSTNode, names_after) -> bool:
    """Does the value of `node` end as an output: returned, or added to (or multiplied
    with) something else, directly or through the names it is assigned to?"""
    consumer, value = _consumer(index, node)
    if type(consumer) is cst.Return:
        return True
    if type(consumer) in (cst.Element, cst.Tuple) and type(index.parent(consumer)) in (cst.Tuple, cst.Return):
        return type(index.parent(consumer)) is cst.Return or type(index.parent(index.parent(consumer))) is cst.Return
    if type(consumer) is cst.BinaryOperation and type(consumer.operator) in _COMBINES:
        return True
    if type(consumer) is cst.AugAssign and consumer.value is value and type(consumer.operator) is cst.AddAssign:
        return True
    if type(consumer) is cst.Assign and consumer.value is value:
        flat: list[cst.BaseExpression] = []
        for assigned in consumer.targets:
            target = assigned.target
            if type(target) is cst.Tuple or type(target) is cst.List:
                flat += [el.value for el in target.elements]
            else:
                flat.append(target)
        targets = [n.value for n in flat if type(n) is cst.Name]
        if not targets or len(targets) != len(flat):
            return False  # `self.x = ...`, `x[i] = ...`: kept somewhere this does not follow
        uses = [use for name in targets for use in names_after(consumer, name) if not _rebinds(index, use)]
        return bool(uses) and all(_ends_here(index, use, lambda _s, _n: ()) for use in uses)
    return False


def output_only(index, classes, name: str) -> bool:
    """Every call of the sub-module `self.<name>(...)` in `classes` (the module classes that
    declare it) hands its result to the output: returned, or combined with another value
    (a residual branch's `x + dx`, a modulation's `x * (1 + scale) + shift`), through
    reshapes and the names it is assigned to, never to another layer or a matrix product.
    Such a layer is the last of its path: zero there starts the path at zero on purpose."""
    calls: list[tuple[cst.Call, cst.CSTNode]] = []
    for module_class in classes:
        for fn in module_class.methods.values():
            for call in index.statement_calls.get(fn, ()):
                func = call.func
                if (type(func) is cst.Attribute and func.attr.value == name
                        and type(func.value) is cst.Name and func.value.value == "self"):
                    calls.append((call, fn))
    if not calls:
        return False

    def names_after(fn):
        def uses(statement: cst.CSTNode, name: str):
            inside = {id(node) for node in walk(statement)}
            after = False
            for node in walk(fn.body):
                if node is statement:
                    after = True
                elif (after and id(node) not in inside and type(node) is cst.Name and node.value == name
                        and not _is_target(index, node)):
                    yield node
        return uses

    return all(_ends_here(index, call, names_after(fn)) for call, fn in calls)


def _rebinds(index, use: cst.Name) -> bool:
    """`scale, shift = scale[:, None], shift[:, None]`: a use in a statement that binds the
    name again (its later uses are followed instead)."""
    node: cst.CSTNode | None = use
    while node is not None and type(node) is not cst.Assign:
        if isinstance(node, (cst.BaseCompoundStatement, cst.FunctionDef)):
            return False
        node = index.parent(node)
    if node is None:
        return False
    return any(type(n) is cst.Name and n.value == use.value and _is_target(index, n)
               for target in node.targets for n in walk(target.target))


def _is_target(index, node: cst.Name) -> bool:
    parent = index.parent(node)
    return type(parent) in (cst.AssignTarget, cst.Element) and (
        type(parent) is cst.AssignTarget or type(index.parent(index.parent(parent))) is cst.AssignTarget)
