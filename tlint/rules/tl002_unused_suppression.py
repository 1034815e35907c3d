"""TL002 unused-suppression: a `# tlint: ignore[...]` comment that suppressed nothing.
Produced by the engine, not by a `check`."""

from tlint.rules.base import Rule


class UnusedSuppression(Rule):
    code = "TL002"
    name = "unused-suppression"
    kind = "practice"
    summary = "A `# tlint: ignore[...]` comment suppressed nothing."
    produced_by_engine = True
