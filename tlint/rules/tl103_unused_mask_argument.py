"""TL103 unused-mask-argument: a `forward` (or a function it calls) takes a mask and never
reads it."""

from __future__ import annotations

import libcst as cst

from tlint.cst import dotted_name, walk
from tlint.rules.base import Rule


def _is_stub(fn: cst.FunctionDef) -> bool:
    """Abstract or placeholder bodies: docstring, `...`, `pass`, `raise NotImplementedError`."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [fn.body]
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Pass):
                    continue
                if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.Ellipsis, cst.ConcatenatedString)):
                    continue
                if isinstance(small, cst.Raise):
                    continue
                return False
        else:
            return False
    return True


def _reads(fn: cst.FunctionDef) -> tuple[set[str], bool]:
    """Names read in `fn` (nested functions included), and whether it inspects locals()."""
    names: set[str] = set()
    dynamic = False
    for node in walk(fn.body):
        if isinstance(node, cst.Name):
            names.add(node.value)
        elif isinstance(node, cst.Call) and dotted_name(node.func) in ("locals", "vars"):
            dynamic = True
    return names, dynamic


def _assigned_only(fn: cst.FunctionDef, name: str) -> bool:
    """True if every occurrence of `name` in `fn` is an assignment target or a `del`."""
    targets: set[int] = set()
    for node in walk(fn.body):
        if isinstance(node, cst.Del):
            for n in walk(node.target):
                if isinstance(n, cst.Name):
                    targets.add(id(n))
        elif isinstance(node, cst.AssignTarget):
            if isinstance(node.target, cst.Name):
                targets.add(id(node.target))
    occurrences = [n for n in walk(fn.body) if isinstance(n, cst.Name) and n.value == name]
    return bool(occurrences) and all(id(n) in targets for n in occurrences)


def _deleted(fn: cst.FunctionDef, name: str) -> bool:
    for node in walk(fn.body):
        if isinstance(node, cst.Del) and any(isinstance(n, cst.Name) and n.value == name for n in walk(node.target)):
            return True
    return False


class UnusedMaskArgument(Rule):
    code = "TL103"
    name = "unused-mask-argument"
    severity = "error"
    summary = "A forward (or a function it calls) takes a mask parameter and never reads it."

    def check(self, ctx) -> None:
        index = ctx.index
        seen: set[int] = set()
        for cls in index.classes:
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            methods = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
            forward = methods.get("forward")
            if forward is None:
                continue
            for fn in self._reachable(forward, methods, index):
                if id(fn) not in seen:
                    seen.add(id(fn))
                    self._check_function(ctx, fn)

    @staticmethod
    def _reachable(forward, methods, index) -> list[cst.FunctionDef]:
        """forward, the methods of its class it calls (`self.m(...)`), and module-level
        functions of the file it calls, transitively."""
        module_functions = {
            stmt.name.value: stmt for stmt in index.module.body if isinstance(stmt, cst.FunctionDef)
        }
        out, stack = [], [forward]
        while stack:
            fn = stack.pop()
            if fn in out:
                continue
            out.append(fn)
            for call in index.statement_calls.get(fn, []):
                name = dotted_name(call.func)
                if name and name.startswith("self.") and name.count(".") == 1 and name[5:] in methods:
                    stack.append(methods[name[5:]])
                elif name in module_functions:
                    stack.append(module_functions[name])
        return out

    def _check_function(self, ctx, fn: cst.FunctionDef) -> None:
        if _is_stub(fn):
            return
        reads, dynamic = _reads(fn)
        if dynamic:
            return
        params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
        for param in params:
            name = param.name.value
            if "mask" not in name.lower() or name.startswith("_"):
                continue
            if name in reads and not _assigned_only(fn, name):
                continue
            if _deleted(fn, name):
                continue
            where = "forward" if fn.name.value == "forward" else f"`{fn.name.value}` (called from forward)"
            ctx.report(param, f"parameter `{name}` of {where} is never read: the mask is silently ignored, "
                              "so padded or future positions are attended to")
