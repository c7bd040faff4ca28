"""Imported by the fork server that starts numasim's pool workers (``set_forkserver_preload``):
a worker the fork server forked for a pool that has already shut down says nothing.

When a command is stopped while its pool is starting a worker, the pool's semaphores are gone
before the new process reads its start-up data; ``multiprocessing`` then prints that process's
``FileNotFoundError`` traceback from the fork server (``forkserver.main`` hands it to
``sys.excepthook``) after the command's own one line. Such a process never ran anything: its
traceback is dropped. Every other error is printed as before.
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType


def _orphan_start(kind: type[BaseException], tb: TracebackType | None) -> bool:
    """Whether the error is a new worker's failure to rebuild its pool's semaphore."""
    if not issubclass(kind, FileNotFoundError):
        return False
    return any(
        frame.filename.endswith("synchronize.py") and frame.name == "__setstate__"
        for frame in traceback.extract_tb(tb)
    )


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    if not _orphan_start(kind, tb):
        sys.__excepthook__(kind, value, tb)


sys.excepthook = _excepthook
