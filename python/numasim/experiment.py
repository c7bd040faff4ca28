"""Experiments (SPEC §8): replicated comparisons with confidence intervals.

An experiment file (TOML, shipped in ``data/experiments``) names machines, workloads, a sweep of
process counts, a baseline and policies (``policy`` or ``policy@domains``), replications,
confidence and a master seed.

1. Cells = machine × workload × n. Replication r of a cell gets a seed derived from
   (master seed, machine, workload, n, r); its workload is generated once from that seed and
   every variant (baseline and policies) runs that same instance — common random numbers.
2. Tasks are batches of replications of one cell. They run on a local process pool
   (``--jobs``) or on a Dask cluster (``Client(ADDR).get_executor()``): one code path.
3. Each finished batch is appended to ``runs.jsonl`` as one line (one ``write``, flushed and
   fsync'ed). A run killed at any point loses at most the batches in flight; on restart with the
   same output directory, a torn last line is dropped and only missing replications run again.
4. At the end: ``runs`` and ``summary`` as CSV and Parquet, figures as PNG and SVG.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from numasim import _core
from numasim._core import InputError
from numasim.sim import default_domains

METRICS = (
    "mean_tat_ms",
    "median_tat_ms",
    "p95_tat_ms",
    "mean_response_ms",
    "makespan_ms",
    "migrations",
    "balance_cost_ms",
    "far_from_origin",
    "far_from_origin_pct",
    "mean_remote_factor",
    "utilisation",
)
#: What an experiment's table and figures can report (``metric = ...``), with its label.
METRIC_LABELS = {
    "mean_tat_ms": "mean turnaround (ms)",
    "median_tat_ms": "median turnaround (ms)",
    "p95_tat_ms": "p95 turnaround (ms)",
    "makespan_ms": "makespan (ms)",
    "far_from_origin": "processes far from their origin node",
    "far_from_origin_pct": "processes far from their origin node (%)",
    "mean_remote_factor": "mean remote-access factor",
}
#: Migration kinds stored per run (``migrations_<kind>``).
KIND_COLUMNS = ("pull", "push", "exchange", "idle", "active")
_ALLOWED = {
    "name", "title", "source", "machines", "workload", "sweep", "baseline", "policies",
    "replications", "confidence", "seed", "notes", "metric",
}  # fmt: skip


@dataclass(frozen=True)
class Variant:
    """A policy over a domain builder; ``label`` names it in tables."""

    label: str
    policy: str
    domains: str


@dataclass(frozen=True)
class WorkloadDef:
    name: str
    spec: str


@dataclass
class Experiment:
    name: str
    title: str
    source: str
    machines: list[str]
    workloads: list[WorkloadDef]
    ns: list[int]
    baseline: Variant
    policies: list[Variant]
    replications: int
    confidence: float
    seed: int
    notes: str = ""
    origin: str = "experiment"
    #: The metric of the table, the gains and the figures (a key of METRIC_LABELS).
    metric: str = "mean_tat_ms"

    @property
    def variants(self) -> list[Variant]:
        return [self.baseline, *self.policies]

    def cells(self) -> list[tuple[str, WorkloadDef, int]]:
        return [(m, w, n) for m in self.machines for w in self.workloads for n in self.ns]


def experiments_dir() -> Path:
    return Path(str(resources.files("numasim") / "data" / "experiments"))


def list_experiments() -> list[Experiment]:
    """Every experiment shipped with the package, by name."""
    return [load(p) for p in sorted(experiments_dir().glob("*.toml"))]


def parse_variant(origin: str, text: str) -> Variant:
    """``policy`` (its default domains) or ``policy@domains``; a policy may carry options,
    ``origin-aware:v2=off@multilevel``."""
    builders = {b[0] for b in _core.builders()}
    policy, _, domains = text.partition("@")
    default = default_domains(policy, origin)  # checks the policy and its options
    domains = domains or default
    if domains not in builders:
        raise InputError(
            f"{origin}: unknown domain builder '{domains}'; choose one of "
            f"{', '.join(b[0] for b in _core.builders())}"
        )
    return Variant(text, policy, domains)


def load(name_or_path: str | Path) -> Experiment:
    """A shipped experiment by name, or an experiment file."""
    path = Path(name_or_path)
    if not path.is_file():
        shipped = experiments_dir() / f"{name_or_path}.toml"
        if not shipped.is_file():
            known = ", ".join(p.stem for p in sorted(experiments_dir().glob("*.toml")))
            raise InputError(f"{name_or_path}: unknown experiment; shipped ones: {known}")
        path = shipped
    origin = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{origin}: {e}") from None
    return from_dict(data, origin)


def from_dict(data: dict[str, Any], origin: str) -> Experiment:
    """Checks an experiment's keys and values; every problem is one InputError line."""
    for key in data:
        if key not in _ALLOWED:
            raise InputError(
                f"{origin}: unknown key '{key}'; allowed: {', '.join(sorted(_ALLOWED))}"
            )

    def need(key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in data:
            raise InputError(f"{origin}: missing key '{key}'")
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise InputError(f"{origin}: key '{key}' has the wrong type")
        return data[key]

    machines = need("machines", list)
    if not machines or not all(isinstance(m, str) for m in machines):
        raise InputError(f"{origin}: key 'machines' must be a non-empty list of machine names")
    workloads = []
    for i, w in enumerate(need("workload", list)):
        if not isinstance(w, dict) or set(w) != {"name", "spec"}:
            raise InputError(f"{origin}: workload {i} must have exactly 'name' and 'spec'")
        if any(part.strip().startswith("n=") for part in w["spec"].split(",")):
            raise InputError(f"{origin}: workload '{w['name']}': n comes from [sweep], not spec")
        workloads.append(WorkloadDef(w["name"], w["spec"]))
    if not workloads:
        raise InputError(f"{origin}: no [[workload]]")
    sweep = need("sweep", dict)
    if set(sweep) != {"n"}:
        raise InputError(f"{origin}: [sweep] takes exactly one key, n")
    ns = sweep["n"]
    if not isinstance(ns, list) or not ns:
        raise InputError(f"{origin}: the sweep is empty: give [sweep] n = [25, 50, ...]")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in ns):
        raise InputError(f"{origin}: [sweep] n must be positive process counts")
    reps = need("replications", int)
    if reps <= 0:
        raise InputError(f"{origin}: replications must be at least 1, got {reps}")
    confidence = data.get("confidence", 0.95)
    if not isinstance(confidence, float) or not 0.5 <= confidence < 1:
        raise InputError(f"{origin}: confidence must be a number in [0.5, 1), e.g. 0.95")
    metric = data.get("metric", "mean_tat_ms")
    if metric not in METRIC_LABELS:
        raise InputError(f"{origin}: metric must be one of {', '.join(METRIC_LABELS)}")
    policies = need("policies", list)
    if not policies:
        raise InputError(f"{origin}: key 'policies' is empty")
    exp = Experiment(
        name=need("name", str),
        title=data.get("title", ""),
        source=data.get("source", ""),
        machines=machines,
        workloads=workloads,
        ns=ns,
        baseline=parse_variant(origin, need("baseline", str)),
        policies=[parse_variant(origin, p) for p in policies],
        replications=reps,
        confidence=confidence,
        seed=need("seed", int),
        notes=data.get("notes", ""),
        origin=origin,
        metric=metric,
    )
    labels = [v.label for v in exp.variants]
    if len(set(labels)) != len(labels):
        raise InputError(f"{origin}: the baseline and policies must differ")
    from numasim.machine import Machine

    for m in machines:
        Machine.load(m)
    return exp


def replication_seed(master: int, machine: str, workload: str, n: int, r: int) -> int:
    """The seed of one replication's workload: the same for every policy (common random numbers)."""
    digest = hashlib.sha256(f"{master}/{machine}/{workload}/{n}/{r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


@lru_cache(maxsize=16)
def _machine(spec: str) -> Any:
    from numasim.machine import Machine

    return Machine.load(spec)


def run_batch(
    machine: str,
    workload: str,
    spec: str,
    n: int,
    reps: list[tuple[int, int]],
    variants: list[tuple[str, str, str]],
) -> list[dict[str, Any]]:
    """One task: replications ``(r, seed)`` of one cell under every variant. Runs in a worker."""
    m = _machine(machine)
    rows = []
    for r, seed in reps:
        w = _core.Workload.generate(m._core, f"n={n},{spec}", seed)
        for label, policy, domains in variants:
            s = json.loads(_core.simulate(m._core, w, policy, domains, False))["summary"]
            row = {"machine": machine, "workload": workload, "n": n, "policy": label,
                   "replication": r, "seed": seed}  # fmt: skip
            for key in METRICS:
                row[key] = s["balance"]["cost_ms"] if key == "balance_cost_ms" else s[key]
            row["migrations_between_classes"] = s["migrations_between_classes"]
            row["idle_balances_fast"] = s["balance"]["idle_fast"]
            row["idle_balances_slow"] = s["balance"]["idle_slow"]
            kinds = dict(s["migrations_by_kind"])
            for kind in KIND_COLUMNS:
                row[f"migrations_{kind}"] = kinds[kind]
            # Far-from-origin processes by the distance of the node where they ran most.
            for d, count in zip(s["mals"][1:], s["far_by_level"][1:], strict=True):
                row[f"far_at_{d}"] = count
            rows.append(row)
    return rows


@dataclass
class Store:
    """``runs.jsonl``: one line per finished batch; resumable after any kill."""

    path: Path
    rows: list[dict[str, Any]] = field(default_factory=list)

    def load(self) -> None:
        if not self.path.exists():
            return
        good: list[str] = []
        with self.path.open("rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # a torn last line: the batch in flight when the run was killed
                try:
                    batch = json.loads(raw)
                except json.JSONDecodeError:
                    break
                good.append(raw.decode())
                self.rows.extend(batch["rows"])
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(good))
        os.replace(tmp, self.path)

    def done(self) -> set[tuple[str, str, int, int]]:
        return {(r["machine"], r["workload"], r["n"], r["replication"]) for r in self.rows}

    def append(self, rows: list[dict[str, Any]]) -> None:
        line = (json.dumps({"rows": rows}) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rows.extend(rows)


def plan(exp: Experiment, done: set[tuple[str, str, int, int]], jobs: int) -> list[tuple]:
    """Batches of the replications not yet done: (machine, workload, spec, n, [(r, seed)])."""
    tasks = []
    cells = exp.cells()
    per_cell = max(1, math.ceil(exp.replications * len(cells) / max(1, 4 * jobs) / len(cells)))
    for machine, w, n in cells:
        todo = [
            (r, replication_seed(exp.seed, machine, w.name, n, r))
            for r in range(exp.replications)
            if (machine, w.name, n, r) not in done
        ]
        for i in range(0, len(todo), per_cell):
            tasks.append((machine, w.name, w.spec, n, todo[i : i + per_cell]))
    return tasks


def execute(
    exp: Experiment,
    out: Path,
    jobs: int | None = None,
    cluster: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Runs what is missing in ``out`` and returns the experiment's rows (finished before and
    now); rows stored for other cells, variants or higher replication counts are left out."""
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out / "runs.jsonl")
    store.load()
    jobs = jobs or os.cpu_count() or 1
    tasks = plan(exp, store.done(), jobs)
    variants = [(v.label, v.policy, v.domains) for v in exp.variants]
    total = exp.replications * len(exp.cells())
    finished = len(store.done())
    if on_progress:
        on_progress(finished, total)
    if tasks:
        with _executor(jobs, cluster) as ex:
            futures = {ex.submit(run_batch, *t[:4], t[4], variants): t for t in tasks}
            for fut in as_completed(futures):
                store.append(fut.result())
                finished += len(futures[fut][4])
                if on_progress:
                    on_progress(finished, total)
    cells = {(m, w.name, n) for m, w, n in exp.cells()}
    labels = {v.label for v in exp.variants}
    return [
        r
        for r in store.rows
        if r["replication"] < exp.replications
        and (r["machine"], r["workload"], r["n"]) in cells
        and r["policy"] in labels
    ]


class _executor:
    """A local process pool, or a Dask cluster's executor: the same ``concurrent.futures`` API."""

    def __init__(self, jobs: int, cluster: str | None) -> None:
        self.jobs, self.cluster, self.client = jobs, cluster, None

    def __enter__(self) -> Executor:
        if self.cluster:
            try:
                from distributed import Client
            except ImportError:
                raise InputError(
                    "--cluster: Dask is not installed; pip install 'numasim[cluster]'"
                ) from None
            try:
                self.client = Client(self.cluster, timeout="10s")
            except OSError as e:
                raise InputError(f"--cluster: cannot reach {self.cluster}: {e}") from None
            self.ex = self.client.get_executor()
        else:
            self.ex = ProcessPoolExecutor(max_workers=self.jobs)
        return self.ex

    def __exit__(self, *exc: object) -> None:
        self.ex.shutdown(wait=True)
        if self.client is not None:
            self.client.close()


def sorted_rows(rows: Iterable[dict[str, Any]], exp: Experiment) -> list[dict[str, Any]]:
    """Rows in a stable order: experiment order of cells and variants, then replication."""
    cell_pos = {(m, w.name, n): i for i, (m, w, n) in enumerate(exp.cells())}
    var_pos = {v.label: i for i, v in enumerate(exp.variants)}
    return sorted(
        rows,
        key=lambda r: (
            cell_pos[(r["machine"], r["workload"], r["n"])],
            r["replication"],
            var_pos[r["policy"]],
        ),
    )
