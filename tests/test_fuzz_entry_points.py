"""Property tests of the Python entry points (issue 12 §4): whatever a user passes, numasim
answers with a result or one InputError/TypeError line — never another exception, never a
Rust panic. Counts of examples tried are in docs/reliability.md."""

from __future__ import annotations

import math
import re

import numasim
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from numasim import Machine, Workload, simulate
from numasim import experiment as ex

M3 = Machine.preset("mehta-m3")
EXAMPLES = 300
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip

KEYS = ["n", "kind", "io_share", "exec", "arrival", "burst", "wait", "mem", "mem_cpu", "mem_io",
        "spawn", "threads", "fork", "colour", ""]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(
        [
            "cpu",
            "io",
            "mixed",
            "same",
            "almost",
            "random",
            "uniform:50",
            "periodic:0",
            "periodic:3",
            "poisson:0",
            "poisson:5",
            "node:1",
            "node:99",
            "share:0:0.5",
            "share:0:2",
            "at-once",
            "over:5",
            "-3",
            "0",
            "1e9",
            "nan",
            "inf",
            "1-0",
            "5-",
            "",
            "=",
            "0.5",
        ]
    ),
    st.integers(-5, 40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=6),
)
PARTS = st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=6)


def _spec(parts: list[tuple[str, str]], n: int | None) -> str:
    items = [f"{k}={v}" for k, v in parts if k != "n"]
    if n is not None:
        items.insert(0, f"n={n}")
    return ",".join(items)


@FUZZ
@given(
    parts=PARTS,
    n=st.one_of(st.none(), st.integers(-3, 30)),
    seed=st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.none(), st.text(max_size=3)),
)
def test_workload_generate_answers_or_refuses(parts, n, seed):  # fmt: skip
    try:
        w = Workload.generate(M3, _spec(parts, n), seed)
    except (numasim.InputError, TypeError) as e:
        assert "\n" not in str(e) and str(e)
        return
    assert len(w) >= 1


def _slow(value: str) -> bool:
    """Whether a spec value holds a number above 10 000 or below 0.01 but positive (in ms: a
    run of minutes or more, or millions of events per process)."""
    for number in re.findall(r"[0-9.]+(?:e[+-]?[0-9]+)?", value):
        try:
            x = float(number)
        except ValueError:
            continue
        if x > 1e4 or 0 < x < 0.01:
            return True
    return False


@FUZZ
@given(parts=PARTS, n=st.integers(1, 12),
       policy=st.sampled_from(["linux26", "origin-aware", "capability-aware", "origin-aware:v1=x",
                               "linux26:", "", "cfs", "origin-aware:min-load=-1", "linux",
                               "linux:slice-us=0"]),
       domains=st.sampled_from([None, "flat", "node-only", "two-level", "multilevel", "linux",
                                "", "three"]))  # fmt: skip
def test_simulate_answers_or_refuses(parts, n, policy, domains):
    # A valid workload of hours of simulated time, or of nanosecond bursts, is answered too,
    # after minutes: not here (generation, above, takes every number; times beyond 104 days
    # are refused).
    assume(all(not _slow(v) for _, v in parts))
    try:
        r = simulate(M3, _spec(parts, n), policy=policy, domains=domains)
    except (numasim.InputError, TypeError) as e:
        assert "\n" not in str(e) and str(e)
        return
    assert len(r.processes) == r.raw_summary["processes"] >= 1
    assert math.isfinite(r.raw_summary["mean_tat_ms"])


TOML_VALUE = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(), st.text(max_size=8)
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)  # fmt: skip
GOOD = {"name": "f", "machines": ["mehta-m3"], "workload": [{"name": "w", "spec": "kind=cpu"}],
        "sweep": {"n": [10]}, "baseline": "linux26", "policies": ["origin-aware"],
        "replications": 2, "seed": 1}  # fmt: skip


@FUZZ
@given(changes=st.dictionaries(st.sampled_from([*GOOD, "confidence", "metric", "title", "x"]),
                               TOML_VALUE, max_size=3),
       drop=st.sets(st.sampled_from(list(GOOD)), max_size=2))  # fmt: skip
def test_experiment_files_are_accepted_or_refused_in_one_line(changes, drop):
    data = {k: v for k, v in GOOD.items() if k not in drop} | changes
    try:
        exp = ex.from_dict(data, "f.toml")
    except numasim.InputError as e:
        assert str(e).startswith("f.toml: ") and "\n" not in str(e)
        return
    assert exp.replications >= 1 and exp.ns and exp.seed >= 0


@FUZZ
@given(policies=st.lists(st.sampled_from(["linux26", "linux26@flat", "origin-aware:v1=off,v2=on",
                                          "capability-aware@linux", "", " ", "@", "x@", "linux26@",
                                          ":", "origin-aware:"]), min_size=0, max_size=4),
       machines=st.lists(st.sampled_from(["hp-superdome-4", "mehta-m3", "", "nope"]),
                         min_size=1, max_size=3))  # fmt: skip
def test_compare_arguments_are_run_or_refused(run, tmp_path_factory, policies, machines):
    out = tmp_path_factory.mktemp("cmp")
    r = run("compare", "--machine", ",".join(machines), "--workload", "n=8,kind=cpu,exec=5",
            "--policies", ",".join(policies), "--replications", "2", "--jobs", "1",
            "--out", out)  # fmt: skip
    assert r.code in (0, 2), r.err
    if r.code == 2:
        assert r.err.startswith("numasim: error: ") and r.err.count("\n") == 1
        assert r.out == ""


MACHINE_KEYS = ["name", "cpus_per_node", "cpus", "distances", "generator", "speed", "fast",
                "fast_cpus", "kind", "nodes", "remote", "x"]  # fmt: skip
YAML_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 300), st.floats(), st.text(max_size=8),
              st.dates(), st.binary(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(MACHINE_KEYS), inner, max_size=3)),
    max_leaves=8,
)  # fmt: skip


@FUZZ
@given(data=st.one_of(
    st.dictionaries(st.sampled_from(MACHINE_KEYS), YAML_VALUE, max_size=4).map(yaml.safe_dump),
    st.binary(max_size=64),
    st.text(alphabet="&*[]{}:,-!. \n0123456789abx", max_size=40)))  # fmt: skip
def test_yaml_machine_files_load_or_refuse_in_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("yaml") / "m.yaml"
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    try:
        m = Machine.from_file(path)
    except numasim.InputError as e:
        assert str(e).startswith(f"{path}") and "\n" not in str(e)
        return
    assert m.cpus >= 1


@pytest.mark.parametrize("seed", [0, 1, 2**63, 2**64 - 1])
def test_every_u64_seed_is_accepted(seed):
    assert len(Workload.generate(M3, "n=3", seed)) == 3
