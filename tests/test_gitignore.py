"""Ignore files the way git does: tlint's `GitIgnore` (tlint/discovery.py, matching in
tlint/ignore_patterns.py) against `git check-ignore` and `git ls-files --others
--exclude-standard` on generated patterns and paths (whitelists, lines git cannot match,
POSIX classes, `core.ignorecase`), the deciding line of each path against `git check-ignore
-v`, and single cases."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tlint import discovery, ignore_patterns
from tlint.config import Settings
from tlint.discovery import GitIgnore, discover
from tlint.ignore_patterns import PatternList, pattern_lines

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")

# names the generated paths and patterns are made of: ordinary, a trailing space, a leading
# `#` or `!`, brackets, a space inside
NAMES = ["a", "b", "ab", "x.py", "y.py", "ab.py", "t ", "t .py", "#h.py", "!n.py", "[x].py", "s p.py", "A.py",
         "Ab.PY", "B", "1.py", "_x.py", "\u00e9.py", "-.py"]
FOLDERS = ["a", "b", "lib", "d d", "x.py", "A", "Lib"]
PIECES = ["a", "b", "ab", "*", "?", "**", "x", "*.py", "y.py", "[ab]", "[!a]*", "t\\ ", "t ", "\\#h.py",
          "\\!n.py", "\\[x].py", "s p.py", "lib", "d d", "x.py", "a*", "*b",
          # git's wildmatch beyond the common subset: POSIX classes, case, `***`, lines git
          # cannot match (a trailing backslash, a reversed range, an unknown class, no `]`)
          "A", "*.PY", "[A-C]*", "[[:upper:]]*", "[[:lower:]].py", "[[:digit:]].py", "[[:punct:]]*", "***",
          "\\A.py", "build\\", "[z-a].py", "[[:foo:]]", "[a", "[]a]*", "Lib", "?.py", "\u00e9.py", "a**"]


def _pattern(rng: random.Random) -> str:
    parts = [rng.choice(PIECES) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    text = "".join(part + rng.choice(("/", "/", "/", "")) if i < len(parts) - 1 else part for i, part in enumerate(parts))
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
    levels, .git/info/exclude, and the file `core.excludesFile` names in the user's config
    (with lines git cannot match). Every third seed sets `core.ignorecase`; every fourth
    starts the top .gitignore with a whitelist (`*`, `!*/`, `!*.py` in some order)."""
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
    if seed % 3 == 1:
        _git(top, env, "config", "core.ignorecase", "true")
    made = _tree(rng, top)
    for folder in ("", "a", "lib", "a/b"):
        if (top / folder).is_dir():
            lines = [_pattern(rng) for _ in range(16)]
            if folder == "" and seed % 4 == 2:
                whitelist = ["!*/", "!*.py"]
                rng.shuffle(whitelist)
                lines = ["*", *whitelist, *lines[:4]]
            (top / folder / ".gitignore").write_text("\n".join(lines) + "\n")
    (top / ".git" / "info").mkdir(exist_ok=True)
    (top / ".git" / "info" / "exclude").write_text("\n".join(_pattern(rng) for _ in range(8)) + "\n")
    (home / "global-ignore").write_text("build\\\n[z-a].py\n" + "\n".join(_pattern(rng) for _ in range(8)) + "\n")
    (home / ".gitconfig").write_text('[user]\n\tname = t\n[core]\n\texcludesFile = "~/global-ignore"\n')
    return top, env, made


@needs_git
@pytest.mark.parametrize("seed", range(24))
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
@pytest.mark.parametrize("casefold", [False, True])
def test_each_paths_deciding_line_agrees_with_git_check_ignore_v(tmp_path, casefold):
    """Twelve repositories, each with one .gitignore of 25 generated patterns: for every
    path whose folders git does not ignore, the line that decides it (`git check-ignore
    -v`) is the line tlint's matcher picks."""
    compared = decided_by_a_line = by_a_class = 0
    for round_ in range(12):
        rng = random.Random(100 * round_ + casefold)
        top = tmp_path / str(round_)
        top.mkdir()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
        _git(top, env, "init", "-q")
        _git(top, env, "config", "core.ignorecase", "true" if casefold else "false")
        made = _tree(rng, top)
        lines = [_pattern(rng) for _ in range(25)]
        lines = [line for line in lines if line.strip() and not line.startswith("#")]  # each line a pattern
        (top / ".gitignore").write_bytes(("\n".join(lines) + "\n").encode())
        paths = sorted({p.as_posix() for rel in made for p in Path(rel).parents} - {"."}) + made
        out = _git(top, env, "check-ignore", "--no-index", "-v", "-n", "-z", "--stdin",
                   data="\0".join(paths).encode() + b"\0").split(b"\0")
        decided = {}
        for i in range(0, len(out) - 1, 4):
            source, line, _, path = out[i:i + 4]
            decided[path.decode()] = int(line) - 1 if source else -1
        patterns = PatternList(pattern_lines((top / ".gitignore").read_bytes()), casefold)
        assert len(patterns) == len(lines)
        for rel in paths:
            if any(decided[p.as_posix()] >= 0 and patterns.signs[decided[p.as_posix()]]
                   for p in list(Path(rel).parents)[:-1]):
                continue  # inside an ignored folder: git names the folder's line
            ours = patterns.last_match(rel.encode(), (top / rel).is_dir())
            assert ours == decided[rel], f"{rel!r}: tlint picks {lines[ours] if ours >= 0 else None!r}, " \
                                         f"git {lines[decided[rel]] if decided[rel] >= 0 else None!r}"
            compared += 1
            decided_by_a_line += ours >= 0
            by_a_class += ours >= 0 and "[" in lines[ours]
    assert compared >= 250 and decided_by_a_line >= 200 and by_a_class >= 40


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


def test_a_patternless_tree_builds_no_pattern_list(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = _repo(tmp_path, {"a.py": "", ".gitignore": "# only a comment\n\n"})
    calls = []
    monkeypatch.setattr(discovery._IgnoreFile, "__init__", lambda *args: calls.append(args))
    assert _linted(top) == ["a.py"] and calls == []


@pytest.mark.parametrize("lines", [["*", "!*/", "!*.py"], ["*", "!*.py", "!*/"], ["!*.py", "*", "!*/", "!*.py"]])
def test_a_whitelist_keeps_the_files_below_the_top(tmp_path, monkeypatch, lines):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = _repo(tmp_path, {"a.py": "", "notes.txt": "", "src/b.py": "", "src/pkg/model.py": "",
                           ".gitignore": "\n".join(lines) + "\n"})
    assert _linted(top) == ["a.py", "src/b.py", "src/pkg/model.py"]


def test_lines_git_cannot_match_are_skipped_in_every_ignore_file(tmp_path, monkeypatch):
    """A trailing backslash, a reversed range, an unknown POSIX class, an unterminated class:
    git matches nothing with them and goes on; so does tlint (the global excludes file too)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    bad = "build\\\n[z-a].py\n[[:nope:]].py\n[a.py\n"
    top = _repo(tmp_path, {"a.py": "", "b.py": "", "gone.py": "", "build/c.py": "",
                           ".gitignore": bad + "gone.py\n", ".git/info/exclude": bad})
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text(bad)
    assert _linted(top) == ["a.py", "b.py", "build/c.py"]


def test_posix_classes_triple_stars_and_core_ignorecase(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    top = _repo(tmp_path, {"Up.py": "", "low.py": "", "9.py": "", "deep/er/gen.py": "", "KEEP.py": "",
                           ".gitignore": "[[:upper:]]*.py\n[[:digit:]].py\n***/gen.py\n!keep.py\n"})
    assert _linted(top) == ["low.py"]
    (top / ".git" / "config").write_text("[core]\n\tignorecase = true\n")
    # every letter is now upper-case to `[[:upper:]]`, and `!keep.py` re-includes KEEP.py
    assert _linted(top) == ["KEEP.py"]


def test_fifty_thousand_patterns_cost_a_few_lookups_per_path(tmp_path, monkeypatch):
    """20,000 patterns of every kind (names, `*.ext`, anchored paths, `**/` folders, heads,
    tails, inner literals) over 2,000 files: each path is tested against a handful of
    regular expressions, not against every pattern (50,000 patterns over 2,000 files take
    git 0.9 s, and tlint the same order)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    lines = []
    for i in range(2000):
        lines += [f"gen_{i}.py", f"*.ext{i}", f"/build{i}/*.o", f"**/cache{i}/", f"tmp{i}*", f"*{i}[0-9].log",
                  f"*x{i}y*", f"!keep{i}?.py", f"?z{i}*.py", f"src/**/m{i}.py"]
    top = _repo(tmp_path, {".gitignore": "\n".join(lines) + "\n"})
    names = ["mod_{}.py", "gen_{}.py", "ax{}y.py", "qz{}_.py", "keep{}a.py", "tmp{}.py", "m{}.py"]
    for folder in range(20):
        for j in range(100):
            sub = "src/deep" if folder % 5 == 0 else f"pkg{folder}"
            (top / sub).mkdir(parents=True, exist_ok=True)
            (top / sub / names[j % len(names)].format(folder * 100 + j)).write_text("")
    tested = []
    real = ignore_patterns._Wild.matches
    monkeypatch.setattr(ignore_patterns._Wild, "matches", lambda self, *args: tested.append(1) or real(self, *args))
    start = time.perf_counter()
    linted = _linted(top)
    seconds = time.perf_counter() - start
    # each kind of pattern decides some name; `!keepN?.py` re-includes
    assert "pkg1/mod_100.py" in linted and "pkg1/keep104a.py" in linted and "pkg1/gen_101.py" not in linted and "pkg1/ax102y.py" not in linted
    assert "src/deep/m6.py" not in linted and "pkg6/qz603_.py" not in linted and "pkg1/tmp105.py" not in linted
    assert len(tested) <= 5 * 2000, len(tested)
    assert seconds < 15, seconds
