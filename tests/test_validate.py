"""numasim validate: the twin workload, the metrics both sides are measured by (by hand on small
cases, and against the kernel-run summary on real records), the command and its page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from numasim._core import InputError
from numasim.kernel import compare, load_run, load_runs, summary
from numasim.kernel.compare import Migration, observe, observe_kernel, observe_sim
from numasim.kernel.twin import Twin
from numasim.kernel.validate import Row, check_same, twin_of
from numasim.machine import Machine
from numasim.sim import simulate
from test_kernel import _cached_kernel, needs_qemu
from test_run_report import _body_status, _dump_dom

DATA = Path(__file__).parent / "data" / "kernel"
RUNS = DATA / "runs"
RING = DATA / "ring-4x2.toml"
RELEASED = RUNS / "ring-4x2-k6.12-t8-released-nboff"
MS = 1_000_000


# --- the twin workload ------------------------------------------------------------------------


def _processes(twin: Twin, machine: Machine, seed: int = 0) -> list[dict]:
    return json.loads(twin.workload(machine, seed)._core.to_json())["processes"]


def test_a_released_twin_starts_every_loop_on_cpu_0_and_widens_it_in_the_release_span():
    m = Machine.load(str(RING))
    twin = Twin(tasks=4, start="released", window_ns=2_000 * MS, release_ns=100 * MS,
                release_span_ns=20 * MS, start_span_ns=10 * MS)  # fmt: skip
    procs = _processes(twin, m)
    assert [p["pid"] for p in procs] == [0, 1, 2, 3]
    assert procs[0]["arrival_ns"] == 0 and all(0 <= p["arrival_ns"] <= 10 * MS for p in procs)
    assert all(p["spawn_cpu"] == 0 and p["kind"] == "cpu" and p["mem"] == 0 for p in procs)
    # More work than the window holds: nothing ends inside it.
    assert all(p["demand_ns"] == 2_001 * MS for p in procs)
    for p in procs:
        (pinned, widened) = p["affinity"]
        assert pinned == {"at_ns": 0, "cpus": "0"} and widened["cpus"] == "0-7"
        assert 100 * MS <= widened["at_ns"] <= 120 * MS
    # Another seed, other start and release times; the same seed, the same workload.
    assert _processes(twin, m, 1) != procs and _processes(twin, m, 0) == procs


def test_pinned_and_fork_twins():
    m = Machine.load(str(RING))
    pinned = _processes(Twin(tasks=10, start="pinned", window_ns=MS), m)
    assert [p["spawn_cpu"] for p in pinned] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
    assert [p["affinity"] for p in pinned][:2] == [[{"at_ns": 0, "cpus": "0"}],
                                                   [{"at_ns": 0, "cpus": "1"}]]  # fmt: skip
    fork = Twin(tasks=3, start="fork", window_ns=MS, start_span_ns=5 * MS)
    parent, *loops = _processes(fork, m)
    assert list(fork.loops) == [1, 2, 3] and [p["pid"] for p in loops] == [1, 2, 3]
    # The parent shell runs on CPU 0 until just after its last fork, then leaves the CPU.
    assert parent["affinity"] == [{"at_ns": 0, "cpus": "0"}] and parent["arrival_ns"] == 0
    assert parent["demand_ns"] == 5 * MS + 1_000
    assert all("affinity" not in p and p["spawn_cpu"] == 0 for p in loops)
    assert loops[0]["arrival_ns"] == 1_000 and loops[-1]["arrival_ns"] <= 5 * MS + 1_000


def test_memory_loops_get_their_buffer_as_footprint_and_numasims_default_intensity():
    m = Machine.load(str(RING))
    w = json.loads(Twin(tasks=2, start="released", window_ns=MS, mem_mb=16).workload(m, 0)
                   ._core.to_json())  # fmt: skip
    assert [a["footprint_mb"] for a in w["apps"]] == [16.0, 16.0]
    assert [p["mem"] for p in w["processes"]] == [0.5, 0.5]
    # A fork run's parent shell is no memory loop.
    w = json.loads(Twin(tasks=2, start="fork", window_ns=MS, mem_mb=16).workload(m, 0)
                   ._core.to_json())  # fmt: skip
    assert [a["footprint_mb"] for a in w["apps"]] == [1.0, 16.0, 16.0]
    assert [p["mem"] for p in w["processes"]] == [0.0, 0.5, 0.5]


@pytest.mark.parametrize(
    ("base", "numa", "policy"),
    [
        ("linux", False, "linux:numa_balancing=off"),
        ("linux", True, "linux:numa_balancing=on"),
        ("linux:nr-migrate=8", False, "linux:nr-migrate=8,numa_balancing=off"),
        ("linux:numa_balancing=on", False, "linux:numa_balancing=on"),
        ("linux26", True, "linux26"),
    ],
)
def test_the_twin_runs_linux_with_the_boots_numa_balancing_unless_told(base, numa, policy):
    assert Twin(tasks=1, start="fork", window_ns=MS, numa_balancing=numa).policy(base) == policy


def test_the_twin_of_real_boots_takes_their_median_spans():
    runs = load_runs(RELEASED)
    twin = twin_of(runs)
    setting = (twin.tasks, twin.start, twin.window_ns, twin.numa_balancing)
    assert setting == (8, "released", 10**10, False)
    firsts = sorted(r.window.release_ns for r in runs)
    assert twin.release_ns == firsts[1]
    spans = sorted(r.window.released_ns - r.window.release_ns for r in runs)
    assert twin.release_span_ns == spans[1]


# --- the metrics ------------------------------------------------------------------------------


def _observe(migrations: list[Migration], **kw):
    defaults = dict(tasks=[1, 2, 3, 4], task_seconds=2.0, cpu_seconds={0: 8.0, 1: 8.0},
                    distance=lambda a, b: 10 if a // 2 == b // 2 else 20, levels={})  # fmt: skip
    return observe(migrations, kw.pop("passes", {}), kw.pop("active", {}), **(defaults | kw))


def test_moves_by_kind_distance_and_their_gaps_by_hand():
    ms = [
        Migration(0, 1, 0, 2, "fork"),  # a placement: a kind, not a move
        Migration(10 * MS, 1, 2, 3, "periodic"),
        Migration(25 * MS, 1, 3, 0, "active"),  # 15 ms after the last: a quick bounce
        Migration(30 * MS, 2, 0, 1, "nohz_idle"),
        Migration(130 * MS, 2, 1, 4, "newidle"),  # 100 ms after the last
        Migration(140 * MS, 3, 4, 5, "affinity"),  # forced by a new affinity: not a move
    ]
    v = _observe(ms).values
    assert v["migrations/fork"] == v["migrations/affinity"] == 0.5
    assert v["migrations/periodic"] == v["migrations/nohz_idle"] == 0.5
    assert v["migrations/periodic + nohz_idle"] == 1.0
    assert v["migrations/all"] == 2.0  # four moves in two task-seconds
    assert v["migrations/distance 10"] == 1.0 and v["migrations/distance 20"] == 1.0
    assert v["tasks moved"] == 0.5  # tasks 1 and 2 of four
    assert v["gap median ms"] == pytest.approx(57.5) and v["gaps < 20 ms"] == 0.5


def test_a_run_without_two_moves_of_one_task_has_no_gap_statistics():
    v = _observe([Migration(5, 1, 0, 1, "periodic")]).values
    assert "gap median ms" not in v and "gaps < 20 ms" not in v
    row = Row("gap median ms", [3.0, 5.0], [])
    assert row.verdict() == "" and all(math.isnan(x) for x in row.stats(row.sim, 0.95))


def test_passes_and_active_balances_are_per_cpu_second():
    v = _observe([], passes={(0, "idle"): 16.0, (1, "busy"): 4.0}, active={1: 2.0}).values
    assert v["passes/0/idle"] == 2.0 and v["passes/1/busy"] == 0.5 and v["active/1"] == 0.25


def test_numasims_kinds_become_the_kernels_and_idle_types_come_from_the_runqueues():
    machine = Machine.load(str(RING))
    raw = {"trace_events": {
        # (t, pid, from, to, kind)
        "migrations": [(5, 0, 0, 2, "placement"), (10, 0, 2, 3, "pull"), (20, 1, 4, 5, "idle"),
                       (30, 0, 3, 6, "active"), (40, 1, 5, 7, "active"), (50, 1, 7, 6, "exchange"),
                       (50, 0, 6, 7, "exchange"), (60, 0, 7, 1, "idle"), (65, 2, 0, 1, "pull"),
                       (70, 1, 6, 4, "idle"), (99, 0, 1, 0, "pull")],
        # (t, cpu, level, kind, moved): CPU 3's tick moved a task at 30 (NUMA balancing's);
        # CPU 7 kicked the stopper that moved one at 40 (the balancer's); a kicked CPU balanced
        # CPU 1 on its behalf at 60; CPU 4 balanced on its own timer at 70.
        "balances": [(10, 3, 0, "periodic", 1), (20, 5, 1, "newidle", 1), (30, 3, 0, "other", 1),
                     (40, 7, 2, "active", 1), (45, 2, 0, "periodic", 0), (45, 4, 0, "periodic", 0),
                     (60, 1, 2, "kicked", 1), (70, 4, 1, "periodic", 1), (99, 0, 2, "periodic", 1)],
        # (t, cpu, nr_running): CPU 3 runs from 3 on; CPU 2 from 5 to 10; CPU 4 from 0 to 44;
        # CPU 1 from 61 on.
        "runqueue": [(0, 4, 1), (3, 3, 1), (5, 2, 1), (10, 2, 0), (44, 4, 0), (61, 1, 1)],
    }}  # fmt: skip
    ms = compare.sim_migrations(raw, window_ns=90, tasks=[0, 1])
    assert [(m.t_ns, m.pid, m.kind) for m in ms] == [
        (5, 0, "fork"), (10, 0, "periodic"), (20, 1, "newidle"), (30, 0, "numa_move"),
        (40, 1, "active"), (50, 1, "numa_swap"), (50, 0, "numa_swap"), (60, 0, "nohz_idle"),
        (70, 1, "periodic")]  # fmt: skip
    v = observe_sim(raw, machine, 90, [0, 1], [90, 90], {0: 8, 1: 8, 2: 8}).values
    # Pass counts inside the window, each CPU's idle type when it balanced.
    cpu_s = 8 * 90 / 1e9
    assert v["passes/0/busy"] == pytest.approx(1 / cpu_s)  # CPU 3 at 10
    assert v["passes/0/idle"] == pytest.approx(2 / cpu_s)  # CPU 2 at 45 (idle since 10), 4 at 45
    assert v["passes/1/newly_idle"] == pytest.approx(1 / cpu_s)
    assert v["passes/1/idle"] == pytest.approx(1 / cpu_s)  # CPU 4 at 70
    assert v["passes/2/idle"] == pytest.approx(1 / cpu_s)  # CPU 1 at 60, balanced for it
    assert v["active/2"] == pytest.approx(1 / cpu_s)


def test_kernel_metrics_agree_with_the_kernel_run_summary_on_every_kept_run():
    for directory in sorted(RUNS.glob("*/")):
        for run in load_runs(directory):
            v, s = observe_kernel(run).values, summary.summarize(run)
            assert v["migrations/all"] == pytest.approx(s["per_task_s"]["all"], abs=1e-4)
            assert v["tasks moved"] == pytest.approx(s["tasks_moved_share"], abs=1e-4)
            if s["median_gap_ms"] is not None:
                assert v["gap median ms"] == pytest.approx(s["median_gap_ms"], abs=1e-3)
            for p in s["passes_per_cpu_s"]:
                types = ("idle", "busy", "newly_idle")
                total = sum(v.get(f"passes/{p['level']}/{t}", 0) for t in types)
                assert total == pytest.approx(p["all"], abs=1e-3)


def test_a_traced_numasim_run_counts_every_periodic_pass_as_idle_or_busy():
    m = Machine.load(str(RING))
    twin = Twin(tasks=4, start="released", window_ns=500 * MS, release_ns=100 * MS)
    result = simulate(m, twin.workload(m, 0), "linux26", trace=True)
    cpus = {0: 8, 1: 8, 2: 8}
    v = observe_sim(result.raw, m, twin.window_ns, range(4), [twin.window_ns] * 4, cpus).values
    te = result.raw["trace_events"]
    periodic = sum(1 for t, *_, kind, _ in te["balances"] if kind == "periodic" and t <= 500 * MS)
    counted = sum(x for k, x in v.items() if k.startswith("passes/") and not
                  k.endswith("newly_idle")) * m.cpus * 0.5  # fmt: skip
    assert counted == pytest.approx(periodic)
    # Before the release everything runs on CPU 0; afterwards linux26 spreads the loops.
    assert v["tasks moved"] == 0.75 and v["migrations/all"] > 0


# --- the command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """``numasim validate`` of a kept ring-4x2 run, as text, JSON and a page."""
    from numasim.cli import main

    d = tmp_path_factory.mktemp("validate")
    page = d / "validate.html"
    args = ["validate", str(RELEASED), "--seeds", "3", "--jobs", "1"]
    assert main([*args, "--report", str(page)]) == 0
    return page, args


def test_validate_prints_both_sides_of_every_metric(validated, run):
    _, args = validated
    r = run(*args)
    assert r.code == 0, r.err
    assert r.out.startswith("ring-4x2 (4 nodes, 8 CPUs) · 8 busy loops on CPU 0, released at")
    assert r.out.splitlines()[0].endswith(
        "kernel 6.12.117+deb12-amd64 · numasim linux:numa_balancing=off"
    )
    assert "(QEMU's TCG: each of the 8 vCPUs had " in r.out
    assert "kernel (3 boots)" in r.out and "numasim (3 seeds)" in r.out
    for metric in ["migrations/nohz_idle", "migrations/distance 20", "passes L0 MC idle",
                   "passes L2 NUMA busy", "tasks moved"]:  # fmt: skip
        assert any(line.startswith(metric) for line in r.out.splitlines()), metric


def test_validate_json_holds_each_boots_values(validated, run):
    _, args = validated
    r = run(*args, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {row["metric"]: row for row in data["metrics"]}
    expected = [observe_kernel(b).values["migrations/all"] for b in load_runs(RELEASED)]
    assert rows["migrations/all"]["kernel"]["values"] == pytest.approx(expected)
    assert len(rows["migrations/all"]["numasim"]["values"]) == 3
    assert data["levels"] == {"0": "MC", "1": "NUMA", "2": "NUMA"}
    # The same seeds, the same numbers.
    assert json.loads(run(*args, "--json").out) == data


def test_the_validation_page_loads_in_headless_chromium(validated, tmp_path):
    page, _ = validated
    text = page.read_text()
    assert "<h1>A real kernel beside numasim: ring-4x2</h1>" in text
    assert "each of the 8 vCPUs had" in text and text.count("<figure><svg") == 3
    status = _body_status(_dump_dom(page, tmp_path))
    assert status == {"loaded": "yes", "figures": "3", "figures-drawn": "3", "errors": "0",
                      "error-list": ""}  # fmt: skip


def test_boots_of_different_workloads_are_refused(tmp_path, run):
    fork = next((RUNS / "ring-4x2-k6.12-t8-fork-nboff").glob("boot-0.json.gz"))
    released = next(RELEASED.glob("boot-0.json.gz"))
    with pytest.raises(InputError, match=r"^b: another workload than a; validate the boots"):
        check_same([("a", load_run(released)), ("b", load_run(fork))])
    r = run("validate", released, fork, "--seeds", "2")
    assert (
        r.code == 2
        and r.err
        == f"numasim: error: {fork}: another workload than {released}; "
        "validate the boots of one kernel-run at a time\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-dir"], "no-such-dir: no such kernel run"),
        ([str(RELEASED), "--policy", "nope"], "nope"),
        ([str(RELEASED), "--seeds", "1"], "--seeds"),
        ([str(RING)], str(RING)),
    ],
)
def test_validate_refuses_bad_input_in_one_line(run, args, message):
    r = run("validate", *args)
    assert r.code == 2 and r.err.count("\n") == 1 and message in r.err, r.err


# --- a real kernel in the loop (where QEMU and a cached kernel are: make test installs them) ---

#: The metrics the small case holds numasim to, by validate's verdict (numasim's mean against the
#: kernel's range over its boots, widened by CLOSE: the allowance for what the emulation
#: distorts). The kernel's own spread here is wide (from 7 to 16 moves in 10 s) while numasim's
#: seeds barely differ, so the kernel's range is the reference, not numasim's.
HELD = ("migrations/all", "tasks moved", "passes/0/busy", "passes/0/idle", "passes/1/busy",
        "passes/1/idle", "passes/2/busy", "passes/2/idle")  # fmt: skip


def outside(v, metrics=HELD) -> list[str]:
    """The metrics of ``metrics`` that validate judges ``outside``, each with both sides'
    values."""
    rows = {r.metric: r for r in v.rows()}
    return [f"{m}: kernel {rows[m].kernel}, numasim {rows[m].sim}" for m in metrics
            if rows[m].verdict() == "outside"]  # fmt: skip


@pytest.mark.parametrize("case", ["ring-4x2-k6.12-t8-released-nboff",
                                  "ring-4x2-k6.12-t8-released-nbon"])  # fmt: skip
def test_numasim_agrees_with_the_kept_runs_of_the_small_case(case):
    from numasim.kernel.validate import validate

    assert outside(validate(load_runs(RUNS / case), seeds=8, jobs=1)) == []


@needs_qemu
def test_a_real_kernel_in_the_loop(run, tmp_path):
    """Two boots of the small case, parsed, then held to numasim: a regression test of the
    harness (what every boot of this case must show) and of the model (numasim's mean against
    the kernel's range over these boots and the three kept ones, as ``validate`` judges it)."""
    from numasim.kernel.validate import validate

    r = run("kernel-run", "--machine", RING, "--kernel", _cached_kernel(), "--tasks", "8",
            "--start", "released", "--release-ms", "1000", "--numa-balancing", "off",
            "--window-s", "10", "--boots", "2", "--out", tmp_path)  # fmt: skip
    assert r.code == 0, r.err
    live = load_runs(tmp_path)
    assert len(live) == 2 and all(b.lost_events == 0 for b in live)
    assert all(t.first_cpu == 0 for b in live for t in b.tasks)
    v = validate([*live, *load_runs(RELEASED)], seeds=8, jobs=1)
    rows = {r.metric: r for r in v.rows()}
    # Every boot: 8 loops released from CPU 0 onto 8 CPUs move at least 7 of them, and every
    # level balanced, busy and idle.
    for metric in HELD[2:]:
        assert all(k > 0 for k in rows[metric].kernel[:2]), metric
    assert all(k >= 7 / 8 for k in rows["tasks moved"].kernel[:2])
    assert outside(v) == []
