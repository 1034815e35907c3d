"""`activation-ranges` and `attention-maps` (seed checklist §5): the activation table, the
share of attention mass on pad keys (~0 for a masked model, clearly > 0 for one that ignores
its mask: fixtures/models/pad_attention.py), PNG maps written only under `--artifacts`, and
a clear note when matplotlib is absent."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cliutil import REPO, make_project, run_tlint
from tests.torchutil import import_torch
from tlint.verify.activations_report import PLOT_HINT
from tlint.verify.options import resolve

# slow: runs models to record and draw their attention maps
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_activations")]

torch = import_torch()

from tests.test_verify import ZOO, probes_of, run_in_process

PROBES = ["activation-ranges", "attention-maps"]
PAD_ATTENTION = (ZOO / "pad_attention.py").read_text(encoding="utf-8")


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def pad_models():
    try:
        return {name: probes_of(run_in_process(f"pad_attention:{name}", call="ids,mask", probes=PROBES))
                for name in ("build_masked", "build_unmasked")}
    finally:
        sys.modules.pop("pad_attention", None)


def test_pad_attention_mass_is_zero_when_masked_and_clear_when_not(pad_models):
    masked, unmasked = pad_models["build_masked"]["attention-maps"], pad_models["build_unmasked"]["attention-maps"]
    assert masked["status"] == "pass" and masked["figure"] < 1e-6, masked
    assert [layer["module"] for layer in masked["extra"]["attention_layers"]] == ["layers.0.attn", "layers.1.attn"]
    assert all(layer["pad_mass"] < 1e-6 and layer["heads"] == 4 for layer in masked["extra"]["attention_layers"])
    assert unmasked["status"] == "fail" and unmasked["figure"] > 0.1, unmasked
    assert all(layer["pad_mass"] > 0.1 for layer in unmasked["extra"]["attention_layers"])
    assert unmasked["module"].startswith("layers.") and "attend to padding" in unmasked["detail"]
    # no artifacts folder: nothing rendered, nothing written
    assert "artifacts" not in unmasked["extra"] and "PNG" not in unmasked["detail"]
    terminal = unmasked["extra"]["terminal_map"]
    assert terminal["sample"] == 1 and len(terminal["layers"]) == 2 and any(terminal["pad_columns"])


def test_activation_table_covers_every_kind_of_sub_layer(pad_models):
    probe = pad_models["build_masked"]["activation-ranges"]
    assert probe["status"] == "pass" and probe["figure"] == 0
    rows = {row["module"]: row for row in probe["extra"]["activations"]}
    assert {row["kind"] for row in rows.values()} == {"embedding", "norm", "attention", "mlp", "activation",
                                                       "block", "output"}
    assert rows["layers.0.attn"]["kind"] == "attention" and rows["layers.0.mlp"]["kind"] == "mlp"
    assert "layers.0.attn.qkv" not in rows  # plain projections are not sub-layers
    norm = rows["layers.0.norm1"]
    assert abs(norm["mean"]) < 1e-3 and abs(norm["std"] - 1) < 0.05 and norm["min"] < 0 < norm["max"]
    assert norm["saturated"] == 0 and norm["flags"] == [] and not norm["zero_variance"]
    assert list(rows)[-1] == "(model)"


BAD_RANGES = '''
import torch
import torch.nn as nn


class Squash(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, d)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(100 * self.up(x))


class DeadMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        nn.init.zeros_(self.fc.weight)
        nn.init.ones_(self.fc.bias)

    def forward(self, x):
        return self.fc(x)


class Net(nn.Module):
    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.squash = Squash(d)
        self.mlp = DeadMLP(d)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids, mask):
        return self.norm(self.emb(ids) + self.squash(self.emb(ids)) + self.mlp(self.emb(ids)))
'''


def test_saturated_and_constant_sub_layers_are_flagged(tmp_path):
    (tmp_path / "bad_ranges_model.py").write_text(textwrap.dedent(BAD_RANGES), encoding="utf-8")
    try:
        result = run_in_process("bad_ranges_model:Net", root=tmp_path, call="ids,mask", probes=["activation-ranges"])
    finally:
        sys.modules.pop("bad_ranges_model", None)
    probe = probes_of(result)["activation-ranges"]
    rows = {row["module"]: row for row in probe["extra"]["activations"]}
    assert probe["status"] == "fail" and probe["figure"] == 2, probe
    assert rows["squash.act"]["saturated"] > 0.5 and rows["squash.act"]["flags"] == ["saturated"]
    assert rows["mlp"]["zero_variance"] and rows["mlp"]["std"] == 0 and rows["mlp"]["flags"] == ["zero-variance"]
    assert "squash.act: saturated" in probe["detail"] and "mlp: zero-variance" in probe["detail"]


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (the dev extra installs it)")
def test_png_maps_go_to_the_artifacts_folder_only(tmp_path):
    project = make_project(tmp_path / "proj", {"pad_attention.py": PAD_ATTENTION})
    before = {p for p in project.rglob("*")}
    art = tmp_path / "out" / "maps"
    try:
        result = run_in_process("pad_attention:build_unmasked", root=project, call="ids,mask",
                                probes=["attention-maps"], artifacts=str(art))
    finally:
        sys.modules.pop("pad_attention", None)
    probe = probes_of(result)["attention-maps"]
    files = [Path(f) for f in probe["extra"]["artifacts"]]
    assert [f.name for f in files] == [f"attention-sample{s}-layer{n}.png" for s in (1, 2) for n in (0, 1)]
    assert sorted(art.iterdir()) == files
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 5000
    assert {p for p in project.rglob("*")} == before  # nothing written into the user's tree
    assert f"4 PNG maps in {art}" in probe["detail"]


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (the dev extra installs it)")
def test_png_map_has_colour_bar_token_ticks_and_layer_head_titles(tmp_path, monkeypatch):
    """What a reader needs on each map: a title naming layer and head, one tick label per
    position (the token id, `PAD` in red at the pad positions), and a colour bar."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from tlint.verify import activations

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig: figures.append(fig))
    ids = torch.tensor([[5, 17, 42, 8, 0, 0], [3, 4, 5, 6, 7, 9]])
    keep = ids != 0
    weights = torch.softmax(torch.randn(2, 2, 6, 6), dim=-1)
    files, note = activations.render_png([weights, weights], [{"module": "blocks.0.attn"}, {"module": "blocks.1.attn"}],
                                         ids, keep, [0], tmp_path)
    assert note == "" and [Path(f).name for f in files] == ["attention-sample0-layer0.png",
                                                              "attention-sample0-layer1.png"]
    fig = figures[1]
    maps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in maps] == ["layer 1 (blocks.1.attn), head 0", "layer 1 (blocks.1.attn), head 1"]
    for ax in maps:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            assert [t.get_text() for t in labels] == ["5", "17", "42", "8", "PAD", "PAD"]
            assert [t.get_color() for t in labels][-2:] == ["red", "red"]
            assert "red" not in [t.get_color() for t in labels][:4]
    (bar,) = [ax for ax in fig.axes if not ax.images]  # the colour bar's own axes
    assert bar.get_ylabel() == "attention weight"
    assert "layer 1 (blocks.1.attn), sample 0: 4 real tokens of 6" in fig._suptitle.get_text()
    assert all(Path(f).stat().st_size > 5000 for f in files)


def test_without_matplotlib_the_probe_runs_and_says_how_to_get_the_maps(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    try:
        result = run_in_process("pad_attention:build_masked", call="ids,mask", probes=["attention-maps"],
                                artifacts=str(tmp_path / "maps"))
    finally:
        sys.modules.pop("pad_attention", None)
    probe = probes_of(result)["attention-maps"]
    assert probe["status"] == "pass" and probe["extra"]["artifacts"] == []
    assert PLOT_HINT in probe["detail"] and "tlint-pytorch[plot]" in PLOT_HINT
    assert not (tmp_path / "maps").exists()


def test_artifacts_setting_is_relative_to_the_config_folder(tmp_path):
    config = resolve({"model": "a:b", "artifacts": "reports/maps"}, tmp_path / "tlint.toml", tmp_path, {})
    assert config.artifacts == str((tmp_path / "reports" / "maps").resolve())
    flag = resolve({"model": "a:b", "artifacts": "x"}, tmp_path / "tlint.toml", tmp_path,
                   {"artifacts": str(tmp_path / "elsewhere")})
    assert flag.artifacts == str(tmp_path / "elsewhere")
    assert resolve({"model": "a:b"}, None, tmp_path, {}).artifacts is None


# duration: two verify runs from the command line (JSON and text), each in a child that imports torch
def test_cli_json_fields_and_text_tables(tmp_path):
    project = make_project(tmp_path, {"pad_attention.py": PAD_ATTENTION,
                                      "tlint.toml": '[verify]\nmodel = "pad_attention:build_unmasked"\n'
                                                    'call = "ids,mask"\nseq-len = 16\n'})
    before = {p.relative_to(project).as_posix() for p in project.rglob("*")}
    proc = run_tlint("verify", "--probe", "activation-ranges", "--probe", "attention-maps", "--artifacts",
                     "art", "--format", "json", cwd=project)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    probes = {p["probe"]: p for p in report["probes"]}
    assert probes["attention-maps"]["status"] == "fail"
    assert [layer["module"] for layer in probes["attention-maps"]["layers"]] == ["layers.0.attn", "layers.1.attn"]
    assert {row["kind"] for row in probes["activation-ranges"]["activations"]} >= {"attention", "mlp", "norm"}
    written = {p.relative_to(project).as_posix() for p in project.rglob("*")} - before
    if _has_matplotlib():
        names = [f"attention-sample{i}-layer{n}.png" for i in (1, 2) for n in (0, 1)]
        assert written == {"art", *(f"art/{name}" for name in names)}
        assert probes["attention-maps"]["artifacts"] == [str(project / "art" / name) for name in names]
    else:
        assert written == set() and PLOT_HINT in probes["attention-maps"]["detail"]
    # the text report draws the same figures: the table, the terminal heatmap, the files
    from tlint.verify.output import render_text

    stream = io.StringIO()
    entries = [{**p, "extra": {"activations": p.get("activations"), "attention_layers": p.get("layers"),
                               "artifacts": p.get("artifacts", []),
                               "terminal_map": {"sample": 1, "length": 12, "pad_columns": [False, True],
                                                "layers": [[[0.9, 0.1], [0.5, 0.5]]]}}}
               for p in report["probes"]]
    render_text({**report["model"], "causal": False}, entries, [], stream)
    text = stream.getvalue()
    assert "activation ranges (real positions)" in text and "layers.0.norm1" in text
    assert "attention of sample 1" in text and "(pad 1" in text and "^^" in text


def test_demo_model_attends_to_its_padding():
    """fixtures/demo's classifier calls nn.MultiheadAttention without its key padding mask (TL102)."""
    demo = REPO / "fixtures" / "demo"
    try:
        result = run_in_process("model:build_model", root=demo, probes=["attention-maps"],
                                model_kwargs={"vocab_size": 96, "d_model": 32, "n_heads": 4, "d_ff": 64,
                                              "max_len": 32})
    finally:
        sys.modules.pop("model", None)
    probe = probes_of(result)["attention-maps"]
    assert probe["status"] == "fail" and probe["figure"] > 0.1
    assert [layer["module"] for layer in probe["extra"]["attention_layers"]] == ["blocks.0.attn.mha",
                                                                                 "blocks.1.attn.mha"]
