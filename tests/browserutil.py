"""A real headless browser for the HTML report's tests: Chromium from Debian's packages
(`.ci/run` installs it with apt-get when /usr/bin/chromium is missing; never a downloaded
browser build).

How a test knows every image decoded: `decoded_images` copies the page and adds a script
before `</body>` that runs in the window's `load` event (fired once every image has loaded
or failed to) and, for each image, draws it on a canvas and reads the pixels back. Drawing
decodes the image synchronously: an image that failed to load throws (its "broken" state),
one whose header parses but whose pixel data does not comes out fully transparent, and
both count as broken (the report's images are opaque PNGs). Everything happens inside the
`load` handler, so when Chromium's `--dump-dom` prints the DOM after the load (and a
`--virtual-time-budget`), the counts and the `alt` of each broken image are attributes of
`<body>`; a page where the check did not run has none, and the test fails. (`img.decode()`
is asynchronous and settles on another thread, after the virtual clock may have run out:
tried first, it made the check flaky.) Chromium is cut off from the network
(`--host-resolver-rules` maps every host to nothing), so an image that is not embedded
cannot load either.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
REQUIRE_ENV = "TLINT_REQUIRE_BROWSER"  # set by .ci/run: a missing browser fails instead of skipping

CHECK_SCRIPT = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images), broken = [];
  images.forEach(function (img) {
    var ok = false;
    try {
      var canvas = document.createElement("canvas");
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      var ctx = canvas.getContext("2d");
      ctx.drawImage(img, 0, 0);
      var pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      for (var i = 3; i < pixels.length && !ok; i += 4) { ok = pixels[i] > 0; }
      ok = ok && img.complete && img.naturalWidth > 0;
    } catch (e) { ok = false; }
    if (!ok) { broken.push(img.alt); }
  });
  document.body.setAttribute("data-images-total", String(images.length));
  document.body.setAttribute("data-images-decoded", String(images.length - broken.length));
  document.body.setAttribute("data-images-broken", JSON.stringify(broken));
});
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if path is None:
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
            pytest.fail(f"{REQUIRE_ENV} is set but Chromium is not installed (apt-get install -y chromium)")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    return path


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="tlint-chromium-")
    try:
        return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND",
                               f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def decoded_images(page: Path, tmp: Path) -> dict:
    """{"total", "decoded", "broken": [alt, ...]} for the images of `page`, as Chromium sees them."""
    text = page.read_text(encoding="utf-8")
    assert "</body>" in text
    checked = tmp / f"checked-{page.name}"
    checked.write_text(text.replace("</body>", CHECK_SCRIPT + "</body>", 1), encoding="utf-8")
    proc = _run(["--virtual-time-budget=15000", "--dump-dom", checked.as_uri()])
    body = re.search(r"<body([^>]*)>", proc.stdout)
    assert body is not None, f"Chromium printed no DOM: {proc.stderr[-2000:]}"
    attributes = dict(re.findall(r'(data-images-[a-z]+)="([^"]*)"', body.group(1)))
    assert attributes, f"the image check did not finish in the page: {body.group(0)[:300]}"
    return {"total": int(attributes["data-images-total"]), "decoded": int(attributes["data-images-decoded"]),
            "broken": json.loads(html.unescape(attributes["data-images-broken"]))}


def screenshot(page: Path, out: Path, width: int = 1200, height: int = 1600) -> Path:
    proc = _run([f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri()])
    assert out.is_file(), f"no screenshot: {proc.stderr[-2000:]}"
    return out
