"""Experiments: replicated comparisons with confidence intervals.

An experiment file (TOML, shipped in ``data/experiments``) names machines, workloads, a sweep of
process counts, a baseline and policies (``policy`` or ``policy@domains``), replications,
confidence and a master seed.

1. Cells = machine × workload × n. Replication r of a cell gets a seed derived from
   (master seed, machine, workload, n, r); its workload is generated once from that seed and
   every variant (baseline and policies) runs that same instance — common random numbers.
2. Every run (a replication of a cell under one variant) has a key naming everything that
   determines its numbers (numasim.store). Runs whose key is in the directory's store are
   reused; the rest are batched (replications of one cell that miss the same variants) and run
   on a local process pool (``--jobs``) or a Dask cluster (``Client(ADDR).get_executor()``).
3. Each finished batch is one transaction of the SQLite store: a kill loses at most the batches
   in flight; Ctrl-C or SIGTERM cancels what is pending, stops the workers and keeps what
   finished. Workers exit by themselves when the command is gone (numasim.lifeline).
4. At the end: ``runs`` and ``summary`` as CSV and Parquet, figures as PNG and SVG.
5. A run of a workload with applications (``app=`` specs, mixes: ``mix = NAME`` in a
   ``[[workload]]``) also keeps each application's completion, remote share and sync wait, and
   the run's candidate evaluations and balancing passes (``app_metrics``); rows of other
   workloads are as before. ``Outcome.apps`` tabulates them for app_report.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import multiprocessing
import os
import signal
import tomllib
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from numasim import _core, schema
from numasim._core import InputError
from numasim.claims import CLAIM_KINDS
from numasim.errors import Interrupted
from numasim.lifeline import abandon_if_alive, die_with
from numasim.machine import MAX_SMALL_FILE_BYTES, check_builder, data_dir, read_text
from numasim.sim import default_domains

if TYPE_CHECKING:
    from numasim.policy import PolicySpec

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
    "mean_app_tat_ms": "mean response time (ms)",
    "app_remote_share": "remote-access share of the applications",
    "cross_node_migrations_per_s": "migrations between nodes per second of makespan",
    "remote_share": "remote-access share",
}
#: Per-run values derived from a run's applications (``app_run_metrics``): metrics of app
#: workloads only.
APP_RUN_METRICS = ("mean_app_tat_ms", "app_remote_share")
#: Per-run values derived from a run's full result (``derived_metrics``): kept in the rows of an
#: experiment that reports one of them (``metric`` or ``metrics``), only there, so the rows of
#: every other experiment stay as they were.
DERIVED_METRICS = ("cross_node_migrations", "cross_node_migrations_per_s", "remote_share")
#: Migration kinds stored per run (``migrations_<kind>``).
KIND_COLUMNS = ("pull", "push", "exchange", "idle", "active")


@dataclass(frozen=True)
class Variant:
    """A policy over a domain builder; ``label`` names it in tables."""

    label: str
    policy: str
    domains: str
    #: The checked Python class of a ``py:`` setting (numasim.policy), sent to the workers.
    source: PolicySpec | None = field(default=None, compare=False, hash=False)

    @property
    def key(self) -> str:
        """What the store keys this variant's runs by: the setting, or for a Python class
        its file's name, class, options and the digest of its source."""
        return self.policy if self.source is None else self.source.key


@dataclass(frozen=True)
class WorkloadDef:
    name: str
    spec: str
    #: The shipped mix (or mix file) the spec comes from, if any (``mix = ...``).
    mix: str = ""
    #: Its place on the experiment's x axis (``x = ...``; ``Experiment.x_label`` names it).
    x: float | None = None
    #: Its own process counts (``n = [...]`` in its entry, e.g. a mix's rounds), instead of the
    #: sweep's; empty: the sweep's.
    ns: tuple[int, ...] = ()

    @property
    def has_apps(self) -> bool:
        """Its processes are applications (an ``app=`` spec or a mix)."""
        return bool(self.mix) or any(p.strip().startswith("app=") for p in self.spec.split(","))


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
    #: Variants run beside ``policies`` only when asked (``reproduce --extra``): today's Linux
    #: in every shipped reproduction (docs/experiments.md).
    extra: list[Variant] = field(default_factory=list)
    origin: str = "experiment"
    #: The metric of the table, the gains and the figures (a key of METRIC_LABELS).
    metric: str = "mean_tat_ms"
    #: The profile the experiment runs under by default (docs/assumptions.md).
    profile: str = "kernel26"
    #: Values the file sets on top of its profile: name → (value, the paper's sentence).
    set_assumptions: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: ``--assume`` given to this run of the experiment, if any.
    assume: str | None = None
    #: The fitted profile ``--assume fitted:NAME`` named, if any (numasim.fit.profile).
    fitted: str | None = None
    #: The paper's published numbers (``[reference]``), if the file carries them.
    reference: Reference | None = None
    #: What the workloads' ``x`` values are (an x axis: docs/experiments.md), or "".
    x_label: str = ""
    #: How the figures draw the x axis: "linear", or "log" for x values that double.
    x_scale: str = "linear"
    #: The paper's claims checked against the results (``[[claim]]``, claims.py).
    claims: list[Any] = field(default_factory=list)
    #: Further metrics tabulated beside ``metric`` (``metrics = [...]``), each with its paired
    #: change against the baseline.
    metrics: list[str] = field(default_factory=list)

    @property
    def has_x(self) -> bool:
        """Its workloads are points on an x axis: the comparison report (comparison.py)."""
        return bool(self.x_label)

    @property
    def assumptions(self) -> dict[str, str]:
        """The resolved assumptions this run of the experiment is made under: the profile,
        the file's values, then ``--assume``: its profile first wherever it stands (starting over
        from that profile, with the file's values when it is the experiment's own), then its
        items."""
        from numasim import assumptions as a

        own = ",".join(f"{k}={v}" for k, (v, _) in self.set_assumptions.items())

        def profile(name: str) -> dict[str, str]:
            return a.resolve(own if name == self.profile else "", self.origin, base=name)

        out = profile(self.profile)
        if not self.assume:
            return out
        return a.resolve(self.assume, "--assume", base=a.canonical(out), profile=profile)

    def assumption_sources(self) -> list[tuple[str, str, str]]:
        """``(name, value, why)`` for every assumption of this run: the file's sentence for
        the values it sets, the registry's source for a profile's value, else ``--assume``."""
        from numasim import assumptions as a

        out = []
        for name, value in self.assumptions.items():
            entry = a.entry(name)
            if name in self.set_assumptions and self.set_assumptions[name][0] == value:
                why = self.set_assumptions[name][1]
            elif any(entry[p]["value"] == value for p in a.PROFILES):
                p = next(p for p in a.PROFILES if entry[p]["value"] == value)
                why = f"{p} profile: {entry[p]['source']}"
            else:
                why = "--assume"
            out.append((name, value, why))
        return out

    @property
    def variants(self) -> list[Variant]:
        return [self.baseline, *self.policies]

    def ns_of(self, w: WorkloadDef) -> list[int]:
        """The process counts of workload ``w``: its own, else the sweep's."""
        return list(w.ns) if w.ns else self.ns

    @property
    def all_ns(self) -> list[int]:
        """Every n of any workload, ascending."""
        return sorted({n for w in self.workloads for n in self.ns_of(w)})

    @property
    def derived(self) -> bool:
        """Its rows keep ``DERIVED_METRICS``: its metric or a further metric is one of them."""
        return any(m in DERIVED_METRICS for m in (self.metric, *self.metrics))

    def cells(self) -> list[tuple[str, WorkloadDef, int]]:
        return [(m, w, n) for m in self.machines for w in self.workloads for n in self.ns_of(w)]


def experiments_dir() -> Path:
    return data_dir("experiments")


def list_experiments() -> list[Experiment]:
    """Every experiment shipped with the package, by name."""
    return [load(p) for p in sorted(experiments_dir().glob("*.toml"))]


def parse_variant(origin: str, text: str) -> Variant:
    """``policy`` (its default domains) or ``policy@domains``; a policy may carry options,
    ``origin-aware:v2=off@multilevel``."""
    policy, _, domains = text.partition("@")
    source = None
    if policy.startswith("py:"):
        from numasim.policy import parse as parse_policy

        where = Path(origin)
        source = parse_policy(policy, origin, where.parent if where.is_file() else None)
    # Checks the policy and its options (a Python class's base).
    default = default_domains(source.base if source else policy, origin)
    domains = check_builder(domains, origin) if domains else default
    return Variant(text, policy, domains, source)


def load(name_or_path: str | Path) -> Experiment:
    """A shipped experiment by name, or an experiment file."""
    path = Path(name_or_path)
    # A device or a pipe is read, and refused as what it is; a directory may share the name of a
    # shipped experiment (its results, `--out NAME`).
    if not path.exists() or path.is_dir():
        shipped = experiments_dir() / f"{name_or_path}.toml"
        if not shipped.is_file():
            known = ", ".join(p.stem for p in sorted(experiments_dir().glob("*.toml")))
            raise InputError(f"{name_or_path}: unknown experiment; shipped ones: {known}")
        path = shipped
    origin = str(path)
    try:
        data = tomllib.loads(
            read_text(
                path, "the experiment file", "an experiment file is TOML text", MAX_SMALL_FILE_BYTES
            )
        )
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{origin}: {e}") from None
    return from_dict(data, origin)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _WorkloadEntry(_Strict):
    name: str = Field(min_length=1)
    #: A generator spec, or ``mix``: a shipped mix's name or a mix file (docs/apps.md).
    spec: str | None = None
    mix: str | None = None
    #: Its place on the experiment's x axis (a number; every workload or none has one).
    x: float | None = Field(default=None, allow_inf_nan=False)
    #: Its own process counts instead of ``sweep.n`` (a mix's rounds beside process counts).
    n: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1)


class _Sweep(_Strict):
    n: list[Annotated[int, Field(gt=0)]] = Field(min_length=1)


class _AssumptionEntry(_Strict):
    value: str
    #: The paper's sentence (or the kernel function) that justifies the value.
    source: str = Field(min_length=1)


class _ReferenceRow(_Strict):
    workload: str
    n: int = Field(gt=0)
    baseline: float | None = None
    policy: float | None = None
    gain_pct: float | None = None


class _Reference(_Strict):
    #: Where the numbers are printed: table or section (and page, when the copy has pages).
    source: str = Field(min_length=1)
    #: The compared variant (a label of ``policies``) the numbers belong to; default the first.
    policy: str = ""
    rows: list[_ReferenceRow] = []
    #: A single published figure instead of rows: the gain averaged over the sweep.
    average_gain_pct: float | None = None
    #: The paper's words around the numbers.
    quote: str = ""


class _ClaimEntry(_Strict):
    """A paper's claim and its machine-checkable form (claims.py, docs/experiments.md)."""

    #: Where the paper makes it (figure, section).
    source: str = Field(min_length=1)
    #: The paper's sentence, word for word.
    quote: str = Field(min_length=1)
    kind: Literal[CLAIM_KINDS]  # type: ignore[valid-type]
    #: The compared pairs: ``pairs``; or every policy of ``policies`` against every one of
    #: ``versus``; or every pair of ``among`` (close, apart); or ``policy`` (smallest).
    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] | None = None
    policies: list[str] | None = None
    versus: list[str] | None = None
    among: list[str] | None = None
    policy: str | None = None
    #: close, apart: the relative difference |a − b| / b × 100 that is "small".
    tolerance_pct: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: What it compares (default: the experiment's metric).
    metric: Literal[tuple(METRIC_LABELS)] | None = None  # type: ignore[valid-type]
    #: The x values the claim speaks of (inclusive; default all).
    x_min: float | None = Field(default=None, allow_inf_nan=False)
    x_max: float | None = Field(default=None, allow_inf_nan=False)


class ExperimentFile(_Strict):
    """The schema of an experiment file (docs/experiments.md); every key is checked here."""

    name: str = Field(min_length=1)
    title: str = ""
    source: str = ""
    notes: str = ""
    machines: list[str] = Field(min_length=1)
    workload: list[_WorkloadEntry] = Field(min_length=1)
    sweep: _Sweep
    baseline: str
    policies: list[str] = Field(min_length=1)
    #: Variants run beside the policies with ``reproduce --extra`` (e.g. today's Linux).
    extra: list[str] = []
    replications: int = Field(ge=1)
    confidence: float = Field(default=0.95, ge=0.5, lt=1)
    #: A master seed: replication seeds derive from it (``replication_seed``).
    seed: int = Field(ge=0, lt=2**63)
    metric: Literal[tuple(METRIC_LABELS)] = "mean_tat_ms"  # type: ignore[valid-type]
    #: Further metrics tabulated beside ``metric``, each against the baseline.
    metrics: list[Literal[tuple(METRIC_LABELS)]] = []  # type: ignore[valid-type]
    #: The modelling-assumption profile it runs under by default (``numasim list assumptions``).
    profile: Literal["kernel26", "paper"] = "kernel26"
    #: Values set on top of the profile, each with its source: ``memory = {value, source}``.
    assumptions: dict[str, _AssumptionEntry] = {}
    reference: _Reference | None = None
    #: What the workloads' ``x`` values are, e.g. "load level": the axis of the comparison.
    x_label: str = ""
    #: How the figures draw the x axis (log: for x values that double, e.g. threads 1 … 16).
    x_scale: Literal["linear", "log"] = "linear"
    #: The paper's claims, each checked against the results (claims.py).
    claim: list[_ClaimEntry] = []


def _schema_error(origin: str, e: ValidationError) -> InputError:
    """The first problem pydantic found, as one line naming the key path."""

    def allowed_at(loc: tuple[Any, ...]) -> list[str]:
        parent: type[BaseModel] = ExperimentFile
        for part in loc[:-1]:
            if isinstance(part, str):
                parent = {"workload": _WorkloadEntry, "sweep": _Sweep, "reference": _Reference,
                          "rows": _ReferenceRow,
                          "claim": _ClaimEntry}.get(part, parent)  # fmt: skip
                if parent is ExperimentFile and part == "assumptions":
                    parent = _AssumptionEntry
        return sorted(parent.model_fields)

    # A value outside a fixed list: the list of the key it was given for.
    first = e.errors()[0]
    key = next((k for k in reversed(first["loc"]) if isinstance(k, str)), "")
    choices = {"profile": ("kernel26", "paper"), "kind": CLAIM_KINDS,
               "x_scale": ("linear", "log")}.get(key, METRIC_LABELS)  # fmt: skip
    messages = {"literal_error": f"must be one of {', '.join(choices)}"}
    if first["type"] == "too_short" and not first.get("input"):
        messages["too_short"] = "is empty"
    return schema.first_error(origin, e, allowed_at, messages)


def from_dict(data: dict[str, Any], origin: str) -> Experiment:
    """Checks an experiment's keys and values; every problem is one InputError line that names
    the key path (``workload.1.spec``, ``sweep.n.0``)."""
    from numasim import assumptions as a

    if data.get("profile") in ("linux",):
        a.resolve(data["profile"], f"{origin}: profile")  # the old name: the new one, in one line
    try:
        f = ExperimentFile.model_validate(data)
    except ValidationError as e:
        raise _schema_error(origin, e) from None
    names = [("name", f.name)] + [(f"workload.{i}.name", w.name) for i, w in enumerate(f.workload)]
    for key, name in names:
        if bad := next((c for c in name if not c.isprintable()), None):
            raise InputError(f"{origin}: {key}: {name!r} holds the control character "
                             f"{bad!r}; a name is printable text")  # fmt: skip
    workloads = [_workload(origin, i, w) for i, w in enumerate(f.workload)]
    _x_axis(origin, f)
    own_ns = [(f"workload.{i}.n", w.n) for i, w in enumerate(f.workload) if w.n]
    for key, items in (("workload", [w.name for w in f.workload]), ("machines", f.machines),
                       ("sweep.n", f.sweep.n), ("metrics", [f.metric, *f.metrics]),
                       *own_ns):  # fmt: skip
        twice = sorted({str(x) for x in items if items.count(x) > 1})
        if twice:
            raise InputError(f"{origin}: {key}: {', '.join(twice)} named more than once")
    for name, entry in f.assumptions.items():
        a.resolve(f"{name}={entry.value}", f"{origin}: assumptions.{name}")
    exp = Experiment(
        name=f.name,
        title=f.title,
        source=f.source,
        machines=f.machines,
        workloads=workloads,
        ns=f.sweep.n,
        baseline=parse_variant(origin, f.baseline),
        policies=[parse_variant(origin, p) for p in f.policies],
        extra=[parse_variant(origin, p) for p in f.extra],
        replications=f.replications,
        confidence=f.confidence,
        seed=f.seed,
        notes=f.notes,
        origin=origin,
        metric=f.metric,
        profile=f.profile,
        set_assumptions={k: (e.value, e.source) for k, e in f.assumptions.items()},
        x_label=f.x_label,
        x_scale=f.x_scale,
        metrics=f.metrics,
    )
    check_budget(exp, f"{origin}: replications")
    labels = [v.label for v in exp.variants]
    if len(set(labels)) != len(labels):
        twice = next(x for i, x in enumerate(labels) if x in labels[:i])
        what = "is the baseline too" if twice == labels[0] else "is listed twice"
        raise InputError(f"{origin}: policies: {twice} {what} (the baseline and policies must "
                         "differ)")  # fmt: skip
    extra = [v.label for v in exp.extra]
    if len(set(extra)) != len(extra) or set(extra) & set(labels):
        raise InputError(f"{origin}: extra: its variants must differ from each other and from "
                         "the baseline and policies")  # fmt: skip
    check_metric(origin, "metric", f.metric, workloads)
    for i, m in enumerate(f.metrics):
        check_metric(origin, f"metrics.{i}", m, workloads)
    from numasim import claims

    exp.claims = [claims.check(origin, i, c, exp) for i, c in enumerate(f.claim)]
    if f.reference is not None:
        exp.reference = _reference(origin, f.reference, exp)
    from numasim.machine import Machine

    for m in f.machines:
        try:
            Machine.load(m)
        except InputError as e:
            # Like every other error of the file, with the file's name first.
            raise InputError(f"{origin}: machines: {e}") from None
    return exp


def check_metric(origin: str, key: str, metric: str, workloads: list[WorkloadDef]) -> None:
    """A metric of applications (``APP_RUN_METRICS``) needs applications in every workload."""
    plain = [w.name for w in workloads if not w.has_apps]
    if metric in APP_RUN_METRICS and plain:
        raise InputError(f"{origin}: {key}: {metric} is a metric of applications; workload "
                         f"'{plain[0]}' has none (app= specs and mixes have them)")  # fmt: skip


def _workload(origin: str, i: int, w: _WorkloadEntry) -> WorkloadDef:
    """A ``[[workload]]`` entry: its spec, or the spec of its mix (without n: the sweep's)."""
    where = f"{origin}: workload.{i}"
    if (w.spec is None) == (w.mix is None):
        which = "both" if w.spec is not None else "neither"
        raise InputError(f"{where}: give either spec (a generator spec) or mix (a mix's name "
                         f"or file), not {which}")  # fmt: skip
    if w.mix is not None:
        from numasim.apps import Mix

        mix = Mix.resolve(w.mix)
        if mix.spec != mix.spec_without_n:
            raise InputError(f"{where}.mix: {mix.origin} sets n; in an experiment n comes "
                             "from [sweep]")  # fmt: skip
        return WorkloadDef(w.name, mix.spec, w.mix, w.x, tuple(w.n or ()))
    if any(part.strip().startswith("n=") for part in w.spec.split(",")):
        raise InputError(f"{where}.spec: n comes from [sweep] (or the workload's n), not the "
                         "spec")  # fmt: skip
    return WorkloadDef(w.name, w.spec, x=w.x, ns=tuple(w.n or ()))


def _x_axis(origin: str, f: ExperimentFile) -> None:
    """An x axis (``x_label`` and an ``x`` on every workload, each x once, one n) or none."""
    xs = [w.x for w in f.workload]
    if f.x_label and any(w.n for w in f.workload):
        i = next(i for i, w in enumerate(f.workload) if w.n)
        raise InputError(f"{origin}: workload.{i}.n: an experiment with an x axis runs the "
                         "sweep's one n on every workload")  # fmt: skip
    if not f.x_label:
        if "x_scale" in f.model_fields_set:
            raise InputError(f"{origin}: x_scale: there is no x axis (give x_label and an x "
                             "to every workload)")  # fmt: skip
        if any(x is not None for x in xs):
            i = next(i for i, x in enumerate(xs) if x is not None)
            raise InputError(f"{origin}: workload.{i}.x: give x_label too (what the x values "
                             "are, e.g. \"load level\")")  # fmt: skip
        return
    if None in xs:
        raise InputError(f"{origin}: workload.{xs.index(None)}.x: missing; with x_label every "
                         "workload has an x")  # fmt: skip
    twice = sorted({x for x in xs if xs.count(x) > 1})
    if twice:
        raise InputError(f"{origin}: workload: x = {twice[0]:g} given more than once")
    if len(f.sweep.n) != 1:
        raise InputError(f"{origin}: sweep.n: an experiment with an x axis runs one n, not "
                         f"{len(f.sweep.n)}")  # fmt: skip
    if f.x_scale == "log" and min(xs) <= 0:
        i = next(i for i, x in enumerate(xs) if x <= 0)
        raise InputError(f"{origin}: workload.{i}.x: {xs[i]:g} has no place on a log axis "
                         "(x_scale = \"log\")")  # fmt: skip


@dataclass(frozen=True)
class Reference:
    """A paper's published numbers for an experiment (``[reference]``)."""

    source: str
    #: The label of the compared variant they belong to.
    policy: str
    #: ``(workload, n) → (baseline, policy, gain %)``, each possibly None.
    rows: dict[tuple[str, int], tuple[float | None, float | None, float | None]]
    average_gain_pct: float | None
    quote: str

    def gain(self, workload: str, n: int) -> float | None:
        """The published gain of a cell: given, or computed as the papers do,
        (baseline − policy) / baseline × 100."""
        row = self.rows.get((workload, n))
        if row is None:
            return None
        base, pol, gain = row
        if gain is None and base and pol is not None:
            gain = (base - pol) / base * 100
        return gain


def _reference(origin: str, r: _Reference, exp: Experiment) -> Reference:
    labels = [v.label for v in exp.policies]
    policy = r.policy or labels[0]
    if policy not in labels:
        raise InputError(
            f"{origin}: reference.policy: '{policy}' is not one of the policies "
            f"({', '.join(labels)})"
        )
    names = [w.name for w in exp.workloads]
    rows = {}
    for i, row in enumerate(r.rows):
        where = f"{origin}: reference.rows.{i}"
        if row.workload not in names:
            raise InputError(f"{where}.workload: '{row.workload}' is not a workload of the file")
        w = next(w for w in exp.workloads if w.name == row.workload)
        if row.n not in exp.ns_of(w):
            ns = "sweep.n" if not w.ns else f"the n of workload '{w.name}'"
            raise InputError(f"{where}.n: {row.n} is not in {ns}")
        if (row.workload, row.n) in rows:
            raise InputError(f"{where}: {row.workload} n={row.n} is given twice")
        if row.gain_pct is None and row.baseline is None and row.policy is None:
            raise InputError(f"{where}: give baseline, policy or gain_pct")
        rows[(row.workload, row.n)] = (row.baseline, row.policy, row.gain_pct)
    if not rows and r.average_gain_pct is None:
        raise InputError(f"{origin}: reference: give rows or average_gain_pct")
    return Reference(r.source, policy, rows, r.average_gain_pct, r.quote)


def replication_seed(master: int, machine: str, workload: str, n: int, r: int) -> int:
    """The seed of one replication's workload: the same for every policy (common random numbers)."""
    digest = hashlib.sha256(f"{master}/{machine}/{workload}/{n}/{r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


# Unbounded: an experiment names a few machines, and `_domains` keeps the machine object its
# domains were built for, which `simulate_summary` requires to be the one it is given — an
# evicted and rebuilt machine would be another object (refused).
@cache
def _machine(info_json: str) -> Any:
    return _core.Machine.from_info_json(info_json, "experiment machine")


@lru_cache(maxsize=64)
def _domains(info_json: str, builder: str) -> Any:
    """A worker builds each machine's domains once, not once per run."""
    return _core.Domains.build(_machine(info_json), builder)


def run_batch(
    machine_json: str,
    spec: str,
    n: int,
    reps: list[tuple[int, int]],
    variants: list[tuple],
    assume: str = "",
    derived: bool = False,
) -> list[dict[str, Any]]:
    """One task: replications ``(r, seed)`` of one cell under ``variants`` (label, policy,
    domains) and the modelling assumptions ``assume`` (resolved, canonical text). Runs in a
    worker; the machine comes as its JSON content, so the worker runs exactly the machine the
    run keys name. Returns one row of metrics per run, in order.

    The core returns only what a row reads (the summary, and the applications of app
    workloads), not the per-process results: parsing those took a third of a worker's time.
    With ``derived`` the run is asked for its full result and the row also keeps
    ``DERIVED_METRICS``, which the per-process results give."""
    m = _machine(machine_json)
    rows = []
    for _, seed in reps:
        w = _core.Workload.generate(m, f"n={n},{spec}", seed, "--workload", assume)
        for variant in variants:
            _, policy, domains = variant[:3]
            source = variant[3] if len(variant) > 3 else None
            d = _domains(machine_json, domains)
            if derived:
                base, external = (
                    (policy, None) if source is None else (source.base, source.adapter())
                )
                result = json.loads(_core.simulate(m, w, base, domains, False, assume, None,
                                                   external))  # fmt: skip
            elif source is None:
                result = json.loads(_core.simulate_summary(m, d, w, policy, assume))
            else:
                # A fresh instance of the class, from the source text sent, for every run.
                summary = _core.simulate_summary(m, d, w, source.base, assume, source.adapter())
                result = json.loads(summary)
            s = result["summary"]
            row = {key: s["balance"]["cost_ms"] if key == "balance_cost_ms" else s[key]
                   for key in METRICS}  # fmt: skip
            row["migrations_between_classes"] = s["migrations_between_classes"]
            row["idle_balances_fast"] = s["balance"]["idle_fast"]
            row["idle_balances_slow"] = s["balance"]["idle_slow"]
            kinds = dict(s["migrations_by_kind"])
            for kind in KIND_COLUMNS:
                row[f"migrations_{kind}"] = kinds[kind]
            # Far-from-origin processes by the distance of the node where they ran most.
            for d, count in zip(s["mals"][1:], s["far_by_level"][1:], strict=True):
                row[f"far_at_{d}"] = count
            if result.get("apps"):  # only workloads with applications: other rows unchanged
                row.update(app_metrics(result))
            if derived:
                row.update(derived_metrics(result))
            rows.append(row)
    return rows


def derived_metrics(result: dict[str, Any]) -> dict[str, float]:
    """``DERIVED_METRICS`` of a run's full result (``summary`` and ``processes``):
    ``cross_node_migrations``, the migrations whose move crossed a node (every memory access
    level of the summary's ``migrations_by_level`` but the first, inside a node);
    ``cross_node_migrations_per_s``, those per second of the run's makespan (0 for a run of no
    length); ``remote_share``, the share of the run's memory accesses that went to another
    node's memory: each process's time-weighted share, weighted by its CPU time (0 when nothing
    ran), as ``app_run_metrics`` weights applications."""
    s = result["summary"]
    cross = sum(s["migrations_by_level"][1:])
    seconds = s["makespan_ms"] / 1000
    procs = result["processes"]
    cpu = sum(p["cpu_ms"] for p in procs)
    share = sum(p["remote_share"] * p["cpu_ms"] for p in procs) / cpu if cpu else 0.0
    return {"cross_node_migrations": cross,
            "cross_node_migrations_per_s": cross / seconds if seconds > 0 else 0.0,
            "remote_share": share}  # fmt: skip


#: What a run row keeps of each application (``row["apps"]``, app workloads only).
APP_FIELDS = ("threads", "turnaround_ms", "completion_ms", "remote_share", "sync_wait_ms",
              "cpu_ms")  # fmt: skip


def app_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The part of a run row only app workloads have: per application (labelled as
    ``apps.app_labels`` does) ``APP_FIELDS``; the selection policies' candidate evaluations
    (absent from the summary when 0) and the balancing passes (every balancing attempt, at
    every level: periodic, newly idle, active and machine-wide); under ``linux:select=…``
    ``SELECT_METRICS``, under the home-cluster schemes ``SPACE_METRICS``."""
    from numasim.apps import app_labels

    b = result["summary"]["balance"]
    passes = sum(sum(b[k]) for k in ("periodic", "newidle", "active", "other"))
    labels = app_labels(result["apps"])
    apps = [{"app": label, "name": a["name"], **{k: a[k] for k in APP_FIELDS}}
            for label, a in zip(labels, result["apps"], strict=True)]  # fmt: skip
    # linux:select=… counts its pulls between nodes, the home-cluster schemes their homes (only
    # those runs: other rows unchanged).
    metrics = dict(result["summary"].get("policy_metrics") or [])
    select = {k: metrics[k] for k in (*SELECT_METRICS, *SPACE_METRICS) if k in metrics}
    return {"balance_evaluations": b.get("evaluations", 0), "balance_passes": passes,
            "apps": apps, **select}  # fmt: skip


#: What ``linux:select=…`` counts of its pulls between nodes (the core's ``select.rs``):
#: ``detach_tasks`` passes, tasks picked, picks with two thread groups or more to choose from,
#: picks of another task than the kernel's, evaluations of the picks.
SELECT_METRICS = ("select_passes", "select_picks", "select_picks_with_choice",
                  "select_picks_changed", "select_evaluations")  # fmt: skip

#: What the space-sharing schemes with home clusters count (Koita et al.'s ten): processes,
#: and how many of them reserved a home cluster at creation.
SPACE_METRICS = ("space_processes", "space_homes")


def app_run_metrics(apps: list[dict[str, Any]]) -> dict[str, float]:
    """A run's ``APP_RUN_METRICS``: ``mean_app_tat_ms``, the mean over its applications of the
    turnaround (creation to completion: Koita et al.'s response time), and
    ``app_remote_share``, the share of its memory accesses that went to another node's memory
    — each application's share weighted by its CPU time, as each application's own share
    weights its threads."""
    cpu = sum(a["cpu_ms"] for a in apps)
    share = sum(a["remote_share"] * a["cpu_ms"] for a in apps) / cpu if cpu else 0.0
    return {"mean_app_tat_ms": sum(a["turnaround_ms"] for a in apps) / len(apps),
            "app_remote_share": share}  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One simulation of an experiment: a replication of a cell under one variant."""

    machine: str
    workload: WorkloadDef
    n: int
    replication: int
    seed: int
    variant: Variant
    key: str
    fields: dict[str, Any] = field(compare=False, hash=False)
    #: ``store.canonical(fields)``, what the store keeps beside the key.
    fields_json: str = field(compare=False, hash=False)

    def labelled(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """A result row: the experiment's names for this run, then its metrics."""
        return {"machine": self.machine, "workload": self.workload.name, "n": self.n,
                "policy": self.variant.label, "replication": self.replication,
                "seed": self.seed, **metrics}  # fmt: skip


def runs(exp: Experiment, machines: dict[str, Any]) -> list[Run]:
    """Every run of ``exp`` with its store key (numasim.store: what determines its numbers);
    ``machines`` maps the experiment's machine names to the loaded machines."""
    from numasim.store import machine_digest, run_keys

    out = []
    assumed = exp.assumptions
    # Only an experiment that reports a derived metric keys its runs by it: every other run
    # keeps its key, and its stored row.
    derived = {"derived": True} if exp.derived else {}
    for machine in exp.machines:
        digest = machine_digest(machines[machine].info)
        for w, n in ((wl, n) for wl in exp.workloads for n in exp.ns_of(wl)):
            reps = [(r, replication_seed(exp.seed, machine, w.name, n, r))
                    for r in range(exp.replications)]  # fmt: skip
            keyed = [run_keys({"machine": digest, "spec": w.spec, "n": n, "policy": v.key,
                               "domains": v.domains, "assumptions": assumed, **derived}, reps)
                     for v in exp.variants]  # fmt: skip
            for i, (r, seed) in enumerate(reps):
                for v, keys in zip(exp.variants, keyed, strict=True):
                    fields = {"machine": digest, "spec": w.spec, "n": n, "replication": r,
                              "seed": seed, "policy": v.key, "domains": v.domains,
                              "assumptions": assumed, **derived}  # fmt: skip
                    key, fields_json = keys[i]
                    out.append(Run(machine, w, n, r, seed, v, key, fields, fields_json))
    return out


def plan(todo: list[Run], jobs: int, replications: int) -> list[list[Run]]:
    """Batches of the runs not yet stored: a batch holds replications of one cell that miss the
    same variants, so adding a policy to an experiment computes only that policy's runs."""
    per_batch = max(1, math.ceil(replications / max(1, 4 * jobs)))
    groups: dict[tuple, dict[int, list[Run]]] = {}
    for run in todo:
        cell = (run.machine, run.workload, run.n)
        groups.setdefault(cell, {}).setdefault(run.replication, []).append(run)
    batches = []
    for reps in groups.values():
        by_variants: dict[tuple[Variant, ...], list[list[Run]]] = {}
        for rep_runs in reps.values():
            by_variants.setdefault(tuple(r.variant for r in rep_runs), []).append(rep_runs)
        for rep_lists in by_variants.values():
            for i in range(0, len(rep_lists), per_batch):
                batches.append([run for rep in rep_lists[i : i + per_batch] for run in rep])
    return batches


@dataclass
class Outcome:
    """What ``execute`` did: the experiment's rows, and how many runs it computed and reused."""

    rows: list[dict[str, Any]]
    computed: int
    reused: int
    store: Path

    @property
    def total(self) -> int:
        return self.computed + self.reused

    @property
    def runs(self) -> Any:
        """One row per run (a DataFrame): instead of the per-application lists of app
        workloads, their ``APP_RUN_METRICS``."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if k != "apps"}
                             | (app_run_metrics(r["apps"]) if "apps" in r else {})
                             for r in self.rows])  # fmt: skip

    @property
    def apps(self) -> Any:
        """One row per application of each run (``APP_ROW_COLUMNS``); empty when the
        experiment's workloads have no applications."""
        return app_rows(self.rows)


#: The run's names, then the application's (``Outcome.apps``, ``apps.csv``).
APP_ROW_COLUMNS = ["machine", "workload", "n", "policy", "replication", "seed", "app", "name",
                   *APP_FIELDS]  # fmt: skip


def app_rows(rows: list[dict[str, Any]]) -> Any:
    """The per-application lists of run rows as one table (``APP_ROW_COLUMNS``)."""
    import pandas as pd

    out = [{**{k: r[k] for k in APP_ROW_COLUMNS[:6]}, **a} for r in rows for a in r.get("apps", [])]
    return pd.DataFrame(out, columns=APP_ROW_COLUMNS)


def execute(
    exp: Experiment,
    out: Path,
    jobs: int | None = None,
    cluster: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    fresh: bool = False,
    while_running: Callable[[], None] | None = None,
) -> Outcome:
    """Runs what the store in ``out`` lacks and returns every run of the experiment.
    ``while_running`` is called once its workers have started, if it starts any: this process
    only waits for them then (the CLI imports what its report needs meanwhile).

    Ctrl-C cancels pending work, stops the workers, keeps every finished batch and raises
    ``Interrupted``; a second Ctrl-C exits at once.
    """
    from numasim.machine import Machine
    from numasim.store import Store

    check_budget(exp, f"{exp.origin}: replications")
    # Each machine is read once: the keys, the spec check and the workers all see this content.
    machines = {m: Machine.load(m) for m in exp.machines}
    all_runs = runs(exp, machines)
    with Store.open(out, fresh=fresh) as store:
        required = (*METRICS, *(DERIVED_METRICS if exp.derived else ()))
        found = store.lookup((r.key for r in all_runs), required=required)
        todo = [r for r in all_runs if r.key not in found]
        reused = len(all_runs) - len(todo)
        done = reused
        if on_progress:
            on_progress(done, len(all_runs))
        if todo:
            _check_specs(exp, machines)
            infos = {name: json.dumps(m.info) for name, m in machines.items()}
            jobs = jobs or os.cpu_count() or 1
            batches = plan(todo, jobs, exp.replications)
            with _executor(jobs, cluster) as ex:
                try:
                    futures = {ex.submit(run_batch, *_task(b, infos)): b for b in batches}
                    if while_running:
                        while_running()
                    for fut in as_completed(futures):
                        batch = futures[fut]
                        metrics = fut.result()
                        store.add(
                            [(r.key, r.fields_json, m) for r, m in zip(batch, metrics, strict=True)]
                        )
                        for r, m in zip(batch, metrics, strict=True):
                            found[r.key] = m
                        done += len(batch)
                        if on_progress:
                            on_progress(done, len(all_runs))
                except KeyboardInterrupt:
                    # A second Ctrl-C (or SIGTERM) ends the process at once; this one stops
                    # the sweep.
                    for sig in (signal.SIGINT, signal.SIGTERM):
                        signal.signal(sig, lambda *_: os._exit(130))
                    ex.stop()
                    # Counted in the store: Ctrl-C may come between a batch's commit and
                    # `done` counting it. (Two variants may share a run, and its key.)
                    stored = store.stored(r.key for r in all_runs)
                    saved = sum(r.key in stored for r in all_runs)
                    raise Interrupted(saved, len(all_runs), out) from None
    rows = [r.labelled(found[r.key]) for r in all_runs]
    return Outcome(rows, computed=len(todo), reused=reused, store=out / "results.sqlite")


def _task(batch: list[Run], infos: dict[str, str]) -> tuple:
    first = batch[0]
    reps = sorted({(r.replication, r.seed) for r in batch})
    variants: list[tuple[str, str, str, PolicySpec | None]] = []
    for r in batch:
        v = (r.variant.label, r.variant.policy, r.variant.domains, r.variant.source)
        if v not in variants:
            variants.append(v)
    # run_batch returns the runs replication by replication, variants in this order: the
    # order the batch lists them in (plan groups replications that miss the same variants).
    from numasim.assumptions import canonical

    assume = canonical(first.fields["assumptions"])
    derived = bool(first.fields.get("derived"))
    return infos[first.machine], first.workload.spec, first.n, reps, variants, assume, derived


def _check_specs(exp: Experiment, machines: dict[str, Any]) -> None:
    """Every workload spec of ``exp`` generates (one process, then the sweep's largest n, on each
    machine): a bad spec, or an n too large for this machine's memory, is an input error here
    naming the workload or ``sweep.n``, before any worker starts."""
    for m in machines.values():
        for w in exp.workloads:
            _core.Workload.generate(
                m._core, f"n=1,{w.spec}", 0, f"{exp.origin}: workload '{w.name}'"
            )
            n = max(exp.ns_of(w))
            # `compare` has no file: its n comes from --workload, which the core's "key n" names.
            where = (f"{exp.origin}: sweep.n = {n}, workload '{w.name}'" if exp.origin != COMPARE
                     else "--workload")  # fmt: skip
            _core.Workload.generate(m._core, f"n={n},{w.spec}", 0, where)


#: The origin of the experiment `numasim compare` builds from its options.
COMPARE = "--policies/--workload"

#: The most runs one experiment makes (replications × cells × variants): a million rows of
#: metrics are about a gigabyte in memory, and weeks of one core's time at the shipped sizes.
MAX_RUNS = 1_000_000


def check_budget(exp: Experiment, origin: str) -> None:
    """Refuses an experiment of more than ``MAX_RUNS`` runs before anything is allocated for
    them; ``origin`` names what set the replications (the file's key, ``--replications``)."""
    cells = len(exp.cells())
    variants = len(exp.variants)
    total = exp.replications * cells * variants
    if total > MAX_RUNS:
        most = f"{MAX_RUNS:_}".replace("_", " ")
        raise InputError(
            f"{origin}: {exp.replications} replications × {cells} cells × {variants} variants "
            f"is {total} runs, more than {most} (the most one experiment makes)"
        )


def start_worker(command_pid: int) -> None:
    """A worker leaves Ctrl-C to the command, which stops it (a terminal sends SIGINT to the
    whole process group), and exits as soon as the command is gone, even killed with -9
    (numasim.lifeline)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(command_pid)


#: How long a stopped pool's manager thread may take to end before the command leaves it.
STOP_WAIT_S = 2.0


class _executor:
    """A local process pool, or a Dask cluster's executor: the same ``concurrent.futures`` API."""

    def __init__(self, jobs: int, cluster: str | None) -> None:
        self.jobs, self.cluster, self.client = jobs, cluster, None

    def __enter__(self) -> _executor:
        if self.cluster:
            try:
                from distributed import Client
            except ImportError:
                raise InputError(
                    "--cluster: Dask is not installed; pip install 'numasim[cluster]'"
                ) from None
            try:
                self.client = Client(self.cluster, timeout="10s")
            except (OSError, ValueError, TypeError) as e:
                raise InputError(f"--cluster: cannot reach {self.cluster}: {e}") from None
            self.ex = self.client.get_executor()
        else:
            # Workers come from a fork server, not from this process: a forked worker would
            # share the directory's lock (and hold it after this process is killed).
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["numasim.forkserver_init"])
            self.ex = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=context,
                initializer=start_worker,
                initargs=(os.getpid(),),
            )
        return self

    def submit(self, fn: Callable, *args: Any) -> Future:
        return self.ex.submit(fn, *args)

    def stop(self) -> None:
        """Cancels what has not finished and stops the workers without waiting for them."""
        if self.client is not None:
            # Closing the connection under Dask's reads makes tornado and distributed log
            # tracebacks (StreamClosedError) after the command's own line: the stop is ours.
            # (distributed's configuration sets levels on child loggers such as
            # tornado.application, so each is silenced, not only the parents.)
            known = list(logging.root.manager.loggerDict)
            for name in ["tornado", "distributed", *known]:
                if name.split(".")[0] in ("tornado", "distributed"):
                    logging.getLogger(name).setLevel(logging.CRITICAL + 1)
            self.ex.shutdown(wait=False)  # Dask cancels the pending futures
            return
        # concurrent.futures has no public way to end running workers (3.14 adds
        # terminate_workers); without it a cancelled sweep would run its batches in flight.
        for p in list((getattr(self.ex, "_processes", None) or {}).values()):
            p.terminate()
        # A worker ended while it wrote its result leaves half a message in the result pipe,
        # and the pool's manager thread would wait for the rest forever: this process holds
        # the pipe's write end too. Closed, the wait ends in EOF, which the pool reads as a
        # broken pool and ends on. Should the thread still not end, the command exits
        # without waiting for it (numasim.lifeline.exit_now).
        results = getattr(self.ex, "_result_queue", None)
        if results is not None:
            with contextlib.suppress(OSError, AttributeError):
                results._writer.close()
        manager = getattr(self.ex, "_executor_manager_thread", None)
        self.ex.shutdown(wait=False, cancel_futures=True)
        abandon_if_alive(manager, STOP_WAIT_S)

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.ex.shutdown(wait=True)
        else:  # a batch failed (or Ctrl-C): the others must not run on behind our back
            self.stop()
        if self.client is not None:
            self.client.close()
