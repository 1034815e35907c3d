"""The parent's side of `activation-ranges` and `attention-maps` (tlint.verify.activations):
the activation table and a small terminal heatmap in the text report; the fields they add
to each probe's JSON entry. No torch here."""

from __future__ import annotations

from typing import Any

PLOT_HINT = "PNG maps need matplotlib: pip install 'tlint-pytorch[plot]' (or pip install matplotlib)"
# extra key of a probe's result -> the field of its JSON entry
JSON_FIELDS = {"activations": "activations", "attention_layers": "layers", "artifacts": "artifacts"}


def json_fields(probe: dict[str, Any]) -> dict[str, Any]:
    extra = probe.get("extra") or {}
    return {field: extra[key] for key, field in JSON_FIELDS.items() if key in extra}


_SHADES = " ░▒▓█"


def render_text_extras(console, probes: list[dict]) -> None:
    """The activation table and the terminal attention heatmap, after the probes table."""
    from rich.table import Table
    from rich.text import Text

    by_name = {p["probe"]: p for p in probes}
    table_rows = (by_name.get("activation-ranges", {}).get("extra") or {}).get("activations")
    if table_rows:
        table = Table(title="activation ranges (real positions)", title_justify="left")
        for column in ("sub-layer", "kind", "min", "max", "mean", "std", "saturated", "flags"):
            table.add_column(column, overflow="fold", justify="right" if column in
                             ("min", "max", "mean", "std", "saturated") else "left")
        for r in table_rows:
            nums = [("" if r[k] is None else f"{r[k]:.3g}") for k in ("min", "max", "mean", "std")]
            saturated = "" if r["saturated"] is None else f"{r['saturated']:.1%}"
            flags = ", ".join(r["flags"])
            table.add_row(r["module"], r["kind"], *nums, saturated, Text(flags, style="bold red" if flags else ""))
        console.print(table)
    maps = by_name.get("attention-maps", {}).get("extra") or {}
    terminal = maps.get("terminal_map")
    if terminal and terminal["layers"]:
        layers = maps.get("attention_layers", [])
        console.print(f"attention of sample {terminal['sample']} ({terminal['length']} real tokens), head mean; "
                      "queries down, keys across, denser = more weight, ^ = pad keys")
        blocks = []
        for i, cells in enumerate(terminal["layers"]):
            name = layers[i]["module"] if i < len(layers) else f"layer {i}"
            mass = layers[i]["pad_mass"] if i < len(layers) else None
            lines = [f"{name}" + (f" (pad {mass:.0%})" if mass is not None else "")]
            top = max((x for row in cells for x in row), default=0.0) or 1.0
            for row in cells:
                lines.append("".join(_SHADES[min(4, int(x / top * 4.999))] * 2 for x in row))
            lines.append("".join("^^" if p else "  " for p in terminal["pad_columns"]))
            blocks.append(lines)
        for start in range(0, len(blocks), 2):
            group = blocks[start:start + 2]
            width = max(len(line) for block in group for line in block) + 4
            for j in range(max(len(b) for b in group)):
                console.print("".join((b[j] if j < len(b) else "").ljust(width) for b in group).rstrip())
    for name in ("attention-maps",):
        extra = by_name.get(name, {}).get("extra") or {}
        for path in extra.get("artifacts", []):
            console.print(f"wrote {path}")
