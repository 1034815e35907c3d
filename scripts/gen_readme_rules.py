"""Write the README's rule list (between `<!-- rules:start -->` and `<!-- rules:end -->`)
from the rule registry and the documents in rules/.

    python scripts/gen_readme_rules.py          # rewrite README.md
    python scripts/gen_readme_rules.py --check  # exit 1 if README.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
START, END = "<!-- rules:start -->", "<!-- rules:end -->"

sys.path.insert(0, str(REPO))

from tlint.rules import ALL_RULES  # noqa: E402


def rules_block() -> str:
    """The generated block, markers included."""
    lines = [START, "| code | name | kind | severity | default | summary |", "|---|---|---|---|---|---|"]
    for rule in ALL_RULES:
        doc = sorted((REPO / "rules").glob(f"{rule.code}-*.md"))
        code = f"[{rule.code}](rules/{doc[0].name})" if doc else rule.code
        default = "on" if rule.default_enabled else "off"
        summary = rule.summary.replace("|", "\\|")
        lines.append(f"| {code} | `{rule.name}` | {rule.kind} | {rule.severity} | {default} | {summary} |")
    lines.append(END)
    return "\n".join(lines)


def current_block(text: str) -> str:
    start, end = text.index(START), text.index(END) + len(END)
    return text[start:end]


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    block = rules_block()
    if "--check" in argv:
        if current_block(text) != block:
            print("README.md's rule list is out of date: run python scripts/gen_readme_rules.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(text.replace(current_block(text), block), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
