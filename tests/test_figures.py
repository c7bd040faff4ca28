"""Experiment figures and tables (report.py): legend off the data, a caption naming the
interval, the gain's metric and sign, curves that stay visible, a dot plot for one n, every n
of a sweep on the axis, byte-reproducible files; tables without "nan", "-0.00" or empty labels;
gains named by metric and unit. Synthetic runs: no simulation needed."""

from __future__ import annotations

import math
import os
import re
import time

import matplotlib
import numpy as np
import pandas as pd
import pytest
from numasim import report, stats
from numasim.experiment import Experiment, Variant, WorkloadDef

matplotlib.use("Agg")
import matplotlib.pyplot as plt

W1 = WorkloadDef("W1", "kind=cpu,exec=200,arrival=same")
BASE = Variant("linux26@multilevel", "linux26", "multilevel")
OA = Variant("origin-aware@multilevel", "origin-aware", "multilevel")
OA2 = Variant("origin-aware:v2=off", "origin-aware:v2=off", "multilevel")


def experiment(ns=(25, 100, 200, 400), metric="mean_tat_ms", title="a test", policies=(OA, OA2),
               workload=W1, reps=6,
               name="fig") -> Experiment:  # fmt: skip
    return Experiment(name=name, title=title, source="", machines=["mehta-m1"],
                      workloads=[workload], ns=list(ns), baseline=BASE, policies=list(policies),
                      replications=reps, confidence=0.95, seed=1, metric=metric)  # fmt: skip


def runs_for(exp: Experiment, value) -> pd.DataFrame:
    """``value(n, variant index, replication)`` as the experiment's metric, every cell."""
    rows = []
    for m, w, n in exp.cells():
        for r in range(exp.replications):
            for i, v in enumerate(exp.variants):
                rows.append({"machine": m, "workload": w.name, "n": n, "policy": v.label,
                             "replication": r, exp.metric: value(n, i, r)})  # fmt: skip
    return pd.DataFrame(rows)


def tat(n, i, r):
    return 2.0 * n * (1 - 0.02 * i) + 3 * math.sin(r + n)


def frames(exp, value=tat):
    runs = runs_for(exp, value)
    return (runs, stats.summarize(runs, 0.95, exp.metric),
            stats.gains(runs, exp, 0.95, exp.metric))  # fmt: skip


@pytest.fixture
def fig_of():
    made = []

    def _fig(exp, value=tat):
        _, summary, gains = frames(exp, value)
        fig = report.figure(exp, exp.machines[0], exp.workloads[0], summary, gains)
        fig.canvas.draw()
        made.append(fig)
        return fig

    yield _fig
    for f in made:
        plt.close(f)


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def data_axes(fig):
    return [ax for ax in fig.get_axes() if ax.get_visible()]


def data_lines(ax):
    """The data line of each error-bar series (not its caps or bars)."""
    return [c.lines[0] for c in ax.containers]


def legends(fig):
    return [x for x in fig.findobj(matplotlib.legend.Legend)]


def test_the_legend_covers_no_axes(fig_of):
    fig = fig_of(experiment())
    renderer = fig.canvas.get_renderer()
    (legend,) = legends(fig)
    box = legend.get_window_extent(renderer)
    assert [t.get_text() for t in legend.get_texts()] == [v.label for v in experiment().variants]
    for ax in data_axes(fig):
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()


def test_the_caption_says_what_the_error_bars_are(fig_of, tmp_path):
    exp = experiment(reps=7)
    fig = fig_of(exp)
    caption = "error bars: 95 % t-interval, 7 paired replications"
    (text,) = [t for t in texts(fig) if t.startswith(caption)]
    # The caption is below every axes and every legend, and overlaps none of them.
    renderer = fig.canvas.get_renderer()
    (artist,) = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() == text]
    box = artist.get_window_extent(renderer)
    for other in [*data_axes(fig), *legends(fig)]:
        assert box.y1 < other.get_window_extent(renderer).y0
    _, summary, gains = frames(exp)
    report.write_figures(tmp_path, exp, summary, gains)
    assert f"<!-- {caption}" in (tmp_path / "figures" / "fig-mehta-m1-W1.svg").read_text()
    # A 99 % experiment says so.
    s99 = stats.summarize(runs_for(exp, tat), 0.99)
    assert report.caption(exp, s99).startswith("error bars: 99 % t-interval, 7 paired")
    one = stats.summarize(runs_for(experiment(reps=1), tat), 0.95)
    assert report.caption(exp, one) == (
        "no error bars: fewer than 2 replications\n"
        "assumptions: memory=first-run, slice=wall, wake=previous, exec=cpu, cost=kernel, "
        "load=work, remote=slit (the kernel26 profile)"
    )
    # The second line names the modelling assumptions the figure was made under.
    assert text.endswith(
        "\nassumptions: memory=first-run, slice=wall, wake=previous, exec=cpu, cost=kernel, "
        "load=work, remote=slit (the kernel26 profile)"
    )


def test_the_gain_panel_names_the_metric_baseline_and_sign(fig_of):
    all_text = " ".join(texts(fig_of(experiment())))
    assert "TAT reduction vs linux26@multilevel, % — higher is better" in all_text
    far = " ".join(
        t.replace("\n", " ") for t in texts(fig_of(experiment(metric="far_from_origin")))
    )
    assert (
        "reduction in processes far from origin vs linux26@multilevel, % — higher is better" in far
    )
    assert "gain" not in far


def test_a_curve_under_another_stays_visible(fig_of):
    # Every variant gives exactly the same numbers: the curves would hide one another.
    fig = fig_of(experiment(), value=lambda n, i, r: float(n + r))
    ax1 = fig.get_axes()[0]
    lines = data_lines(ax1)
    assert len(lines) == 3
    xs = [tuple(ln.get_xdata()) for ln in lines]
    assert len(set(xs)) == 3, "dodged: each variant at its own x offset"
    assert all(ln.get_markerfacecolor() == "none" for ln in lines), "hollow markers"
    assert len({ln.get_marker() for ln in lines}) == 3
    assert len({ln.get_linestyle() for ln in lines}) == 3
    gains = data_lines(fig.get_axes()[1])
    assert len({tuple(ln.get_xdata()) for ln in gains}) == 2, "the two policies' gains apart"


def test_a_single_policy_gain_sits_on_its_n(fig_of):
    fig = fig_of(experiment(policies=[OA]))
    (line,) = data_lines(fig.get_axes()[1])
    assert list(line.get_xdata()) == [25, 100, 200, 400]


def test_one_n_is_a_dot_plot_of_the_variants(fig_of):
    exp = experiment(ns=[200])
    fig = fig_of(exp)
    ax1, ax2 = fig.get_axes()[:2]
    assert [t.get_text() for t in ax1.get_yticklabels()] == [v.label for v in exp.variants]
    # Dots, not lines: no connected segment anywhere, and the values on the x axis.
    for ax in (ax1, ax2):
        assert all(ln.get_linestyle() == "None" for ln in data_lines(ax))
    assert [list(ln.get_ydata()) for ln in data_lines(ax1)] == [[0], [1], [2]]
    assert [list(ln.get_ydata()) for ln in data_lines(ax2)] == [[1], [2]]
    assert ax1.get_xlabel() == "mean turnaround (ms)"
    assert not legends(fig)
    assert any(t.endswith("· n = 200") for t in texts(fig))


def test_titles_carry_the_workload_spec(fig_of):
    assert "mehta-m1 · W1 (kind=cpu,exec=200,arrival=same)" in texts(fig_of(experiment()))
    # `numasim compare`: no title, one workload named "w", perhaps no spec.
    adhoc = experiment(title="", workload=WorkloadDef("w", ""), ns=[30])
    # Only n: labelled by the defaults' values, not "w".
    label = "mehta-m1 · kind=cpu,exec=200,arrival=same (the defaults) · n = 30"
    assert label in texts(fig_of(adhoc))
    spec = experiment(title="", workload=WorkloadDef("w", "kind=io"), ns=[30])
    assert "mehta-m1 · kind=io · n = 30" in texts(fig_of(spec))


def far_value(n, i, r):
    """No process far from origin at n = 100 for any variant (the baseline is 0 there)."""
    return 0.0 if n == 100 else float((n // 10) - 3 * i + r % 3)


def test_far_from_origin_keeps_every_n_on_both_panels(fig_of):
    exp = experiment(ns=[100, 200, 300], metric="far_from_origin", policies=[OA])
    fig = fig_of(exp, far_value)
    ax1, ax2 = fig.get_axes()[:2]
    for ax in (ax1, ax2):
        assert list(ax.get_xticks()) == [100, 200, 300]
        lo, hi = ax.get_xlim()
        assert lo < 100 and hi > 300
    assert "baseline 0: no reduction" in [t.get_text() for t in ax2.texts]
    _, summary, gains = frames(exp, far_value)
    table = report.table_text(exp, summary, gains, 0.95)
    assert "reduction %" in table and "gain %" not in table
    row = next(line for line in table.splitlines() if line.strip().startswith("100 "))
    assert row.split()[-1] == report.DASH
    assert "— as a gain or reduction: the baseline is 0 in every replication" in table


def test_figures_are_byte_reproducible(tmp_path):
    exp = experiment()
    _, summary, gains = frames(exp)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = report.write_figures(tmp_path / "a", exp, summary, gains)
    second = report.write_figures(tmp_path / "b", exp, summary, gains)
    names = ["fig-mehta-m1-W1.png", "fig-mehta-m1-W1.svg"]
    assert [p.name for p in first] == [p.name for p in second] == names
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    svg = first[1].read_text()
    assert "<dc:date>" not in svg
    assert b"Software" not in first[0].read_bytes()


def summary_with_gaps(exp: Experiment) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One replication at n = 25 (no interval), a gain of −0.0 and −0.004 at n = 100."""
    _, summary, gains = frames(exp)
    at = summary.n == 25
    summary.loc[at, ["sd", "half_width", "ci_low", "ci_high"]] = np.nan
    summary.loc[at, "replications"] = 1
    g100 = gains.n == 100
    gains.loc[g100, "gain_pct"] = [-0.0, -0.004]
    gains.loc[g100, "gain_ci_high"] = [0.001, -0.001]
    gains.loc[gains.n == 25, ["gain_ci_low", "gain_ci_high"]] = np.nan
    return summary, gains


def test_tables_print_no_nan_and_no_negative_zero():
    exp = experiment()
    summary, gains = summary_with_gaps(exp)
    table = report.table_text(exp, summary, gains, 0.95)
    assert "nan" not in table.lower()
    assert not re.search(r"-0\.0+\b", table), table
    assert f"± {report.DASH}" in table
    assert f"{report.DASH} after ±: fewer than 2 replications, no interval" in table
    assert "replications per cell: 1–6" in table
    assert report.fmt(-0.0, 2) == report.fmt(-0.001, 2) == "0.00"
    assert report.fmt(-0.006, 2) == "-0.01" and report.fmt(math.nan) == report.DASH


def test_a_missing_n_is_a_row_of_dashes():
    exp = experiment()
    _, summary, gains = frames(exp)
    table = report.table_text(exp, summary[summary.n != 200], gains[gains.n != 200], 0.95)
    row = next(line for line in table.splitlines() if line.strip().startswith("200 "))
    assert row.split()[1:] == [report.DASH] * 5
    assert f"{report.DASH}: no runs for this n" in table


def test_compare_tables_have_no_empty_labels():
    exp = experiment(title="", workload=WorkloadDef("w", ""), ns=[30], name="compare")
    _, summary, gains = frames(exp)
    table = report.table_text(exp, summary, gains, 0.95)
    first = table.splitlines()[0]
    assert first == ("compare: origin-aware@multilevel and origin-aware:v2=off vs "
                     "linux26@multilevel")  # fmt: skip
    assert "()" not in table and " w " not in table
    assert "mehta-m1 · kind=cpu,exec=200,arrival=same (the defaults)" in table


def test_gains_and_json_name_the_metric_and_its_unit():
    exp = experiment(ns=[100, 200], metric="far_from_origin", policies=[OA])
    runs = runs_for(exp, far_value)
    g = stats.gains(runs, exp, 0.95, exp.metric)
    assert list(g) == ["machine", "workload", "n", "baseline", "policy", "metric", "unit",
                       "baseline_mean", "policy_mean", "gain_pct", "gain_ci_low", "gain_ci_high",
                       "replications", "confidence"]  # fmt: skip
    assert set(g.unit) == {"processes"} and set(g.metric) == {"far_from_origin"}
    s = stats.summarize(runs, 0.95, exp.metric)
    assert set(s.unit) == {"processes"} and set(s.confidence) == {0.95}
    data = report.json_rows(exp, g)
    assert list(data) == ["experiment", "metric", "rows"]
    assert data["rows"][0]["unit"] == "processes"
    assert data["rows"][0]["gain_pct"] is None  # n = 100: the baseline is 0
    assert "baseline_tat_ms" not in data["rows"][0]
    assert stats.unit("mean_tat_ms") == "ms" and stats.unit("mean_remote_factor") == "1"


# --- figures drawn in processes of their own (report.FigureDrawing) -------------------------


def test_figures_drawn_in_processes_come_back_in_order(tmp_path):
    tasks = [(lambda i=i: [tmp_path / f"{i}-{os.getpid()}"]) for i in range(5)]
    with report.FigureDrawing(tasks, 2) as drawing:
        assert len(drawing.pids) == 2
        files = drawing.result()
    assert [p.name.split("-")[0] for [p] in files] == ["0", "1", "2", "3", "4"]
    drawn_by = {int(p.name.split("-")[1]) for [p] in files}
    assert drawn_by == set(drawing.pids) and os.getpid() not in drawn_by


def test_a_figure_error_is_raised_by_the_wait_as_if_drawn_here(tmp_path):
    def fails():
        raise OSError(28, "No space left on device", str(tmp_path / "f.png"))

    with report.FigureDrawing([lambda: [tmp_path / "a"], fails], 2) as drawing:
        with pytest.raises(OSError, match="No space left") as e:
            drawing.result()
    assert e.value.filename == str(tmp_path / "f.png")


def test_no_figure_process_outlives_its_block():
    def slow():
        time.sleep(60)
        return []

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="the tables failed"):
        with report.FigureDrawing([slow, slow], 2) as drawing:
            pids = drawing.pids
            raise RuntimeError("the tables failed")
    assert time.monotonic() - start < 5
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_one_task_or_one_job_is_drawn_here(tmp_path):
    for tasks, jobs in (([lambda: [tmp_path / str(os.getpid())]], 2),
                        ([lambda: [tmp_path / str(os.getpid())]] * 2, 1)):  # fmt: skip
        with report.FigureDrawing(tasks, jobs) as drawing:
            assert drawing.pids == []
            assert drawing.result() == [[tmp_path / str(os.getpid())]] * len(tasks)


def test_the_default_workload_label_is_what_only_n_generates():
    import numasim

    m = numasim.Machine.preset("mehta-m1")
    only_n = numasim.Workload.generate(m, "n=20", 3).to_dataframe()
    spelled = numasim.Workload.generate(m, f"n=20,{report.DEFAULT_WORKLOAD}", 3).to_dataframe()
    pd.testing.assert_frame_equal(only_n, spelled)


def tiny_difference(n, i, r):
    """A turnaround of 200 ms that differs by 0.001 ms between the variants."""
    return 200.003 + 0.001 * (i == 0)


@pytest.mark.parametrize("ns", [[10], [10, 20]])
def test_a_tiny_difference_does_not_fill_the_panel_and_ticks_have_no_offset(fig_of, ns):
    fig = fig_of(experiment(ns=ns), tiny_difference)
    ax1, ax2 = fig.get_axes()[:2]
    axis = "x" if len(ns) == 1 else "y"
    for ax, span in ((ax1, 0.02 * 200), (ax2, report.MIN_GAIN_SPAN_PP)):
        a = ax.xaxis if axis == "x" else ax.yaxis
        assert a.get_offset_text().get_text() == "", ax.get_title()
        lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
        assert hi - lo >= span * 0.999, ax.get_title()
        assert all("e" not in t.get_text() for t in a.get_ticklabels())


def wide(n, i, r):
    """Two replications far apart: a t-interval of the mean reaching far below 0."""
    return [10.0, 400.0][r % 2] + i


def test_two_replications_bars_stop_at_0_and_the_caption_says_they_are_wide(fig_of):
    exp = experiment(ns=[10], reps=2)
    fig = fig_of(exp, wide)
    ax1 = fig.get_axes()[0]
    for c in ax1.containers:
        (bars,) = c.lines[2]
        assert min(seg[:, 0].min() for seg in bars.get_segments()) == 0
    (caption,) = [t for t in texts(fig) if t.startswith("error bars:")]
    assert "with 2 replications the interval is ±12.7 standard errors: wide" in caption
    assert "TAT bars stop at 0" in caption
