"""`numasim topology` and `numasim list`: the JSON shape, the real-kernel captures through the
CLI, every kind of machine input, and properties over random tables."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numasim import Machine, builders, presets

KERNEL_CAPTURES = Path(__file__).resolve().parent.parent / "crates/numasim-core/tests/data"

PRESETS = [
    "amc1", "amc2", "amc3", "hp-superdome-16", "hp-superdome-4", "koita-64",
    "mehta-m1", "mehta-m2", "mehta-m3", "numa-4x8", "sgi-altix-3000", "two-socket-2x16",
]  # fmt: skip


def test_list_machines_names_every_preset_with_description_and_source(run):
    r = run("list", "machines", "--json")
    assert r.code == 0
    items = json.loads(r.out)
    assert [i["name"] for i in items] == PRESETS
    assert all(i["description"] and i["source"] for i in items)
    text = run("list", "machines").out
    for name in PRESETS:
        assert f"\n{name} " in "\n" + text


def test_list_builders(run):
    r = run("list", "builders")
    assert r.code == 0
    for name in ["flat", "node-only", "two-level", "multilevel", "linux"]:
        assert f"\n{name} " in "\n" + r.out
    assert [b[0] for b in builders()] == ["flat", "node-only", "two-level", "multilevel", "linux"]


def capture_files():
    return sorted(KERNEL_CAPTURES.glob("*.json"))


@pytest.mark.parametrize("capture", capture_files(), ids=lambda p: p.stem)
def test_cli_reproduces_real_kernel_capture(run, tmp_path, capture):
    """`numasim topology FILE --cpus-per-node P --domains linux --json` = the 6.1 kernel."""
    cap = json.loads(capture.read_text())
    if isinstance(cap["cpus_per_node"], int):
        machine = tmp_path / f"{capture.stem}.slit"
        machine.write_text("\n".join(" ".join(map(str, row)) for row in cap["slit"]) + "\n")
        args = [machine, "--cpus-per-node", cap["cpus_per_node"]]
    else:  # a CPU count per node: a machine file
        machine = tmp_path / f"{capture.stem}.toml"
        machine.write_text(f"cpus = {cap['cpus_per_node']}\ndistances = {cap['slit']}\n")
        args = [machine]
    r = run("topology", *args, "--domains", "linux", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["domains"]["builder"] == "linux"
    got = out["domains"]["cpus"]
    assert got.keys() == cap["cpus"].keys()
    for cpu, levels in cap["cpus"].items():
        assert len(got[cpu]) == len(levels), cpu
        for g, w in zip(got[cpu], levels, strict=True):
            assert g["level"] == w["level"]
            assert g["name"] == w["name"]
            assert g["span"] == w["span"]
            assert [grp["span"] for grp in g["groups"]] == [grp["span"] for grp in w["groups"]]
            assert [grp["balance_mask"] for grp in g["groups"]] == [
                grp.get("balance_mask", grp["span"]) for grp in w["groups"]
            ]
            for key in ["imbalance_pct", "min_interval_ms", "max_interval_ms", "busy_factor"]:
                assert g[key] == w[key], (cpu, key)


def test_json_shape_is_exactly_the_spec(run):
    r = run("topology", "mehta-m3", "--domains", "linux", "--json")
    out = json.loads(r.out)
    assert list(out) == ["machine", "domains"]
    assert list(out["domains"]) == ["builder", "cpus"]
    assert list(out["domains"]["cpus"]) == [str(c) for c in range(16)]
    level = out["domains"]["cpus"]["0"][0]
    assert list(level) == [
        "level", "name", "span", "groups", "imbalance_pct",
        "min_interval_ms", "max_interval_ms", "busy_factor",
    ]  # fmt: skip
    assert level == {
        "level": 0,
        "name": "MC",
        "span": [0, 1],
        "groups": [{"span": [0], "balance_mask": [0]}, {"span": [1], "balance_mask": [1]}],
        "imbalance_pct": 117,
        "min_interval_ms": 2,
        "max_interval_ms": 4,
        "busy_factor": 16,
    }
    machine = out["machine"]
    assert machine["mals"] == [10, 20, 30]
    assert machine["nodes"][1] == {"id": 1, "cpus": [2, 3]}
    assert machine["cpus"][3] == {"id": 3, "node": 1, "speed": 1.0}


def test_text_output_shows_machine_and_each_distinct_hierarchy_once(run):
    r = run("topology", "mehta-m1", "--domains", "two-level")
    assert r.code == 0
    assert "16 nodes, 32 CPUs, 6 memory access levels (MALs: 10 20 30 40 50 60)" in r.out
    # Every CPU pair of a node shares a hierarchy up to group order: 16 distinct classes.
    assert "16 distinct hierarchies" in r.out
    assert "CPUs 0-1 (node 0), shown for CPU 0:" in r.out
    assert "groups {0} {1}" in r.out


def test_linux_text_output_shows_balance_masks(run):
    r = run("topology", "mehta-m1", "--domains", "linux")
    assert r.code == 0
    assert " mask " in r.out


def test_asymmetric_preset_shows_speeds(run):
    r = run("topology", "amc1")
    assert "speeds" in r.out
    assert "   0  0-1             2 1" in r.out


def test_numactl_hardware_output_is_a_machine(run, tmp_path):
    path = tmp_path / "numactl.txt"
    path.write_text(
        "available: 2 nodes (0-1)\n"
        "node 0 cpus: 0 1 2 3\nnode 0 size: 1000 MB\nnode 0 free: 10 MB\n"
        "node 1 cpus: 4 5 6 7\nnode 1 size: 1000 MB\nnode 1 free: 10 MB\n"
        "node distances:\nnode   0   1 \n  0:  10  21 \n  1:  21  10 \n"
    )
    m = Machine.from_file(path, cpus_per_node=4)
    assert m.distances == [[10, 21], [21, 10]]
    assert m.cpus == 8


def test_yaml_machine_file(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: ring\ncpus_per_node: 2\ngenerator:\n  kind: ring\n  nodes: 8\n  step: 10\n"
        "speed:\n  fast: 2.0\n  fast_cpus: [0, 3]\n"
    )
    m = Machine.from_file(path)
    assert m.name == "ring"
    assert m.distances[0] == [10, 20, 30, 40, 50, 40, 30, 20]
    assert m.speeds[:4] == [2.0, 1.0, 1.0, 2.0]


def test_toml_file_with_relative_distance_file(tmp_path):
    (tmp_path / "t.slit").write_text("10 20\n20 10\n")
    (tmp_path / "m.toml").write_text('cpus = [1, 3]\ndistance_file = "t.slit"\n')
    m = Machine.from_file(tmp_path / "m.toml")
    assert (m.nodes, m.cpus, m.node_cpus(1)) == (2, 4, [1, 2, 3])
    assert m.name == "m"


def fake_sysfs(root, nodes):
    """nodes: list of (cpulist text, distance row)."""
    base = root / "sys/devices/system/node"
    for i, (cpulist, row) in enumerate(nodes):
        d = base / f"node{i}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
        (d / "distance").write_text(" ".join(map(str, row)) + "\n")
    (base / "possible").write_text(f"0-{len(nodes) - 1}\n")  # not a node directory
    return root


def test_host_from_fake_sysfs(run, tmp_path):
    fake_sysfs(tmp_path, [("0-1,4", [10, 21, 31]), ("2-3,5", [21, 10, 21]), ("", [31, 21, 10])])
    m = Machine.host(tmp_path)
    assert (m.nodes, m.cpus) == (3, 6)
    assert m.node_cpus(0) == [0, 1, 4]
    assert m.node_cpus(2) == []
    r = run("topology", "host", "--sysfs-root", tmp_path, "--json")
    assert r.code == 0
    out = json.loads(r.out)
    assert out["domains"]["cpus"]["4"][0]["span"] == [0, 1, 4]


def test_host_with_sparse_cpu_ids_is_renumbered_with_a_warning(run, tmp_path):
    fake_sysfs(tmp_path, [("0,8", [10, 20]), ("16,24", [20, 10])])
    r = run("topology", "host", "--sysfs-root", tmp_path)
    assert r.code == 0
    assert "renumbers them" in r.err
    assert Machine.host(tmp_path).node_cpus(1) == [2, 3]


def test_real_host_reads():
    m = Machine.host()
    assert m.cpus >= 1
    assert m.nodes >= 1


def test_every_preset_under_every_builder(run):
    for p in presets():
        for b in builders():
            r = run("topology", p.name, "--domains", b[0], "--json")
            assert r.code == 0, (p.name, b[0], r.err)
            cpus = json.loads(r.out)["domains"]["cpus"]
            top = cpus["0"][-1]["span"]
            assert len(top) == Machine.preset(p.name).cpus


@st.composite
def symmetric_tables(draw):
    n = draw(st.integers(1, 7))
    rows = [[10] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            rows[i][j] = rows[j][i] = draw(st.integers(11, 255))
    return rows


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=symmetric_tables(), cpn=st.integers(1, 3))
def test_any_valid_table_round_trips_and_builds(tmp_path_factory, rows, cpn):
    path = tmp_path_factory.mktemp("t") / "t.slit"
    path.write_text("\n".join(" ".join(map(str, r)) for r in rows))
    m = Machine.from_file(path, cpus_per_node=cpn)
    assert m.distances == rows
    assert m.mals == sorted({v for r in rows for v in r})
    assert m.warnings == []
    for b, _, _ in builders():
        cpus = m.domains(b)["cpus"]
        for cpu in range(m.cpus):
            levels = cpus[str(cpu)]
            for lower, upper in itertools.pairwise(levels):
                assert set(lower["span"]) < set(upper["span"])
            if m.cpus > 1:
                assert levels[-1]["span"] == list(range(m.cpus))
                assert cpu in levels[0]["groups"][0]["span"]
