"""Open choices outside the modelling assumptions: numbers and policy options the papers leave
open that move results (``data/choices/choices.toml``), each with its sentences or marked
unsourced, and how ``numasim reproduce --ablate`` flips each on an experiment.

```
choice          set by                       applies to
m               workload key mem_cpu         CPU-bound or mixed workloads without mem / mem_cpu
random-window   arrival=random → uniform:W   workloads with arrival=random
place           capability-aware:place=…     capability-aware variants
si              origin-aware:si=…            origin-aware variants
```

1. ``current(choice, exp)``: the choice's value in the experiment (its default for the
   workloads or variants it applies to), or None where it applies to nothing.
2. ``alternatives``: the registry's ``tries`` other than the current value.
3. ``apply``: a copy of the experiment with the value set on every workload or variant the
   choice applies to; names and labels stay, so the flipped gains line up with the unflipped
   ones, and the replication seeds (from machine, workload name, n, replication) are the same.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from numasim.machine import data_dir

if TYPE_CHECKING:
    from numasim.experiment import Experiment, Variant, WorkloadDef


@dataclass(frozen=True)
class Choice:
    name: str
    description: str
    applies: str
    default: str
    tries: tuple[str, ...]
    source: str


@lru_cache(maxsize=1)
def registry() -> tuple[Choice, ...]:
    data = tomllib.loads((data_dir("choices") / "choices.toml").read_text())
    return tuple(Choice(**{**c, "tries": tuple(c["tries"])}) for c in data["choice"])


def entry(name: str) -> Choice:
    return next(c for c in registry() if c.name == name)


def _items(spec: str) -> list[tuple[str, str]]:
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if part:
            key, _, value = part.partition("=")
            out.append((key.strip(), value.strip()))
    return out


def _m_applies(w: WorkloadDef) -> bool:
    items = dict(_items(w.spec))
    return (not w.has_apps and items.get("kind", "cpu") in ("cpu", "mixed")
            and "mem" not in items and "mem_cpu" not in items)  # fmt: skip


def has_io(w: WorkloadDef) -> bool:
    """Whether ``w`` has IO-bound processes (kind io or mixed; application threads run their
    plan's work, the same under every reading of exec)."""
    return not w.has_apps and dict(_items(w.spec)).get("kind", "cpu") in ("io", "mixed")


def _window_applies(w: WorkloadDef) -> bool:
    return not w.has_apps and dict(_items(w.spec)).get("arrival") == "random"


#: Policy options, by choice: the policy they belong to.
POLICY_OF = {"place": "capability-aware", "si": "origin-aware"}


def _option(v: Variant, key: str) -> str | None:
    """The value of option ``key`` in ``v``'s policy setting (None if not given)."""
    _, _, opts = v.policy.partition(":")
    return dict(_items(opts)).get(key)


def _with_option(v: Variant, key: str, value: str) -> Variant:
    name, _, opts = v.policy.partition(":")
    items = [(k, x) for k, x in _items(opts) if k != key] + [(key, value)]
    policy = name + ":" + ",".join(f"{k}={x}" for k, x in items)
    return dataclasses.replace(v, policy=policy)


def _variants(exp: Experiment, policy: str) -> list[Variant]:
    return [v for v in [exp.baseline, *exp.policies] if v.policy.partition(":")[0] == policy]


def current(c: Choice, exp: Experiment) -> str | None:
    """The choice's value in ``exp``, or None if it applies to none of its workloads or
    variants."""
    if c.name == "m":
        return c.default if any(_m_applies(w) for w in exp.workloads) else None
    if c.name == "random-window":
        return c.default if any(_window_applies(w) for w in exp.workloads) else None
    variants = _variants(exp, POLICY_OF[c.name])
    if not variants:
        return None
    return _option(variants[0], c.name) or c.default


def alternatives(c: Choice, exp: Experiment) -> list[str]:
    now = current(c, exp)
    return [] if now is None else [t for t in c.tries if t != now]


def apply(c: Choice, value: str, exp: Experiment) -> Experiment:
    """A copy of ``exp`` with the choice set to ``value`` wherever it applies."""
    out = copy.copy(exp)
    if c.name == "m":
        out.workloads = [dataclasses.replace(w, spec=f"{w.spec},mem_cpu={value}")
                         if _m_applies(w) else w for w in exp.workloads]  # fmt: skip
    elif c.name == "random-window":
        out.workloads = [
            dataclasses.replace(w, spec=",".join(
                f"arrival=uniform:{value}" if k == "arrival" else (f"{k}={x}" if x else k)
                for k, x in _items(w.spec)))
            if _window_applies(w) else w
            for w in exp.workloads
        ]  # fmt: skip
    else:
        policy = POLICY_OF[c.name]

        def flip(v: Variant) -> Variant:
            same = v.policy.partition(":")[0] == policy
            return _with_option(v, c.name, value) if same else v

        out.baseline = flip(exp.baseline)
        out.policies = [flip(v) for v in exp.policies]
    return out


def listing() -> str:
    """What ``numasim list assumptions`` prints after the assumptions."""
    lines = ["Open choices (not in a profile; `numasim reproduce --ablate` tries each):"]
    for c in registry():
        lines += ["", f"{c.name}: {c.description}",
                  f"  default {c.default}; the ablation tries {', '.join(c.tries)}",
                  f"  applies to: {c.applies}", f"  source: {c.source}"]  # fmt: skip
    return "\n".join(lines)
