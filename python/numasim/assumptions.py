"""Modelling assumptions: the registry the core ships, and settings resolved by it.

A setting is what ``--assume``, the ``assume=`` keyword and an experiment file give: at most one
profile (``kernel26``, ``paper``) and ``NAME=VALUE`` items; the profile is applied first wherever
it stands, then the items (``paper,slice=wall`` and ``slice=wall,paper`` are the same); a mapping
``{"memory": "parent"}`` in Python. The core parses and checks it (``numasim_core::assumptions``:
two profiles, ``linux``, the profile's old name, and an assumption named twice are refused) and
returns the full resolved set, which stored results are keyed by and every table and figure
prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from numasim import _core

Setting = str | Mapping[str, str] | None

PROFILES = ("kernel26", "paper")


@lru_cache(maxsize=1)
def registry() -> dict[str, Any]:
    """``{"profiles": {name: description}, "assumption": [{name, description, values, kernel26,
    paper}]}`` (crates/numasim-core/data/assumptions.toml)."""
    return json.loads(_core.assumptions_registry())


def names() -> list[str]:
    return [a["name"] for a in registry()["assumption"]]


def entry(name: str) -> dict[str, Any]:
    return next(a for a in registry()["assumption"] if a["name"] == name)


def text(setting: Setting) -> str:
    """A setting as the core's text (``memory=parent,slice=work``)."""
    if setting is None:
        return ""
    if isinstance(setting, Mapping):
        for name, value in setting.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(
                    f"assume: names and values are strings (e.g. {{'memory': 'parent'}}), "
                    f"not {name!r}: {value!r}"
                )
        return ",".join(f"{k}={v}" for k, v in setting.items())
    if not isinstance(setting, str):
        raise TypeError(
            f"assume must be a profile or NAME=VALUE text ('paper', 'memory=parent') or a "
            f"dict, not {type(setting).__name__} {setting!r}"
        )
    return setting


def resolve(
    setting: Setting,
    origin: str = "assume",
    base: Setting = None,
    profile: Callable[[str], dict[str, str]] | None = None,
) -> dict[str, str]:
    """The full set of assumptions ``setting`` gives, in registry order. Its profile, if it
    names one, is applied first wherever it stands: ``profile(name)`` (default: that profile's
    values); else it starts from ``base`` (default: the kernel26 profile). Its ``NAME=VALUE``
    items then change single assumptions. An unknown name or value, two profiles or a name
    given twice within one setting is an InputError naming ``origin``."""
    setting = text(setting)
    _core.resolve_assumptions(origin, setting)  # checks the whole setting (the core's rule)
    items = [i.strip() for i in setting.split(",") if i.strip()]
    named = next((i for i in items if "=" not in i), None)
    if named is None:
        out = dict(_core.resolve_assumptions(origin, text(base)))
    elif profile:
        out = profile(named)
    else:
        out = dict(_core.resolve_assumptions(origin, named))
    for item in items:
        if "=" in item:
            # The core's text of the value (``cost=paper:30.0`` is ``cost=paper``), so one
            # setting has one key in the store.
            name = item.split("=", 1)[0].strip()
            out[name] = dict(_core.resolve_assumptions(origin, item))[name]
    return out


def canonical(resolved: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in resolved.items())


def profile_of(resolved: Mapping[str, str]) -> str | None:
    """The profile whose values these are, if any."""
    for p in PROFILES:
        if resolve(p) == dict(resolved):
            return p
    return None


def describe(resolved: Mapping[str, str]) -> str:
    """One line for tables and captions: ``assumptions: memory=parent, slice=work, wake=idlest
    (the paper profile)``."""
    p = profile_of(resolved)
    items = ", ".join(f"{k}={v}" for k, v in resolved.items())
    return f"assumptions: {items}" + (f" (the {p} profile)" if p else "")


def listing() -> str:
    """What ``numasim list assumptions`` prints."""
    lines = [
        "Profiles (--assume PROFILE and NAME=VALUE items to change single assumptions; the "
        "profile is applied first):"
    ]
    for name, desc in registry()["profiles"].items():
        lines.append(f"  {name:<8} {desc}")
    for a in registry()["assumption"]:
        lines += ["", f"{a['name']}: {a['description']}"]
        for value, meaning in a["values"].items():
            used = [p for p in PROFILES if a[p]["value"] == value]
            tag = f" [{', '.join(used)}]" if used else ""
            lines.append(f"  {value}{tag}: {meaning}")
        for p in PROFILES:
            lines.append(f"  source ({p}): {a[p]['source']}")
    return "\n".join(lines)
