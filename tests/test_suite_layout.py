"""The suite's own contract (README "Quick start"): the quick subset (`-m "not slow"`) keeps
every rule, the CLI, the config, the cache and the reporters; a module marked slow as a
whole says why and is not even imported by the quick subset; a module whose tests share a
module-scoped fixture runs on one xdist worker, so the fixture runs once."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tlint.rules import ALL_RULES, ENGINE_CODES

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.glob("test_*.py")) + sorted((TESTS / "rules").glob("test_*.py"))

# what the quick subset must keep: the rules' documents and tests, the command line, the
# configuration, the cache and every reporter
QUICK = ["test_rule_docs.py", "test_rule_metadata.py", "test_cli.py", "test_cli_habits.py", "test_config.py",
         "test_config_errors.py", "test_cache.py", "test_cache_security.py", "test_reporters.py",
         "test_reporters_frames.py", "test_sarif.py", "test_junit.py", "test_baseline.py", "test_fixtures.py"]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _marks(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if type(node) in (ast.List, ast.Tuple) else [node]


def _pytestmark(tree: ast.Module) -> list[ast.expr]:
    for statement in tree.body:
        if (type(statement) is ast.Assign and len(statement.targets) == 1
                and type(statement.targets[0]) is ast.Name and statement.targets[0].id == "pytestmark"):
            return _marks(statement.value)
    return []


def _is_mark(node: ast.expr, name: str) -> bool:
    target = node.func if type(node) is ast.Call else node
    return type(target) is ast.Attribute and target.attr == name and ast.unparse(target).startswith("pytest.mark.")


def _scoped_fixtures(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if type(node) is not ast.FunctionDef:
            continue
        for decorator in node.decorator_list:
            if type(decorator) is ast.Call and ast.unparse(decorator.func) == "pytest.fixture":
                scope = next((k.value for k in decorator.keywords if k.arg == "scope"), None)
                if type(scope) is ast.Constant and scope.value in ("module", "session"):
                    out.append(node.name)
    return out


def test_every_rule_has_a_quick_test_module():
    for rule in ALL_RULES:
        if rule.code in ENGINE_CODES:
            continue
        module = TESTS / "rules" / f"test_{rule.code.lower()}.py"
        assert module.exists(), f"{rule.code} has no tests/rules/{module.name}"
        assert "pytest.mark.slow" not in _text(module), f"{module.name}: a rule's tests belong to the quick subset"


@pytest.mark.parametrize("name", QUICK)
def test_the_quick_subset_keeps_the_cli_config_cache_and_reporters(name):
    text = _text(TESTS / name)
    assert not conftest.module_is_slow(text), f"{name} is marked slow as a whole"
    assert text.count("pytest.mark.slow") <= 1, f"{name}: more than one slow test"


def test_a_module_marked_slow_says_why():
    slow = []
    for path in MODULES:
        text = _text(path)
        if not conftest.module_is_slow(text):
            continue
        slow.append(path.name)
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("pytestmark = "))
        above = [line for line in lines[max(0, at - 3):at] if line.startswith("# slow: ")]
        assert above, f"{path.name}: `pytestmark = pytest.mark.slow` needs a `# slow: <why>` line above it"
    assert "test_verify.py" in slow and "test_watch.py" in slow and "test_fuzz.py" in slow


def test_a_shared_module_fixture_keeps_its_module_on_one_worker():
    for path in MODULES:
        tree = ast.parse(_text(path))
        fixtures = _scoped_fixtures(tree)
        if fixtures and path.name != "conftest.py":
            groups = [m for m in _pytestmark(tree) if _is_mark(m, "xdist_group")]
            assert groups, f"{path.name}: {fixtures} are shared by its tests; add pytest.mark.xdist_group to pytestmark"


def test_module_is_slow_reads_the_mark_and_only_it():
    assert conftest.module_is_slow("import pytest\n\npytestmark = pytest.mark.slow\n")
    assert conftest.module_is_slow('pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("g")]\n')
    assert not conftest.module_is_slow('pytestmark = pytest.mark.xdist_group("g")\n')
    assert not conftest.module_is_slow("pytestmark = pytest.mark.skipif(True, reason='x')\n")
    assert not conftest.module_is_slow("@pytest.mark.slow\ndef test_one():\n    pass\n")
    assert not conftest.module_is_slow("x = 1  # pytestmark = pytest.mark.slow\n")


@pytest.mark.parametrize("expression, ignored", [
    ("not slow", True), ("not  slow", True), ("", False), ("slow", False), ("not slow and lsp", False),
])
def test_the_quick_subset_does_not_import_a_slow_module(tmp_path, expression, ignored):
    config = SimpleNamespace(option=SimpleNamespace(markexpr=expression))
    slow = tmp_path / "test_heavy.py"
    slow.write_text("import pytest\n\n# slow: trains\npytestmark = pytest.mark.slow\n", encoding="utf-8")
    quick = tmp_path / "test_light.py"
    quick.write_text("def test_one():\n    pass\n", encoding="utf-8")
    helper = tmp_path / "heavyutil.py"
    helper.write_text("pytestmark = pytest.mark.slow\n", encoding="utf-8")
    assert conftest.pytest_ignore_collect(slow, config) is (True if ignored else None)
    assert conftest.pytest_ignore_collect(quick, config) is None
    assert conftest.pytest_ignore_collect(helper, config) is None  # only test modules are skipped
