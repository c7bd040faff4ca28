"""Workloads and single runs: ``Workload.generate``, ``simulate``, results as DataFrames.

pandas is imported when a DataFrame is first asked for, not with this module: a run printed as
text (``numasim run``) never needs it, and importing it costs more than a small run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numasim import _core, assumptions
from numasim._core import InputError
from numasim.assumptions import Setting
from numasim.machine import Machine, check_builder, read_text

if TYPE_CHECKING:
    import pandas as pd

WORKLOAD_SUFFIXES = {".csv", ".json"}
#: Columns of ``Result.apps``: ``app`` labels each application (numasim.apps.app_labels), the
#: others are the engine's per-application result (docs/apps.md).
APP_COLUMNS = ["app", "tgid", "name", "threads", "arrival_ms", "completion_ms", "turnaround_ms",
               "cpu_ms", "sync_wait_ms", "remote_share", "cpu_ms_by_node", "threads_by_node",
               "remote_share_timeline"]  # fmt: skip


class Workload:
    """Processes in pid order; generate from a spec, or load from CSV/JSON."""

    def __init__(self, core: _core.Workload) -> None:
        self._core = core

    @classmethod
    def generate(cls, machine: Machine, spec: str, seed: int = 0, assume: str = "") -> Workload:
        """From a spec such as ``n=300,kind=cpu,exec=200,arrival=random`` (docs/workloads.md);
        ``assume`` (a setting, as ``simulate``'s) says what a load level measures (``load``)."""
        return cls._generate(machine, spec, seed, "spec", assume)

    @classmethod
    def _generate(
        cls, machine: Machine, spec: str, seed: int, origin: str, assume: str = ""
    ) -> Workload:
        """``generate``, with errors named after ``origin`` (the CLI says ``--workload``)."""
        _check_type("machine", machine, Machine, "numasim.Machine.preset('mehta-m1')")
        _check_type("spec", spec, str, "'n=100,kind=cpu'")
        return cls(_core.Workload.generate(machine._core, spec, check_seed(seed), origin,
                                           assume))  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        """A workload file: ``.csv`` (one row per process) or ``.json``."""
        path = Path(path)
        text = read_text(path, "the workload file", "a workload file is CSV or JSON text")
        if path.suffix.lower() == ".csv":
            return cls(_core.Workload.from_csv(text, str(path)))
        if path.suffix.lower() == ".json":
            return cls(_core.Workload.from_json(text, str(path)))
        raise InputError(f"{path}: a workload file must end in .csv or .json")

    @classmethod
    def mix(
        cls, machine: Machine, name_or_path: str | Path, seed: int = 0, assume: str = ""
    ) -> Workload:
        """A multiprogrammed mix: a mix file (``.toml``) or a shipped mix by name
        (``parsec-mix``), generated from ``seed`` as its spec would be (docs/apps.md)."""
        from numasim.apps import Mix

        m = Mix.resolve(name_or_path)
        return cls._generate(machine, m.spec, seed, m.origin, assume)

    @classmethod
    def resolve(
        cls, machine: Machine, spec_or_path: str, seed: int = 0, assume: str = ""
    ) -> Workload:
        """What the CLI's --workload names: a mix (a ``.toml`` file or a shipped mix's name), a
        workload file if one exists there, else a spec."""
        path = Path(spec_or_path)
        # Only a .toml file or text without '=' can name a mix: a spec needs no numasim.apps
        # (and its pydantic schema) imported.
        if path.suffix.lower() == ".toml" or "=" not in spec_or_path:
            from numasim.apps import MIX_SUFFIX, is_mix_name

            if path.suffix.lower() == MIX_SUFFIX or is_mix_name(spec_or_path):
                return cls.mix(machine, spec_or_path, seed, assume)
        if path.suffix.lower() in WORKLOAD_SUFFIXES or path.is_file():
            w = cls.load(path)
            w._core.validate(machine._core, str(path))
            return w
        if "=" not in spec_or_path:  # a spec always has one: a misspelt mix or a missing file
            from numasim.apps import shipped_mixes

            raise InputError(
                f"--workload: '{spec_or_path}' is not a spec (key=value,...), a workload or mix "
                f"file, or a shipped mix ({', '.join(shipped_mixes())})"
            )
        return cls._generate(machine, spec_or_path, seed, "--workload", assume)

    def save(self, path: str | Path) -> None:
        """Writes ``.csv`` or ``.json`` by the file's suffix; another suffix, a directory or a
        file that cannot be written is an InputError naming the path."""
        _check_type("path", path, (str, Path), "'workload.csv'")
        path = Path(path)
        suffix = path.suffix.lower()
        if path.is_dir():
            raise InputError(f"{path}: is a directory; give a file name such as workload.csv")
        if suffix not in WORKLOAD_SUFFIXES:
            raise InputError(f"{path}: a workload file must end in .csv or .json")
        text = self._core.to_csv() if suffix == ".csv" else self._core.to_json()
        try:
            path.write_text(text)
        except OSError as e:
            raise InputError(f"{path}: cannot write: {e.strerror}") from None

    def to_dataframe(self) -> pd.DataFrame:
        """One row per process."""
        import pandas as pd

        return pd.DataFrame(json.loads(self._core.to_json())["processes"])

    def __len__(self) -> int:
        return len(self._core)


_VECTOR_FIELDS = ("utilisation_per_cpu", "migrations_by_level", "far_by_level", "mals")


@dataclass
class Result:
    """One run: ``processes``, ``summary`` and ``trace`` as DataFrames (made when first read),
    the raw summary dict; ``raw`` is the engine's result parsed, ``raw_json`` its text as it
    came (what a saved run keeps)."""

    raw: dict[str, Any] = field(repr=False)
    raw_json: str = field(default="", repr=False)
    #: The modelling assumptions the run was made under (name → value, registry order).
    assumptions: dict[str, str] = field(default_factory=dict)

    @property
    def raw_summary(self) -> dict[str, Any]:
        """The engine's summary of the run (what ``numasim run --json`` prints)."""
        return self.raw["summary"]

    @property
    def events(self) -> int:
        """Events the engine processed."""
        return self.raw["events"]

    @cached_property
    def processes(self) -> pd.DataFrame:
        """One row per process; ``migrations_by_kind`` as one ``migrations_<kind>`` column per
        kind."""
        import pandas as pd

        procs = pd.DataFrame(self.raw["processes"])
        # The kinds the run reports, named by its summary (`affinity` only for a workload with
        # affinities; a trace's real schedule names the kernel's kinds).
        for i, (kind, _) in enumerate(self.raw["summary"]["migrations_by_kind"]):
            procs[f"migrations_{kind}"] = procs["migrations_by_kind"].map(lambda v, i=i: v[i])
        return procs.drop(columns=["migrations_by_kind"])

    @cached_property
    def summary(self) -> pd.DataFrame:
        """The summary as one row (per-level lists summed into ``balance_*`` columns)."""
        import pandas as pd

        return pd.DataFrame([_summary_row(self.raw["summary"])])

    @cached_property
    def trace(self) -> pd.DataFrame:
        """Running intervals (``cpu``, ``pid``, ``start_ns``, ``end_ns``): a traced run's."""
        import pandas as pd

        return pd.DataFrame(self.raw["trace"], columns=["cpu", "pid", "start_ns", "end_ns"])

    @property
    def apps(self) -> pd.DataFrame:
        """One row per application (``app=`` workloads and mixes): completion of its last
        thread, turnaround, CPU time, sync wait, remote share, where its threads ran
        (``APP_COLUMNS``); empty, with those columns, for a workload without applications."""
        return app_frame(self.raw.get("apps", []))


def app_frame(apps: list[dict[str, Any]]) -> pd.DataFrame:
    """``raw["apps"]`` as a DataFrame with ``APP_COLUMNS``, labelled by ``apps.app_labels``."""
    import pandas as pd

    from numasim.apps import app_labels

    rows = [{"app": label, **a} for label, a in zip(app_labels(apps), apps, strict=True)]
    return pd.DataFrame(rows, columns=APP_COLUMNS)


def _summary_row(s: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in s.items():
        if key == "migrations_by_kind":
            for kind, count in value:
                row[f"migrations_{kind}"] = count
        elif key == "balance":
            for k, v in value.items():
                row[f"balance_{k}"] = v if not isinstance(v, list) else sum(v)
        elif key in _VECTOR_FIELDS:
            row[key] = list(value)
        else:
            row[key] = value
    return row


def simulate(
    machine: Machine,
    workload: Workload | str,
    policy: str = "linux26",
    domains: str | None = None,
    seed: int = 0,
    trace: bool = False,
    assume: Setting = None,
    on_progress: Callable[[int, int, int, int], object] | None = None,
) -> Result:
    """Runs ``workload`` (a Workload or a spec string, generated with ``seed``) on ``machine``.

    ``domains`` defaults to the policy's own builder (``numasim list policies``). ``assume``
    sets the modelling assumptions (``numasim list assumptions``): a profile (``"paper"``),
    ``"NAME=VALUE,..."`` items, or a dict such as ``{"memory": "parent"}``; default: the
    ``kernel26`` profile. A profile is applied first wherever it stands, then the items.
    ``Result.assumptions`` holds the full resolved set.

    ``policy`` is a registered policy's setting (``origin-aware:v1=off``) or a Python class,
    ``py:FILE.py:Class[:key=value,...]`` (numasim.policy; docs/writing-a-policy.md): a wrong
    answer or an exception of that class raises ``numasim.PolicyError`` (an InputError), with
    the policy's own exception as its ``__cause__``.

    ``on_progress(now_ns, done, processes, last_arrival_ns)`` is called every 20 ms of wall
    time while the run lasts: the simulated time reached, the processes completed, their number
    and the last arrival. Ctrl-C stops the run within milliseconds (``KeyboardInterrupt``), as
    does an exception raised by ``on_progress``.
    """
    _check_type("machine", machine, Machine, "numasim.Machine.preset('mehta-m1')")
    _check_type("workload", workload, (Workload, str), "a Workload or a spec 'n=100,kind=cpu'")
    _check_type("policy", policy, str, "'linux26'")
    _check_type("trace", trace, bool, "True")
    if domains is not None:
        _check_type("domains", domains, str, "'multilevel'")
    resolved = assumptions.resolve(assume, "assume")
    if isinstance(workload, str):
        workload = Workload.generate(machine, workload, seed, assumptions.canonical(resolved))
    else:
        check_seed(seed)
    base, external = policy, None
    if policy.startswith("py:"):
        from numasim.policy import parse

        spec = parse(policy, "policy")
        base, external = spec.base, spec.adapter()
    builder = check_builder(domains) if domains else default_domains(base, "policy")
    resolved = assumptions.resolve(assume, "assume")
    raw_json = _core.simulate(
        machine._core,
        workload._core,
        base,
        builder,
        trace,
        assumptions.canonical(resolved),
        on_progress,
        external,
    )
    return Result(raw=json.loads(raw_json), raw_json=raw_json, assumptions=resolved)


#: Seeds are unsigned 64-bit integers, as the core's generators take them.
SEED_MAX = 2**64 - 1


def check_seed(seed: object, origin: str = "seed") -> int:
    """``seed`` if it is a whole number in [0, 2^64); otherwise a TypeError or InputError."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"{origin} must be an int, not {type(seed).__name__}")
    if not 0 <= seed <= SEED_MAX:
        raise InputError(f"{origin}: {seed} is outside 0 … 2^64 − 1")
    return seed


def _check_type(name: str, value: object, kind: type | tuple[type, ...], example: str) -> None:
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(k.__name__ for k in kinds)
        raise TypeError(
            f"{name} must be a {wanted} (e.g. {example}), not {type(value).__name__} {value!r}"
        )


def policies() -> list[tuple[str, str, str, str]]:
    """``(name, description, reference, default domains)`` of every policy."""
    return _core.policies()


def default_domains(policy: str, origin: str = "--policy") -> str:
    """The domain builder a policy setting (``name[:options]``) runs over when none is given;
    an unknown policy or a bad option is an InputError."""
    if policy.startswith("py:"):
        from numasim.policy import parse

        policy = parse(policy, origin).base
    name = _core.check_policy(origin, policy)
    return next(builder for n, _, _, builder in policies() if n == name)
