"""Seed checklist §5, in the child process: what range each sub-layer's output has
(`activation-ranges`) and where attention goes (`attention-maps`).

`activation-ranges` hooks every sub-layer (embeddings, attention, MLP, norms, blocks,
activation functions, the model's output) for one padded batch and records, over the real
positions, min / max / mean / std, the fraction saturated and flags: non-finite values, a
zero-variance (constant) output, or a bounded activation saturated on more than half of its
values. The table travels in the probe's `extra["activations"]`; the text report prints it
(`activations_report`, no torch) and the JSON report carries it as the probe's `activations` field.

`attention-maps` captures the attention weights of every layer (softmax over (seq, seq)
scores, `F.scaled_dot_product_attention` recomputed, `nn.MultiheadAttention` asked for
per-head weights: the capture of the attention-entropy probe) and reports, per layer, the
share of attention mass that real query rows put on pad keys. With an artifacts folder
(`--artifacts DIR`, config `artifacts`) it renders per-layer × per-head heatmaps of a few
samples to PNG (matplotlib, the optional extra `plot`); the text report draws a small
terminal heatmap of one sample. Nothing is written anywhere but the artifacts folder."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tlint.bounded import open_output
from tlint.verify.activations_report import PLOT_HINT
from tlint.verify.probes import (
    _NORMS,
    AttentionCall,
    Probe,
    ProbeContext,
    ProbeResult,
    _first_float,
    block_stack,
    capture_attention,
)

# Activation functions whose output is bounded: (low, high) of the range; "saturated" is the
# share of values within 1 % of the range's width from a bound.
_BOUNDED = {
    nn.Tanh: (-1.0, 1.0), nn.Sigmoid: (0.0, 1.0), nn.Hardtanh: (-1.0, 1.0), nn.Softsign: (-1.0, 1.0),
    nn.Hardsigmoid: (0.0, 1.0), nn.Softmax: (0.0, 1.0),
}
_ACTIVATIONS = (nn.ReLU, nn.GELU, nn.SiLU, nn.Mish, nn.ELU, nn.LeakyReLU, nn.ReLU6, nn.Softplus, *_BOUNDED)
# Unbounded outputs: the share of values beyond this magnitude (a step from float16's
# 65504 under autocast) counts as saturated.
HALF_RISK = 1e4
_ATTENTION_NAME = re.compile(r"attn|attention", re.IGNORECASE)
_MLP_NAME = re.compile(r"mlp|ffn|feed_?forward|intermediate", re.IGNORECASE)


def _kind(name: str, module: nn.Module, blocks: set[int], attention_paths: list[str]) -> str | None:
    """The row's kind, or None for modules the table leaves out (plain Linear, Dropout, containers)."""
    if not name:
        return "output"
    last = name.rpartition(".")[2]
    leaf = not list(module.children())
    if isinstance(module, nn.Embedding):
        return "embedding"
    if isinstance(module, _NORMS) or type(module).__name__.endswith("Norm"):
        return "norm"
    if id(module) in blocks:
        return "block"
    if isinstance(module, nn.MultiheadAttention) or (not leaf and (_ATTENTION_NAME.search(last)
                                                                   or _ATTENTION_NAME.search(type(module).__name__))):
        if any(name.startswith(outer + ".") for outer in attention_paths):
            return None  # an attention module inside another: the outer one's output is the sub-layer's
        attention_paths.append(name)
        return "attention"
    if not leaf and (_MLP_NAME.search(last) or _MLP_NAME.search(type(module).__name__)):
        return "mlp"
    if isinstance(module, _ACTIVATIONS):
        return "activation"
    return None


def _real(tensor: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The entries at real positions of a (batch, seq, ...) output; the whole tensor otherwise."""
    tensor = tensor.detach().float().cpu()
    if tensor.dim() >= 2 and tensor.shape[:2] == keep.shape:
        return tensor[keep]
    return tensor.reshape(-1)


def activation_stats(name: str, kind: str, module: nn.Module, values: torch.Tensor) -> dict[str, Any]:
    values = values.reshape(-1)
    finite = torch.isfinite(values)
    nonfinite = int((~finite).sum())
    v = values[finite]
    row: dict[str, Any] = {"module": name or "(model)", "kind": kind, "type": type(module).__name__,
                           "count": int(values.numel()), "nonfinite": nonfinite}
    if v.numel() == 0:
        row.update(min=None, max=None, mean=None, std=None, saturated=None, zero_variance=False)
    else:
        bounds = next((b for cls, b in _BOUNDED.items() if isinstance(module, cls)), None)
        if bounds is not None:
            margin = 0.01 * (bounds[1] - bounds[0])
            saturated = ((v <= bounds[0] + margin) | (v >= bounds[1] - margin)).float().mean()
        else:
            saturated = (v.abs() > HALF_RISK).float().mean()
        std = float(v.std()) if v.numel() > 1 else 0.0
        row.update(min=_round(v.min()), max=_round(v.max()), mean=_round(v.mean()), std=_round(std),
                   saturated=_round(saturated), zero_variance=v.numel() > 1 and bool((v == v[0]).all()))
    flags = []
    if nonfinite:
        flags.append("non-finite")
    if row["zero_variance"]:
        flags.append("zero-variance")
    if row["saturated"] is not None and row["saturated"] > 0.5:
        flags.append("saturated")
    row["flags"] = flags
    return row


def _round(value) -> float:
    value = float(value)
    return float(f"{value:.4g}") if math.isfinite(value) else value


class ActivationRangesProbe(Probe):
    """One padded batch through the model with a forward hook on every sub-layer; per
    sub-layer, over the real positions: min, max, mean, std, fraction saturated (bounded
    activations: within 1 % of a bound; other outputs: |x| > 1e4, near float16 overflow) and
    flags. Fails when a sub-layer's output is non-finite, constant (zero variance) or more
    than half saturated."""

    name = "activation-ranges"
    tolerance = 0.0
    unit = "sub-layers flagged (non-finite, zero variance, or over half saturated)"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        ids, keep = ctx.padded_batch(ctx.generator(16))
        stack = block_stack(ctx.model)
        blocks = {id(b) for b in stack[1]} if stack else set()
        attention_paths: list[str] = []
        kinds = {name: _kind(name, module, blocks, attention_paths) for name, module in ctx.model.named_modules()}
        modules = dict(ctx.model.named_modules())
        rows: dict[str, dict] = {}

        def hook(name):
            def record(module, _inputs, output):
                if name in rows:
                    return  # a module called twice (shared weights): its first call
                tensor = _first_float(output)
                if tensor is not None:
                    # (hooked only where the kind is set)
                    rows[name] = activation_stats(name, kinds[name], module, _real(tensor, keep))  # type: ignore[arg-type]
            return record

        handles = [modules[name].register_forward_hook(hook(name)) for name, kind in kinds.items() if kind]
        try:
            ctx.forward(ids, keep if ctx.caller.has_mask else None)
        finally:
            for handle in handles:
                handle.remove()
        table = sorted(rows.values(), key=lambda r: r["module"] == "(model)")  # the output last
        if not table:
            return self.skip("no sub-layer returned a floating tensor")
        flagged = [r for r in table if r["flags"]]
        counts: dict[str, int] = {}
        for r in table:
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        seen = ", ".join(f"{n} {k}" for k, n in counts.items())
        if not flagged:
            return self.result("pass", 0.0, detail=f"{len(table)} sub-layers in range ({seen})", activations=table)
        listed = "; ".join(f"{r['module']}: {', '.join(r['flags'])}" for r in flagged[:6])
        return self.result("fail", float(len(flagged)), flagged[0]["module"], listed, activations=table)


def per_head(call: AttentionCall, batch: int) -> torch.Tensor | None:
    """The weights as (batch, heads, queries, keys), padded keys included; None when the
    leading axes do not split into the batch."""
    weights = call.weights
    if weights.dim() < 3 or (weights.shape[0] != batch and weights.shape[0] % batch):
        return None
    return weights.reshape(batch, -1, *weights.shape[-2:])


def pad_mass(weights: torch.Tensor, keep: torch.Tensor) -> float | None:
    """Mean share of attention mass real query rows put on pad keys; None without real rows."""
    rows = keep[:, None, :].expand(weights.shape[:3])
    if not rows.any():
        return None
    on_pads = (weights * (~keep)[:, None, None, :].float()).sum(dim=-1)
    return float(on_pads[rows].mean())


class AttentionMapsProbe(Probe):
    """Attention weights of one padded batch: per layer, the share of attention mass that
    real query rows put on pad keys (averaged over heads and rows). Fails above 1 %: padded
    positions feed real ones (TL101, TL102). With an artifacts folder, per-layer × per-head
    heatmaps of a few samples go to PNG files there."""

    name = "attention-maps"
    tolerance = 0.01
    unit = "largest per-layer share of attention mass on pad keys (real query rows)"
    samples = 2      # PNG files: the first padded samples of the batch
    terminal = 16    # the terminal heatmap's largest side

    def run(self, ctx: ProbeContext) -> ProbeResult:
        ids, keep = ctx.padded_batch(ctx.generator(17))
        calls = capture_attention(ctx, ids, keep)
        layers: list[dict[str, Any]] = []
        maps: list[torch.Tensor] = []
        names: dict[str, int] = {}
        for call in calls:
            weights = per_head(call, len(ids))
            if weights is None:
                continue
            module = call.module or "?"
            names[module] = names.get(module, 0) + 1
            label = module if names[module] == 1 else f"{module}#{names[module]}"
            mass = pad_mass(weights, keep)
            layers.append({"module": label, "heads": int(weights.shape[1]),
                           "pad_mass": None if mass is None else _round(mass)})
            maps.append(weights)
        if not layers:
            return self.skip("no attention seen (no softmax over (seq, seq) scores, no scaled_dot_product_attention, "
                             "no nn.MultiheadAttention)")
        padded = [i for i in range(len(ids)) if not keep[i].all()]
        shown = (padded or [0])[0]
        extra: dict[str, Any] = {"attention_layers": layers, "terminal_map": self.terminal_map(maps, keep, shown)}
        artifacts = getattr(ctx, "artifacts", None)
        files: list[str] = []
        note = ""
        if artifacts:
            files, note = render_png(maps, layers, ids, keep, (padded or [0])[: self.samples], Path(artifacts))
            extra["artifacts"] = files
        if note:
            extra["note"] = note
        figures = [layer["pad_mass"] for layer in layers if layer["pad_mass"] is not None]
        figure = max(figures) if figures else 0.0
        worst = max(layers, key=lambda layer: layer["pad_mass"] or 0.0)
        summary = ", ".join(f"{layer['module']}: {layer['pad_mass']:.1%}" for layer in layers[:8]
                            if layer["pad_mass"] is not None)
        detail = f"attention mass on pad keys per layer: {summary}"
        detail += f"; {len(files)} PNG maps in {artifacts}" if files else ""
        detail += f"; {note}" if note else ""
        if not ctx.caller.has_mask:
            return self.result("skip", figure, detail="the call style passes no mask, so padding cannot be "
                               f"expressed (not checkable); {detail}", **extra)
        if figure > self.tolerance:
            return self.result("fail", figure, worst["module"], f"real positions attend to padding; {detail}",
                               **extra)
        return self.result("pass", figure, detail=detail, **extra)

    def terminal_map(self, maps: list[torch.Tensor], keep: torch.Tensor, sample: int) -> dict[str, Any]:
        """Sample `sample`'s head-averaged weights per layer, pooled to at most 16 × 16 cells."""
        keys = keep[sample]
        seq = keys.shape[0]
        cells = min(seq, self.terminal)
        layers = []
        for weights in maps[:4]:
            w = weights[sample].mean(dim=0)
            w = torch.nn.functional.adaptive_avg_pool2d(w[None, None], (cells, cells))[0, 0]
            layers.append([[round(float(x), 3) for x in row] for row in w])
        pad_cols = [bool(not keys[min(seq - 1, (c * seq) // cells):((c + 1) * seq + cells - 1) // cells].any())
                    for c in range(cells)]
        return {"sample": sample, "length": int(keys.sum()), "pad_columns": pad_cols, "layers": layers}


MAX_TICKS = 40  # beyond this many positions, every n-th is labelled (pad boundaries always)
HEAD_COLUMNS = 4  # heads per row of a figure


def render_png(maps: list[torch.Tensor], layers: list[dict], ids: torch.Tensor, keep: torch.Tensor,
               samples: list[int], folder: Path) -> tuple[list[str], str]:
    """One PNG per sample and layer (`attention-sample{S}-layer{L}.png`): a grid of its
    heads, each titled with the layer and the head, queries down and keys across, the
    ticks labelled with the position's token id or `PAD` (in red, the pad keys framed
    red, the pad query rows greyed), one colour scale and its colour bar for the figure.
    Returns (the files written, a note when nothing could be written)."""
    try:
        import matplotlib
    except ImportError:
        return [], PLOT_HINT
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return [], f"cannot create the artifacts folder {folder}: {exc.strerror or exc}"
    files: list[str] = []
    for sample in samples:
        top = max(float(w[sample].max()) for w in maps) or 1.0  # one colour scale for all of a sample's maps
        for index, (weights, layer) in enumerate(zip(maps, layers)):
            fig = _layer_figure(plt, weights, layer, index, ids[sample], keep[sample], sample, top)
            path = folder / f"attention-sample{sample}-layer{index}.png"
            try:
                with open_output(path, binary=True) as stream:  # not through a link, never a FIFO
                    fig.savefig(stream, format="png", dpi=100)
            except OSError as exc:
                return files, f"cannot write {path}: {exc.strerror or exc}"
            finally:
                plt.close(fig)
            files.append(str(path))
    return files, ""


def _layer_figure(plt, weights: torch.Tensor, layer: dict, index: int, ids: torch.Tensor, keep: torch.Tensor,
                  sample: int, top: float):
    """The figure of one layer's heads for one sample (see `render_png`)."""
    from matplotlib.patches import Rectangle

    heads = int(weights.shape[1])
    seq = int(keep.shape[0])
    columns = min(heads, HEAD_COLUMNS)
    rows = math.ceil(heads / columns)
    side = min(6.0, max(3.2, 0.17 * seq + 1.0))  # inches per map: room for one label per position
    fig, axes = plt.subplots(rows, columns, figsize=(side * columns + 1.2, side * rows + 1.1), squeeze=False)
    pads = [i for i in range(seq) if not bool(keep[i])]
    labels = ["PAD" if i in pads else str(int(ids[i])) for i in range(seq)]
    runs = _runs([not bool(k) for k in keep])
    step = max(1, math.ceil(seq / MAX_TICKS))
    ticks = sorted({*range(0, seq, step), *(first for first, _ in runs)})
    fontsize = 7 if seq <= 24 else 6
    image = None
    for head in range(rows * columns):
        ax = axes[head // columns][head % columns]
        if head >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(weights[sample, head].numpy(), cmap="viridis", vmin=0.0, vmax=top, interpolation="nearest")
        for first, count in runs:  # pad keys: red frame; pad query rows (not counted): greyed
            ax.add_patch(Rectangle((first - 0.5, -0.5), count, seq, fill=False, edgecolor="red", linewidth=1.5))
            ax.add_patch(Rectangle((-0.5, first - 0.5), seq, count, color="white", alpha=0.6, linewidth=0))
        ax.set_xticks(ticks)
        ax.set_xticklabels([labels[i] for i in ticks], rotation=90, fontsize=fontsize)
        ax.set_yticks(ticks)
        ax.set_yticklabels([labels[i] for i in ticks], fontsize=fontsize)
        for tick_labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            for tick, position in zip(tick_labels, ticks):
                if position in pads:
                    tick.set_color("red")
                    tick.set_fontweight("bold")
        ax.set_title(f"layer {index} ({layer['module']}), head {head}", fontsize=9)
        ax.set_xlabel("key (token id)", fontsize=8)
        ax.set_ylabel("query (token id)", fontsize=8)
    mass = pad_mass(weights[sample:sample + 1], keep[None])
    share = f"; attention mass on pad keys {mass:.1%}" if mass is not None else ""
    fig.suptitle(f"attention weights, layer {index} ({layer['module']}), sample {sample}: "
                 f"{int(keep.sum())} real tokens of {seq}{share}\n"
                 "PAD (red): pad positions; red frame: pad keys; greyed rows: pad queries (not counted)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.92, 1))
    if image is not None:
        bar = fig.add_axes((0.93, 0.12, 0.015, 0.72))
        fig.colorbar(image, cax=bar).set_label("attention weight", fontsize=8)
    return fig


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(start, length) of each run of True."""
    runs: list[tuple[int, int]] = []
    for i, flag in enumerate(flags):
        if flag and runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        elif flag:
            runs.append((i, 1))
    return runs


def _register() -> None:
    """Add these probes to `probes.PROBE_CLASSES`, in the order of `options.PROBES`."""
    from tlint.verify.options import PROBES
    from tlint.verify.probes import PROBE_CLASSES

    merged = {**PROBE_CLASSES, ActivationRangesProbe.name: ActivationRangesProbe,
              AttentionMapsProbe.name: AttentionMapsProbe}
    PROBE_CLASSES.clear()
    PROBE_CLASSES.update({name: merged.pop(name) for name in PROBES if name in merged})
    PROBE_CLASSES.update(merged)


_register()
