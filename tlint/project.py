"""Projects for cross-file rules: which files are related, read cheaply from their text.

The project of a file is the folder of its config, else its git root, else the folder
given on the command line. Two files are related when they share a folder or one imports
the other, transitively. The import graph is read with a small line scanner over every
project file's text, so it is the same whether or not a file was named on the command line.
"""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)


def scan_imports(text: str) -> list[str]:
    """Imported module names (`a.b`, `.sibling`, `..pkg.mod`); `from . import x` gives `.x`."""
    out: list[str] = []
    for match in _IMPORT.finditer(text):
        for part in match.group(1).split(","):
            name = part.strip().split(" as ")[0].strip()
            if re.fullmatch(r"[\w.]+", name):
                out.append(name)
    for match in _FROM.finditer(text):
        module, names = match.group(1), match.group(2).strip("() \t")
        if module and not module.strip("."):
            for part in names.replace("\n", " ").split(","):
                name = part.strip().split(" as ")[0].strip()
                if re.fullmatch(r"\w+", name):
                    out.append(module + name)
        elif module:
            out.append(module)
            if not module.startswith("."):
                for part in names.replace("\n", " ").split(","):
                    name = part.strip().split(" as ")[0].strip()
                    if re.fullmatch(r"\w+", name):
                        out.append(f"{module}.{name}")  # `from pkg import module`
    return out


def _resolve(module: str, importer: Path, root: Path, files: set[Path]) -> Path | None:
    if module.startswith("."):
        dots = len(module) - len(module.lstrip("."))
        base = importer.parent
        for _ in range(dots - 1):
            base = base.parent
        rest = module[dots:]
        bases = [base]
    else:
        rest = module
        bases = [importer.parent, *[p for p in importer.parent.parents if root in (p, *p.parents)]]
    if not rest:
        return None
    rel = Path(*rest.split("."))
    for base in bases:
        for candidate in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
            if candidate in files:
                return candidate
    return None


class ImportGraph:
    """Directed import edges between the files of one project."""

    def __init__(self, root: Path, texts: dict[Path, str]) -> None:
        files = set(texts)
        self.edges: dict[Path, set[Path]] = {f: set() for f in files}
        self.reverse: dict[Path, set[Path]] = {f: set() for f in files}
        for file, text in texts.items():
            for module in scan_imports(text):
                target = _resolve(module, file, root, files)
                if target is not None and target != file:
                    self.edges[file].add(target)
                    self.reverse[target].add(file)

    def _reach(self, start: Path, graph: dict[Path, set[Path]]) -> set[Path]:
        return self._reach_all({start}, graph)

    @staticmethod
    def _reach_all(starts: set[Path], graph: dict[Path, set[Path]]) -> set[Path]:
        seen, stack = set(starts), list(starts)
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    def import_connected(self, file: Path) -> set[Path]:
        """`file`, what it imports transitively, and what imports it transitively."""
        return self._reach(file, self.edges) | self._reach(file, self.reverse)

    def program(self, file: Path) -> set[Path]:
        """The files loaded together with `file` by some entry point: everything that
        imports `file` (transitively, itself included) and everything those import. Two
        modules imported by one training script are in one program; two independent
        scripts of one folder are not."""
        return self._reach_all(self._reach(file, self.reverse), self.edges)

    def related(self, file: Path) -> set[Path]:
        same_folder = {f for f in self.edges if f.parent == file.parent}
        return self.import_connected(file) | same_folder
