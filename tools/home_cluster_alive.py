"""How many of Koita et al.'s processes are alive at once, and how many hold a home cluster, in
a home-cluster reproduction's results directory.

    python tools/home_cluster_alive.py DIR      # DIR: `numasim reproduce home-cluster-… --out DIR`

Per x (load level or threads forked at a time) and policy, over the replications:

1. alive: the time-average number of processes alive while they are being created, over
   [0, T] with T the last creation: Σ over processes of the part of [creation, end of its last
   thread] before T, divided by T — the steady state the load level describes, without the
   run's drain after the last creation;
2. home %: the share of processes that reserved a home cluster at creation (`space_homes` /
   `space_processes`; the schemes with homes only — EQUI, DYN and LIM have none).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def table(directory: Path) -> pd.DataFrame:
    runs = pd.read_parquet(directory / "runs.parquet")
    apps = pd.read_parquet(directory / "apps.parquet")
    per_run = ["machine", "workload", "n", "policy", "replication"]
    apps["created"] = apps.completion_ms - apps.turnaround_ms
    last = apps.groupby(per_run).created.transform("max")
    apps["alive_ms"] = (apps.completion_ms.clip(upper=last) - apps.created).clip(lower=0)
    g = apps.assign(last=last).groupby(per_run)
    alive = (g.alive_ms.sum() / g["last"].first()).rename("alive")
    runs = runs.join(alive, on=per_run)
    if "space_homes" in runs:
        runs["home_pct"] = 100 * runs.space_homes / runs.space_processes
    else:
        runs["home_pct"] = float("nan")
    out = runs.groupby(["workload", "policy"], sort=False)[["alive", "home_pct"]].mean()
    return out.round(1)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with pd.option_context("display.max_rows", None, "display.width", 120):
        print(table(Path(sys.argv[1])).unstack("policy").to_string())


if __name__ == "__main__":
    main()
