"""Write tlint's output on fixed inputs, to compare two commits byte for byte (a refactor
must not change a finding).

    python scripts/output_identity.py --out /tmp/ident/old --tlint-path /tmp/old-tree \
        --corpus /tmp/corpora/fairseq --corpus /tmp/corpora/nanoGPT ...
    python scripts/output_identity.py --out /tmp/ident/new --corpus ...
    diff -r /tmp/ident/old /tmp/ident/new && echo identical

Inputs: `fixtures/` of this checkout, every Bad/Good example of `rules/*.md` (and their
spelling variants, tests/doc_examples.py) written once into `--work`, and each
`--corpus` folder. For each input, `tlint check --no-cache --select ALL --exit-zero` in
every format (json, sarif, junit, github, lsp, text), run from the input's folder as
`python -m tlint` of `--tlint-path` (default: this checkout). Outputs are named
`<input>.<format>`, plus `<input>.rc` with the exit code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORMATS = ("json", "sarif", "junit", "github", "lsp", "text")


def write_examples(work: Path) -> Path:
    sys.path.insert(0, str(REPO))
    from tests.doc_examples import examples, rule_documents, variants

    root = work / "rule-examples"
    if root.exists():
        shutil.rmtree(root)
    (root / ".git").mkdir(parents=True)  # one project per example folder would also do; one root is simpler
    for code, path in sorted(rule_documents().items()):
        for example in examples(path):
            sets = {"": example.files}
            if example.vary:
                try:
                    sets.update(variants(example.files))
                except Exception:  # an example that does not parse (TL001's) has no variants
                    pass
            for label, files in sets.items():
                folder = root / f"{code}-{example.kind}-{example.number}{'-' + label if label else ''}"
                for name, text in files.items():
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    (folder / name).write_text(text, encoding="utf-8")
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tlint-path", type=Path, default=REPO)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlint-identity-inputs"))
    parser.add_argument("--corpus", type=Path, action="append", default=[])
    parser.add_argument("--jobs", default="2")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    inputs = {"fixtures": REPO / "fixtures", "rule-examples": write_examples(args.work)}
    for corpus in args.corpus:
        inputs[corpus.name] = corpus
    env = {k: v for k, v in os.environ.items() if not k.startswith("TLINT_") and k not in ("NO_COLOR", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(args.tlint_path.resolve())
    env["PYTHONIOENCODING"] = "utf-8"
    env["COLUMNS"] = "120"
    for name, folder in inputs.items():
        for fmt in FORMATS:
            proc = subprocess.run([sys.executable, "-m", "tlint", "check", "--no-cache", "--select", "ALL",
                                   "--exit-zero", "--jobs", args.jobs, "--format", fmt, "."],
                                  cwd=folder, env=env, capture_output=True)
            (args.out / f"{name}.{fmt}").write_bytes(proc.stdout)
            (args.out / f"{name}.{fmt}.rc").write_text(f"{proc.returncode}\n{proc.stderr.decode('utf-8', 'replace')}")
        print(f"{name}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
