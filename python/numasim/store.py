"""The result store of an experiment directory: every finished run, keyed by all that made it.

```
DIR/results.sqlite   table runs(key TEXT PRIMARY KEY, key_json TEXT, row_json TEXT)
                     table meta(name TEXT PRIMARY KEY, value TEXT)   -- store format
                     PRAGMA application_id = 0x4E554D41 ("NUMA"): a numasim store
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
3. Each finished batch is one transaction (on the unique key): a kill loses at most the
   batches in flight, and a run is never stored twice.
5. A file is taken for a store only if it is one: the application id above (or, in a store
   made before it was set, exactly the two tables and the format row) — anything else is
   refused before anything is written into it. A damaged row (not JSON, not an object, a
   metric missing) is reported with its key and computed again, its row replaced.
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
import sys
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
#: SQLite's application id of a numasim store: "NUMA" in ASCII.
APPLICATION_ID = 0x4E554D41
_TABLES = {"meta": ["name", "value"], "runs": ["key", "key_json", "row_json"]}


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
        if directory.is_symlink() and not directory.exists():
            raise InputError(f"{directory}: a symbolic link to {os.readlink(directory)}, "
                             "which does not exist")  # fmt: skip
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
            except sqlite3.Error as e:
                raise InputError(f"{path}: cannot open the result store: {e}") from None
            try:
                db.execute("PRAGMA busy_timeout = 10000")
                _init(db, path)
            except sqlite3.DatabaseError as e:
                db.close()
                raise InputError(_store_error(path, e, "open")) from None
            except BaseException:
                db.close()
                raise
            try:
                yield cls(directory, db)
            finally:
                db.close()

    def lookup(
        self, keys: Iterable[str], required: Iterable[str] = ()
    ) -> dict[str, dict[str, Any]]:
        """The stored rows among ``keys``. A row that is not a JSON object holding every
        ``required`` field is damaged: left out (so it is computed again and replaced), with
        one warning line on stderr naming the first one's key and the count."""
        required = tuple(required)
        found: dict[str, dict[str, Any]] = {}
        damaged: list[tuple[str, str]] = []
        for marks, part in _chunks(keys):
            for key, text in self.db.execute(
                f"SELECT key, row_json FROM runs WHERE key IN ({marks})", part
            ):
                row, problem = _row(text, required)
                if problem:
                    damaged.append((key, problem))
                else:
                    found[key] = row
        if damaged:
            key, problem = damaged[0]
            more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
            print(f"numasim: warning: {self.path}: run {key[:16]}: {problem}{more}; "
                  "computing it again", file=sys.stderr)  # fmt: skip
        return found

    def stored(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` the store holds."""
        query = "SELECT key FROM runs WHERE key IN ({})"
        return {key for marks, part in _chunks(set(keys))
                for (key,) in self.db.execute(query.format(marks), part)}  # fmt: skip

    def add(self, runs: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Stores ``(key, canonical text of the key fields, row)`` triples in one transaction;
        a stored row of the same key (a damaged one ``lookup`` left out) is replaced. A write
        that fails (a read-only file or directory, a full disk) is one InputError line."""
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany(
                    "INSERT OR REPLACE INTO runs (key, key_json, row_json) VALUES (?, ?, ?)",
                    [(k, fields_json, json.dumps(row)) for k, fields_json, row in runs],
                )
        except sqlite3.DatabaseError as e:
            raise InputError(_store_error(self.path, e, "write")) from None


def _row(text: Any, required: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """A stored row and "" , or {} and what is wrong with it."""
    try:
        row = json.loads(text)
    except (TypeError, ValueError):
        return {}, "its row is not JSON"
    if not isinstance(row, dict):
        return {}, f"its row is a JSON {type(row).__name__}, not an object"
    missing = [k for k in required if k not in row]
    if missing:
        return {}, f"its row lacks {', '.join(missing[:3])}"
    return row, ""


def _store_error(path: Path, e: sqlite3.DatabaseError, doing: str) -> str:
    """One line for an SQLite failure, naming its real cause where the OS can tell it."""
    text = str(e)
    if doing == "write" or "readonly" in text or "disk" in text or "unable to open" in text:
        cause = text
        if "readonly" in text or "unable to open" in text:
            if path.exists() and not os.access(path, os.W_OK):
                cause = "the file is read-only"
            elif not os.access(path.parent, os.W_OK):
                cause = f"its directory {path.parent} is read-only"
        elif "full" in text:
            cause = "the disk is full"
        return f"{path}: cannot {doing} the result store: {cause}"
    return f"{path}: not a numasim result store ({text})"


def _chunks(keys: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """``keys`` in parts of at most 900 (below SQLite's default limit of host parameters),
    each with its ``?`` marks."""
    keys = list(keys)
    for i in range(0, len(keys), 900):
        part = keys[i : i + 900]
        yield ",".join("?" * len(part)), part


def _init(db: sqlite3.Connection, path: Path) -> None:
    """Checks that ``db`` is a numasim store (or empty) before anything is written into it,
    then creates what a new store lacks."""
    (app_id,) = db.execute("PRAGMA application_id").fetchone()
    names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    tables = {n: [c[1] for c in db.execute(f"PRAGMA table_info('{n}')")] for n in names}
    if app_id not in (0, APPLICATION_ID):
        raise InputError(f"{path}: not a numasim result store (SQLite application id "
                         f"{app_id:#x}, another program's)")  # fmt: skip
    if not tables:
        if app_id == 0:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, key_json TEXT NOT NULL, "
                   "row_json TEXT NOT NULL)")  # fmt: skip
        db.execute("INSERT INTO meta VALUES ('format', ?)", (str(STORE_FORMAT),))
        return
    if tables != _TABLES:
        other = sorted(set(tables) - set(_TABLES))
        if other:
            why = f"it holds the table{'s' * (len(other) > 1)} {', '.join(other)}"
        elif set(tables) != set(_TABLES):
            why = f"it lacks the table {', '.join(sorted(set(_TABLES) - set(tables)))}"
        else:
            name = next(n for n in _TABLES if tables[n] != _TABLES[n])
            why = f"its {name} table has the columns {', '.join(tables[name])}"
        raise InputError(f"{path}: not a numasim result store ({why})")
    row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    if row is None:
        raise InputError(f"{path}: not a numasim result store (no format in its meta table)")
    (stored,) = row
    if stored != str(STORE_FORMAT):
        raise InputError(
            f"{path}: a result store of format {stored}, this numasim writes format "
            f"{STORE_FORMAT}; run with --fresh to move it aside and start over"
        )
    if app_id == 0:  # a store made before the application id was set
        with contextlib.suppress(sqlite3.OperationalError):  # read-only: it still reads
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")


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
