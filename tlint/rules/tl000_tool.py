"""TL0xx: findings about tlint itself, produced by the engine, not by a `check`."""

from tlint.rules.base import Rule


class ParseError(Rule):
    code = "TL001"
    name = "parse-error"
    severity = "error"
    summary = "The file cannot be parsed (syntax error, undecodable bytes)."


class UnusedSuppression(Rule):
    code = "TL002"
    name = "unused-suppression"
    severity = "info"
    default_enabled = False
    summary = "A `# tlint: ignore[...]` comment suppressed nothing."


class InternalError(Rule):
    code = "TL003"
    name = "internal-error"
    severity = "error"
    summary = "A rule raised on a file; its results are missing, the other rules' stand."
