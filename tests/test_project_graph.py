"""The import graph's related sets (computed once per import cycle, as bit sets) equal the
per-file traversals they replace, on random graphs with cycles and shared folders."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tlint.project import ImportGraph
from tlint.rules.base import RelatedFacts, Rule


def _graph(seed: int) -> ImportGraph:
    rng = random.Random(seed)
    root = Path("/p")
    files = [root / f"d{rng.randrange(4)}" / f"m{i}.py" for i in range(rng.randrange(1, 40))]
    graph = ImportGraph(root, {f: "" for f in files})
    for f in files:
        for _ in range(rng.randrange(4)):
            target = rng.choice(files)
            if target != f:
                graph.edges[f].add(target)
                graph.reverse[target].add(f)
    return graph


def _reach(starts, graph):
    seen, stack = set(starts), list(starts)
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


@pytest.mark.parametrize("seed", range(40))
def test_bit_sets_equal_the_traversals(seed):
    graph = _graph(seed)
    for f in graph.order:
        forward, backward = _reach({f}, graph.edges), _reach({f}, graph.reverse)
        assert graph.import_connected(f) == forward | backward
        assert graph.program(f) == _reach(backward, graph.edges)
        assert graph.related(f) == forward | backward | {g for g in graph.order if g.parent == f.parent}
        assert graph.paths(graph.mask(f, "related")) == sorted(graph.related(f))


def test_scanned_imports_build_the_edges(tmp_path):
    texts = {tmp_path / "a.py": "import b\n", tmp_path / "b.py": "from . import c\n", tmp_path / "c.py": "import a\n",
             tmp_path / "x" / "d.py": "from a import f\n", tmp_path / "e.py": "import os\n"}
    graph = ImportGraph(tmp_path, texts)
    assert graph.program(tmp_path / "a.py") == set(texts) - {tmp_path / "e.py"}
    assert graph.import_connected(tmp_path / "e.py") == {tmp_path / "e.py"}
    assert graph.related(tmp_path / "e.py") == set(texts) - {tmp_path / "x" / "d.py"}


class _Counting(Rule):
    code, name, kind, summary = "TL999", "counting", "practice", "test"
    built = 0

    def project_index(self, related):
        type(self).built += 1
        return sorted(related)


def test_a_shared_related_set_builds_its_index_once():
    rule, related = _Counting(), RelatedFacts({Path("/a.py"): []})
    assert rule.indexed(related) == rule.indexed(related) == [Path("/a.py")]
    assert _Counting.built == 1
    assert rule.indexed({Path("/b.py"): []}) == [Path("/b.py")]  # a plain dict works too
