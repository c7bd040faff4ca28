"""One self-contained HTML page about one run (``numasim run ... --report FILE.html``).

```
<h1> machine · policy over domains · workload · seed
 Summary         the terminal summary's lines as a table, migrations by kind and distance
 Machine         nodes, CPUs and speeds; the distance matrix as a heat map
 Schedule        per-CPU utilisation timeline (CPU × time, busy fraction per bin)
 Far from origin processes by the distance from their origin node to the node they ran most
                 (log scale: the few far processes next to the many at home)
 Applications    (app= workloads and mixes only) per application: arrival to completion of its
                 last thread, and its CPU time by node (where its threads ran); the table
```

Figures are matplotlib SVG inlined in the page (text drawn as paths, so no font is needed);
nothing is fetched, so the file can be mailed or archived as is. A small inline script records
script and resource errors and the rendered size of each figure in ``<body data-...>`` once the
page has loaded: the headless-browser test reads them (tests/test_run_report.py).
"""

from __future__ import annotations

import html
import io
from typing import Any

from numasim import _core
from numasim.assumptions import describe
from numasim.render import summary_items
from numasim.saved import RunRecord

#: Columns of the utilisation timeline (bins over the makespan).
TIMELINE_BINS = 200
#: Annotate the distance heat map's cells with their values up to this many nodes.
ANNOTATE_NODES = 16

TIMELINE_CAPTION = "Busy fraction of each CPU in each time bin (lines separate nodes)."
FAR_CAPTION = (
    "Processes by the distance from their origin node to the node where they ran most "
    "(log scale; 10 = at their origin node)."
)

#: The stylesheet of numasim's HTML pages (the run report, the reproduction report).
PAGE_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
.sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 2px 10px; text-align: left; vertical-align: top; }
tr:nth-child(even) { background: #f4f4f4; } th { background: #e4e4e4; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 0.8em 0; } figure svg, figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
"""

#: Records script and resource errors and how many figures (inline SVG or embedded images)
#: drew, on ``<body data-...>``, for the headless-browser checks of numasim's pages.
PAGE_SCRIPT = """
(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    var t = e.target;
    var what = t && t !== window ? "resource " + (t.src || t.href || t.tagName) : e.message;
    errors.push(String(what));
  }, true);
  window.addEventListener("load", function () {
    var figs = document.querySelectorAll("figure svg, figure img"), drawn = 0;
    for (var i = 0; i < figs.length; i++) {
      var f = figs[i], r = f.getBoundingClientRect();
      var ok = f.tagName === "IMG" ? f.complete && f.naturalWidth > 50
                                   : r.width > 50 && r.height > 50;
      if (ok) drawn++;
    }
    var b = document.body.dataset;
    b.loaded = "yes"; b.figures = figs.length; b.figuresDrawn = drawn;
    b.errors = errors.length; b.errorList = errors.join(" | ");
  });
})();
"""


def _svg(fig: Any) -> str:
    """A matplotlib figure as inline SVG markup (no XML prolog, no DOCTYPE)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Stable element ids: the same run gives the same page.
    matplotlib.rcParams["svg.hashsalt"] = "numasim"
    return plt


def distance_figure(record: RunRecord) -> str:
    """The SLIT distance matrix as a heat map."""
    return _svg(distance_plot(record))


def distance_plot(record: RunRecord) -> Any:
    """The heat map as a matplotlib figure; one node (a single value) gets no colour bar."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    d = record.machine.distances
    n = len(d)
    size = min(9.0, 2.5 + 0.35 * n)
    fig, ax = plt.subplots(figsize=(size + 1.2, size), constrained_layout=True)
    values = {v for row in d for v in row}
    if len(values) > 1:
        im = ax.imshow(d, cmap="viridis_r", interpolation="nearest")
        fig.colorbar(im, ax=ax, label="distance (SLIT, 10 = local)", shrink=0.8)
    else:  # one value (one node): no scale to read, so no colour bar and a neutral cell colour
        ax.imshow(d, cmap=ListedColormap(["#e4e4e4"]), interpolation="nearest")
    step = max(1, n // 16)
    ax.set_xticks(range(0, n, step))
    ax.set_yticks(range(0, n, step))
    ax.set(xlabel="to node", ylabel="from node", title=f"{record.machine.name}: node distances")
    if n <= ANNOTATE_NODES:
        mid = (min(map(min, d)) + max(map(max, d))) / 2
        for i in range(n):
            for j in range(n):
                light = len(values) == 1 or d[i][j] < mid
                ax.text(j, i, str(d[i][j]), ha="center", va="center", fontsize=7,
                        color="black" if light else "white")  # fmt: skip
    return fig


def utilisation(record: RunRecord, bins: int = TIMELINE_BINS) -> list[list[float]]:
    """Per CPU, the busy fraction of each of ``bins`` equal intervals of the makespan."""
    makespan = record.result["summary"]["makespan_ms"]
    return _core.utilisation_timeline(
        record.machine._core, record.result_json, record.origin, makespan, bins
    )


def timeline_figure(record: RunRecord) -> str:
    """Per-CPU utilisation over time (rows = CPUs, grouped by node)."""
    plt = _pyplot()
    m = record.machine
    busy = utilisation(record)
    makespan = record.result["summary"]["makespan_ms"]
    height = min(14.0, 1.6 + 0.14 * m.cpus)
    fig, ax = plt.subplots(figsize=(10, height), constrained_layout=True)
    im = ax.imshow(busy, aspect="auto", cmap="Greens", vmin=0, vmax=1, interpolation="nearest",
                   extent=(0, makespan, m.cpus - 0.5, -0.5))  # fmt: skip
    fig.colorbar(im, ax=ax, label="busy fraction", shrink=0.8)
    first = 0
    for node in m.info["nodes"][:-1]:  # a line under each node's CPUs
        first += len(node["cpus"])
        if node["cpus"]:
            ax.axhline(first - 0.5, color="#888", lw=0.4)
    step = max(1, m.cpus // 32)
    ax.set_yticks(range(0, m.cpus, step))
    bins = len(busy[0]) if busy else 0
    ax.set(xlabel="time (ms)", ylabel="CPU",
           title=f"CPU utilisation ({bins} bins over {makespan:.0f} ms)")  # fmt: skip
    return _svg(fig)


def far_counts(record: RunRecord) -> list[tuple[int, int]]:
    """(distance, processes) for each distance of the machine: how far from its origin node each
    process ran most (the smallest distance = at its origin node; any other is far from origin).
    The engine indexes distances by level (``most_level``); the page shows only distances."""
    mals = record.machine.mals
    counts = [0] * len(mals)
    for p in record.result["processes"]:
        counts[p["most_level"]] += 1
    return list(zip(mals, counts, strict=True))


def far_figure(record: RunRecord) -> str:
    """Processes by the distance of the node where they ran most from their origin node."""
    return _svg(far_plot(record))


def far_plot(record: RunRecord) -> Any:
    """The far-from-origin bars on a log scale: usually almost all processes are at home and a
    handful far, which a linear axis flattens to nothing."""
    plt = _pyplot()
    rows = far_counts(record)
    counts = [c for _, c in rows]
    fig, ax = plt.subplots(figsize=(6.5, 3.4), constrained_layout=True)
    labels = [f"{d}" + (" (origin)" if i == 0 else "") for i, (d, _) in enumerate(rows)]
    colors = ["#4c72b0"] + ["#dd8452"] * (len(rows) - 1)
    bars = ax.bar(labels, counts, color=colors)
    # symlog: log above 1 process, linear below, so a distance no process ended at is a 0 bar.
    ax.set_yscale("symlog", linthresh=1, linscale=0.4)
    ax.set_ylim(0, max(1, max(counts, default=1)) * 3)
    ax.yaxis.set_major_formatter("{x:g}")  # 1, 10, 100 rather than 10⁰, 10¹, 10²
    ax.bar_label(bars, fontsize=8)
    ax.set(xlabel="distance from the origin node to the node where it ran most",
           ylabel="processes (log scale)", title="far from origin")  # fmt: skip
    ax.grid(axis="y", alpha=0.3)
    return fig


APPS_CAPTION = (
    "Left: each application from its arrival to the completion of its last thread. Right: its "
    "threads' CPU time by node, as a share of its CPU time (where its threads ran)."
)


def apps_plot(record: RunRecord) -> Any:
    """Per application: a bar from arrival to completion, and its CPU time by node (stacked
    shares, one colour per node)."""
    from numasim.apps import app_labels

    plt = _pyplot()
    apps = record.result["apps"]
    labels = app_labels(apps)
    k = len(apps)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 1.2 + 0.32 * k), sharey=True,
                                   constrained_layout=True, width_ratios=[3, 2])  # fmt: skip
    y = list(range(k))
    ax1.barh(y, [a["completion_ms"] - a["arrival_ms"] for a in apps],
             left=[a["arrival_ms"] for a in apps], color="#4c72b0", height=0.6)  # fmt: skip
    for i, a in enumerate(apps):
        ax1.text(a["completion_ms"], i, f" {a['turnaround_ms']:.0f}", va="center", fontsize=7)
    ax1.set_yticks(y, labels)
    ax1.invert_yaxis()  # the first application on top, as in the table
    ax1.set_xlim(0, record.result["summary"]["makespan_ms"] * 1.12)
    ax1.set(xlabel="time (ms)", title="arrival → completion (turnaround, ms)")
    ax1.grid(axis="x", alpha=0.3)
    nodes = record.machine.nodes
    cmap = plt.get_cmap("tab10" if nodes <= 10 else "tab20")
    left = [0.0] * k
    for node in range(nodes):
        share = []
        for a in apps:
            by_node = dict(a["cpu_ms_by_node"])
            share.append(100 * by_node.get(node, 0.0) / a["cpu_ms"] if a["cpu_ms"] else 0.0)
        ax2.barh(y, share, left=left, height=0.6, color=cmap(node % cmap.N),
                 label=f"node {node}" if nodes <= 16 else None)  # fmt: skip
        left = [x + w for x, w in zip(left, share, strict=True)]
    ax2.set_xlim(0, 100)
    ax2.set(xlabel="share of its CPU time (%)", title="CPU time by node")
    if nodes <= 16:
        fig.legend(loc="outside lower center", ncol=min(nodes, 8), fontsize=8, frameon=False)
    return fig


def page_head(title: str, heading: str, style: str = PAGE_STYLE) -> list[str]:
    """The opening lines of every numasim page: the document head with ``title``, the style
    and the page script, then ``heading`` as its ``h1`` (both escaped here)."""
    esc = html.escape
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        f"<style>{style}</style><script>{PAGE_SCRIPT}</script></head><body>",
        f"<h1>{esc(heading)}</h1>",
    ]


def _table(header: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    def cell(tag: str, i: int, v: Any) -> str:
        cls = ' class="num"' if i in numeric else ""
        return f"<{tag}{cls}>{html.escape(str(v))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def html_report(record: RunRecord) -> str:
    """The report page of one traced run."""
    from numasim import __version__

    m, s = record.machine, record.result["summary"]
    esc = html.escape
    title = f"{m.name} · {record.policy} over {record.domains} · {s['processes']} processes"
    summary = _table(["", ""], [[k, v] for k, v in summary_items(s, record.result["processes"])])
    kinds = _table(["migration kind", "count"],
                   [[k, v] for k, v in s["migrations_by_kind"]], {1})  # fmt: skip
    by_level = _table(["distance", "migrations"],
                      [[d, n] for d, n in zip(s["mals"], s["migrations_by_level"], strict=True)],
                      {0, 1})  # fmt: skip
    node_rows = [[n["id"], ", ".join(map(str, n["cpus"])) or "(memory only)",
                  ", ".join(f"{m.speeds[c]:g}" for c in n["cpus"]),
                  " ".join(map(str, m.distances[n["id"]]))] for n in m.info["nodes"]]  # fmt: skip
    cpus = _table(["node", "CPUs", "speeds", "distances"], node_rows)
    far_rows = [[d, c, f"{100 * c / max(1, s['processes']):.1f} %"] for d, c in far_counts(record)]
    far = _table(["distance from origin", "processes", "share"], far_rows, {0, 1, 2})
    parts = [
        *page_head(f"numasim · {title}", title),
        f'<p class="sub">workload <code>{esc(str(record.workload))}</code>, seed {record.seed};'
        f" numasim {esc(__version__)}<br>{esc(_assumptions(record.assumptions))}</p>",
        "<h2>Summary</h2>",
        summary,
        kinds,
        by_level,
        "<h2>Machine</h2>",
        f"<p>{esc(m.description)}</p>" if m.description else "",
        f"<p>{_count(m.nodes, 'node')}, {_count(m.cpus, 'CPU')}; distances "
        f"{' / '.join(map(str, m.mals))} (10 = local).</p>",
        _figure(distance_figure(record), "SLIT distances between nodes (10 = local)."),
        cpus,
        "<h2>Schedule</h2>",
        _figure(timeline_figure(record), TIMELINE_CAPTION),
        "<h2>Far from origin</h2>",
        f"<p>{s['far_from_origin']} of {s['processes']} processes "
        f"({s['far_from_origin_pct']:.1f} %) ran most on a node other than their origin node.</p>",
        _figure(far_figure(record), FAR_CAPTION),
        far,
        *_apps_section(record),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _assumptions(resolved: dict[str, str]) -> str:
    """The modelling assumptions of a simulated run; a real run's schedule has none."""
    if not resolved:
        return "a real run's schedule, read from its trace: no modelling assumption"
    return describe(resolved)


def _apps_section(record: RunRecord) -> list[str]:
    """The applications of an ``app=`` workload or a mix; nothing for other workloads."""
    from numasim.render import app_rows

    apps = record.result.get("apps")
    if not apps:
        return []
    header, *rows = app_rows(apps)
    return [
        "<h2>Applications</h2>",
        f"<p>{_count(len(apps), 'application')}. Completion and turnaround are those of an "
        "application's last thread; remote share is the time-weighted share of its threads' "
        "accesses to another node's memory; threads per node counts each thread on the node "
        "where it ran most.</p>",
        _figure(_svg(apps_plot(record)), APPS_CAPTION),
        _table(header, rows, set(range(1, len(header) - 1))),
    ]
