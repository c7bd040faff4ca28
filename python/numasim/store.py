"""The result store of an experiment directory: every finished run, keyed by all that made it.

```
DIR/results.sqlite   table runs(key TEXT PRIMARY KEY, key_json TEXT, row_json TEXT)
                     table meta(name TEXT PRIMARY KEY, value TEXT)   -- store format
DIR/.lock            an OS file lock (flock) held by the one numasim writing into DIR; its pid
DIR/previous-STAMP/  an older store, moved aside by --fresh (never deleted)
```

1. A run's key is the SHA-256 of a canonical JSON object of everything that determines its
   numbers (``run_key``): the resolved machine's content (nodes, CPUs, speeds, distances — not
   its name), the workload spec, the process count, the replication and its seed, the policy
   setting with its options, the domain builder, the modelling assumptions, the numasim version,
   the row format and a fingerprint of the compiled core (the bytes of ``numasim._core``).
   Labels (machine, workload and variant names as the experiment calls them) are not part of
   the key: a stored run is relabelled with the names of the experiment that reads it.
2. A rerun looks its keys up, reuses the runs found and computes the rest; a changed spec,
   seed, machine, option or core build changes the key, so nothing stale is ever returned.
3. Each finished batch is one transaction (``INSERT OR IGNORE`` on the unique key): a kill
   loses at most the batches in flight, and a run is never stored twice.
4. One writer per directory: ``lock`` takes a non-blocking ``flock`` on ``DIR/.lock``; the OS
   releases it when the holder dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from numasim._core import InputError

STORE_FILE = "results.sqlite"
LOCK_FILE = ".lock"
#: The store written before run keys existed (one JSON line per batch).
LEGACY_FILE = "runs.jsonl"
#: Bumped whenever the store's tables or a run's row (the metrics kept) change.
STORE_FORMAT = 2
ROW_FORMAT = 3


@cache
def core_fingerprint() -> str:
    """SHA-256 of the compiled core's file: a rebuilt core with different code gets new keys."""
    from numasim import _core

    return hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()[:16]


def machine_digest(info: dict[str, Any]) -> str:
    """The machine's content (what ``topology --json`` prints), without its name and texts."""
    content = {k: info[k] for k in ("nodes", "cpus", "distances")}
    return hashlib.sha256(canonical(content).encode()).hexdigest()[:16]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def run_key(**fields: Any) -> str:
    """The key of one run; ``fields`` must hold everything that determines its numbers."""
    return _key_of(canonical(_full(fields)))


def _full(fields: dict[str, Any]) -> dict[str, Any]:
    from numasim import __version__

    return {"numasim": __version__, "core": core_fingerprint(), "row_format": ROW_FORMAT, **fields}


def _key_of(full_text: str) -> str:
    return hashlib.sha256(full_text.encode()).hexdigest()


#: Stand-ins for a run's replication and seed in ``run_keys``' templates (both are never
#: negative); JSON writes an integer as ``str`` does.
_REP, _SEED = str(-(2**62) - 11), str(-(2**62) - 13)


def run_keys(fields: dict[str, Any], reps: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """For each ``(replication, seed)`` of ``reps``, the run whose key fields are ``fields``
    with those two: its ``run_key`` and ``canonical`` text of its fields (what the store keeps).
    The same bytes as computing each, from two texts of ``fields`` written once with stand-ins:
    an experiment has tens of thousands of runs that differ only there."""
    templates = []
    for value in (_full(fields), fields):
        text = canonical({**value, "replication": int(_REP), "seed": int(_SEED)})
        if text.count(_REP) != 1 or text.count(_SEED) != 1:  # a field's text holds one
            return [(run_key(**fields, replication=r, seed=seed),
                     canonical({**fields, "replication": r, "seed": seed}))
                    for r, seed in reps]  # fmt: skip
        a, rest = text.split(_REP)  # "replication" sorts before "seed"
        b, c = rest.split(_SEED)
        templates.append((a, b, c))
    (fa, fb, fc), (ka, kb, kc) = templates
    return [(_key_of(f"{fa}{r}{fb}{seed}{fc}"), f"{ka}{r}{kb}{seed}{kc}") for r, seed in reps]


class Store:
    """``DIR/results.sqlite``; open it with ``Store.open`` (which takes the directory's lock)."""

    def __init__(self, directory: Path, db: sqlite3.Connection) -> None:
        self.directory = directory
        self.path = directory / STORE_FILE
        self.db = db

    @classmethod
    @contextlib.contextmanager
    def open(cls, directory: Path, fresh: bool = False) -> Iterator[Store]:
        """Locks ``directory`` for this process, moves an old store aside when ``fresh``, and
        opens (or creates) the store. Every failure is one InputError line naming the place."""
        if directory.exists() and not directory.is_dir():
            raise InputError(f"{directory}: is a file, not a results directory")
        with _writable(directory):
            directory.mkdir(parents=True, exist_ok=True)
        with lock(directory):
            if fresh:
                move_aside(directory)
            legacy = directory / LEGACY_FILE
            if legacy.exists():
                raise InputError(
                    f"{legacy}: results of an older numasim, stored without the machine, "
                    "workload, options and core that made them; run with --fresh to move "
                    "them aside and start over"
                )
            path = directory / STORE_FILE
            try:
                db = sqlite3.connect(path, isolation_level=None)
                db.execute("PRAGMA busy_timeout = 10000")
                _init(db, path)
            except sqlite3.DatabaseError as e:
                raise InputError(f"{path}: not a numasim result store: {e}") from None
            try:
                yield cls(directory, db)
            finally:
                db.close()

    def lookup(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored rows among ``keys``."""
        found: dict[str, dict[str, Any]] = {}
        for marks, part in _chunks(keys):
            for key, row in self.db.execute(
                f"SELECT key, row_json FROM runs WHERE key IN ({marks})", part
            ):
                found[key] = json.loads(row)
        return found

    def stored(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` the store holds."""
        query = "SELECT key FROM runs WHERE key IN ({})"
        return {key for marks, part in _chunks(set(keys))
                for (key,) in self.db.execute(query.format(marks), part)}  # fmt: skip

    def add(self, runs: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Stores ``(key, canonical text of the key fields, row)`` triples in one transaction."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "INSERT OR IGNORE INTO runs (key, key_json, row_json) VALUES (?, ?, ?)",
                [(k, fields_json, json.dumps(row)) for k, fields_json, row in runs],
            )


def _chunks(keys: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """``keys`` in parts of at most 900 (below SQLite's default limit of host parameters),
    each with its ``?`` marks."""
    keys = list(keys)
    for i in range(0, len(keys), 900):
        part = keys[i : i + 900]
        yield ",".join("?" * len(part)), part


def _init(db: sqlite3.Connection, path: Path) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, key_json TEXT NOT NULL, "
        "row_json TEXT NOT NULL)"
    )
    db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(STORE_FORMAT),))
    (stored,) = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    if stored != str(STORE_FORMAT):
        raise InputError(
            f"{path}: a result store of format {stored}, this numasim writes format "
            f"{STORE_FORMAT}; run with --fresh to move it aside and start over"
        )


@contextlib.contextmanager
def lock(directory: Path) -> Iterator[None]:
    """Holds ``DIR/.lock`` (flock, non-blocking) and writes this pid into it."""
    path = directory / LOCK_FILE
    with _writable(path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise InputError(f"{directory} is in use by another numasim (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def move_aside(directory: Path) -> Path | None:
    """Moves the store files of ``directory`` into ``previous-STAMP/``; returns that folder."""
    old = [directory / n for n in (STORE_FILE, LEGACY_FILE) if (directory / n).exists()]
    if not old:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = directory / f"previous-{stamp}"
    i = 1
    while target.exists():
        i += 1
        target = directory / f"previous-{stamp}-{i}"
    with _writable(target):
        target.mkdir()
        for p in old:
            p.rename(target / p.name)
    return target


@contextlib.contextmanager
def _writable(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        raise InputError(f"{e.filename or path}: cannot write: {e.strerror}") from None
