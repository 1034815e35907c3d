"""Find the `.py` files to lint: folders are walked (honouring `exclude` and `.gitignore`),
named files are always linted."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tlint.memo import seen_file, seen_folder, seen_marker


@dataclass(frozen=True)
class _Pattern:
    base: Path
    regex: re.Pattern
    negated: bool
    dir_only: bool
    prefix: str = field(init=False)  # the base folder as a POSIX string ending in `/`

    def __post_init__(self) -> None:
        text = self.base.as_posix()
        object.__setattr__(self, "prefix", text if text.endswith("/") else text + "/")


def _translate(glob: str) -> str:
    """A gitignore glob (already stripped of anchors) to a regex over a relative path."""
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = glob[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif ch == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _parse_gitignore(path: Path) -> list[_Pattern]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    patterns = []
    for line in lines:
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
        patterns.append(_Pattern(path.parent, regex, negated, dir_only))
    return patterns


class GitIgnore:
    """The .gitignore files from the git root down to a folder, applied in git's order."""

    def __init__(self) -> None:
        self._by_folder: dict[Path, list[_Pattern]] = {}

    def _patterns(self, folder: Path) -> list[_Pattern]:
        cached = self._by_folder.get(folder)
        if cached is None:
            inherited: list[_Pattern] = []
            if not (folder / ".git").exists() and folder.parent != folder:
                inherited = self._patterns(folder.parent)
            seen_marker(folder / ".git")
            seen_file(folder / ".gitignore")
            cached = inherited + _parse_gitignore(folder / ".gitignore")
            self._by_folder[folder] = cached
        return cached

    def ignored(self, path: Path, is_dir: bool) -> bool:
        patterns = self._patterns(path.parent)
        if not patterns:
            return False
        result = False
        text = path.as_posix()
        rels: dict[str, str | None] = {}  # per .gitignore folder: most patterns share one
        for pattern in patterns:
            if pattern.dir_only and not is_dir:
                continue
            prefix = pattern.prefix
            if prefix in rels:
                rel = rels[prefix]
            else:
                rel = rels[prefix] = text[len(prefix):] if text.startswith(prefix) else None
            if rel is None:
                continue
            if pattern.regex.match(rel):
                result = not pattern.negated
        return result


def discover(paths: list[Path], settings_for,
             roots: dict[Path, Path] | None = None) -> tuple[list[tuple[Path, Path]], list[str]]:
    """[(file, cli_root)] to lint, sorted and de-duplicated, plus messages for paths that
    do not exist or folders that cannot be read. A named file is linted even when excluded,
    unless its settings say `force-exclude`. `settings_for(folder, cli_root)` gives the
    Settings for a folder; `roots` the root of each named path that no project marker
    decides (`config.named_roots`; else the path's own folder). A `.py` symlink that leads
    nowhere (broken, or a loop) is kept, so that the engine reports it as unreadable
    instead of skipping it silently. Links to folders are never followed by the walk
    (a link to `/` or the home folder is not walked); a named folder link is walked."""
    gitignore = GitIgnore()
    found: dict[Path, Path] = {}
    missing: list[str] = []
    for given in paths:
        if given.is_file() or (not given.is_dir() and os.path.lexists(given)):
            # a named path that is not a folder is linted, whatever it is: one that is not a
            # regular file (a FIFO, a device, a link to one or to nothing) is TL001
            root = (roots or {}).get(given, given.parent)
            settings = settings_for(given.parent, root)
            if settings.force_exclude and _excluded(given, settings):
                continue
            file = given.resolve() if given.is_file() else given.absolute()
            found.setdefault(file, root)
            seen_file(file)
            continue
        if not given.is_dir():
            missing.append(f"{given}: no such file or folder")
            continue
        cli_root = (roots or {}).get(given, given)

        def unreadable(error: OSError) -> None:
            missing.append(f"{error.filename}: cannot read folder ({error.strerror or error})")

        for folder_path, real_folder, settings, filenames in walk_folders(
                given, settings_for, cli_root, gitignore, onerror=unreadable):
            for name in filenames:
                if not name.endswith(".py"):
                    continue
                file = folder_path / name
                if not file.is_file():
                    # a folder named *.py is skipped; anything else that is not a regular file
                    # (a FIFO, a device, a link to one, a broken or looping link) is kept for
                    # the engine to report as TL001, without opening it
                    if not file.is_dir() and not _excluded(file, settings):
                        found.setdefault(file.absolute(), cli_root)
                    continue
                real = file.resolve() if os.path.islink(file) else real_folder / name
                if _excluded(file, settings, real) or gitignore.ignored(real, False):
                    continue
                found.setdefault(real, cli_root)
                seen_file(real)
    return sorted(found.items()), missing


def walk_folders(top: Path, settings_for, cli_root: Path, gitignore: GitIgnore, *,
                 keep_folder=None, onerror=None) -> Iterator[tuple[Path, Path, object, list[str]]]:
    """The one folder walker (discovery and the project phase): (folder, its resolved
    path, its settings, its file names) for `top` and every folder below it that is not
    excluded by the settings' `exclude`, not git-ignored and, with `keep_folder`, kept by
    it. Folders are visited in sorted order, without following links to folders, and
    recorded for the run memo."""
    for folder, dirnames, filenames in os.walk(top, onerror=onerror, followlinks=False):
        folder_path = Path(folder)
        real_folder = folder_path.resolve()  # once per folder: entries that are not links sit in it
        seen_folder(real_folder)
        settings = settings_for(folder_path, cli_root)
        keep = []
        for name in sorted(dirnames):
            sub = folder_path / name
            real = sub.resolve() if os.path.islink(sub) else real_folder / name
            if _excluded(sub, settings, real) or gitignore.ignored(real, True):
                continue
            if keep_folder is not None and not keep_folder(sub):
                continue
            keep.append(name)
        dirnames[:] = keep
        yield folder_path, real_folder, settings, filenames


def _excluded(path: Path, settings, resolved: Path | None = None) -> bool:
    try:
        resolved = resolved or path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: place it by its folder
        resolved = path.parent.resolve() / path.name
    try:
        rel = resolved.relative_to(settings.root).as_posix()
    except ValueError:
        rel = path.name
    return settings.is_excluded(rel)
