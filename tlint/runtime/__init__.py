"""What the run-time tools share (`tlint trace` and `tlint.watch`): the invariants of the
training step over a stream of events (`tlint.runtime.invariants`, no torch), and the torch
hooks that produce those events inside the training process (`tlint.runtime.hooks`, which
imports torch: only the run-time tools import it)."""
