"""The kernel-run file format (``numasim-kernel-run/1``) as pydantic models, and its reader.

docs/kernel-runs.md describes every field. ``load_run(path)`` returns a ``KernelRun``; a file
that is not one is an InputError of one line naming the file and the first bad field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from numasim._core import InputError
from numasim.machine import MAX_SMALL_FILE_BYTES, read_text

FORMAT = "numasim-kernel-run/1"
INDEX_FORMAT = "numasim-kernel-runs/1"

Kind = Literal[
    "periodic",
    "nohz_idle",
    "newidle",
    "active",
    "wakeup",
    "fork",
    "exec",
    "numa_move",
    "numa_swap",
    "affinity",
    "other",
]
Idle = Literal["idle", "busy", "newly_idle"]
NonNeg = Field(ge=0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KernelInfo(_Strict):
    release: str
    package: str | None
    cmdline: str


class QemuInfo(_Strict):
    version: str
    accel: str
    machine: str
    host_cpus: int = Field(ge=1)
    vcpus: int = Field(ge=1)
    smp: str
    node_mem_mb: int = Field(ge=1)


class MachineInfo(_Strict):
    name: str
    nodes: int = Field(ge=1)
    cpus: list[list[int]]
    slit: list[list[int]]

    @model_validator(mode="after")
    def _square(self) -> MachineInfo:
        if len(self.cpus) != self.nodes or len(self.slit) != self.nodes:
            raise ValueError("cpus and slit need one row per node")
        if any(len(row) != self.nodes for row in self.slit):
            raise ValueError("slit must be square")
        return self


class WorkloadInfo(_Strict):
    tasks: int = Field(ge=1)
    start: Literal["fork", "pinned", "released"]
    release_ms: int | None
    mem_mb: int = NonNeg
    window_s: float = Field(gt=0)
    numa_balancing: bool


class Window(_Strict):
    start_ns: int = NonNeg
    end_ns: int = NonNeg
    guest_s: float = NonNeg
    host_s: float | None
    host_cpu_s: float | None
    vcpu_share: float | None
    release_ns: int | None = None
    released_ns: int | None = None


class Task(_Strict):
    pid: int = NonNeg
    fork_cpu: int = NonNeg
    first_cpu: int = NonNeg
    last_cpu: int = NonNeg
    run_ns: int = NonNeg
    alive_ns: int = NonNeg
    traced_migrations: int = NonNeg
    kernel_nr_migrations: int | None
    numa_pages_migrated: int | None
    numa_preferred_nid: int | None
    total_numa_faults: int | None


class Migration(_Strict):
    t_ns: int
    pid: int = NonNeg
    from_: int = Field(alias="from", ge=0)
    to: int = NonNeg
    distance: int = Field(ge=10)
    kind: Kind
    idle: Idle | None


class PerIdle(_Strict):
    idle: int
    busy: int
    newly_idle: int


class Pass(_Strict):
    cpu: int = NonNeg
    level: int = NonNeg
    name: str | None
    span: str
    lb_count: PerIdle
    lb_balanced: PerIdle
    lb_failed: PerIdle
    lb_imbalance: PerIdle
    lb_gained: PerIdle
    lb_hot_gained: PerIdle
    lb_nobusyq: PerIdle
    lb_nobusyg: PerIdle
    alb_count: int
    alb_failed: int
    alb_pushed: int
    sbe_count: int
    sbe_balanced: int
    sbe_pushed: int
    sbf_count: int
    sbf_balanced: int
    sbf_pushed: int
    ttwu_wake_remote: int
    ttwu_move_affine: int
    ttwu_move_balance: int


class RunQueue(_Strict):
    cpu: int = NonNeg
    yld_count: int
    sched_count: int
    sched_goidle: int
    ttwu_count: int
    ttwu_local: int
    rq_cpu_time_ns: int
    run_delay_ns: int
    pcount: int


class Counters(_Strict):
    """The interval between the two readings of the counters (schedstat, interrupts, …)."""

    guest_s: float = Field(gt=0)
    jiffies: int = NonNeg
    hz: int = Field(ge=1)


class CpuTimes(_Strict):
    """One CPU's /proc/stat times over the counters' interval, in USER_HZ units (1/100 s)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int


class Cpu(_Strict):
    cpu: int = NonNeg
    ticks: int | None = Field(ge=0)
    timer_interrupts: int = NonNeg
    hrtimer_retries: int = NonNeg
    hrtimer_hangs: int = NonNeg
    loop_ns: int = NonNeg
    idle_ns: int = NonNeg
    stat: CpuTimes


class UnknownStack(_Strict):
    stack: list[str]
    count: int = Field(ge=1)
    example: dict[str, int | str]


class NumaEvents(_Strict):
    move: int = NonNeg
    swap: int = NonNeg
    stick: int = NonNeg


class KernelRun(_Strict):
    """One boot's record."""

    format: Literal["numasim-kernel-run/1"]
    kernel: KernelInfo
    qemu: QemuInfo
    machine: MachineInfo
    workload: WorkloadInfo
    boot: int = NonNeg
    boot_s: float | None
    up_host_s: float | None
    up_guest_s: float | None
    attempts: int = Field(ge=1)
    schedstat_version: int
    window: Window
    tasks: list[Task]
    migrations: list[Migration]
    other_migrations: int = NonNeg
    other_migrations_by_kind: dict[str, int]
    numa_events: NumaEvents
    vmstat: dict[str, int]
    passes: list[Pass]
    runqueues: list[RunQueue]
    lost_events: int = NonNeg
    unknown_stacks: list[UnknownStack]
    notes: list[str]
    #: Absent in records made before the guest read them.
    sched_features: list[str] | None = None
    counters: Counters | None = None
    per_cpu: list[Cpu] | None = None


def _where(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top)"
    return f"field {loc}: {err['msg']}"


def _read(path: Path) -> str:
    """A file's text; ``NAME.gz`` is read gunzipped, and so is ``NAME`` when only its gzipped
    copy exists (kept runs may be stored compressed)."""
    import gzip

    if path.suffix != ".gz" and not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as f:
                blob = f.read(MAX_RUN_BYTES + 1)  # a gzip bomb stops here
        except FileNotFoundError:
            raise
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: not a gzipped kernel run: {e}") from None
        if len(blob) > MAX_RUN_BYTES:
            raise InputError(f"{path}: the kernel run is larger than {MAX_RUN_BYTES // 2**20} "
                             "MiB unpacked, the most numasim reads")  # fmt: skip
        try:
            return blob.decode("utf-8")
        except UnicodeDecodeError as e:
            where = f"byte {e.start} is not valid UTF-8"
            raise InputError(f"{path}: not a text file: {where}") from None
    return read_text(path, "the kernel run", max_bytes=MAX_RUN_BYTES)


#: The largest kernel-run record read (unpacked): a boot's record is tens of kilobytes; one of
#: a long run with thousands of tasks stays far below this.
MAX_RUN_BYTES = 64 * 2**20


def load_run(path: str | Path) -> KernelRun:
    """A kernel-run file (one boot, ``boot-N.json`` or ``boot-N.json.gz``), validated."""
    path = Path(path)
    try:
        data = json.loads(_read(path))
    except InputError:  # _read's own line (a ValueError too)
        raise
    except OSError as e:
        raise InputError(f"{path}: cannot read the kernel run: {e.strerror}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: not a JSON kernel run: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{path}: field format: expected '{FORMAT}', got {got!r}")
    try:
        return KernelRun.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{path}: {_where(e)}") from None


def load_runs(path: str | Path) -> list[KernelRun]:
    """Every boot of a ``kernel-run --out`` directory (or of its ``runs.json`` index)."""
    path = Path(path)
    index = path / "runs.json" if path.is_dir() else path
    try:
        text = read_text(index, "the kernel runs' index", max_bytes=MAX_SMALL_FILE_BYTES)
        data = json.loads(text)
    except InputError:  # read_text's own line (a ValueError too)
        raise
    except OSError as e:
        raise InputError(f"{index}: cannot read the kernel runs' index: {e.strerror}") from None
    except ValueError as e:
        raise InputError(f"{index}: not a JSON index of kernel runs: {e}") from None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise InputError(f"{index}: field format: expected '{INDEX_FORMAT}'")
    boots = data.get("boots")
    if not isinstance(boots, list) or not all(isinstance(b, str) for b in boots):
        raise InputError(f"{index}: field boots: expected a list of file names")
    return [load_run(index.parent / b) for b in boots]
