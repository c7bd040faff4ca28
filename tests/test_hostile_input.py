"""Damaged and foreign result stores, bounded inputs, and files read whole and read right.

Every bad input here gets exit code 2 (or, for the Python API, one exception), exactly one line
on stderr, and that line names the file or option and the field. Inputs that used to hang or
fill memory (a link to /dev/zero, 10^12 replications, a speed of 1e-300) run in a child process
with a time and memory limit, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

TWO = 'name = "two"\ncpus_per_node = 2\ndistances = [[10, 20], [20, 10]]\n'
SLIT = "10 20\n20 10\n"
NUMACTL_HEAD = "node distances:\nnode 0 1\n0: 10 20\n1: 20 10\n"
HEADER = "pid,tgid,arrival_ns,demand_ns,kind,mem,spawn_cpu,burst_mean_ns,wait_mean_ns,seed\n"
CSV = HEADER + "0,0,0,1000000,cpu,0,,0,0,0\n"
EXPERIMENT = """name = "tiny"
machines = ["hp-superdome-4"]
baseline = "linux26@two-level"
policies = ["linux26@flat"]
replications = 1
seed = 1
[sweep]
n = [4]
[[workload]]
name = "w"
spec = "kind=cpu,exec=10"
"""
RUN = ["run", "--machine", "hp-superdome-4", "--workload", "n=4,kind=cpu,exec=10"]
COMPARE = ["compare", "--machine", "hp-superdome-4", "--workload", "n=4,kind=cpu,exec=10",
           "--policies", "linux26@two-level,linux26@flat",
           "--replications", "1", "--jobs", "1"]  # fmt: skip
LINK = object()  # a file that is a symbolic link to /dev/zero
KERNEL_RUNS = Path(__file__).parent / "data" / "kernel" / "runs"


def _exp(**changes: str) -> str:
    text = EXPERIMENT
    for key, value in changes.items():
        lines = text.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key} ="))
        text = "\n".join([f"{key} = {value}", *lines[:at], *lines[at + 1 :]]) + "\n"
    return text


def _toml(extra: str, base: str = TWO) -> str:
    return base + extra


# (id, files {name: text | LINK}, args ({d} is the test's directory), words the line must hold,
#  in a child process: for inputs that hung or filled memory before they were bounded)
CASES = [
    # --- §3: files read with a limit --------------------------------------------------------
    (
        "slit-link-to-dev-zero",
        {"t.slit": LINK},
        ["topology", "{d}/t.slit", "--cpus-per-node", "2"],
        ["t.slit", "not a regular file"],
        True,
    ),
    (
        "toml-distance-file-dev-zero",
        {"m.toml": 'cpus_per_node = 2\ndistance_file = "/dev/zero"\n'},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field distance_file", "NUL byte"],
        True,
    ),
    (
        "toml-distance-file-link",
        {"m.toml": 'cpus_per_node = 2\ndistance_file = "z.slit"\n', "z.slit": LINK},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field distance_file", "z.slit", "NUL byte"],
        True,
    ),
    (
        "workload-csv-link",
        {"w.csv": LINK},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "NUL byte"],
        True,
    ),
    (
        "workload-json-link",
        {"w.json": LINK},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        ["w.json", "NUL byte"],
        True,
    ),
    (
        "machine-toml-link",
        {"m.toml": LINK},
        ["topology", "{d}/m.toml"],
        ["m.toml", "not a regular file"],
        True,
    ),
    (
        "machine-yaml-link",
        {"m.yaml": LINK},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "not a regular file"],
        True,
    ),
    (
        "experiment-link",
        {"e.toml": LINK},
        ["reproduce", "{d}/e.toml", "--out", "{d}/o"],
        ["e.toml", "NUL byte"],
        True,
    ),
    (
        "mix-link",
        {"mix.toml": LINK},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/mix.toml"],
        ["mix.toml", "NUL byte"],
        True,
    ),
    (
        "slit-with-nul",
        {"t.slit": "10 20\n20 10\0\n"},
        ["topology", "{d}/t.slit", "--cpus-per-node", "1"],
        ["t.slit", "NUL byte"],
        False,
    ),
    (
        "csv-with-nul",
        {"w.csv": CSV + "\0"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "NUL byte"],
        False,
    ),
    ("toml-with-nul", {"m.toml": TWO + "\0"}, ["topology", "{d}/m.toml"], ["m.toml", "NUL"], False),
    (
        "yaml-with-nul",
        {"m.yaml": "cpus_per_node: 2\0\n"},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "NUL byte"],
        False,
    ),
    (
        "experiment-with-nul",
        {"e.toml": EXPERIMENT + "\0"},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "NUL byte"],
        False,
    ),
    (
        "toml-distance-file-a-directory",
        {"m.toml": 'cpus_per_node = 2\ndistance_file = "."\n'},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field distance_file", "cannot read"],
        False,
    ),
    (
        "saved-run-json-link",
        {"o/run.json": LINK, "o/events.json": "{}"},
        ["trace", "{d}/o"],
        ["run.json", "NUL byte"],
        True,
    ),
    (
        "saved-events-link",
        {"o/run.json": "{}", "o/events.json": LINK},
        ["trace", "{d}/o"],
        ["events.json", "NUL byte"],
        True,
    ),
    (
        "experiment-machine-dev-zero",
        {"e.toml": EXPERIMENT.replace('"hp-superdome-4"', '"/dev/zero"')},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "machines", "/dev/zero", "not a regular file"],
        False,
    ),
    (
        "workload-csv-a-directory",
        {"w.csv/x": ""},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "cannot read"],
        False,
    ),
    # --- §3: sizes and counts against their caps ---------------------------------------------
    (
        "table-4097-wide",
        {"t.slit": "10 " * 4097 + "\nx\n"},
        ["topology", "{d}/t.slit", "--cpus-per-node", "1"],
        ["t.slit", "line 1", "4097 values", "4096"],
        False,
    ),
    (
        "table-4097-rows",
        {"t.slit": "10\n" * 4097},
        ["topology", "{d}/t.slit", "--cpus-per-node", "1"],
        ["t.slit", "4097 rows", "4096"],
        False,
    ),
    (
        "numactl-5000-columns",
        {"t.txt": "node distances:\nnode " + " ".join(map(str, range(5000))) + "\n0: 10\n"},
        ["topology", "{d}/t.txt", "--cpus-per-node", "1"],
        ["t.txt", "line 2", "5000 nodes", "4096"],
        False,
    ),
    (
        "cpus-per-node-overflow",
        {"t.slit": SLIT},
        ["topology", "{d}/t.slit", "--cpus-per-node", "99999999999999999999"],
        ["t.slit", "--cpus-per-node", "more than 16384 CPUs"],
        False,
    ),
    (
        "cpus-per-node-16385",
        {"t.slit": SLIT},
        ["topology", "{d}/t.slit", "--cpus-per-node", "16385"],
        ["t.slit: --cpus-per-node", "16384"],
        False,
    ),
    (
        "run-cpus-per-node-overflow",
        {"t.slit": SLIT},
        [
            "run",
            "--machine",
            "{d}/t.slit",
            "--workload",
            "n=2",
            "--cpus-per-node",
            "99999999999999999999",
        ],
        ["t.slit: --cpus-per-node", "16384"],
        False,
    ),
    (
        "reproduce-replications-1e12",
        {},
        ["reproduce", "origin-aware-m1", "--replications", "1000000000000", "--out", "{d}/o"],
        ["--replications", "1000000000000 replications", "1 000 000"],
        True,
    ),
    (
        "compare-replications-1e12",
        {},
        [*COMPARE[:-4], "--replications", "1000000000000", "--out", "{d}/o"],
        ["--replications", "1000000000000 replications"],
        True,
    ),
    (
        "experiment-replications-1e12",
        {"e.toml": _exp(replications="1000000000000")},
        ["reproduce", "{d}/e.toml", "--out", "{d}/o"],
        ["e.toml", "replications", "1 000 000"],
        True,
    ),
    (
        "experiment-replications-over-budget",
        {"e.toml": _exp(replications="600000")},
        ["reproduce", "{d}/e.toml", "--out", "{d}/o"],
        ["e.toml", "replications", "1200000 runs"],
        True,
    ),
    (
        "sweep-n-too-large",
        {"e.toml": EXPERIMENT.replace("n = [4]", "n = [1000000000]")},
        ["reproduce", "{d}/e.toml", "--out", "{d}/o"],
        ["e.toml", "sweep.n = 1000000000", "'w'"],
        True,
    ),
    (
        "compare-n-too-large",
        {},
        [
            "compare",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=1000000000,kind=cpu",
            "--policies",
            "linux26,linux26@flat",
            "--out",
            "{d}/o",
        ],
        ["--workload: key n", "GB"],
        False,
    ),
    (
        "speed-fast-1e-300",
        {"m.toml": _toml('[speed]\nfast = 1e-300\nfast_cpus = "first-half"\n')},
        [*RUN[:2], "{d}/m.toml", *RUN[3:]],
        ["m.toml", "field speed.fast", "0.001..1000"],
        True,
    ),
    (
        "speed-fast-1e300",
        {"m.toml": _toml('[speed]\nfast = 1e300\nfast_cpus = "first-half"\n')},
        [*RUN[:2], "{d}/m.toml", *RUN[3:]],
        ["m.toml", "field speed.fast", "0.001..1000"],
        False,
    ),
    (
        "speed-fast-1e4",
        {"m.toml": _toml('[speed]\nfast = 1e4\nfast_cpus = "first-half"\n')},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field speed.fast", "10000"],
        False,
    ),
    (
        "speed-fast-1e-4",
        {"m.toml": _toml("[speed]\nfast = 1e-4\nfast_cpus = [0]\n")},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field speed.fast", "0.0001"],
        False,
    ),
    (
        "speed-fast-none-1e9",
        {"m.toml": _toml('[speed]\nfast = 1e9\nfast_cpus = "none"\n')},
        ["topology", "{d}/m.toml"],
        ["m.toml", "field speed.fast"],
        False,
    ),
    (
        "yaml-speed-1e300",
        {
            "m.yaml": "cpus_per_node: 2\ndistances: [[10, 20], [20, 10]]\n"
            "speed: {fast: 1.0e+300, fast_cpus: first-half}\n"
        },
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "field speed.fast"],
        False,
    ),
    # --- §4: numactl --hardware output --------------------------------------------------------
    (
        "numactl-disagrees-with-cpus-per-node",
        {"n.txt": "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 1 cpus: 2 3\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt", "--cpus-per-node", "3"],
        ["n.txt", "--cpus-per-node 3", "node 0"],
        False,
    ),
    (
        "numactl-bad-cpu-list",
        {"n.txt": "node 0 cpus: 0 x\nnode 1 cpus: 2\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "'x' is not a CPU id"],
        False,
    ),
    (
        "numactl-cpu-range",
        {"n.txt": "node 0 cpus: 0-1\nnode 1 cpus: 2\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "'0-1'"],
        False,
    ),
    (
        "numactl-negative-cpu",
        {"n.txt": "node 0 cpus: -1\nnode 1 cpus: 0\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "'-1'"],
        False,
    ),
    (
        "numactl-huge-cpu",
        {"n.txt": "node 0 cpus: 99999999999\nnode 1 cpus: 0\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "99999999999"],
        False,
    ),
    (
        "numactl-cpu-on-two-nodes",
        {"n.txt": "node 0 cpus: 0 1\nnode 1 cpus: 1 2\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 2", "cpu 1 is listed in node 0 and node 1"],
        False,
    ),
    (
        "numactl-available-3-of-2",
        {"n.txt": "available: 3 nodes (0-2)\nnode 0 cpus: 0\nnode 1 cpus: 1\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "3 nodes", "2 rows"],
        False,
    ),
    (
        "numactl-available-not-a-number",
        {"n.txt": "available: x nodes\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt", "--cpus-per-node", "1"],
        ["n.txt", "line 1", "'x'"],
        False,
    ),
    (
        "numactl-one-cpu-line-of-two",
        {"n.txt": "node 0 cpus: 0 1\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "CPUs of 1 nodes", "2 rows"],
        False,
    ),
    (
        "numactl-nodes-out-of-order",
        {"n.txt": "node 1 cpus: 0\nnode 0 cpus: 1\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "node 1"],
        False,
    ),
    (
        "numactl-cpu-ids-with-a-gap",
        {"n.txt": "node 0 cpus: 0 1\nnode 1 cpus: 5 6\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "cpu 5", "out of range"],
        False,
    ),
    (
        "numactl-bad-node-label",
        {"n.txt": "node zero cpus: 0\nnode 1 cpus: 1\n" + NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "line 1", "'zero'"],
        False,
    ),
    (
        "numactl-no-cpus-no-option",
        {"n.txt": NUMACTL_HEAD},
        ["topology", "{d}/n.txt"],
        ["n.txt", "--cpus-per-node"],
        False,
    ),
    (
        "numactl-3-rows-under-2-columns",
        {"n.txt": "node distances:\nnode 0 1\n0: 10 20\n1: 20 10\n2: 20 20\n"},
        ["topology", "{d}/n.txt", "--cpus-per-node", "1"],
        ["n.txt", "line 3", "square"],
        False,
    ),
    # --- §4: YAML duplicate keys, generators ----------------------------------------------------
    (
        "yaml-duplicate-top-key",
        {"m.yaml": "cpus_per_node: 2\ncpus_per_node: 4\ndistances: [[10]]\n"},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "line 2", "'cpus_per_node' is given twice"],
        False,
    ),
    (
        "yaml-duplicate-nested-key",
        {
            "m.yaml": "cpus_per_node: 2\ndistances: [[10]]\n"
            "speed:\n  fast: 2.0\n  fast: 3.0\n  fast_cpus: none\n"
        },
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "line 5", "'fast' is given twice"],
        False,
    ),
    (
        "yaml-duplicate-generator-key",
        {
            "m.yaml": "cpus_per_node: 1\ngenerator:\n  kind: ring\n"
            "  nodes: 4\n  nodes: 8\n  step: 10\n"
        },
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "'nodes' is given twice"],
        False,
    ),
    (
        "yaml-duplicate-flow-key",
        {"m.yaml": "{cpus_per_node: 2, cpus_per_node: 2, distances: [[10]]}\n"},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "'cpus_per_node' is given twice"],
        False,
    ),
    (
        "hierarchy-10-by-4",
        {
            "m.toml": 'cpus_per_node = 1\n[generator]\nkind = "hierarchy"\n'
            "nodes = 10\ngroup_sizes = [4]\ndistances = [20, 30]\n"
        },
        ["topology", "{d}/m.toml"],
        ["m.toml", "field generator", "10 nodes"],
        False,
    ),
    (
        "hierarchy-12-by-2-4",
        {
            "m.toml": 'cpus_per_node = 1\n[generator]\nkind = "hierarchy"\n'
            "nodes = 12\ngroup_sizes = [2, 4]\ndistances = [20, 30, 40]\n"
        },
        ["topology", "{d}/m.toml"],
        ["m.toml", "field generator", "groups of 8"],
        False,
    ),
    (
        "hierarchy-6-by-4",
        {
            "m.toml": 'cpus_per_node = 1\n[generator]\nkind = "hierarchy"\n'
            "nodes = 6\ngroup_sizes = [4]\ndistances = [20, 30]\n"
        },
        ["topology", "{d}/m.toml"],
        ["m.toml", "field generator", "6 nodes"],
        False,
    ),
    (
        "yaml-hierarchy-10-by-4",
        {
            "m.yaml": "cpus_per_node: 1\ngenerator: {kind: hierarchy, "
            "nodes: 10, group_sizes: [4], distances: [20, 30]}\n"
        },
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "field generator"],
        False,
    ),
    # --- §4: names ------------------------------------------------------------------------------
    (
        "experiment-name-nul",
        {"e.toml": _exp(name='"a\\u0000b"')},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "name", "control character"],
        False,
    ),
    (
        "experiment-name-newline",
        {"e.toml": _exp(name='"a\\nb"')},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "name", "control character"],
        False,
    ),
    (
        "workload-name-nul",
        {"e.toml": EXPERIMENT.replace('name = "w"', 'name = "w\\u0000"')},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "workload.0.name", "control character"],
        False,
    ),
    (
        "workload-name-escape",
        {"e.toml": EXPERIMENT.replace('name = "w"', 'name = "w\\u001b[31m"')},
        ["reproduce", "{d}/e.toml"],
        ["e.toml", "workload.0.name", "control character"],
        False,
    ),
    # --- §4: misleading messages ----------------------------------------------------------------
    (
        "json-workload-nan",
        {"w.json": '{"processes": [{"pid": 0, "demand_ns": NaN}]}'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        ["w.json", "NaN is not a number JSON allows"],
        False,
    ),
    (
        "json-workload-infinity",
        {"w.json": '{"processes": [{"pid": 0, "arrival_ns": Infinity}]}'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        ["w.json", "Infinity is not a number JSON allows"],
        False,
    ),
    (
        "json-workload-minus-infinity",
        {"w.json": '{"processes": [{"pid": 0, "mem": -Infinity}]}'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        ["w.json", "-Infinity is not a number JSON allows"],
        False,
    ),
    (
        "run-out-dangling-link",
        {"o": ("link", "missing-dir")},
        [*RUN, "--out", "{d}/o"],
        ["o: a symbolic link to", "missing-dir", "does not exist"],
        False,
    ),
    (
        "compare-out-dangling-link",
        {"o": ("link", "missing-dir")},
        [*COMPARE, "--out", "{d}/o"],
        ["o: a symbolic link to", "does not exist"],
        False,
    ),
    ("run-out-is-a-file", {"o": "x"}, [*RUN, "--out", "{d}/o"], ["o", "is a file"], False),
    (
        "run-out-holds-a-store",
        {"o/results.sqlite": ""},
        [*RUN, "--out", "{d}/o"],
        ["o", "result store"],
        False,
    ),
    # --- §1: stores that are not numasim's ------------------------------------------------------
    (
        "store-not-sqlite",
        {"o/results.sqlite": "hello, not a database\n" * 100},
        [*COMPARE, "--out", "{d}/o"],
        ["results.sqlite", "not a numasim result store ("],
        False,
    ),
    (
        "store-random-bytes",
        {"o/results.sqlite": bytes(range(256)) * 64},
        [*COMPARE, "--out", "{d}/o"],
        ["results.sqlite", "not a numasim result store ("],
        False,
    ),
    (
        "store-a-directory",
        {"o/results.sqlite/x": ""},
        [*COMPARE, "--out", "{d}/o"],
        ["results.sqlite", "cannot open"],
        False,
    ),
    # --- more inputs a newcomer gives: experiment files, specs, options, machine files,
    # workloads, mixes, assumptions, saved-run and kernel-run paths --------------------------
    (
        "exp-replications-negative",
        {"e.toml": _exp(replications="-1")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "replications", "should be greater than or equal to 1 (go"],
        False,
    ),
    (
        "exp-seed-string",
        {"e.toml": _exp(seed='"x"')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "seed", "should be a valid integer (got 'x')"],
        False,
    ),
    (
        "exp-machines-empty",
        {"e.toml": _exp(machines="[]")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "machines", "is empty"],
        False,
    ),
    (
        "exp-n-empty",
        {"e.toml": EXPERIMENT.replace("n = [4]", "n = []")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "sweep.n", "is empty"],
        False,
    ),
    (
        "exp-n-zero",
        {"e.toml": EXPERIMENT.replace("n = [4]", "n = [0]")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "sweep.n.0", "should be greater than 0 (got 0)"],
        False,
    ),
    (
        "exp-n-float",
        {"e.toml": EXPERIMENT.replace("n = [4]", "n = [4.5]")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "sweep.n.0", "should be a valid integer (got 4.5)"],
        False,
    ),
    (
        "exp-unknown-key",
        {"e.toml": "foo = 1\n" + EXPERIMENT},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "unknown key 'foo'; allowed", "assumptions, baseline, claim, confidence"],
        False,
    ),
    (
        "exp-policy-unknown",
        {"e.toml": _exp(policies='["nope"]')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "unknown policy 'nope'; choose one of lin"],
        False,
    ),
    (
        "exp-domains-unknown",
        {"e.toml": _exp(baseline='"linux26@nope"')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "unknown domain builder 'nope'; choose on"],
        False,
    ),
    (
        "exp-policies-duplicate",
        {"e.toml": _exp(policies='["linux26@flat", "linux26@flat"]')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "policies", "linux26@flat is listed twice (the baseli"],
        False,
    ),
    (
        "exp-baseline-in-policies",
        {"e.toml": _exp(policies='["linux26@two-level"]')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "policies", "linux26@two-level is the baseline too (t"],
        False,
    ),
    (
        "exp-confidence-1",
        {"e.toml": EXPERIMENT.replace("seed = 1", "seed = 1\nconfidence = 1.0")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "confidence", "should be less than 1 (got 1.0)"],
        False,
    ),
    (
        "exp-workload-spec-bad",
        {"e.toml": EXPERIMENT.replace("kind=cpu,exec=10", "kind=gpu")},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "workload 'w'", "key kind", "'gpu' is not one of cpu, io, mixed"],
        False,
    ),
    (
        "exp-workload-dup-name",
        {"e.toml": EXPERIMENT + '[[workload]]\nname = "w"\nspec = "kind=io"\n'},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        ["e.toml", "workload", "w named more than once"],
        False,
    ),
    (
        "exp-machine-unknown",
        {"e.toml": _exp(machines='["nope-9"]')},
        ["reproduce", "{d}/e.toml", "--out", "o"],
        [
            "e.toml",
            "machines",
            "nope-9",
            "unknown machine",
            "not a preset (see `numasim list machines",
        ],
        False,
    ),
    (
        "wl-kind-gpu",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,kind=gpu"],
        ["--workload", "key kind", "'gpu' is not one of cpu, io, mixed"],
        False,
    ),
    (
        "wl-exec-negative",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,exec=-5"],
        ["--workload", "key exec", "-5 ms must be a non-negative time"],
        False,
    ),
    (
        "wl-dup-key",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,n=5"],
        ["--workload", "key n", "'n' is given twice"],
        False,
    ),
    (
        "wl-arrival-negative",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,arrival=uniform:-1"],
        ["--workload", "key arrival", "-1 ms must be a non-negative time"],
        False,
    ),
    (
        "wl-mem-2",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,mem=2"],
        ["--workload", "key mem", "2 must be between 0 and 1"],
        False,
    ),
    (
        "wl-exec-nan",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,exec=nan"],
        ["--workload", "key exec", "nan ms must be a non-negative time"],
        False,
    ),
    (
        "wl-exec-inf",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,exec=inf"],
        ["--workload", "key exec", "inf ms must be a non-negative time"],
        False,
    ),
    (
        "wl-empty-value",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,exec="],
        ["--workload", "key exec", "'' is not a number of milliseconds"],
        False,
    ),
    (
        "wl-no-equals",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4,exec"],
        ["--workload", "'exec' is not key=value"],
        False,
    ),
    (
        "run-seed-negative",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--seed", "-1"],
        ["Invalid value for '--seed'", "-1 is not in the range 0<=x<=18446744073"],
        False,
    ),
    (
        "run-seed-huge",
        {},
        [
            "run",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--seed",
            "18446744073709551616",
        ],
        ["Invalid value for '--seed'", "18446744073709551616 is not in the range"],
        False,
    ),
    (
        "run-policy-bad-option",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--policy", "linux:foo=bar"],
        ["--policy", "unknown linux option 'foo'; choose slice"],
        False,
    ),
    (
        "run-policy-bad-value",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--policy", "linux:numa=maybe"],
        ["--policy", "unknown linux option 'numa'; choose slic"],
        False,
    ),
    (
        "run-policy-empty",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--policy", ""],
        ["--policy", "unknown policy ''; choose one of linux26"],
        False,
    ),
    (
        "run-domains-unknown",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--domains", "nope"],
        ["--domains", "unknown domain builder 'nope'; choose on"],
        False,
    ),
    (
        "compare-replications-0",
        {},
        [
            "compare",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--policies",
            "linux26,origin-aware",
            "--replications",
            "0",
        ],
        ["--replications must be at least 1, got 0"],
        False,
    ),
    (
        "compare-confidence-1.5",
        {},
        [
            "compare",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--policies",
            "linux26,origin-aware",
            "--confidence",
            "1.5",
        ],
        ["--confidence must be in [0.5, 1), got 1."],
        False,
    ),
    (
        "compare-one-policy",
        {},
        ["compare", "--machine", "hp-superdome-4", "--workload", "n=4", "--policies", "linux26"],
        ["--policies needs a baseline and at least"],
        False,
    ),
    (
        "compare-jobs-0",
        {},
        [
            "compare",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--policies",
            "linux26,origin-aware",
            "--jobs",
            "0",
        ],
        ["Invalid value for '--jobs'", "0 is not in the range x>=1."],
        False,
    ),
    (
        "m-cpus-per-node-0",
        {"m.toml": 'name="m"\ncpus_per_node = 0\ndistances = [[10]]\n'},
        ["topology", "{d}/m.toml"],
        ["m.toml", "the machine has no CPU"],
        False,
    ),
    (
        "m-diag-0",
        {"m.toml": 'name="m"\ncpus_per_node = 1\ndistances = [[0, 20], [20, 0]]\n'},
        ["topology", "{d}/m.toml"],
        ["m.toml (field distances)", "row 0, column 0", "0 is below 10, the local distance"],
        False,
    ),
    (
        "m-ragged",
        {"m.toml": 'name="m"\ncpus_per_node = 1\ndistances = [[10, 20], [20]]\n'},
        ["topology", "{d}/m.toml"],
        ["m.toml (field distances)", "row 1", "has 1 values but the table has 2 rows; a"],
        False,
    ),
    (
        "m-speeds-wrong-length",
        {"m.toml": TWO + "speeds = [1.0]\n"},
        ["topology", "{d}/m.toml"],
        ["m.toml", "line 4, column 1, key speeds", "unknown field `speeds`, expected one of "],
        False,
    ),
    (
        "m-speeds-negative",
        {"m.toml": TWO + "speeds = [1.0, -1.0, 1.0, 1.0]\n"},
        ["topology", "{d}/m.toml"],
        ["m.toml", "line 4, column 1, key speeds", "unknown field `speeds`, expected one of "],
        False,
    ),
    (
        "m-yaml-invalid",
        {"m.yaml": "name: [unclosed\n"},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "line 2, column 1", "expected ',' or ']', but got '<stream en"],
        False,
    ),
    (
        "m-yaml-list",
        {"m.yaml": "- 1\n- 2\n"},
        ["topology", "{d}/m.yaml"],
        ["m.yaml", "a machine file must be a mapping of keys"],
        False,
    ),
    (
        "m-toml-invalid",
        {"m.toml": "name = \n"},
        ["topology", "{d}/m.toml"],
        ["m.toml", "line 1, column 8", "string values must be quoted, expected l"],
        False,
    ),
    (
        "m-distance-string",
        {"m.toml": 'name="m"\ncpus_per_node = 1\ndistances = [["10"]]\n'},
        ["topology", "{d}/m.toml"],
        [
            "m.toml",
            "line 3, column 15, key distances[0][0]",
            "invalid type",
            'string "10", expected a list of rows of ',
        ],
        False,
    ),
    (
        "csv-dup-pid",
        {"w.csv": HEADER + "0,0,0,1000000,cpu,0,0,0,0,0\n" * 2},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "process 1 (pid 0)", "pid 0 out of order", "pids must be 0, 1, 2, … in order"],
        False,
    ),
    (
        "csv-negative-arrival",
        {"w.csv": HEADER + "0,0,-5,1000000,cpu,0,0,0,0,0\n"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "line 2, column arrival_ns", "'-5' is not a whole number of nanosecond"],
        False,
    ),
    (
        "csv-missing-column",
        {"w.csv": "pid,tgid\n0,0\n"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        [
            "w.csv",
            "line 1",
            "the header must be exactly",
            "pid,tgid,arrival_ns,demand_ns,kind,mem,s",
        ],
        False,
    ),
    (
        "csv-kind-bad",
        {"w.csv": HEADER + "0,0,0,1000000,gpu,0,0,0,0,0\n"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "line 2, column kind", "'gpu' is not one of cpu, io"],
        False,
    ),
    (
        "csv-spawn-cpu-out",
        {"w.csv": HEADER + "0,0,0,1000000,cpu,0,999,0,0,0\n"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "process 0 (pid 0)", "spawn cpu 999 does not exist (the machin"],
        False,
    ),
    (
        "csv-empty",
        {"w.csv": ""},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        [
            "w.csv",
            "line 1",
            "the header must be exactly",
            "pid,tgid,arrival_ns,demand_ns,kind,mem,s",
        ],
        False,
    ),
    (
        "csv-header-only",
        {"w.csv": HEADER},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.csv"],
        ["w.csv", "the workload is empty"],
        False,
    ),
    (
        "json-not-list",
        {"w.json": '{"a": 1}'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        ["w.json", "line 1, column 4, key a", "unknown field `a`, expected `processes` "],
        False,
    ),
    (
        "json-empty-list",
        {"w.json": "[]"},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/w.json"],
        [
            "w.json",
            'a JSON workload is an object {"processes',
            "[...]} (as numasim run --out writes it)",
        ],
        False,
    ),
    (
        "mix-threads-0",
        {"mix.toml": '[[app]]\nname = "canneal"\nthreads = 0\n'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/mix.toml"],
        ["mix.toml", "app.0.threads", "should be greater than or equal to 1 (go"],
        False,
    ),
    (
        "mix-app-unknown",
        {"mix.toml": '[[app]]\nname = "nope"\nthreads = 2\n'},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/mix.toml"],
        ["mix.toml", "app.0.name", "unknown application 'nope'; choose one o"],
        False,
    ),
    (
        "mix-empty",
        {"mix.toml": ""},
        ["run", "--machine", "hp-superdome-4", "--workload", "{d}/mix.toml"],
        ["mix.toml", "missing key 'app'"],
        False,
    ),
    (
        "assume-exec-maybe",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--assume", "exec=maybe"],
        ["--assume", "assumption exec", "unknown value 'maybe'; choose one of cpu"],
        False,
    ),
    (
        "assume-unknown",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--assume", "unknown=1"],
        ["--assume", "unknown assumption 'unknown'; choose one"],
        False,
    ),
    (
        "assume-old-linux",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--assume", "linux"],
        ["--assume", "the profile 'linux' is now called 'kerne", "give kernel26"],
        False,
    ),
    (
        "trace-window-reversed",
        {},
        [
            "run",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--trace",
            "t.json",
            "--trace-window",
            "5:1",
        ],
        ["--trace-window", "need 0 <= START < END, got '5:1'"],
        False,
    ),
    (
        "trace-window-text",
        {},
        [
            "run",
            "--machine",
            "hp-superdome-4",
            "--workload",
            "n=4",
            "--trace",
            "t.json",
            "--trace-window",
            "a:b",
        ],
        ["--trace-window", "'a:b' is not START:END in ms"],
        False,
    ),
    (
        "trace-out-missing-dir",
        {},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--trace", "nodir/t.json"],
        ["t.json", "cannot write", "No such file or directory"],
        False,
    ),
    (
        "run-out-is-file",
        {"f": "x"},
        ["run", "--machine", "hp-superdome-4", "--workload", "n=4", "--out", "{d}/f"],
        ["Invalid value for '--out'", "f' is a file."],
        False,
    ),
    (
        "topology-unknown",
        {},
        ["topology", "nope-machine"],
        ["nope-machine", "unknown machine", "not a preset (see `numasim list machines"],
        False,
    ),
    (
        "validate-empty-dir",
        {"d/x": "y"},
        ["validate", "{d}/d"],
        ["runs.json", "cannot read the kernel runs' index", "No such file or directory"],
        False,
    ),
    (
        "validate-policy-unknown",
        {},
        ["validate", str(KERNEL_RUNS / "ring-4x2-k6.1-t8-fork-nbon"), "--policy", "nope"],
        ["--policy", "unknown policy 'nope'; choose one of lin"],
        False,
    ),
    (
        "reproduce-unknown-name",
        {},
        ["reproduce", "nope-exp"],
        [
            "nope-exp",
            "unknown experiment; shipped ones",
            "capability-amc1, capability-amc2, capabi",
        ],
        False,
    ),
    (
        "reproduce-ablate-report-replications-0",
        {},
        ["reproduce", "origin-aware-m1", "--replications", "0"],
        ["--replications must be at least 1, got 0"],
        False,
    ),
    ("list-unknown", {}, ["list", "nope"], ["No such command 'nope'."], False),
    (
        "bench-only-unknown",
        {},
        ["bench", "--only", "zz"],
        ["unknown scenario zz; known", "a, "],
        False,
    ),
]

RUNS = "CREATE TABLE runs (key TEXT PRIMARY KEY, key_json TEXT, row_json TEXT)"
RUNS_LOOSE = "CREATE TABLE runs (key TEXT, key_json TEXT, row_json TEXT)"
#: SQLite stores made by hand: (id, SQL statements, words of the refusal).
FOREIGN_STORES = [
    ("users-table", ["CREATE TABLE users (id INTEGER, name TEXT)",
                     "INSERT INTO users VALUES (1, 'ada')"], "it holds the table users"),
    ("runs-of-other-columns", ["CREATE TABLE runs (id INTEGER, payload BLOB)",
                               "CREATE TABLE meta (name TEXT, value TEXT)"],
     "its runs table has the columns id, payload"),
    ("runs-only", [RUNS],
     "it lacks the table meta"),
    ("extra-table", ["CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                     RUNS,
                     "INSERT INTO meta VALUES ('format', '2')", "CREATE TABLE notes (t TEXT)"],
     "it holds the table notes"),
    ("no-format-row", ["CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                       RUNS],
     "no format in its meta table"),
    ("other-application", ["PRAGMA application_id = 1234"], "application id 0x4d2"),
    ("other-application-with-tables", ["PRAGMA application_id = 77",
                                       "CREATE TABLE meta (name TEXT, value TEXT)",
                                       RUNS_LOOSE],
     "application id 0x4d"),
    ("meta-of-other-columns", ["CREATE TABLE meta (k TEXT, v TEXT)",
                               RUNS],
     "its meta table has the columns k, v"),
    ("a-view", ["CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                RUNS,
                "INSERT INTO meta VALUES ('format', '2')", "CREATE TABLE users (id INTEGER)",
                "CREATE VIEW v AS SELECT * FROM users"], "it holds the table users"),
]  # fmt: skip

#: Ways a stored row can be damaged: (id, SQL value of row_json, words of the warning).
DAMAGED_ROWS = [
    ("not-json", "'{not json'", "its row is not JSON"),
    ("a-list", "'[1, 2, 3]'", "its row is a JSON list, not an object"),
    ("a-number", "'42'", "its row is a JSON int, not an object"),
    ("null-json", "'null'", "its row is a JSON NoneType, not an object"),
    ("missing-metric", "json_remove(row_json, '$.mean_tat_ms')", "its row lacks mean_tat_ms"),
    ("empty-object", "'{}'", "its row lacks mean_tat_ms, median_tat_ms, p95_tat_ms"),
    ("a-string", "'\"text\"'", "its row is a JSON str, not an object"),
    ("blob", "x'00ff'", "its row is not JSON"),
]


#: How long a child may take (the suite's default; lower it to score code that hangs).
CHILD_TIMEOUT_S = float(os.environ.get("NUMASIM_CHILD_TIMEOUT_S", 60))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _cli(run, args: list[str], child: bool):
    """Runs the CLI in this process, or in a child with 60 s and 3 GB (inputs that used to hang
    or fill memory)."""
    if not child:
        return run(*args)
    p = subprocess.run([sys.executable, "-m", "numasim", *args], capture_output=True, text=True,
                       timeout=CHILD_TIMEOUT_S, preexec_fn=_limit_memory, check=False)  # fmt: skip
    return type("R", (), {"code": p.returncode, "out": p.stdout, "err": p.stderr})


def _make(d: Path, files: dict) -> None:
    for name, content in files.items():
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is LINK:
            path.symlink_to("/dev/zero")
        elif isinstance(content, tuple):
            path.symlink_to(d / content[1])
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


#: Set to check only exit code, one line and the first word (the file or option): how the
#: corpus was scored against the code before these checks, whose words differ.
LENIENT = bool(os.environ.get("NUMASIM_CORPUS_LENIENT"))


def _one_line(r, words: list[str]) -> None:
    assert r.code == 2, (r.code, r.out, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("numasim: error: "), r.err
    assert "Traceback" not in r.err
    for word in words[:1] if LENIENT else words:
        assert word in r.err, (word, r.err)


@pytest.mark.parametrize(("files", "args", "words", "child"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_bad_input_is_one_line_naming_file_and_field(run, tmp_path, monkeypatch, files, args,
                                                     words, child):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    _make(tmp_path, files)
    r = _cli(run, [a.replace("{d}", str(tmp_path)) for a in args], child)
    _one_line(r, words)


def _store_with(d: Path, statements: list[str]) -> Path:
    path = d / "o" / "results.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path)
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(("statements", "why"), [c[1:] for c in FOREIGN_STORES],
                         ids=[c[0] for c in FOREIGN_STORES])  # fmt: skip
def test_a_foreign_database_is_refused_and_never_written(run, tmp_path, statements, why):
    path = _store_with(tmp_path, statements)
    before = path.read_bytes()
    r = run(*COMPARE, "--out", tmp_path / "o")
    _one_line(r, [f"{path}: not a numasim result store (", why])
    assert path.read_bytes() == before
    assert not list((tmp_path / "o").glob("*.tmp")) and not (tmp_path / "o" / "figures").exists()


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A store of one compare (2 runs), and what the compare printed."""
    out = tmp_path_factory.mktemp("stored") / "o"
    from numasim.cli import main

    code = main([*COMPARE, "--out", str(out), "--json"])
    assert code == 0
    return out


@pytest.mark.parametrize(("value", "problem"), [c[1:] for c in DAMAGED_ROWS],
                         ids=[c[0] for c in DAMAGED_ROWS])  # fmt: skip
def test_a_damaged_row_is_named_and_computed_again(run, tmp_path, stored, value, problem):
    import shutil

    out = tmp_path / "o"
    shutil.copytree(stored, out)
    good = run(*COMPARE, "--out", out, "--json")
    assert good.code == 0, good.err
    db = sqlite3.connect(out / "results.sqlite")
    (key,) = db.execute("SELECT key FROM runs ORDER BY key LIMIT 1").fetchone()
    db.execute(f"UPDATE runs SET row_json = {value} WHERE key = ?", (key,))
    db.commit()
    db.close()
    r = run(*COMPARE, "--out", out, "--json")
    assert r.code == 0, r.err
    if LENIENT:
        assert json.loads(r.out) == json.loads(good.out)
        return
    warning, summary = r.err.splitlines()
    assert warning == (f"numasim: warning: {out / 'results.sqlite'}: run {key[:16]}: {problem}; "
                       "computing it again")  # fmt: skip
    assert summary.startswith("computed 1, reused 1 of 2 runs")
    assert json.loads(r.out) == json.loads(good.out)
    again = run(*COMPARE, "--out", out, "--json")  # the row was replaced: nothing to warn of
    assert again.err == f"resumed 2 of 2 runs from {out}\n"


def test_a_store_made_before_the_application_id_is_still_read(run, tmp_path, stored):
    import shutil

    out = tmp_path / "o"
    shutil.copytree(stored, out)
    db = sqlite3.connect(out / "results.sqlite")
    db.execute("PRAGMA application_id = 0")
    db.commit()
    db.close()
    r = run(*COMPARE, "--out", out, "--json")
    assert r.err == f"resumed 2 of 2 runs from {out}\n"
    db = sqlite3.connect(out / "results.sqlite")
    assert db.execute("PRAGMA application_id").fetchone() == (0x4E554D41,)
    db.close()


@pytest.mark.parametrize(
    ("sqlite_says", "cause"),
    [("database or disk is full", "the disk is full"),
     ("attempt to write a readonly database", "attempt to write a readonly database")],
)  # fmt: skip
def test_a_store_that_cannot_be_written_names_the_cause(tmp_path, sqlite_says, cause):
    from numasim._core import InputError
    from numasim.store import Store

    class Failing:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def execute(self, *a):
            raise sqlite3.OperationalError(sqlite_says)

    with Store.open(tmp_path / "o") as store:
        store.db = Failing()
        with pytest.raises(InputError) as e:
            store.add([("k", "{}", {})])
    assert (
        str(e.value)
        == f"{tmp_path / 'o' / 'results.sqlite'}: cannot write the result store: {cause}"
    )


def test_a_read_only_directory_is_named(tmp_path, monkeypatch):
    from numasim.store import _store_error

    path = tmp_path / "results.sqlite"
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path)
    e = sqlite3.OperationalError("unable to open database file")
    assert _store_error(path, e, "write").endswith(f"its directory {tmp_path} is read-only")


def test_a_failed_table_write_leaves_no_tmp_file(tmp_path):
    from numasim.report import write_whole

    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_whole(tmp_path / "runs.csv", fail)
    assert list(tmp_path.iterdir()) == []


# --- numactl files that are right -----------------------------------------------------------


def test_numactl_cpu_lists_make_the_machine_without_cpus_per_node(run, tmp_path):
    f = tmp_path / "n.txt"
    f.write_text("available: 2 nodes (0-1)\nnode 0 cpus: 0 2 4\nnode 0 size: 100 MB\n"
                 "node 1 cpus: 1 3\nnode 1 size: 100 MB\n" + NUMACTL_HEAD)  # fmt: skip
    r = run("topology", f, "--json")
    assert r.code == 0, r.err
    nodes = json.loads(r.out)["machine"]["nodes"]
    assert [n["cpus"] for n in nodes] == [[0, 2, 4], [1, 3]]
    same = run("topology", f, "--json", "--cpus-per-node", "2")
    assert same.code == 2 and "node 0 has 3 CPUs" in same.err


def test_numactl_with_even_nodes_takes_a_matching_cpus_per_node(run, tmp_path):
    f = tmp_path / "n.txt"
    f.write_text("node 0 cpus: 0 1\nnode 1 cpus: 2 3\n" + NUMACTL_HEAD)
    r = run("topology", f, "--json", "--cpus-per-node", "2")
    assert r.code == 0, r.err


def test_a_speed_at_the_cap_is_accepted(run, tmp_path):
    f = tmp_path / "m.toml"
    f.write_text(TWO + "[speed]\nfast = 1000.0\nfast_cpus = [0]\n")
    assert run("topology", f).code == 0


# --- names never write outside --out --------------------------------------------------------


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".hidden", "..", "sp ace"])
def test_an_experiment_name_stays_inside_out(run, tmp_path, name):
    from numasim.names import file_part

    exp = tmp_path / "deep" / "er" / "e.toml"
    exp.parent.mkdir(parents=True)
    exp.write_text(_exp(name=json.dumps(name)).replace('name = "w"', f"name = {json.dumps(name)}"))
    out = tmp_path / "deep" / "er" / "out"
    before = set(tmp_path.rglob("*"))
    r = run("reproduce", exp, "--out", out)
    assert r.code == 0, r.err
    made = set(tmp_path.rglob("*")) - before
    assert made and all(out in p.parents or p == out for p in made), sorted(made)
    assert "/" not in file_part(name) and not file_part(name).startswith(".")


def test_the_default_out_of_a_name_with_a_slash_is_one_directory(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "e.toml"
    exp.write_text(_exp(name='"../../escape"'))
    r = run("reproduce", exp)
    assert r.code == 0, r.err
    assert [p.name for p in (tmp_path / "numasim-results").iterdir()] == ["_.._escape"]


# --- run --out reused, saved runs checked -----------------------------------------------------


def test_run_out_reused_keeps_no_file_of_the_old_run(run, tmp_path):
    out = tmp_path / "o"
    assert (
        run("run", "--machine", "numa-4x8", "--workload", "app=canneal:2", "--out", out).code == 0
    )
    assert (out / "apps.csv").exists() and (out / "workload.json").exists()
    assert run("trace", out).code == 0 and (out / "trace.json").exists()
    (out / "notes.txt").write_text("mine")
    assert run(*RUN, "--out", out).code == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [".lock", "events.json", "migrations.csv", "notes.txt", "processes.csv",
                     "run.json", "summary.json", "workload.csv"]  # fmt: skip


def test_run_out_respects_the_lock_of_another_numasim(run, tmp_path):
    from numasim.store import lock

    out = tmp_path / "o"
    out.mkdir()
    with lock(out):
        r = run(*RUN, "--out", out)
    _one_line(r, [f"{out} is in use by another numasim (pid {os.getpid()})"])
    assert not (out / "run.json").exists()


@pytest.mark.parametrize(
    ("edit", "what"),
    [(lambda run: run.update(policy="origin-aware"), "run.json"),
     (lambda run: run.update(seed=run["seed"] + 1), "run.json"),
     (lambda run: run.update(digest="0" * 64), "run.json"),
     (lambda run: run["machine"].update(name="other"), "run.json"),
     (None, "events.json")],
    ids=["policy", "seed", "digest", "machine-name", "events-of-another-run"],
)  # fmt: skip
def test_an_edited_saved_run_is_refused_by_trace(run, tmp_path, edit, what):
    out = tmp_path / "o"
    assert run(*RUN, "--out", out).code == 0
    if edit is None:
        other = tmp_path / "other"
        assert run(*RUN, "--seed", "5", "--out", other).code == 0
        (out / "events.json").write_text((other / "events.json").read_text())
    else:
        saved = json.loads((out / "run.json").read_text())
        edit(saved)
        (out / "run.json").write_text(json.dumps(saved))
    r = run("trace", out)
    _one_line(r, [f"{out / 'run.json'}: field digest: does not match", "events.json"])


def test_a_saved_run_names_its_core(run, tmp_path):
    from numasim.store import core_fingerprint

    out = tmp_path / "o"
    assert run(*RUN, "--out", out).code == 0
    assert json.loads((out / "run.json").read_text())["core"] == core_fingerprint()
    assert run("trace", out).code == 0


# --- the Python API speaks its own terms ------------------------------------------------------


def _api_cases():
    import numasim
    from numasim import Machine, Workload, simulate
    from numasim.trace import chrome_trace

    def m1():
        return Machine.preset("mehta-m1")

    def traced():
        return simulate(m1(), "n=4,kind=cpu,exec=10", trace=True).raw_json

    def slit(tmp):
        (tmp / "t.slit").write_text(SLIT)
        return tmp / "t.slit"

    def workload():
        return Workload.generate(m1(), "n=3,kind=cpu,exec=10")

    return [
        ("chrome-trace-of-none", lambda tmp: chrome_trace(None, traced()), TypeError,
         "machine must be a Machine"),
        ("chrome-trace-run-none", lambda tmp: chrome_trace(m1(), None), TypeError,
         "run_json must be a str"),
        ("chrome-trace-other-machine",
         lambda tmp: chrome_trace(Machine.preset("mehta-m3"), traced()), numasim.InputError,
         "the run was made on a machine of 32 CPUs"),
        ("save-into-a-directory", lambda tmp: workload().save(tmp), numasim.InputError,
         "is a directory"),
        ("save-as-xlsx", lambda tmp: workload().save(tmp / "out.xlsx"), numasim.InputError,
         "must end in .csv or .json"),
        ("save-under-a-missing-directory", lambda tmp: workload().save(tmp / "no" / "w.csv"),
         numasim.InputError, "cannot write"),
        ("save-to-none", lambda tmp: workload().save(None), TypeError, "path must be"),
        ("simulate-trace-yes", lambda tmp: simulate(m1(), "n=2", trace="yes"), TypeError,
         "trace must be a bool"),
        ("simulate-domains-5", lambda tmp: simulate(m1(), "n=2", domains=5), TypeError,
         "domains must be a str"),
        ("preset-5", lambda tmp: Machine.preset(5), TypeError, "name must be a str"),
        ("preset-none", lambda tmp: Machine.preset(None), TypeError, "name must be a str"),
        ("preset-a-path", lambda tmp: Machine.preset("../machines/mehta-m1"), numasim.InputError,
         "unknown machine preset"),
        ("preset-nul", lambda tmp: Machine.preset("a\0b"), numasim.InputError,
         "unknown machine preset"),
        ("from-file-cpus-minus-1", lambda tmp: Machine.from_file(slit(tmp), cpus_per_node=-1),
         numasim.InputError, "t.slit: cpus_per_node: -1 is not a CPU count"),
        ("from-file-cpus-2-to-70", lambda tmp: Machine.from_file(slit(tmp), cpus_per_node=2**70),
         numasim.InputError, "cpus_per_node: the machine would have more than 16384 CPUs"),
        ("from-file-cpus-a-str", lambda tmp: Machine.from_file(slit(tmp), cpus_per_node="2"),
         TypeError, "cpus_per_node must be an int"),
        ("from-file-cpus-a-float", lambda tmp: Machine.from_file(slit(tmp), cpus_per_node=2.0),
         TypeError, "cpus_per_node must be an int"),
        ("from-file-no-cpus", lambda tmp: Machine.from_file(slit(tmp)), numasim.InputError,
         "needs cpus_per_node"),
        ("from-file-of-5", lambda tmp: Machine.from_file(5), TypeError, "path must be"),
        ("from-file-toml-with-cpus", lambda tmp: Machine.from_file(tmp / "m.toml", 2),
         numasim.InputError, "cpus_per_node applies only"),
    ]  # fmt: skip


API_IDS = ["chrome-trace-of-none", "chrome-trace-run-none", "chrome-trace-other-machine",
           "save-into-a-directory", "save-as-xlsx", "save-under-a-missing-directory",
           "save-to-none", "simulate-trace-yes", "simulate-domains-5", "preset-5", "preset-none",
           "preset-a-path", "preset-nul", "from-file-cpus-minus-1", "from-file-cpus-2-to-70",
           "from-file-cpus-a-str", "from-file-cpus-a-float", "from-file-no-cpus",
           "from-file-of-5", "from-file-toml-with-cpus"]  # fmt: skip


@pytest.mark.parametrize("case", API_IDS)
def test_the_api_refuses_in_its_own_terms(tmp_path, case):
    ((_, call, kind, words),) = [c for c in _api_cases() if c[0] == case]
    (tmp_path / "m.toml").write_text(TWO)
    with pytest.raises(kind) as e:
        call(tmp_path)
    assert type(e.value) is kind or kind is not TypeError
    text = str(e.value)
    assert "\n" not in text and (LENIENT or words in text), text
    assert "--cpus-per-node" not in text  # no command-line option named to an API user


def test_the_corpus_is_large():
    total = len(CASES) + len(FOREIGN_STORES) + len(DAMAGED_ROWS) + len(API_IDS)
    assert total >= 175, total
