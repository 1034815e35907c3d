"""The facts of a pre-filtered file (one LibCST does not parse): read from Python's own
tree (`ast_facts`), and whether that tree spells identifiers as LibCST would
(`ast_facts_exact`). The words the pre-filter looks for are the registry's
(`tlint.views.facts.TOKENS`, `prefilter_tokens`). Re-exported from `tlint.views.facts`.
"""

from __future__ import annotations

from tlint.fact_data import CallArgsFact
from tlint.views.facts_model import _camel


def _ast_literal(node):
    """`literal_value` on Python's tree, for numbers: -100 written as `-100`, `-1e2`,
    `-(0x64)`, `float("-100")`; else None."""
    import ast

    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _ast_literal(node.operand)
        if isinstance(inner, (int, float)):
            return -inner if isinstance(node.op, ast.USub) else inner
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" \
            and len(node.args) == 1 and not node.keywords:
        inner = _ast_literal(node.args[0])
        if isinstance(inner, str):
            try:
                return float(inner)
            except ValueError:
                return None
    return None


def ast_facts(tree) -> list[tuple[str, CallArgsFact]] | None:
    """The facts of a pre-filtered file, from Python's own tree: its `call-args` (the only
    kind without tokens), as `call_args_sites` gives them. None when LibCST must read the
    file all the same: the tree holds a `-100` (a `masks-pad-labels` fact no token finds)
    or a construct LibCST refuses although Python accepts it (its TL001 is kept)."""
    import ast

    out, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.UnaryOp, ast.Call)) and _ast_literal(node) == -100:
            return None
        if isinstance(node, ast.AnnAssign) and not node.simple and isinstance(node.target, ast.Name):
            return None  # `(x): int = 1`, which LibCST cannot parse: its TL001 stands
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            callee = func.id
        elif isinstance(func, ast.Attribute) and _camel(func.attr):
            callee = func.attr
        else:
            continue
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        keys = tuple(sorted(k.arg for k in node.keywords if k.arg is not None))
        positional = sum(1 for a in node.args if not isinstance(a, ast.Starred))
        key = (callee, keys, positional, star)
        if key not in seen:
            seen.add(key)
            out.append(("call-args", CallArgsFact(callee, list(keys), positional, star)))
    return out


def ast_facts_exact(text: str) -> bool:
    """Python's tree spells identifiers as LibCST does: false when the text holds a
    character that NFKC normalisation changes (Python normalises identifiers, LibCST not)."""
    if text.isascii():
        return True
    import unicodedata

    return all(unicodedata.is_normalized("NFKC", ch) for ch in set(text) if ord(ch) > 127)
