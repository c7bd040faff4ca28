"""Words a newcomer understands: what the CLI prints says what it did and what its terms mean."""

from __future__ import annotations

import json

from test_experiments import tiny


def test_fresh_says_where_the_old_runs_went(run, tmp_path):
    path = tiny(tmp_path, reps=2)
    out = tmp_path / "o"
    r = run("reproduce", path, "--out", out, "--fresh", "--json")
    assert r.code == 0, r.err
    assert r.err.rstrip().endswith("; --fresh: no runs were stored there before")
    r = run("reproduce", path, "--out", out, "--fresh", "--json")
    assert r.code == 0, r.err
    (aside,) = out.glob("previous-*")
    assert r.err.rstrip().endswith(f"; --fresh moved the runs stored before into {aside}")
    assert json.loads(r.out)["rows"]


def test_topology_says_which_builder_it_chose_and_what_a_run_uses(run):
    r = run("topology", "mehta-m1")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] != ""
    assert "domains: linux (" in r.out
    note = " ".join(r.out.split("\n\n")[-1].split())  # the last paragraph, unwrapped
    assert note.startswith(
        "(--domains not given: shown for linux, what a 6.x kernel builds. "
        "A run uses its policy's builder unless --domains is given: two-level for linux26, "
    )
    assert "; multilevel for origin-aware;" in note and note.endswith(".)")
    # What the note says is what a run does.
    s = run("run", "--machine", "mehta-m1", "--workload", "n=10,kind=cpu,exec=20")
    assert s.code == 0, s.err
    assert "· linux26 over two-level domains ·" in s.out.splitlines()[0]
    # A chosen builder needs no note, and --json stays one JSON document.
    chosen = run("topology", "mehta-m1", "--domains", "multilevel")
    assert "domains: multilevel (" in chosen.out and "--domains not given" not in chosen.out
    assert json.loads(run("topology", "mehta-m1", "--json").out)["domains"]["builder"] == "linux"


def test_the_seed_ranges_of_run_and_compare_are_stated(run):
    packed = {cmd: "".join(run(cmd, "--help").out.split()) for cmd in ("run", "compare")}
    assert "(0…2^64−1)" in packed["run"] and "compare'smaster--seedtakes0…2^63−1" in packed["run"]
    assert "Masterseed,0…2^63−1" in packed["compare"]
    assert "--seedtakes0…2^64−1" in packed["compare"]
    r = run("compare", "--machine", "mehta-m3", "--workload", "n=10", "--policies",
            "linux26,origin-aware", "--seed", str(2**63))  # fmt: skip
    assert r.code == 2 and "--seed" in r.err


def test_output_cut_short_by_its_reader_ends_quietly():
    """`numasim list assumptions | head -1`: when the reader of its output is gone, numasim
    stops without a traceback (here the reader is gone before the first line)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    numasim = Path(sys.executable).with_name("numasim")
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run([numasim, "list", "assumptions"], stdout=write, stderr=subprocess.PIPE,
                           text=True, timeout=60)  # fmt: skip
    finally:
        os.close(write)
    assert p.stderr == "" and p.returncode == 0
