"""`tlint verify`: load the user's model in a child process, run numerical probes on it,
and give each static finding a verdict (confirmed / not-reproduced / not-checkable).

The parent side (this package's `options`, `runner`, `matching`, `output`) imports only the
standard library, the engine and rich; torch is imported by the child process alone
(`worker`, `loading`, `probes`), so a hang or a crash in user code is reported, not inherited.
"""
