"""`tlint doctor --html FILE`: the report as one self-contained HTML file.

Everything is inside the file: the style sheet inline, every image a `data:image/png;base64`
URI, no script, no link or font to fetch (tests/test_doctor.py opens it in a headless
Chromium and checks that every image decodes). Sections: the steps, the ranked items with
their evidence and fix, the data scan (checks, length histograms), the model (probes, the
activation table, the attention maps the verifier drew), training dynamics and A/B (the
training probes' loss curves, data-ab's among them), the run logs (diagnose's plots). All
text that comes from the user's project, its logs or its code's output is escaped.
Plots need matplotlib (the `plot` extra); without it the file says so and keeps the tables.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from pathlib import Path
from typing import Any

from tlint import bounded
from tlint.atomic import write_bytes_atomic
from tlint.doctor.report import curves, evidence_parts, step_outcome
from tlint.doctor.steps import Results

_DIVERGED = re.compile(r"\(diverged at step (\d+)\)")
MAX_IMAGE_BYTES = 4 * 1024 * 1024    # an image file larger than this is not embedded
MAX_ATTENTION_MAPS = 8

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:30px 0 8px;border-bottom:2px solid #dde1e8}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#5b6475;margin:0 0 12px}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;width:100%}
th,td{border:1px solid #dde1e8;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}td:first-child{white-space:nowrap}
.item{background:#fff;border:1px solid #dde1e8;border-left:6px solid #8a93a5;border-radius:4px;
margin:8px 0;padding:8px 12px}
.item.high{border-left-color:#d62728}.item.medium{border-left-color:#ff9f1c}.item.low{border-left-color:#2b7bba}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600;color:#fff;
margin-right:6px}
.badge.high{background:#d62728}.badge.medium{background:#e08600}.badge.low{background:#2b7bba}
.stage{color:#5b6475;font-size:12px;margin-right:6px}.runtime{color:#5b6475;font-size:12px}
.ev{margin:4px 0 0 0;padding:0;list-style:none}.ev li{margin:2px 0;font-size:13px}
.src{display:inline-block;min-width:70px;color:#5b6475}.where{font-family:ui-monospace,monospace}
.fix{margin-top:5px;color:#1b6e2a}.fix b{color:#1b6e2a}
.fail{color:#c1121f;font-weight:600}.pass{color:#2a7d2e}.skip,.skipped{color:#8a6d00}.error{color:#c1121f}
.ran{color:#2a7d2e}.flag{background:#fde2e1}
figure{display:inline-block;margin:6px 10px 10px 0;background:#fff;border:1px solid #dde1e8;padding:6px}
figure img{max-width:100%;height:auto;display:block}figcaption{font-size:12px;color:#5b6475}
.note{color:#5b6475;font-style:italic}
"""


def e(value: Any) -> str:
    """Escaped text (quotes too: text may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return e(value)
    if isinstance(value, (int, float)):
        return e(f"{value:.4g}")
    return e(value)


def image_tag(data: bytes, alt: str, caption: str = "") -> str:
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    cap = f"<figcaption>{e(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="{uri}" alt="{e(alt)}">{cap}</figure>'


def _file_image(path: str | Path, alt: str, caption: str = "") -> str:
    p = Path(path)
    try:
        return image_tag(bounded.read_bytes(p, MAX_IMAGE_BYTES), alt, caption)
    except bounded.Refused as exc:
        if exc.kind == "size":
            return f'<p class="note">{e(p.name)}: larger than {MAX_IMAGE_BYTES // 2**20} MiB, not embedded</p>'
        return f'<p class="note">{e(p.name)}: cannot be read ({e(exc.strerror or exc)})</p>'
    except OSError as exc:
        return f'<p class="note">{e(p.name)}: cannot be read ({e(exc.strerror or exc)})</p>'


class _Plots:
    """matplotlib (Agg), imported once on first use; None when it is not installed."""

    def __init__(self) -> None:
        self._plt: Any = None
        self.missing = False

    @property
    def plt(self) -> Any:
        if self._plt is None and not self.missing:
            try:
                import matplotlib

                matplotlib.use("Agg")
                import matplotlib.pyplot as plt

                from tlint.diagnose.plots import plain_text

                plain_text(matplotlib)
                self._plt = plt
            except ImportError:
                self.missing = True
        return self._plt

    def png(self, fig: Any) -> bytes:
        buffer = io.BytesIO()
        try:
            fig.savefig(buffer, format="png", dpi=90)
        finally:
            self.plt.close(fig)
        return buffer.getvalue()


def _missing_note(plots: _Plots) -> str:
    return ('<p class="note">plots need matplotlib, which is not installed: '
            "pip install 'tlint-pytorch[plot]'</p>") if plots.missing else ""


def write_html(doc: dict[str, Any], results: Results, target: Path, images: Path) -> None:
    plots = _Plots()
    parts = [_header(doc), _steps(doc), _items(doc), _data(results, plots), _model(results),
             _training(results, plots), _logs(doc, results), _missing_note(plots)]
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>tlint doctor: {e(doc['path'])}</title><style>{_STYLE}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
    write_bytes_atomic(target, page.encode("utf-8"), mode=0o666 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def _header(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    ran = ("ran your code: " + "; ".join(doc["user_code"])) if doc["user_code"] else "ran no user code"
    return (f"<h1>tlint doctor: {e(doc['path'])}</h1>"
            f"<p class=\"meta\">config {e(doc['config'] or 'none found')} · tlint {e(doc['version'])} · "
            f"{e(ran)} · exit {e(doc['exit_code'])}</p>"
            f"<p><b>{e(s['items'])}</b> items: <span class=\"badge high\">{e(s['high'])} high</span>"
            f"<span class=\"badge medium\">{e(s['medium'])} medium</span>"
            f"<span class=\"badge low\">{e(s['low'])} low</span></p>")


def _steps(doc: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{e(s['step'])}</td><td class=\"{e(s['status'])}\">{e(s['status'])}</td>"
                   f"<td>{e(step_outcome(s))}</td><td class=\"num\">{e(s['seconds'])} s</td></tr>"
                   for s in doc["steps"])
    notes = "".join(f"<p class=\"note\">{e(n)}</p>" for n in doc["notes"])
    return ("<h2>Steps</h2><table><tr><th>step</th><th>status</th><th>outcome</th><th>time</th></tr>"
            f"{rows}</table>{notes}")


def _items(doc: dict[str, Any]) -> str:
    out = ["<h2>Ranked by likely impact</h2><p class=\"meta\">data → model → training dynamics → A/B, "
           "logs throughout; each item with its evidence and its fix</p>"]
    if not doc["items"]:
        out.append("<p>nothing found</p>")
    for item in doc["items"]:
        evidence = []
        for ev in item["evidence"]:
            source, where, what = evidence_parts(ev)
            evidence.append(f"<li><span class=\"src\">{e(source)}</span> "
                            + (f"<span class=\"where\">{e(where)}</span> " if where else "") + f"{e(what)}</li>")
        runtime = f" <span class=\"runtime\">({e(item['runtime'])})</span>" if item["runtime"] else ""
        out.append(f"<div class=\"item {e(item['impact'])}\"><div><b>{e(item['rank'])}.</b> "
                   f"<span class=\"badge {e(item['impact'])}\">{e(item['impact'])}</span>"
                   f"<span class=\"stage\">[{e(item['stage'])}]</span>{e(item['title'])}{runtime}</div>"
                   f"<ul class=\"ev\">{''.join(evidence)}</ul>"
                   f"<div class=\"fix\"><b>fix:</b> {e(item['fix'])}</div></div>")
    return "".join(out)


def _status(value: str) -> str:
    return f"<td class=\"{e(value)}\">{e(value)}</td>"


def _data(results: Results, plots: _Plots) -> str:
    scan = results.scan
    if scan is None:
        return ""
    rows = "".join(f"<tr><td>{e(c['check'])}</td><td>{e(c['loader'])}</td>{_status(c['status'])}"
                   f"<td>{e(', '.join(c.get('rules', [])))}</td><td class=\"num\">{_num(c.get('figure'))}</td>"
                   f"<td>{e(c.get('unit', ''))}</td><td>{e(c.get('detail', ''))}</td></tr>" for c in scan["checks"])
    out = ["<h2>Data</h2><table><tr><th>check</th><th>loader</th><th>status</th><th>rules</th><th>figure</th>"
           f"<th>unit</th><th>detail</th></tr>{rows}</table>"]
    histograms = [(c["loader"], c["extra"]["bins"]) for c in scan["checks"]
                  if c["check"] == "length-histogram" and (c.get("extra") or {}).get("bins")]
    if histograms and plots.plt is not None:
        out.append("<h3>Sequence lengths</h3>")
        for loader, bins in histograms:
            fig, ax = plots.plt.subplots(figsize=(5.5, 2.8), constrained_layout=True)
            labels = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi, _ in bins]
            ax.bar(range(len(bins)), [n for _, _, n in bins], color="#2b7bba")
            ax.set_xticks(range(len(bins)), labels, rotation=45, fontsize=7)
            ax.set_xlabel("real tokens per sample")
            ax.set_ylabel("samples")
            ax.set_title(f"{loader} loader", fontsize=10)
            out.append(image_tag(plots.png(fig), f"length histogram, {loader} loader",
                                 f"sequence lengths, {loader} loader"))
    return "".join(out)


def _model(results: Results) -> str:
    verify = results.verify
    if verify is None:
        return ""
    from tlint.doctor.steps import probe_stage

    model = verify["model"]
    rows = "".join(f"<tr><td>{e(p['probe'])}</td>{_status(p['status'])}<td class=\"num\">{_num(p.get('figure'))}"
                   f"</td><td class=\"num\">{_num(p.get('tolerance'))}</td><td>{e(p.get('unit', ''))}</td>"
                   f"<td>{e(p.get('detail', ''))}</td></tr>" for p in verify["probes"]
                   if probe_stage(p["probe"]) == "model")
    out = [f"<h2>Model</h2><p class=\"meta\">{e(model.get('class'))} from {e(model.get('factory'))}, "
           f"{_num(model.get('parameters'))} parameters, called as {e(model.get('call'))}</p>"
           "<table><tr><th>probe</th><th>status</th><th>figure</th><th>tolerance</th><th>unit</th><th>detail</th>"
           f"</tr>{rows}</table>"]
    by_name = {p["probe"]: p for p in verify["probes"]}
    activations = (by_name.get("activation-ranges", {}).get("extra") or {}).get("activations")
    if activations:
        out.append("<h3>Activation ranges (real positions)</h3><table><tr><th>sub-layer</th><th>kind</th>"
                   "<th>min</th><th>max</th><th>mean</th><th>std</th><th>saturated</th><th>flags</th></tr>")
        for r in activations:
            flags = ", ".join(r.get("flags") or [])
            saturated = "" if r.get("saturated") is None else f"{r['saturated']:.1%}"
            row = '<tr class="flag">' if flags else "<tr>"
            nums = "".join(f"<td class=\"num\">{_num(r.get(k))}</td>" for k in ("min", "max", "mean", "std"))
            out.append(f"{row}<td>{e(r.get('module'))}</td><td>{e(r.get('kind'))}</td>{nums}"
                       f"<td class=\"num\">{e(saturated)}</td><td>{e(flags)}</td></tr>")
        out.append("</table>")
    maps = by_name.get("attention-maps", {}).get("extra") or {}
    layers = maps.get("attention_layers") or []
    if layers:
        out.append("<h3>Attention maps</h3><p class=\"meta\">share of attention mass real queries put on pad keys: "
                   + ", ".join(f"{e(layer.get('module'))} {_pct(layer.get('pad_mass'))}" for layer in layers) + "</p>")
    files = maps.get("artifacts") or []
    for path in files[:MAX_ATTENTION_MAPS]:
        out.append(_file_image(path, f"attention map {Path(path).stem}", Path(path).stem))
    if len(files) > MAX_ATTENTION_MAPS:
        out.append(f"<p class=\"note\">{len(files) - MAX_ATTENTION_MAPS} more maps not embedded</p>")
    if layers and not files:
        why = maps.get("note") or by_name["attention-maps"].get("detail", "")
        out.append(f"<p class=\"note\">no attention-map images: {e(why)}</p>")
    return "".join(out)


def _pct(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) and not isinstance(value, bool) else e(value)


def _training(results: Results, plots: _Plots) -> str:
    verify = results.verify
    if verify is None:
        return ""
    from tlint.doctor.steps import probe_stage

    probes = [p for p in verify["probes"] if probe_stage(p["probe"]) in ("training", "ab")]
    if not probes:
        return ""
    rows = "".join(f"<tr><td>{e(p['probe'])}</td>{_status(p['status'])}<td class=\"num\">{_num(p.get('figure'))}"
                   f"</td><td>{e(p.get('unit', ''))}</td><td>{e(p.get('detail', ''))}</td></tr>" for p in probes)
    out = ["<h2>Training dynamics and A/B</h2><table><tr><th>probe</th><th>status</th><th>figure</th><th>unit</th>"
           f"<th>detail</th></tr>{rows}</table>"]
    for p in probes:
        found = curves(p.get("extra") or {})
        if not found or plots.plt is None:
            continue
        fig, ax = plots.plt.subplots(figsize=(5.5, 3.2), constrained_layout=True)
        diverged: list[tuple[int, str, str]] = []
        for label, curve in found.items():
            ys = [math.nan if v is None else v for v in curve["loss"]]
            style: dict[str, Any] = {}
            if label.endswith(" eval"):
                style = {"linestyle": "--", "marker": "o", "markersize": 3}
            if sum(y == y for y in ys) <= 2:  # a run that diverged at once: its points must show
                style = {**style, "marker": "x", "markersize": 8}
            (line,) = ax.plot(curve["steps"], ys, label=label, linewidth=1.5, **style)
            where = _DIVERGED.search(label)
            if where:
                diverged.append((int(where.group(1)), label[: where.start()].strip(), line.get_color()))
        for step, run, color in diverged:  # where a run's loss went non-finite: it has no point there
            ax.axvline(step, color=color, linestyle=":", linewidth=1.2)
            ax.annotate(f"{run}: non-finite loss at step {step}", (step, 0.04), xycoords=("data", "axes fraction"),
                        xytext=(4, 0), textcoords="offset points", color=color, fontsize=8, va="bottom")
        ax.set_xlabel("step" if p["probe"] == "data-ab" else "step (sampled)")
        ax.set_ylabel("loss")
        ax.set_title(f"{p['probe']} ({p['status']})", fontsize=10)
        ax.legend(fontsize=8)
        out.append(image_tag(plots.png(fig), f"loss curves of {p['probe']}", f"{p['probe']}: loss curves"))
    return "".join(out)


def _logs(doc: dict[str, Any], results: Results) -> str:
    diagnose = results.diagnose
    if diagnose is None:
        return ""
    out = ["<h2>Run logs</h2>"]
    for run in diagnose["runs"]:
        steps = run.get("steps")
        span = f"steps {steps['first']}-{steps['last']} ({steps['logged']} logged)" if steps else "no steps"
        out.append(f"<h3>{e(run['path'])}</h3><p class=\"meta\">{e(span)}; read {e(', '.join(run['sources']))}</p>")
        if run["findings"]:
            out.append("<table><tr><th>severity</th><th>finding</th><th>steps</th><th>message</th></tr>")
            for f in run["findings"]:
                where = f"{f['steps']['first']}-{f['steps']['last']}" if f.get("steps") else ""
                out.append(f"<tr><td class=\"{'fail' if f['severity'] == 'error' else 'skip'}\">{e(f['severity'])}"
                           f"</td><td>{e(f['kind'])}</td><td>{e(where)}</td><td>{e(f['message'])}</td></tr>")
            out.append("</table>")
    for path in diagnose.get("artifacts", []):
        out.append(_file_image(path, f"run plot {Path(path).stem}", Path(path).stem))
    step = next((s for s in doc["steps"] if s["step"] == "diagnose"), None)
    for note in (step or {}).get("summary", {}).get("notes", []):  # e.g. no plots without matplotlib
        out.append(f"<p class=\"note\">{e(note)}</p>")
    return "".join(out)
