"""`tlint doctor [PATH]`: the whole procedure in one report (README "tlint doctor").

`plan.py` reads the configuration and decides what runs (no user code); `steps.py` runs
`check`, `scan-data`, `verify` (default probes, training probes, `data-ab` when registered)
and `diagnose` through their own functions; `ranking.py` turns what they found into one
list ranked by likely impact, each item with its evidence and its fix (`fixes.py`);
`report.py` writes text and JSON, `html.py` the self-contained HTML file, `progress.py` the
display on stderr. Nothing here imports torch: the steps that need it run it in the
verifier's child processes.
"""
