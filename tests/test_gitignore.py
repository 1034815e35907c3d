"""Ignore files the way git does: tlint's `GitIgnore` (tlint/discovery.py) against `git
check-ignore` and `git ls-files --others --exclude-standard` on generated patterns and
paths, and the cases the hand-written translator it replaced got wrong."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tlint import discovery
from tlint.config import Settings
from tlint.discovery import GitIgnore, discover

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")

# names the generated paths and patterns are made of: ordinary, a trailing space, a leading
# `#` or `!`, brackets, a space inside
NAMES = ["a", "b", "ab", "x.py", "y.py", "ab.py", "t ", "t .py", "#h.py", "!n.py", "[x].py", "s p.py"]
FOLDERS = ["a", "b", "lib", "d d", "x.py"]
PIECES = ["a", "b", "ab", "*", "?", "**", "x", "*.py", "y.py", "[ab]", "[!a]*", "t\\ ", "t ", "\\#h.py",
          "\\!n.py", "\\[x].py", "s p.py", "lib", "d d", "x.py", "a*", "*b"]


def _pattern(rng: random.Random) -> str:
    parts = [rng.choice(PIECES) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    text = "/".join(parts)
    if rng.random() < 0.2:
        text = "/" + text
    if rng.random() < 0.2:
        text += "/"
    if rng.random() < 0.25:
        text = "!" + text
    if rng.random() < 0.1:
        text += "  "  # unescaped trailing spaces: git drops them
    return text


def _tree(rng: random.Random, top: Path) -> list[str]:
    """Files (and their folders) below `top`, as POSIX paths relative to it."""
    files = set()
    for _ in range(45):
        depth = rng.choice((0, 1, 1, 2, 3))
        folders = [rng.choice(FOLDERS) for _ in range(depth)]
        files.add("/".join([*folders, rng.choice(NAMES)]))
    made = []
    for rel in sorted(files):
        path = top / rel
        if any(p.is_file() for p in [*path.parents][:-1] if top in p.parents):
            continue  # a folder where a file already is
        if path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
        made.append(rel)
    return made


def _git(top: Path, env: dict, *args: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run([GIT, *args], cwd=top, env=env, input=data, capture_output=True, timeout=60, check=False)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return proc.stdout


def _setup(tmp_path: Path, seed: int, monkeypatch) -> tuple[Path, dict, list[str]]:
    """A repository with generated ignore files of every kind: .gitignore files at three
    levels, .git/info/exclude, and the file `core.excludesFile` names in the user's config."""
    rng = random.Random(seed)
    home = tmp_path / "home"
    home.mkdir(parents=True)
    top = tmp_path / "repo"
    top.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "LC_ALL": "C"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    _git(top, env, "init", "-q")
    made = _tree(rng, top)
    for folder in ("", "a", "lib", "a/b"):
        if (top / folder).is_dir():
            lines = [_pattern(rng) for _ in range(16)]
            (top / folder / ".gitignore").write_text("\n".join(lines) + "\n")
    (top / ".git" / "info").mkdir(exist_ok=True)
    (top / ".git" / "info" / "exclude").write_text("\n".join(_pattern(rng) for _ in range(8)) + "\n")
    (home / "global-ignore").write_text("\n".join(_pattern(rng) for _ in range(8)) + "\n")
    (home / ".gitconfig").write_text('[user]\n\tname = t\n[core]\n\texcludesFile = "~/global-ignore"\n')
    return top, env, made


@needs_git
@pytest.mark.parametrize("seed", range(8))
def test_agrees_with_git_check_ignore_and_ls_files(tmp_path, monkeypatch, seed):
    top, env, made = _setup(tmp_path, seed, monkeypatch)
    folders = sorted({str(Path(rel).parent.as_posix()) for rel in made} - {"."})
    paths = made + folders
    out = _git(top, env, "check-ignore", "--no-index", "-z", "--stdin", data="\0".join(paths).encode() + b"\0")
    git_ignored = {p for p in out.decode().split("\0") if p}
    gitignore = GitIgnore()
    ours = {rel for rel in paths if gitignore.ignored_within(top / rel, top, (top / rel).is_dir())}
    patterns = "".join(f"--- {f}\n{f.read_text()}" for f in sorted(top.rglob(".gitignore")))
    assert ours == git_ignored, f"ours only: {sorted(ours - git_ignored)}; git only: " \
                                f"{sorted(git_ignored - ours)}\n{patterns}"

    # discovery: the `.py` files git would add are the ones linted
    listed = _git(top, env, "ls-files", "--others", "--exclude-standard", "-z")
    wanted = {top / p for p in listed.decode().split("\0") if p.endswith(".py") and p}
    settings = Settings(root=top, config_path=None, exclude=[])
    found, missing = discover([top], lambda folder, root: settings)
    assert missing == []
    assert {file for file, _ in found} == {p.resolve() for p in wanted if p.is_file()}


@needs_git
def test_generated_cases_cover_hundreds_of_patterns(tmp_path, monkeypatch):
    """The differential test above sees a few hundred patterns and paths in all."""
    patterns = paths = 0
    for seed in range(8):
        top, _, made = _setup(tmp_path / str(seed), seed, monkeypatch)
        patterns += sum(len(f.read_text().splitlines()) for f in top.rglob(".gitignore"))
        patterns += 16  # info/exclude and the global file
        paths += len(made)
    assert patterns >= 300 and paths >= 200


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    top = tmp_path / "repo"
    (top / ".git" / "info").mkdir(parents=True)
    for rel, text in files.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text)
    return top


def _linted(top: Path) -> list[str]:
    settings = Settings(root=top, config_path=None, exclude=[])
    found, _ = discover([top], lambda folder, root: settings)
    return sorted(file.relative_to(top.resolve()).as_posix() for file, _ in found)


def test_info_exclude_and_core_excludes_file(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    top = _repo(tmp_path, {"keep.py": "", "local.py": "", "mine.py": "", "sub/mine.py": "", "sub/other.py": "",
                           ".git/info/exclude": "# a comment\n/local.py\n"})
    (home / "ignores").write_text("mine.py\n")
    (home / ".gitconfig").write_text("[core]\n\texcludesfile = ~/ignores\n")
    assert _linted(top) == ["keep.py", "sub/other.py"]
    # a .gitignore re-includes what the global file ignores (it has the higher precedence)
    (top / "sub" / ".gitignore").write_text("!mine.py\n")
    assert _linted(top) == ["keep.py", "sub/mine.py", "sub/other.py"]
    # the repository's own config names the file instead; without any, git's default place
    (top / ".git" / "config").write_text("[core]\n\texcludesFile = repo-ignores\n")
    (top / "repo-ignores").write_text("keep.py\n")
    assert _linted(top) == ["mine.py", "sub/mine.py", "sub/other.py"]
    (top / ".git" / "config").unlink()
    (home / ".gitconfig").unlink()
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("other.py\n")
    assert _linted(top) == ["keep.py", "mine.py", "sub/mine.py"]


def test_linked_work_tree_reads_the_common_info_exclude(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    common = tmp_path / "main" / ".git"
    (common / "info").mkdir(parents=True)
    (common / "info" / "exclude").write_text("secret.py\n")
    (common / "worktrees" / "wt").mkdir(parents=True)
    (common / "worktrees" / "wt" / "commondir").write_text("../..\n")
    top = tmp_path / "wt"
    top.mkdir()
    (top / ".git").write_text(f"gitdir: {common / 'worktrees' / 'wt'}\n")
    (top / "a.py").write_text("")
    (top / "secret.py").write_text("")
    assert _linted(top) == ["a.py"]


def test_escaped_trailing_space_and_crlf(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # `t\ ` names the file `t ` (trailing space kept); `u  ` the file `u` (spaces dropped);
    # CRLF line ends are not part of the pattern
    top = _repo(tmp_path, {"t /x.py": "", "t/x.py": "", "u/x.py": "", "v/x.py": "", "w.py": "",
                           ".gitignore": "t\\ \nu  \r\nw.py\r\n"})
    assert _linted(top) == ["t/x.py", "v/x.py"]


def test_a_file_in_an_ignored_folder_stays_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = _repo(tmp_path, {"gen/a.py": "", "gen/keep.py": "", "b.py": "", ".gitignore": "gen/\n!gen/keep.py\n"})
    assert _linted(top) == ["b.py"]
    assert GitIgnore().ignored_within(top / "gen" / "keep.py", top, False)


def test_gitignore_without_a_repository_still_counts(tmp_path, monkeypatch):
    """A copy of a project without its `.git` (an exported snapshot) is linted alike."""
    monkeypatch.setenv("HOME", str(tmp_path))
    top = tmp_path / "copy"
    (top / "gen").mkdir(parents=True)
    (top / ".gitignore").write_text("gen/\n")
    (top / "a.py").write_text("")
    (top / "gen" / "b.py").write_text("")
    assert _linted(top) == ["a.py"]


def test_a_patternless_tree_never_imports_pathspec(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = _repo(tmp_path, {"a.py": "", ".gitignore": "# only a comment\n\n"})
    calls = []
    monkeypatch.setattr(discovery._IgnoreFile, "__init__", lambda *args: calls.append(args))
    assert _linted(top) == ["a.py"] and calls == []
