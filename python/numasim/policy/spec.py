"""Policy settings that name a Python class: ``py:PATH.py:Class[:key=value,...]``.

A setting is read once (``parse``): the file's source text is kept, the class is checked
(a ``Policy`` subclass, a registered ``base``, known options of the right type), and the
source with the options gives the setting its digest, which the result store keys runs by:
editing the file computes afresh. A run (``PolicySpec.adapter``) executes the kept source
text in a fresh module, so workers — local processes or a Dask cluster — need only the
setting, never the file, and no run sees another's module globals.
"""

from __future__ import annotations

import hashlib
import linecache
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from numasim import _core
from numasim._core import InputError
from numasim.policy.base import HOOKS, Policy, overridden

PREFIX = "py:"
#: The largest policy file read, in bytes.
MAX_SOURCE = 1 << 20


def is_python_spec(text: str) -> bool:
    """Whether a policy setting names a Python class."""
    return text.startswith(PREFIX)


@dataclass(frozen=True)
class PolicySpec:
    """A checked Python policy setting (picklable: workers receive it)."""

    #: The setting as given.
    text: str
    path: str
    class_name: str
    #: Options as given, ``(key, value)`` in order.
    given: tuple[tuple[str, str], ...]
    source: str
    #: sha256 of the source, the class name and the options.
    digest: str
    base: str

    @property
    def key(self) -> str:
        """What the result store keys runs by: the file's name, the class, the options and
        the digest (so an edited file, or other options, are other runs)."""
        opts = ",".join(f"{k}={v}" for k, v in self.given)
        return f"py:{Path(self.path).name}:{self.class_name}:{opts}@{self.digest[:16]}"

    def load(self) -> type[Policy]:
        """The class, from a fresh execution of the kept source."""
        return _load(self.source, self.path, self.class_name, self.text)

    def adapter(self) -> Any:
        """A fresh instance of the class wrapped for the core (``numasim.policy.adapter``)."""
        from numasim.policy.adapter import Adapter

        cls = self.load()
        return Adapter(cls(), _options(cls, self.given, self.text), self.text)


@cache
def _compiled(source: str, path: str) -> types.CodeType:
    # Tracebacks show the policy's own lines even where the file is not (a Dask worker).
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    return compile(source, path, "exec")


def _load(source: str, path: str, class_name: str, origin: str) -> type[Policy]:
    code = _compiled(source, path)
    name = f"numasim_policy_{Path(path).stem}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as e:
        raise InputError(f"{origin}: {path} raised {type(e).__name__} when loaded: {e}") from e
    cls = module.__dict__.get(class_name)
    if cls is None:
        classes = [
            k
            for k, v in module.__dict__.items()
            if isinstance(v, type) and issubclass(v, Policy) and v is not Policy
        ]
        raise InputError(
            f"{origin}: {path} has no class {class_name}"
            + (f"; its policies: {', '.join(classes)}" if classes else "")
        )
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise InputError(f"{origin}: {class_name} is not a subclass of numasim.policy.Policy")
    return cls


def _convert(origin: str, key: str, value: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if value not in ("true", "false", "on", "off", "1", "0"):
                raise ValueError
            return value in ("true", "on", "1")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
    except ValueError:
        kind = type(default).__name__
        raise InputError(f"{origin}: option '{key}' must be a {kind}, not '{value}'") from None
    return value


def _options(cls: type[Policy], given: tuple[tuple[str, str], ...], origin: str) -> dict[str, Any]:
    options = dict(cls.options)
    for key, value in given:
        if key not in cls.options:
            known = ", ".join(cls.options) or "none"
            raise InputError(
                f"{origin}: {cls.__name__} has no option '{key}' (its options: {known})"
            )
        options[key] = _convert(origin, key, value, cls.options[key])
    return options


def _split(text: str, origin: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    rest = text[len(PREFIX) :]
    at = rest.find(".py:")
    if at < 0:
        raise InputError(
            f"{origin}: '{text}' must be py:FILE.py:CLASS[:key=value,...] "
            "(e.g. py:examples/policies/nodebal.py:NodeBalancer)"
        )
    path, after = rest[: at + 3], rest[at + 4 :]
    class_name, _, opts = after.partition(":")
    if not class_name.isidentifier():
        raise InputError(f"{origin}: '{class_name}' is not a class name (in '{text}')")
    given: list[tuple[str, str]] = []
    for item in filter(None, (s.strip() for s in opts.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InputError(f"{origin}: policy option '{item}' must be key=value")
        if any(k == key.strip() for k, _ in given):
            raise InputError(f"{origin}: policy option '{key.strip()}' is given twice")
        given.append((key.strip(), value.strip()))
    return path, class_name, tuple(given)


def parse(text: str, origin: str = "--policy", base_dir: Path | None = None) -> PolicySpec:
    """The checked setting ``text`` (``py:PATH.py:Class[:key=value,...]``); a relative PATH
    is read from ``base_dir`` when given (an experiment file's directory), else from the
    current one. Problems are InputErrors naming ``origin``."""
    path, class_name, given = _split(text, origin)
    file = Path(path)
    if base_dir is not None and not file.is_absolute() and not file.exists():
        file = base_dir / file
    try:
        with open(file, "rb") as f:
            data = f.read(MAX_SOURCE + 1)
    except OSError as e:
        raise InputError(f"{origin}: {path}: cannot read the policy file: {e.strerror}") from None
    if len(data) > MAX_SOURCE:
        raise InputError(f"{origin}: {path}: a policy file is at most {MAX_SOURCE} bytes")
    try:
        source = data.decode()
    except UnicodeDecodeError:
        raise InputError(f"{origin}: {path}: not UTF-8 text") from None
    try:
        _compiled(source, str(file))
    except SyntaxError as e:
        raise InputError(f"{origin}: {path}: line {e.lineno}: {e.msg}") from None
    cls = _load(source, str(file), class_name, origin)
    _options(cls, given, origin)
    base = cls.base
    if not isinstance(base, str) or is_python_spec(base):
        raise InputError(f"{origin}: {class_name}.base must name a registered policy")
    _core.check_policy(f"{origin}: {class_name}.base", base)
    if overridden(cls, "balance") and not (
        isinstance(cls.period_ms, (int, float)) and cls.period_ms > 0
    ):
        raise InputError(f"{origin}: {class_name}.period_ms must be a positive number")
    if not any(overridden(cls, h) for h in HOOKS):
        raise InputError(
            f"{origin}: {class_name} overrides none of {', '.join(HOOKS)}: it is its base"
        )
    opts = ",".join(f"{k}={v}" for k, v in given)
    digest = hashlib.sha256(f"{source}\0{class_name}\0{opts}".encode()).hexdigest()
    return PolicySpec(text, str(file), class_name, given, source, digest, base)
