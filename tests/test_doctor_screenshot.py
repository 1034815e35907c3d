"""scripts/doctor_screenshot.py, which regenerates docs/doctor-report.png: the page's layout
read in a real headless Chromium, the two slices put together, and a missing browser is exit 2
before the (minute-long) doctor run. The whole script on the demo is not run here: the demo's
doctor run and its page are tested by tests/test_doctor.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# slow: starts a headless browser
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import doctor_screenshot as script  # noqa: E402

PAGE = """<!DOCTYPE html><html><head><style>body{margin:0}div{height:%dpx}</style></head><body>
<h2>Steps</h2><div class="item" style="height:200px">first item</div><div>more items</div>
<h2>Training dynamics and A/B</h2><table><tr><td>data-ab</td></tr></table>
<figure><img src="%s" alt="loss curves of data-ab" width="300" height="150"></figure><div>run logs</div>
</body></html>"""


def test_the_layout_of_the_page_is_read_in_chromium(tmp_path):
    from tests.browserutil import chromium
    from tests.test_doctor import png_1x1
    from tlint.doctor.html import image_tag

    chromium()  # skip (or fail where .ci/run requires it) without a browser
    src = image_tag(png_1x1(), "x").split('src="')[1].split('"')[0]
    page = tmp_path / "report.html"
    page.write_text(PAGE % (900, src), encoding="utf-8")
    boxes = script.layout(page)
    item, section, image = boxes["item"], boxes["section"], boxes["image"]
    assert 200 <= item[1] - item[0] <= 202  # (rounded outwards)
    assert item[1] + 900 <= section[0] < section[1] < image[0] < image[1] <= boxes["height"] - 900
    assert image[1] - image[0] >= 150


def test_the_picture_is_the_top_then_the_ab_section(tmp_path):
    from PIL import Image

    width, height = script.WIDTH, 3000
    full = Image.new("RGB", (width, height), (246, 247, 249))
    for top, bottom, colour in ((0, 400, (200, 0, 0)), (1000, 1300, (0, 150, 0)), (1300, 1500, (0, 0, 200))):
        full.paste(Image.new("RGB", (width, bottom - top), colour), (0, top))
    shot = tmp_path / "full.png"
    full.save(shot)
    out = tmp_path / "docs" / "shot.png"
    script.compose(shot, {"item": [300, 394], "section": [1006, 1040], "image": [1200, 1488], "height": height}, out)
    picture = Image.open(out).convert("RGB")
    top = 394 + 6
    assert picture.size == (width, top + script.GAP + (1500 - 1000))
    assert picture.getpixel((500, 10)) == (200, 0, 0) and picture.getpixel((500, top - 1)) != (0, 150, 0)
    assert picture.getpixel((500, top + script.GAP + 5)) == (0, 150, 0)
    assert picture.getpixel((500, picture.height - 5)) == (0, 0, 200)


def test_without_chromium_it_is_exit_2_before_running_doctor(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(script.shutil, "which", lambda name: None)
    monkeypatch.setattr(script.os.path, "exists", lambda path: False)
    monkeypatch.setattr(script, "run_doctor", lambda work: pytest.fail("doctor ran"))
    assert script.main(["--out", str(tmp_path / "x.png")]) == 2
    assert "Chromium is not installed" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
