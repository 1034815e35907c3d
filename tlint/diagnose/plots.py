"""`tlint diagnose --artifacts DIR`: PNG plots (matplotlib, the `plot` extra, Agg backend).

One figure per run, four panels: loss (train, eval; findings shaded and named in the
legend), learning rate, gradient norm (log scale), pad share; a panel with no data says
"not recorded". With two runs, a third figure overlays their losses and marks the step where
they separate.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from tlint.bounded import open_output
from tlint.diagnose.findings import Finding
from tlint.diagnose.readers import DiagnoseError, Run

_COLORS = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
_SHADED = {"loss-spike", "nonfinite", "divergence", "stuck-loss", "grad-explosion", "throughput-drop",
           "train-eval-gap", "eval-worse-from-start"}


def write_plots(runs: list[Run], findings: list[list[Finding]], comparison: dict[str, Any] | None,
                folder: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DiagnoseError("--artifacts draws PNG plots with matplotlib, which is not installed: "
                            "pip install 'tlint-pytorch[plot]'") from None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DiagnoseError(f"{folder}: cannot create the artifacts folder ({exc.strerror or exc})") from None
    plain_text(matplotlib)
    written = []
    names = ["a", "b"] if len(runs) == 2 else [""]
    for run, found, name in zip(runs, findings, names):
        fig = _run_figure(plt, run, found, f"run {name}: " if name else "")
        path = folder / f"diagnose{'-' + name if name else ''}-{_slug(run.path)}.png"
        written.append(_save(plt, fig, path))
    if comparison is not None:
        fig = _compare_figure(plt, runs, comparison)
        written.append(_save(plt, fig, folder / "diagnose-comparison.png"))
    return written


def plain_text(matplotlib: Any) -> None:
    """Every text of tlint's figures is drawn as written: a run folder named `a$\\frac$b`
    is a name, not mathtext (which would fail to parse, or render something else)."""
    if "text.parse_math" in matplotlib.rcParams:
        matplotlib.rcParams["text.parse_math"] = False


def _slug(path: str) -> str:
    name = Path(path).name or "run"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]


def _save(plt: Any, fig: Any, path: Path) -> str:
    try:
        with open_output(path, binary=True) as stream:  # not through a link, never a FIFO
            fig.savefig(stream, format="png", dpi=110)
    except OSError as exc:
        raise DiagnoseError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
    return str(path)


def _xy(points: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    return [s for s, _ in points], [v if math.isfinite(v) else math.nan for _, v in points]


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"{what}: not recorded", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _run_figure(plt: Any, run: Run, found: list[Finding], label: str) -> Any:
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True)
    fig.suptitle(f"{label}{run.path}", fontsize=11)
    loss_ax, lr_ax, grad_ax, pad_ax = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    loss, evals = run.series.get("loss", []), run.series.get("eval_loss", [])
    if loss or evals:
        if loss:
            loss_ax.plot(*_xy(loss), color="#1f77b4", lw=1.2, label="train loss")
            bad = [s for s, v in loss if not math.isfinite(v)]
            if bad:
                loss_ax.plot(bad, [0] * len(bad), "x", color="red", transform=loss_ax.get_xaxis_transform(),
                             markersize=8, label="non-finite loss")
        if evals:
            loss_ax.plot(*_xy(evals), "o-", color="#2ca02c", lw=1.2, markersize=4, label="eval loss")
        shown: set[str] = set()
        for f in found:
            if f.kind in _SHADED and f.first_step is not None:
                last = f.last_step if f.last_step is not None else f.first_step
                tag = f"{f.kind} ({f.severity})"
                loss_ax.axvspan(f.first_step - 0.5, last + 0.5, color=_COLORS[f.severity], alpha=0.15,
                                label=None if tag in shown else tag)
                shown.add(tag)
        if run.vocab_size:
            loss_ax.axhline(math.log(run.vocab_size), color="grey", ls=":", lw=1,
                            label=f"ln(vocabulary {run.vocab_size})")
        loss_ax.legend(fontsize=8, loc="upper right")
        loss_ax.set_title("loss")
        loss_ax.set_xlabel("step")
        loss_ax.set_ylabel("loss")
        loss_ax.grid(alpha=0.3)
    else:
        _empty(loss_ax, "loss")
    _panel(lr_ax, run.series.get("lr", []), "learning rate", "learning rate", "#9467bd",
           [f for f in found if f.kind == "lr-schedule"])
    _panel(grad_ax, run.series.get("grad_norm", []), "gradient norm (log scale)", "gradient norm", "#8c564b",
           [f for f in found if f.kind == "grad-explosion"], log=True)
    _panel(pad_ax, run.series.get("pad_share", []), "pad share of the batch", "pad share", "#17becf",
           [f for f in found if f.kind == "pad-share"])
    if run.series.get("pad_share"):
        pad_ax.set_ylim(0, 1)  # a share
    return fig


def _panel(ax: Any, points: list[tuple[int, float]], title: str, ylabel: str, color: str,
           found: list[Finding], log: bool = False) -> None:
    if not points:
        _empty(ax, ylabel)
        ax.set_title(title)
        return
    xs, ys = _xy(points)
    if log and any(y > 0 for y in ys if not math.isnan(y)):
        ax.set_yscale("log")
    ax.plot(xs, ys, color=color, lw=1.2, label=ylabel)
    for f in found:
        if f.kind == "lr-schedule":
            size = f.size
            if size.get("warmup_steps"):
                ax.axvline(size["peak_step"], color="grey", ls="--", lw=1,
                           label=f"end of warmup ({size['warmup_steps']} steps)")
            else:
                ax.plot([], [], " ", label="no warmup")
            ax.plot([], [], " ", label=f"peak {size['peak']:.3g}, decay: {size['decay']}")
        elif f.first_step is not None:
            last = f.last_step if f.last_step is not None else f.first_step
            ax.axvspan(f.first_step - 0.5, last + 0.5, color=_COLORS[f.severity], alpha=0.15,
                       label=f"{f.kind} ({f.severity})")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _compare_figure(plt: Any, runs: list[Run], comparison: dict[str, Any]) -> Any:
    fig, ax = plt.subplots(figsize=(10, 5.5), constrained_layout=True)
    for run, name, color in zip(runs, "ab", ("#1f77b4", "#d62728")):
        loss = run.series.get("loss", [])
        if loss:
            ax.plot(*_xy(loss), color=color, lw=1.2, label=f"run {name}: {Path(run.path).name} (train loss)")
        evals = run.series.get("eval_loss", [])
        if evals:
            ax.plot(*_xy(evals), "o--", color=color, lw=1, markersize=4, label=f"run {name} eval loss")
    sep = comparison.get("separation")
    if sep is not None:
        ax.axvline(sep["step"], color="black", ls="--", lw=1,
                   label=f"losses separate at step {sep['step']} (run {sep['worse']} worse)")
    diffs = comparison.get("config_differences") or []
    if diffs:
        text = "settings that differ (a / b):\n" + "\n".join(
            f"{d['key']}: {d['a']} / {d['b']}" for d in diffs[:8]) + ("\n..." if len(diffs) > 8 else "")
        ax.text(0.99, 0.5, text, transform=ax.transAxes, ha="right", va="center", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "edgecolor": "grey"})
    ax.set_title("loss, run a vs run b")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig
