"""TL003 internal-error: a rule (or a view it needs) raised on a file. Produced by the
engine, not by a `check`."""

from tlint.rules.base import Rule


class InternalError(Rule):
    code = "TL003"
    name = "internal-error"
    kind = "defect"
    summary = "A rule raised on a file; its results are missing, the other rules' stand."
    produced_by_engine = True
