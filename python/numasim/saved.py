"""A run with what it ran on: kept by ``numasim run --out DIR``, read back by ``numasim trace``.

```
DIR/run.json      {"format": 1, "machine": {... topology --json's machine ...},
                   "policy": ..., "domains": ..., "workload": ..., "seed": ...,
                   "assumptions": {"memory": ..., ...}, "core": FINGERPRINT,
                   "digest": SHA-256 of the fields above and events.json}
DIR/events.json   the engine's result as it came: processes, summary, running intervals
                  ("trace") and recorded events ("trace_events": migrations, balancing
                  attempts, runqueue lengths)
```

The machine is stored whole (not by name), so a saved run reads back even after a preset
changes or on a machine without the machine file. A run saved before assumptions were named
(no "assumptions" field) ran under the kernel26 profile, the only model numasim had then; an
empty set of assumptions is a real run's schedule read from its trace (``numasim import-trace
--events``), which no model made.

The digest binds run.json to its events: an edited run.json (another policy named, another
machine) or an events.json from another run is refused, not drawn under the wrong title. The
core's fingerprint says which build made the run. A run saved before digests were written has
neither, and is read as it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from numasim import _core, assumptions
from numasim._core import InputError
from numasim.machine import MAX_SAVED_RUN_BYTES, Machine, read_text

FORMAT = 1
RUN_FILE = "run.json"
EVENTS_FILE = "events.json"
RESULT_KEYS = ("processes", "summary", "trace", "trace_events")
#: Every file ``numasim run --out DIR`` and ``numasim trace DIR`` write: a new run saved into
#: DIR removes those of the run saved there before, so no file of it is left beside the new.
RUN_DIR_FILES = ("processes.csv", "summary.json", "workload.csv", "workload.json",
                 "migrations.csv", "apps.csv", RUN_FILE, EVENTS_FILE, "trace.json")  # fmt: skip


def digest(run: dict[str, Any], events: str) -> str:
    """SHA-256 of a saved run's fields (all but ``digest``) and its events text."""
    fields = json.dumps({k: v for k, v in run.items() if k != "digest"}, sort_keys=True)
    h = hashlib.sha256(fields.encode())
    h.update(b"\0")
    h.update(events.encode())
    return h.hexdigest()


@dataclass
class RunRecord:
    """One traced run: the machine, how it ran, and the engine's result text."""

    machine: Machine
    policy: str
    domains: str
    workload: str
    seed: int
    result_json: str
    #: The modelling assumptions it ran under (name → value).
    assumptions: dict[str, str]
    #: Names the result in error messages (the events file of a saved run).
    origin: str = "run"

    @cached_property
    def result(self) -> dict[str, Any]:
        """The engine's result (processes, summary, trace, trace_events), parsed when first
        needed (a trace alone is built by the core from the text)."""
        try:
            result = json.loads(self.result_json)
        except json.JSONDecodeError as e:
            raise InputError(f"{self.origin}: line {e.lineno}: not valid JSON: {e.msg}") from None
        for key in RESULT_KEYS:
            if not isinstance(result, dict) or key not in result:
                raise InputError(f"{self.origin}: field {key}: missing")
        return result

    @classmethod
    def of(cls, machine: Machine, policy: str, domains: str, workload: str, seed: int,
           result: Any) -> RunRecord:  # fmt: skip
        """A run just made (a ``sim.Result``): its result, already parsed, is not parsed again."""
        record = cls(machine, policy, domains, workload, seed, result.raw_json,
                     result.assumptions)  # fmt: skip
        record.__dict__["result"] = result.raw  # the cached property's slot
        return record

    def save(self, out: Path) -> list[Path]:
        """Writes run.json and events.json into ``out``; returns their paths."""
        from numasim.store import core_fingerprint

        run = {"format": FORMAT, "machine": self.machine.info, "policy": self.policy,
               "domains": self.domains, "workload": self.workload, "seed": self.seed,
               "assumptions": self.assumptions, "core": core_fingerprint()}  # fmt: skip
        run["digest"] = digest(run, self.result_json)
        paths = [out / RUN_FILE, out / EVENTS_FILE]
        paths[0].write_text(json.dumps(run, indent=1) + "\n")
        paths[1].write_text(self.result_json)
        return paths

    @classmethod
    def load(cls, out: str | Path) -> RunRecord:
        """Reads a directory written by ``save``; bad or missing files are an InputError."""
        out = Path(out)
        if not out.is_dir():
            raise InputError(f"{out}: not a directory (numasim run --out DIR saves a run there)")
        texts = {}
        for name in (RUN_FILE, EVENTS_FILE):
            texts[name] = read_text(out / name, "the saved run", max_bytes=MAX_SAVED_RUN_BYTES)
        origin = str(out / RUN_FILE)
        try:
            run = json.loads(texts[RUN_FILE])
        except json.JSONDecodeError as e:
            raise InputError(f"{origin}: line {e.lineno}: not valid JSON: {e.msg}") from None
        if not isinstance(run, dict):
            raise InputError(f"{origin}: a saved run must be a JSON object")
        if run.get("format") != FORMAT:
            raise InputError(f"{origin}: field format: {run.get('format')!r} is not {FORMAT}")
        for key in ("machine", "policy", "domains", "workload", "seed"):
            if key not in run:
                raise InputError(f"{origin}: field {key}: missing")
        if "digest" in run and run["digest"] != digest(run, texts[EVENTS_FILE]):
            raise InputError(
                f"{origin}: field digest: does not match the run's fields and {EVENTS_FILE} "
                "(a file was edited, or comes from another run)"
            )
        machine = Machine(_core.Machine.from_info_json(json.dumps(run["machine"]), origin))
        saved = run.get("assumptions")
        if saved is not None and not isinstance(saved, dict):
            raise InputError(f"{origin}: field assumptions: must be an object of NAME: VALUE")
        # None: saved before assumptions were named (kernel26's defaults); {}: a real run's
        # schedule imported from its trace, which no model made.
        resolved = (assumptions.resolve(saved or {}, f"{origin}: field assumptions")
                    if saved != {} else {})  # fmt: skip
        return cls(machine, run["policy"], run["domains"], run["workload"], run["seed"],
                   texts[EVENTS_FILE], resolved, str(out / EVENTS_FILE))  # fmt: skip
