"""Exceptions the CLI maps to exit codes, kept apart from the modules that raise them so that
``numasim.cli`` can catch them without importing those modules (and what they import) for every
command. ``InputError`` (exit 2) comes from the core: ``numasim._core.InputError``."""

from __future__ import annotations

from pathlib import Path


class Interrupted(Exception):
    """The sweep was stopped by Ctrl-C; ``saved`` of ``total`` runs are in the store."""

    def __init__(self, saved: int, total: int, out: Path) -> None:
        super().__init__(f"{saved} of {total} runs saved in {out}")
        self.saved, self.total, self.out = saved, total, out
