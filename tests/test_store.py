"""The result store never serves a number computed for another question (issue 12 §1, §2).

Every scenario compares what a rerun into a used directory prints with a run into an empty one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from numasim import experiment as ex
from numasim import store
from test_experiments import TINY, stored_runs, tiny

CMP = ["--machine", "hp-superdome-4", "--policies", "linux26@two-level,linux26@flat",
       "--replications", "4", "--jobs", "1"]  # fmt: skip


def _json(run, *args):
    r = run(*args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)["rows"], r.err


def _compare(run, out, workload, *extra):
    return _json(run, "compare", *CMP, "--workload", workload, "--out", out, *extra)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("n=60,kind=cpu,exec=10-100", "n=60,kind=io,exec=10-100"),
        ("n=60,kind=cpu,exec=10-100", "n=60,kind=cpu,exec=1000"),
    ],
)
def test_a_changed_workload_is_computed_not_served_from_the_store(run, tmp_path, first, second):
    used = tmp_path / "used"
    _compare(run, used, first)
    rows, err = _compare(run, used, second)
    fresh, _ = _compare(run, tmp_path / "empty", second)
    assert rows == fresh
    assert err == f"computed 8, reused 0 of 8 runs (store {used / 'results.sqlite'})\n"
    again, err = _compare(run, used, second)
    assert again == fresh
    assert err == f"resumed 8 of 8 runs from {used}\n"


def _edit(path, old, new):
    path.write_text(path.read_text().replace(old, new))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("exec=10-100", "exec=10-200"),  # the workload spec
        ("seed = 7", "seed = 8"),  # the master seed
        ('"linux26@flat"', '"linux26@multilevel"'),  # a variant's domains, same label order
        ('machines = ["hp-superdome-4"]', 'machines = ["hp-superdome-16"]'),
    ],
)
def test_an_edited_experiment_file_is_recomputed(run, tmp_path, old, new):
    path = tiny(tmp_path, reps=3)
    used = tmp_path / "used"
    _json(run, "reproduce", path, "--out", used)
    _edit(path, old, new)
    rows, _ = _json(run, "reproduce", path, "--out", used)
    fresh, _ = _json(run, "reproduce", path, "--out", tmp_path / "empty")
    assert rows == fresh


def test_a_machine_file_is_keyed_by_its_content_not_its_name(run, tmp_path):
    machine = tmp_path / "m.toml"
    machine.write_text('name = "m"\ncpus_per_node = 2\ndistances = [[10, 20], [20, 10]]\n')
    path = tiny(tmp_path, reps=3)
    _edit(path, 'machines = ["hp-superdome-4"]', f'machines = ["{machine}"]')
    used = tmp_path / "used"
    before, _ = _json(run, "reproduce", path, "--out", used)
    machine.write_text(machine.read_text().replace("20", "40"))  # same name, farther nodes
    rows, err = _json(run, "reproduce", path, "--out", used)
    assert "computed 18, reused 0 of 18 runs" in err
    assert rows == _json(run, "reproduce", path, "--out", tmp_path / "empty")[0]
    assert rows != before


def test_a_rebuilt_core_is_recomputed(run, tmp_path, monkeypatch):
    path = tiny(tmp_path, reps=2)
    used = tmp_path / "used"
    _json(run, "reproduce", path, "--out", used)
    monkeypatch.setattr(store, "core_fingerprint", lambda: "another-build")
    _, err = _json(run, "reproduce", path, "--out", used)
    assert err.startswith("computed 12, reused 0 of 12 runs")  # 2 n × 2 replications × 3


def test_adding_a_policy_computes_only_its_runs(run, tmp_path):
    path = tiny(tmp_path, reps=4)
    _edit(path, 'policies = ["linux26@flat", "linux26@node-only"]', 'policies = ["linux26@flat"]')
    used = tmp_path / "used"
    _json(run, "reproduce", path, "--out", used)
    _edit(path, 'policies = ["linux26@flat"]', 'policies = ["linux26@flat", "linux26@node-only"]')
    rows, err = _json(run, "reproduce", path, "--out", used)
    assert err.startswith("computed 8, reused 16 of 24 runs")  # 2 n × 4 replications
    assert rows == _json(run, "reproduce", path, "--out", tmp_path / "empty")[0]
    assert stored_runs(used) == 24


def test_a_directory_in_use_is_refused_and_freed_when_its_holder_dies(run, tmp_path):
    path = tiny(tmp_path, reps=40)
    out = tmp_path / "busy"
    proc = _start(path, out, "--jobs", "1")
    try:
        r = run("reproduce", path, "--out", out)
        assert (r.code, r.out) == (2, "")
        assert r.err == f"numasim: error: {out} is in use by another numasim (pid {proc.pid})\n"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()  # reaps it and closes its pipes
    # The OS released the lock with the killed holder: the same command resumes.
    rows, err = _json(run, "reproduce", path, "--out", out)
    assert "reused" in err and ", reused 0 " not in err
    assert rows == _json(run, "reproduce", path, "--out", tmp_path / "empty")[0]
    assert stored_runs(out) == 2 * 40 * 3, "every run stored once"


def test_fresh_moves_the_old_store_aside(run, tmp_path):
    path = tiny(tmp_path, reps=2)
    out = tmp_path / "o"
    first, _ = _json(run, "reproduce", path, "--out", out)
    rows, err = _json(run, "reproduce", path, "--out", out, "--fresh")
    assert err.startswith("computed 12, reused 0 of 12 runs") and rows == first
    (aside,) = out.glob("previous-*/results.sqlite")
    assert stored_runs(aside.parent) == 12


def test_a_store_of_the_older_format_is_refused_with_one_line(run, tmp_path):
    path = tiny(tmp_path, reps=2)
    out = tmp_path / "old"
    out.mkdir()
    (out / "runs.jsonl").write_text('{"rows": []}\n')
    r = run("reproduce", path, "--out", out)
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        f"numasim: error: {out / 'runs.jsonl'}: results of an older numasim, stored without the "
        "machine, workload, options and core that made them; run with --fresh to move them "
        "aside and start over\n"
    )
    assert run("reproduce", path, "--out", out, "--fresh").code == 0
    assert (next(out.glob("previous-*")) / "runs.jsonl").exists()


def test_a_file_that_is_not_a_store_is_refused(run, tmp_path):
    out = tmp_path / "junk"
    out.mkdir()
    (out / "results.sqlite").write_bytes(b"\x00garbage" * 100)
    r = run("reproduce", tiny(tmp_path, reps=2), "--out", out)
    assert r.code == 2
    assert r.err.startswith(f"numasim: error: {out / 'results.sqlite'}: not a numasim result store")


def test_labels_come_from_the_experiment_that_reads_the_store(tmp_path):
    exp = ex.load(tiny(tmp_path, reps=2))
    out = tmp_path / "o"
    first = ex.execute(exp, out, jobs=1)
    renamed = ex.load(tiny(tmp_path, reps=2, text=TINY.replace('name = "make"', 'name = "mk"')))
    # A renamed workload is a new replication seed (seeds derive from the names): recomputed.
    assert ex.execute(renamed, out, jobs=1).computed == 12
    again = ex.execute(exp, out, jobs=1)
    assert (again.computed, again.reused) == (0, 12)
    assert again.rows == first.rows


def test_ctrl_c_stops_the_sweep_keeps_finished_batches_and_resumes(run, tmp_path):
    path = tiny(tmp_path, reps=200)
    out = tmp_path / "int"
    proc = _start(path, out, "--jobs", "2")
    err, took = _ctrl_c(proc)
    assert proc.returncode == 130
    assert took < 2.0, f"exited {took:.2f} s after Ctrl-C"
    saved = stored_runs(out)
    total = 2 * 200 * 3
    assert 0 < saved < total
    assert err.splitlines()[-1] == (
        f"interrupted: {_grouped(saved)} of {_grouped(total)} runs saved in {out}; "
        "run the same command to resume"
    )
    # The workers were terminated; the pool's fork server and resource tracker end when they
    # see their parent gone.
    deadline = time.monotonic() + 5
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _session(proc.pid) == [], "no process of the sweep outlives it"
    rows, resumed = _json(run, "reproduce", path, "--out", out)
    assert resumed.startswith(f"computed {_grouped(total - saved)}, reused {_grouped(saved)} ")
    full, _ = _json(run, "reproduce", path, "--out", tmp_path / "full")
    assert rows == full
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "runs.csv"), pd.read_csv(tmp_path / "full" / "runs.csv")
    )


def _session(sid: int) -> list[str]:
    """The processes still in session ``sid``, with their command lines."""
    out = subprocess.run(["pgrep", "-a", "-s", str(sid)], capture_output=True, text=True)
    return out.stdout.splitlines()


def _grouped(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def test_ctrl_c_cancels_the_sweep_on_a_dask_cluster(run, tmp_path, local_cluster):
    path = tiny(tmp_path, reps=200)
    out = tmp_path / "dask"
    with local_cluster() as cluster:
        proc = _start(path, out, "--cluster", cluster.scheduler_address)
        err, took = _ctrl_c(proc)
        assert proc.returncode == 130
        assert took < 2.0, f"exited {took:.2f} s after Ctrl-C"
        saved = stored_runs(out)
        assert err.splitlines()[-1].startswith(f"interrupted: {_grouped(saved)} of 1 200 runs")
        # The cancelled batches leave the cluster: the scheduler forgets every task.
        deadline = time.monotonic() + 10
        while cluster.scheduler.tasks and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not cluster.scheduler.tasks
    rows, resumed = _json(run, "reproduce", path, "--out", out, "--jobs", "2")
    assert resumed.startswith(f"computed {_grouped(1200 - saved)}, reused {_grouped(saved)} ")
    assert rows == _json(run, "reproduce", path, "--out", tmp_path / "full", "--jobs", "2")[0]


def _start(path, out, *extra):
    """A sweep in its own process group (as a shell runs a command), once it has stored runs.

    A shell starts a foreground command with Ctrl-C at its default; a test run started in the
    background of a non-interactive shell inherits SIGINT ignored, and an ignored signal stays
    ignored across exec. So this process's SIGINT is set to a handler (which exec resets to the
    default) while the sweep starts."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "numasim", "reproduce", str(path), "--out", str(out), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, before)
    deadline = time.monotonic() + 60
    while stored_runs(out) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep must still be running"
    return proc


def _ctrl_c(proc) -> tuple[str, float]:
    """Sends SIGINT to the sweep's process group, as a terminal's Ctrl-C does; returns its
    stderr and how long it took to exit."""
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return err, time.monotonic() - sent


@pytest.mark.parametrize(
    "fields",
    [
        {"machine": "ab12", "spec": "kind=cpu,exec=200", "n": 25, "policy": "linux26",
         "domains": "multilevel", "assumptions": {"memory": "parent", "slice": "work"}},
        # Texts that look like the stand-ins, quotes and non-ASCII are written as JSON writes them.
        {"machine": "x", "spec": f'a="{store._REP}",b={store._SEED}', "n": 0, "policy": "é",
         "domains": "linux", "assumptions": {}},
    ],
)  # fmt: skip
def test_run_keys_are_the_keys_of_each_run(fields):
    reps = [(0, 0), (1, 2**63 - 1), (917, 123456789)]
    expected = [(store.run_key(**fields, replication=r, seed=s),
                 store.canonical({**fields, "replication": r, "seed": s}))
                for r, s in reps]  # fmt: skip
    assert store.run_keys(fields, reps) == expected


def test_every_run_of_an_experiment_has_the_key_of_its_own_fields(tmp_path):
    from numasim.machine import Machine

    exp = ex.load(tiny(tmp_path, reps=3))
    runs = ex.runs(exp, {m: Machine.load(m) for m in exp.machines})
    assert len({r.key for r in runs}) == len(runs) == 3 * len(exp.ns) * 3
    for r in runs:
        f = r.fields
        assert (f["replication"], f["seed"], f["policy"], f["domains"], f["n"]) == (
            r.replication, r.seed, r.variant.policy, r.variant.domains, r.n)  # fmt: skip
        assert r.key == store.run_key(**f)
        assert r.fields_json == store.canonical(f)
