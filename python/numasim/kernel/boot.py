"""Booting the guest: QEMU's command line for a numasim machine, and one supervised boot.

The machine becomes one ``memory-backend-ram`` and one ``-numa node`` per node, its SLIT one
``-numa dist`` per ordered pair of distinct nodes; QEMU emulates it on a q35 board with
multi-threaded TCG (no KVM). The console (ttyS0) is QEMU's standard output, read line by line
with the host's clock, so the guest's window can be timed from outside; the recorded data come
over the second serial port (ttyS1) into a file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from numasim._core import InputError
from numasim.machine import Machine

#: What QEMU's ACPI tables and this harness can express.
MAX_NODES = 16
MAX_CPUS_PER_NODE = 4
MAX_CPUS = 64
#: Kernel command line: the console, schedstats (counted only when enabled) and no reboot on
#: panic. Nothing that changes what the scheduler does.
APPEND = "console=ttyS0 schedstats=enable panic=-1 loglevel=4"


def refuse_machine(m: Machine, origin: str) -> None:
    """One InputError line if QEMU (or the harness) cannot boot ``m``."""
    counts = [len(m.node_cpus(n)) for n in range(m.nodes)]
    if m.nodes > MAX_NODES:
        raise InputError(f"{origin}: {m.nodes} nodes; kernel-run boots at most {MAX_NODES}")
    if max(counts) > MAX_CPUS_PER_NODE:
        raise InputError(
            f"{origin}: a node has {max(counts)} CPUs; kernel-run boots at most "
            f"{MAX_CPUS_PER_NODE} per node (each vCPU is a thread on this host)"
        )
    if m.cpus > MAX_CPUS:
        raise InputError(f"{origin}: {m.cpus} CPUs; kernel-run boots at most {MAX_CPUS}")
    if 0 in counts:
        # Tried: QEMU boots it, but Linux numbers the CPU-less node after the others.
        raise InputError(
            f"{origin}: node {counts.index(0)} has no CPU; kernel-run does not boot "
            "memory-only nodes (the guest would renumber its nodes)"
        )


def node_mem_mb(m: Machine) -> int:
    """Memory per node: 256 MB (128 MB from 9 nodes on, so 16 nodes stay at 2 GB)."""
    return 256 if m.nodes <= 8 else 128


def buffer_kb(m: Machine) -> int:
    """Trace buffer per CPU: an eighth of the guest's memory shared by its CPUs, at most 16 MB."""
    return min(16384, node_mem_mb(m) * m.nodes * 1024 // 8 // m.cpus)


def smp(m: Machine) -> str:
    """``-smp``: one socket per node with CPUs (its own last-level cache, as on a NUMA server)
    when those nodes have equal CPU counts; otherwise the CPUs alone (QEMU then makes one
    socket, whose cache the kernel splits at node boundaries with a warning)."""
    counts = {len(m.node_cpus(n)) for n in range(m.nodes)} - {0}
    sockets = sum(1 for n in range(m.nodes) if m.node_cpus(n))
    if len(counts) == 1:
        return f"{m.cpus},sockets={sockets},cores={counts.pop()},threads=1"
    return str(m.cpus)


def qemu_args(m: Machine, vmlinuz: Path, initrd: Path, data: Path) -> list[str]:
    """QEMU's arguments (after the program name) to boot ``m``."""
    mem = node_mem_mb(m)
    args = [
        "-machine",
        "q35",
        "-accel",
        "tcg,thread=multi",
        "-smp",
        smp(m),
        "-m",
        f"{mem * m.nodes}M",
        "-kernel",
        str(vmlinuz),
        "-initrd",
        str(initrd),
        "-append",
        APPEND,
        "-display",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
        "-serial",
        "stdio",
        "-serial",
        f"file:{data}",
        "-net",
        "none",
    ]
    for node in range(m.nodes):
        cpus = m.node_cpus(node)
        args += ["-object", f"memory-backend-ram,id=m{node},size={mem}M"]
        spec = f"node,nodeid={node},cpus={cpus[0]}-{cpus[-1]}," if cpus else f"node,nodeid={node},"
        args += ["-numa", spec + f"memdev=m{node}"]
    for i, row in enumerate(m.distances):
        for j, v in enumerate(row):
            if i != j:
                args += ["-numa", f"dist,src={i},dst={j},val={v}"]
    return args


@dataclass
class Console:
    """The guest's console as read on the host: each line with the host's monotonic time and
    QEMU's CPU time (user + system, all threads) when it arrived."""

    lines: list[tuple[float, float, str]] = field(default_factory=list)
    #: The host's monotonic time when QEMU was started (None: not known).
    started: float | None = None

    def first(self, text: str) -> tuple[float, float] | None:
        for t, cpu, line in self.lines:
            if text in line:
                return t, cpu
        return None

    @property
    def text(self) -> str:
        return "\n".join(line for _, _, line in self.lines)

    def up(self) -> tuple[float, float] | None:
        """The guest's first line of its own (``numasim-guest: up UPTIME``): host seconds since
        QEMU started, and the guest's uptime then."""
        for t, _, line in self.lines:
            if line.startswith("numasim-guest: up ") and self.started is not None:
                return t - self.started, float(line.split()[2])
        return None

    def timed_text(self) -> str:
        """A header, then each line as ``HOST_S QEMU_CPU_S LINE`` (host seconds since QEMU
        started, QEMU's CPU seconds)."""
        t0 = self.started if self.started is not None else 0.0
        rows = (f"{t - t0:.3f} {cpu:.3f} {line}\n" for t, cpu, line in self.lines)
        return TIMED_HEADER + "".join(rows)

    @classmethod
    def from_timed_text(cls, text: str) -> Console:
        """What ``timed_text`` wrote (without its header, the start of QEMU is not known)."""
        lines = []
        rows = text.splitlines()
        started = 0.0 if rows[:1] == [TIMED_HEADER.strip()] else None
        for row in rows[1 if started is not None else 0 :]:
            t, cpu, line = [*row.split(" ", 2), "", ""][:3]
            lines.append((float(t), float(cpu), line))
        return cls(lines, started)


TIMED_HEADER = "# host seconds since QEMU started, QEMU's CPU seconds, the console's line\n"


def _cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt here, so it is handled like Ctrl-C (QEMU is killed)."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_qemu(
    args: list[str], timeout_s: float, on_line: Callable[[str], None] | None = None
) -> Console:
    """Run QEMU to its end (the guest powers off) and return its console. A timeout, Ctrl-C or
    SIGTERM kills QEMU before this returns or raises: no process is left behind."""
    console = Console(started=time.monotonic())
    with terminate_on_sigterm():
        proc = subprocess.Popen(
            ["qemu-system-x86_64", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            stderr: list[bytes] = []

            def read_console() -> None:
                assert proc.stdout is not None
                for raw in proc.stdout:
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    console.lines.append((time.monotonic(), _cpu_seconds(proc.pid), line))
                    if on_line:
                        on_line(line)

            reader = threading.Thread(target=read_console, daemon=True)
            reader.start()
            err = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
            err.start()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise InputError(
                    f"--timeout-s: the guest did not finish within {timeout_s:.0f} s "
                    "(QEMU stopped); give more time or a smaller machine or window"
                ) from None
            reader.join(timeout=10)
            err.join(timeout=10)
            if proc.returncode:
                message = b"".join(stderr).decode(errors="replace").strip().splitlines()
                raise InputError(
                    f"qemu-system-x86_64 failed (exit {proc.returncode}): "
                    f"{message[-1] if message else 'no message'}"
                )
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
    return console
