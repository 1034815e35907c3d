"""Build and check a release of tlint-pytorch; publish it only when asked.

    python scripts/release.py check [--cpu-wheels DIR] [--out DIR]
    python scripts/release.py publish [--out DIR]

`check` (what CI runs, `.ci/run`) and `publish` both:
1. build the sdist and the wheel (`python -m build --no-isolation`: with the build backend the
   dev extra installs, hatchling, rather than a fresh one in a throwaway environment) into
   OUT/dist;
2. run `twine check --strict` on them (the metadata and the README render on the Package Index);
3. make a clean virtual environment (OUT/venv), install the wheel alone, and run
   `tlint check` on a copy of fixtures/demo: it must exit 1 with exactly the findings of
   fixtures/demo/EXPECTED.txt (the demo is buggy on purpose);
4. install the wheel's `verify` extra there with the README's CPU-only command
   (`pip install 'WHEEL[verify]' --extra-index-url CPU_INDEX`) and check that
   `tlint verify --version` finds torch's CPU-only build and that no CUDA package came along.
   (These throwaway installs add `--no-compile`: byte-compiling torch's modules would take a
   third of the time and choose nothing.)

CPU_INDEX is PyTorch's CPU wheel index (https://download.pytorch.org/whl/cpu). With
`--cpu-wheels DIR` (a machine that cannot reach it, such as CI's), it is a local index
made of the `torch-*+cpu-*.whl` files in DIR instead, and pip is run without the machine's
own pip configuration (its local wheel folders would offer the CPU build whatever the
command says): the Package Index is the only other source. Such a local index holds only
the releases in DIR, while PyTorch's holds a `+cpu` twin of every release, so torch is
pinned to those releases (`torch==X.Y.Z` admits both X.Y.Z from the Package Index, a CUDA
build on Linux, and X.Y.Z+cpu; pip takes the `+cpu` one, as it does against PyTorch's
index). Step 4 then also asks the default command's only source, the Package Index, which
torch releases it offers (`pip index versions torch`): the pinned release must be there and
no `+cpu` build, so that the command's index is what chooses. (Resolving the default command
itself would download the CUDA wheels, about 3 GB, for nothing: this index serves no
separate metadata files.)

`publish` then requires a release commit (README "Install": the version of
tlint/__init__.py, its CHANGELOG section with a date, the tag vX.Y.Z on HEAD, a clean
tree) and uploads the two files with `twine upload` (credentials from twine's usual
environment variables or keyring). Exit 0 when every step passed, 1 when one failed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEMO = ROOT / "fixtures" / "demo"
CUDA_PACKAGE = re.compile(r"^(nvidia-|cuda-|triton)", re.IGNORECASE)


class Failed(Exception):
    pass


def say(message: str) -> None:
    print(f"release: {message}", flush=True)


def run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        expect: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    say("$ " + " ".join(command))
    proc = subprocess.run(command, cwd=cwd or ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode not in expect:
        raise Failed(f"`{' '.join(command)}` exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc


def version() -> str:
    tree = ast.parse((ROOT / "tlint" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "__version__" and isinstance(node.value, ast.Constant)):
            return str(node.value.value)
    raise Failed("tlint/__init__.py has no __version__")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for the new venv's commands: nothing of this checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def isolated_pip_env(constraint: Path) -> dict[str, str]:
    """pip without this machine's pip configuration (files and PIP_* variables): the Package
    Index and the indexes on the command line are its only sources."""
    env = {k: v for k, v in clean_env().items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_CONSTRAINT=str(constraint), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def build(out: Path) -> tuple[Path, Path]:
    dist = out / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(dist), str(ROOT)])
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise Failed(f"expected one wheel and one sdist in {dist}, found {[p.name for p in dist.iterdir()]}")
    release = version()
    for path in (*wheels, *sdists):
        if f"-{release}" not in path.name:
            raise Failed(f"{path.name} does not carry the version {release}")
    run([sys.executable, "-m", "twine", "check", "--strict", str(wheels[0]), str(sdists[0])])
    return wheels[0], sdists[0]


def expected_demo() -> set[tuple[str, int, str]]:
    out = set()
    for line in (DEMO / "EXPECTED.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            where, code = line.split()
            path, lineno = where.rsplit(":", 1)
            out.add((path, int(lineno), code))
    return out


def check_demo(env_dir: Path, work: Path) -> None:
    demo = work / "demo"
    shutil.rmtree(demo, ignore_errors=True)
    shutil.copytree(DEMO, demo)
    tlint = env_dir / "bin" / "tlint"
    where = run([str(env_dir / "bin" / "python"), "-c", "import tlint; print(tlint.__file__)"], env=clean_env(),
                cwd=work).stdout.strip()
    if not where.startswith(str(env_dir)):
        raise Failed(f"the venv imports tlint from {where}, not from its own site-packages")
    proc = run([str(tlint), "check", "--no-cache", "--output-format", "json", "."], env=clean_env(), cwd=demo,
               expect=(1,))
    found = {(d["path"], d["range"]["start"]["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]}
    if found != expected_demo():
        raise Failed(f"tlint check fixtures/demo: missing {sorted(expected_demo() - found)}, "
                     f"unexpected {sorted(found - expected_demo())}")
    say(f"tlint check fixtures/demo: exit 1 with the {len(found)} findings of EXPECTED.txt")


def local_cpu_index(wheels_dir: Path, out: Path) -> tuple[str, Path]:
    """A PEP 503 index of DIR's torch CPU wheels, and a constraint pinning their releases."""
    wheels = sorted(wheels_dir.glob("torch-*+cpu-*.whl"))
    if not wheels:
        raise Failed(f"no torch CPU wheel (torch-*+cpu-*.whl) in {wheels_dir}")
    index = out / "cpu-index"
    shutil.rmtree(index, ignore_errors=True)
    (index / "torch").mkdir(parents=True)
    links = "".join(f'<a href="{w.resolve().as_uri()}">{w.name}</a>\n' for w in wheels)
    (index / "torch" / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n",
                                                encoding="utf-8")
    releases = sorted({w.name.split("-")[1].split("+")[0] for w in wheels})
    constraint = out / "cpu-constraint.txt"
    constraint.write_text(f"torch=={releases[-1]}\n", encoding="utf-8")
    say(f"local CPU index: {', '.join(w.name for w in wheels)} (torch pinned to {releases[-1]})")
    return index.resolve().as_uri(), constraint


def check_cpu_install(env_dir: Path, wheel: Path, out: Path, cpu_wheels: Path | None) -> None:
    pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    if cpu_wheels is None:
        index, env = PYTORCH_CPU_INDEX, clean_env()
    else:
        index, constraint = local_cpu_index(cpu_wheels, out)
        env = isolated_pip_env(constraint)
        release = constraint.read_text(encoding="utf-8").strip().split("==")[1]
        listing = run([*pip, "index", "versions", "torch"], env=env).stdout
        offered = re.search(r"^Available versions: (.+)$", listing, re.MULTILINE)
        versions = [v.strip() for v in offered.group(1).split(",")] if offered else []
        if release not in versions or any("+cpu" in v for v in versions):
            raise Failed(f"without the CPU index pip's only source offers torch {versions[:6]}: the check cannot "
                         f"tell the two commands apart (wanted {release} and no +cpu build)")
        say(f"without the CPU index pip could take only torch {release} from the Package Index, which has "
            "no +cpu build")
    # the README's CPU-only command, the wheel in place of the git URL
    run([*pip, "install", "--quiet", "--no-compile", f"{wheel}[verify]", "--extra-index-url", index], env=env)
    listed = json.loads(run([*pip, "list", "--format", "json"], env=clean_env()).stdout)
    cuda = sorted(item["name"] for item in listed if CUDA_PACKAGE.match(item["name"]))
    if cuda:
        raise Failed(f"the CPU-only install brought CUDA packages: {cuda}")
    line = run([str(env_dir / "bin" / "tlint"), "verify", "--version"], env=clean_env(),
               cwd=out).stdout.splitlines()[-1]
    if "(CPU-only build)" not in line:
        raise Failed(f"tlint verify --version after the CPU-only install: {line}")
    size = sum(f.stat().st_size for f in env_dir.rglob("*") if f.is_file() and not f.is_symlink())
    say(f"CPU-only install: {line.split(' at ')[0]}, no CUDA package, environment {size / 2**30:.1f} GiB")


def check(out: Path, cpu_wheels: Path | None) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    wheel, sdist = build(out)
    env_dir = out / "venv"
    shutil.rmtree(env_dir, ignore_errors=True)
    venv.create(env_dir, with_pip=True)
    run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)],
        env=clean_env())
    check_demo(env_dir, out)
    check_cpu_install(env_dir, wheel, out, cpu_wheels)
    return wheel, sdist


def release_ready(release: str) -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = re.search(rf"^## {re.escape(release)}\b(.*)$", changelog, re.MULTILINE)
    if heading is None or "unreleased" in heading.group(1).lower():
        raise Failed(f"CHANGELOG.md has no released section `## {release} (YYYY-MM-DD)`")
    if run(["git", "status", "--porcelain"]).stdout.strip():
        raise Failed("the working tree has uncommitted changes")
    tags = run(["git", "tag", "--points-at", "HEAD"]).stdout.split()
    if f"v{release}" not in tags:
        raise Failed(f"HEAD is not tagged v{release} (git tag -a v{release} -m 'tlint {release}')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("check", "publish"))
    parser.add_argument("--out", type=Path, help="work folder (default: a new temporary folder)")
    parser.add_argument("--cpu-wheels", type=Path, metavar="DIR",
                        help="torch CPU wheels on disk, served as a local CPU index (check only)")
    args = parser.parse_args(argv)
    if args.action == "publish" and args.cpu_wheels is not None:
        parser.error("--cpu-wheels is for `check`: a release is checked against PyTorch's CPU index")
    out = (args.out or Path(tempfile.mkdtemp(prefix="tlint-release-"))).resolve()
    try:
        if args.action == "publish":
            release_ready(version())
        wheel, sdist = check(out, args.cpu_wheels)
        if args.action == "publish":
            run([sys.executable, "-m", "twine", "upload", str(wheel), str(sdist)])
            say(f"published {wheel.name} and {sdist.name}")
        else:
            say(f"ready: {wheel.name} and {sdist.name} in {out / 'dist'} (not published)")
    except Failed as exc:
        say(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
