"""The workload shape (``exec``) and the open choices outside the profiles (choices.py): each
changes a small run as its sentence says, ``--ablate`` flips every one that applies, and bad
values are refused with exit code 2 and one line naming the item."""

from __future__ import annotations

import numasim
import pytest
from numasim import choices, reproduction
from numasim import experiment as ex


def _alone(assume: str, kind: str = "io"):
    """One process of exec 200 ms alone on mehta-m3 (its pages stay local: first-run memory,
    wake-ups where it slept), memory intensity 0 so that its rate is 1 wherever it runs."""
    m = numasim.Machine.preset("mehta-m3")
    spec = f"n=1,kind={kind},exec=200,mem=0,arrival=same"
    return numasim.simulate(m, spec, domains="multilevel", seed=5, assume=assume).processes.iloc[0]


def test_exec_total_makes_an_io_process_alone_finish_in_its_execution_time():
    cpu, total = _alone("exec=cpu"), _alone("exec=total")
    # cpu: 200 ms of CPU, the waits (20 ms mean after bursts of 10 ms mean) on top.
    assert cpu.cpu_ms == pytest.approx(200.0, abs=1e-3)  # and a few µs of balancing
    assert cpu.turnaround_ms == pytest.approx(200.0 + cpu.io_wait_ms, abs=0.1)
    assert cpu.turnaround_ms > 400
    # total: bursts and waits together take 200 ms (the balancing of its CPU stalls it a few
    # µs); about a third of that is CPU.
    assert total.turnaround_ms == pytest.approx(200.0, abs=0.1)
    assert total.cpu_ms + total.io_wait_ms == pytest.approx(200.0, abs=1e-3)
    assert 30 < total.cpu_ms < 120
    # A CPU-bound process reads the same under both.
    assert _alone("exec=cpu", "cpu").turnaround_ms == _alone("exec=total", "cpu").turnaround_ms


def _flips(name: str) -> list[str]:
    return [f.label for f in reproduction.plan(ex.load(name)).flips]


def test_ablate_flips_every_open_choice_that_applies():
    # origin-aware-m1: the paper profile's three differences, cost and remote (both profiles
    # read them alike; exec too, but CPU-bound workloads only: nothing for it to change), m
    # (CPU-bound workloads), the random window (W2, W3) and origin-aware's si.
    assert _flips("origin-aware-m1") == [
        "memory=first-run", "slice=wall", "wake=previous", "cost=paper", "remote=scaled",
        "m=0.2", "m=0.8", "random-window=250", "si=all"]  # fmt: skip
    # capability-amc1 runs place=domain: the other two scopes.
    assert _flips("capability-amc1")[-3:] == ["random-window=250", "place=machine",
                                              "place=node"]  # fmt: skip
    # multilevel-altix: IO-bound only (no m), linux26 only (no place, no si).
    assert _flips("multilevel-altix") == ["memory=first-run", "slice=wall", "exec=total",
                                          "cost=paper", "remote=scaled",
                                          "random-window=250"]  # fmt: skip
    # load acts only where a workload has a load level: the home-cluster experiments.
    assert "load=held" in _flips("home-cluster-load")
    assert "load=held" in _flips("home-cluster-threads")


def test_a_choice_sets_its_value_where_it_applies_and_keeps_names():
    exp = ex.load("capability-amc1")
    m = choices.apply(choices.entry("m"), "0.2", exp)
    assert [w.spec for w in m.workloads] == [
        "kind=cpu,exec=200,arrival=random,mem_cpu=0.2",
        "kind=mixed,exec=50-300,arrival=random,mem_cpu=0.2",
    ]
    w = choices.apply(choices.entry("random-window"), "250", exp)
    assert [x.spec for x in w.workloads] == [
        "kind=cpu,exec=200,arrival=uniform:250",
        "kind=mixed,exec=50-300,arrival=uniform:250",
    ]
    p = choices.apply(choices.entry("place"), "node", exp)
    assert [v.policy for v in p.policies] == ["capability-aware:place=node"]
    assert [v.label for v in p.policies] == [v.label for v in exp.policies]
    assert p.baseline == exp.baseline and exp.policies[0].policy == "capability-aware:place=domain"
    # A workload that sets its memory intensity keeps it.
    exp.workloads = [ex.WorkloadDef("x", "kind=cpu,mem_cpu=0.7,arrival=same")]
    assert choices.current(choices.entry("m"), exp) is None
    assert choices.current(choices.entry("random-window"), exp) is None


def test_list_assumptions_lists_the_open_choices_with_their_sources(run):
    r = run("list", "assumptions")
    assert r.code == 0
    for c in choices.registry():
        assert f"\n{c.name}: {c.description}" in r.out
        assert f"  source: {c.source}" in r.out
    assert "\nexec: " in r.out


@pytest.mark.parametrize(("args", "line"), [
    (["--assume", "exec=wall"],
     "--assume: assumption exec: unknown value 'wall'; choose one of cpu, total"),
    (["--policy", "origin-aware:si=running"],
     "--policy: origin-aware option 'si' must be queued or all, not 'running'"),
    (["--policy", "capability-aware:place=world"],
     "--policy: capability-aware option 'place' must be machine, domain or node, not 'world'"),
    (["--workload", "n=5,mem_cpu=1.5"], None),
])  # fmt: skip
def test_bad_values_of_the_new_items_exit_2_with_one_line(run, args, line):
    base = {"--machine": "mehta-m3", "--workload": "n=5"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    r = run("run", *[x for kv in base.items() for x in kv])
    assert (r.code, r.out) == (2, "")
    assert r.err.count("\n") == 1, r.err
    if line is not None:
        assert r.err == f"numasim: error: {line}\n"
    else:
        assert r.err.startswith("numasim: error: --workload: key mem_cpu"), r.err


def test_load_held_creates_koita_processes_more_slowly_by_the_time_they_hold_processors():
    """``load=held`` reads a load level against the processor time a process holds at full
    parallelism (koita, T = 4: 400 ms × 1.9633 = 785.3 ms) instead of its work (400 ms): the
    same draws at a rate 400 / 785.3 as high, so every creation is later by that factor; a
    run of it under ``simulate`` uses the setting's reading, and a workload without a load
    level is the same under both."""
    from numasim import Machine, Workload, simulate

    m = Machine.preset("koita-64")
    spec = "app=koita:4,n=20,load=0.75"
    work = Workload.generate(m, spec, seed=4).to_dataframe()
    held = Workload.generate(m, spec, seed=4, assume="load=held").to_dataframe()
    first = work.groupby("tgid").arrival_ns.min().to_numpy()
    later = held.groupby("tgid").arrival_ns.min().to_numpy()
    ratio = sum(1 / k for n in range(1, 8) for k in range(1, n + 1)) / 7
    assert later == pytest.approx(first * ratio, abs=3)
    assert later[-1] > first[-1]
    r = simulate(m, spec, policy="hs-con", seed=4, assume="paper,load=held")
    assert r.apps.arrival_ms.max() == pytest.approx(later[-1] / 1e6, abs=1e-3)
    plain = "n=10,kind=cpu,exec=50,arrival=poisson:20"
    same = Workload.generate(m, plain, seed=1, assume="load=held").to_dataframe()
    assert same.equals(Workload.generate(m, plain, seed=1).to_dataframe())
