"""Input the CLI and the Python API refuse in one line, and options that would do nothing
(issue 12 §3, §4): each case names the place and the problem; nothing is silently dropped."""

from __future__ import annotations

import json

import numasim
import pytest
from numasim import Machine, Workload, simulate
from numasim.trace import chrome_trace
from test_experiments import stored_runs, tiny

M3 = Machine.preset("mehta-m3")
RUN = ["run", "--machine", "mehta-m3", "--workload", "n=20,kind=cpu,exec=50"]
CMP = ["compare", "--machine", "hp-superdome-4", "--replications", "2"]


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: Workload.generate(M3, "n=5", seed=-1), numasim.InputError,
         "seed: -1 is outside 0 … 2^64 − 1"),
        (lambda: simulate(M3, "n=5", seed=-3), numasim.InputError,
         "seed: -3 is outside 0 … 2^64 − 1"),
        (lambda: simulate(M3, "n=5", seed=2**70), numasim.InputError,
         f"seed: {2**70} is outside 0 … 2^64 − 1"),
        (lambda: simulate(M3, "n=5", seed=1.5), TypeError, "seed must be an int, not float"),
        (lambda: simulate("mehta-m3", "n=5"), TypeError,
         "machine must be a Machine (e.g. numasim.Machine.preset('mehta-m1')), not str 'mehta-m3'"),
        (lambda: simulate(M3, 5), TypeError,
         "workload must be a Workload or str (e.g. a Workload or a spec 'n=100,kind=cpu'), "
         "not int 5"),
        (lambda: Workload.generate(None, "n=5"), TypeError,
         "machine must be a Machine (e.g. numasim.Machine.preset('mehta-m1')), not NoneType None"),
        (lambda: simulate(M3, "n=5", policy="cfs"), numasim.InputError,
         "policy: unknown policy 'cfs'; choose one of linux26, linux, origin-aware, "
         "capability-aware, thread-aware, memory-aware, node-push, scx-rusty, scx-lavd, "
         "fr-dist, fh-dist, fp-dist, hb-dist, hs-dist, fr-con, fh-con, fp-con, hb-con, hs-con, "
         "equi, dyn, lim"),
        (lambda: simulate(M3, "n=5", domains="three"), numasim.InputError,
         "domains: unknown domain builder 'three'; choose one of flat, node-only, two-level, "
         "multilevel, linux"),
        (lambda: simulate(M3, "n=5,exec=-3"), numasim.InputError,
         "spec: key exec: -3 ms must be a non-negative time"),
    ],
)  # fmt: skip
def test_the_api_speaks_of_its_own_arguments(call, kind, message):
    with pytest.raises(kind) as e:
        call()
    assert type(e.value) is kind
    assert str(e.value) == message
    assert "--" not in str(e.value)


def test_an_untraced_run_is_not_drawn_as_an_idle_machine():
    r = simulate(M3, "n=5,kind=cpu,exec=20")
    with pytest.raises(numasim.InputError, match="made without recording its trace"):
        chrome_trace(M3, r.raw_json)
    traced = simulate(M3, "n=5,kind=cpu,exec=20", trace=True)
    assert any(e["ph"] == "X" for e in chrome_trace(M3, traced.raw_json)["traceEvents"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*RUN, "--trace-window", "0:10"], "--trace-window clips the trace: give --trace FILE too"),
        ([*RUN, "--json", "--traces", "3"],
         "--traces prints text and --json prints only the summary; choose one (--out DIR also "
         "writes every migration to migrations.csv)"),
        ([*RUN, "--seed", "99999999999999999999999"],
         "Invalid value for '--seed': 99999999999999999999999 is not in the range "
         "0<=x<=18446744073709551615."),
        ([*RUN, "--seed", "-1"],
         "Invalid value for '--seed': -1 is not in the range 0<=x<=18446744073709551615."),
        ([*RUN, "--domains", "three"],
         "--domains: unknown domain builder 'three'; choose one of flat, node-only, two-level, "
         "multilevel, linux"),
        ([*CMP, "--workload", "n=20", "--policies", "linux26@flat,,linux26@two-level,"],
         "--policies: 'linux26@flat,,linux26@two-level,' has an empty entry (a comma too many)"),
        ([*CMP, "--workload", "n=20,,kind=io", "--policies", "linux26,linux26@flat"],
         "--workload: 'n=20,,kind=io' has an empty entry (a comma too many)"),
        ([*CMP[:2], "hp-superdome-4,hp-superdome-4", *CMP[3:], "--workload", "n=20",
          "--policies", "linux26,linux26@flat"],
         "--machine: hp-superdome-4 named more than once"),
        ([*CMP, "--workload", "n=10,n=20", "--policies", "linux26,linux26@flat"],
         "--workload must give the process count once, e.g. n=200,kind=cpu"),
        ([*CMP, "--workload", "w.csv", "--policies", "linux26,linux26@flat"],
         "--workload: 'w.csv' is a file; compare generates its replications from a spec such as "
         "n=200,kind=cpu (run a workload file with `numasim run --workload FILE`)"),
        ([*CMP, "--workload", "n=20", "--policies", "linux26,linux26@flat", "--seed", "-1"],
         "Invalid value for '--seed': -1 is not in the range 0<=x<=9223372036854775807."),
    ],
)  # fmt: skip
def test_cli_refusals(run, args, message):
    r = run(*args)
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {message}\n"


def test_a_trace_window_after_the_run_warns(run, tmp_path):
    out = tmp_path / "t.json"
    r = run(*RUN, "--trace", out, "--trace-window", "50000:60000")
    assert r.code == 0
    assert r.err.startswith(
        "numasim: warning: --trace-window 50000:60000 starts after the run ended"
    )
    assert not any(e["ph"] == "X" for e in json.loads(out.read_text())["traceEvents"])
    inside = run(*RUN, "--trace", out, "--trace-window", "0:10")
    assert (inside.code, inside.err) == (0, "")


@pytest.mark.parametrize("command", ["reproduce", "compare"])
@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("/etc/hostname", "is a file, not a results directory"),
        ("/etc/hostname/sub", "cannot write: Not a directory"),
        ("/proc/numasim-out", "cannot write: No such file or directory"),
        ("/sys/numasim-out", "cannot write: "),
    ],
)
def test_an_out_directory_that_cannot_be_written_is_one_line(
    run, tmp_path, command, where, problem
):
    if command == "reproduce":
        args = ["reproduce", tiny(tmp_path, reps=2)]
    else:
        args = [*CMP, "--workload", "n=20", "--policies", "linux26,linux26@flat"]
    r = run(*args, "--out", where)
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith("numasim: error: /") and problem in r.err
    assert r.err.count("\n") == 1


def test_an_input_error_raised_in_a_worker_crosses_the_pool():
    from numasim import experiment as ex

    with ex._executor(1, None) as pool:
        fut = pool.submit(ex.run_batch, json.dumps(M3.info), "kind=cpu,exec=-3", 5, [(0, 1)],
                          [("linux26", "linux26", "multilevel")])  # fmt: skip
        with pytest.raises(numasim.InputError, match="exec: -3 ms must be a non-negative time"):
            fut.result()


def test_a_cluster_address_that_is_not_one_is_refused(run, tmp_path):
    r = run(*CMP, "--workload", "n=20", "--policies", "linux26,linux26@flat",
            "--out", tmp_path / "o", "--cluster", "not an address")  # fmt: skip
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        "numasim: error: --cluster: cannot reach not an address: missing port number in "
        "address 'not an address'\n"
    )


HUGE = 10**9  # passes the spec check made with n = 1; the memory budget refuses it


def test_an_n_too_large_for_memory_is_refused_before_any_worker_starts(run, tmp_path):
    path = tiny(tmp_path, reps=2)
    path.write_text(path.read_text().replace("n = [60, 120]", f"n = [60, {HUGE}]"))
    out = tmp_path / "o"
    r = run("reproduce", path, "--out", out, "--jobs", "1")
    assert (r.code, r.out) == (2, "")
    assert r.err.count("\n") == 1
    assert (
        r.err.startswith(f"numasim: error: {path}: sweep.n = {HUGE}, workload ") and "GB" in r.err
    )
    assert "--workload" not in r.err
    # Refused before the n = 60 cell was run: no work was done to be lost.
    assert stored_runs(out) == 0
    path.write_text(path.read_text().replace(f"n = [60, {HUGE}]", "n = [60]"))
    again = run("reproduce", path, "--out", out, "--jobs", "1", "--json")
    assert again.code == 0 and again.err.startswith("computed 6, reused 0 of 6 runs")
