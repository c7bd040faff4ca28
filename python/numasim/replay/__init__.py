"""Real workloads in: a scheduler trace of a real run, turned into a numasim workload.

```text
  trace text ──parse_trace (numasim.kernel.parse)──► events ──schedule──► threads
  (tracefs trace, trace-cmd report, perf script)                             │
                                                   machine beside it ──► to_workload ──► Workload
```

``numasim import-trace`` is the command (numasim.replay.command); docs/workloads.md,
"Replaying a real trace", says what is read and how a thread becomes a process.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from numasim._core import InputError
from numasim.kernel.parse import Event, parse_cpulist, parse_trace
from numasim.machine import Machine
from numasim.replay.build import Imported, to_workload
from numasim.replay.schedule import Schedule, Thread, schedule

__all__ = ["Imported", "Schedule", "Thread", "TraceFiles", "import_trace", "read", "schedule"]

#: The most a trace may unpack to (a gzip bomb stops here).
MAX_TRACE_BYTES = 1 << 30
#: Files beside a trace that describe its machine: numactl --hardware output, or the real-kernel
#: harness's sysfs capture (one line per node: ``NODE CPULIST | DISTANCES``).
NUMACTL_NAMES = ("numactl.txt", "numactl-hardware.txt", "numactl")
SYSFS_NAME = "nodes"


@dataclass
class TraceFiles:
    """A trace's text and the files found beside it."""

    origin: str
    text: str
    beside: dict[str, str] = field(default_factory=dict)
    #: The events, when they were read already (a Perfetto trace): the text is then empty.
    events: list[Event] | None = None


def _unzip(data: bytes, origin: str) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(MAX_TRACE_BYTES + 1)
    except (OSError, EOFError) as e:
        raise InputError(f"{origin}: a damaged gzip file ({e}): the trace is cut short") from None
    if len(out) > MAX_TRACE_BYTES:
        raise InputError(f"{origin}: unpacks to more than {MAX_TRACE_BYTES >> 20} MiB")
    return out


def _text(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{origin}: not UTF-8 text (byte {e.start}): not a trace") from None


def read(path: str | Path, trace_processor: str | None = None) -> TraceFiles:
    """A trace: a text file (gzip or not), a directory holding ``trace`` or ``trace.gz``, a
    real-kernel run's ``boot-N.raw.tar.gz``, or a Perfetto trace (read by the
    ``trace_processor`` binary: numasim.replay.perfetto); with the machine files beside it."""
    from numasim.replay import perfetto

    path = Path(path)
    if trace_processor is not None or perfetto.looks_like_perfetto(path):
        return perfetto.read(path, trace_processor, _beside(path))
    if path.is_dir():
        found = next((path / n for n in ("trace", "trace.gz", "trace.txt") if (path / n).is_file()),
                     None)  # fmt: skip
        if found is None:
            raise InputError(f"{path}: a directory without a trace, trace.gz or trace.txt file")
        path = found
    if not path.is_file():
        raise InputError(f"{path}: no such trace file")
    with path.open("rb") as f:
        data = f.read(MAX_TRACE_BYTES + 1)
    if tarfile.is_tarfile(path):
        return _from_tar(path)
    text = _text(_unzip(data, str(path)), str(path))
    return TraceFiles(str(path), text, _beside(path))


def _beside(path: Path) -> dict[str, str]:
    """The machine files in the trace's directory."""
    beside = {}
    for name in (*NUMACTL_NAMES, SYSFS_NAME):
        if (path.parent / name).is_file():
            beside[name] = (path.parent / name).read_text(errors="replace")[: 1 << 20]
    return beside


def _from_tar(path: Path) -> TraceFiles:
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                name = member.name.removeprefix("./")
                wanted = name in ("trace", "trace.gz", SYSFS_NAME, *NUMACTL_NAMES)
                f = tar.extractfile(member) if member.isfile() and wanted else None
                if f is not None:
                    files[name] = f.read(MAX_TRACE_BYTES + 1)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InputError(f"{path}: a damaged archive ({e})") from None
    key = "trace.gz" if "trace.gz" in files else "trace" if "trace" in files else None
    if key is None:
        raise InputError(f"{path}: an archive without a trace or trace.gz file")
    origin = f"{path}: {key}"
    beside = {k: _text(v, f"{path}: {k}") for k, v in files.items() if not k.startswith("trace")}
    return TraceFiles(origin, _text(_unzip(files[key], origin), origin), beside)


def machine_beside(files: TraceFiles) -> Machine | None:
    """The machine the files beside the trace describe (``None``: none is there)."""
    for name in NUMACTL_NAMES:
        if name in files.beside:
            return _numactl_machine(files.beside[name])
    if SYSFS_NAME in files.beside:
        try:
            return _numactl_machine(_numactl_text(files.beside[SYSFS_NAME], files))
        except InputError as e:
            problem = str(e).split(": ", 1)[-1]
            raise InputError(f"{files.origin}: beside it, {SYSFS_NAME}: {problem}") from None
    return None


def _numactl_machine(text: str) -> Machine:
    """The machine of a ``numactl --hardware`` text, read by Machine.from_file."""
    with tempfile.TemporaryDirectory(prefix="numasim-replay-") as d:
        p = Path(d) / "traced-machine.txt"  # the machine's name
        p.write_text(text)
        return Machine.from_file(p)


def _numactl_text(nodes: str, files: TraceFiles) -> str:
    """``numactl --hardware``'s text of a sysfs capture (``NODE CPULIST | DISTANCES``)."""
    rows = []
    for number, line in enumerate(nodes.splitlines(), start=1):
        head, sep, dist = line.partition("|")
        node, _, cpus = head.strip().partition(" ")
        if not sep or not node.isdigit():
            raise InputError(
                f"{files.origin}: beside it, {SYSFS_NAME}: line {number}: not "
                f"'NODE CPULIST | DISTANCES': {line!r}"
            )
        rows.append((int(node), parse_cpulist(cpus), dist.split()))
    rows.sort()  # sysfs lists node10 before node2
    out = [f"available: {len(rows)} nodes (0-{len(rows) - 1})"]
    for n, cpus, _ in rows:
        out.append(f"node {n} cpus: {' '.join(map(str, cpus))}")
    out.append("node distances:")
    out.append("node " + " ".join(f"{n:>3}" for n, _, _ in rows))
    for n, _, d in rows:
        out.append(f"{n:>3}: " + " ".join(f"{v:>3}" for v in d))
    return "\n".join(out) + "\n"


def import_trace(
    files: TraceFiles,
    machine: Machine,
    *,
    pids: set[int] | None = None,
    comm: str | None = None,
    keep_kernel: bool = False,
    mem: float = 0.0,
    seed: int = 0,
    closed_loop: bool = False,
) -> tuple[Schedule, Imported]:
    """The real schedule of a trace and the workload made from it (``to_workload``)."""
    events = files.events
    if events is None:
        events = parse_trace(files.text, files.origin, strict=True)
    if not events:
        raise InputError(f"{files.origin}: no trace events")
    sched = schedule(events, files.origin)
    imported = to_workload(
        sched, list(machine.speeds), files.origin, pids=pids, comm=comm,
        keep_kernel=keep_kernel, mem=mem, seed=seed, closed_loop=closed_loop,
    )  # fmt: skip
    return sched, imported
