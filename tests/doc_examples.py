"""Read the Bad/Good examples of rules/*.md and derive spelling variants of them.

Variants keep every statement (and its `# expect: TLNNN` marker) but change how names
reach it: imports aliased or swapped (`import torch.nn as nn` <-> `from torch import nn`,
`import torch as th`, imported functions renamed), or module-level code moved into a
helper function or a method. A rule that leans on one spelling fails these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_EXPECT = re.compile(r"#\s*expect:\s*(TL\d{3})")


@dataclass
class Example:
    code: str  # rule code
    kind: str  # "bad" | "good"
    number: int
    files: dict[str, str]
    vary: bool


def _split_files(block: str) -> dict[str, str]:
    files: dict[str, str] = {}
    current, lines = "example.py", []
    for line in block.splitlines(keepends=True):
        match = re.match(r"#\s*file:\s*(\S+)\s*$", line)
        if match:
            if "".join(lines).strip():
                files[current] = "".join(lines)
            current, lines = match.group(1), []
        else:
            lines.append(line)
    if "".join(lines).strip():
        files[current] = "".join(lines)
    return files


def rule_documents() -> dict[str, Path]:
    return {p.name[:5]: p for p in sorted(RULES_DIR.glob("TL[0-9][0-9][0-9]-*.md"))}


def examples(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    code = path.name[:5]
    out = []
    for kind, heading in (("bad", "## Bad example"), ("good", "## Good example")):
        start = text.find(heading)
        if start == -1:
            continue
        end = text.find("\n## ", start + len(heading))
        section = text[start: end if end != -1 else len(text)]
        for number, block in enumerate(_BLOCK.findall(section), start=1):
            vary = not block.lstrip().startswith("# no-variants")
            out.append(Example(code, kind, number, _split_files(block), vary))
    return out


def expected_lines(files: dict[str, str], code: str) -> set[tuple[str, int, str]]:
    out = set()
    for name, text in files.items():
        for lineno, line in enumerate(text.splitlines(), start=1):
            for match in _EXPECT.finditer(line):
                if match.group(1) == code:
                    out.add((name, lineno, code))
    return out


# --- variants ---------------------------------------------------------------------------


class _Renamer(cst.CSTTransformer):
    """Rename plain name references (not attributes, keywords, or definitions)."""

    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames
        self.skip: set[int] = set()

    def visit_Attribute(self, node):
        self.skip.add(id(node.attr))

    def visit_Arg(self, node):
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_FunctionDef(self, node):
        self.skip.add(id(node.name))

    def visit_ClassDef(self, node):
        self.skip.add(id(node.name))

    def visit_Param(self, node):
        self.skip.add(id(node.name))

    def visit_ImportAlias(self, node):
        return False

    def visit_ImportFrom(self, node):  # `from torch import nn` names a module, not the alias
        return False

    def leave_Name(self, original, updated):
        if id(original) in self.skip or original.value not in self.renames:
            return updated
        return updated.with_changes(value=self.renames[original.value])


def _alias_imports(module: cst.Module) -> cst.Module:
    renames: dict[str, str] = {}
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            replacement = _rewrite_import(small, renames)
            if replacement is not None:
                body.append(stmt.with_changes(body=[replacement]))
                continue
        body.append(stmt)
    module = module.with_changes(body=body)
    return module.visit(_Renamer(renames)) if renames else module


def _rewrite_import(small, renames):
    if isinstance(small, cst.Import) and len(small.names) == 1:
        alias = small.names[0]
        dotted = cst.Module([]).code_for_node(alias.name)
        asname = alias.asname.name.value if alias.asname else None
        if "." in dotted and asname:  # import torch.nn as nn  ->  from torch import nn
            module, _, last = dotted.rpartition(".")
            return cst.parse_statement(f"from {module} import {last} as {asname}\n").body[0]
        if "." not in dotted and asname is None and dotted in ("torch",):
            renames[dotted] = "th"
            return cst.parse_statement(f"import {dotted} as th\n").body[0]
    if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) and not small.relative:
        module = cst.Module([]).code_for_node(small.module)
        parts = []
        for alias in small.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else None
            if name is None:
                return None
            if alias.asname is not None:
                parts.append(f"{name} as {alias.asname.name.value}")
            elif name[:1].islower() and name not in ("nn", "optim", "functional", "utils", "data"):
                renames[name] = f"{name}_aliased"
                parts.append(f"{name} as {name}_aliased")
            elif name in ("nn", "optim", "functional"):  # from torch import nn -> import torch.nn as nn
                if len(small.names) == 1:
                    return cst.parse_statement(f"import {module}.{name} as {name}\n").body[0]
                parts.append(name)
            else:
                parts.append(name)
        return cst.parse_statement(f"from {module} import {', '.join(parts)}\n").body[0]
    return None


def _is_movable(stmt) -> bool:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return False
    if isinstance(stmt, cst.SimpleStatementLine):
        return not any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body) and not (
            len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString)
        )
    if isinstance(stmt, cst.If) and "__name__" in cst.Module([]).code_for_node(stmt.test):
        return True
    return True


def _wrap(module: cst.Module, method: bool) -> cst.Module | None:
    movable = [s for s in module.body if _is_movable(s)]
    if not movable:
        return None
    kept = [s for s in module.body if not _is_movable(s)]
    inner = cst.IndentedBlock(body=movable)
    fn = cst.FunctionDef(name=cst.Name("run" if method else "_tlint_helper"),
                         params=cst.Parameters(params=[cst.Param(cst.Name("self"))] if method else []),
                         body=inner)
    if method:
        wrapper = cst.ClassDef(name=cst.Name("_TlintRunner"), body=cst.IndentedBlock(body=[fn]))
    else:
        wrapper = fn
    return module.with_changes(body=[*kept, wrapper])


def variants(files: dict[str, str]) -> dict[str, dict[str, str]]:
    """name -> files, for each applicable variant (those that change something)."""
    out: dict[str, dict[str, str]] = {}
    parsed = {name: cst.parse_module(text) for name, text in files.items()}
    for variant in ("aliased", "helper", "method"):
        changed = {}
        for name, module in parsed.items():
            if variant == "aliased":
                new = _alias_imports(module)
            else:
                new = _wrap(module, method=(variant == "method")) or module
            changed[name] = new.code
        if changed != files:
            out[variant] = changed
    return out
