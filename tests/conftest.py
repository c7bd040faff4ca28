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


#: What Dask's own start and shutdown may warn about; tolerated only in tests that start one.
DASK_WARNINGS = ("ignore::DeprecationWarning", "ignore::ResourceWarning", "ignore::UserWarning")


def pytest_collection_modifyitems(items):
    for item in items:
        if "local_cluster" in getattr(item, "fixturenames", ()):
            for spec in DASK_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture
def local_cluster():
    """``with local_cluster(workers) as cluster``: a Dask cluster of single-threaded worker
    processes on this machine (the test is skipped where Dask is not installed)."""

    def start(workers: int = 2):
        distributed = pytest.importorskip("distributed")
        return distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )

    return start


@pytest.fixture
def run(capsys):
    def _run(*args: str) -> Result:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run
