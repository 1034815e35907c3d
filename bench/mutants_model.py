"""Model operators of the mutation benchmark (issue 21; see bench/mutants.py, which loads
this module and appends `operators(mutants)` to its `OPERATORS`).

Each plants one model bug the TL2xx rules (and TL103) document, found by the text of the
code, never by tlint's analysis:

- `remove-causal-mask`: `is_causal=True` dropped, a causal `attn_mask=`/`mask=` argument
  dropped, or the statement filling scores from a causal mask (`tril`, `triu`, `bias`,
  `causal_mask`) removed, in a file that generates or holds a language-model head
  (a decoder: TL207, or TL103 when the mask parameter is left unread);
- `remove-padding-mask`: the statement filling hand-written attention scores from a padding
  mask removed (TL103, TL102, TL101);
- `remove-positional`: `tok + pos` -> `tok`, where one operand reads a positional
  embedding, table or encoding (TL205, TL204, TL206);
- `remove-scaling`: the `/ sqrt(d)` or `* scale` of a query-key product removed (TL208);
- `drop-residual`: `x = x + self.f(..x..)` -> `x = self.f(..x..)`, `x += self.f(..x..)`
  -> `x = self.f(..x..)` (TL203);
- `move-norm`: one pre-norm residual made post-norm, `x = x + self.f(self.norm(x))` ->
  `x = self.norm(x + self.f(x))` (TL201).
"""

from __future__ import annotations

import libcst as cst

_CAUSAL_WORDS = ("causal", "tril", "triu", "subsequent", "future", "bias", "look_ahead", "lookahead", "ltor")
_SCORE_WORDS = ("score", "attn", "att", "sim", "dots", "energ", "weight", "qk", "w")
_POSITIONAL_WORDS = ("pos_emb", "position", "wpe", "pe[", "self.pe", "positional", "pos_enc", "pos_embed", "pos(")
_NOT_POSITIONAL = ("shape", "size(", "offset", "len(", "mem_len", "expos", "compos", "purpose")
_INDEX_ENDINGS = ("ids", "_id", "index", "idx")  # `position_ids + offset`: index arithmetic, not an encoding
_PRODUCT_WORDS = ("@", "matmul", "einsum", "bmm")  # a query-key product
_PADDING_PARAM_WORDS = ("mask", "pad", "len")
# a transformer block names its attention, mixer or feed-forward sub-layers
_BLOCK_WORDS = ("attn", "attention", "self.att", "mixer", "mlp", "ffn", "feed_forward", "feedforward", "self.ff",
                "transformer")


class _Nodes(cst.CSTVisitor):
    def __init__(self, kinds: tuple[type, ...]) -> None:
        self.kinds, self.found = kinds, []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return True


def nodes(module: cst.Module, *kinds: type) -> list:
    visitor = _Nodes(kinds)
    module.visit(visitor)
    return visitor.found


def _drop_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    args = [a for a in call.args if a is not arg]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in words)


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in nodes(node, cst.Name)} if not isinstance(node, cst.Name) else {node.value}


def operators(m) -> list:
    """The model operators, built on the helpers of bench/mutants.py (`m`)."""
    Mutation, ReplaceExpression, RemoveStatement = m.Mutation, m.ReplaceExpression, m.RemoveStatement

    def text(parsed, node) -> str:
        return parsed.module.code_for_node(node)

    def fills(parsed):
        """(block, index, call, mask text, receiver text) of one-line `masked_fill` statements."""
        out = []
        for block, index, call in m.statements_with(parsed, lambda c: m.callee(c) in ("masked_fill", "masked_fill_")):
            if call.args and isinstance(call.func, cst.Attribute):
                out.append((block, index, call, text(parsed, call.args[0].value), text(parsed, call.func.value)))
        return out

    def scores(receiver: str) -> bool:
        last = receiver.rsplit(".", 1)[-1].lower()
        return any(last.startswith(word) for word in _SCORE_WORDS) and "label" not in last and "logit" not in last

    def remove_causal_mask(parsed) -> list:
        out = []
        for call in nodes(parsed.module, cst.Call):
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else ""
                value = text(parsed, arg.value)
                if (keyword == "is_causal" and value not in ("False", "None")) or (
                        keyword in ("attn_mask", "mask", "tgt_mask", "src_mask") and _mentions(value, _CAUSAL_WORDS)):
                    out.append(Mutation(parsed.line(call), f"dropped `{m._code(parsed, arg)}`",
                                        ReplaceExpression(call, _drop_arg(call, arg))))
        for block, index, call, mask, receiver in fills(parsed):
            if _mentions(mask, _CAUSAL_WORDS) and scores(receiver):
                out.append(Mutation(parsed.line(call), f"removed `{m._code(parsed, call)}`",
                                    RemoveStatement(block, index)))
        return out

    def defined_from(parsed, call, name: str) -> str:
        """The text of the assignments to `name` before `call` in its function (a fill that
        also applies a mask built from `tril` on some path is a causal fill)."""
        node = call
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = parsed.parents.get(node)
        if node is None:
            return ""
        found = [a for a in nodes(node, cst.Assign) if parsed.line(a) < parsed.line(call)
                 and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
        return " ".join(text(parsed, a) for a in found)

    def padding_fill(parsed, call, mask: str, receiver: str) -> bool:
        """A fill of attention scores (not of a mask or bias being built) with a large negative
        value (not a post-softmax zeroing) from a mask that is not causal (by its text or its
        local definition), not a self-token mask (shared-QK attention) and not top-k sparsity."""
        value = text(parsed, call.args[1].value) if len(call.args) > 1 else ""
        if "mask" not in mask.lower() or _mentions(mask, (*_CAUSAL_WORDS, "topk", "sparse", "self_mask")) \
                or not scores(receiver) or _mentions(receiver.rsplit(".", 1)[-1], ("mask", "bias")):
            return False
        if value.strip().rstrip(".0") in ("", "0") or _mentions(value, ("token_self", "self_attn_value")):
            return False
        names = [n for n in _names(call.args[0].value) if "mask" in n.lower()]
        if any(_mentions(defined_from(parsed, call, n), _CAUSAL_WORDS) for n in names):
            return False
        function = enclosing(parsed, call, cst.FunctionDef)
        if function is None or not _mentions(text(parsed, function), _PRODUCT_WORDS):
            return False  # no query-key product here: confidence or sampling scores, not attention
        if any(_mentions(text(parsed, test), _CAUSAL_WORDS) for test in guards(parsed, call)):
            return False  # under `if self.causal:` the mask is the causal one
        return from_padding(parsed, call, function)

    def enclosing(parsed, node, kind):
        while node is not None and not isinstance(node, kind):
            node = parsed.parents.get(node)
        return node

    def guards(parsed, node) -> list:
        """The tests of the `if` statements whose body holds `node` (in its function)."""
        out = []
        while node is not None and not isinstance(node, cst.FunctionDef):
            parent = parsed.parents.get(node)
            if isinstance(parent, cst.If) and node is parent.body:  # (not its `else`)
                out.append(parent.test)
            node = parent
        return out

    def from_padding(parsed, call, function) -> bool:
        """The fill's mask comes from the caller's padding: followed through the function's
        assignments before the fill, it reads a parameter named like a mask, padding or
        lengths, or its definition says `pad` (a mask built from hash buckets or positions
        here, with no such parameter, is not a padding mask)."""
        params = {p.name.value for p in (*function.params.params, *function.params.kwonly_params,
                                         *function.params.posonly_params)
                  if _mentions(p.name.value, _PADDING_PARAM_WORDS)}
        seen: set[str] = set()
        todo = list(_names(call.args[0].value))
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in params:
                return True
            definition = defined_from(parsed, call, name)
            if "pad" in definition.lower():
                return True
            for assign in nodes(function, cst.Assign):
                if parsed.line(assign) < parsed.line(call) and any(
                        isinstance(t.target, cst.Name) and t.target.value == name for t in assign.targets):
                    todo += _names(assign.value)
        return False

    def remove_padding_mask(parsed) -> list:
        out = []  # (a `key_padding_mask=` argument removed is the data operator `remove-key-padding-mask`)
        for block, index, call, mask, receiver in fills(parsed):
            if padding_fill(parsed, call, mask, receiver):
                out.append(Mutation(parsed.line(call), f"removed `{m._code(parsed, call)}`",
                                    RemoveStatement(block, index)))
        return out

    def positional(code: str) -> bool:
        return _mentions(code, _POSITIONAL_WORDS) and not _mentions(code, _NOT_POSITIONAL) \
            and not code.strip().lower().endswith(_INDEX_ENDINGS)

    def remove_positional(parsed) -> list:
        out = []
        for op in nodes(parsed.module, cst.BinaryOperation):
            if not isinstance(op.operator, cst.Add):
                continue
            left, right = text(parsed, op.left), text(parsed, op.right)
            if positional(right) and not positional(left) and not _mentions(left, _NOT_POSITIONAL):
                keep = op.left
            elif positional(left) and not positional(right) and not _mentions(right, _NOT_POSITIONAL):
                keep = op.right
            else:
                continue
            if isinstance(keep, (cst.Integer, cst.Float)) or stringy(op.left) or stringy(op.right):
                continue  # a number, or text that names a position (a message), not an encoding
            out.append(Mutation(parsed.line(op), f"`{m._code(parsed, op)}` -> `{m._code(parsed, keep)}`",
                                ReplaceExpression(op, keep)))
        return out

    def stringy(expr) -> bool:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) \
            and (stringy(expr.left) or stringy(expr.right))

    def gates(parsed, op) -> bool:
        """The product feeds sigmoid gates (a forgetting gate), not a softmax: its function
        mentions a sigmoid and no softmax."""
        node = op
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = parsed.parents.get(node)
        body = text(parsed, node) if node is not None else ""
        return "sigmoid" in body and "softmax" not in body

    def remove_scaling(parsed) -> list:
        out = []
        for op in nodes(parsed.module, cst.BinaryOperation):
            right, left = text(parsed, op.right).lower(), text(parsed, op.left)
            product = "@" in left or _mentions(left, ("matmul", "einsum", "bmm"))
            divide = isinstance(op.operator, cst.Divide) and _mentions(right, ("sqrt", "** 0.5", "**0.5", "scale",
                                                                                 "temperature"))
            multiply = isinstance(op.operator, cst.Multiply) and _mentions(right, ("scale", "** -0.5", "**-0.5"))
            if product and (divide or multiply) and not gates(parsed, op):
                out.append(Mutation(parsed.line(op), f"`{m._code(parsed, op)}` -> `{m._code(parsed, op.left)}`",
                                    ReplaceExpression(op, op.left)))
        return out

    def branch_of(target: str, expr: cst.BaseExpression) -> bool:
        """`self.f(...)` applied to the stream `target`: not a positional encoding added to
        it (`x = x + self.pos_emb(x)` is the operator `remove-positional`'s bug) and not
        attention scores (`sim = sim + self.talking_heads(sim)`: no residual stream)."""
        return isinstance(expr, cst.Call) and m.dotted(expr.func).startswith("self.") \
            and any(target in _names(arg.value) for arg in expr.args) \
            and not positional(cst.Module([]).code_for_node(expr.func)) and not scores(target)

    def in_block(parsed, stmt) -> bool:
        """The statement is in a transformer block: its class names an attention, mixer or
        feed-forward sub-layer (a cross network's `x_i + cross(x_0, x_i)` is the DCN
        formula, not a block's residual)."""
        cls = enclosing(parsed, stmt, cst.ClassDef)
        return cls is not None and _mentions(text(parsed, cls), _BLOCK_WORDS)

    def drop_residual(parsed) -> list:
        out = []
        for stmt in nodes(parsed.module, cst.Assign, cst.AugAssign):
            if not in_block(parsed, stmt):
                continue
            if isinstance(stmt, cst.Assign):
                if len(stmt.targets) != 1 or not isinstance(stmt.targets[0].target, cst.Name):
                    continue
                name, value = stmt.targets[0].target.value, stmt.value
                if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) \
                        and isinstance(value.left, cst.Name) and value.left.value == name \
                        and branch_of(name, value.right):
                    out.append(Mutation(parsed.line(stmt), f"`{m._code(parsed, value)}` -> "
                                                           f"`{m._code(parsed, value.right)}`",
                                        ReplaceExpression(value, value.right)))
            elif isinstance(stmt.operator, cst.AddAssign) and isinstance(stmt.target, cst.Name) \
                    and branch_of(stmt.target.value, stmt.value):
                new = cst.Assign([cst.AssignTarget(stmt.target)], stmt.value)
                out.append(Mutation(parsed.line(stmt), f"`{m._code(parsed, stmt)}` -> `=`",
                                    ReplaceExpression(stmt, new)))
        return out

    def norm_call(expr: cst.BaseExpression, name: str) -> bool:
        if not isinstance(expr, cst.Call) or len(expr.args) != 1 or not isinstance(expr.args[0].value, cst.Name):
            return False
        last = m.dotted(expr.func).rsplit(".", 1)[-1].lower()
        return expr.args[0].value.value == name and (last.startswith("ln") or "norm" in last)

    def move_norm(parsed) -> list:
        out = []
        for stmt in nodes(parsed.module, cst.Assign):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0].target, cst.Name):
                continue
            name, value = stmt.targets[0].target.value, stmt.value
            if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)
                    and isinstance(value.left, cst.Name) and value.left.value == name
                    and isinstance(value.right, cst.Call)):
                continue
            norm = next((a.value for a in value.right.args if norm_call(a.value, name)), None)
            if norm is None:
                continue
            branch = value.right.with_changes(args=[a.with_changes(value=cst.Name(name)) if a.value is norm else a
                                                    for a in value.right.args])
            new = norm.with_changes(args=[norm.args[0].with_changes(
                value=cst.BinaryOperation(cst.Name(name), cst.Add(), branch))])
            what = f"`{m._code(parsed, value)}` -> `{parsed.module.code_for_node(new)}`"
            out.append(Mutation(parsed.line(stmt), what, ReplaceExpression(value, new)))
        return out

    attention = ("softmax", "attention", "attn")
    return [
        m.Operator("remove-causal-mask", "model", ("TL207", "TL103"), ("causal", "tril", "triu", "bias", "mask"),
                   remove_causal_mask, "a causal mask removed from a decoder's attention",
                   requires=("generate", "lm_head", "GPT", "CausalLM")),
        m.Operator("remove-padding-mask", "model", ("TL103", "TL102", "TL101"), ("mask",), remove_padding_mask,
                   "a padding-mask fill removed from hand-written attention scores", requires=attention),
        m.Operator("remove-positional", "model", ("TL205", "TL204", "TL206"), ("pos", "pe"), remove_positional,
                   "the positional encoding's addition removed", requires=("Embedding", "embed")),
        m.Operator("remove-scaling", "model", ("TL208",), ("sqrt", "scale", "0.5", "temperature"), remove_scaling,
                   "the 1/sqrt(d) scaling of attention scores removed", requires=("softmax",)),
        m.Operator("drop-residual", "model", ("TL203",), ("+",), drop_residual,
                   "a residual dropped (`x = x + f(x)` -> `x = f(x)`)", requires=("forward",)),
        m.Operator("move-norm", "model", ("TL201",), ("norm", "ln"), move_norm,
                   "one pre-norm residual made post-norm", requires=("forward",)),
    ]
