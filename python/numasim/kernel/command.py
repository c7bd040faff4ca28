"""The ``numasim kernel-run`` command (registered by numasim.cli)."""

from __future__ import annotations

from pathlib import Path

import click

from numasim.kernel.guest import START_MODES


def _progress(message: str) -> None:
    click.echo(f"numasim: {message}", err=True)


@click.command(name="kernel-run")
@click.option(
    "--machine",
    "machine_spec",
    required=True,
    help="Preset or machine file: at most 16 nodes, 4 CPUs per node, 64 CPUs.",
)
@click.option(
    "--kernel",
    default="6.12",
    show_default=True,
    help="6.1 or 6.12 (the newest Debian 12 package of that series, downloaded once "
    "into ~/.cache/numasim/kernels), or the path of a vmlinuz file.",
)
@click.option(
    "--tasks",
    type=click.IntRange(1, 256),
    default=None,
    help="CPU-bound loops to run (default: one per CPU).",
)
@click.option(
    "--start",
    type=click.Choice(START_MODES),
    default="fork",
    show_default=True,
    help="fork: forked one after another by a parent on CPU 0; pinned: loop i on CPU "
    "i mod CPUs; released: all on CPU 0, given every CPU after --release-ms.",
)
@click.option(
    "--release-ms",
    type=click.IntRange(0, 3_600_000),
    default=1000,
    show_default=True,
    help="With --start released: when the loops are given every CPU (after the last fork).",
)
@click.option(
    "--mem-mb",
    type=click.IntRange(0, 1024),
    default=0,
    show_default=True,
    help="0: pure CPU loops; M: each loop writes its own M MB buffer over and over "
    "(dd from /dev/zero), pages for NUMA balancing to move.",
)
@click.option(
    "--window-s",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    help="Guest seconds recorded from the first loop's start.",
)
@click.option(
    "--numa-balancing",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="The guest's kernel.numa_balancing.",
)
@click.option(
    "--boots",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Separate boots (each one run).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for the records (boot-N.json, runs.json); must hold none yet.",
)
@click.option(
    "--keep-raw",
    is_flag=True,
    help="Also keep what each guest sent (boot-N.raw.tar.gz: trace, schedstat …) and "
    "its console (boot-N.console.txt).",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(10, 86_400),
    default=None,
    help="Give up a boot after this many host seconds (default: 120 + 10 per vCPU "
    "+ 10 × the window).",
)
@click.option(
    "--summary",
    "show_summary",
    is_flag=True,
    help="Print each boot's migrations and balancing passes per guest second.",
)
def kernel_run(
    machine_spec,
    kernel,
    tasks,
    start,
    release_ms,
    mem_mb,
    window_s,
    numa_balancing,
    boots,
    out,
    keep_raw,
    timeout_s,
    show_summary,
) -> None:
    """Boot a real Linux kernel under QEMU with MACHINE's NUMA table, run CPU-bound loops and
    record the scheduler's migrations and balancing passes (docs/kernel-runs.md)."""
    from numasim._core import InputError
    from numasim.kernel import runner
    from numasim.kernel.boot import node_mem_mb, refuse_machine
    from numasim.kernel.guest import WorkloadSpec
    from numasim.kernel.schema import load_run
    from numasim.kernel.summary import text
    from numasim.machine import Machine

    m = Machine.load(machine_spec)
    refuse_machine(m, f"--machine {machine_spec}")
    if start != "released" and release_ms != 1000:
        raise click.UsageError("--release-ms applies only to --start released")
    mem_total = m.nodes * node_mem_mb(m)
    if (tasks or m.cpus) * mem_mb > mem_total // 2:
        raise InputError(
            f"--mem-mb: {tasks or m.cpus} loops × {mem_mb} MB is more than half "
            f"the guest's {mem_total} MB"
        )
    w = WorkloadSpec(tasks or m.cpus, start, release_ms, mem_mb, window_s, numa_balancing == "on")
    opts = runner.Options(m, kernel, w, boots, out, keep_raw, timeout_s)
    written = runner.kernel_run(opts, _progress)
    if show_summary:
        for path in written[:-1]:
            click.echo(text(load_run(path)))
    click.echo(f"wrote {', '.join(str(p) for p in written)}")


@click.command(name="validate")
@click.argument("runs", nargs=-1, required=True, metavar="RUNS...")
@click.option(
    "--policy",
    default="linux",
    show_default=True,
    help="numasim's policy to hold against the kernel (linux gets the runs' NUMA balancing "
    "setting unless the option sets it).",
)
@click.option(
    "--seeds",
    type=click.IntRange(2, 10_000),
    default=20,
    show_default=True,
    help="numasim runs of the twin workload, each with its own start times.",
)
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Worker processes.")
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True)
@click.option("--report", "report_file", default=None, help="Also write the HTML page here.")
@click.option("--json", "as_json", is_flag=True, help="Print every metric's values as JSON.")
def validate(runs, policy, seeds, jobs, confidence, report_file, as_json) -> None:
    """Hold numasim against a real kernel: run the twin of RUNS (the boots of one
    `numasim kernel-run`: its --out directory, or boot files) over many seeds and print, side
    by side, migrations per task-second by kind and distance, balancing passes per level per
    CPU-second, the share of tasks moved and the gaps between a task's moves."""
    import json
    import os

    from numasim._core import InputError
    from numasim.kernel import report
    from numasim.kernel.schema import load_run, load_runs
    from numasim.kernel.validate import check_same
    from numasim.kernel.validate import validate as run_validation
    from numasim.sim import default_domains

    default_domains(policy)  # a bad policy is refused before anything runs
    named = []
    for p in runs:
        if Path(p).is_dir():
            named += [(f"{p} boot {r.boot}", r) for r in load_runs(p)]
        elif Path(p).is_file():
            named.append((p, load_run(p)))
        else:
            raise InputError(f"{p}: no such kernel run (a kernel-run --out directory or a file)")
    check_same(named)
    loaded = [r for _, r in named]
    if report_file:
        from numasim.cli import _check_writable

        _check_writable(report_file, "--report")
    jobs = jobs or min(seeds, os.cpu_count() or 1)
    _progress(f"running numasim's twin of {len(loaded)} boots over {seeds} seeds")
    v = run_validation(loaded, policy, seeds, jobs)
    if as_json:
        click.echo(json.dumps(report.as_dict(v, confidence), indent=1))
    else:
        click.echo(report.text(v, confidence))
    if report_file:
        from numasim.cli import _write

        _write(report_file, report.html_page(v, confidence))
        click.echo(f"wrote {report_file}")
