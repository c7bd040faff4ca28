"""Machines: presets shipped as data files, machine files, distance tables and the host."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from numasim import _core
from numasim._core import InputError

HOST = "host"
#: The most CPUs a machine may have (the core's ``MAX_CPUS``; docs/machines.md).
MAX_CPUS = 16_384
_TOML_SUFFIXES = {".toml"}
_YAML_SUFFIXES = {".yaml", ".yml"}


def data_dir(kind: str) -> Path:
    """The package's data directory ``kind`` (machines, mixes, experiments, bench).

    The data are files beside the modules (the package ships a compiled core, so it is never
    imported from a zip): no importlib.resources, whose import costs more than a small run."""
    return Path(__file__).parent / "data" / kind


def _preset_dir() -> Path:
    return data_dir("machines")


@dataclass(frozen=True)
class PresetInfo:
    """A machine shipped with numasim."""

    name: str
    description: str
    source: str
    path: Path


def presets() -> list[PresetInfo]:
    """Every preset machine, sorted by name."""
    out = []
    for path in sorted(_preset_dir().glob("*.toml")):
        m = _core.Machine.from_toml_file(str(path))
        out.append(PresetInfo(path.stem, m.description, m.source, path))
    return out


def builders() -> list[tuple[str, str, str]]:
    """The scheduling-domain builders: ``(name, description, reference)``."""
    return _core.builders()


#: The largest workload file numasim reads (a million processes are about 100 MiB of CSV).
MAX_DATA_FILE_BYTES = 256 * 2**20
#: The largest machine file or distance table (the core's ``MAX_MACHINE_FILE_BYTES``: a table
#: of 4 096 nodes is 64 MiB).
MAX_MACHINE_FILE_BYTES = 128 * 2**20
#: The largest file of a saved run (events.json of a long traced run is large).
MAX_SAVED_RUN_BYTES = 4 * 2**30
#: The largest experiment or mix file (a few kilobytes each in practice).
MAX_SMALL_FILE_BYTES = 16 * 2**20
_CHUNK_BYTES = 2**20


def read_text(path: Path, what: str, hint: str = "", max_bytes: int = MAX_DATA_FILE_BYTES) -> str:
    """The text of an input file, read with a size limit; a file that cannot be read, is larger
    than ``max_bytes``, or is not UTF-8 text, is one InputError line naming it (``what``: "the
    machine file"; ``hint``: what it should be). A NUL byte (no text file holds one) stops the
    read at once: a link to /dev/zero is refused, not read until memory runs out."""
    import codecs

    hint = f" ({hint})" if hint else ""
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    size = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK_BYTES):
                if (at := chunk.find(b"\0")) >= 0:
                    raise InputError(
                        f"{path}: not a text file: byte {size + at} is a NUL byte{hint}"
                    )
                try:
                    parts.append(decoder.decode(chunk))
                except UnicodeDecodeError as e:
                    raise InputError(
                        f"{path}: not a text file: byte {size + e.start} is not valid UTF-8{hint}"
                    ) from None
                size += len(chunk)
                if size > max_bytes:
                    raise InputError(
                        f"{path}: {what} is larger than {max_bytes // 2**20} MiB, the most "
                        "numasim reads"
                    )
            parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError as e:
        raise InputError(
            f"{path}: not a text file: byte {size + e.start} is not valid UTF-8{hint}"
        ) from None
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror}") from None
    return "".join(parts)


@cache
def _unique_keys_loader() -> Any:
    """A YAML SafeLoader that refuses a key given twice in one mapping (YAML's own rule, which
    PyYAML does not enforce: it keeps the last), as TOML does."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: list[Any] = []
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice", key_node.start_mark
                    )
                seen.append(key)
            return super().construct_mapping(node, deep=deep)

    return Loader


def check_builder(name: str, origin: str = "domains") -> str:
    """``name`` if it is a domain builder; otherwise an InputError naming ``origin``."""
    names = [b[0] for b in builders()]
    if name not in names:
        raise InputError(
            f"{origin}: unknown domain builder '{name}'; choose one of {', '.join(names)}"
        )
    return name


class Machine:
    """A NUMA machine (nodes, CPUs, speeds, SLIT distances); build one with a classmethod."""

    def __init__(self, core: _core.Machine) -> None:
        self._core = core

    @classmethod
    def preset(cls, name: str) -> Machine:
        """A preset by name (``numasim list machines``)."""
        if not isinstance(name, str):
            raise TypeError(
                f"name must be a str (e.g. 'mehta-m1'), not {type(name).__name__} {name!r}"
            )
        path = _preset_dir() / f"{name}.toml"
        # A name with a slash or a leading dot is no preset: no file outside the presets is read.
        if "/" in name or name.startswith(".") or not path.is_file():
            known = ", ".join(p.path.stem for p in presets())
            shown = name if name.isprintable() else repr(name)
            raise InputError(f"{shown}: unknown machine preset; known presets: {known}")
        return cls(_core.Machine.from_toml_file(str(path)))

    @classmethod
    def from_file(cls, path: str | Path, cpus_per_node: int | None = None) -> Machine:
        """A TOML/YAML machine file, or a plain distance table: ``numactl --hardware`` output
        (its CPU lists give each node's CPUs) or rows of distances with ``cpus_per_node``."""
        return cls._from_file(path, cpus_per_node, "cpus_per_node")

    @classmethod
    def _from_file(cls, path: str | Path, cpus_per_node: int | None, option: str) -> Machine:
        """``from_file``, with ``option`` naming the CPU count as the caller takes it (the CLI
        says ``--cpus-per-node``)."""
        if not isinstance(path, str | Path):
            raise TypeError(f"path must be a str or Path, not {type(path).__name__} {path!r}")
        if cpus_per_node is not None:
            if not isinstance(cpus_per_node, int) or isinstance(cpus_per_node, bool):
                raise TypeError(
                    f"{option} must be an int, not {type(cpus_per_node).__name__} {cpus_per_node!r}"
                )
        path = Path(path)
        if cpus_per_node is not None and cpus_per_node < 1:
            raise InputError(f"{path}: {option}: {cpus_per_node} is not a CPU count (at least 1)")
        if cpus_per_node is not None and cpus_per_node > MAX_CPUS:  # checked before the core
            raise InputError(f"{path}: {option}: the machine would have more than {MAX_CPUS} "
                             "CPUs, the most numasim builds")  # fmt: skip
        suffix = path.suffix.lower()
        if suffix in _TOML_SUFFIXES | _YAML_SUFFIXES:
            if cpus_per_node is not None:
                raise InputError(
                    f"{path}: {option} applies only to a distance-table file; "
                    "a machine file sets cpus_per_node itself"
                )
            if suffix in _TOML_SUFFIXES:
                return cls(_core.Machine.from_toml_file(str(path)))
            return cls._from_yaml(path)
        return cls(_core.Machine.from_matrix_file(str(path), cpus_per_node, option))

    @classmethod
    def _from_yaml(cls, path: Path) -> Machine:
        import yaml  # only YAML machine files need it

        text = read_text(
            path, "the machine file", "a machine file is TOML or YAML text", MAX_MACHINE_FILE_BYTES
        )
        try:
            data = yaml.load(text, Loader=_unique_keys_loader())
        except RecursionError:
            raise InputError(f"{path}: nested too deeply to be a machine file") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f": line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(e, "problem", None) or "not valid YAML"
            raise InputError(f"{path}{where}: {problem}") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}: a machine file must be a mapping of keys to values")

        # YAML has what JSON lacks (dates, bytes, sets, NaN, aliases inside their own anchor,
        # aliases that expand a small file to billions of values); refuse it here, naming the
        # key as the core does, rather than let json.dumps raise a traceback or run for hours.
        most_values = 4096 * 4096 + 2 * 4096 + 1000  # the largest machine (4 096 nodes) needs
        sizes: dict[int, int] = {}  # expanded size of each container, computed once
        open_ids: set[int] = set()

        def where(key: str) -> str:
            return f"{path}: key {key}" if key else str(path)

        def expanded(value: Any, key: str, depth: int) -> int:
            if not isinstance(value, dict | list):
                return 1
            if id(value) in open_ids:
                raise InputError(f"{where(key)}: an alias inside its own anchor (a loop)")
            if depth > 64:
                top = key.partition("[")[0].partition(".")[0]
                raise InputError(f"{where(top)}: nested too deeply to be a machine file")
            if id(value) not in sizes:
                open_ids.add(id(value))
                if isinstance(value, dict):
                    children = [(f"{key}.{k}" if key else str(k), v) for k, v in value.items()]
                else:
                    children = [(f"{key}[{i}]", v) for i, v in enumerate(value)]
                sizes[id(value)] = 1 + sum(expanded(v, k, depth + 1) for k, v in children)
                open_ids.discard(id(value))
            return sizes[id(value)]

        def plain(value: Any, key: str) -> Any:
            if isinstance(value, dict):
                # A key that is not a string (`1:`, `yes:`, a date) becomes one, as json.dumps
                # would make it, so that the core names it as an unknown field.
                return {str(k): plain(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v, f"{key}[{i}]") for i, v in enumerate(value)]
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(f"{where(key)}: {value} is not a finite number")
            if value is None or isinstance(value, str | int | float):
                return value
            kind = type(value).__name__
            raise InputError(f"{where(key)}: a YAML {kind} is not a number, a string or a list")

        if (n := expanded(data, "", 0)) > most_values:
            raise InputError(
                f"{path}: it expands to {n} values (with its aliases), more than any machine "
                f"file needs ({most_values})"
            )
        text = json.dumps(plain(data, ""), allow_nan=False)
        return cls(_core.Machine.from_json_str(text, str(path), str(path.parent)))

    @classmethod
    def host(cls, root: str | Path = "/") -> Machine:
        """The running host, read from ``ROOT/sys/devices/system/node``."""
        return cls(_core.Machine.from_sysfs(str(root)))

    @classmethod
    def load(
        cls, spec: str, cpus_per_node: int | None = None, sysfs_root: str | Path = "/"
    ) -> Machine:
        """What the CLI's MACHINE argument names: ``host``, a preset, or a file."""
        if spec == HOST:
            if cpus_per_node is not None:
                raise InputError("host: --cpus-per-node does not apply to the host")
            return cls.host(sysfs_root)
        if (_preset_dir() / f"{spec}.toml").is_file() and not Path(spec).exists():
            if cpus_per_node is not None:
                raise InputError(
                    f"{spec}: --cpus-per-node applies only to a distance-table file; "
                    "presets fix their CPUs"
                )
            return cls.preset(spec)
        if Path(spec).is_file():
            return cls._from_file(spec, cpus_per_node, "--cpus-per-node")
        if Path(spec).exists() and not Path(spec).is_dir():
            raise InputError(f"{spec}: not a regular file (a device or a pipe); a machine is a "
                             "preset, a machine file or a distance table")  # fmt: skip
        raise InputError(
            f"{spec}: unknown machine: not a preset (see `numasim list machines`), "
            "not a file, and not 'host'"
        )

    # --- what the machine is -------------------------------------------------------------

    name = property(lambda self: self._core.name)
    description = property(lambda self: self._core.description)
    source = property(lambda self: self._core.source)
    nodes = property(lambda self: self._core.nodes)
    cpus = property(lambda self: self._core.cpus)
    speeds = property(lambda self: self._core.speeds)
    distances = property(lambda self: self._core.distances)
    mals = property(lambda self: self._core.mals)
    warnings = property(lambda self: self._core.warnings)

    def node_cpus(self, node: int) -> list[int]:
        """CPU ids of ``node``."""
        return self._core.node_cpus(node)

    @cached_property
    def info(self) -> dict[str, Any]:
        """The machine as a JSON-ready dict (the ``machine`` object of ``topology --json``)."""
        return json.loads(self._core.to_json())

    def domains(self, builder: str = "linux") -> dict[str, Any]:
        """Every CPU's scheduling-domain hierarchy, as ``numasim topology --json`` prints it
        under ``"domains"``."""
        return json.loads(self._core.domains_json(check_builder(builder)))

    def hierarchies(self, builder: str = "linux") -> dict[str, Any]:
        """``{"builder", "hierarchies": [{"cpus", "first", "nodes", "levels"}]}``: each distinct
        CPU hierarchy once, with the CPUs that share it and the levels of the first (with flags,
        cache_nice_tries and cache-hot time), CPU sets as kernel cpulists ("0-3,8"): what
        ``numasim topology`` prints."""
        return json.loads(self._core.domains_shown_json(check_builder(builder)))

    def __repr__(self) -> str:
        return f"Machine({self.name!r}, nodes={self.nodes}, cpus={self.cpus})"
