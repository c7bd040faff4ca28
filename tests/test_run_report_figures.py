"""The run report's figures and wording: far-from-origin bars on a log scale, no colour bar
for a one-node machine, and "distance" (not level or MAL) for what is keyed by distance."""

from __future__ import annotations

import html
import re
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
from numasim import run_report
from numasim.cli import main
from numasim.machine import Machine


def record(distances, most_levels):
    mals = sorted({v for row in distances for v in row})
    machine = SimpleNamespace(name="test", distances=distances, mals=mals)
    processes = [{"most_level": x} for x in most_levels]
    return SimpleNamespace(machine=machine, result={"processes": processes})


def test_far_from_origin_bars_are_on_a_log_scale():
    # 290 at home, a handful far: on a linear axis the far bars would be invisible.
    rec = record([[10, 20, 30], [20, 10, 20], [30, 20, 10]], [0] * 290 + [1] * 7 + [2])
    fig = run_report.far_plot(rec)
    (ax,) = fig.get_axes()
    assert ax.get_yscale() == "symlog"
    assert "log scale" in ax.get_ylabel()
    assert [round(b.get_height()) for b in ax.patches] == [290, 7, 1]
    assert "log scale" in run_report.FAR_CAPTION
    plt.close(fig)


def test_a_one_node_machine_has_no_colour_bar():
    one = run_report.distance_plot(record([[10]], [0, 0]))
    assert len(one.get_axes()) == 1, "the heat map only"
    two = run_report.distance_plot(record([[10, 20], [20, 10]], [0, 1]))
    assert len(two.get_axes()) == 2, "the heat map and its colour bar"
    plt.close(one)
    plt.close(two)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("pages")
    (d / "one.slit").write_text("10\n")
    out = {}
    machines = [("m1", "mehta-m1", []), ("one", str(d / "one.slit"), ["--cpus-per-node", "2"])]
    for name, machine, extra in machines:
        page = d / f"{name}.html"
        args = ["run", "--machine", machine, *extra, "--workload", "n=60,kind=cpu,exec=50",
                "--report", str(page)]  # fmt: skip
        assert main(args) == 0
        out[name] = page.read_text()
    return out


def visible_text(page: str) -> str:
    """The page's words outside figures, scripts and styles."""
    page = re.sub(r"<(svg|script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("name", ["m1", "one"])
def test_what_is_keyed_by_distance_is_called_distance(pages, name):
    # The machine's own description (preset prose, "6 memory access levels") is quoted as is.
    description = Machine.load("mehta-m1").description
    text = visible_text(pages[name].replace(f"<p>{html.escape(description)}</p>", ""))
    # "multilevel" and "two-level" name domain builders; a bare "level" or "MAL" would name
    # what the page otherwise calls a distance.
    assert not re.search(r"(?<![-\w])(levels?|MALs?)\b", text), re.findall(
        r".{0,40}(?<![-\w])(?:levels?|MALs?)\b.{0,20}", text
    )
    assert "distance from origin" in text and "by distance" in text


def test_one_node_page_says_node_not_nodes(pages):
    assert "1 node, 2 CPUs; distances 10 (10 = local)." in visible_text(pages["one"])
