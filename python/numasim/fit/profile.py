"""Fitted profiles: what ``numasim fit`` writes, and how ``--assume fitted:NAME`` reads it back.

```
numasim fit EXP --out DIR
   ├─ DIR/fitted-EXP.json                      the result, beside the fit's report
   └─ $XDG_DATA_HOME/numasim/fitted/EXP.json   the user's fitted profiles (default
                                              ~/.local/share/numasim/fitted/)
--assume fitted:EXP          → the user's fitted profiles: EXP.json
--assume fitted:PATH.json    → that file
```

A fitted profile is always labelled inferred: it says which table it was fitted on, with what
command, and how far from it it stayed (its residuals). It is never a default and never ships
in the package: it lives in the user's files, where ``fit`` put it.

1. ``expand(setting)``: a setting naming ``fitted:X`` becomes the profile's full assumptions,
   with the setting's own ``NAME=VALUE`` items on top (an item beside it wins, as beside a
   profile); the profile's ``m`` is returned with it.
2. ``apply(exp, setting)``: the experiment under the expanded setting, with the profile's ``m``
   set through the open choice ``m`` where it applies (choices.apply).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from numasim._core import InputError

PREFIX = "fitted:"
SCHEMA = "numasim fitted profile 1"


def user_dir() -> Path:
    """Where ``fit`` keeps the user's fitted profiles (XDG base directory rules)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "numasim" / "fitted"


@dataclass(frozen=True)
class Fitted:
    name: str
    path: Path
    assume: str
    m: float | None


def locate(name: str, origin: str = "--assume") -> Path:
    """The file of ``fitted:name``."""
    if name.endswith(".json"):
        path = Path(name)
    else:
        path = user_dir() / f"{name}.json"
    if not path.is_file():
        raise InputError(
            f"{origin}: no fitted profile '{PREFIX}{name}' ({path} does not exist); "
            f"`numasim fit {name}` writes it"
        )
    return path


def load(name: str, origin: str = "--assume") -> Fitted:
    path = locate(name, origin)
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema is not '{SCHEMA}'")
        return Fitted(data["name"], path, str(data["assume"]), data.get("m"))
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a fitted profile: {e}") from None


def split(setting: str | None) -> tuple[str | None, str | None]:
    """``(the fitted profile's name or None, the rest of the setting)``."""
    if not setting or PREFIX not in setting:
        return None, setting
    items = [i.strip() for i in setting.split(",") if i.strip()]
    named = [i for i in items if i.startswith(PREFIX)]
    if len(named) > 1:
        raise InputError("--assume: two fitted profiles; give one")
    rest = [i for i in items if not i.startswith(PREFIX)]
    if any("=" not in i for i in rest):
        raise InputError(
            "--assume: a fitted profile and another profile; give one, and NAME=VALUE items to "
            "change single assumptions"
        )
    return named[0][len(PREFIX):], ",".join(rest)  # fmt: skip


def expand(setting: str | None, origin: str = "--assume") -> tuple[str | None, Fitted | None]:
    """Step 1: the setting with ``fitted:X`` replaced by its assumptions, and the profile."""
    name, rest = split(setting)
    if name is None:
        return setting, None
    f = load(name, origin)
    given = {i.split("=", 1)[0].strip() for i in (rest or "").split(",") if "=" in i}
    items = [i for i in f.assume.split(",") if i.split("=", 1)[0] not in given]
    return ",".join(items + ([rest] if rest else [])), f


def apply(exp, setting: str | None):
    """Step 2: ``exp`` under ``setting`` (which may name a fitted profile)."""
    from numasim import choices

    text, f = expand(setting)
    exp.assume = text
    if f is not None:
        exp.fitted = f.name
        if f.m is not None and choices.current(choices.entry("m"), exp) is not None:
            exp = choices.apply(choices.entry("m"), f"{f.m:.6g}", exp)
    return exp


def write(result, exp, command: str, out: Path) -> list[Path]:
    """The profile of ``result`` as JSON, into ``out`` and the user's fitted profiles."""
    from numasim import __version__

    best = result.best
    data = {
        "schema": SCHEMA,
        "name": f"{PREFIX}{exp.name}",
        "status": "inferred: fitted by numasim fit to one published table; not a default and "
        "not a source",
        "experiment": exp.name,
        "fitted_on": exp.reference.source,
        "command": command,
        "numasim": __version__,
        "assume": best.setting.assume,
        "m": best.setting.m,
        "objective": best.objective,
        "objective_noise": result.noise,
        "replications": result.replications,
        "parameters": [
            {
                "name": p.name,
                "value": p.value,
                "low": p.low,
                "high": p.high,
                "open_low": p.open_low,
                "open_high": p.open_high,
                "profile": p.profile,
            }
            for p in result.parameters
        ],
        "combinations": [
            {**c.combo, "setting": c.setting.label(), "objective": c.objective}
            for c in result.combos
        ],
        "residuals": result.residuals,
        "cost": {
            "evaluations": result.evaluations,
            "runs": result.runs,
            "seconds": round(result.seconds, 1),
        },
    }
    text = json.dumps(data, indent=2) + "\n"
    paths = [out / f"fitted-{exp.name}.json", user_dir() / f"{exp.name}.json"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(p)
    return paths
