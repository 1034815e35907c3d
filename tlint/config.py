"""Configuration: `[tool.tlint]` in the nearest pyproject.toml, or a tlint.toml.

The walk goes up from each file's folder; a pyproject.toml without `[tool.tlint]` does
not stop it; it stops at the git root. A tlint.toml wins over a pyproject.toml in the same
folder. Unknown keys, codes and option names are errors naming the key and the file.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from tlint import bounded
from tlint.diagnostics import SEVERITIES
from tlint.memo import seen_file, seen_marker

if TYPE_CHECKING:
    from tlint.context import ViewOptions
    from tlint.rules import ALL_RULES, BY_CODE, lookup
    from tlint.rules.base import KINDS, Rule, RuleSet

# The rule registry (and libcst, which the rules and views import) is loaded on first use:
# reading a config that names no rule (`tlint verify`'s settings) needs neither.
_LAZY = ("ALL_RULES", "BY_CODE", "lookup", "KINDS", "Rule", "RuleSet", "ViewOptions")


def _load_rules() -> None:
    if "ALL_RULES" in globals():
        return
    from tlint.context import ViewOptions
    from tlint.rules import ALL_RULES, BY_CODE, lookup
    from tlint.rules.base import KINDS, Rule, RuleSet

    values = {"ALL_RULES": ALL_RULES, "BY_CODE": BY_CODE, "lookup": lookup, "KINDS": KINDS, "Rule": Rule,
              "RuleSet": RuleSet, "ViewOptions": ViewOptions}
    for name, value in values.items():
        globals().setdefault(name, value)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        _load_rules()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

TOP_KEYS = {
    "select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude",
    "severity", "rules", "verify", "causal-names", "cache-dir", "force-exclude", "doctor",
}
VERIFY_KEYS = {
    "model", "model-kwargs", "vocab-size", "pad-token-id", "eos-token-id", "seq-len",
    "batch-size", "causal", "call", "dataloader", "eval-dataloader", "optimizer",
    "padding-side", "python-path", "timeout", "artifacts", "fields", "device", "seed",
    "probe-timeout", "memory-limit", "lr", "max-seconds", "data-ab-model", "data-ab-model-kwargs",
}
DOCTOR_KEYS = {"train", "train-steps"}  # [tool.tlint.doctor]: the training command doctor traces
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
    "build", "dist", "node_modules", "site-packages", ".tlint_cache", ".mypy_cache",
    ".pytest_cache", ".ruff_cache",
)
DEFAULT_CAUSAL_NAMES = ("GPT", "CausalLM", "LMHeadModel", "Decoder", "Llama", "Mistral")
UNSUPPRESSIBLE = frozenset({"TL003"})


class ConfigError(Exception):
    """A configuration problem the user must fix (exit 2)."""


@dataclass
class Settings:
    """The effective configuration for the files of one project."""

    root: Path
    config_path: Path | None
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False  # skip excluded files even when named on the command line
    severity: dict[str, str] = field(default_factory=dict)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)
    doctor: dict[str, Any] = field(default_factory=dict)
    causal_names: tuple[str, ...] = DEFAULT_CAUSAL_NAMES
    cache_dir: str | None = None  # relative to root; None: `.tlint_cache`
    _ruleset: RuleSet | None = None
    _view_options: ViewOptions | None = None

    def view_options(self) -> ViewOptions:
        """The settings that change shared analysis, as the views take them: `causal-names`,
        and the rule options a rule declares as view options (`Rule.view_options`)."""
        _load_rules()
        if self._view_options is None:
            values: dict[str, Any] = {"causal_names": tuple(self.causal_names)}
            for rule in ALL_RULES:
                configured = self.rule_options.get(rule.name, {})
                for option, field_name in rule.view_options.items():
                    values[field_name] = tuple(configured.get(option, rule.options[option]))
            self._view_options = ViewOptions(**values)
        return self._view_options

    def ruleset(self) -> RuleSet:
        _load_rules()
        if self._ruleset is None:
            enabled = select_rules(self.select, self.extend_select, self.ignore)
            rules = [rule(self.rule_options.get(rule.name)) for rule in ALL_RULES if rule.code in enabled]
            self._ruleset = RuleSet(rules, dict(self.severity))
        return self._ruleset

    def enabled_codes(self) -> set[str]:
        return {rule.code for rule in self.ruleset().rules}

    def ignored_for(self, rel_path: str) -> set[str]:
        """Codes ignored for this file by per-file-ignores (path relative to root)."""
        out: set[str] = set()
        base = rel_path.rsplit("/", 1)[-1]
        for pattern, selectors in self.per_file_ignores.items():
            if _glob_match(rel_path, pattern) or _glob_match(base, pattern):
                out |= expand_selectors(selectors)
        return out - UNSUPPRESSIBLE

    def is_excluded(self, rel_path: str) -> bool:
        """Whether an `exclude` glob matches the path, one of its parts, or a leading
        folder path (one compiled regex for all the patterns: `_glob_match` says what
        each pattern means)."""
        regex = _exclude_regex(tuple(self.exclude))
        if regex is None:
            return False
        if regex.match(rel_path):
            return True
        parts = rel_path.split("/")
        if any(regex.match(p) for p in parts):
            return True
        return any(regex.match("/".join(parts[: i + 1])) for i in range(1, len(parts)))


@functools.lru_cache(maxsize=64)
def _exclude_regex(patterns: tuple[str, ...]) -> re.Pattern | None:
    """One regex that matches what `_glob_match` matches, for any of `patterns`."""
    alternatives = []
    for pattern in patterns:
        pattern = _relative(pattern).rstrip("/")
        alternatives.append(fnmatch.translate(pattern))
        if "**/" in pattern:
            alternatives.append(fnmatch.translate(pattern.replace("**/", "")))
    return re.compile("|".join(f"(?:{a})" for a in alternatives)) if alternatives else None


def _relative(pattern: str) -> str:
    """A pattern without its leading `./` (`./.scripts/*` is `.scripts/*`, not `scripts/*`)."""
    while pattern.startswith("./"):
        pattern = pattern[2:].lstrip("/")
    return pattern


def _glob_match(path: str, pattern: str) -> bool:
    pattern = _relative(pattern)
    return fnmatch.fnmatchcase(path, pattern) or (
        "**/" in pattern and fnmatch.fnmatchcase(path, pattern.replace("**/", ""))
    )


# --- rule selection (Ruff semantics: the most specific selector wins) ------------------


def _specificity(selector: str, rule: type[Rule]) -> int:
    """How specifically `selector` names `rule`: 0 = not at all. A kind (`practice`,
    `likely-defect`, `defect`) is more specific than ALL and less than any code prefix."""
    _load_rules()
    if selector.upper() == "ALL":
        return 1
    if selector.lower() in KINDS:
        return 2 if rule.kind == selector.lower() else 0
    if lookup(selector) is rule:
        return 100
    upper = selector.upper()
    if upper.startswith("TL") and rule.code.startswith(upper):
        return 1 + len(upper)
    return 0


def validate_selector(selector: str) -> bool:
    _load_rules()
    if selector.upper() == "ALL" or selector.lower() in KINDS or lookup(selector) is not None:
        return True
    upper = selector.upper()
    return upper.startswith("TL") and any(code.startswith(upper) for code in BY_CODE)


def select_rules(select, extend_select, ignore) -> set[str]:
    _load_rules()
    enabled: set[str] = set()
    for rule in ALL_RULES:
        best, on = 0, rule.default_enabled and select is None
        for selector in list(select or []) + list(extend_select or []):
            spec = _specificity(selector, rule)
            if spec > best or (spec == best and spec and not on):
                best, on = spec, True
        for selector in ignore or []:
            spec = _specificity(selector, rule)
            if spec and spec >= best:
                best, on = spec, False
        if on:
            enabled.add(rule.code)
    enabled.add("TL003")
    return enabled


def expand_selectors(selectors) -> set[str]:
    _load_rules()
    out = set()
    for rule in ALL_RULES:
        if any(_specificity(s, rule) for s in selectors):
            out.add(rule.code)
    return out


# --- finding and reading config files ---------------------------------------------------


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(?:#.*)?$")


def _tlint_lines(text: str, pyproject: bool) -> list[tuple[int, str, bool]]:
    """(line number, line, is a table header) for the lines of the tlint tables: all of a
    tlint.toml, the `[tool.tlint...]` tables of a pyproject.toml."""
    out, inside = [], not pyproject
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            name = re.sub(r'["\'\s]', "", header.group(1))
            inside = not pyproject or name == "tool.tlint" or name.startswith("tool.tlint.")
        if inside:
            out.append((number, line, bool(header)))
    return out


def _line_of(text: str, key: str, value: str | None = None, pyproject: bool = False) -> int | None:
    """The line of `key` (and of `value` after it, e.g. a code in a multi-line list) in the
    tlint tables, by a light scan of the text: a `key =` or `key.` line, a table header
    naming the key, or else any line with the key as a word."""
    lines = _tlint_lines(text, pyproject)
    word = re.escape(key)
    patterns = (
        re.compile(r'^\s*["\']?' + word + r'["\']?\s*[=.]'),
        re.compile(r"^\s*\[.*(?<![\w-])" + word + r"(?![\w-]).*\]"),
        re.compile(r"(?<![\w-])" + word + r"(?![\w-])"),
    )
    for pattern in patterns:
        for index, (number, line, _) in enumerate(lines):
            if pattern.search(line):
                if value is None:
                    return number
                quoted = re.compile(r"[\"']" + re.escape(value) + r"[\"']")
                for later, later_line, is_header in lines[index:]:
                    if is_header and later != number:
                        break
                    if quoted.search(later_line):
                        return later
                return number
    return None


def _where(path: Path, text: str, key: str, value: str | None = None) -> str:
    line = _line_of(text, key, value, path.name == "pyproject.toml")
    return f"{path}:{line}" if line else str(path)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = bounded.read_bytes(path, bounded.CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not UTF-8") from None
    except RecursionError:  # the TOML reader recurses once per nested array or inline table
        raise ConfigError(f"{path}: invalid TOML: arrays or inline tables nested too deeply to read") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
        if at:
            where, message = f"{path}:{at.group(1)}:{at.group(2)}", message[: at.start()]
        elif message.endswith("(at end of document)"):
            lines = raw.decode("utf-8").count("\n") + 1
            where = f"{path}:{lines}"
            message = message[: -len("(at end of document)")].rstrip() + " at the end of the file"
        else:
            where = str(path)
        raise ConfigError(f"{where}: invalid TOML: {message}") from None


def tlint_table(path: Path) -> dict[str, Any] | None:
    """The tlint table of a config file, or None for a pyproject.toml without one. A
    `tool.tlint` that is not a table (`[tool]` `tlint = 5`) is a ConfigError: a setting
    written in the wrong shape is never silently ignored."""
    data = read_toml(path)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        table = tool.get("tlint") if isinstance(tool, dict) else None
        if table is not None and not isinstance(table, dict):
            raise ConfigError(f"{path}: `tool.tlint` must be a table ([tool.tlint]), "
                              f"not {type(table).__name__} {table!r:.40}")
        return table
    return data


def find_config(start: Path) -> tuple[Path | None, Path | None]:
    """(config file, git root) for a folder: the nearest config, walking up to the git root."""
    folder = start
    git_root = None
    while True:
        seen_marker(folder / ".git")  # what decides the settings (the run memo records them)
        for name in ("tlint.toml", "pyproject.toml"):
            candidate = folder / name
            seen_file(candidate)
            if candidate.is_file() and tlint_table(candidate) is not None:
                return candidate, _git_root(folder)
        if (folder / ".git").exists():
            git_root = folder
            return None, git_root
        if folder.parent == folder:
            return None, None
        folder = folder.parent


def _git_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _expect(cond: bool, path: Path, text: str, key: str, what: str) -> None:
    if not cond:
        raise ConfigError(f"{_where(path, text, key)}: `{key}` must be {what}")


def _inside_folder(path: Path, text: str, key: str, value: str) -> None:
    """An output path set in a config resolves, after symlinks, inside the config's folder:
    a cloned repository's config cannot make tlint write elsewhere."""
    folder = path.parent.resolve()
    target = (folder / value).resolve()
    if target != folder and folder not in target.parents:
        raise ConfigError(f"{_where(path, text, key)}: `{key} = {value!r}` resolves to {target}, outside the "
                          f"config's folder {folder} (after symlinks): an output path set in a config must stay "
                          "inside its folder")


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def load_settings(path: Path, fallback_root: Path) -> Settings:
    seen_file(path)
    table = tlint_table(path)
    if table is None:
        raise ConfigError(f"{path}: no [tool.tlint] table")
    try:
        text = bounded.read_text(path, bounded.CONFIG_BYTES)
    except (OSError, UnicodeDecodeError) as exc:  # (changed since `tlint_table` read it)
        raise ConfigError(f"{path}: cannot read config file ({getattr(exc, 'strerror', None) or exc})") from None
    settings = Settings(root=path.parent.resolve(), config_path=path)
    for key in table:
        if key not in TOP_KEYS:
            section = "[tool.tlint]" if path.name == "pyproject.toml" else "the top level"
            raise ConfigError(f"{_where(path, text, key)}: unknown key `{key}` in {section}")
    for key in ("select", "ignore", "extend-select", "exclude", "extend-exclude", "causal-names"):
        if key in table:
            _expect(_str_list(table[key]), path, text, key, "a list of strings")
    for key in ("select", "ignore", "extend-select"):
        for selector in table.get(key, []):
            if not validate_selector(selector):
                raise ConfigError(f"{_where(path, text, key, selector)}: "
                                  f"unknown rule code or name `{selector}` in `{key}`")
    _check_conflicts(path, text, table)
    settings.select = table.get("select")
    settings.ignore = list(table.get("ignore", []))
    settings.extend_select = list(table.get("extend-select", []))
    settings.exclude = list(table.get("exclude", DEFAULT_EXCLUDE)) + list(table.get("extend-exclude", []))
    if "force-exclude" in table:
        _expect(isinstance(table["force-exclude"], bool), path, text, "force-exclude", "true or false")
        settings.force_exclude = table["force-exclude"]
    if "causal-names" in table:
        settings.causal_names = tuple(table["causal-names"])
    if "cache-dir" in table:
        _expect(isinstance(table["cache-dir"], str) and table["cache-dir"].strip() != "", path, text,
                "cache-dir", "a folder name (relative to the config's folder)")
        _inside_folder(path, text, "cache-dir", table["cache-dir"])
        settings.cache_dir = table["cache-dir"]
    pfi = table.get("per-file-ignores", {})
    _expect(isinstance(pfi, dict), path, text, "per-file-ignores", "a table of glob = [codes]")
    for pattern, selectors in pfi.items():
        _expect(_str_list(selectors), path, text, pattern, "a list of rule codes or names")
        for selector in selectors:
            if not validate_selector(selector):
                raise ConfigError(f"{_where(path, text, pattern, selector)}: "
                                  f"unknown rule code or name `{selector}` in per-file-ignores")
    settings.per_file_ignores = dict(pfi)
    severity = table.get("severity", {})
    _expect(isinstance(severity, dict), path, text, "severity", "a table of code = severity")
    if severity or table.get("rules"):
        _load_rules()
    for selector, level in severity.items():
        rule = lookup(selector)
        if rule is None:
            raise ConfigError(f"{_where(path, text, selector)}: unknown rule code or name `{selector}` in `severity`")
        if level not in SEVERITIES:
            raise ConfigError(f"{_where(path, text, selector)}: "
                              f"severity of {selector} must be one of {', '.join(SEVERITIES)}")
        settings.severity[rule.code] = level
    rules = table.get("rules", {})
    _expect(isinstance(rules, dict), path, text, "rules", "a table of [tool.tlint.rules.<rule-name>] tables")
    for rule_name, options in rules.items():
        rule = lookup(rule_name)
        if rule is None:
            raise ConfigError(f"{_where(path, text, rule_name)}: unknown rule `{rule_name}` in `rules`")
        _expect(isinstance(options, dict), path, text, rule_name, "a table of options")
        for option, value in options.items():
            if option not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(
                    f"{_where(path, text, option)}: unknown option `{option}` for rule {rule.name} (known: {known})"
                )
            default = rule.options[option]
            if not _same_type(default, value):
                raise ConfigError(
                    f"{_where(path, text, option)}: option `{option}` of {rule.name} must be {type(default).__name__}"
                )
        settings.rule_options[rule.name] = dict(options)
    verify = table.get("verify", {})
    _expect(isinstance(verify, dict), path, text, "verify", "a table")
    for key in verify:
        if key not in VERIFY_KEYS:
            raise ConfigError(f"{_where(path, text, key)}: unknown key `{key}` in [tool.tlint.verify]")
    settings.verify = dict(verify)
    doctor = table.get("doctor", {})
    _expect(isinstance(doctor, dict), path, text, "doctor", "a table")
    for key in doctor:
        if key not in DOCTOR_KEYS:
            raise ConfigError(f"{_where(path, text, key)}: unknown key `{key}` in [tool.tlint.doctor]")
    if "train" in doctor:
        train = doctor["train"]
        _expect(isinstance(train, list) and bool(train) and all(isinstance(w, str) and w for w in train), path, text,
                "train", "a command as a list of words, e.g. [\"python\", \"train.py\"]")
    if "train-steps" in doctor:
        steps = doctor["train-steps"]
        _expect(isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0, path, text, "train-steps",
                "an integer, 0 or more")
    settings.doctor = dict(doctor)
    return settings


def _canonical(selector: str) -> str:
    _load_rules()
    rule = lookup(selector)
    return rule.code if rule is not None else selector.upper()


def _check_conflicts(path: Path, text: str, table: dict[str, Any]) -> None:
    """Options that contradict each other in one file: the same rule (or prefix) selected
    and ignored, or one rule given two severities or two option tables (code and name)."""
    chosen = {_canonical(s): (key, s) for key in ("select", "extend-select") for s in table.get(key, [])}
    for selector in table.get("ignore", []):
        if _canonical(selector) in chosen:
            key, other = chosen[_canonical(selector)]
            raise ConfigError(f"{_where(path, text, 'ignore', selector)}: conflicting options: `{selector}` is "
                              f"in `ignore` and `{other}` in `{key}`; keep one")
    for key in ("severity", "rules"):
        entries = table.get(key)
        if not isinstance(entries, dict):
            continue
        seen: dict[str, str] = {}
        _load_rules()
        for selector in entries:
            rule = lookup(selector)
            if rule is None:
                continue
            if rule.code in seen and entries[seen[rule.code]] != entries[selector]:
                raise ConfigError(f"{_where(path, text, selector)}: conflicting options: `{key}` gives "
                                  f"{rule.code} twice, as `{seen[rule.code]}` and as `{selector}`")
            seen[rule.code] = selector


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, list)
    return isinstance(value, type(default))


def default_settings(root: Path) -> Settings:
    return Settings(root=root, config_path=None, exclude=list(DEFAULT_EXCLUDE))


class ConfigResolver:
    """Finds (and caches) the Settings for each folder; `--config` forces one file.
    `exclude` (replacing the configured exclude and extend-exclude), `extend_exclude` and
    `force_exclude` are the command line's, applied to every project's settings."""

    def __init__(self, forced: Path | None = None, fallback_root: Path | None = None, *,
                 exclude: list[str] | None = None, extend_exclude: list[str] | None = None,
                 force_exclude: bool | None = None) -> None:
        self._overrides = (exclude, list(extend_exclude or []), force_exclude)
        self._cache: dict[tuple[Path, Path | None], Settings] = {}
        self._found: dict[Path, tuple[Path | None, Path | None]] = {}
        self._by_config: dict[Path, Settings] = {}
        self.fallback_root = (fallback_root or Path.cwd()).resolve()
        self.forced = None
        if forced is not None:
            if forced.is_dir():
                raise ConfigError(f"{forced}: is a folder, not a config file (--config)")
            if not forced.is_file():
                raise ConfigError(f"{forced}: config file not found (--config)")
            seen_file(forced.resolve())
            self.forced = self._overridden(load_settings(forced, self.fallback_root))

    def _overridden(self, settings: Settings) -> Settings:
        exclude, extend_exclude, force_exclude = self._overrides
        if exclude is not None:
            settings.exclude = list(exclude)
        settings.exclude += extend_exclude
        if force_exclude is not None:
            settings.force_exclude = force_exclude
        return settings

    def for_folder(self, folder: Path, cli_root: Path | None = None) -> Settings:
        """Settings for files in `folder`; `cli_root` is the root the run gives the paths
        it was named with (`named_roots`), the project root when there is neither a config
        nor a git root."""
        folder = folder.resolve()
        if self.forced is not None:
            return self.forced
        memo_key = (folder, cli_root)
        cached = self._cache.get(memo_key)
        if cached is not None:
            return cached
        config, git_root = self.find_config(folder)
        if config is not None:
            config = config.resolve()
            settings = self._by_config.get(config)
            if settings is None:
                settings = self._overridden(load_settings(config, self.fallback_root))
                self._by_config[config] = settings
        else:
            root = git_root or (cli_root.resolve() if cli_root else self.fallback_root)
            settings = self._by_config.get(root)
            if settings is None:
                settings = self._overridden(default_settings(root))
                self._by_config[root] = settings
        self._cache[memo_key] = settings
        return settings

    def find_config(self, folder: Path) -> tuple[Path | None, Path | None]:
        """`find_config` of a resolved folder, once per folder (discovery, the project
        phase and `named_roots` ask for the same folders under different roots)."""
        found = self._found.get(folder)
        if found is None:
            found = self._found[folder] = find_config(folder)
        return found

    def all_settings(self) -> list[Settings]:
        seen = list(self._by_config.values())
        if self.forced is not None:
            seen.append(self.forced)
        return seen


def _too_wide(folder: Path) -> bool:
    """A folder that is never one project: the file system's root, a folder right below
    it (`/tmp`, `/home`, `/work`), the home folder or one above it."""
    if len(folder.parts) <= 2:
        return True
    try:
        home = Path.home().resolve()
    except (OSError, RuntimeError, KeyError):
        return False
    return home == folder or folder in home.parents


def named_roots(paths: list[Path], find=find_config) -> tuple[dict[Path, Path], list[str]]:
    """The root each named path gets when nothing else decides its project, and notices.

    A path inside a project (a tlint config or a git root above it) is decided by that.
    The others, named together, are one project rooted at their common folder, so that
    the root, the settings, the cache folder and the findings of a file do not depend on
    the order of the paths (`tlint check a.py pkg/b.py` and `tlint check pkg/b.py a.py`
    are the same run). When that common folder is too wide to be a project (`_too_wide`),
    each path is its own root instead (a path inside another named folder takes that
    folder), with a notice. {path as given: root}; a path that does not exist is absent.
    `find`: how a folder's config and git root are found (`ConfigResolver.find_config`).
    """
    folders: dict[Path, Path] = {}
    for given in paths:
        try:
            if not given.exists():
                continue
            folder = (given if given.is_dir() else given.parent).resolve()
        except (OSError, RuntimeError):
            continue
        config, git_root = find(folder)
        if config is None and git_root is None:
            folders[given] = folder
    if not folders:
        return {}, []
    common = Path(os.path.commonpath([os.fspath(f) for f in folders.values()]))
    if not _too_wide(common):
        return {given: common for given in folders}, []
    distinct = sorted(set(folders.values()))
    own = {f: next(o for o in distinct if o == f or o in f.parents) for f in distinct}
    notice = (f"the named paths share no project folder below {common}: each is linted as its own project "
              "(a tlint.toml or pyproject.toml in a common folder makes them one)")
    return {given: own[folder] for given, folder in folders.items()}, ([notice] if len(distinct) > 1 else [])
