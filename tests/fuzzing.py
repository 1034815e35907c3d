"""Fuzzing helpers shared by tests/test_fuzz.py (a short run in CI) and scripts/fuzz.py
(a long run): the seed programs, their mutations, and the properties every run of tlint
must have on any input.

Seeds are the rules' own examples (rules/*.md) and the fixtures, since generated programs
rarely contain training code. A mutation changes one statement list of one file: a
statement dropped, two swapped, one duplicated, a run of statements wrapped in
`if`/`with`/`for`/`try`/`def`/`class`, an identifier renamed (everywhere, or in one place),
or an argument dropped from a call. Mutants need not be valid Python: an invalid one must
give TL001, never a crash.

The properties (`check_files`): no TL003 and no exception out of tlint; two runs give the
same diagnostics; every range lies inside its file (1-based lines and code-point columns,
end >= start).
"""

from __future__ import annotations

import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from tests.doc_examples import examples, rule_documents
from tlint.config import ConfigResolver
from tlint.engine import Linter

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
_NEWLINE = re.compile(r"\r\n?|\n")  # the line ends LibCST (and tlint's positions) count

MUTATIONS = ("drop", "swap", "duplicate", "wrap", "rename", "rename-one", "drop-arg")
_WRAPPERS = (
    "if flag:\n", "with context():\n", "for _item in range(2):\n", "try:\n",
    "def _fuzz_helper():\n", "class _FuzzBlock:\n", "while running:\n",
)


# --- seeds ------------------------------------------------------------------------------


def seed_projects() -> list[tuple[str, dict[str, str]]]:
    """(label, files) for every rule example and fixture: each fixture file alone, and the
    multi-file fixture projects as a whole (so cross-file rules see mutants too)."""
    seeds: list[tuple[str, dict[str, str]]] = []
    for code, path in rule_documents().items():
        for example in examples(path):
            seeds.append((f"{code}-{example.kind}{example.number}", dict(example.files)))
    for path in sorted(FIXTURES.rglob("*.py")):
        seeds.append((path.relative_to(REPO).as_posix(), {path.name: path.read_text(encoding="utf-8")}))
    for folder in (FIXTURES / "demo", FIXTURES / "clean" / "project"):
        files = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}
        seeds.append((folder.relative_to(REPO).as_posix() + "/", files))
    return seeds


# --- mutations --------------------------------------------------------------------------


class _Bodies(cst.CSTVisitor):
    """Every statement list (the module's and each indented block's), in source order."""

    def __init__(self) -> None:
        self.bodies: list[cst.CSTNode] = []
        self.names: list[cst.Name] = []
        self.calls: list[cst.Call] = []

    def visit_Module(self, node: cst.Module) -> None:
        self.bodies.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.bodies.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        if node.args:
            self.calls.append(node)


class _Replace(cst.CSTTransformer):
    """Replace one node (found by identity) with another."""

    def __init__(self, target: cst.CSTNode, replacement) -> None:
        self.target, self.replacement = target, replacement

    def on_leave(self, original, updated):
        return self.replacement(updated) if original is self.target else updated


class _RenameAll(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if original.value == self.old else updated


def _statement(text: str, body: list[cst.BaseStatement]) -> cst.BaseCompoundStatement:
    header = cst.parse_statement(text + "    pass\n" + ("finally:\n    pass\n" if text == "try:\n" else ""))
    return header.with_changes(body=cst.IndentedBlock(body=body))


def _mutate_body(body: list, op: str, rng: random.Random) -> list | None:
    body = list(body)
    if not body:
        return None
    i = rng.randrange(len(body))
    if op == "drop":
        del body[i]
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
    elif op == "swap":
        if len(body) < 2:
            return None
        j = rng.randrange(len(body))
        body[i], body[j] = body[j], body[i]
    elif op == "duplicate":
        body.insert(i, body[i].deep_clone())
    elif op == "wrap":
        j = rng.randrange(i, min(len(body), i + 4)) + 1
        body[i:j] = [_statement(rng.choice(_WRAPPERS), body[i:j])]
    return body


def mutate(files: dict[str, str], rng: random.Random, steps: int = 1) -> tuple[dict[str, str], list[str]]:
    """`files` with `steps` random mutations applied to one of its files (chosen at random);
    returns the new files and the mutations applied (for the report)."""
    name = rng.choice(sorted(files))
    try:
        module = cst.parse_module(files[name])
    except cst.ParserSyntaxError:  # the TL001 examples: mutate lines instead
        return _mutate_lines(files, name, rng, steps)
    applied = []
    for _ in range(steps):
        op = rng.choice(MUTATIONS)
        found = _Bodies()
        module.visit(found)
        changed = None
        if op in ("rename", "rename-one") and found.names:
            target = rng.choice(found.names)
            new = rng.choice(("x", "model", "mask", "optimizer", "loss", f"{target.value}_2"))
            if op == "rename":
                changed = module.visit(_RenameAll(target.value, new))
            else:
                changed = module.visit(_Replace(target, lambda node, new=new: node.with_changes(value=new)))
        elif op == "drop-arg" and found.calls:
            call = rng.choice(found.calls)
            k = rng.randrange(len(call.args))

            def drop(node, k=k):
                args = list(node.args[:k]) + list(node.args[k + 1:])
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return node.with_changes(args=args)

            changed = module.visit(_Replace(call, drop))
        elif op in ("drop", "swap", "duplicate", "wrap"):
            owner = rng.choice(found.bodies)
            new_body = _mutate_body(owner.body, op, rng)
            if new_body is not None:
                changed = module.visit(_Replace(owner, lambda node, body=new_body: node.with_changes(body=body)))
        if changed is not None:
            module = changed
            applied.append(op)
    out = dict(files)
    out[name] = module.code
    return out, applied


def _mutate_lines(files: dict[str, str], name: str, rng: random.Random, steps: int):
    lines = files[name].splitlines(keepends=True) or [""]
    applied = []
    for _ in range(steps):
        op = rng.choice(("drop", "swap", "duplicate"))
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        if op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(i, lines[i])
        applied.append(f"line-{op}")
    return {**files, name: "".join(lines)}, applied


# --- properties -------------------------------------------------------------------------


@dataclass
class Outcome:
    diagnostics: list[dict]
    problems: list[str] = field(default_factory=list)

    @property
    def parsed(self) -> bool:
        return not any(d["code"] == "TL001" for d in self.diagnostics)


def _lint_folder(root: Path) -> list[dict]:
    result = Linter(ConfigResolver(fallback_root=root), jobs=1, select=["ALL"]).run([root])
    out = []
    for diag in result.diagnostics:
        data = diag.to_json()
        data["path"] = Path(diag.path).resolve().relative_to(root.resolve()).as_posix()
        data["suppressed"] = diag.suppressed
        out.append(data)
    return out


def range_problems(diag: dict, text: str) -> list[str]:
    """Why a diagnostic's range does not lie inside `text` (empty when it does)."""
    lines = _NEWLINE.split(text)
    rng = diag["range"]
    start, end = (rng["start"]["line"], rng["start"]["column"]), (rng["end"]["line"], rng["end"]["column"])
    problems = []
    for label, (line, column) in (("start", start), ("end", end)):
        if not 1 <= line <= len(lines):
            problems.append(f"{label} line {line} outside 1..{len(lines)}")
        elif not 1 <= column <= len(lines[line - 1]) + 1:
            problems.append(f"{label} column {column} outside 1..{len(lines[line - 1]) + 1} on line {line}")
    if end < start:
        problems.append(f"end {end} before start {start}")
    return [f"{diag['path']}: {diag['code']} {p}" for p in problems]


def check_files(files: dict[str, str], *, twice: bool = True) -> Outcome:
    """Lint `files` (a small project) with every rule on, twice unless told otherwise; the
    outcome lists any property that failed. An exception out of tlint propagates (that is
    a failure too)."""
    with tempfile.TemporaryDirectory(prefix="tlint-fuzz-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8", newline="")
        first = _lint_folder(root)
        second = _lint_folder(root) if twice else first
    outcome = Outcome(first)
    if first != second:
        outcome.problems.append("two runs gave different diagnostics")
    for diag in first:
        if diag["code"] == "TL003":
            outcome.problems.append(f"{diag['path']}: TL003 {diag['message']}")
        text = files.get(diag["path"])
        if text is not None:
            outcome.problems.extend(range_problems(diag, text.removeprefix("\ufeff")))
    return outcome
