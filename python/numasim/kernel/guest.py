"""The guest: an initramfs of a static busybox, the guest scripts and the run's settings.

The scripts are data files (``numasim/data/kernel/init.sh`` and ``spawn.sh``); what a run
changes is in ``/etc/numasim.env``, shell assignments the scripts source. The archive is written
here in the kernel's ``newc`` cpio format, so it can hold ``/dev/console`` without root rights.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from numasim.machine import data_dir

#: What is traced (tracefs event names). sched_process_exec tells an exec's own migration from
#: an affinity change's (both go through migration_cpu_stop).
EVENTS = (
    "sched/sched_migrate_task",
    "sched/sched_move_numa",
    "sched/sched_swap_numa",
    "sched/sched_stick_numa",
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_wakeup_new",
    "sched/sched_process_fork",
    "sched/sched_process_exec",
    "sched/sched_process_exit",
)
START_MODES = ("fork", "pinned", "released")


@dataclass(frozen=True)
class WorkloadSpec:
    """What runs inside the guest during the window."""

    tasks: int
    start: str
    release_ms: int
    mem_mb: int
    window_s: float
    numa_balancing: bool

    def as_json(self) -> dict:
        return {
            "tasks": self.tasks,
            "start": self.start,
            "release_ms": self.release_ms if self.start == "released" else None,
            "mem_mb": self.mem_mb,
            "window_s": self.window_s,
            "numa_balancing": self.numa_balancing,
        }


def env_text(w: WorkloadSpec, cpus: int, buffer_kb: int) -> str:
    """``/etc/numasim.env``: the settings the guest scripts read."""
    values = {
        "TASKS": w.tasks,
        "START": w.start,
        "RELEASE_S": f"{w.release_ms / 1000:.3f}",
        "MEM_MB": w.mem_mb,
        "WINDOW_S": f"{w.window_s:g}",
        "NUMA_BALANCING": int(w.numa_balancing),
        "NCPUS": cpus,
        "ALL_CPUS": f"0-{cpus - 1}",
        "BUFFER_KB": buffer_kb,
        "EVENTS": " ".join(EVENTS),
    }
    return "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in values.items())


# --- cpio (newc) -----------------------------------------------------------------------------

S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR = 0o040000, 0o100000, 0o120000, 0o020000


def _entry(
    name: str,
    mode: int,
    data: bytes = b"",
    ino: int = 0,
    rdev: tuple[int, int] = (0, 0),
    nlink: int = 1,
) -> bytes:
    """One newc header, its name and its data, each padded to 4 bytes."""
    fields = [ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    head = b"070701" + b"".join(f"{v:08x}".encode() for v in fields)
    body = head + name.encode() + b"\0"
    body += b"\0" * (-len(body) % 4)
    return body + data + b"\0" * (-len(data) % 4)


def cpio_newc(entries: list[tuple[str, int, bytes, tuple[int, int]]]) -> bytes:
    """A newc archive of ``(path, mode, data, (rdev major, minor))`` entries, then the trailer."""
    out = [
        _entry(name, mode, data, ino, rdev, 2 if mode & S_IFDIR else 1)
        for ino, (name, mode, data, rdev) in enumerate(entries, start=1)
    ]
    out.append(_entry("TRAILER!!!", 0))
    blob = b"".join(out)
    return blob + b"\0" * (-len(blob) % 512)


def initramfs(busybox: Path, env: str) -> bytes:
    """The guest's initramfs: busybox, /init, /spawn.sh, /etc/numasim.env, /dev/console."""
    scripts = data_dir("kernel")
    entries: list[tuple[str, int, bytes, tuple[int, int]]] = [
        (d, S_IFDIR | 0o755, b"", (0, 0)) for d in ("bin", "dev", "etc", "proc", "sys", "tmp")
    ]
    entries += [
        ("dev/console", S_IFCHR | 0o600, b"", (5, 1)),
        ("bin/busybox", S_IFREG | 0o755, busybox.read_bytes(), (0, 0)),
        ("bin/sh", S_IFLNK | 0o777, b"busybox", (0, 0)),
        ("init", S_IFREG | 0o755, (scripts / "init.sh").read_bytes(), (0, 0)),
        ("spawn.sh", S_IFREG | 0o755, (scripts / "spawn.sh").read_bytes(), (0, 0)),
        ("etc/numasim.env", S_IFREG | 0o644, env.encode(), (0, 0)),
    ]
    return cpio_newc(entries)
