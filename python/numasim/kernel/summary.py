"""A kernel run in a few numbers, normalised by guest time (docs/kernel-runs.md).

    python -m numasim.kernel.summary DIR-or-FILE ...

prints, for each boot: migrations by kind and by distance per task-second, balancing passes
per level per CPU-second, the share of tasks ever moved and the median gap between a task's
moves, and (in records that hold them) the timer ticks the CPUs handled per guest second and the
balancing passes per tick; and, for several boots, each rate's mean and range over them, the
ticks' on a line of their own. ``summarize`` gives the same as a dict (``kernel-run`` stores it in
``runs.json``).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from numasim.kernel.compare import NOT_MOVES, gaps_ms, kernel_migrations, median, task_moves
from numasim.kernel.parse import IDLE_TYPES, KINDS
from numasim.kernel.schema import KernelRun, load_run, load_runs

#: /proc/stat's unit (USER_HZ, 100 on x86).
USER_HZ = 100
#: /proc/stat fields that a handled tick charges to a task (the idle field is measured instead).
CHARGED = ("user", "nice", "system", "irq", "softirq", "steal")


def busy_cpus(run: KernelRun) -> set[int]:
    """The CPUs a workload loop ran on for more than half of the window (from the trace)."""
    window_ns = run.window.end_ns - run.window.start_ns
    return {c.cpu for c in run.per_cpu or [] if c.loop_ns > window_ns / 2}


def ticks(run: KernelRun) -> dict[str, Any] | None:
    """The timer ticks the guest's CPUs handled per guest second, for busy CPUs
    (``busy_cpus``) and idle ones (the others), with the timer interrupts and the ticks that
    charged CPU time (/proc/stat) beside them, and the balancing passes per handled tick at
    each level: the busy CPUs' busy passes, the idle CPUs' idle passes (most of which the nohz
    idle balancer makes for them on another CPU's tick), each also per jiffy. None for a record
    without them. Where the kernel could not count ticks (no hrtimer histogram) the timer
    interrupts stand for them (``counted`` false)."""
    if run.per_cpu is None or run.counters is None:
        return None
    k = run.counters
    busy = busy_cpus(run)
    groups = {"busy": [c for c in run.per_cpu if c.cpu in busy],
              "idle": [c for c in run.per_cpu if c.cpu not in busy]}  # fmt: skip
    counted = all(c.ticks is not None for c in run.per_cpu)
    handled = {c.cpu: c.ticks if counted else c.timer_interrupts for c in run.per_cpu}
    window_ns = run.window.end_ns - run.window.start_ns

    def mean(values: list[float], digits: int = 2) -> float | None:
        return round(sum(values) / len(values), digits) if values else None

    def per_s(value) -> dict[str, float | None]:
        return {g: mean([value(c) / k.guest_s for c in cs]) for g, cs in groups.items()}

    ticks_s = per_s(lambda c: handled[c.cpu])
    passes = []
    every_level: dict[str, float | None] = {}
    for g, cs in groups.items():
        cpus = {c.cpu for c in cs}
        n = sum(getattr(p.lb_count, g) for p in run.passes if p.cpu in cpus)
        delivered = sum(handled[c] for c in cpus)
        every_level[g] = round(n / delivered, 4) if delivered else None
    for level in sorted({p.level for p in run.passes}):
        row: dict[str, Any] = {"level": level, "name": None}
        for g, cs in groups.items():
            mine = [p for p in run.passes if p.level == level and p.cpu in {c.cpu for c in cs}]
            row["name"] = row["name"] or next((p.name for p in mine), None)
            n = sum(getattr(p.lb_count, g) for p in mine)
            delivered = sum(handled[p.cpu] for p in mine)
            row[g] = round(n / delivered, 4) if delivered else None
            row[f"{g}_per_jiffy"] = round(n / (len(mine) * k.jiffies), 4) if mine else None
        passes.append(row)
    return {
        "counted": counted,
        "hz": k.hz,
        "counters_s": round(k.guest_s, 3),
        "jiffies_per_s": round(k.jiffies / k.guest_s, 2),
        "cpus": {g: len(cs) for g, cs in groups.items()},
        "per_cpu_s": ticks_s,
        "of_hz": {g: round(v / k.hz, 4) if v is not None else None for g, v in ticks_s.items()},
        "timer_interrupts_per_cpu_s": per_s(lambda c: c.timer_interrupts),
        "charged_per_cpu_s": per_s(
            lambda c: sum(getattr(c.stat, f) for f in CHARGED) * k.hz / USER_HZ
        ),
        "hrtimer_hangs": {g: sum(c.hrtimer_hangs for c in cs) for g, cs in groups.items()},
        "idle_share": {g: mean([c.idle_ns / window_ns for c in cs], 3) for g, cs in groups.items()},
        "passes_per_tick": passes,
        "passes_per_tick_all_levels": every_level,
    }


def summarize(run: KernelRun) -> dict[str, Any]:
    """The run's rates. A task-second is one second of guest time of one workload task alive
    in the window; a CPU-second one second of guest time of one CPU."""
    guest_s = run.window.guest_s
    task_s = sum(t.alive_ns for t in run.tasks) / 1e9
    cpu_s = run.qemu.vcpus * guest_s
    migrations = kernel_migrations(run)
    moves = [m for m in migrations if m.kind not in NOT_MOVES]
    by_kind = Counter(m.kind for m in migrations)
    window_ns = run.window.end_ns - run.window.start_ns
    by_distance = Counter(m.distance for m in run.migrations
                          if m.kind not in NOT_MOVES and 0 <= m.t_ns <= window_ns)  # fmt: skip
    per_task = task_moves(migrations)
    gaps = gaps_ms(per_task)
    levels: dict[int, dict[str, Any]] = {}
    for p in run.passes:
        lv = levels.setdefault(
            p.level,
            {
                "name": p.name,
                "cpus": 0,
                "passes": Counter(),
                "balanced": 0,
                "failed": 0,
                "gained": 0,
                "alb_pushed": 0,
            },
        )
        lv["cpus"] += 1
        for t in IDLE_TYPES:
            lv["passes"][t] += getattr(p.lb_count, t)
            lv["balanced"] += getattr(p.lb_balanced, t)
            lv["failed"] += getattr(p.lb_failed, t)
            lv["gained"] += getattr(p.lb_gained, t)
        lv["alb_pushed"] += p.alb_pushed

    def rate(n: float, per: float) -> float:
        return round(n / per, 4) if per > 0 else 0.0

    return {
        "boot": run.boot,
        "guest_s": round(guest_s, 3),
        "host_s": run.window.host_s,
        "vcpu_share": run.window.vcpu_share,
        "task_s": round(task_s, 3),
        "migrations": len(moves),
        "fork_placements_off_parent": by_kind["fork"],
        "per_task_s": {
            "all": rate(len(moves), task_s),
            **{k: rate(by_kind[k], task_s) for k in KINDS if by_kind[k]},
        },
        "by_kind": {k: by_kind[k] for k in KINDS if by_kind[k]},
        "by_distance": {str(d): n for d, n in sorted(by_distance.items())},
        "by_distance_per_task_s": {str(d): rate(n, task_s) for d, n in sorted(by_distance.items())},
        "passes_per_cpu_s": [
            {
                "level": level,
                "name": lv["name"],
                "all": rate(sum(lv["passes"].values()), lv["cpus"] * guest_s),
                **{t: rate(lv["passes"][t], lv["cpus"] * guest_s) for t in IDLE_TYPES},
                "gained": lv["gained"],
                "failed": lv["failed"],
                "alb_pushed": lv["alb_pushed"],
            }
            for level, lv in sorted(levels.items())
        ],
        "cpu_s": round(cpu_s, 3),
        "tasks_moved_share": rate(sum(1 for t in run.tasks if per_task.get(t.pid)), len(run.tasks)),
        "median_gap_ms": round(median(gaps), 3) if gaps else None,
        "other_migrations": run.other_migrations,
        "lost_events": run.lost_events,
        "unknown_stacks": len(run.unknown_stacks),
        **({"ticks": t} if (t := ticks(run)) is not None else {}),
    }


def text(run: KernelRun) -> str:
    """``summarize`` as a few lines."""
    s = summarize(run)
    w = run.workload
    head = (
        f"{run.machine.name} · {run.kernel.release} · {w.tasks} tasks, start={w.start}, "
        f"mem={w.mem_mb} MB, numa_balancing={'on' if w.numa_balancing else 'off'} · "
        f"boot {run.boot}"
    )
    share = f", each vCPU had {s['vcpu_share']:.0%} of a host core" if s["vcpu_share"] else ""
    lines = [
        head,
        f"  window {s['guest_s']:.2f} s guest ({s['host_s']} s host{share}), "
        f"{s['task_s']:.1f} task-s; lost events {s['lost_events']}",
        f"  migrations {s['migrations']} ({s['per_task_s']['all']:.3f} per task-s); "
        f"tasks ever moved {s['tasks_moved_share']:.0%}; median gap between a task's moves "
        + (f"{s['median_gap_ms']:.1f} ms" if s["median_gap_ms"] is not None else "—"),
        "  by kind: "
        + (
            ", ".join(f"{k} {n} ({s['per_task_s'][k]:.3f}/task-s)" for k, n in s["by_kind"].items())
            or "none"
        ),
        "  by distance: "
        + (
            ", ".join(
                f"{d}: {n} ({s['by_distance_per_task_s'][d]:.3f}/task-s)"
                for d, n in s["by_distance"].items()
            )
            or "none"
        ),
        "  balancing passes per CPU-s: "
        + "; ".join(
            f"L{p['level']} {p['name']} {p['all']:.2f} (idle {p['idle']:.2f}, busy {p['busy']:.2f},"
            f" newly idle {p['newly_idle']:.2f}; gained {p['gained']})"
            for p in s["passes_per_cpu_s"]
        ),
        f"  other tasks' migrations {s['other_migrations']}; unknown stacks {s['unknown_stacks']}",
    ]
    if "ticks" in s:
        lines.append(ticks_text(s["ticks"]))
    return "\n".join(lines)


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else f"{v:{fmt}}"


def ticks_text(t: dict[str, Any]) -> str:
    """A summary's ``ticks`` as two lines."""
    groups = "; ".join(
        f"{g} CPUs ({t['cpus'][g]}) {_num(t['per_cpu_s'][g], '.1f')}"
        f" ({_num(t['of_hz'][g], '.2f')} of HZ; timer interrupts "
        f"{_num(t['timer_interrupts_per_cpu_s'][g], '.1f')}, hangs {t['hrtimer_hangs'][g]})"
        for g in ("busy", "idle")
    )
    per_tick = "; ".join(
        f"L{p['level']} {p['name']} busy {_num(p['busy'], '.3f')}, idle {_num(p['idle'], '.3f')}"
        for p in t["passes_per_tick"]
    )
    return (
        f"  {'ticks handled' if t['counted'] else 'timer interrupts (ticks not counted)'} "
        f"per CPU-s (HZ {t['hz']}, jiffies {t['jiffies_per_s']:.1f}/s): "
        f"{groups}\n  passes per handled tick (busy CPUs' busy ones, idle CPUs' idle ones): "
        f"{per_tick}"
    )


def spread_text(runs: list[KernelRun]) -> str:
    """One line over several boots of one run: each rate's mean and its range (min–max)."""
    rows = [summarize(r) for r in runs]

    def stat(values: list[float], fmt: str = ".3f") -> str:
        mean = sum(values) / len(values)
        return f"{mean:{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"

    kinds = sorted({k for r in rows for k in r["by_kind"]}, key=KINDS.index)
    levels = [p["level"] for p in rows[0]["passes_per_cpu_s"]]
    parts = [
        f"  over {len(rows)} boots: migrations/task-s "
        + stat([r["per_task_s"]["all"] for r in rows]),
        "tasks moved " + stat([r["tasks_moved_share"] for r in rows], ".2f"),
        *(f"{k} {stat([r['per_task_s'].get(k, 0.0) for r in rows])}" for k in kinds),
        *(
            f"L{lv} passes/CPU-s "
            + stat(
                [next(p["all"] for p in r["passes_per_cpu_s"] if p["level"] == lv) for r in rows],
                ".1f",
            )
            for lv in levels
        ),
    ]
    return "; ".join(parts)


def _spread(values: list[float | None], digits: int) -> dict[str, float] | None:
    """The mean, least and greatest of ``values`` (None where none is known)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {"mean": round(sum(known) / len(known), digits), "min": min(known), "max": max(known)}


def ticks_spread(runs: list[KernelRun]) -> dict[str, Any] | None:
    """The ticks over several boots of one run, each figure as its mean and range over the boots
    (``_spread``): each vCPU's share of a host core, jiffies per guest second, the ticks handled
    and the timer interrupts per CPU-second of busy and of idle CPUs, the hrtimer hangs (per
    boot, all CPUs of the group), and the busy CPUs' busy passes per tick they handled, at each
    level and at all levels together. None unless every boot's record holds ticks."""
    rows = [summarize(r) for r in runs]
    ticked = [r["ticks"] for r in rows if "ticks" in r]
    if not ticked or len(ticked) != len(rows):
        return None
    groups = ("busy", "idle")
    levels = [(p["level"], p["name"]) for p in ticked[0]["passes_per_tick"]]

    def level_of(t: dict[str, Any], level: int) -> float | None:
        return next((p["busy"] for p in t["passes_per_tick"] if p["level"] == level), None)

    return {
        "boots": len(rows),
        "counted": all(t["counted"] for t in ticked),
        "hz": ticked[0]["hz"],
        "cpus": {g: _spread([t["cpus"][g] for t in ticked], 1) for g in groups},
        "vcpu_share": _spread([r["vcpu_share"] for r in rows], 4),
        "jiffies_per_s": _spread([t["jiffies_per_s"] for t in ticked], 2),
        "per_cpu_s": {g: _spread([t["per_cpu_s"][g] for t in ticked], 2) for g in groups},
        "timer_interrupts_per_cpu_s": {
            g: _spread([t["timer_interrupts_per_cpu_s"][g] for t in ticked], 2) for g in groups
        },
        "hrtimer_hangs": {g: _spread([t["hrtimer_hangs"][g] for t in ticked], 1) for g in groups},
        "busy_passes_per_tick": [
            {"level": lv, "name": name, **(_spread([level_of(t, lv) for t in ticked], 4) or {})}
            for lv, name in levels
        ],
        "busy_passes_per_tick_all_levels": _spread(
            [t["passes_per_tick_all_levels"]["busy"] for t in ticked], 4
        ),
    }


def ticks_spread_text(runs: list[KernelRun]) -> str | None:
    """``ticks_spread`` as one line (None without ticks)."""
    t = ticks_spread(runs)
    if t is None:
        return None

    def stat(s: dict[str, float] | None, fmt: str, range_fmt: str | None = None) -> str:
        r = range_fmt or fmt
        return "—" if not s else f"{s['mean']:{fmt}} ({s['min']:{r}}–{s['max']:{r}})"

    def count(s: dict[str, float]) -> str:
        return f"{s['min']:.0f}" if s["min"] == s["max"] else stat(s, ".1f", ".0f")

    what = "ticks handled" if t["counted"] else "timer interrupts (ticks not counted)"
    levels = ", ".join(
        f"L{p['level']} {p['name']} {stat(p, '.3f')}" for p in t["busy_passes_per_tick"]
    )
    parts = [
        f"  ticks over {t['boots']} boots: vCPU share {stat(t['vcpu_share'], '.3f')}",
        f"jiffies/s {stat(t['jiffies_per_s'], '.1f')} (HZ {t['hz']})",
        *(
            f"{what}/CPU-s of {g} CPUs ({count(t['cpus'][g])}) "
            f"{stat(t['per_cpu_s'][g], '.1f')}, timer interrupts/CPU-s "
            f"{stat(t['timer_interrupts_per_cpu_s'][g], '.1f')}, hrtimer hangs "
            f"{stat(t['hrtimer_hangs'][g], '.1f', '.0f')}"
            for g in ("busy", "idle")
        ),
        f"busy CPUs' busy passes per handled tick: {levels}, "
        f"all levels {stat(t['busy_passes_per_tick_all_levels'], '.3f')}",
    ]
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    from numasim._core import InputError

    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        print("usage: python -m numasim.kernel.summary DIR-or-FILE ...", file=sys.stderr)
        return 2
    try:
        for p in paths:
            runs = load_runs(p) if Path(p).is_dir() else [load_run(p)]
            for run in runs:
                print(text(run))
            if len(runs) > 1:
                print(spread_text(runs))
                if (line := ticks_spread_text(runs)) is not None:
                    print(line)
    except InputError as e:
        print(f"numasim: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
