"""Find the files to lint: folders are walked for `.py` files and Jupyter notebooks
(`.ipynb`, tlint/notebook.py), honouring `exclude` and what git ignores (`.gitignore`
files, `.git/info/exclude`, `core.excludesFile`); named files are always linted."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from tlint import bounded
from tlint.ignore_patterns import PatternList, pattern_lines
from tlint.memo import seen_file, seen_folder, seen_marker

SUFFIXES = (".py", ".ipynb")  # what a folder walk lints


class _IgnoreFile:
    """The patterns of one ignore file, matched against paths relative to `prefix` (its
    folder as a POSIX string ending in `/`; for `.git/info/exclude` and `core.excludesFile`
    the work tree's top), with git's own matching (tlint/ignore_patterns.py)."""

    __slots__ = ("prefix", "patterns")

    def __init__(self, base: Path, lines: list[bytes], casefold: bool) -> None:
        text = base.as_posix()
        self.prefix = text if text.endswith("/") else text + "/"
        self.patterns = PatternList(lines, casefold)

    def decision(self, text: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included by a `!` pattern, None: no pattern matches."""
        if not text.startswith(self.prefix):
            return None
        rel = text[len(self.prefix):]
        if not rel:
            return None
        return self.patterns.decision(os.fsencode(rel), is_dir)


def _read_patterns(path: Path) -> list[bytes]:
    """The lines of an ignore file that may hold a pattern, as bytes (git matches bytes)."""
    seen_file(path)
    try:
        data = bounded.read_bytes(path, bounded.GIT_FILE_BYTES)
    except OSError:
        return []
    return pattern_lines(data)


def _git_dir(top: Path) -> Path | None:
    """The git folder shared by all work trees of the repository whose work tree is `top`
    (`top/.git` is a folder, or a file `gitdir: PATH` as in a linked work tree or a
    submodule; a linked work tree's `commondir` names the shared folder)."""
    dot = top / ".git"
    if dot.is_dir():
        return dot
    try:
        first = bounded.read_text(dot, bounded.GIT_FILE_BYTES, errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    git_dir = (top / first[len("gitdir:"):].strip()).resolve()
    try:
        common = bounded.read_text(git_dir / "commondir", bounded.GIT_FILE_BYTES, errors="replace").strip()
    except OSError:
        return git_dir
    return (git_dir / common).resolve()


SYSTEM_GIT_CONFIG = Path("/etc/gitconfig")
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"(?:[^"\\]|\\.)*")?\s*\]\s*(.*)$')
_CORE_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")
_CORE_KEYS = ("excludesfile", "ignorecase")


def _core_settings(config: Path) -> dict[str, str | None]:
    """`core.excludesFile` and `core.ignoreCase` as one git config file sets them (the last
    one wins; a key without `=` is None: boolean true). A light reader: `[core]` sections
    and the keys' values, quotes removed, `include` directives not followed."""
    seen_file(config)
    try:
        text = bounded.read_text(config, bounded.GIT_FILE_BYTES, errors="replace")
    except OSError:
        return {}
    found: dict[str, str | None] = {}
    section = ""
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section, line = header.group(1).lower(), header.group(2)
        if section != "core":
            continue
        match = _CORE_KEY.match(line)
        if match and match.group(1).lower() in _CORE_KEYS:
            value = match.group(2)
            if value is not None:
                value = re.split(r"(?:^|\s)[#;]", value, maxsplit=1)[0].strip()
                if len(value) >= 2 and value[0] == value[-1] == '"':
                    value = value[1:-1]
            found[match.group(1).lower()] = value
    return found


def _git_bool(value: str | None) -> bool | None:
    """A git boolean (None: not one; git would stop, tlint leaves the setting unset)."""
    if value is None:
        return True
    value = value.lower()
    if value in ("true", "yes", "on"):
        return True
    if value in ("false", "no", "off", ""):
        return False
    try:
        return int(value) != 0
    except ValueError:
        return None


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(home) if home else None


def _git_settings(git_dir: Path | None, top: Path) -> tuple[Path | None, bool]:
    """(the file `core.excludesFile` names, `core.ignoreCase`) from the system's config,
    the user's and the repository's (the last that sets a key wins). Without
    `core.excludesFile`, git's default `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`)."""
    home = _home()
    xdg = os.environ.get("XDG_CONFIG_HOME") or (str(home / ".config") if home else None)
    configs: list[Path] = [] if os.environ.get("GIT_CONFIG_NOSYSTEM") else [SYSTEM_GIT_CONFIG]
    if xdg:
        configs.append(Path(xdg) / "git" / "config")
    if home:
        configs.append(home / ".gitconfig")
    if git_dir is not None:
        configs.append(git_dir / "config")
    value, casefold = None, False
    for config in configs:
        settings = _core_settings(config)
        value = settings.get("excludesfile") or value
        if "ignorecase" in settings:
            flag = _git_bool(settings["ignorecase"])
            casefold = casefold if flag is None else flag
    if value is None:
        return (Path(xdg) / "git" / "ignore" if xdg else None), casefold
    if value.startswith("~/") and home:
        return home / value[2:], casefold
    path = Path(value)
    return (path if path.is_absolute() else top / path), casefold


class GitIgnore:
    """Git's ignore rules for the folders of a walk, with git's precedence: the
    `.gitignore` files from the folder up to the work tree's top (the deepest decides),
    then `.git/info/exclude`, then the `core.excludesFile` file; within one file the last
    matching pattern decides (`_IgnoreFile`: git's wildmatch, tlint/ignore_patterns.py).
    Without a `.git` above, the `.gitignore` files up to the file system's root count (a
    copy of a repository without its `.git` is linted alike)."""

    def __init__(self) -> None:
        self._by_folder: dict[Path, tuple[tuple[_IgnoreFile, ...], bool]] = {}

    def _chain(self, folder: Path) -> tuple[tuple[_IgnoreFile, ...], bool]:
        """The ignore files that apply in `folder`, deepest first, and whether their
        repository ignores case (`core.ignoreCase`)."""
        cached = self._by_folder.get(folder)
        if cached is None:
            seen_marker(folder / ".git")
            if (folder / ".git").exists():
                outer, casefold = self._repository(folder)
            elif folder.parent != folder:
                outer, casefold = self._chain(folder.parent)
            else:
                outer, casefold = (), _git_settings(None, folder)[1]
            lines = _read_patterns(folder / ".gitignore")
            cached = ((_IgnoreFile(folder, lines, casefold),) if lines else ()) + outer, casefold
            self._by_folder[folder] = cached
        return cached

    @staticmethod
    def _repository(top: Path) -> tuple[tuple[_IgnoreFile, ...], bool]:
        """`.git/info/exclude`, then the `core.excludesFile` file, of the work tree `top`,
        and its `core.ignoreCase`."""
        git_dir = _git_dir(top)
        excludes, casefold = _git_settings(git_dir, top)
        out = []
        if git_dir is not None:
            lines = _read_patterns(git_dir / "info" / "exclude")
            if lines:
                out.append(_IgnoreFile(top, lines, casefold))
        if excludes is not None:
            lines = _read_patterns(excludes)
            if lines:
                out.append(_IgnoreFile(top, lines, casefold))
        return tuple(out), casefold

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether git ignores `path` by the patterns of its folder's files (its parent
        folders are not asked: a walk never enters an ignored folder)."""
        chain = self._chain(path.parent)[0]
        if not chain:
            return False
        text = path.as_posix()
        for ignore_file in chain:
            decision = ignore_file.decision(text, is_dir)
            if decision is not None:
                return decision
        return False

    def ignored_within(self, path: Path, top: Path, is_dir: bool) -> bool:
        """Whether git ignores `path`, a path below the folder `top`: it or one of its
        folders below `top` is ignored (a file in an ignored folder cannot be re-included)."""
        rel = path.relative_to(top).parts
        folder = top
        for part in rel[:-1]:
            folder = folder / part
            if self.ignored(folder, True):
                return True
        return self.ignored(path, is_dir)


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
                if not name.endswith(SUFFIXES):
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
