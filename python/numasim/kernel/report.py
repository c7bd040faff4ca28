"""A validation as text (the terminal) and as one self-contained HTML page.

```
<h1> machine · workload · kernel release · policy
 Verdict      how many metrics lie in the kernel's range, within 1.5×, outside
 Migrations   per task-second by kind and by distance: kernel boots vs numasim seeds (figure)
 Passes       balancing passes per level per CPU-second by idle type (figure)
 All metrics  the table the terminal prints
 Runs         each boot: kernel, guest and host time, lost events
```

Figures are matplotlib SVG inlined (numasim.run_report's helpers and style), so the page needs
nothing from the network; the page's script records load errors and drawn figures on
``<body data-...>`` for the headless-browser check.
"""

from __future__ import annotations

import html
import math
from typing import Any

from numasim.kernel.validate import Row, Validation

#: Under TCG every vCPU is a host thread and the guest's clock is the host's: a guest second
#: holds less emulated work the more vCPUs share the host's cores.
TCG_NOTE = (
    "The kernel ran under QEMU's software emulation (TCG): its vCPUs share the host's few "
    "cores, so a guest second holds far less emulated work than a real CPU-second, and "
    "timer-driven work (ticks, balancing intervals) takes a larger share of it. Rates are per "
    "second of guest time, as the guest's own clock measured it."
)


def _num(x: float) -> str:
    if math.isnan(x):
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _side(row: Row, side: list[float], confidence: float) -> str:
    mean, half, lo, hi = row.stats(side, confidence)
    if math.isnan(mean):
        return "—"
    pm = "" if math.isnan(half) else f" ± {_num(half)}"
    return f"{_num(mean)}{pm} [{_num(lo)}–{_num(hi)}]"


def _ratio(row: Row) -> str:
    if not row.kernel or not row.sim:
        return "—"
    k, s = sum(row.kernel) / len(row.kernel), sum(row.sim) / len(row.sim)
    if k == 0:
        return "—" if s == 0 else "∞"
    return f"{s / k:.2f}"


def _label(v: Validation, metric: str) -> str:
    head, _, rest = metric.partition("/")
    if head in ("passes", "active"):
        level, _, idle = rest.partition("/")
        name = v.levels.get(int(level), "")
        return f"{head} L{level} {name}".rstrip() + (f" {idle.replace('_', ' ')}" if idle else "")
    return metric


def table_rows(v: Validation, confidence: float = 0.95) -> list[list[str]]:
    """Header and rows: metric, kernel, numasim, ratio, verdict."""
    header = ["metric", f"kernel ({len(v.kernel)} boots)", f"numasim ({len(v.sim)} seeds)",
              "numasim / kernel", "verdict"]  # fmt: skip
    rows = [header]
    for r in v.rows():
        if not any(r.kernel) and not any(r.sim):
            continue
        rows.append([_label(v, r.metric), _side(r, r.kernel, confidence),
                     _side(r, r.sim, confidence), _ratio(r), r.verdict()])  # fmt: skip
    return rows


def describe(v: Validation) -> str:
    t = v.twin
    start = {
        "fork": "forked from CPU 0",
        "pinned": "each pinned to one CPU",
        "released": f"on CPU 0, released at {t.release_ns / 1e6 if t.release_ns else 0:g} ms",
    }
    kernels = sorted({r.kernel.release for r in v.runs})
    mem = f", touching {t.mem_mb:g} MB each" if t.mem_mb else ""
    return (f"{v.machine.name} ({v.machine.nodes} nodes, {v.machine.cpus} CPUs) · {t.tasks} "
            f"busy loops {start.get(t.start, t.start)}{mem} · {t.window_ns / 1e9:g} s window · "
            f"NUMA balancing {'on' if t.numa_balancing else 'off'} · kernel "
            f"{', '.join(kernels)} · numasim {v.twin.policy(v.policy)}")  # fmt: skip


def text(v: Validation, confidence: float = 0.95) -> str:
    """What the terminal prints."""
    rows = table_rows(v, confidence)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [describe(v), ""]
    for r in rows:
        cells = (
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        lines.append("  ".join(cells).rstrip())
    counts = _verdicts(v)
    lines += ["", f"mean ± {confidence:.0%} half-width [min–max]; migrations per task-second, "
              "passes and active balances per CPU-second of guest time (QEMU's TCG:"
              + _share_text(v).replace(" In these boots each", " each").rstrip(".") + ").",
              "numasim's mean against the kernel's range: " + ", ".join(
                  f"{n} {k}" for k, n in counts.items())]  # fmt: skip
    return "\n".join(lines)


def _share_text(v: Validation) -> str:
    """The measured share of a host core each vCPU had, over the boots."""
    shares = [r.window.vcpu_share for r in v.runs if r.window.vcpu_share is not None]
    if not shares:
        return ""
    return (
        f" In these boots each of the {v.machine.cpus} vCPUs had {min(shares):.0%}–"
        f"{max(shares):.0%} of a host core."
    )


def _verdicts(v: Validation) -> dict[str, int]:
    counts = {"in range": 0, "≤ 1.5×": 0, "outside": 0}
    for r in v.rows():
        if any(r.kernel) or any(r.sim):
            verdict = r.verdict()
            if verdict in counts:
                counts[verdict] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# HTML


def _bars(v: Validation, panels: list[tuple[str, list[str], list[str]]], ylabel: str) -> str:
    """Kernel boots and numasim seeds side by side per metric, one panel per (title, metrics,
    labels): bars at the means, whiskers over each side's range, a dot per boot."""
    from numasim.run_report import _pyplot, _svg

    plt = _pyplot()
    rows = {r.metric: r for r in v.rows()}
    widest = max(len(metrics) for _, metrics, _ in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5.0, (0.55 * widest + 1.2) * len(panels)),
                                                      3.2), squeeze=False)  # fmt: skip
    width = 0.38
    for ax, (title, metrics, labels) in zip(axes[0], panels, strict=True):
        for side, (name, color, off) in enumerate([("kernel", "#444", -width / 2),
                                                   ("numasim", "#d95f02", width / 2)]):  # fmt: skip
            for i, m in enumerate(metrics):
                r = rows.get(m)
                values = (r.kernel if side == 0 else r.sim) if r else []
                mean = sum(values) / len(values) if values else 0.0
                lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
                ax.bar(i + off, mean, width, color=color, alpha=0.75,
                       label=name if i == 0 else None)  # fmt: skip
                ax.plot([i + off, i + off], [lo, hi], color="black", lw=1)
                if side == 0:
                    ax.plot([i + off] * len(values), values, "o", ms=3, color="white",
                            mec="black", mew=0.6)  # fmt: skip
        ax.set_xticks(range(len(metrics)), labels, rotation=30, ha="right", fontsize=8)
        if title:
            ax.set_title(title, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel(ylabel, fontsize=9)
    axes[0][0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return _svg(fig)


def _pass_panels(v: Validation, present: set[str]) -> list[tuple[str, list[str], list[str]]]:
    """One panel per idle type: its passes at each level."""
    panels = []
    for idle in ("busy", "idle", "newly_idle"):
        metrics = sorted((m for m in present if m.startswith("passes/") and m.endswith(f"/{idle}")),
                         key=lambda m: int(m.split("/")[1]))  # fmt: skip
        if metrics:
            labels = [f"L{m.split('/')[1]} {v.levels.get(int(m.split('/')[1]), '')}".rstrip()
                      for m in metrics]  # fmt: skip
            panels.append((idle.replace("_", " "), metrics, labels))
    return panels


def html_page(v: Validation, confidence: float = 0.95) -> str:
    """The validation as one HTML page."""
    from numasim import __version__
    from numasim.kernel.compare import KINDS
    from numasim.run_report import _figure, _table, page_head

    esc = html.escape
    present = {r.metric for r in v.rows() if any(r.kernel) or any(r.sim)}
    kinds = [f"migrations/{k}" for k in KINDS if f"migrations/{k}" in present]
    dists = sorted((m for m in present if m.startswith("migrations/distance")),
                   key=lambda m: int(m.rsplit(" ", 1)[1]))  # fmt: skip
    passes = _pass_panels(v, present)
    header, *rows = table_rows(v, confidence)
    counts = _verdicts(v)
    runs = [[r.boot, r.kernel.release, f"{_num(r.window.guest_s)} s",
             "—" if r.window.vcpu_share is None else f"{r.window.vcpu_share:.0%}",
             r.lost_events] for r in v.runs]  # fmt: skip
    parts = [
        *page_head(
            f"numasim · validation · {v.machine.name}",
            f"A real kernel beside numasim: {v.machine.name}",
        ),
        f'<p class="sub">{esc(describe(v))}; numasim {esc(__version__)}</p>',
        "<h2>Verdict</h2>",
        f"<p>numasim's mean against the kernel's run-to-run range: {counts['in range']} metrics "
        f"in range, {counts['≤ 1.5×']} within 1.5× of it, {counts['outside']} outside.</p>",
        f"<p>{esc(TCG_NOTE)}{esc(_share_text(v))}</p>",
        "<h2>Migrations</h2>",
        _figure(
            _bars(v, [("", kinds, [k.split("/", 1)[1] for k in kinds])], "per task-second"),
            "Migrations of the loops per task-second, by kind: bars are means, whiskers the "
            "range over boots (kernel) or seeds (numasim), dots the boots.",
        ),
        _figure(
            _bars(v, [("", dists, [d.split(" ", 1)[1] for d in dists])], "per task-second"),
            "Migrations per task-second by the SLIT distance they crossed (10 = inside a node).",
        )
        if dists
        else "",
        "<h2>Balancing passes</h2>",
        _figure(
            _bars(v, passes, "per CPU-second"),
            "Balancing passes (sched_balance_rq calls, as schedstat counts them) per second of "
            "guest time of each CPU with the level, by the CPU's idle type and the level.",
        )
        if passes
        else "",
        "<h2>All metrics</h2>",
        _table(header, rows, {1, 2, 3}),
        f"<p>mean ± {confidence:.0%} half-width [min–max].</p>",
        "<h2>Runs</h2>",
        _table(
            ["boot", "kernel", "guest time", "each vCPU's share of a host core", "lost events"],
            runs,
            {0, 2, 3, 4},
        ),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def as_dict(v: Validation, confidence: float = 0.95) -> dict[str, Any]:
    """The validation as JSON-ready data: the setting and, per metric, both sides' values."""
    rows = []
    for r in v.rows():
        row: dict[str, Any] = {"metric": r.metric, "verdict": r.verdict()}
        for side, values in (("kernel", r.kernel), ("numasim", r.sim)):
            mean, half, lo, hi = r.stats(values, confidence)
            row[side] = {"values": values, "mean": _finite(mean), "half_width": _finite(half),
                         "min": _finite(lo), "max": _finite(hi)}  # fmt: skip
        rows.append(row)
    return {"setting": describe(v), "policy": v.policy, "confidence": confidence,
            "levels": v.levels, "metrics": rows}  # fmt: skip


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x
