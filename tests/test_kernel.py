"""numasim kernel-run: the parts that need no QEMU, on real captures (tests/data/kernel/), and
one boot that runs only where QEMU and a cached kernel are present."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from numasim._core import InputError
from numasim.kernel import boot, guest, images, load_run, load_runs, parse, runner, summary
from numasim.machine import Machine

DATA = Path(__file__).parent / "data" / "kernel"
RING = DATA / "ring-4x2.toml"
#: A real boot of ring-4x2 under Linux 6.12 (8 loops, start released, NUMA balancing off).
CAPTURE_612 = DATA / "ring-4x2-k6.12-t8-released" / "boot-1"
#: A real boot of ring-4x2 under Linux 6.1 (16 loops, start released, a 4 s window).
CAPTURE_61 = DATA / "ring-4x2-k6.1-t16-released" / "boot-0"


def raw_files(capture: Path) -> dict[str, bytes]:
    """The files the guest sent for ``capture`` (its --keep-raw archive)."""
    with tarfile.open(capture.with_name(capture.name + ".raw.tar.gz"), "r:gz") as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read()
                for m in tar.getmembers() if m.isfile()}  # fmt: skip


def trace_text(capture: Path) -> str:
    return gzip.decompress(raw_files(capture)["trace.gz"]).decode()


# --- Debian package indexes and versions ---------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [  # each checked against dpkg --compare-versions
        ("6.12.117-1~deb12u1", "6.12.95-1~bpo12+1", 1),
        ("1.0~rc1", "1.0", -1),
        ("6.1.192-2", "6.1.192-1", 1),
        ("1:0.9", "2.0", 1),
        ("6.1.176-1", "6.1.192-2", -1),
        ("1.0a", "1.0~", 1),
        ("1.0", "1.0-0", 0),
        ("2.30", "2.3", 1),
        ("1.0+b1", "1.0", 1),
    ],
)
def test_debian_versions_sort_as_dpkg_sorts_them(a, b, order):
    assert images.compare_versions(a, b) == order
    assert images.compare_versions(b, a) == -order


INDEX = """Package: linux-image-6.12.95+deb12-amd64-unsigned
Version: 6.12.95-1~bpo12+1
Filename: pool/main/l/linux/a.deb
Size: 10
SHA256: aa
Description: Linux 6.12
 for 64-bit PCs

Package: linux-image-6.12.117+deb12-amd64-unsigned
Version: 6.12.117-1~deb12u1
Filename: pool/updates/main/l/linux-6.12/b.deb
Size: 20
SHA256: bb

Package: linux-image-6.12.117+deb12-cloud-amd64-unsigned
Version: 6.12.117-1~deb12u1
Filename: pool/updates/main/l/linux-6.12/c.deb
SHA256: cc

Package: linux-image-6.1.0-56-amd64-unsigned
Version: 6.1.192-2
Filename: pool/updates/main/l/linux/d.deb
SHA256: dd
"""


def test_the_newest_package_of_a_series_is_chosen_and_other_flavours_are_not():
    found = images.parse_index(INDEX, "s", "http://x", images.SERIES["6.12"])
    assert [p.name for p in found] == ["linux-image-6.12.95+deb12-amd64-unsigned",
                                       "linux-image-6.12.117+deb12-amd64-unsigned"]  # fmt: skip
    best = images.newest(found)
    assert (best.version, best.sha256, best.url) == (
        "6.12.117-1~deb12u1", "bb", "http://x/pool/updates/main/l/linux-6.12/b.deb")  # fmt: skip
    only_61 = images.parse_index(INDEX, "s", "http://x", images.SERIES["6.1"])
    assert [p.version for p in only_61] == ["6.1.192-2"]


def test_an_unreachable_archive_is_one_line_naming_it(tmp_path, monkeypatch):
    # Port 9 on the loopback refuses at once: no traffic leaves this machine.
    monkeypatch.setattr(images, "SUITES", [("bookworm", "http://127.0.0.1:9/debian")])
    with pytest.raises(images.NetworkError) as e:
        images.resolve_kernel("6.12", cache=tmp_path)
    message = str(e.value)
    assert message.startswith("http://127.0.0.1:9/debian/dists/bookworm/main/binary-amd64/")
    assert "cannot download" in message and "\n" not in message
    assert not list(tmp_path.rglob("*.part"))


def test_with_the_indexes_unreachable_a_cached_kernel_is_used_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "SUITES", [("bookworm", "http://127.0.0.1:9/debian")])
    for version in ("6.12.95-1~bpo12+1", "6.12.117-1~deb12u1"):
        release = version.split("-")[0] + "+deb12-amd64"
        name = f"linux-image-{release.removesuffix('-amd64')}-amd64-unsigned"
        d = tmp_path / "kernels" / f"{name}_{version}"
        (d / "boot").mkdir(parents=True)
        (d / "boot" / f"vmlinuz-{release}").write_bytes(b"")
        (d / "package.json").write_text(json.dumps({"package": name, "version": version,
                                                    "release": release}))  # fmt: skip
    k = images.resolve_kernel("6.12", cache=tmp_path)
    assert k.release == "6.12.117+deb12-amd64"
    assert k.package == "linux-image-6.12.117+deb12-amd64-unsigned_6.12.117-1~deb12u1"
    assert "package indexes unreachable" in k.notes[0]


def test_a_static_busybox_is_told_from_a_dynamic_program():
    assert not images._is_static(Path(sys.executable).resolve())
    if Path("/bin/busybox").is_file() and shutil.which("file"):
        out = subprocess.run(["file", "-L", "/bin/busybox"], capture_output=True, text=True)
        if out.returncode == 0:
            assert images._is_static(Path("/bin/busybox")) == ("statically linked" in out.stdout)


# --- the guest --------------------------------------------------------------------------------


def read_newc(blob: bytes) -> dict[str, tuple[int, bytes, tuple[int, int]]]:
    """name → (mode, data, rdev) of a newc archive, read as the kernel reads it."""
    out, pos = {}, 0
    while True:
        assert blob[pos : pos + 6] == b"070701"
        f = [int(blob[pos + 6 + 8 * i : pos + 14 + 8 * i], 16) for i in range(13)]
        name_at = pos + 110
        name = blob[name_at : name_at + f[11] - 1].decode()
        data_at = name_at + f[11] + (-(110 + f[11]) % 4)
        if name == "TRAILER!!!":
            return out
        out[name] = (f[1], blob[data_at : data_at + f[6]], (f[9], f[10]))
        pos = data_at + f[6] + (-f[6] % 4)


def test_the_initramfs_holds_busybox_the_scripts_the_settings_and_a_console(tmp_path):
    fake = tmp_path / "busybox"
    fake.write_bytes(b"\x7fELF" + bytes(range(200)))
    w = guest.WorkloadSpec(16, "released", 1500, 8, 10, True)
    env = guest.env_text(w, cpus=8, buffer_kb=4096)
    files = read_newc(guest.initramfs(fake, env))
    assert files["bin/busybox"][1] == fake.read_bytes()
    assert files["init"][1].startswith(b"#!/bin/busybox sh\n")
    assert files["init"][0] & 0o777 == 0o755
    assert files["dev/console"][0] & 0o170000 == guest.S_IFCHR
    assert files["dev/console"][2] == (5, 1)
    settings = dict(line.split("=", 1) for line in files["etc/numasim.env"][1].decode().split("\n")
                    if line)  # fmt: skip
    assert settings["TASKS"] == "16" and settings["START"] == "released"
    assert settings["RELEASE_S"] == "1.500" and settings["MEM_MB"] == "8"
    assert settings["ALL_CPUS"] == "0-7" and settings["NUMA_BALANCING"] == "1"
    assert settings["EVENTS"].strip("'").split() == list(guest.EVENTS)


# --- QEMU's command line and what it cannot boot ---------------------------------------------


def test_the_qemu_command_line_gives_each_node_its_cpus_memory_and_distances():
    m = Machine.load(str(RING))
    args = boot.qemu_args(m, Path("/k/vmlinuz"), Path("/t/initrd"), Path("/t/data"))
    args.remove("-no-reboot")  # the one flag without a value
    pairs = list(zip(args[::2], args[1::2], strict=True))
    numa = [v for k, v in pairs if k == "-numa"]
    assert numa == [
        "node,nodeid=0,cpus=0-1,memdev=m0", "node,nodeid=1,cpus=2-3,memdev=m1",
        "node,nodeid=2,cpus=4-5,memdev=m2", "node,nodeid=3,cpus=6-7,memdev=m3",
        "dist,src=0,dst=1,val=20", "dist,src=0,dst=2,val=30", "dist,src=0,dst=3,val=20",
        "dist,src=1,dst=0,val=20", "dist,src=1,dst=2,val=20", "dist,src=1,dst=3,val=30",
        "dist,src=2,dst=0,val=30", "dist,src=2,dst=1,val=20", "dist,src=2,dst=3,val=20",
        "dist,src=3,dst=0,val=20", "dist,src=3,dst=1,val=30", "dist,src=3,dst=2,val=20",
    ]  # fmt: skip
    objects = [v for k, v in pairs if k == "-object"]
    assert objects == [f"memory-backend-ram,id=m{n},size=256M" for n in range(4)]
    got = dict(pairs)
    assert got["-smp"] == "8,sockets=4,cores=2,threads=1"
    assert got["-accel"] == "tcg,thread=multi" and got["-machine"] == "q35"
    assert got["-m"] == "1024M" and got["-kernel"] == "/k/vmlinuz"
    assert "console=ttyS0" in got["-append"] and "schedstats=enable" in got["-append"]
    assert [v for k, v in pairs if k == "-serial"] == ["stdio", "file:/t/data"]


def test_a_preset_becomes_exactly_these_numa_arguments():
    m = Machine.preset("hp-superdome-4")  # 4 nodes × 4 CPUs, 10 / 17
    args = boot.qemu_args(m, Path("k"), Path("i"), Path("d"))
    numa = [b for a, b in itertools.pairwise(args) if a == "-numa"]
    nodes = [f"node,nodeid={n},cpus={4 * n}-{4 * n + 3},memdev=m{n}" for n in range(4)]
    dists = [f"dist,src={i},dst={j},val=17" for i in range(4) for j in range(4) if i != j]
    assert numa == nodes + dists
    assert args[args.index("-smp") + 1] == "16,sockets=4,cores=4,threads=1"


def test_mehta_m1_boots_with_its_sixteen_nodes_and_every_distance():
    m = Machine.preset("mehta-m1")
    boot.refuse_machine(m, "--machine")
    args = boot.qemu_args(m, Path("k"), Path("i"), Path("d"))
    dist = [a for a in args if a.startswith("dist,")]
    assert len(dist) == 16 * 15
    assert "dist,src=2,dst=3,val=60" in dist and "dist,src=15,dst=0,val=60" in dist
    assert boot.node_mem_mb(m) == 128 and boot.buffer_kb(m) == 8192


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--machine", "amc2"], "--machine amc2: 32 nodes; kernel-run boots at most 16"),
        (["--machine", "numa-4x8"], "--machine numa-4x8: a node has 8 CPUs; kernel-run boots "
         "at most 4 per node (each vCPU is a thread on this host)"),
        (["--machine", str(DATA / "memory-only.toml")], f"--machine {DATA / 'memory-only.toml'}: "
         "node 1 has no CPU; kernel-run does not boot memory-only nodes (the guest would "
         "renumber its nodes)"),
        (["--machine", str(RING), "--start", "fork", "--release-ms", "5"],
         "--release-ms applies only to --start released"),
        (["--machine", str(RING), "--mem-mb", "100"],
         "--mem-mb: 8 loops × 100 MB is more than half the guest's 1024 MB"),
        (["--machine", str(RING), "--kernel", "5.10"],
         "--kernel: '5.10' is neither a kernel series (6.1, 6.12) nor a kernel image file"),
        (["--machine", str(RING), "--start", "spread"], "Invalid value for '--start': 'spread' "
         "is not one of 'fork', 'pinned', 'released'."),
        (["--machine", "nosuch"], "nosuch: unknown machine: not a preset (see `numasim list "
         "machines`), not a file, and not 'host'"),
    ],
)  # fmt: skip
def test_kernel_run_refuses_in_one_line_before_booting(run, tmp_path, monkeypatch, args, message):
    monkeypatch.setattr(images, "ensure_tools", _never)
    monkeypatch.setattr(boot, "run_qemu", _never)
    r = run("kernel-run", *args, "--out", tmp_path / "out")
    assert (r.code, r.out) == (2, "")
    assert r.err == f"numasim: error: {message}\n"
    assert not (tmp_path / "out").exists()


def _never(*args, **kwargs):
    raise AssertionError("kernel-run went on past a refusal")


def test_an_out_directory_is_never_overwritten(run, tmp_path, monkeypatch):
    monkeypatch.setattr(images, "ensure_tools", _never)
    (tmp_path / "runs.json").write_text("{}")
    r = run("kernel-run", "--machine", RING, "--out", tmp_path)
    assert (r.code, r.err) == (2, f"numasim: error: --out: {tmp_path} already holds kernel "
                                  "runs; give a new directory\n")  # fmt: skip
    f = tmp_path / "file"
    f.write_text("")
    r = run("kernel-run", "--machine", RING, "--out", f)
    assert r.err == f"numasim: error: --out: {f} is a file; give a directory\n"


def test_a_network_failure_is_exit_2_and_one_line(run, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "SUITES", [("bookworm", "http://127.0.0.1:9/debian")])
    monkeypatch.setattr(images, "ensure_tools", lambda progress=None: None)
    r = run("kernel-run", "--machine", RING, "--out", tmp_path / "out")
    assert r.code == 2
    last = r.err.splitlines()[-1]
    assert last.startswith("numasim: error: http://127.0.0.1:9/debian/dists/bookworm/")
    assert "cannot download" in last
    assert not (tmp_path / "out").exists()


def test_a_guest_that_saw_another_table_is_refused():
    m = Machine.load(str(RING))
    nodes = raw_files(CAPTURE_612)["nodes"].decode()
    runner.check_nodes(nodes, m, "boot 0")  # the real capture matches
    wrong = nodes.replace("0 0-1 | 10 20 30 20", "0 0-1 | 10 20 20 20")
    with pytest.raises(InputError, match=r"^boot 0: the guest kernel's node 0 is "
                       r"\(\[0, 1\], \[10, 20, 20, 20\]\), the machine's \(\[0, 1\], "
                       r"\[10, 20, 30, 20\]\)"):  # fmt: skip
        runner.check_nodes(wrong, m, "boot 0")


# --- the trace and the migration kinds (real captures) ----------------------------------------


def test_every_migration_in_a_real_trace_comes_with_its_call_stack():
    events = parse.parse_trace(trace_text(CAPTURE_612))
    migrations = [e for e in events if e.name == "sched_migrate_task"]
    assert len(migrations) > 10
    assert all(e.stack and e.stack[:2] == ["trace_event_raw_event_sched_migrate_task",
                                           "set_task_cpu"] for e in migrations)  # fmt: skip
    assert not any(e.name == "<stack trace>" for e in events)
    switches = [e for e in events if e.name == "sched_switch"]
    assert all(e.int("prev_pid") >= 0 and e.int("next_pid") >= 0 for e in switches)
    assert events == sorted(events, key=lambda e: e.ts)  # trace_clock global: one order


def test_a_stack_trace_is_attached_to_the_migration_on_its_own_cpu():
    text = """\
     migration/6-56      [006] d..3.     4.329752: sched_migrate_task: comm=taskset pid=224 prio=120 orig_cpu=6 dest_cpu=0
          <idle>-0       [002] d.s2.     4.329760: sched_migrate_task: comm=sh pid=232 prio=120 orig_cpu=0 dest_cpu=6
     migration/6-56      [006] d..3.     4.330292: <stack trace>
 => trace_event_raw_event_sched_migrate_task
 => set_task_cpu
 => move_queued_task
 => migration_cpu_stop
          <idle>-0       [002] d.s2.     4.330300: <stack trace>
 => trace_event_raw_event_sched_migrate_task
 => set_task_cpu
 => sched_balance_rq
 => _nohz_idle_balance.isra.0
"""  # noqa: E501  (a real excerpt, interleaved across two CPUs)
    first, second = parse.parse_trace(text)
    assert (first.ts, first.cpu, first.int("pid")) == (4_329_752_000, 6, 224)
    assert parse.classify(first.stack) == "stopper"
    assert second.stack[-1] == "_nohz_idle_balance"
    assert parse.classify(second.stack) == "nohz_idle"


def stacks_of(capture: Path) -> dict[str, list[list[str]]]:
    """The real stacks of a capture's migrations, by their kind."""
    out: dict[str, list[list[str]]] = {}
    for e in parse.parse_trace(trace_text(capture)):
        if e.name == "sched_migrate_task":
            out.setdefault(parse.classify(e.stack), []).append(e.stack)
    return out


def test_linux_6_12_stacks_name_their_kind():
    kinds = stacks_of(CAPTURE_612)
    assert set(kinds) == {"periodic", "nohz_idle", "newidle", "wakeup", "stopper"}
    assert all({"sched_balance_rq", "sched_balance_domains"} <= set(s) and
               "_nohz_idle_balance" not in s for s in kinds["periodic"])  # fmt: skip
    assert all({"sched_balance_domains", "_nohz_idle_balance"} <= set(s)
               for s in kinds["nohz_idle"])  # fmt: skip
    assert all("sched_balance_newidle" in s for s in kinds["newidle"])
    assert all("try_to_wake_up" in s for s in kinds["wakeup"])
    assert all(s[2:5] == ["move_queued_task", "migration_cpu_stop", "cpu_stopper_thread"]
               for s in kinds["stopper"])  # fmt: skip


def test_linux_6_1_stacks_name_their_kind():
    # Debian's 6.1 has load_balance and rebalance_domains, and already the newer names of
    # newidle balancing and of the softirq loop.
    kinds = stacks_of(CAPTURE_61)
    assert {"periodic", "nohz_idle", "newidle"} <= set(kinds)
    assert all({"load_balance", "rebalance_domains", "handle_softirqs"} <= set(s) and
               "_nohz_idle_balance" not in s for s in kinds["periodic"])  # fmt: skip
    assert all({"load_balance", "rebalance_domains", "_nohz_idle_balance"} <= set(s)
               for s in kinds["nohz_idle"])  # fmt: skip
    assert all({"load_balance", "sched_balance_newidle"} <= set(s) for s in kinds["newidle"])
    assert "other" not in kinds


@pytest.mark.parametrize(
    ("stack", "kind"),
    [  # names of mainline 6.1 (the Debian ones are tested on captures)
        (["set_task_cpu", "detach_tasks", "load_balance", "rebalance_domains",
          "__do_softirq"], "periodic"),
        (["set_task_cpu", "load_balance", "rebalance_domains", "_nohz_idle_balance",
          "__do_softirq"], "nohz_idle"),
        (["set_task_cpu", "load_balance", "newidle_balance", "pick_next_task_fair"], "newidle"),
        (["set_task_cpu", "detach_one_task", "active_load_balance_cpu_stop",
          "cpu_stopper_thread"], "active"),
        (["set_task_cpu", "__migrate_swap_task", "migrate_swap_stop", "cpu_stopper_thread"],
         "numa_swap"),
        (["set_task_cpu", "move_queued_task", "affine_move_task",
          "__set_cpus_allowed_ptr_locked", "__sched_setaffinity"], "affinity"),
        (["set_task_cpu", "move_queued_task", "migration_cpu_stop"], "stopper"),
        (["set_task_cpu", "push_cpu_stop", "cpu_stopper_thread"], "other"),
        (None, "other"),
    ],
)  # fmt: skip
def test_stacks_name_their_kind(stack, kind):
    assert parse.classify(stack) == kind


def recorded(capture: Path) -> parse.Recorded:
    files = raw_files(capture)
    return parse.Recorded(
        trace=gzip.decompress(files["trace.gz"]).decode(),
        schedstat_start=files["schedstat.start"].decode(),
        schedstat_end=files["schedstat.end"].decode(),
        per_cpu_stats=files["per_cpu_stats"].decode(),
        pids=[int(p) for p in files["pids"].split()],
        domains=files["domains"].decode(),
        task_sched={int(k[6:]): v.decode() for k, v in files.items() if k.startswith("sched.")},
        vmstat_start=files["vmstat.start"].decode(),
        vmstat_end=files["vmstat.end"].decode(),
    )


@pytest.mark.parametrize("capture", [CAPTURE_612, CAPTURE_61])
def test_the_trace_holds_every_migration_the_kernel_counted(capture):
    rec = recorded(capture)
    m = Machine.load(str(RING))
    result = parse.analyse(rec, [0, 0, 1, 1, 2, 2, 3, 3], m.distances)
    assert [t["pid"] for t in result["tasks"]] == rec.pids
    for t in result["tasks"]:
        assert t["traced_migrations"] == t["kernel_nr_migrations"], t
    assert not result["notes"]
    assert parse.lost_events(rec.per_cpu_stats) == 0


def test_a_released_run_starts_every_loop_on_cpu_0_and_moves_them_after_the_release():
    rec = recorded(CAPTURE_612)
    result = parse.analyse(rec, [0, 0, 1, 1, 2, 2, 3, 3], Machine.load(str(RING)).distances)
    window = result["window"]
    assert 1.0e9 <= window["release_ns"] < window["released_ns"] < 3e9
    assert 9.9 < window["guest_s"] < 10.5
    assert all(t["fork_cpu"] == 0 and t["first_cpu"] == 0 for t in result["tasks"])
    moves = result["migrations"]
    assert moves and all(m["t_ns"] > window["release_ns"] for m in moves)
    assert not [m for m in moves if m["kind"] == "fork"]
    for m in moves:
        assert m["distance"] == [[10, 20, 30, 20], [20, 10, 20, 30], [30, 20, 10, 20],
                                 [20, 30, 20, 10]][m["from"] // 2][m["to"] // 2]  # fmt: skip
        assert m["idle"] in {"periodic": {"idle", "busy"}, "nohz_idle": {"idle", "busy"},
                             "newidle": {"newly_idle"}}[m["kind"]]  # fmt: skip
    # After the release the eight loops end up one per CPU.
    assert sorted(t["last_cpu"] for t in result["tasks"]) == list(range(8))
    # Each loop runs most of the window: the run time adds up from sched_switch.
    for t in result["tasks"]:
        assert 0.3 * t["alive_ns"] < t["run_ns"] <= t["alive_ns"]


def test_fork_placements_are_read_from_the_parent_cpu_and_wakeup_new():
    text = """\
              sh-300     [000] .....     1.000000: sched_process_fork: comm=sh pid=300 child_comm=sh child_pid=301
              sh-300     [000] d..2.     1.000010: sched_wakeup_new: comm=sh pid=301 prio=120 target_cpu=005
              sh-300     [000] .....     1.000100: sched_process_fork: comm=sh pid=300 child_comm=sh child_pid=302
              sh-300     [000] d..2.     1.000110: sched_wakeup_new: comm=sh pid=302 prio=120 target_cpu=000
            init-1       [001] .....     2.000000: tracing_mark_write: numasim window-end
"""  # noqa: E501
    rec = parse.Recorded(text, SCHEDSTAT_16, SCHEDSTAT_16, "", [301, 302], "")
    slit = Machine.load(str(RING)).distances
    result = parse.analyse(rec, [0, 0, 1, 1, 2, 2, 3, 3], slit)
    assert result["migrations"] == [{"t_ns": 0, "pid": 301, "from": 0, "to": 5, "distance": 30,
                                     "kind": "fork", "idle": None}]  # fmt: skip
    assert [(t["fork_cpu"], t["first_cpu"]) for t in result["tasks"]] == [(0, 5), (0, 0)]
    assert result["window"]["start_ns"] == 1_000_000_000


# --- /proc/schedstat ---------------------------------------------------------------------------

#: Every counter different: idle types' blocks 1-8, 11-18 and 21-28, then 31-42.
COUNTERS = [*range(1, 9), *range(11, 19), *range(21, 29), *range(31, 43)]
SCHEDSTAT_16 = (
    "version 16\ntimestamp 4294892963\ncpu0 0 0 10 5 7 3 1000 200 9\n"
    f"domain0 00000003 {' '.join(map(str, COUNTERS))}\n"
)


def test_schedstat_16_reads_busy_then_idle_then_newly_idle():
    s = parse.parse_schedstat(SCHEDSTAT_16)
    d = s.domains[(0, 0)]
    assert d["span"] == [0, 1]
    assert d["lb_count"] == {"busy": 1, "idle": 11, "newly_idle": 21}
    assert d["lb_nobusyg"] == {"busy": 8, "idle": 18, "newly_idle": 28}
    assert (d["alb_count"], d["alb_pushed"], d["ttwu_move_balance"]) == (31, 33, 42)
    assert s.cpus[0]["rq_cpu_time_ns"] == 1000


def test_schedstat_15_reads_idle_then_busy_then_newly_idle():
    s = parse.parse_schedstat(SCHEDSTAT_16.replace("version 16", "version 15"))
    assert s.domains[(0, 0)]["lb_count"] == {"idle": 1, "busy": 11, "newly_idle": 21}


def test_a_real_6_12_reading_counts_cpu_0_busy_while_the_loops_sit_on_it():
    # In a released run the loops keep CPU 0 busy the whole window: CPU 0's passes are busy
    # ones (the field order of version 16 is checked on real numbers).
    files = raw_files(CAPTURE_612)
    start = parse.parse_schedstat(files["schedstat.start"].decode())
    end = parse.parse_schedstat(files["schedstat.end"].decode())
    assert start.version == end.version == 16
    _, domains = parse.schedstat_delta(start, end)
    cpu0 = domains[(0, 0)]["lb_count"]
    assert cpu0["busy"] > 10 * max(cpu0["idle"], 1)
    # Idle CPUs of other nodes do most of their passes idle.
    other = domains[(7, 0)]["lb_count"]
    assert other["idle"] > other["busy"]


def test_a_real_6_1_reading_is_version_15_and_counts_cpu_0_busy_too():
    files = raw_files(CAPTURE_61)
    start = parse.parse_schedstat(files["schedstat.start"].decode())
    end = parse.parse_schedstat(files["schedstat.end"].decode())
    assert start.version == 15
    _, domains = parse.schedstat_delta(start, end)
    cpu0 = domains[(0, 0)]["lb_count"]
    assert cpu0["busy"] > 3 * max(cpu0["idle"], 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version 17\ntimestamp 1\n", "schedstat version 17 is not one numasim reads "
         "(known: 15, 16); its field order must be checked first"),
        ("cpu0 1 2\n", "line 1: not a /proc/schedstat text (no version line)"),
        ("version 16\ncpu0 0 0 1 1 1 1 1 1 1\ndomain0 3 1 2 3\n",
         "line 3: not a version 16 schedstat line (3 counters)"),
    ],
)  # fmt: skip
def test_unknown_schedstat_is_refused_in_one_line(text, message):
    with pytest.raises(InputError) as e:
        parse.parse_schedstat(text, "x")
    assert str(e.value) == f"x: {message}"


def test_cpumasks_and_cpulists():
    assert parse.cpumask_list("00000000,00000103") == [0, 1, 8]
    assert parse.cpumask_list("ffffffff,00000001") == [0, *range(32, 64)]
    assert parse.cpulist_text([0, 1, 2, 3, 6, 7]) == "0-3,6-7"
    assert parse.cpulist_text([5]) == "5"
    assert parse.parse_cpulist("0-2,5") == [0, 1, 2, 5]


# --- ticks: /proc/interrupts, /proc/stat, the hrtimer histogram, /proc/timer_list --------------

#: Real readings of the counters (busybox head's output, gzipped): ring-4x2, 8 loops released,
#: under Linux 6.12 and 6.1, at the start and the end of the window.
COUNTERS = DATA / "counters"
#: A kept run whose records hold the tick counts, its boot 0 with its raw files.
TICKED = DATA / "runs" / "ring-4x2-k6.12-t8-released-nboff" / "boot-0"
#: A kept run of mehta-m1 with busy and idle CPUs.
TICKED_M1 = DATA / "runs" / "mehta-m1-k6.12-t16-fork-nbon" / "boot-0.json.gz"


def counters_read(kernel: str, end: str) -> dict[str, str]:
    text = gzip.decompress((COUNTERS / f"ring-4x2-k{kernel}.{end}.gz").read_bytes()).decode()
    return parse.split_head(text)


@pytest.mark.parametrize("kernel", ["6.12", "6.1"])
def test_one_reading_of_the_counters_holds_each_file(kernel):
    read = counters_read(kernel, "start")
    assert list(read) == ["schedstat", "interrupts", "stat", "hist", "timer_list"]
    assert parse.parse_schedstat(read["schedstat"]).cpus.keys() == set(range(8))
    assert read["interrupts"].split()[:2] == ["CPU0", "CPU1"]
    assert read["timer_list"].startswith("Timer List Version")


@pytest.mark.parametrize(("kernel", "tick"), [("6.12", "tick_nohz_handler"),
                                              ("6.1", "tick_sched_timer")])  # fmt: skip
def test_real_interrupts_stat_hrtimers_and_timer_list_are_read_per_cpu(kernel, tick):
    start, end = counters_read(kernel, "start"), counters_read(kernel, "end")
    loc0, loc1 = (parse.parse_interrupts(r["interrupts"]) for r in (start, end))
    assert list(loc0) == list(range(8)) and all(loc1[c] > loc0[c] for c in loc0)
    stat0, stat1 = parse.parse_proc_stat(start["stat"]), parse.parse_proc_stat(end["stat"])
    assert list(stat1) == list(range(8)) and list(stat1[0]) == list(parse.STAT_FIELDS)
    assert all(stat1[c]["user"] > stat0[c]["user"] for c in stat1)  # the loops ran everywhere
    h0, h1 = parse.parse_hrtimer_hist(start["hist"]), parse.parse_hrtimer_hist(end["hist"])
    assert {c for c, f in h1 if f == tick} == set(range(8))
    assert all(h1[(c, tick)] > h0.get((c, tick), 0) for c in range(8))
    assert not {f for _, f in h1} & parse.TICK_FUNCTIONS - {tick}
    now0, tl0 = parse.parse_timer_list(start["timer_list"])
    now1, tl1 = parse.parse_timer_list(end["timer_list"])
    assert 9e9 < now1 - now0 < 11e9  # a 10 s window
    assert list(tl1) == list(range(8))
    for c in tl1:
        # Every hrtimer interrupt is a local timer interrupt (read a little later).
        events = tl1[c]["nr_events"] - tl0[c]["nr_events"]
        assert events == pytest.approx(loc1[c] - loc0[c], rel=0.05, abs=5)


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (parse.parse_interrupts, "      CPU0       CPU1\nNMI:   0   0   Non-maskable interrupts\n",
         "no LOC line (local timer interrupts)"),
        (parse.parse_interrupts, "cpu  1 2 3\n",
         "line 1: not a /proc/interrupts text (no CPU header)"),
        (parse.parse_interrupts, "      CPU0       CPU1\nLOC:   5   Local timer interrupts\n",
         "line 2: not one count per CPU: LOC:   5   Local timer interrupts"),
        (parse.parse_proc_stat, "cpu  1 2 3 4\ncpu0 1 2 3\n",
         "line 2: not a /proc/stat CPU line: cpu0 1 2 3"),
        (parse.parse_proc_stat, "intr 5 0 0\n", "no cpuN line: not a /proc/stat text"),
        (parse.parse_hrtimer_hist, "{ common_cpu: 0, function: [ff] f } hitcount: 3\n"
         "Totals:\n    Hits: 3\n    Entries: 1\n    Dropped: 2\n",
         "the histogram dropped entries (Dropped: 2)"),
        (parse.parse_hrtimer_hist, "{ cpu: 0 } hitcount: 3\n",
         "not a histogram keyed by common_cpu and function.sym"),
        (parse.parse_timer_list, "Timer List Version: v0.10\ncpu: 0\n",
         "not a /proc/timer_list text (no 'now at' line)"),
        (parse.parse_timer_list, "now at 5 nsecs\n\ncpu: 0\n  .nr_events      : 3\n",
         "a CPU lacks nr_events, nr_retries, nr_hangs"),
    ],
)  # fmt: skip
def test_bad_counters_are_refused_in_one_line(reader, text, message):
    with pytest.raises(InputError) as e:
        reader(text, "x")
    assert str(e.value) == f"x: {message}"


def test_a_real_boot_counts_the_ticks_each_cpu_handled():
    run = load_run(TICKED.with_name("boot-0.json.gz"))
    k = run.counters
    assert k.hz == 250 and k.jiffies / k.guest_s == pytest.approx(250, rel=0.02)
    # The counters are read just before the first fork and just after the window's end.
    assert 0 < k.guest_s - run.window.guest_s < 0.5
    assert "NO_HRTICK" in run.sched_features
    window_ns = run.window.end_ns - run.window.start_ns
    for c in run.per_cpu:
        assert 0 < c.ticks <= k.hz * k.guest_s * 1.05
        # An interrupt runs the tick at most once, and once more for each retry.
        assert c.ticks <= c.timer_interrupts + c.hrtimer_retries + 5
        assert c.loop_ns + c.idle_ns <= window_ns
    # CPU 0 runs loops throughout (they start pinned there; the shell that releases them and
    # kernel threads take the rest): each tick charged one tick's length to the task it
    # interrupted, so /proc/stat counts the same ticks.
    cpu0 = run.per_cpu[0]
    assert cpu0.loop_ns > 0.95 * window_ns and cpu0.idle_ns == 0
    charged = sum(getattr(cpu0.stat, f) for f in summary.CHARGED) * k.hz / summary.USER_HZ
    assert charged == pytest.approx(cpu0.ticks, rel=0.05)


def test_the_record_with_ticks_is_what_its_raw_files_give(tmp_path):
    record = json.loads(gzip.decompress(TICKED.with_name("boot-0.json.gz").read_bytes()))
    (tmp_path / "boot-0.json").write_text(json.dumps(record))
    for suffix in (".raw.tar.gz", ".console.txt"):
        shutil.copy(TICKED.with_name("boot-0" + suffix), tmp_path)
    assert runner.rebuild(tmp_path / "boot-0.json", Machine.load(str(RING))) == record
    assert "counters.start" in raw_files(TICKED)


def test_the_summary_gives_the_ticks_of_busy_and_idle_cpus_and_passes_per_tick():
    run = load_run(TICKED_M1)
    t = summary.summarize(run)["ticks"]
    busy = summary.busy_cpus(run)
    window_ns = run.window.end_ns - run.window.start_ns
    assert busy == {c.cpu for c in run.per_cpu if c.loop_ns > window_ns / 2}
    assert 12 <= len(busy) <= 16  # 16 loops on 32 CPUs
    assert t["cpus"] == {"busy": len(busy), "idle": 32 - len(busy)} and t["counted"]
    k = run.counters
    for group, cpus in (("busy", busy), ("idle", set(range(32)) - busy)):
        mine = [c for c in run.per_cpu if c.cpu in cpus]
        ticks = sum(c.ticks for c in mine)
        assert t["per_cpu_s"][group] == pytest.approx(ticks / k.guest_s / len(mine), abs=0.01)
        assert t["of_hz"][group] == pytest.approx(t["per_cpu_s"][group] / 250, abs=1e-4)
        passes = sum(getattr(p.lb_count, group) for p in run.passes
                     if p.level == 0 and p.cpu in cpus)  # fmt: skip
        assert t["passes_per_tick"][0]["name"] == "MC"
        assert t["passes_per_tick"][0][group] == pytest.approx(passes / ticks, abs=1e-4)
    assert t["per_cpu_s"]["busy"] < 0.5 * 250  # far fewer ticks than HZ on 32 vCPUs
    assert "  ticks handled per CPU-s (HZ 250, jiffies " in summary.text(run)


def test_the_ticks_over_the_boots_of_a_run_are_each_figures_mean_and_range(capsys):
    runs = load_runs(TICKED_M1.parent)
    t = summary.ticks_spread(runs)
    each = [summary.summarize(r)["ticks"] for r in runs]
    assert t["boots"] == len(runs) == 3 and t["counted"] and t["hz"] == 250
    busy = [e["per_cpu_s"]["busy"] for e in each]
    assert t["per_cpu_s"]["busy"] == {"mean": pytest.approx(sum(busy) / 3, abs=0.01),
                                      "min": min(busy), "max": max(busy)}  # fmt: skip
    shares = [r.window.vcpu_share for r in runs]
    assert t["vcpu_share"]["min"] == min(shares) and t["vcpu_share"]["max"] == max(shares)
    hangs = [sum(c.hrtimer_hangs for c in r.per_cpu if c.cpu not in summary.busy_cpus(r))
             for r in runs]  # fmt: skip
    assert (t["hrtimer_hangs"]["idle"]["min"], t["hrtimer_hangs"]["idle"]["max"]) == (
        min(hangs), max(hangs))  # fmt: skip
    # All levels together: the busy CPUs' busy passes over the ticks they handled.
    r = runs[0]
    busy_cpus = summary.busy_cpus(r)
    passes = sum(p.lb_count.busy for p in r.passes if p.cpu in busy_cpus)
    ticks = sum(c.ticks for c in r.per_cpu if c.cpu in busy_cpus)
    assert each[0]["passes_per_tick_all_levels"]["busy"] == pytest.approx(passes / ticks, abs=1e-4)
    assert [p["name"] for p in t["busy_passes_per_tick"]] == ["MC"] + ["NUMA"] * 5
    assert summary.main([str(TICKED_M1.parent)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("  ticks over 3 boots: vCPU share ")
    assert "ticks handled/CPU-s of busy CPUs (" in last and ", all levels " in last
    # Without ticks in every boot there is no such line.
    old = load_runs(DATA / "runs" / "ring-4x2-k6.1-t8-fork-nboff")  # made before ticks
    assert summary.ticks_spread(old) is None and summary.ticks_spread_text(old) is None


def test_a_record_without_ticks_loads_and_its_summary_has_none(tmp_path):
    data = json.loads(gzip.decompress(TICKED.with_name("boot-0.json.gz").read_bytes()))
    for key in ("sched_features", "counters", "per_cpu"):
        data.pop(key)
    (tmp_path / "old.json").write_text(json.dumps(data))
    run = load_run(tmp_path / "old.json")
    assert run.per_cpu is None and run.counters is None and run.sched_features is None
    assert "ticks" not in summary.summarize(run) and "ticks handled" not in summary.text(run)


# --- the file format ----------------------------------------------------------------------------


def test_a_real_record_loads_and_its_summary_adds_up():
    run = load_run(CAPTURE_612.with_suffix(".json"))
    assert run.kernel.release == "6.12.117+deb12-amd64"
    assert run.kernel.package.startswith("linux-image-6.12.117+deb12-amd64-unsigned_")
    assert run.machine.slit[0] == [10, 20, 30, 20] and run.qemu.vcpus == 8
    s = summary.summarize(run)
    assert sum(s["by_kind"].values()) == len(run.migrations)
    assert sum(s["by_distance"].values()) == s["migrations"]
    assert [p["name"] for p in s["passes_per_cpu_s"]] == ["MC", "NUMA", "NUMA"]
    assert s["tasks_moved_share"] == sum(
        1 for t in run.tasks if any(m.pid == t.pid for m in run.migrations)
    ) / len(run.tasks)
    assert "ring-4x2 · 6.12.117+deb12-amd64 · 8 tasks, start=released" in summary.text(run)


@pytest.mark.parametrize("capture", [CAPTURE_612, CAPTURE_61])
def test_the_record_is_what_its_raw_files_give(tmp_path, capture):
    # rebuild() makes the record again from --keep-raw's files: the parser of today reads the
    # capture as the one that wrote it did.
    for suffix in (".json", ".raw.tar.gz", ".console.txt"):
        shutil.copy(capture.with_name(capture.name + suffix), tmp_path)
    again = runner.rebuild(tmp_path / f"{capture.name}.json", Machine.load(str(RING)))
    assert again == json.loads(capture.with_name(capture.name + ".json").read_text())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["migrations"][0].update(kind="sideways"),
         "field migrations.0.kind: Input should be 'periodic', 'nohz_idle', 'newidle', "
         "'active', 'wakeup', 'fork', 'exec', 'numa_move', 'numa_swap', 'affinity' or 'other'"),
        (lambda d: d["window"].pop("guest_s"), "field window.guest_s: Field required"),
        (lambda d: d.update(format="other/1"),
         "field format: expected 'numasim-kernel-run/1', got 'other/1'"),
        (lambda d: d["machine"].update(slit=[[10]]), "field machine: Value error, cpus and slit "
         "need one row per node"),
        (lambda d: d["tasks"][0].update(run_ns=-1),
         "field tasks.0.run_ns: Input should be greater than or equal to 0"),
        (lambda d: d["per_cpu"][3].update(ticks=-1),
         "field per_cpu.3.ticks: Input should be greater than or equal to 0"),
        (lambda d: d["counters"].update(guest_s=0),
         "field counters.guest_s: Input should be greater than 0"),
        (lambda d: d["per_cpu"][0]["stat"].pop("softirq"),
         "field per_cpu.0.stat.softirq: Field required"),
    ],
)  # fmt: skip
def test_a_bad_record_is_one_line_naming_file_and_field(tmp_path, change, message):
    data = json.loads(gzip.decompress(TICKED.with_name("boot-0.json.gz").read_bytes()))
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        load_run(bad)
    assert str(e.value) == f"{bad}: {message}"


def test_a_file_that_is_not_json_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    with pytest.raises(InputError, match=rf"^{bad}: not a JSON kernel run: "):
        load_run(bad)
    with pytest.raises(InputError, match=rf"^{tmp_path / 'runs.json'}: cannot read"):
        load_runs(tmp_path)


def test_kernel_run_files_are_read_with_a_size_limit(tmp_path, monkeypatch):
    """A record larger than the limit, plain or gzipped (a gzip bomb unpacks only to the
    limit), and a binary file are one line each, not read until memory runs out."""
    import gzip

    from numasim.kernel import schema

    monkeypatch.setattr(schema, "MAX_RUN_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 2000 + "0]")
    with pytest.raises(InputError, match=rf"^{big}: the kernel run is larger than "):
        load_run(big)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 10_000_000))
    with pytest.raises(InputError, match=rf"^{bomb}: the kernel run is larger than 0 MiB"):
        load_run(bomb)
    zero = tmp_path / "zero.json"
    zero.write_bytes(b"\0" * 10)
    with pytest.raises(InputError, match=rf"^{zero}: not a text file: byte 0 is a NUL byte"):
        load_run(zero)


# --- a real boot (only where QEMU and a cached kernel are) --------------------------------------


def _cached_kernel() -> Path | None:
    found = sorted((images.cache_root() / "kernels").glob("linux-image-6.12.*/boot/vmlinuz-*"))
    return found[-1] if found else None


needs_qemu = pytest.mark.skipif(
    not (shutil.which("qemu-system-x86_64") and images.busybox_path() and _cached_kernel()),
    reason="needs qemu-system-x86_64, busybox-static and a cached 6.12 kernel "
    "(make kernel-tools; numasim kernel-run --kernel 6.12 downloads it)",
)


@needs_qemu
def test_a_real_boot_records_a_fork_run(run, tmp_path):
    started = time.monotonic()
    r = run("kernel-run", "--machine", RING, "--kernel", _cached_kernel(), "--tasks", "8",
            "--start", "fork", "--window-s", "3", "--out", tmp_path, "--summary")  # fmt: skip
    assert r.code == 0, r.err
    elapsed = time.monotonic() - started
    (record,) = load_runs(tmp_path)
    assert record.machine.slit == Machine.load(str(RING)).distances
    assert record.kernel.release.startswith("6.12.") and record.kernel.package is None
    assert len(record.tasks) == 8 and record.lost_events == 0
    assert all(t.traced_migrations == t.kernel_nr_migrations for t in record.tasks)
    forks = {m.pid for m in record.migrations if m.kind == "fork"}
    assert forks == {t.pid for t in record.tasks if t.first_cpu != t.fork_cpu}
    assert 2.9 < record.window.guest_s < 4
    assert {p.name for p in record.passes} == {"MC", "NUMA"}
    # The ticks each CPU handled, each busy CPU at most HZ per guest second.
    k = record.counters
    assert k.hz == 250 and k.jiffies / k.guest_s == pytest.approx(250, rel=0.05)
    assert record.sched_features and [c.cpu for c in record.per_cpu] == list(range(8))
    busy = summary.busy_cpus(record)
    assert busy
    for c in record.per_cpu:
        assert c.ticks >= 0 and c.timer_interrupts >= 0 and c.hrtimer_hangs >= 0
        if c.cpu in busy:
            assert 0 < c.ticks / k.guest_s <= k.hz * 1.05
    assert "ticks handled per CPU-s" in r.out
    assert "ring-4x2 · 6.12" in r.out and elapsed < 300


@needs_qemu
def test_sigterm_stops_qemu_and_leaves_nothing_behind(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    cmd = [sys.executable, "-m", "numasim", "kernel-run", "--machine", str(RING), "--kernel",
           str(_cached_kernel()), "--window-s", "30", "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if _qemus_of(tmp):
                break
            time.sleep(0.1)
        assert _qemus_of(tmp), "QEMU did not start"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "numasim: interrupted"
    assert not _qemus_of(tmp)
    assert not list(tmp.iterdir())


def _qemus_of(tmp: Path) -> list[int]:
    """Pids of QEMU processes whose command line names a file under ``tmp``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"qemu-system-x86_64")
            and str(tmp).encode() in b" ".join(cmdline)
        ):
            found.append(int(proc.name))
    return found


def test_the_summary_command_prints_each_boot_and_the_spread(tmp_path, capsys):
    run = load_run(CAPTURE_612.with_name(CAPTURE_612.name + ".json"))
    spread = summary.spread_text([run, run])
    per_task = summary.summarize(run)["per_task_s"]["all"]
    assert spread.startswith(f"  over 2 boots: migrations/task-s {per_task:.3f} "
                             f"({per_task:.3f}–{per_task:.3f})")  # fmt: skip
    assert summary.main([str(CAPTURE_612.with_name(CAPTURE_612.name + ".json"))]) == 0
    assert capsys.readouterr().out.startswith("ring-4x2 · 6.12.117+deb12-amd64 · 8 tasks")
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert summary.main([str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"numasim: error: {bad}: field format: expected 'numasim-kernel-run/1', got 'list'\n"
    )


def test_a_record_may_be_stored_gzipped(tmp_path):
    plain = CAPTURE_612.with_name(CAPTURE_612.name + ".json")
    (tmp_path / "boot-0.json.gz").write_bytes(gzip.compress(plain.read_bytes()))
    (tmp_path / "runs.json").write_text(json.dumps({"format": "numasim-kernel-runs/1",
                                                    "boots": ["boot-0.json"]}))  # fmt: skip
    (run,) = load_runs(tmp_path)
    assert run == load_run(plain) == load_run(tmp_path / "boot-0.json.gz")
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match=r"bad.json.gz: not a gzipped kernel run: "):
        load_run(tmp_path / "bad.json.gz")


RUNS = DATA / "runs"


@pytest.mark.parametrize("directory", sorted(RUNS.glob("*/")), ids=lambda p: p.name)
def test_every_kept_run_is_a_valid_record_whose_trace_matches_the_kernel(directory):
    runs = load_runs(directory)
    assert len(runs) >= 3
    for run in runs:
        assert run.lost_events == 0 and not run.unknown_stacks
        assert all(t.traced_migrations == t.kernel_nr_migrations for t in run.tasks)
        assert len(run.tasks) == run.workload.tasks
        series = "6.1." if "-k6.1-" in directory.name else "6.12."
        assert run.kernel.release.startswith(series)
        moved = {m.pid for m in run.migrations}
        assert moved <= {t.pid for t in run.tasks}
        # The loops' balancing pulls, by idle type, are among the kernel's own count of pulls
        # (lb_gained, every task's): a check of how the idle type is read from the trace.
        for idle in ("idle", "busy", "newly_idle"):
            ours = sum(1 for m in run.migrations if m.idle == idle)
            assert ours <= sum(getattr(p.lb_gained, idle) for p in run.passes), idle
        if run.workload.start == "released":
            assert all(t.fork_cpu == t.first_cpu == 0 for t in run.tasks)
            assert all(m.t_ns > run.window.release_ns for m in run.migrations)
        summary.summarize(run)
