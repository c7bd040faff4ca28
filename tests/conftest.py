"""Shared helpers: run the CLI in-process and capture exit code, stdout and stderr."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from numasim.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run(capsys):
    def _run(*args: str) -> Result:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run
