"""What the run-time tools share (`tlint trace`, later `tlint.watch`): the invariants of the
training step over a stream of events (`tlint.runtime.invariants`). No torch here."""
