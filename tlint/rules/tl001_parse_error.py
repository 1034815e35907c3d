"""TL001 parse-error: a file tlint cannot read, decode or parse. Produced by the engine, not
by a `check`."""

from tlint.rules.base import Rule


class ParseError(Rule):
    code = "TL001"
    name = "parse-error"
    kind = "defect"
    summary = "The file cannot be parsed (syntax error, undecodable bytes)."
    produced_by_engine = True
