"""The one-page HTML run report: its content, that it is self-contained, and that a real
browser (headless Chromium, Debian's `chromium`; `make test` installs it) loads it without
errors and draws its figures."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions"]  # fmt: skip


def _browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    pytest.fail("no headless browser: install Debian's chromium (make test installs it)")


def _dump_dom(page: Path, tmp_path: Path) -> str:
    r = subprocess.run(
        [_browser(), *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout


def _body_status(dom: str) -> dict[str, str]:
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    return dict(re.findall(r'data-([\w-]+)="([^"]*)"', body.group(1)))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of a 300-process mehta-m1 run (the headline machine)."""
    from numasim.cli import main

    d = tmp_path_factory.mktemp("report")
    page = d / "run.html"
    args = ["run", "--machine", "mehta-m1", "--workload", "n=300,kind=cpu,exec=200,arrival=random",
            "--domains", "multilevel", "--report", str(page)]  # fmt: skip
    assert main(args) == 0
    return page


def test_the_report_holds_the_run(report):
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "<h1>mehta-m1 · linux26 over multilevel · 300 processes</h1>" in text
    for section in ["Summary", "Machine", "Schedule", "Far from origin"]:
        assert f"<h2>{section}</h2>" in text
    assert text.count("<figure><svg") == 3
    # The summary table carries the same numbers as the terminal summary.
    assert re.search(r"<td>turnaround</td><td>mean \d+\.\d ms, median", text)
    assert "<td>far from origin</td>" in text
    # Nothing outside the file: no external scripts, stylesheets, images or fonts (the heat
    # maps are PNG data inside their SVG; other references point into the page).
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text)
    assert refs and [r for r in refs if not r.startswith(("#", "data:image/png;base64,"))] == []
    assert "url(http" not in text and "@import" not in text


def test_the_report_loads_in_headless_chromium(report, tmp_path):
    status = _body_status(_dump_dom(report, tmp_path))
    assert status == {"loaded": "yes", "figures": "3", "figures-drawn": "3", "errors": "0",
                      "error-list": ""}  # fmt: skip
    png = tmp_path / "report.png"
    subprocess.run(
        [_browser(), *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1200,3600", f"--screenshot={png}", report.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[..., :3]
    assert pixels.shape[:2] == (3600, 1200)
    # Not a blank page: a good share of the pixels are ink, and the figures bring colour
    # (the heat maps are far from grey).
    ink = (pixels.mean(axis=2) < 0.9).mean()
    colour = (np.ptp(pixels, axis=2) > 0.25).mean()
    assert ink > 0.05 and colour > 0.02, (ink, colour)


def test_the_browser_check_sees_errors(report, tmp_path):
    # The same page with a missing image and a failing script: the check must report both.
    broken = tmp_path / "broken.html"
    text = report.read_text().replace(
        "</body>", '<img src="missing.png"><script>no_such_function();</script></body>'
    )
    broken.write_text(text)
    status = _body_status(_dump_dom(broken, tmp_path))
    assert status["loaded"] == "yes" and status["errors"] == "2", status
    assert "missing.png" in status["error-list"] and "no_such_function" in status["error-list"]
