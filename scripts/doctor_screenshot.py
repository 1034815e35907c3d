"""Regenerate `docs/doctor-report.png`, the screenshot of `tlint doctor --html` on the demo
(README "tlint doctor").

    python scripts/doctor_screenshot.py [--out docs/doctor-report.png] [--keep DIR]

It copies `fixtures/demo` into a temporary folder, adds the hand-made run folder of the
README's example (`runs/lr-high`: no warmup, a loss spike at steps 4-8 after the gradient
norm explodes), runs `tlint doctor --html report.html` there with this checkout's tlint,
and opens the page in a headless Chromium (Debian's `/usr/bin/chromium`, driven as
`tests/browserutil.py` drives it: no network, a throw-away profile). The picture is two
slices of one full-page screenshot, one above the other: the top of the page (the steps
and the first ranked item) and the "Training dynamics and A/B" section down to data-ab's
loss curves (the clean-data A/B). Where the section and the image lie on the page is read
from the page itself (a script added to a copy reports their boxes through `--dump-dom`).
Needs the `dev` and `plot` extras (torch, transformers, matplotlib; Pillow comes with
matplotlib). Exit 2 with a message when something is missing or the run fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"
OUT = REPO / "docs" / "doctor-report.png"
WIDTH = 1200           # the browser window's width (px); the picture has this width
SECTION = "Training dynamics and A/B"
AB_IMAGE = "loss curves of data-ab"
GAP = 14               # px of page background between the slices, with a rule across

LAYOUT_SCRIPT = """<script>
window.addEventListener("load", function () {
  var boxes = {}, page = document.documentElement;
  function box(name, el) {
    if (!el) { return; }
    var r = el.getBoundingClientRect();
    boxes[name] = [Math.floor(r.top + window.scrollY), Math.ceil(r.bottom + window.scrollY)];
  }
  Array.prototype.forEach.call(document.querySelectorAll("h2"), function (h) {
    if (h.textContent === %(section)s) { box("section", h); }
  });
  var img = document.querySelector('img[alt=' + JSON.stringify(%(image)s) + ']');
  box("image", img && img.closest("figure") || img);
  box("item", document.querySelector(".item"));
  boxes.height = page.scrollHeight;
  document.body.setAttribute("data-layout", JSON.stringify(boxes));
});
</script>"""


class Failed(Exception):
    """Exit 2 with this message."""


def spiky_run(folder: Path) -> Path:
    """A hand-made Hugging Face run: no warmup (the rate starts at its peak), the loss spikes
    at steps 4-8 after the gradient norm explodes at step 3 (also tests/test_doctor.py's)."""
    history = []
    for step in range(1, 41):
        loss = 4.4 - 0.01 * step + 0.03 * math.sin(step * 1.3)
        if 4 <= step <= 8:
            loss += (6, 11, 9, 5, 2)[step - 4]
        grad_norm = 12.0 if 3 <= step <= 7 else 1.0 + 0.05 * math.sin(step)
        history.append({"step": step, "loss": round(loss, 4), "learning_rate": 0.5 * (1 - step / 41),
                        "grad_norm": grad_norm})
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": 40}))
    return folder


def chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        raise Failed("Chromium is not installed (Debian: apt-get install -y chromium)")
    return path


def browse(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    """Chromium headless, cut off from the network, with a throw-away profile."""
    profile = tempfile.mkdtemp(prefix="tlint-chromium-")
    try:
        return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND",
                               f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def run_doctor(work: Path) -> Path:
    """`tlint doctor --html report.html` in a copy of the demo with the run folder beside it."""
    project = work / "demo"
    shutil.copytree(DEMO, project)
    spiky_run(project / "runs" / "lr-high")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "TLINT_NO_CACHE": "1"}
    proc = subprocess.run([sys.executable, "-m", "tlint", "doctor", "--html", "report.html", "--no-cache"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)
    page = project / "report.html"
    if proc.returncode == 2 or not page.is_file():
        raise Failed(f"tlint doctor exited {proc.returncode} without its report:\n{proc.stderr[-3000:]}")
    if f'alt="{AB_IMAGE}"' not in page.read_text(encoding="utf-8"):
        raise Failed(f"the report has no {AB_IMAGE!r} image: data-ab did not run to its curves "
                     "(is transformers installed?)")
    return page


def layout(page: Path) -> dict:
    """The boxes (top, bottom in page px) of the first ranked item, the A/B section's heading
    and data-ab's figure, and the page's height, at the screenshot's width."""
    text = page.read_text(encoding="utf-8")
    script = LAYOUT_SCRIPT % {"section": json.dumps(SECTION), "image": json.dumps(AB_IMAGE)}
    probe = page.with_name("layout-" + page.name)
    probe.write_text(text.replace("</body>", script + "</body>", 1), encoding="utf-8")
    proc = browse([f"--window-size={WIDTH},1000", "--virtual-time-budget=15000", "--dump-dom", probe.as_uri()])
    found = re.search(r'<body[^>]*data-layout="([^"]*)"', proc.stdout)
    if found is None:
        raise Failed(f"Chromium reported no layout: {proc.stderr[-2000:]}")
    import html

    boxes = json.loads(html.unescape(found.group(1)))
    if "section" not in boxes or "image" not in boxes or "item" not in boxes:
        raise Failed(f"the page has no {SECTION!r} section with data-ab's curves: {boxes}")
    return boxes


def screenshot(page: Path, out: Path, height: int) -> Path:
    proc = browse([f"--screenshot={out}", f"--window-size={WIDTH},{height}", page.as_uri()])
    if not out.is_file():
        raise Failed(f"Chromium wrote no screenshot: {proc.stderr[-2000:]}")
    return out


def compose(shot: Path, boxes: dict, out: Path) -> None:
    """The top slice, a gap with a rule, then the A/B section down to data-ab's figure."""
    from PIL import Image, ImageDraw

    full = Image.open(shot).convert("RGB")
    background = full.getpixel((2, 2))
    start, end = boxes["section"][0] - 6, min(boxes["image"][1] + 12, full.height)
    top = full.crop((0, 0, WIDTH, min(boxes["item"][1] + 6, start)))
    section = full.crop((0, start, WIDTH, end))
    picture = Image.new("RGB", (WIDTH, top.height + GAP + section.height), background)
    picture.paste(top, (0, 0))
    draw = ImageDraw.Draw(picture)
    middle = top.height + GAP // 2
    draw.line([(28, middle), (WIDTH - 28, middle)], fill=(150, 156, 168), width=1)
    for x in range(28, WIDTH - 28, 10):  # a torn edge: the page goes on between the slices
        draw.line([(x, middle - 2), (x + 5, middle + 2)], fill=(150, 156, 168), width=1)
    picture.paste(section, (0, top.height + GAP))
    out.parent.mkdir(parents=True, exist_ok=True)
    picture.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default: {OUT.relative_to(REPO)})")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the demo copy, its report and the full "
                        "screenshot in DIR (a new folder)")
    args = parser.parse_args(argv)
    try:
        chromium()  # (before the doctor run, which takes a minute)
        with tempfile.TemporaryDirectory(prefix="tlint-screenshot-") as tmp:
            work = Path(tmp)
            page = run_doctor(work)
            boxes = layout(page)
            shot = screenshot(page, work / "full.png", boxes["height"])
            compose(shot, boxes, args.out)
            if args.keep is not None:
                shutil.copytree(work, args.keep)
    except (Failed, OSError, ImportError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"doctor_screenshot: error: {exc}\n")
        return 2
    sys.stdout.write(f"wrote {args.out} (the page's top and its A/B section, {WIDTH} px wide)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
