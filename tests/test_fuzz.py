"""Property tests: on any input tlint never raises (no TL003), gives the same output twice,
and reports ranges inside the file. Inputs: programs generated from Python's grammar and
from LibCST's node types (hypothesmith), and mutations of the rules' examples and the
fixtures (tests/fuzzing.py). Short and derandomized here, so CI is reproducible; the long
run is `python scripts/fuzz.py --n 10000`.
"""

from __future__ import annotations

import random

import pytest

# slow: fuzzes: generated and mutated programs, linted twice and in a child process
pytestmark = pytest.mark.slow

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import check_files, mutate, range_problems, seed_projects

SHORT = settings(
    max_examples=50, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
SEEDS = seed_projects()


def assert_sound(files: dict[str, str], twice: bool = True) -> None:
    outcome = check_files(files, twice=twice)
    assert not outcome.problems, "\n".join(outcome.problems) + "\n--- input ---\n" + "\n".join(
        f"# {name}\n{text}" for name, text in files.items())


@SHORT
@given(hypothesmith.from_grammar())
def test_programs_from_the_grammar(source):
    assert_sound({"generated.py": source})


# duration: hypothesmith generates each program from LibCST's node types (~0.3 s an example)
@settings(SHORT, max_examples=20)  # each example costs ~0.3 s to generate
@given(hypothesmith.from_node())
def test_programs_from_the_cst(source):
    assert_sound({"generated.py": source})


# duration: each mutant is linted twice (the determinism check)
@SHORT
@given(st.sampled_from(range(len(SEEDS))), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_mutated_examples_and_fixtures(index, seed, steps):
    files, _ = mutate(SEEDS[index][1], random.Random(seed), steps)
    assert_sound(files)


@settings(SHORT, max_examples=30)
@given(st.sampled_from(range(len(SEEDS))), st.sampled_from(["\r\n", "\r", "\n\f", "\n\x0c\n"]),
       st.booleans())
def test_line_ends_and_bom(index, newline, bom):
    """CRLF, lone CR and form feeds move every position; a BOM must not shift columns."""
    files = {name: ("\ufeff" if bom else "") + text.replace("\n", newline)
             for name, text in SEEDS[index][1].items()}
    assert_sound(files)


# duration: every seed program linted, and again in a child process under another hash seed
def test_every_seed_is_sound():
    """The unmutated seeds themselves, with every rule on (the rule-doc tests run each
    example with its own rule only); once each, for time."""
    for _, files in SEEDS:
        assert_sound(files, twice=False)


def test_mutations_change_the_code_and_stay_mostly_valid():
    rng = random.Random(7)
    changed = valid = 0
    for _ in range(60):
        _, files = rng.choice(SEEDS)
        mutated, _ = mutate(files, rng, 2)
        changed += mutated != files
        try:
            for text in mutated.values():
                compile(text, "m.py", "exec", dont_inherit=True)
            valid += 1
        except SyntaxError:
            pass
    assert changed >= 50 and valid >= 30


def test_range_check_catches_out_of_file_ranges():
    diag = {"path": "a.py", "code": "TL101",
            "range": {"start": {"line": 2, "column": 9}, "end": {"line": 2, "column": 3}}}
    problems = range_problems(diag, "x = 1\ny = 2\n")
    assert any("column 9" in p for p in problems) and any("before start" in p for p in problems)
    assert range_problems({**diag, "range": {"start": {"line": 3, "column": 1},
                                             "end": {"line": 3, "column": 1}}}, "x = 1\ny = 2\n") == []
