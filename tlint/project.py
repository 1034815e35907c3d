"""Projects for cross-file rules: which files are related, read cheaply from their text.

The project of a file is the folder of its config, else its git root, else the folder
given on the command line. Two files are related when they share a folder or one imports
the other, transitively. The import graph is read with a small line scanner over every
project file's text, so it is the same whether or not a file was named on the command line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)


def scan_imports(text: str) -> list[str]:
    """Imported module names (`a.b`, `.sibling`, `..pkg.mod`); `from . import x` gives `.x`.
    Lines end at `\n`, `\r\n` or a lone `\r`, as Python reads them."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
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


def package_bases(root: Path) -> list[str]:
    """Where absolute imports also start when the project root is itself inside a package
    (a root with an `__init__.py`, as when a package's files are named on the command
    line): the folder above the outermost package, so `pkg.model` resolves from `pkg/`."""
    out: list[str] = []
    current = os.fspath(root)
    while os.path.isfile(os.path.join(current, "__init__.py")):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if current != os.fspath(root):
        out.append(current)
    return out


def _resolve(module: str, folder: str, root: str, files: dict[str, Path],
             bases_of: dict[str, list[str]], extra: Sequence[str] = ()) -> Path | None:
    """The project file `module`, imported from a file in `folder`, names (paths as
    strings: this runs for every import of every project file). `files` maps the path
    strings of the project's files to their paths; `bases_of` memoises the search folders
    of absolute imports per importer folder: the folder and its ancestors up to `root`."""
    bases: list[str] | None
    if module.startswith("."):
        dots = len(module) - len(module.lstrip("."))
        base = folder
        for _ in range(dots - 1):
            base = os.path.dirname(base)
        rest = module[dots:]
        bases = [base]
    else:
        rest = module
        bases = bases_of.get(folder)
        if bases is None:
            bases = [folder]
            current = folder
            prefix = root if root.endswith(os.sep) else root + os.sep
            while current.startswith(prefix):
                parent = os.path.dirname(current)
                if parent == current:
                    break
                bases.append(parent)
                current = parent
            bases.extend(extra)
            bases_of[folder] = bases
    if not rest:
        return None
    rel = rest.replace(".", os.sep)
    for base in bases:
        found = files.get(f"{base}{os.sep}{rel}.py") or files.get(f"{base}{os.sep}{rel}{os.sep}__init__.py")
        if found is not None:
            return found
    return None


class ImportGraph:
    """Directed import edges between the files of one project.

    Reachability is computed once for the whole graph, not per file: the strongly connected
    components (import cycles) are condensed, and each component gets its forward reach,
    reverse reach and program as a bit set (a Python int; bit `i` is the `i`-th file in
    sorted path order), so a file's related set is a few integer ORs and files with the
    same set share one value.
    """

    def __init__(self, root: Path, texts: dict[Path, str] | None = None, *,
                 imports: dict[Path, list[str]] | None = None, extra_bases: list[str] | None = None) -> None:
        """From the files' texts, or from their already scanned `imports` (`scan_imports`);
        `extra_bases`: folders absolute imports also start from (`package_bases`)."""
        if imports is None:
            imports = {file: scan_imports(text) for file, text in (texts or {}).items()}
        files = set(imports)
        self.edges: dict[Path, set[Path]] = {f: set() for f in files}
        self.reverse: dict[Path, set[Path]] = {f: set() for f in files}
        resolved: dict[tuple[str, str], Path | None] = {}
        bases: dict[str, list[str]] = {}
        by_string = {str(f): f for f in files}
        root_string = str(root)
        for file, modules in imports.items():
            folder = os.path.dirname(str(file))
            for module in modules:
                memo = (folder, module)
                if memo in resolved:
                    target = resolved[memo]
                else:
                    target = resolved[memo] = _resolve(module, folder, root_string, by_string, bases,
                                                       extra_bases or [])
                if target is not None and target != file:
                    self.edges[file].add(target)
                    self.reverse[target].add(file)
        self.order: list[Path] = sorted(files)
        self.bit: dict[Path, int] = {f: i for i, f in enumerate(self.order)}
        self._closure: tuple | None = None
        self._folders: dict[Path, int] | None = None

    # --- bit sets -----------------------------------------------------------------------

    def paths(self, mask: int) -> list[Path]:
        """The files of `mask`, in sorted path order."""
        out, order, base = [], self.order, 0
        while mask:
            chunk = mask & 0xFFFFFFFFFFFFFFFF
            while chunk:
                low = chunk & -chunk
                out.append(order[base + low.bit_length() - 1])
                chunk ^= low
            mask >>= 64
            base += 64
        return out

    def _components(self):
        """Tarjan's strongly connected components, iteratively; sinks come first."""
        index: dict[Path, int] = {}
        low: dict[Path, int] = {}
        on_stack: set[Path] = set()
        stack: list[Path] = []
        components: list[list[Path]] = []
        for start in self.order:
            if start in index:
                continue
            work = [(start, iter(sorted(self.edges[start])))]
            index[start] = low[start] = len(index)
            stack.append(start)
            on_stack.add(start)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(self.edges[child]))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], index[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
        return components

    def _closures(self):
        """Per file: its forward reach, reverse reach and program, as bit sets shared by
        the files of one import cycle."""
        if self._closure is None:
            components = self._components()
            comp_of: dict[Path, int] = {}
            own: list[int] = []
            for c, members in enumerate(components):
                bits = 0
                for member in members:
                    comp_of[member] = c
                    bits |= 1 << self.bit[member]
                own.append(bits)
            succ = [{comp_of[t] for m in members for t in self.edges[m]} - {c}
                    for c, members in enumerate(components)]
            pred = [{comp_of[s] for m in members for s in self.reverse[m]} - {c}
                    for c, members in enumerate(components)]
            forward = list(own)
            for c in range(len(components)):  # sinks first: successors are done
                for s in succ[c]:
                    forward[c] |= forward[s]
            backward = list(own)
            program = list(forward)
            for c in reversed(range(len(components))):  # sources first: predecessors are done
                for p in pred[c]:
                    backward[c] |= backward[p]
                    program[c] |= program[p]
            self._closure = (comp_of, forward, backward, program)
        return self._closure

    def _folder_mask(self, file: Path) -> int:
        if self._folders is None:
            self._folders = {}
            for f, i in self.bit.items():
                self._folders[f.parent] = self._folders.get(f.parent, 0) | (1 << i)
        return self._folders.get(file.parent, 0)

    def mask(self, file: Path, scope: str) -> int:
        """The related set of `file` for `scope` ("imports", "program" or "related") as a
        bit set; `file` must be a file of the graph."""
        comp_of, forward, backward, program = self._closures()
        c = comp_of[file]
        if scope == "imports":
            return forward[c] | backward[c]
        if scope == "program":
            return program[c]
        return forward[c] | backward[c] | self._folder_mask(file)

    # --- sets, for callers that want paths -----------------------------------------------

    def import_connected(self, file: Path) -> set[Path]:
        """`file`, what it imports transitively, and what imports it transitively."""
        return set(self.paths(self.mask(file, "imports")))

    def program(self, file: Path) -> set[Path]:
        """The files loaded together with `file` by some entry point: everything that
        imports `file` (transitively, itself included) and everything those import. Two
        modules imported by one training script are in one program; two independent
        scripts of one folder are not."""
        return set(self.paths(self.mask(file, "program")))

    def related(self, file: Path) -> set[Path]:
        return set(self.paths(self.mask(file, "related")))
