"""``numasim kernel-run``: boot, record, parse and write, for each of K boots.

Output (everything inside ``--out DIR``)::

    DIR/boot-0.json … boot-K-1.json   one record per boot (numasim-kernel-run/1)
    DIR/runs.json                     the index: the boots' files and their summaries
    DIR/boot-N.raw.tar.gz             with --keep-raw: what the guest sent (trace, schedstat …)
    DIR/boot-N.console.txt            with --keep-raw: the guest's console
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numasim._core import InputError
from numasim.kernel import boot, guest, images, parse
from numasim.kernel.schema import FORMAT, INDEX_FORMAT, KernelRun
from numasim.machine import Machine

#: The guest kernel crashed: an Oops or a panic on its console.
CRASH = re.compile(r"Kernel panic|Oops:|BUG: ")
#: Boots tried for one run when the guest kernel crashes (multi-threaded TCG can run a stale
#: int3 while the kernel patches its own code, e.g. when sched_clock is marked stable).
ATTEMPTS = 3
#: The files the guest reads its counters from, by the name (without directory) that heads
#: them in its ``counters.start``/``counters.end`` → the name they are parsed under.
COUNTER_FILES = {"hist": "hrtimers"}
DATA_BEGIN = "=== numasim-data begin"
DATA_END = "=== numasim-data end"


class GuestCrashed(Exception):
    """The guest kernel crashed or sent nothing: the boot is tried again."""

    def __init__(self, line: str, console: boot.Console) -> None:
        super().__init__(line)
        self.line, self.console = line.split("] ", 1)[-1].strip(), console


@dataclass
class Options:
    """What one ``kernel-run`` asks for."""

    machine: Machine
    kernel: str
    workload: guest.WorkloadSpec
    boots: int
    out: Path
    keep_raw: bool
    timeout_s: float | None


def default_timeout_s(m: Machine, window_s: float) -> float:
    """Generous for this 2-core host: 120 s, 10 s per vCPU to boot, the window ten times."""
    return 120 + 10 * m.cpus + 10 * window_s


def unpack(data: bytes, origin: str) -> dict[str, bytes]:
    """The files of the archive the guest sent over its second serial port."""
    text = data.decode("ascii", errors="replace")
    if DATA_BEGIN not in text or DATA_END not in text:
        raise InputError(f"{origin}: the guest sent no complete data (see its console)")
    body = text.split(DATA_BEGIN, 1)[1].split(DATA_END, 1)[0]
    try:
        raw = base64.b64decode("".join(body.split()), validate=True)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
            files = {}
            for member in tar.getmembers():
                f = tar.extractfile(member) if member.isfile() else None
                if f is not None:
                    files[member.name.removeprefix("./")] = f.read()
    except (binascii.Error, tarfile.TarError, OSError, EOFError) as e:
        raise InputError(f"{origin}: the guest's data are damaged: {e}") from None
    files["raw.tar.gz"] = raw
    return files


def check_nodes(text: str, m: Machine, origin: str) -> None:
    """The guest kernel saw the machine's nodes, CPUs and distances (its sysfs), or one line."""
    seen = {}
    for line in text.splitlines():
        head, _, dist = line.partition("|")
        node, _, cpus = head.strip().partition(" ")
        seen[int(node)] = (parse.parse_cpulist(cpus), [int(v) for v in dist.split()])
    want = {n: (m.node_cpus(n), list(m.distances[n])) for n in range(m.nodes)}
    if seen != want:
        diff = next(n for n in sorted(set(want) | set(seen)) if seen.get(n) != want.get(n))
        raise InputError(
            f"{origin}: the guest kernel's node {diff} is {seen.get(diff)}, the machine's "
            f"{want.get(diff)} (CPUs, distances): QEMU did not give it the machine's table"
        )


def record(
    opts: Options,
    boot_index: int,
    kernel: images.Kernel,
    qemu_version: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Boot once and return the boot's record (and write the raw files if asked)."""
    m, w = opts.machine, opts.workload
    origin = f"boot {boot_index}"
    timeout = opts.timeout_s or default_timeout_s(m, w.window_s)
    with tempfile.TemporaryDirectory(prefix="numasim-kernel-") as tmp:
        work = Path(tmp)
        env = guest.env_text(w, m.cpus, boot.buffer_kb(m))
        initrd = work / "initrd.cpio"
        initrd.write_bytes(guest.initramfs(images.busybox_path() or Path("/bin/busybox"), env))
        data_file = work / "data.txt"
        args = boot.qemu_args(m, kernel.vmlinuz, initrd, data_file)
        started = time.monotonic()

        def on_line(line: str) -> None:
            if line.startswith("numasim-guest:"):
                progress(
                    f"{origin}: {line.removeprefix('numasim-guest: ')} "
                    f"({time.monotonic() - started:.0f} s)"
                )

        console = boot.run_qemu(args, timeout, on_line)
        boot_s = time.monotonic() - started
        if opts.keep_raw:
            (opts.out / f"boot-{boot_index}.console.txt").write_text(console.timed_text())
        failed = next(
            (line for _, _, line in console.lines if "numasim-guest: error" in line), None
        )
        if failed:
            raise InputError(f"{origin}: the guest stopped: {failed.split('error: ', 1)[1]}")
        crash = next((line for _, _, line in console.lines if CRASH.search(line)), None)
        if crash or not data_file.exists() or DATA_END.encode() not in data_file.read_bytes():
            raise GuestCrashed(crash or "the guest sent no complete data", console)
        files = unpack(data_file.read_bytes(), origin)
    if opts.keep_raw:
        (opts.out / f"boot-{boot_index}.raw.tar.gz").write_bytes(files["raw.tar.gz"])
    meta = {
        "package": kernel.package,
        "notes": list(kernel.notes),
        "qemu": qemu_version,
        "host_cpus": os.cpu_count() or 1,
        "boot_s": round(boot_s, 1),
    }
    return build(m, w, boot_index, files, console, meta)


def build(
    m: Machine,
    w: guest.WorkloadSpec,
    boot_index: int,
    files: dict[str, bytes],
    console: boot.Console,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """A boot's record from what its guest sent (``files``) and its console."""
    import gzip

    origin = f"boot {boot_index}"

    def text(name: str) -> str:
        if name not in files:
            raise InputError(f"{origin}: the guest's data lack {name}")
        return files[name].decode("utf-8", errors="replace")

    files = dict(files)
    for end in ("start", "end"):  # one reading of all counters (head's output) → its files
        if f"counters.{end}" in files:
            read = parse.split_head(files[f"counters.{end}"].decode("utf-8", errors="replace"))
            for name, body in read.items():
                files[f"{COUNTER_FILES.get(name, name)}.{end}"] = body.encode()
    check_nodes(text("nodes"), m, origin)
    balancing = text("numa_balancing").strip()
    if balancing != str(int(w.numa_balancing)):
        raise InputError(
            f"{origin}: kernel.numa_balancing is {balancing} in the guest, "
            f"not the {int(w.numa_balancing)} asked for"
        )
    if text("schedstats_enabled").strip() != "1":
        raise InputError(f"{origin}: schedstats are not enabled in the guest")
    if "trace.gz" not in files:
        raise InputError(f"{origin}: the guest's data lack trace.gz")
    rec = parse.Recorded(
        trace=gzip.decompress(files["trace.gz"]).decode("utf-8", errors="replace"),
        schedstat_start=text("schedstat.start"),
        schedstat_end=text("schedstat.end"),
        per_cpu_stats=text("per_cpu_stats"),
        pids=[int(p) for p in text("pids").split()],
        domains=text("domains"),
        origin=origin,
        task_sched={
            int(k[6:]): v.decode("utf-8", errors="replace")
            for k, v in files.items()
            if k.startswith("sched.") and k[6:].isdigit()
        },
        vmstat_start=files.get("vmstat.start", b"").decode(),
        vmstat_end=files.get("vmstat.end", b"").decode(),
        **{
            f"{name}_{end}": files.get(f"{name}.{end}", b"").decode()
            for name in ("interrupts", "stat", "hrtimers", "timer_list")
            for end in ("start", "end")
        },
    )
    result = parse.analyse(rec, _node_of(m), m.distances)
    lost = parse.lost_events(rec.per_cpu_stats)
    if lost:
        result["notes"].append(f"the trace buffers lost {lost} events: counts are lower bounds")
    up = console.up()
    start = console.first("numasim-guest: window-start")
    end = console.first("numasim-guest: window-end")
    window = result["window"]
    window["host_s"] = window["host_cpu_s"] = window["vcpu_share"] = None
    if start and end:
        window["host_s"] = round(end[0] - start[0], 3)
        window["host_cpu_s"] = round(end[1] - start[1], 3)
        if window["host_s"] > 0:
            window["vcpu_share"] = round(window["host_cpu_s"] / window["host_s"] / m.cpus, 4)
    extra = {k: result[k] for k in ("counters", "per_cpu") if k in result}
    if "sched_features" in files:  # only in runs whose guest read them, as the counters
        extra = {"sched_features": files["sched_features"].decode().split(), **extra}
    return {
        "format": FORMAT,
        "kernel": {
            "release": text("release").strip(),
            "package": meta["package"],
            "cmdline": text("cmdline").strip(),
        },
        "qemu": {
            "version": meta["qemu"],
            "accel": "tcg",
            "machine": "q35",
            "host_cpus": meta["host_cpus"],
            "vcpus": m.cpus,
            "smp": boot.smp(m),
            "node_mem_mb": boot.node_mem_mb(m),
        },
        "machine": {
            "name": m.name,
            "nodes": m.nodes,
            "cpus": [m.node_cpus(n) for n in range(m.nodes)],
            "slit": [list(r) for r in m.distances],
        },
        "workload": w.as_json(),
        "boot": boot_index,
        "boot_s": meta["boot_s"],
        "up_host_s": round(up[0], 3) if up else None,
        "up_guest_s": up[1] if up else None,
        **{
            k: result[k]
            for k in (
                "schedstat_version",
                "window",
                "tasks",
                "migrations",
                "other_migrations",
                "other_migrations_by_kind",
                "numa_events",
                "vmstat",
                "passes",
                "runqueues",
            )
        },
        "lost_events": lost,
        "unknown_stacks": result["unknown_stacks"],
        "notes": [*meta["notes"], *result["notes"]],
        **extra,
    }


def rebuild(run_file: Path, machine: Machine) -> dict[str, Any]:
    """A boot's record made again from its ``--keep-raw`` files (after a change of the parser):
    the workload and the kernel, QEMU and host facts come from the old record."""
    old = json.loads(run_file.read_text())
    stem = run_file.with_suffix("")
    raw = run_file.with_name(stem.name + ".raw.tar.gz").read_bytes()
    payload = base64.b64encode(raw).decode()
    files = unpack(f"{DATA_BEGIN}\n{payload}\n{DATA_END}\n".encode(), str(run_file))
    console = boot.Console.from_timed_text(
        run_file.with_name(stem.name + ".console.txt").read_text()
    )
    w = old["workload"]
    spec = guest.WorkloadSpec(
        w["tasks"],
        w["start"],
        w["release_ms"] or 1000,
        w["mem_mb"],
        w["window_s"],
        w["numa_balancing"],
    )
    notes = [n for n in old["notes"] if n.startswith("package indexes unreachable")]
    old["qemu"].setdefault("smp", boot.smp(machine))
    meta = {
        "package": old["kernel"]["package"],
        "notes": notes,
        "qemu": old["qemu"]["version"],
        "host_cpus": old["qemu"]["host_cpus"],
        "boot_s": old.get("boot_s"),
    }
    new = build(machine, spec, old["boot"], files, console, meta)
    new["attempts"] = old.get("attempts", 1)
    new["notes"] += [n for n in old["notes"] if n.startswith("attempt ")]
    return new


def _node_of(m: Machine) -> list[int]:
    node_of = [0] * m.cpus
    for n in range(m.nodes):
        for c in m.node_cpus(n):
            node_of[c] = n
    return node_of


def check_out(out: Path) -> None:
    """``--out``: a directory (to be created, or one that holds no kernel runs yet)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} is a file; give a directory")
    if out.is_dir() and (any(out.glob("boot-*.json")) or (out / "runs.json").exists()):
        raise InputError(f"--out: {out} already holds kernel runs; give a new directory")


def kernel_run(opts: Options, progress: Callable[[str], None]) -> list[Path]:
    """Every boot of ``opts``; returns the files written (boots, then the index). What can be
    checked here is checked before anything is installed, downloaded or booted."""
    with boot.terminate_on_sigterm():
        return _kernel_run(opts, progress)


def _kernel_run(opts: Options, progress: Callable[[str], None]) -> list[Path]:
    from numasim.kernel.summary import summarize

    boot.refuse_machine(opts.machine, "--machine")
    check_out(opts.out)
    if opts.kernel not in images.SERIES:
        images.resolve_kernel(opts.kernel)  # a file: refused here if it is not one
    images.ensure_tools(progress)
    kernel = images.resolve_kernel(opts.kernel, progress)
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out: cannot create {opts.out}: {e.strerror}") from None
    version = images.qemu_version()
    written = []
    summaries = []
    for i in range(opts.boots):
        progress(
            f"boot {i}: booting {kernel.package or kernel.vmlinuz} on {opts.machine.name} "
            f"({opts.machine.cpus} vCPUs)"
        )
        crashes = []
        for attempt in range(1, ATTEMPTS + 1):
            try:
                run = record(opts, i, kernel, version, progress)
                break
            except GuestCrashed as e:
                crashes.append(e.line)
                if opts.keep_raw:
                    crashed = opts.out / f"boot-{i}.console.txt"
                    crashed.replace(opts.out / f"boot-{i}.attempt-{attempt}.console.txt")
                progress(
                    f"boot {i}: the guest kernel crashed ({e.line}); "
                    + ("booting again" if attempt < ATTEMPTS else "giving up")
                )
        else:
            raise InputError(
                f"boot {i}: the guest kernel crashed in {ATTEMPTS} boots in a row "
                f"(last: {crashes[-1]}); see --keep-raw's console files"
            )
        run["attempts"] = len(crashes) + 1
        run["notes"] += [
            f"attempt {n}: the guest kernel crashed ({line}); booted again"
            for n, line in enumerate(crashes, start=1)
        ]
        KernelRun.model_validate(run)  # what load_run will accept
        path = opts.out / f"boot-{i}.json"
        path.write_text(json.dumps(run, indent=1) + "\n")
        written.append(path)
        summaries.append(summarize(KernelRun.model_validate(run)))
        index = {"format": INDEX_FORMAT, "boots": [p.name for p in written], "summaries": summaries}
        (opts.out / "runs.json").write_text(json.dumps(index, indent=1) + "\n")
    return [*written, opts.out / "runs.json"]
