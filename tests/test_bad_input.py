"""The bad-input corpus: every malformed input gets exit code 2, nothing on stdout, and exactly
one line on stderr — the one given here, naming the file, the place and the problem."""

from __future__ import annotations

import subprocess
import sys

import pytest

SLIT = "t.slit"
TOML = "m.toml"
YAML = "m.yaml"

# (file name, content, extra CLI args, expected message after "numasim: error: {path}")
CORPUS = [
    ("empty", SLIT, "", [], ": the distance table is empty"),
    ("blank-lines-only", SLIT, "\n\n# just a comment\n", [], ": the distance table is empty"),
    (
        "row-too-short",
        SLIT,
        "10 20\n20\n",
        [],
        ": line 2: row 1: has 1 values but the table has 2 rows; a distance table must be square",
    ),
    (
        "more-rows-than-columns",
        SLIT,
        "10 20\n20 10\n30 30\n",
        [],
        ": line 1: row 0: has 2 values but the table has 3 rows; a distance table must be square",
    ),
    (
        "not-an-integer",
        SLIT,
        "10 2x\n20 10\n",
        [],
        ": line 1: row 0, column 1: '2x' is not an integer",
    ),
    (
        "a-float",
        SLIT,
        "10 20\n20.5 10\n",
        [],
        ": line 2: row 1, column 0: '20.5' is not an integer",
    ),
    (
        "below-10",
        SLIT,
        "10 5\n5 10\n",
        [],
        ": line 1: row 0, column 1: 5 is below 10, the local distance",
    ),
    (
        "negative",
        SLIT,
        "10 20\n-20 10\n",
        [],
        ": line 2: row 1, column 0: -20 is below 10, the local distance",
    ),
    (
        "above-255",
        SLIT,
        "10 256\n256 10\n",
        [],
        ": line 1: row 0, column 1: 256 is above 255, the largest SLIT value",
    ),
    (
        "diagonal-not-minimum",
        SLIT,
        "10 20 30\n20 40 20\n30 20 10\n",
        [],
        ": line 2: row 1, column 0: 20 is not larger than the diagonal value 40; "
        "the diagonal must be the row minimum",
    ),
    (
        "off-diagonal-equals-local",
        SLIT,
        "10 10\n10 10\n",
        [],
        ": line 1: row 0, column 1: 10 is not larger than the diagonal value 10; "
        "the diagonal must be the row minimum",
    ),
    (
        "diagonal-not-10",
        SLIT,
        "12 20\n20 12\n",
        [],
        ": line 1: row 0, column 0: the diagonal value is 12; it must be 10, the local distance",
    ),
    (
        "numactl-row-mislabelled",
        SLIT,
        "node distances:\nnode 0 1\n 0: 10 20\n 2: 20 10\n",
        [],
        ": line 4: row is labelled node 2, expected node 1",
    ),
    (
        "numactl-row-wider-than-header",
        SLIT,
        "node distances:\nnode 0 1\n 0: 10 20 30\n 1: 20 10\n",
        [],
        ": line 3: row 0: has 3 values but the header names 2 nodes",
    ),
    (
        "node-without-row",
        TOML,
        "cpus = [2, 2, 2]\ndistances = [[10, 20], [20, 10]]\n",
        [],
        ": node 2 has no row in the distance table (3 nodes, 2 rows)",
    ),
    (
        "toml-unknown-key",
        TOML,
        "cpus_per_nod = 2\ndistances = [[10]]\n",
        [],
        ": line 1, column 1, key cpus_per_nod: unknown field `cpus_per_nod`, expected one of "
        "`name`, `description`, "
        "`source`, `cpus_per_node`, `cpus`, `distances`, `distance_file`, `generator`, `speed`",
    ),
    (
        "toml-syntax",
        TOML,
        "cpus_per_node = \n",
        [],
        ": line 1, column 17: string values must be quoted, expected literal string",
    ),
    (
        "toml-no-distances",
        TOML,
        "cpus_per_node = 2\n",
        [],
        ": no distances: give one of distances, distance_file or [generator]",
    ),
    (
        "toml-two-cpu-counts",
        TOML,
        "cpus_per_node = 2\ncpus = [2]\ndistances = [[10]]\n",
        [],
        ": give only one of cpus_per_node or cpus",
    ),
    (
        "toml-no-cpu",
        TOML,
        "cpus_per_node = 0\ndistances = [[10, 20], [20, 10]]\n",
        [],
        ": the machine has no CPU",
    ),
    (
        "toml-bad-distance-value",
        TOML,
        "cpus_per_node = 1\ndistances = [[10, 300], [300, 10]]\n",
        [],
        " (field distances): row 0, column 1: 300 is above 255, the largest SLIT value",
    ),
    (
        "toml-fast-cpu-out-of-range",
        TOML,
        "cpus_per_node = 1\ndistances = [[10]]\n[speed]\nfast = 2.0\nfast_cpus = [3]\n",
        [],
        ": field speed.fast_cpus: fast cpu 3 does not exist (the machine has 1 CPUs)",
    ),
    (
        "toml-zero-speed",
        TOML,
        "cpus_per_node = 1\ndistances = [[10]]\n[speed]\nfast = 0.0\nfast_cpus = [0]\n",
        [],
        ": field speed.fast: 0 is not a speed; a speed must be a positive number",
    ),
    (
        # Was accepted: the one CPU of the node is not in its "first half", so no CPU got the
        # bad speed and only per-CPU speeds were checked.
        "toml-negative-speed-first-half-of-one-cpu",
        TOML,
        'cpus_per_node = 1\ndistances = [[10]]\n[speed]\nfast = -2.0\nfast_cpus = "first-half"\n',
        [],
        ": field speed.fast: -2 is not a speed; a speed must be a positive number",
    ),
    (
        "toml-nan-speed-no-fast-cpu",
        TOML,
        'cpus_per_node = 2\ndistances = [[10]]\n[speed]\nfast = nan\nfast_cpus = "none"\n',
        [],
        ": field speed.fast: NaN is not a speed; a speed must be a positive number",
    ),
    (
        "yaml-negative-speed-empty-fast-list",
        YAML,
        "cpus_per_node: 2\ndistances: [[10]]\nspeed: {fast: -0.5, fast_cpus: []}\n",
        [],
        ": field speed.fast: -0.5 is not a speed; a speed must be a positive number",
    ),
    (
        "yaml-not-utf8",
        YAML,
        b"cpus_per_node: 1\n\x80\xff\n",
        [],
        ": not a text file: byte 17 is not valid UTF-8 (a machine file is TOML or YAML text)",
    ),
    (
        "yaml-date",
        YAML,
        "name: 2024-01-31\ncpus_per_node: 1\ndistances: [[10]]\n",
        [],
        ": key name: a YAML date is not a number, a string or a list",
    ),
    (
        "yaml-binary-value",
        YAML,
        "name: !!binary aGVsbG8=\ncpus_per_node: 1\ndistances: [[10]]\n",
        [],
        ": key name: a YAML bytes is not a number, a string or a list",
    ),
    (
        "yaml-set-value",
        YAML,
        "cpus: !!set {1}\ndistances: [[10]]\n",
        [],
        ": key cpus: a YAML set is not a number, a string or a list",
    ),
    (
        "yaml-nan",
        YAML,
        "cpus_per_node: 1\ndistances: [[10]]\nspeed: {fast: .nan, fast_cpus: none}\n",
        [],
        ": key speed.fast: nan is not a finite number",
    ),
    (
        "yaml-integer-key",
        YAML,
        "1: 2\n",
        [],
        ": key 1: unknown field `1`, expected one of `name`, `description`, `source`, "
        "`cpus_per_node`, `cpus`, `distances`, `distance_file`, `generator`, `speed`",
    ),
    (
        "yaml-alias-loop",
        YAML,
        "cpus_per_node: 1\ndistances: &d [*d]\n",
        [],
        ": key distances[0]: an alias inside its own anchor (a loop)",
    ),
    (
        "yaml-alias-bomb",
        YAML,
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n"
            for a, b in zip("abcdefg", "bcdefgh", strict=True)
        ),
        [],
        ": it expands to 123456789 values (with its aliases), more than any machine file "
        "needs (16786408)",
    ),
    (
        "yaml-nested-too-deeply",
        YAML,
        "distances: " + "[" * 100 + "]" * 100 + "\n",
        [],
        ": key distances: nested too deeply to be a machine file",
    ),
    (
        "yaml-nested-beyond-the-yaml-parser",
        YAML,
        "distances: " + "[" * 5000 + "]" * 5000 + "\n",
        [],
        ": nested too deeply to be a machine file",
    ),
    (
        "toml-unknown-generator",
        TOML,
        'cpus_per_node = 1\n[generator]\nkind = "hypercube"\nnodes = 4\n',
        [],
        ": line 3, column 8, key generator.kind: unknown variant `hypercube`, expected one of "
        "`two-level`, "
        "`hierarchy`, `ring`, `mesh`, `torus`",
    ),
    (
        "toml-hierarchy-distances",
        TOML,
        'cpus_per_node = 1\n[generator]\nkind = "hierarchy"\nnodes = 8\n'
        "group_sizes = [4]\ndistances = [20]\n",
        [],
        ": field generator: a hierarchy with 1 group sizes needs 2 distances, got 1",
    ),
    (
        "toml-generator-too-far",
        TOML,
        'cpus_per_node = 1\n[generator]\nkind = "ring"\nnodes = 64\nstep = 10\n',
        [],
        ": row 0, column 25: 260 is above 255, the largest SLIT value",
    ),
    (
        "yaml-malformed",
        YAML,
        "cpus_per_node: [1, 2\n",
        [],
        ": line 2, column 1: expected ',' or ']', but got '<stream end>'",
    ),
    (
        "yaml-not-a-mapping",
        YAML,
        "- 1\n- 2\n",
        [],
        ": a machine file must be a mapping of keys to values",
    ),
    (
        "yaml-cpus-per-node-a-list",
        YAML,
        "cpus_per_node: [a, b]\ndistances: [[10]]\n",
        [],
        ": key cpus_per_node: invalid type: a list, expected a whole number ≥ 1",
    ),
    (
        "toml-cpus-per-node-a-string",
        TOML,
        'cpus_per_node = "two"\ndistances = [[10]]\n',
        [],
        ': line 1, column 17, key cpus_per_node: invalid type: string "two", '
        "expected a whole number ≥ 1",
    ),
    (
        "toml-cpus-per-node-negative",
        TOML,
        "cpus_per_node = -1\ndistances = [[10]]\n",
        [],
        ": line 1, column 17, key cpus_per_node: invalid value: integer `-1`, "
        "expected a whole number ≥ 1",
    ),
    (
        "toml-cpus-per-node-huge",
        TOML,
        "cpus_per_node = 100000000000\ndistances = [[10]]\n",
        [],
        ": field cpus_per_node: the machine would have more than 16384 CPUs, the most numasim "
        "builds",
    ),
    (
        "toml-generator-too-many-nodes",
        TOML,
        'cpus_per_node = 1\n[generator]\nkind = "two-level"\nnodes = 100000\nremote = 20\n',
        [],
        ": field generator: 100000 nodes is more than 4096, the most numasim builds",
    ),
    (
        "toml-mesh-overflowing",
        TOML,
        'cpus_per_node = 1\n[generator]\nkind = "mesh"\nrows = 4294967296\n'
        "cols = 4294967296\nstep = 1\n",
        [],
        ": field generator: 18446744073709551615 nodes is more than 4096, the most numasim builds",
    ),
    (
        "matrix-cpus-per-node-huge",
        SLIT,
        "10 20\n20 10\n",
        ["--cpus-per-node", "100000000000"],
        ": --cpus-per-node: the machine would have more than 16384 CPUs, the most numasim builds",
    ),
    (
        "matrix-without-cpus-per-node",
        SLIT,
        "10 20\n20 10\n",
        None,
        ": a distance table without CPU lists needs --cpus-per-node (or write a .toml machine "
        "file, or give numactl --hardware output, which lists each node's CPUs)",
    ),
    (
        "cpus-per-node-on-a-machine-file",
        TOML,
        "cpus_per_node = 1\ndistances = [[10]]\n",
        ["--cpus-per-node", "2"],
        ": --cpus-per-node applies only to a distance-table file; "
        "a machine file sets cpus_per_node itself",
    ),
]


@pytest.mark.parametrize(
    ("name", "filename", "content", "extra", "expected"), CORPUS, ids=[c[0] for c in CORPUS]
)
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, name, filename, content, extra, expected):
    path = tmp_path / filename
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    args = ["topology", str(path)]
    if extra is None:
        pass
    elif extra:
        args += extra
    elif filename == SLIT:
        args += ["--cpus-per-node", "2"]
    r = run(*args)
    assert r.code == 2
    assert r.out == ""
    assert r.err == f"numasim: error: {path}{expected}\n"


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 15


def test_missing_distance_file_names_it(run, tmp_path):
    m = tmp_path / "m.toml"
    m.write_text('cpus_per_node = 1\ndistance_file = "nowhere.slit"\n')
    r = run("topology", m)
    assert r.code == 2
    assert r.err.startswith(f"numasim: error: {m}: field distance_file: ")
    assert "cannot read the distance file: No such file or directory" in r.err
    assert "nowhere.slit" in r.err
    assert r.err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["topology", "no-such-machine"],
            "no-such-machine: unknown machine: not a preset (see `numasim list machines`), "
            "not a file, and not 'host'",
        ),
        (
            ["topology", "mehta-m1", "--domains", "three-level"],
            "--domains: unknown domain builder 'three-level'; choose one of flat, node-only, "
            "two-level, multilevel, linux",
        ),
        (
            ["topology", "mehta-m1", "--cpus-per-node", "0"],
            "Invalid value for '--cpus-per-node': 0 is not in the range x>=1.",
        ),
        (
            ["topology", "mehta-m1", "--cpus-per-node", "2"],
            "mehta-m1: --cpus-per-node applies only to a distance-table file; "
            "presets fix their CPUs",
        ),
        (["topology"], "Missing argument 'MACHINE'."),
        (["frobnicate"], "No such command 'frobnicate'."),
    ],
)
def test_bad_options_are_one_line_and_exit_2(run, args, expected):
    r = run(*args)
    assert (r.code, r.out, r.err) == (2, "", f"numasim: error: {expected}\n")


def test_fake_host_without_nodes(run, tmp_path):
    r = run("topology", "host", "--sysfs-root", tmp_path)
    assert r.code == 2
    node_dir = tmp_path / "sys/devices/system/node"
    assert r.err.startswith(f"numasim: error: {node_dir}: cannot read the host's NUMA nodes: ")
    assert r.err.count("\n") == 1


def test_fake_host_with_a_bad_cpulist(run, tmp_path):
    node = tmp_path / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("0-x\n")
    (node / "distance").write_text("10\n")
    r = run("topology", "host", "--sysfs-root", tmp_path)
    assert (r.code, r.err) == (2, f"numasim: error: {node / 'cpulist'}: '0-x' is not a CPU range\n")


@pytest.mark.parametrize(
    ("cpulist", "distance", "problem"),
    [
        ("0-99999999999\n", "10\n", "cpulist: more than 16384 CPUs listed"),
        ("0\n", "/dev/zero", "distance: not a text file: byte 0 is a NUL byte"),
        ("0\n", "10 " * 400_000, "distance: the file is larger than 1 MiB"),
    ],
)
def test_fake_host_files_too_large_are_refused_before_they_are_read_whole(
    run, tmp_path, cpulist, distance, problem
):
    node = tmp_path / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text(cpulist)
    if distance == "/dev/zero":
        (node / "distance").symlink_to("/dev/zero")
    else:
        (node / "distance").write_text(distance)
    r = run("topology", "host", "--sysfs-root", tmp_path)
    assert r.code == 2 and r.err.count("\n") == 1
    assert r.err.startswith(f"numasim: error: {node}/{problem}"), r.err


def test_real_console_script_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.slit"
    bad.write_text("10 20\n20 x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "numasim", "topology", str(bad), "--cpus-per-node", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"numasim: error: {bad}: line 2: row 1, column 1: 'x' is not an integer\n"
    assert "Traceback" not in proc.stderr


def test_asymmetric_table_is_accepted_with_a_warning(run, tmp_path):
    path = tmp_path / "asym.slit"
    path.write_text("10 20\n30 10\n")
    r = run("topology", path, "--cpus-per-node", "1")
    assert r.code == 0
    assert r.err == (
        f"numasim: warning: {path}: the distance table is asymmetric (row 0, column 1 is 20 but "
        "row 1, column 0 is 30); accepted, as the kernel does\n"
    )
    assert "distances:" in r.out


def test_unwritable_outputs_exit_2_with_one_line(run, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    base = ["run", "--machine", "mehta-m3", "--workload", "n=4"]
    for option, target in [("--out", blocker / "dir"), ("--trace", blocker / "t.json"),
                           ("--report", blocker / "r.html")]:  # fmt: skip
        r = run(*base, option, target)
        assert (r.code, r.err) == (2, f"numasim: error: {blocker / target.name}: cannot write: "
                                      "Not a directory\n"), option  # fmt: skip


_H = "pid,tgid,arrival_ns,demand_ns,kind,mem,spawn_cpu,burst_mean_ns,wait_mean_ns,seed\n"
_R = "0,0,0,1000000,cpu,0.5,0,10000000,20000000,7\n"
_HA = _H.rstrip() + ",affinity\n"
_ROW = (
    '{"pid":0,"tgid":0,"arrival_ns":0,"demand_ns":1,"kind":"cpu","mem":0.5,"spawn_cpu":0,'
    '"burst_mean_ns":1,"wait_mean_ns":1,"seed":1'
)

# Issue 12: `numasim run` inputs — (name, workload file name or None for a spec, file content or
# the spec, policy, expected message after "numasim: error: ").
RUN_CORPUS = [
    ("csv-abc", "a.csv", _H + _R + "1,1,0,abc,cpu,0.5,0,1,1,1\n", "linux26",
     "{path}: line 3, column demand_ns: 'abc' is not a whole number of nanoseconds"),
    ("csv-nan", "a.csv", _H + _R + "1,1,nan,100,cpu,0.5,0,1,1,1\n", "linux26",
     "{path}: line 3, column arrival_ns: 'nan' is not a whole number of nanoseconds"),
    ("csv-negative", "a.csv", _H + _R + "1,1,0,-100,cpu,0.5,0,1,1,1\n", "linux26",
     "{path}: line 3, column demand_ns: '-100' is not a whole number of nanoseconds"),
    ("csv-short-row", "a.csv", _H + _R + "1,1,0,100,cpu,0.5,0\n", "linux26",
     "{path}: line 3: has 7 values but the header has 10 columns"),
    ("csv-kind", "a.csv", _H + _R + "1,1,0,100,gpu,0.5,0,1,1,1\n", "linux26",
     "{path}: line 3, column kind: 'gpu' is not one of cpu, io"),
    ("csv-overflow", "a.csv", _H + _R + "1,1,0,99999999999999999999,cpu,0.5,0,1,1,1\n",
     "linux26",
     "{path}: line 3, column demand_ns: '99999999999999999999' is not a whole number of "
     "nanoseconds"),
    ("json-unknown-field", "a.json", '{"processes":[' + _ROW + ',"colour":"red"}]}', "linux26",
     "{path}: line 1, column 150, key processes[0].colour: unknown field `colour`, expected one "
     "of `pid`, `tgid`, `arrival_ns`, `demand_ns`, `kind`, `mem`, `spawn_cpu`, `burst_mean_ns`, "
     "`wait_mean_ns`, `seed`, `affinity`"),
    ("json-missing-field", "a.json", '{"processes":[{"pid":0}]}', "linux26",
     "{path}: line 1, column 23, key processes[0]: missing field `tgid`"),
    ("json-truncated", "a.json", '{"processes":[', "linux26",
     "{path}: line 1, column 14, key processes: EOF while parsing a list"),
    ("json-not-utf8", "a.json", b"\x80\xff{}", "linux26",
     "{path}: not a text file: byte 0 is not valid UTF-8 (a workload file is CSV or JSON text)"),
    ("spec-duplicate-key", None, "n=10,n=20", "linux26", "--workload: key n: 'n' is given twice"),
    ("spec-periodic-0", None, "n=10,arrival=periodic:0", "linux26",
     "--workload: key arrival: 0 ms must be positive"),
    ("spec-mem-clash", None, "n=10,mem=0.5,mem_cpu=0.2", "linux26",
     "--workload: key mem_cpu: 'mem_cpu' and 'mem' both set a memory intensity; give mem, or "
     "mem_cpu and mem_io"),
    ("spec-n-overflow", None, "n=99999999999999999999999", "linux26",
     "--workload: key n: '99999999999999999999999' is not a process count"),
    ("spec-exec-inf", None, "n=5,exec=inf", "linux26",
     "--workload: key exec: inf ms must be a non-negative time"),
    ("spec-exec-million-years", None, "n=5,exec=2582592602330572.0", "linux26",
     "--workload: key exec: 2582592602330572.0 ms is longer than numasim simulates "
     "(9007199254 ms, about 104 days)"),
    ("csv-demand-too-long", "a.csv", _H + _R + "1,1,0,10000000000000000,cpu,0.5,0,1,1,1\n",
     "linux26", "{path}: process 1 (pid 1): a time of 10000000000000000 ns is longer than "
     "numasim simulates (9007199254740992 ns, about 104 days)"),
    # CPU affinity (docs/workloads.md, "CPU affinity"); mehta-m3 has 16 CPUs.
    ("spec-pin-cpu-out-of-range", None, "n=4,pin=cpus:0-99", "linux26",
     "--workload: key pin: CPU 16 does not exist (the machine has 16 CPUs)"),
    ("spec-spawn-cpu-out-of-range", None, "n=4,spawn=cpu:99", "linux26",
     "--workload: key spawn: CPU 99 does not exist (the machine has 16 CPUs)"),
    ("spec-pin-empty", None, "n=4,pin=cpus:", "linux26",
     "--workload: key pin: '' is not a CPU list (like 0-3,8)"),
    ("spec-pin-empty-range", None, "n=4,pin=cpus:0+3-1", "linux26",
     "--workload: key pin: range '3-1' in '0+3-1' is empty"),
    ("spec-pin-comma", None, "n=4,pin=cpus:0-3,8", "linux26",
     "--workload: '8' is not key=value"),
    ("spec-pin-not-a-cpu", None, "n=4,pin=cpus:x", "linux26",
     "--workload: key pin: 'x' is not a CPU or a range of CPUs"),
    ("spec-pin-unknown", None, "n=4,pin=all", "linux26",
     "--workload: key pin: 'all' is not one of each, cpus:LIST"),
    ("spec-release-without-pin", None, "n=4,release=100", "linux26",
     "--workload: key release: release needs pin=each or pin=cpus:LIST (without pin every "
     "process may already run on every CPU)"),
    ("spec-spawn-off-the-pinned-cpus", None, "n=4,pin=cpus:0-3,spawn=cpu:5", "linux26",
     "--workload: key spawn: CPU 5 is not among pin's CPUs 0-3: processes would be created on a "
     "CPU they may not run on"),
    ("csv-affinity-decreasing", "a.csv", _HA + _R.rstrip() + ',"9:0;5:1"\n', "linux26",
     "{path}: process 0 (pid 0): affinity changes must be in increasing time (a change at 5 ns "
     "follows one at 9 ns)"),
    ("csv-affinity-time", "a.csv", _HA + _R.rstrip() + ',"x:0"\n', "linux26",
     "{path}: line 2, column affinity: 'x' in 'x:0' is not a whole number of nanoseconds"),
    ("csv-affinity-no-time", "a.csv", _HA + _R.rstrip() + ',"0-3"\n', "linux26",
     "{path}: line 2, column affinity: '0-3' is not AT_NS:CPULIST (like 0:0-3;1000000000:0-7)"),
    ("csv-affinity-empty-set", "a.csv", _HA + _R.rstrip() + ',"0:"\n', "linux26",
     "{path}: line 2, column affinity: '' is not a CPU list (like 0-3,8)"),
    ("csv-affinity-cpu-out-of-range", "a.csv", _HA + _R.rstrip() + ',"0:0-99"\n', "linux26",
     "{path}: process 0 (pid 0): the affinity change at 0 ns names CPU 16, which does not exist "
     "(the machine has 16 CPUs)"),
    ("csv-affinity-spawn-not-allowed", "a.csv", _HA + _R.rstrip() + ',"0:4-7"\n', "linux26",
     "{path}: process 0 (pid 0): spawn cpu 0 is not among the CPUs it may run on when created "
     "(4-7)"),
    ("json-affinity-decreasing", "a.json",
     '{"processes":[' + _ROW + ',"affinity":[{"at_ns":10,"cpus":"0"},{"at_ns":5,"cpus":"1"}]}]}',
     "linux26",
     "{path}: process 0 (pid 0): affinity changes must be in increasing time (a change at 5 ns "
     "follows one at 10 ns)"),
    ("json-affinity-empty-set", "a.json",
     '{"processes":[' + _ROW + ',"affinity":[{"at_ns":0,"cpus":""}]}]}', "linux26",
     "{path}: line 1, column 175, key processes[0].affinity[0].cpus: '' is not a CPU list "
     "(like 0-3,8)"),
    ("json-affinity-field", "a.json",
     '{"processes":[' + _ROW + ',"affinity":[{"at":0,"cpus":"0"}]}]}', "linux26",
     "{path}: line 1, column 159, key processes[0].affinity[0].at: unknown field `at`, expected "
     "`at_ns` or `cpus`"),
    ("policy-option-twice", None, "n=5", "origin-aware:v1=on,v1=off",
     "--policy: policy option 'v1' is given twice"),
    ("policy-min-load-nan", None, "n=5", "origin-aware:min-load=nan",
     "--policy: origin-aware option 'min-load' must be a number ≥ 0, not 'nan'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "filename", "content", "policy", "expected"),
    RUN_CORPUS,
    ids=[c[0] for c in RUN_CORPUS],
)
def test_bad_run_input_is_one_line_and_exit_2(run, tmp_path, name, filename, content, policy,
                                              expected):  # fmt: skip
    workload = content
    if filename is not None:
        path = tmp_path / filename
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        workload = str(path)
    r = run("run", "--machine", "mehta-m3", "--workload", workload, "--policy", policy)
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {expected.format(path=workload)}\n"


def test_a_workload_too_large_for_memory_is_refused_before_allocating(run):
    r = run("run", "--machine", "mehta-m3", "--workload", "n=100000000")
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith(
        "numasim: error: --workload: key n: 100000000 processes need about 500.2 GB of memory"
    )
    assert r.err.count("\n") == 1


def test_a_binary_saved_run_names_the_file(run, tmp_path):
    (tmp_path / "run.json").write_bytes(b"\x80\x81binary")
    (tmp_path / "events.json").write_text("[]")
    r = run("trace", tmp_path)
    assert (r.code, r.err) == (
        2,
        f"numasim: error: {tmp_path / 'run.json'}: not a text file: byte 0 is not valid UTF-8\n",
    )
