"""What a newcomer meets first: the distribution's name (`tlint` on the Package Index is
someone else's), install instructions that work before a release, a test command that runs
every test (torch's tests fail instead of skipping under TLINT_REQUIRE_TORCH=1), and
`verify`/`scan-data` without torch."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.cliutil import REPO, tlint_env
from tlint import cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

README = (REPO / "README.md").read_text(encoding="utf-8")
NAME = "tlint-pytorch"


def test_the_distribution_name_is_the_free_one_everywhere():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == NAME == cli.DISTRIBUTION
    assert project["scripts"] == {"tlint": "tlint.cli:main"}  # the command stays `tlint`
    warning = "`pip install tlint` installs someone else's code"  # the README's one mention, a warning
    assert warning in README
    installs = re.findall(r"pip install ([^\n`]*)", README.replace(warning, ""))
    assert installs
    for command in installs:  # never the other project's `tlint`, never an extra of it
        assert not re.match(r"""['"]?tlint(\[|['"]|\s|$)""", command), command
    assert f'pip install "{NAME} @ git+https://github.com/tlint/tlint@COMMIT"' in README
    assert "pip install ./tlint" in README  # from a clone
    for path in REPO.joinpath("tlint").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "'tlint[" not in text and '"tlint[' not in text, path  # extras are named with the distribution


def test_pre_commit_snippet_pins_a_commit_or_says_how_to_tag():
    snippet = README.split("## pre-commit", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    rev = re.search(r"rev: (\S+)", snippet)
    assert rev is not None and rev.group(1) == "COMMIT" and "full commit SHA" in snippet
    assert "git tag -a v" in README and "pre-commit autoupdate" in README


def test_quick_start_says_the_demo_exits_1_on_purpose():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "exits 1 on\npurpose" in quick_start or "exits 1 on purpose" in quick_start
    proc = subprocess.run([sys.executable, "-m", "tlint", "check", "fixtures/demo"], cwd=REPO,
                          capture_output=True, text=True, env=tlint_env(), timeout=120)
    assert proc.returncode == 1, proc.stderr


BLOCK_TORCH = "import sys; sys.modules['torch'] = None; "


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("command", ["verify", "scan-data"])
def test_verify_and_scan_data_without_torch_say_how_to_install_it(command, fmt, tmp_path):
    code = BLOCK_TORCH + f"from tlint.cli import main; sys.exit(main([{command!r}, '--output-format', {fmt!r}]))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=tlint_env(), timeout=120)
    assert proc.returncode == 2
    line = proc.stderr if fmt == "text" else proc.stdout
    assert line.count("\n") == 1 and "needs PyTorch, which is not installed: pip install torch" in line, line
    assert f"pip install '{NAME}[verify]'" in line
    assert "Traceback" not in proc.stderr
    listed = subprocess.run([sys.executable, "-c", BLOCK_TORCH + "from tlint.cli import main; "
                             "sys.exit(main(['verify', '--list-probes']))"], cwd=tmp_path, capture_output=True,
                            text=True, env=tlint_env(), timeout=120)
    assert listed.returncode == 0 and "mask-leak" in listed.stdout  # listing the probes needs no torch


@pytest.mark.parametrize("required", [True, False])
def test_torch_tests_fail_instead_of_skipping_when_required(required, tmp_path):
    """tests/test_verify_formats.py without torch: skipped, or, under TLINT_REQUIRE_TORCH=1, failed."""
    env = tlint_env(TLINT_REQUIRE_TORCH="1" if required else "0")
    code = (BLOCK_TORCH + "import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
            "'tests/test_verify_formats.py']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    output = proc.stdout + proc.stderr
    if required:
        assert proc.returncode not in (0, 5), output
        assert "TLINT_REQUIRE_TORCH=1 but torch cannot be imported" in output, output
    else:
        assert proc.returncode in (0, 5) and "1 skipped" in output and "failed" not in output, output  # 5: none ran


def test_torch_tests_use_the_helper_that_honours_tlint_require_torch():
    """A test module that needs torch imports it through tests/torchutil.py: a bare
    `pytest.importorskip("torch")` would skip silently where TLINT_REQUIRE_TORCH=1 asks for a failure."""
    bare = [path.name for path in (REPO / "tests").rglob("*.py")
            if path.name != "torchutil.py" and re.search(r"^\s*(\w+\s*=\s*)?pytest\.importorskip\(\s*['\"]torch['\"]",
                                                           path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert bare == [], f"use `from tests.torchutil import import_torch; torch = import_torch()` in {bare}"


# A finder that makes the named top-level packages absent, as on a machine without them.
BLOCKER = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    blocked = set()
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
def attempt(blocked, code):
    Absent.blocked = set(blocked)
    for name in [m for m in sys.modules if m.startswith("tlint.watch")]:
        del sys.modules[name]
    try:
        exec(code, {})
    except ImportError as exc:
        print(type(exc).__name__, exc.name, exc, sep="|")
    else:
        print("imported")
"""


def test_watch_and_its_callbacks_without_their_dependency_name_what_to_install(tmp_path):
    """`import tlint.watch` without torch, `HFCallback` without transformers and
    `LightningCallback` without lightning (nor pytorch_lightning): an ImportError that
    says what to install, with tlint's extra."""
    from tests.torchutil import import_torch

    import_torch()
    attempts = [(["torch"], "import tlint.watch"),
                (["transformers"], "import tlint.watch; tlint.watch.HFCallback"),
                (["lightning", "pytorch_lightning"], "from tlint.watch import LightningCallback"),
                (["transformers"], "import tlint.watch.hf"),
                (["transformers"], "import tlint.watch; tlint.watch.Watch")]
    code = BLOCKER + "".join(f"attempt({blocked!r}, {snippet!r})\n" for blocked, snippet in attempts)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=tlint_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [
        f"ImportError|PyTorch|tlint.watch needs PyTorch, which is not installed: pip install '{NAME}[watch]'",
        "ImportError|transformers|tlint.watch.HFCallback (a callback of the Hugging Face Trainer) needs "
        f"transformers, which is not installed: pip install '{NAME}[watch]' transformers",
        "ImportError|lightning|tlint.watch.LightningCallback (a callback of the Lightning Trainer) needs "
        f"lightning, which is not installed: pip install '{NAME}[watch]' lightning",
        "ImportError|transformers|tlint.watch.HFCallback (a callback of the Hugging Face Trainer) needs "
        f"transformers, which is not installed: pip install '{NAME}[watch]' transformers",
        "imported"], proc.stdout + proc.stderr  # the watch itself needs neither (tests/test_watch.py runs both)


def _verify_version(cwd, prelude: str = "", **env: str) -> str:
    code = prelude + "import sys; from tlint.cli import main; sys.exit(main(['verify', '--version']))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env=tlint_env(**env), timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    first, second = proc.stdout.splitlines()
    assert first == f"tlint {cli.__version__}"
    return second


def test_verify_version_says_which_torch_build_it_finds(tmp_path):
    """`tlint verify --version` names the torch build (read from torch/version.py, torch
    never imported): the one installed here, a CUDA and a ROCm build, and none."""
    from importlib.util import find_spec

    from tests.torchutil import import_torch

    torch = import_torch()  # the installed torch: its version and build as torch itself says
    folder = next(iter(find_spec("torch").submodule_search_locations))
    build = "CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda} build"
    assert _verify_version(tmp_path) == f"torch {torch.__version__} ({build}) at {folder}"
    for name, lines, build in (("cuda", "__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\nhip = None\n",
                                "torch 2.5.1+cu124 (CUDA 12.4 build)"),
                               ("rocm", "__version__ = '2.5.1+rocm6.2'\ncuda = None\nhip = '6.2.41133'\n",
                                "torch 2.5.1+rocm6.2 (ROCm 6.2.41133 build)")):
        fake = tmp_path / name / "torch"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text("raise SystemExit('torch was imported')\n", encoding="utf-8")
        (fake / "version.py").write_text("from typing import Optional\n" + lines, encoding="utf-8")
        assert _verify_version(tmp_path, f"import sys; sys.path.insert(0, {str(fake.parent)!r}); ") == (
            f"{build} at {fake}")
    assert _verify_version(tmp_path, BLOCK_TORCH) == f"torch: not installed (pip install '{NAME}[verify]')"


def test_the_cpu_only_install_is_one_command_and_the_one_the_release_check_runs():
    """README "Install": one pip command with PyTorch's CPU index (and its uv form);
    scripts/release.py runs that command (the wheel in place of the git URL) against the
    same index, or against a local copy in CI (`.ci/run`)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import release
    finally:
        sys.path.remove(str(REPO / "scripts"))
    git_url = f'"{NAME}[verify] @ git+https://github.com/tlint/tlint@COMMIT"'
    assert f"\npip install {git_url} --extra-index-url {release.PYTORCH_CPU_INDEX}\n" in README
    assert f"\nuv pip install {git_url} --torch-backend cpu\n" in README
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^python scripts/release\.py check --cpu-wheels ", ci, re.MULTILINE), ci


def test_publish_refuses_a_tree_that_is_not_a_release(tmp_path):
    """`scripts/release.py publish` on this tree (its CHANGELOG section is unreleased):
    exit 1 with the reason, before building or uploading anything."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "release.py"), "publish", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, env=tlint_env(), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"CHANGELOG.md has no released section `## {cli.__version__} (YYYY-MM-DD)`" in proc.stdout
    assert list(tmp_path.iterdir()) == []
