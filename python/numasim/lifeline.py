"""Signals and the processes numasim starts: how a command stops, and how its helpers stop with it.

```
  numasim (the command) ── SIGINT (Ctrl-C) or SIGTERM ──► KeyboardInterrupt ──► exit 130
     ├── forkserver ── pool workers ─┐
     ├── resource tracker            ├── each watches the command's pid: gone → exits at once
     ├── figure processes (fork) ────┤    (a parent-death signal, or a thread on a pidfd)
     └── bench subprocesses ─────────┘    (bench's, and a `numasim run` it starts: the
                                           command's pid in NUMASIM_COMMAND_PID)
```

1. ``stop_on_sigterm()`` makes SIGTERM raise ``KeyboardInterrupt`` in the main thread, as the
   first Ctrl-C does: every command stops the same way whichever of the two it gets, keeping
   what it had finished and cleaning up what it started (the CLI exits 130).
2. A run in the core takes the interpreter back every few milliseconds to run these handlers
   (crates/numasim-py, ``PyWatch``), so a long simulation stops within milliseconds too.
3. ``die_with(pid)`` in a helper process: it exits as soon as process ``pid`` (the command) is
   gone, even after ``kill -9`` of the command, which runs no handler. On Linux a child of the
   command asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``); a
   grandchild (a pool worker is the fork server's child) waits for the command's end on a
   pidfd in a daemon thread. Elsewhere the thread polls the pid every half second.
4. ``deferred_interrupt()`` holds both signals back while files are written, then raises: the
   files are whole or not written.
5. ``interruptible(fn, ...)`` runs a call of the core that has no watch (building a big
   machine's domains, a trace) in a thread while the main thread waits, so Ctrl-C is answered
   at once. The call cannot be stopped: it is abandoned, and the command must then end with
   ``exit_now`` (no interpreter shutdown, which would wait for it or take it down mid-call).

The fork server exits by itself when the command is gone (its pipe to the command closes) and
the resource tracker when every process holding its pipe is gone: nothing is left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: prctl(2) option: the signal the kernel sends this process when its parent exits.
_PR_SET_PDEATHSIG = 1
#: The environment variable that gives a process numasim starts (a bench scenario, a whole
#: ``numasim run``) the command's pid, to end with it: see ``child_env`` and ``die_with_command``.
COMMAND_PID = "NUMASIM_COMMAND_PID"
#: How often the fallback watcher looks whether the command is still there.
POLL_S = 0.5


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM stops this process like the first Ctrl-C: ``KeyboardInterrupt`` in the main
    thread (step 1). A Ctrl-C ignored by the shell that started us (a background job) stays
    ignored; otherwise Python's own Ctrl-C handler is put back if something replaced it. Only
    the main thread sets handlers: elsewhere (the CLI called from a thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.default_int_handler):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def die_with(pid: int) -> None:
    """Ends this process as soon as process ``pid`` is gone (step 3). Call it first thing in a
    helper process; ``pid`` is the command's, passed down when the helper is started."""
    if os.getppid() == pid and sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                # The parent may have died before the request: then we were adopted already.
                if os.getppid() != pid:
                    os._exit(1)
                return
    threading.Thread(target=_watch, args=(pid,), name="numasim-lifeline", daemon=True).start()


def child_env() -> dict[str, str]:
    """The environment for a process this command starts that must end with it."""
    return {**os.environ, COMMAND_PID: str(os.getpid())}


def die_with_command() -> None:
    """``die_with`` the command named in the environment (``child_env``), if one is."""
    pid = os.environ.get(COMMAND_PID, "")
    if pid.isdigit():
        die_with(int(pid))


def _watch(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])  # readable once the process has exited
    else:
        while _alive(pid):
            time.sleep(POLL_S)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_deferring = False


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block has ended, then raise ``KeyboardInterrupt``
    (step 4). Only in the main thread; elsewhere the block runs as it is. Nested, the outermost
    block raises: a set of files is written whole too."""
    global _deferring
    if threading.current_thread() is not threading.main_thread() or _deferring:
        yield  # elsewhere, or inside another such block, which raises at its end
        return
    _deferring = True
    caught: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s, handler in previous.items():
        if handler != signal.SIG_IGN:
            signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        _deferring = False
        for s, handler in previous.items():
            signal.signal(s, handler)
    if caught:
        raise KeyboardInterrupt


#: The end of each abandoned call: set when it has returned.
_abandoned: list[threading.Event] = []


def interruptible(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon thread, waited for here so that Ctrl-C and SIGTERM raise at
    once (step 5); the call is abandoned then, and ``exit_now`` ends the command."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    box: dict[str, Any] = {}
    ended = threading.Event()

    def call() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # raised again in the main thread
            box["error"] = e
        finally:
            ended.set()

    threading.Thread(target=call, name="numasim-core-call", daemon=True).start()
    # Not Thread.join: interrupted, it takes the thread for ended (CPython's bpo-45274 fix).
    try:
        while not ended.wait(0.05):
            pass
    except KeyboardInterrupt:
        _abandoned.append(ended)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def abandon_if_alive(thread: threading.Thread | None, timeout_s: float) -> None:
    """Waits up to ``timeout_s`` for ``thread`` to end; if it has not, it counts as an
    abandoned call (step 5), so that ``exit_now`` ends the command instead of letting the
    interpreter's shutdown wait for the thread forever."""
    if thread is None:
        return
    thread.join(timeout_s)
    if thread.is_alive():
        ended = threading.Event()

        def wait() -> None:
            thread.join()
            ended.set()

        threading.Thread(target=wait, name="numasim-abandoned", daemon=True).start()
        _abandoned.append(ended)


def exit_now(code: int) -> None:
    """Ends the process with ``code`` at once if a call was abandoned (step 5), after flushing
    what was printed; otherwise returns."""
    if not all(ended.is_set() for ended in _abandoned):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
