"""Policies written in Python (numasim.policy): the shipped examples run under run, compare,
an experiment file, --jobs and a Dask cluster; the node push balancer gives the registered
node-push's results bit for bit; each kind of wrong answer stops the run with one line and
exit 2; an exception shows the policy's own traceback; a kept view raises; the store computes
afresh when the file changes; check-policy passes every example and catches a policy whose
result depends on string hashing; Ctrl-C stops a run inside Python callbacks."""

from __future__ import annotations

import functools
import json
import re
import signal
import sqlite3
import textwrap
from pathlib import Path

import numasim
import pandas as pd
import pytest
from numasim import PolicyError
from numasim.machine import Machine, data_dir
from test_signals import Command

ROOT = Path(__file__).resolve().parent.parent
#: The example policies: package data (a source checkout shows them as examples/policies).
EXAMPLES = data_dir("policies")
NODEBAL = f"py:{EXAMPLES / 'nodebal.py'}:NodeBalancer"
#: Every example class: its file and name.
EXAMPLE_CLASSES = [("nodebal.py", "NodeBalancer"), ("origin_select.py", "OriginSelect"),
                   ("random_steal.py", "RandomSteal"), ("idle_pull.py", "IdlePull")]  # fmt: skip


def policy_file(tmp_path: Path, body: str, name: str = "p.py") -> Path:
    path = tmp_path / name
    path.write_text("from numasim.policy import Move, Pages, Policy\n\n" + textwrap.dedent(body))
    return path


@pytest.mark.parametrize(
    ("preset", "spec"),
    [("numa-4x8", "n=300,kind=cpu,exec=100,arrival=random"),
     ("mehta-m1", "n=200,kind=mixed,exec=100,arrival=random"),
     ("hp-superdome-4", "n=120,kind=cpu,exec=10-100,arrival=uniform:300")],
)  # fmt: skip
def test_nodebal_in_python_is_node_push_in_rust_bit_for_bit(preset, spec):
    m = Machine.preset(preset)
    for threshold in ("0.17", "0.05"):
        py = numasim.simulate(m, spec, policy=f"{NODEBAL}:threshold={threshold}", seed=5,
                              domains="two-level", trace=True)  # fmt: skip
        rust = numasim.simulate(m, spec, policy=f"node-push:threshold={threshold}", seed=5,
                                domains="two-level", trace=True)  # fmt: skip
        assert py.raw_json == rust.raw_json
    kinds = dict(py.raw["summary"]["migrations_by_kind"])
    assert kinds["push"] > 0, "the balancer pushed tasks"


@pytest.mark.parametrize(
    ("preset", "spec"),
    [("numa-4x8", "n=200,kind=mixed,exec=100,arrival=random"),
     ("mehta-m1", "n=200,kind=mixed,exec=100,arrival=random")],
)  # fmt: skip
def test_origin_selection_in_python_is_origin_aware_ri_lb_in_rust_bit_for_bit(preset, spec):
    m = Machine.preset(preset)
    differs = 0
    for seed in (1, 2, 3):
        for domains in ("multilevel", "two-level"):
            run = functools.partial(numasim.simulate, m, spec, seed=seed, domains=domains,
                                    trace=True)  # fmt: skip
            py = run(policy=f"py:{EXAMPLES / 'origin_select.py'}:OriginSelect")
            assert py.raw_json == run(policy="origin-aware:si-lb=off").raw_json
            differs += py.raw_json != run(policy="linux26").raw_json
    assert differs > 0, "the order changed which tasks linux26's pulls took"


def test_random_stealing_gated_on_idle_alone_steals_the_same(tmp_path):
    source = (EXAMPLES / "random_steal.py").read_text()
    assert 'balance_cpu_when = "idle+overloaded"' in source
    idle = tmp_path / "idle.py"
    idle.write_text(source.replace('"idle+overloaded"', '"idle"'))
    m = Machine.preset("mehta-m1")
    spec = "n=200,kind=mixed,exec=100,arrival=random"
    narrow = numasim.simulate(m, spec, policy=f"py:{EXAMPLES / 'random_steal.py'}:RandomSteal")
    wide = numasim.simulate(m, spec, policy=f"py:{idle}:RandomSteal")
    assert narrow.raw_json == wide.raw_json
    assert narrow.raw["summary"]["policy_metrics"][0][1] > 0


def test_every_example_runs_and_the_toy_reports_its_metric(run):
    for file, cls in EXAMPLE_CLASSES:
        r = run("run", "--machine", "numa-4x8", "--workload", "n=100,kind=cpu,exec=100,"
                "arrival=random", "--policy", f"py:{EXAMPLES / file}:{cls}")  # fmt: skip
        assert r.code == 0, r.err
    m = Machine.preset("numa-4x8")
    spec = "n=300,kind=cpu,exec=100,arrival=random"
    r = numasim.simulate(m, spec, policy=f"py:{EXAMPLES / 'random_steal.py'}:RandomSteal")
    (name, steals), *_ = r.raw["summary"]["policy_metrics"]
    assert name == "steals" and steals > 0


def test_the_examples_are_one_copy_and_bench_reads_them_from_the_package(run, tmp_path,
                                                                         monkeypatch):  # fmt: skip
    assert (ROOT / "examples" / "policies").resolve() == EXAMPLES.resolve()
    assert {p.name for p in EXAMPLES.glob("*.py")} == {f for f, _ in EXAMPLE_CLASSES}
    listed = run("list", "examples").out
    for file, cls in EXAMPLE_CLASSES:
        assert f"--policy py:{EXAMPLES / file}:{cls}\n" in listed
    monkeypatch.chdir(tmp_path)  # no source checkout here
    (tmp_path / "nodebal.py").write_text("raise SystemExit('not this file')\n")
    r = run("bench", "--policies", "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    assert set(rows) == {"base", "machine-wide", "per-cpu"}
    assert rows["base"]["ratio"] == 1.0 and rows["machine-wide"]["limit"] == 5


def run_error(run, tmp_path, body: str, workload: str = "n=40,kind=cpu,exec=100") -> str:
    """The one error line of a run under the class ``P`` of ``body`` (exit 2)."""
    path = policy_file(tmp_path, body)
    r = run("run", "--machine", "numa-4x8", "--workload", workload, "--policy", f"py:{path}:P")
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert lines[-1].startswith(f"numasim: error: policy py:{path}:P: "), r.err
    return lines[-1].split(f"py:{path}:P: ", 1)[1]


BAD_ANSWERS = [
    ("return [Move(10**6, 0)]", "balance at 10.000 ms (machine-wide): move of pid 1000000: "
     "no such process"),
    ("return [Move(39, 0)]",  # pid 39 arrives at 500 ms
     "balance at 10.000 ms (machine-wide): move of pid 39: it is not queued or running "
     "(it is pending)"),
    ("return [Move(view.queued(BUSY(view))[0], 32)]",
     "balance at 10.000 ms (machine-wide): move of pid {pid} to CPU 32: the machine has CPUs "
     "0 to 31"),
    ("q = view.queued(BUSY(view))[0]\n"
     "            return [Move(q, OTHER(view)), Move(q, OTHER(view))]",
     "balance at 10.000 ms (machine-wide): pid {pid} is moved twice in one answer"),
    ("return [Pages(0, 0, 1, 1.5)]",
     "balance at 10.000 ms (machine-wide): page move of group 0: share 1.5 is outside [0, 1]"),
    ("return ['cpu 3']",
     "balance at 10.000 ms (machine-wide): answer item 0 is str 'cpu 3', not Move(pid, cpu) "
     "or Pages(tgid, from_node, to_node, share)"),
    ("return [Move(1.5, 2)]",
     "balance at 10.000 ms (machine-wide): answer item 0 is Move Move(pid=1.5, cpu=2), not "
     "Move(pid, cpu) or Pages(tgid, from_node, to_node, share)"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "expected"), BAD_ANSWERS)
def test_each_wrong_answer_stops_the_run_with_one_line(run, tmp_path, answer, expected):
    body = f"""
    def BUSY(view):
        return int(view.cpus.nr_running.argmax())

    def OTHER(view):
        return int(view.cpus.nr_running.argmin())

    class P(Policy):
        def balance(self, view):
            {answer}
    """
    # 40 processes on 32 CPUs at 0 ms, or (for the pending one) spread over 500 ms, the last
    # (pid 39) long after the first callback.
    workload = "n=40,kind=cpu,exec=100" + (",arrival=uniform:500" if "pending" in expected else "")
    path = policy_file(tmp_path, body)
    r = run("run", "--machine", "numa-4x8", "--workload", workload, "--policy", f"py:{path}:P")
    assert r.code == 2, r.err
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"numasim: error: policy py:{path}:P: balance at 10.000 ms"), line
    head, _, tail = expected.partition("{pid}")
    assert head in line and line.endswith(tail if tail else expected), line


RANK_ERRORS = [
    ("return [0]", r"rank at \d+\.\d{3} ms on CPU \d+: 1 ranks for (\d+) tasks "
     r"\(pids \[[\d, ]+\]\): one integer per task"),
    ("return [0.5] * len(tasks)", r"rank at \d+\.\d{3} ms on CPU \d+: rank returned list "
     r"\[0\.5, 0\.5[0-9., ]*\], not one integer per task"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "expected"), RANK_ERRORS)
def test_a_wrong_rank_names_the_hook_time_and_cpu(run, tmp_path, answer, expected):
    body = f"""
    class P(Policy):
        def rank(self, view, cpu, tasks):
            {answer}
    """
    line = run_error(run, tmp_path, body, "n=200,kind=mixed,exec=100,arrival=random")
    found = re.fullmatch(expected, line)
    assert found, line
    assert not found.groups() or int(found.group(1)) >= 2, "asked only when there is a choice"


def test_rank_over_a_base_without_that_choice_is_refused(run, tmp_path):
    body = """
    class P(Policy):
        base = "linux"

        def rank(self, view, cpu, tasks):
            return [0] * len(tasks)
    """
    line = run_error(run, tmp_path, body)
    assert line == ("rank orders the tasks a pull takes, and the base linux has no such "
                    "choice (linux26 has)"), line  # fmt: skip


def test_a_wrong_placement_names_the_hook_and_cpu(run, tmp_path):
    body = """
    class P(Policy):
        def place(self, view, pid, cpu, why):
            return 99 if pid == 5 else None
    """
    line = run_error(run, tmp_path, body)
    assert line.startswith("place at 0.000 ms on CPU "), line
    assert line.endswith("pid 5 placed on CPU 99: the machine has CPUs 0 to 31"), line


def test_an_exception_in_the_policy_shows_its_own_traceback(run, tmp_path):
    body = """
    class P(Policy):
        balance_cpu_when = "always"
        def balance_cpu(self, view, cpu, level, kind):
            return self.helper(cpu)

        def helper(self, cpu):
            return {}[cpu]
    """
    path = policy_file(tmp_path, body)
    r = run("run", "--machine", "numa-4x8", "--workload", "n=100,kind=cpu,exec=100,"
            "arrival=random", "--policy", f"py:{path}:P")  # fmt: skip
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert f'File "{path}", line 7, in balance_cpu' in r.err
    assert f'File "{path}", line 10, in helper' in r.err
    assert "numasim/policy" not in r.err, "numasim's own frames are left out"
    assert lines[-2].startswith("KeyError: ")
    assert "balance_cpu at " in lines[-1] and lines[-1].endswith(": raised an exception")


def test_the_exception_is_the_policy_errors_cause_in_the_api(tmp_path):
    path = policy_file(tmp_path, """
    class P(Policy):
        def balance(self, view):
            raise ValueError("mine")
    """)  # fmt: skip
    with pytest.raises(PolicyError, match=r"balance at 10\.000 ms") as e:
        numasim.simulate(Machine.preset("numa-4x8"), "n=50,kind=cpu", policy=f"py:{path}:P")
    assert isinstance(e.value.__cause__, ValueError) and str(e.value.__cause__) == "mine"


def test_a_view_kept_after_its_callback_raises(tmp_path):
    path = policy_file(tmp_path, """
    KEPT = []

    class P(Policy):
        def balance(self, view):
            view.cpus  # read once: the columns are cached in the view
            KEPT.append(view)

        def metrics(self):
            view = KEPT[0]
            for read in (lambda: view.cpus, lambda: view.tasks, lambda: view.now_ns,
                         lambda: view.queued(0), lambda: view.distance(0, 1)):
                try:
                    read()
                except RuntimeError as e:
                    assert "callback that has returned" in str(e)
                else:
                    raise AssertionError("a kept view was read")
            return {"kept": len(KEPT)}
    """)  # fmt: skip
    r = numasim.simulate(Machine.preset("numa-4x8"), "n=50,kind=cpu", policy=f"py:{path}:P")
    assert r.raw["summary"]["policy_metrics"][0][0] == "kept"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(":P:limit=2", "P has no option 'limit' (its options: threshold)"),
     (":P:threshold=high", "option 'threshold' must be a float, not 'high'"),
     (":Q", "has no class Q; its policies: P"),
     ("", "must be py:FILE.py:CLASS")],
)  # fmt: skip
def test_bad_settings_are_one_line_and_exit_2(run, tmp_path, spec, expected):
    path = policy_file(tmp_path, """
    class P(Policy):
        options = {"threshold": 0.1}

        def balance(self, view):
            return None
    """)  # fmt: skip
    r = run("run", "--machine", "numa-4x8", "--workload", "n=10,kind=cpu",
            "--policy", f"py:{path}{spec}")  # fmt: skip
    assert r.code == 2
    (line,) = r.err.strip().splitlines()
    assert expected in line, line


COMPARE = ["compare", "--machine", "numa-4x8", "--workload", "n=60,kind=cpu,exec=50,"
           "arrival=random", "--replications", "4"]  # fmt: skip


def stored(out: Path) -> int:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("select count(*) from runs").fetchone()[0]


def test_the_store_computes_afresh_when_the_policy_file_changes(run, tmp_path):
    path = tmp_path / "nodebal.py"
    path.write_text((EXAMPLES / "nodebal.py").read_text())
    args = [*COMPARE, "--policies", f"linux26,py:{path}:NodeBalancer", "--out", tmp_path / "o"]
    r = run(*args, "--jobs", "1")
    assert r.code == 0, r.err
    assert "computed 8, reused 0" in r.out
    assert "resumed 8 of 8 runs" in run(*args, "--jobs", "1").out
    path.write_text(path.read_text() + "\n# an edit\n")
    assert "computed 4, reused 4" in run(*args, "--jobs", "1").out
    assert stored(tmp_path / "o") == 12
    path.write_text(path.read_text().replace('"threshold": 0.17', '"threshold": 0.1'))
    assert "computed 4, reused 4" in run(*args, "--jobs", "1").out
    assert stored(tmp_path / "o") == 16


def runs_csv(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "runs.csv").sort_values(["policy", "replication"], ignore_index=True)


def test_jobs_and_dask_give_the_one_process_results(run, tmp_path, local_cluster):
    policies = ",".join(["linux26", *(f"py:{EXAMPLES / f}:{c}" for f, c in EXAMPLE_CLASSES)])
    args = [*COMPARE, "--policies", policies]
    assert run(*args, "--jobs", "1", "--out", tmp_path / "one").code == 0
    assert run(*args, "--jobs", "2", "--out", tmp_path / "two").code == 0
    pd.testing.assert_frame_equal(runs_csv(tmp_path / "one"), runs_csv(tmp_path / "two"))
    with local_cluster() as cluster:
        r = run(*args, "--cluster", cluster.scheduler_address, "--out", tmp_path / "dask")
        assert r.code == 0, r.err
    pd.testing.assert_frame_equal(runs_csv(tmp_path / "one"), runs_csv(tmp_path / "dask"))


def test_an_experiment_file_names_a_policy_file_beside_it(run, tmp_path):
    for file, _ in EXAMPLE_CLASSES:
        (tmp_path / file).write_text((EXAMPLES / file).read_text())
    others = ", ".join(f'"py:{f}:{c}"' for f, c in EXAMPLE_CLASSES if f != "nodebal.py")
    exp = tmp_path / "e.toml"
    exp.write_text(textwrap.dedent(f"""
        name = "python-policy"
        title = "linux26 against a node push balancer written in Python"
        machines = ["numa-4x8"]
        baseline = "linux26"
        policies = ["py:nodebal.py:NodeBalancer:threshold=0.1", "node-push:threshold=0.1", {others}]
        replications = 3
        seed = 3

        [[workload]]
        name = "w"
        spec = "kind=cpu,exec=50,arrival=random"

        [sweep]
        n = [80]
    """))  # fmt: skip
    out = tmp_path / "out"
    r = run("reproduce", exp, "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    rows = pd.read_csv(out / "runs.csv")
    assert rows.policy.nunique() == 2 + len(EXAMPLE_CLASSES), "every example ran"

    def runs_of(prefix: str) -> pd.DataFrame:
        of = rows[rows.policy.str.startswith(prefix)]
        return of.drop(columns="policy").reset_index(drop=True)

    pd.testing.assert_frame_equal(runs_of("py:nodebal.py"), runs_of("node-push"))


@pytest.mark.parametrize(("file", "cls"), EXAMPLE_CLASSES)
def test_check_policy_passes_every_example(run, file, cls):
    r = run("check-policy", EXAMPLES / file, "--class", cls)
    assert r.code == 0, r.err
    assert r.out.startswith(f"{cls}: same result under two hash seeds")


def test_check_policy_catches_a_result_that_depends_on_string_hashing(run, tmp_path):
    path = policy_file(tmp_path, """
    NAMES = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}

    class P(Policy):
        def balance(self, view):
            nr = view.cpus.nr_running
            # Where "theta" falls in the set's order (1 and 7 under hash seeds 1 and 2).
            busy, to = int(nr.argmax()), list(NAMES).index("theta")
            q = view.queued(busy)
            return [Move(q[0], to)] if q and to != busy else None
    """)  # fmt: skip
    r = run("check-policy", path)
    assert r.code == 1
    assert r.out.startswith("P: results differ between two interpreters")


def test_ctrl_c_stops_a_run_inside_python_callbacks(tmp_path):
    path = policy_file(tmp_path, """
    class P(Policy):
        period_ms = 1

        def balance(self, view):
            view.tasks  # work in Python at every callback
            return None
    """)  # fmt: skip
    long_run = "n=300000,kind=cpu,exec=200,arrival=uniform:60000"
    cmd = Command(["run", "--machine", "mehta-m1", "--workload", long_run, "--policy",
                   f"py:{path}:P"])  # fmt: skip
    cmd.progress_line()
    took = cmd.stop(signal.SIGINT)
    cmd.assert_stopped_cleanly(took)
