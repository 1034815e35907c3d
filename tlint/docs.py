"""Where the rule documents (`rules/TLxxx-name.md`) are, and the link to each.

A source checkout keeps them in `<repo>/rules/`; the wheel force-includes that folder as
`tlint/_rules_docs/`, so an installed tlint finds them inside the package.
"""

from __future__ import annotations

from pathlib import Path

DOCS_BASE_URL = "https://github.com/tlint/tlint/blob/main/rules/"

_PACKAGE = Path(__file__).resolve().parent


def docs_dir() -> Path | None:
    for candidate in (_PACKAGE / "_rules_docs", _PACKAGE.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return None


def rule_doc_path(code: str) -> Path | None:
    folder = docs_dir()
    if folder is None:
        return None
    matches = sorted(folder.glob(f"{code.upper()}-*.md"))
    return matches[0] if matches else None


def rule_doc(code: str) -> str | None:
    """The rule's document (Markdown), or None when it has none yet."""
    path = rule_doc_path(code)
    from tlint import bounded

    return bounded.read_text(path, bounded.SOURCE_BYTES) if path is not None else None


def rule_url(code: str, name: str | None = None) -> str:
    """The stable link to a rule's document, as used in JSON, LSP and SARIF output. With
    the rule's `name` (a diagnostic carries it), the rule registry is not imported."""
    if name is None:
        from tlint.rules import lookup

        rule = lookup(code)
        name = rule.name if rule is not None else None
    return f"{DOCS_BASE_URL}{code}-{name}.md" if name else f"{DOCS_BASE_URL}{code}.md"
