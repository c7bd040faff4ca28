"""Modelling assumptions (SPEC §10): one registry, set per run, per experiment and in the API,
keyed in the store, printed with every table; the papers' published numbers beside numasim's."""

from __future__ import annotations

import json
import sqlite3

import numasim
import pytest
from numasim import assumptions as a
from numasim import experiment as ex
from numasim._core import InputError
from test_experiments import TINY, tiny


def _file(tmp_path, text, reps=6):
    """``tiny`` for texts with braces of their own (TOML inline tables)."""
    path = tmp_path / "tiny.toml"
    path.write_text(text.replace("{reps}", str(reps)))
    return path


LINUX = {
    "memory": "first-run",
    "slice": "wall",
    "wake": "previous",
    "exec": "cpu",
    "cost": "kernel",
    "load": "work",
    "remote": "slit",
}
PAPER = {
    "memory": "parent",
    "slice": "work",
    "wake": "idlest",
    "exec": "cpu",
    "cost": "kernel",
    "load": "work",
    "remote": "slit",
}


def test_the_registry_has_two_profiles_and_a_source_for_every_value(run):
    assert a.names() == ["memory", "slice", "wake", "exec", "cost", "load", "remote"]
    assert a.resolve("kernel26") == LINUX
    assert a.resolve("paper") == PAPER
    assert a.resolve(None) == LINUX  # the default: numasim's behaviour before issue 13
    r = run("list", "assumptions")
    assert r.code == 0
    for entry in a.registry()["assumption"]:
        assert f"\n{entry['name']}: {entry['description']}" in r.out
        for p in a.PROFILES:
            assert f"source ({p}): {entry[p]['source']}" in r.out
            assert entry[p]["value"] in entry["values"]
    # The kernel sources name the function; the paper sources quote a sentence.
    for entry in a.registry()["assumption"]:
        assert "2.6.18" in entry["kernel26"]["source"]
        assert '"' in entry["paper"]["source"]


def test_the_profile_comes_first_wherever_it_stands_and_bad_settings_say_what_is_wrong():
    assert a.resolve("paper,slice=wall") == {**PAPER, "slice": "wall"}
    # An item is never undone by a profile named after it.
    assert a.resolve("slice=wall,paper") == {**PAPER, "slice": "wall"}
    assert a.resolve("memory=first-run, paper") == {**PAPER, "memory": "first-run"}
    assert a.resolve("memory=parent,kernel26") == {**LINUX, "memory": "parent"}
    assert a.resolve("memory=first-run,paper", base="kernel26") == {**PAPER, "memory": "first-run"}
    assert a.resolve({"memory": "parent"}) == {**LINUX, "memory": "parent"}
    assert a.resolve("wake=idlest", base="paper") == PAPER
    assert a.resolve("memory=first-run", base="memory=parent") == LINUX
    with pytest.raises(InputError, match=r"^x: assumption memory: unknown value 'home'"):
        a.resolve("memory=home", "x")
    with pytest.raises(InputError, match=r"^x: unknown profile or assumption 'kernel'"):
        a.resolve("kernel", "x")
    with pytest.raises(TypeError, match="assume must be a profile"):
        a.resolve(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("setting", ["paper,kernel26", "kernel26, paper", "paper,paper",
                                     "paper,memory=parent,kernel26"])  # fmt: skip
def test_two_profiles_are_refused(setting):
    first, second = [i.strip() for i in setting.split(",") if "=" not in i]
    with pytest.raises(InputError) as e:
        a.resolve(setting, "--assume")
    assert str(e.value) == (
        f"--assume: two profiles ('{first}' and '{second}'); give one, and NAME=VALUE items to "
        "change single assumptions"
    )


@pytest.mark.parametrize("setting", ["linux", "linux,memory=parent", "memory=parent, linux"])
def test_the_old_profile_name_points_to_the_new_one(setting):
    with pytest.raises(InputError) as e:
        a.resolve(setting, "--assume")
    assert str(e.value) == (
        "--assume: the profile 'linux' is now called 'kernel26' (faithful to the Linux 2.6.18 "
        "kernel; the policy 'linux' is Linux 6.x): give kernel26"
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("paper,kernel26", "two profiles ('paper' and 'kernel26')"),
        ("linux", "the profile 'linux' is now called 'kernel26'"),
    ],
)
def test_the_same_rule_holds_on_the_command_line(run, setting, message):
    for cmd in (["run", "--machine", "mehta-m3", "--workload", "n=4"],
                ["compare", "--machine", "mehta-m3", "--workload", "n=4",
                 "--policies", "linux26,origin-aware"]):  # fmt: skip
        r = run(*cmd, "--assume", setting)
        assert (r.code, r.out) == (2, ""), (cmd, r.err)
        assert r.err.startswith(f"numasim: error: --assume: {message}"), r.err
        assert r.err.count("\n") == 1


def test_a_profile_after_an_item_on_the_command_line_keeps_the_item(run):
    r = run("run", "--machine", "mehta-m3", "--workload", "n=10,kind=cpu",
            "--assume", "memory=first-run,paper")  # fmt: skip
    assert r.code == 0, r.err
    assert (
        "assumptions: memory=first-run, slice=work, wake=idlest, exec=cpu, cost=kernel, "
        "load=work, remote=slit\n" in r.out
    )


def test_the_api_applies_the_same_rule():
    m = numasim.Machine.preset("mehta-m3")
    r = numasim.simulate(m, "n=5,kind=cpu", seed=1, assume="memory=first-run,paper")
    assert r.assumptions == {**PAPER, "memory": "first-run"}
    with pytest.raises(InputError, match=r"^assume: two profiles"):
        numasim.simulate(m, "n=5,kind=cpu", seed=1, assume="paper,kernel26")
    with pytest.raises(InputError, match=r"^assume: the profile 'linux' is now called"):
        numasim.simulate(m, "n=5,kind=cpu", seed=1, assume="linux")


def test_an_experiment_file_naming_the_old_profile_is_refused_with_the_new_name(tmp_path):
    path = _file(tmp_path, TINY.replace("seed = 7", 'seed = 7\nprofile = "linux"'))
    with pytest.raises(InputError) as e:
        ex.load(path)
    assert str(e.value) == (
        f"{path}: profile: the profile 'linux' is now called 'kernel26' (faithful to the Linux "
        "2.6.18 kernel; the policy 'linux' is Linux 6.x): give kernel26"
    )


def test_the_api_runs_under_the_assumptions_it_is_given():
    m = numasim.Machine.preset("mehta-m1")
    spec = "n=100,kind=cpu,exec=200,arrival=same"
    linux = numasim.simulate(m, spec, domains="multilevel", seed=3)
    paper = numasim.simulate(m, spec, domains="multilevel", seed=3, assume="paper")
    parent = numasim.simulate(m, spec, domains="multilevel", seed=3, assume={"memory": "parent"})
    assert linux.assumptions == LINUX and paper.assumptions == PAPER
    assert parent.assumptions == {**LINUX, "memory": "parent"}
    # memory=parent: a process placed away from its parent's CPU has its origin there.
    procs = parent.processes
    spawn = numasim.Workload.generate(m, spec, 3).to_dataframe()["spawn_cpu"]
    assert (procs.origin_cpu == spawn).all()
    assert (linux.processes.origin_cpu != spawn).any()
    # ... and so it runs remote: its mean remote factor is higher than under first-run.
    assert parent.raw_summary["mean_remote_factor"] > linux.raw_summary["mean_remote_factor"]
    with pytest.raises(InputError, match=r"^assume: assumption slice: unknown value 'all'"):
        numasim.simulate(m, spec, assume="slice=all")


def test_run_prints_its_assumptions_and_refuses_unknown_ones(run, tmp_path):
    r = run("run", "--machine", "mehta-m3", "--workload", "n=20,kind=cpu", "--assume", "paper",
            "--out", tmp_path / "saved")  # fmt: skip
    assert r.code == 0, r.err
    paper = (
        "assumptions: memory=parent, slice=work, wake=idlest, exec=cpu, cost=kernel, load=work, "
        "remote=slit (the paper profile)"
    )
    assert paper in r.out
    saved = json.loads((tmp_path / "saved" / "run.json").read_text())
    assert saved["assumptions"] == PAPER
    r = run("trace", tmp_path / "saved", "--report", tmp_path / "r.html", "-o", tmp_path / "t.json")
    assert r.code == 0, r.err
    assert "memory=parent, slice=work, wake=idlest" in (tmp_path / "r.html").read_text()
    r = run("run", "--machine", "mehta-m3", "--workload", "n=20", "--assume", "slice=some")
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        "numasim: error: --assume: assumption slice: unknown value 'some'; choose one of wall, "
        "work\n"
    )


def test_stored_runs_are_keyed_by_their_assumptions(run, tmp_path):
    out = tmp_path / "out"
    path = tiny(tmp_path, reps=2)
    r = run("reproduce", path, "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    linux = (
        "memory=first-run, slice=wall, wake=previous, exec=cpu, cost=kernel, load=work, "
        "remote=slit (the kernel26 profile)"
    )
    assert f"assumptions: {linux}" in r.out
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "slice=work")
    assert "computed 12, reused 0 of 12 runs" in r.out
    assert (
        "assumptions: memory=first-run, slice=work, wake=previous, exec=cpu, cost=kernel, "
        "load=work, remote=slit\n" in r.out
    )
    r = run("reproduce", path, "--out", out, "--jobs", "1", "--assume", "kernel26")
    assert "resumed 12 of 12 runs" in r.out
    with sqlite3.connect(out / "results.sqlite") as db:
        keys = [json.loads(k)["assumptions"] for (k,) in db.execute("SELECT key_json FROM runs")]
    assert sorted(k["slice"] for k in keys) == ["wall"] * 12 + ["work"] * 12


def test_an_experiment_s_profile_its_own_values_and_assume(tmp_path):
    text = TINY.replace(
        "seed = 7",
        'seed = 7\nprofile = "paper"\n\n[assumptions]\n'
        'wake = { value = "previous", source = "the paper is silent; the kernel\'s value" }',
    )
    exp = ex.load(_file(tmp_path, text))
    assert exp.assumptions == {**PAPER, "wake": "previous"}
    sources = {name: why for name, _, why in exp.assumption_sources()}
    assert sources["wake"] == "the paper is silent; the kernel's value"
    assert sources["memory"].startswith("paper profile: Corrêa")
    exp.assume = "kernel26"
    assert exp.assumptions == LINUX
    exp.assume = "paper"  # the file's own profile: its values again
    assert exp.assumptions == {**PAPER, "wake": "previous"}
    # A profile comes first wherever it stands: the item after it, or before it, stays.
    exp.assume = "memory=first-run,kernel26"
    assert exp.assumptions == {**LINUX, "memory": "first-run"}
    exp.assume = "memory=first-run,paper"
    assert exp.assumptions == {**PAPER, "wake": "previous", "memory": "first-run"}
    exp.assume = "kernel26,paper"
    with pytest.raises(InputError, match=r"^--assume: two profiles"):
        exp.assumptions  # noqa: B018
    exp.assume = "memory=first-run"
    assert exp.assumptions == {**PAPER, "wake": "previous", "memory": "first-run"}
    exp.assume = "wake=idlest"  # a value the file sets can be changed too
    assert exp.assumptions == PAPER
    exp.assume = "wake=idlest,wake=previous"
    with pytest.raises(InputError, match=r"^--assume: assumption 'wake' is given twice"):
        exp.assumptions  # noqa: B018


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ('profile = "kernel"', "profile: must be one of"),
        ('[assumptions]\nmemory = { value = "home", source = "x" }',
         "assumptions.memory: assumption memory: unknown value 'home'"),
        ('[assumptions]\nmemory = { value = "parent" }', "missing key 'assumptions.memory.source'"),
        ('[assumptions]\ncolour = { value = "red", source = "x" }',
         "assumptions.colour: unknown assumption 'colour'"),
        ('[reference]\nsource = "T"\nrows = [{ workload = "W9", n = 60, gain_pct = 1 }]',
         "reference.rows.0.workload: 'W9' is not a workload of the file"),
        ('[reference]\nsource = "T"\nrows = [{ workload = "make", n = 61, gain_pct = 1 }]',
         "reference.rows.0.n: 61 is not in sweep.n"),
        ('[reference]\nsource = "T"', "reference: give rows or average_gain_pct"),
    ],
)  # fmt: skip
def test_bad_assumptions_and_references_are_one_line(run, tmp_path, change, expected):
    text = TINY.replace("[[workload]]", change + "\n\n[[workload]]")
    if change.startswith("profile"):
        text = TINY.replace("seed = 7", "seed = 7\n" + change)
    path = _file(tmp_path, text)
    r = run("reproduce", path, "--out", tmp_path / "o")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith(f"numasim: error: {path}: ")
    assert expected in r.err and r.err.count("\n") == 1


PAPER_FAMILIES = (
    "multilevel-",
    "domains-superdome-4",
    "origin-",
    "capability-",
    "thread-aware-",
    "home-cluster-",
)


#: Shipped experiments that reproduce no paper: they run the kernel's profile, every value's
#: source naming the kernels they run (modern-baseline compares 6.x with 2.6.18).
KERNEL_EXPERIMENTS = {"modern-baseline": ("2.6.18", "6.x"), "sched-ext-numa": ("6.x",)}


def test_every_reproduction_runs_its_paper_s_profile_with_a_sentence_for_every_value():
    for exp in ex.list_experiments():
        if exp.name in KERNEL_EXPERIMENTS:
            assert exp.profile == "kernel26", exp.name
            assert list(exp.set_assumptions) == a.names(), exp.name
            for name, (value, source) in exp.set_assumptions.items():
                assert value == a.entry(name)["kernel26"]["value"], (exp.name, name)
                assert all(k in source for k in KERNEL_EXPERIMENTS[exp.name]), (exp.name, name)
            continue
        assert exp.name.startswith(PAPER_FAMILIES)
        assert exp.profile == "paper", exp.name
        # Every assumption is set by the file, each with its own justification.
        assert list(exp.set_assumptions) == a.names(), exp.name
        for name, (value, source) in exp.set_assumptions.items():
            assert len(source) > 60, (exp.name, name)
            if value == a.entry(name)["kernel26"]["value"]:
                assert "2.6.18" in source, (exp.name, name)  # the kernel's value: its function
            else:
                assert '"' in source, (exp.name, name)  # a paper's value: its sentence


def test_published_tables_are_transcribed_consistently():
    """Table 4's gains are (Linux − Origin Aware) / Linux × 100 of its own TATs, to the
    rounding of the printed values (a typo in a transcribed cell breaks this)."""
    ref = ex.load("origin-aware-m1").reference
    assert ref is not None and len(ref.rows) == 21
    for (w, n), (base, pol, gain) in ref.rows.items():
        assert base and pol is not None and gain is not None
        assert abs((base - pol) / base * 100 - gain) < 0.01, (w, n)
    assert ex.load("multilevel-altix").reference.average_gain_pct == 10.0
    assert ex.load("multilevel-superdome").reference.average_gain_pct == 2.2


def test_the_table_puts_the_paper_s_numbers_beside_numasim_s(run, tmp_path):
    text = TINY.replace(
        "[[workload]]",
        '[reference]\nsource = "Table 9 (p. 3)"\npolicy = "linux26@flat"\n'
        'rows = [{ workload = "make", n = 60, baseline = 200, policy = 150 }]\n\n[[workload]]',
    )
    out = tmp_path / "out"
    r = run("reproduce", _file(tmp_path, text, reps=3), "--out", out, "--jobs", "1")
    assert r.code == 0, r.err
    gains = json.loads(run("reproduce", _file(tmp_path, text, reps=3), "--out", out,
                           "--json").out)["rows"]  # fmt: skip
    ours = next(g["gain_pct"] for g in gains if g["n"] == 60 and g["policy"] == "linux26@flat")
    (line,) = [x for x in r.out.splitlines() if x.lstrip().startswith("60 ")]
    cells = line.split()
    # The paper's baseline, policy, gain (25 % from its TATs) and numasim's minus the paper's.
    assert cells[-4:] == ["200.0", "150.0", "25.00", f"{ours - 25:+.2f}"]
    assert "paper: Table 9 (p. 3) — numbers of linux26@flat vs linux26@two-level" in r.out
