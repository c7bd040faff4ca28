"""The ``numasim`` command line.

Bad input of any kind ends with exit code 2 and one line on stderr naming the file, the place
and the problem; warnings go to stderr and do not stop the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click

from numasim import _core
from numasim._core import InputError
from numasim.assumptions import listing as assumptions_listing
from numasim.assumptions import resolve as resolve_assumptions
from numasim.errors import Interrupted
from numasim.kernel.command import kernel_run, validate
from numasim.lifeline import (
    deferred_interrupt,
    die_with_command,
    exit_now,
    interruptible,
    stop_on_sigterm,
)
from numasim.machine import Machine, builders, check_builder, presets
from numasim.names import file_part
from numasim.progress import RunProgress
from numasim.progress import bar as progress_bar
from numasim.render import domains_text, machine_text, summary_text
from numasim.replay.command import export_rtapp, import_trace_command, replay_command
from numasim.saved import RunRecord
from numasim.sim import SEED_MAX, Workload, default_domains, policies, simulate

EXIT_BAD_INPUT = 2
#: 128 + SIGINT, as a shell reports a command stopped by Ctrl-C (SIGTERM too: it stops a
#: command the same way).
EXIT_INTERRUPTED = 130


def _warn(machine: Machine) -> None:
    for w in machine.warnings:
        click.echo(f"numasim: warning: {w}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="numasim")
def cli() -> None:
    """numasim: process scheduling and load balancing on NUMA multiprocessors."""


@cli.command()
@click.argument("machine")
@click.option(
    "--domains",
    "builder",
    default=None,
    help="Domain builder: "
    + ", ".join(b[0] for b in _core.builders())
    + " (default: linux, what a 6.x kernel builds; a run's default is its policy's builder, "
    "e.g. two-level for linux26: numasim list policies).",
)
@click.option(
    "--cpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="CPUs per node (1 … 16384 in all), for a distance table of rows; numactl --hardware "
    "output lists each node's CPUs itself.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print JSON: {"machine": {...}, "domains": {"builder": NAME, "cpus": {CPU: [LEVEL, '
    "...]}}}, each level with its span, groups and parameters.",
)
@click.option("--sysfs-root", default="/", hidden=True, help="Root of the sysfs tree for 'host'.")
def topology(
    machine: str, builder: str, cpus_per_node: int | None, as_json: bool, sysfs_root: str
) -> None:
    """Print MACHINE and its scheduling-domain hierarchy.

    MACHINE is a preset name, a machine file (.toml/.yaml), a distance-table text file (with
    --cpus-per-node), or 'host'.
    """
    m = Machine.load(machine, cpus_per_node, sysfs_root)
    _warn(m)
    chosen = builder is not None
    builder = check_builder(builder, "--domains") if chosen else TOPOLOGY_DOMAINS
    if as_json:
        # Both parts come as JSON text from the core: no parse and re-serialisation here (a
        # 2 000-node machine's domains are a gigabyte of JSON). Built where Ctrl-C stops it.
        domains = interruptible(m._core.domains_json, builder)
        click.echo(f'{{"machine": {m._core.to_json()}, "domains": {domains}}}')
        return
    description = next(b[1] for b in builders() if b[0] == builder)
    hierarchies = interruptible(m.hierarchies, builder)
    click.echo(machine_text(m))
    click.echo()
    click.echo(domains_text(hierarchies, description))
    if not chosen:
        click.echo()
        click.echo(topology_default_note())


#: The builder ``topology`` shows when ``--domains`` is not given.
TOPOLOGY_DOMAINS = "linux"


def topology_default_note() -> str:
    """What ``topology`` says when it chose the builder: a run over the same machine uses its
    policy's builder, which may be another one."""
    import textwrap

    by_builder: dict[str, list[str]] = {}
    for name, _, _, builder in policies():
        by_builder.setdefault(builder, []).append(name)
    defaults = "; ".join(f"{b} for {', '.join(names)}" for b, names in by_builder.items())
    text = (f"(--domains not given: shown for {TOPOLOGY_DOMAINS}, what a 6.x kernel builds. A run "
            f"uses its policy's builder unless --domains is given: {defaults}.)")  # fmt: skip
    return textwrap.fill(text, 100, break_on_hyphens=False)


@cli.command()
@click.option("--machine", "machine_spec", required=True, help="Preset, machine file or 'host'.")
@click.option(
    "--workload",
    "workload_spec",
    required=True,
    help="A spec (n=300,kind=cpu,exec=200,arrival=random, or app=canneal:16+x264:8), a "
    ".csv/.json workload file, or a mix: a .toml mix file or a shipped mix's name (parsec-mix).",
)
@click.option(
    "--policy",
    default="linux26",
    show_default=True,
    help="Balancing policy: "
    + ", ".join(p[0] for p in _core.policies())
    + ". Options follow a colon, e.g. origin-aware:v1=off,min-load=2 (numasim list policies; "
    "docs/policies/NAME.md).",
)
@click.option(
    "--domains",
    "builder",
    default=None,
    help="Domain builder: "
    + ", ".join(b[0] for b in _core.builders())
    + " (default: the policy's own, see numasim list policies).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, SEED_MAX),
    default=0,
    show_default=True,
    help="Seed of the generated workload (0 … 2^64 − 1): the same seed gives the same run, "
    "bit for bit. Ignored for a workload file. (compare's master --seed takes 0 … 2^63 − 1.)",
)
@click.option(
    "--cpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="CPUs per node (1 … 16384 in all), for a distance table of rows (presets, machine "
    "files and numactl --hardware output fix it).",
)
@click.option(
    "--assume",
    default=None,
    help="Modelling assumptions: one profile (kernel26, faithful to the Linux 2.6.18 kernel, "
    "or paper) and/or NAME=VALUE items, e.g. paper or paper,slice=wall; the profile is applied "
    "first wherever it stands, then the items (numasim list assumptions; default: kernel26).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Write CSV/JSON here.")
@click.option("--trace", "trace_file", default=None, help="Write a Perfetto/Chrome trace JSON.")
@click.option("--trace-window", default=None, help="START:END in ms: trace only that part.")
@click.option("--traces", "n_traces", type=click.IntRange(min=0), default=0,
              help="Print the migration traces of N processes.")  # fmt: skip
@click.option("--report", "report_file", default=None, help="Write a one-page HTML report.")
def run(
    machine_spec: str,
    workload_spec: str,
    policy: str,
    builder: str | None,
    seed: int,
    cpus_per_node: int | None,
    assume: str | None,
    as_json: bool,
    out: str | None,
    trace_file: str | None,
    trace_window: str | None,
    n_traces: int,
    report_file: str | None,
) -> None:
    """Simulate one run and print its summary.

    With --out DIR the run is saved (run.json, events.json) besides its tables, and
    `numasim trace DIR` makes its trace or report later.
    """
    window = _parse_window(trace_window)
    if window and not trace_file:
        raise click.UsageError("--trace-window clips the trace: give --trace FILE too")
    if as_json and n_traces:
        raise click.UsageError(
            "--traces prints text and --json prints only the summary; choose one "
            "(--out DIR also writes every migration to migrations.csv)"
        )
    m = Machine.load(machine_spec, cpus_per_node)
    _warn(m)
    builder = check_builder(builder, "--domains") if builder else default_domains(policy)
    assume, fitted = _assume_fitted(assume)
    workload = Workload.resolve(m, workload_spec, seed, assume or "")
    traced = bool(trace_file or n_traces or out or report_file)
    if fitted is not None:
        click.echo(f"numasim: assumptions and m from the fitted profile {fitted.name} "
                   "(inferred by numasim fit, not a source)", err=True)  # fmt: skip
    if fitted is not None and fitted.m is not None:
        from numasim import choices
        from numasim.experiment import WorkloadDef

        if "=" in workload_spec and choices._m_applies(WorkloadDef("w", workload_spec)):
            workload_spec = f"{workload_spec},mem_cpu={fitted.m:.6g}"
            workload = Workload.resolve(m, workload_spec, seed, assume or "")
    with RunProgress(f"{m.name} · {policy}") as progress:
        # The core asks for Ctrl-C between events; one event can last seconds (the first
        # balancing of 100 000 threads on one CPU): waited for apart, Ctrl-C is answered at once.
        result = interruptible(lambda: simulate(m, workload, policy=policy, domains=builder,
                                                trace=traced, assume=assume,
                                                on_progress=progress))  # fmt: skip
    record = RunRecord.of(m, policy, builder, workload_spec, seed, result)
    written = []
    # Ctrl-C from here waits until every file is written whole, then stops the command.
    with deferred_interrupt():
        if out:
            written += _save_run(record, result, workload, Path(out))
        if trace_file:
            written.append(_write_trace(record, trace_file, window))
        if report_file:
            written.append(_write_report(record, report_file))
    if as_json:
        click.echo(json.dumps(result.raw_summary))
        return
    click.echo(summary_text(m.name, policy, builder, result))
    if n_traces:
        from numasim.trace import process_traces

        click.echo("")
        click.echo(process_traces(m, result.raw, n_traces))
    if written:
        click.echo(f"wrote {', '.join(written)}")


def _assume(setting: str | None) -> str | None:
    """``--assume`` checked here, so its errors name the option."""
    if setting is not None:
        resolve_assumptions(setting, "--assume")
    return setting


def _assume_fitted(setting: str | None):
    """``--assume`` that may name a fitted profile (``fitted:NAME``): the setting with the
    profile's assumptions in its place, checked, and the profile (None if it names none)."""
    if not setting or "fitted:" not in setting:
        return _assume(setting), None  # `run` imports no numerical library for a small run
    from numasim.fit import profile

    text, fitted = profile.expand(setting)
    return _assume(text), fitted


def _experiment_assume(exp, setting: str | None):
    """``exp`` under ``--assume``, a fitted profile's ``m`` set where it applies."""
    from numasim.fit import profile

    _assume_fitted(setting)  # checked before anything runs
    exp = profile.apply(exp, setting)
    if exp.fitted:
        click.echo(f"numasim: assumptions and m from the fitted profile {exp.fitted} "
                   "(inferred by numasim fit, not a source)", err=True)  # fmt: skip
    return exp


def _save_run(record: RunRecord, result, workload: Workload, d: Path) -> list[str]:
    """The run's tables (processes, summary, workload, migrations) and the run itself. DIR is
    locked as an experiment's results directory is, and the files of a run saved there before
    are removed first: none of them is left beside the new run's."""
    import pandas as pd

    from numasim.saved import RUN_DIR_FILES
    from numasim.store import LEGACY_FILE, STORE_FILE, lock
    from numasim.trace import migration_table

    cols = ["time_ms", "pid", "from_cpu", "to_cpu", "from_node", "to_node", "kind", "level"]
    _check_out_dir(d)
    if any((d / name).exists() for name in (STORE_FILE, LEGACY_FILE)):
        raise InputError(f"{d}: holds an experiment's result store; give the run a directory "
                         "of its own")  # fmt: skip
    # Applications have barriers and memory sizes that CSV cannot hold: JSON for them.
    workload_file = "workload.json" if result.raw.get("apps") else "workload.csv"
    names = ["processes.csv", "summary.json", workload_file, "migrations.csv"]
    with _writing(d):
        d.mkdir(parents=True, exist_ok=True)
    with lock(d), _writing(d):
        for name in RUN_DIR_FILES:
            (d / name).unlink(missing_ok=True)
        result.processes.to_csv(d / "processes.csv", index=False)
        (d / "summary.json").write_text(json.dumps(result.raw_summary, indent=1) + "\n")
        workload.save(d / workload_file)
        pd.DataFrame(migration_table(record.machine, result.raw), columns=cols).to_csv(
            d / "migrations.csv", index=False
        )
        if result.raw.get("apps"):
            result.apps.drop(columns=["remote_share_timeline"]).to_csv(d / "apps.csv", index=False)
            names.append("apps.csv")
        saved = record.save(d)
    return [str(d / n) for n in names] + [str(p) for p in saved]


def _check_out_dir(d: Path) -> None:
    """An output directory that is a dangling symbolic link, or a file, is one clear line."""
    if d.is_symlink() and not d.exists():
        raise InputError(f"{d}: a symbolic link to {os.readlink(d)}, which does not exist")
    if d.exists() and not d.is_dir():
        raise InputError(f"{d}: is a file, not a directory")


@cli.command()
@click.argument("saved", metavar="DIR")
@click.option("--out", "-o", "trace_file", default=None,
              help="Trace JSON to write (default: DIR/trace.json).")  # fmt: skip
@click.option("--trace-window", default=None, help="START:END in ms: trace only that part.")
@click.option("--report", "report_file", default=None, help="Also write the HTML report.")
def trace(saved: str, trace_file: str | None, trace_window: str | None,
          report_file: str | None) -> None:  # fmt: skip
    """Write the Perfetto trace of a run saved by `numasim run --out DIR`."""
    from numasim.store import lock

    window = _parse_window(trace_window)
    trace_file = trace_file or str(Path(saved) / "trace.json")
    # Writing into the run's directory, it holds the directory's lock as `run --out` does:
    # a run saved into it meanwhile would leave a trace of another run beside it.
    into = Path(saved) if Path(saved).is_dir() else None
    inside = into is not None and any(
        Path(f).resolve().parent == into.resolve() for f in (trace_file, report_file) if f
    )
    with lock(into) if inside and into else contextlib.nullcontext():
        record = RunRecord.load(saved)
        written = [_write_trace(record, trace_file, window)]
        if report_file:
            try:
                with deferred_interrupt():
                    written.append(_write_report(record, report_file))
            except InputError:
                raise
            except (KeyError, IndexError, TypeError, ValueError) as e:
                # The core checked the events it reads; the summary and per-process fields
                # the report reads come from the file as they are.
                what = f"{type(e).__name__} {e}"
                raise InputError(f"{record.origin}: not a result numasim wrote: {what}") from None
    click.echo(f"wrote {', '.join(written)}")


class _BenchCommand(click.Command):
    """`bench`, whose help ends with the scenarios (read from data/bench/scenarios.toml only when
    the help is printed)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from numasim import bench as b

        with formatter.section("Scenarios (--only NAME,...)"):
            formatter.write_dl([(s["name"], s["title"]) for s in b.scenarios()])
        super().format_epilog(ctx, formatter)


@cli.command(cls=_BenchCommand)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--only",
    default=None,
    help="Comma-separated scenario names (default: all); with --scaling, CPU counts.",
)
@click.option(
    "--scaling",
    is_flag=True,
    help="Sweep the cost per process from 128 to 4 096 CPUs at equal load "
    "(data/bench/scaling.toml; the largest point can take minutes).",
)
@click.option("--peer", type=click.Choice(["simso"]), default=None,
              help="Run the matched scenarios (data/bench/peer.toml) in numasim and in this "
              "simulator too: times in-process and whole-process, and their ratios "
              "(pip install 'numasim[peer]').")  # fmt: skip
@click.option("--policies", "python_policies", is_flag=True,
              help="Time the example policies written in Python against their base on "
              "scenario (a)'s run (data/bench/policies.toml).")  # fmt: skip
def bench(as_json: bool, only: str | None, scaling: bool, peer: str | None,
          python_policies: bool) -> None:  # fmt: skip
    """Run the fixed benchmark scenarios: wall time, events, events/s, peak memory."""
    from numasim import bench as b

    if sum(map(bool, (scaling, peer, python_policies))) > 1:
        raise click.UsageError("--scaling, --peer and --policies are separate benchmarks; "
                               "choose one")  # fmt: skip
    if python_policies:
        results = b.run_policies()
        click.echo(json.dumps(results) if as_json else b.policies_text(results))
        return
    names = only.split(",") if only else None
    if scaling:
        _bench_scaling(names, as_json)
        return
    if peer:
        _bench_peer(peer, names, as_json)
        return
    _check_names(names, {s["name"] for s in b.scenarios()}, "scenario")
    results = b.run_all(names)
    if as_json:
        click.echo(json.dumps(results))
        return
    for r in results:
        click.echo(f"({r['name']}) {r['title']}")
        click.echo(
            f"    run {r['run_s'] * 1e3:.1f} ms (best of {r['repeat']}), {r['events']} events, "
            f"{r['events_per_s'] / 1e6:.2f} M events/s, peak {r['peak_rss_mb']:.0f} MB; "
            f"per process {r['run_s'] / r['processes'] * 1e6:.2f} µs; "
            f"generate {r['generate_s'] * 1e3:.1f} ms, domains {r['domains_s'] * 1e3:.1f} ms"
        )


def _check_names(names: list[str] | None, known: set[str], what: str) -> None:
    """A usage error naming the ``names`` that are not ``known`` (and what is)."""
    if names and not set(names) <= known:
        unknown = ", ".join(sorted(set(names) - known))
        raise click.UsageError(f"unknown {what} {unknown}; known: {', '.join(sorted(known))}")


def _bench_scaling(names: list[str] | None, as_json: bool) -> None:
    from numasim import bench as b

    known = sorted(b.scaling_cpus().values())
    try:
        cpus = [int(n) for n in names] if names else None
    except ValueError:
        cpus = [-1]
    if cpus and not set(cpus) <= set(known):
        raise click.UsageError(
            f"--only with --scaling takes CPU counts of the sweep: {', '.join(map(str, known))}"
        )
    points = b.run_scaling(cpus)
    click.echo(json.dumps(points) if as_json else b.scaling_text(points))


def _bench_peer(peer: str, names: list[str] | None, as_json: bool) -> None:
    from numasim import peer as p

    _check_names(names, {s["name"] for s in p.scenarios()}, "peer scenario")
    results = p.run(peer, names)
    click.echo(json.dumps(results) if as_json else p.text(peer, results))


TRACE_WARN_BYTES = 100 * 2**20


def _parse_window(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        start, end = (float(x) for x in text.split(":"))
    except ValueError:
        raise click.UsageError(f"--trace-window: '{text}' is not START:END in ms") from None
    if not 0 <= start < end:
        raise click.UsageError(f"--trace-window: need 0 <= START < END, got '{text}'")
    return start, end


def _write_trace(record: RunRecord, path: str, window) -> str:
    from numasim.trace import trace_text

    text = interruptible(trace_text, record.machine, record.result_json, window, record.origin)
    _write(path, text)
    if window and window[0] >= (makespan := record.result["summary"]["makespan_ms"]):
        click.echo(
            f"numasim: warning: --trace-window {window[0]:g}:{window[1]:g} starts after the run "
            f"ended ({makespan:.1f} ms): the trace holds no running slice",
            err=True,
        )
    if len(text) > TRACE_WARN_BYTES:
        click.echo(
            f"numasim: warning: the trace {path} is {len(text) / 2**20:.0f} MB; "
            "--trace-window START:END (ms) keeps a part of the run",
            err=True,
        )
    return path


def _write_report(record: RunRecord, path: str) -> str:
    from numasim.run_report import html_report

    _write(path, interruptible(html_report, record))
    return path


def _write(path: str, text: str) -> None:
    """``path`` written whole or not at all (a temporary file beside it, then a rename): Ctrl-C
    or a full disk never leaves half a file."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.numasim-tmp")
    try:
        with deferred_interrupt():
            tmp.write_text(text)
            tmp.replace(p)
    except OSError as e:  # named as the file asked for, not the temporary one
        raise InputError(f"{path}: cannot write: {e.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _writing(path: str | Path) -> Iterator[None]:
    """A failed write under ``path`` becomes one line naming the file (exit 2)."""
    try:
        yield
    except OSError as e:
        raise InputError(f"{e.filename or path}: cannot write: {e.strerror}") from None


def _progress():
    """A rich progress bar with ETA on a terminal's stderr; a line every few seconds elsewhere
    (numasim.progress)."""
    return progress_bar("runs")


def _count(n: int) -> str:
    """4 200 rather than 4200: the thousands grouped by a space."""
    return f"{n:,}".replace(",", " ")


def _import_report_modules() -> None:
    """What the tables and figures of an experiment import (about 1.5 s), imported while its
    workers run rather than after them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import pyarrow.parquet  # noqa: F401
    import scipy.special  # noqa: F401

    from numasim import app_report, comparison, report, reproduction, stats  # noqa: F401


def _ablation_notice(exp, asked: bool) -> str:
    """What the ablation adds to the runs asked for, said before anything runs: --report
    includes it without --ablate."""
    from numasim import reproduction

    asked_runs = len(exp.cells()) * len(exp.variants) * exp.replications
    flips = len(reproduction.plan(exp).flips)
    more = flips * asked_runs
    why = "--ablate" if asked else "--report includes the ablation (its page reports it), so it"
    return (
        f"{why} reruns the experiment once per flipped assumption or choice ({flips}): "
        f"up to {_count(more)} runs beside the {_count(asked_runs)} asked, "
        f"{_count(asked_runs + more)} in all (runs already stored, and the cells a choice "
        "leaves as they are, are reused)"
    )


def _profiles_notice(exp, profiles, asked: bool) -> str:
    """What the profile table adds to the runs asked for, said before anything runs."""
    asked_runs = len(exp.cells()) * len(exp.variants) * exp.replications
    names = ", ".join(c.label for c in profiles)
    why = "--profiles" if asked else "--report"
    return (
        f"{why} also runs the experiment under each profile it compares with the published "
        f"result ({names}): up to {_count(len(profiles) * asked_runs)} runs, the ones already "
        "stored (this run's own setting among them) reused"
    )


def _run_experiment(exp, out: str | None, jobs, cluster, confidence, as_json: bool,
                    fresh: bool, ablate: bool = False, report_file: str | None = None,
                    profiles_asked: bool = False) -> None:  # fmt: skip
    from numasim import app_report, comparison, profile_table, report, reproduction, stats
    from numasim import experiment as ex

    out_dir = Path(out) if out else Path("numasim-results") / file_part(exp.name)
    # --fresh moves an old store into previous-STAMP/: found afterwards, to say where it went.
    earlier = set(out_dir.glob("previous-*")) if fresh else set()
    confidence = confidence or exp.confidence
    if report_file:
        _check_writable(report_file, "--report")  # before the sweep, not after it
    if ablate or report_file:
        click.echo(_ablation_notice(exp, ablate), err=True)
    profiles = (profile_table.profile_columns(exp) if report_file or profiles_asked
                else [])  # fmt: skip
    if profiles_asked and not profiles:
        click.echo(f"--profiles: {exp.name} publishes no table, average or claim to compare "
                   "with: no profile table", err=True)  # fmt: skip
    if profiles:
        click.echo(_profiles_notice(exp, profiles, profiles_asked), err=True)
    with _progress() as bar:
        task = bar.add_task(exp.name, total=None)

        def on_progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        preload = threading.Thread(target=_import_report_modules, daemon=True)
        outcome = ex.execute(exp, out_dir, jobs=jobs, cluster=cluster, on_progress=on_progress,
                             fresh=fresh, while_running=preload.start)  # fmt: skip
    if preload.is_alive():
        preload.join()  # before anything forks (the figures): no import is left half done
    if outcome.computed == 0:
        reuse = f"resumed {_count(outcome.total)} of {_count(outcome.total)} runs from {out_dir}"
    else:
        reuse = (f"computed {_count(outcome.computed)}, reused {_count(outcome.reused)} "
                 f"of {_count(outcome.total)} runs (store {outcome.store})")  # fmt: skip
    if fresh:
        moved = sorted(set(out_dir.glob("previous-*")) - earlier)
        reuse += (f"; --fresh moved the runs stored before into {moved[-1]}" if moved
                  else "; --fresh: no runs were stored there before")  # fmt: skip
    runs = outcome.runs
    summary = stats.summarize(runs, confidence, exp.metric)
    gains = stats.gains(runs, exp, confidence, exp.metric)
    # Workloads with applications: per-application results (None for every other experiment,
    # and for an x axis, whose report compares the policies along it: comparison.py).
    apps = None if exp.has_x else app_report.compute(exp, runs, outcome.apps, confidence)
    ref_gains = apps.average if apps is not None else None
    versus = comparison.compute(exp, runs, confidence) if exp.has_x else None
    # Further metrics (the file's `metrics`), and what an experiment that publishes nothing
    # shows: tables and findings beside the main table.
    more = (report.metrics_frames(exp, runs, confidence) if exp.metrics and versus is None
            else None)  # fmt: skip
    shows = None
    if versus is None and exp.reference is None and not exp.claims:
        from numasim import findings

        frames = [(exp.metric, summary, gains)]
        if more is not None:
            frames += [(m, more[0][more[0].metric == m], more[1][more[1].metric == m])
                       for m in exp.metrics]  # fmt: skip
        shows = findings.text(exp, frames, confidence)
    with _writing(out_dir):
        # The figures are drawn in processes of their own while the tables are written.
        tasks = (comparison.figure_tasks(out_dir, exp, versus) if versus is not None
                 else report.figure_tasks(out_dir, exp, summary, gains))  # fmt: skip
        app_tasks = app_report.figure_tasks(out_dir, exp, apps) if apps is not None else []
        with report.FigureDrawing(tasks + app_tasks, jobs or os.cpu_count() or 1) as drawing:
            files = report.write_tables(out_dir, runs, summary, gains)
            if versus is not None:
                files += comparison.write_tables(out_dir, exp, versus)
                if not outcome.apps.empty:
                    files += report.write_frames(out_dir, [("apps", outcome.apps)])
            if apps is not None:
                files += app_report.write_tables(out_dir, apps)
            if more is not None:
                files += report.write_frames(out_dir, [("metrics_summary", more[0]),
                                                       ("metrics_gains", more[1])])  # fmt: skip
            done = drawing.result()
        figures = [p for paths in done[: len(tasks)] for p in paths]
        if versus is not None:
            versus.figures += figures
            figures = versus.figures  # one list, as the comparison's page and this text read it
        if apps is not None:
            figures += app_report.record(apps, done[len(tasks) :])
    ablation, ablation_files = None, []
    if ablate or report_file:
        with _progress() as bar:

            def flip_progress(label: str):
                task = bar.add_task(f"{exp.name} {label}", total=None)
                return lambda done, total: bar.update(task, completed=done, total=total)

            # Never --fresh here: the flips share the directory with the runs just made.
            ablation = reproduction.ablate(exp, out_dir, runs, confidence, jobs=jobs,
                                           cluster=cluster, on_progress=flip_progress)  # fmt: skip
        with _writing(out_dir):
            ablation_files = reproduction.write_ablation(out_dir, exp, ablation)
    if profiles:
        with _progress() as bar:

            def profile_progress(label: str):
                task = bar.add_task(f"{exp.name} under {label}", total=None)
                return lambda done, total: bar.update(task, completed=done, total=total)

            profile_table.run_profiles(profiles, out_dir, confidence, jobs=jobs,
                                       cluster=cluster, on_progress=profile_progress)  # fmt: skip
    if report_file and versus is not None:
        _write(report_file, comparison.html_page(exp, versus, confidence, ablation, profiles))
    elif report_file:
        page = reproduction.html_page(exp, summary, gains, confidence,
                                      [f for f in figures if apps is None or f not in apps.figures],
                                      ablation, ablation_files, apps, profiles, shows,
                                      report.metrics_text(exp, *more, confidence)
                                      if more is not None else "")  # fmt: skip
        _write(report_file, page)
    if as_json:
        rows = report.json_rows(exp, gains)
        if apps is not None:
            rows.update(app_report.json_rows(apps))
        if versus is not None:
            rows.update(comparison.json_rows(exp, versus))
        if ablation is not None:
            rows["ablation"] = reproduction.json_rows(ablation)
        if profiles:
            rows.update(profile_table.json_rows(exp, profiles))
        if more is not None:
            rows["metrics"] = report.records(more[1])
        click.echo(json.dumps(rows))
        click.echo(reuse, err=True)
        return
    if versus is not None:
        click.echo(comparison.text(exp, versus))
    else:
        click.echo(report.table_text(exp, summary, gains, confidence, runs, ref_gains))
    if more is not None:
        click.echo()
        click.echo(report.metrics_text(exp, *more, confidence))
    if shows is not None:
        click.echo()
        click.echo("\n".join(shows))
    if apps is not None:
        click.echo()
        click.echo(app_report.text(exp, apps))
    if ablation is not None:
        click.echo()
        click.echo(comparison.ablation_text(exp, ablation, confidence) if versus is not None
                   else reproduction.table_text(exp, ablation))  # fmt: skip
    if profiles:
        click.echo()
        click.echo(profile_table.text(exp, profiles))
    click.echo()
    click.echo(reuse)
    if ablation is not None:
        click.echo(f"ablation: computed {_count(ablation.computed)}, reused "
                   f"{_count(ablation.reused)} runs with one assumption flipped")  # fmt: skip
    files += [p for p in ablation_files if p.suffix == ".csv"]
    figures += ablation_files
    click.echo(f"results: {', '.join(str(p) for p in files)}")
    click.echo(f"figures: {', '.join(str(p) for p in figures if p.suffix == '.png')}")
    click.echo(f"         (and SVG beside each PNG in {out_dir / 'figures'})")
    if report_file:
        click.echo(f"report: {report_file}")


def _check_writable(path: str, option: str) -> None:
    """``path`` can be written: its directory exists and takes a file (tried, not guessed from
    permissions, which say nothing for root or read-only mounts)."""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option}: {path} is a directory; give a file name such as report.html")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{option}: {path}: the directory {parent} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".numasim-", suffix=".tmp"):
            pass
    except OSError as e:
        raise InputError(f"{option}: {path}: cannot write into {parent}: {e.strerror}") from None


_common_experiment_options = [
    click.option(
        "--replications",
        type=int,
        default=None,
        help="Replications per cell (default: the experiment file's; compare: 30).",
    ),
    click.option(
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        help="Local worker processes (default: every core).",
    ),
    click.option(
        "--cluster",
        default=None,
        help="Run on a Dask cluster: its scheduler address, e.g. tcp://10.0.0.5:8786 "
        "(pip install 'numasim[cluster]').",
    ),
    click.option(
        "--confidence",
        type=float,
        default=None,
        help="Confidence of the intervals, e.g. 0.95 or 0.99 (default: the file's, or 0.95).",
    ),
    click.option(
        "--out",
        default=None,
        help="Results directory (default numasim-results/NAME). Runs already stored there for "
        "exactly this machine, workload, seed, policy and numasim build are reused.",
    ),
    click.option(
        "--fresh",
        is_flag=True,
        help="Start over: move the directory's stored runs aside (into previous-STAMP/).",
    ),
    click.option(
        "--assume",
        default=None,
        help="Modelling assumptions: one profile (kernel26, faithful to the Linux 2.6.18 "
        "kernel, or paper) and/or NAME=VALUE items; the profile is applied first wherever it "
        "stands, then the items (numasim list assumptions). Default: the experiment's profile "
        "(compare: kernel26).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON."),
]


def _experiment_options(f):
    for option in reversed(_common_experiment_options):
        f = option(f)
    return f


def _check_common(replications: int | None, confidence: float | None) -> None:
    if replications is not None and replications <= 0:
        raise click.UsageError(f"--replications must be at least 1, got {replications}")
    if confidence is not None and not 0.5 <= confidence < 1:
        raise click.UsageError(f"--confidence must be in [0.5, 1), got {confidence}")


@cli.command()
@click.argument("name")
@_experiment_options
@click.option("--ablate", is_flag=True,
              help="Also rerun with each modelling assumption flipped alone to the other "
              "profile's value and report the gain's change (ablation.csv, figures).")  # fmt: skip
@click.option("--report", "report_file", default=None, metavar="FILE.html",
              help="Write one self-contained HTML page: setup, assumptions and their sources, "
              "the published numbers beside numasim's under the paper, kernel26 and (if one "
              "exists) fitted profiles (run too), figures, the ablation (run too) and a "
              "reading of sign, trend and magnitude.")  # fmt: skip
@click.option("--profiles", "profiles_asked", is_flag=True,
              help="Also run under the paper, kernel26 and (if one exists) fitted profiles and "
              "print the published result beside each (table, average or claims) with a "
              "reading of sign, trend and magnitude (--report includes it).")  # fmt: skip
@click.option("--extra/--no-extra", default=None,
              help="Run the file's extra variants (every shipped reproduction: today's Linux, "
              "linux@linux with NUMA balancing off and on) beside the paper's baseline and "
              "policies. Default: run them where the file has some; --no-extra skips them; "
              "--extra refuses a file that has none.")  # fmt: skip
def reproduce(name, replications, jobs, cluster, confidence, out, fresh, assume, as_json,
              ablate, report_file, profiles_asked, extra) -> None:  # fmt: skip
    """Run a shipped experiment (numasim list experiments) or an experiment file, under its
    paper's modelling assumptions unless --assume says otherwise."""
    from numasim import experiment as ex

    _check_common(replications, confidence)
    exp = ex.load(name)
    if extra and not exp.extra:
        raise click.UsageError(f"--extra: {exp.name} has no extra variants")
    if extra is not False:
        exp.policies += exp.extra
    if replications:
        exp.replications = replications
        ex.check_budget(exp, "--replications")
    exp = _experiment_assume(exp, assume)
    _run_experiment(
        exp, out, jobs, cluster, confidence, as_json, fresh, ablate, report_file, profiles_asked
    )


@cli.command()
@click.argument("name")
@click.option("--replications", type=click.IntRange(min=2), default=10, show_default=True,
              help="Replications per cell and setting (common random numbers: the same seeds "
              "for every setting).")  # fmt: skip
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Objective evaluations per combination of the discrete assumptions.",
)
@click.option("--discrete", default=None,
              help="Assumptions to search (comma list; default memory,exec,cost; exec only "
              "with IO-bound processes).")  # fmt: skip
@click.option("--continuous", default=None,
              help="Continuous parameters (comma list of m, cost_scale, remote_scale; "
              "default all three, each where it acts).")  # fmt: skip
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: one per CPU).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for fitted-NAME.json (default numasim-results/NAME).",
)
@click.option("--assume", default=None,
              help="The starting setting whose unsearched assumptions stay (default: the "
              "experiment's profile).")  # fmt: skip
def fit(name, replications, budget, discrete, continuous, jobs, out, assume) -> None:
    """Fit the modelling assumptions and up to three continuous parameters to an
    experiment's published table (absolute turnarounds, baseline and policy); write the result
    as the inferred profile fitted:NAME, usable with --assume on any experiment."""
    from numasim import experiment as ex
    from numasim import fit as fitting
    from numasim.fit import profile
    from numasim.fit import report as fit_report

    exp = ex.load(name)
    exp.assume = _assume(assume)
    names = lambda t: None if t is None else [x.strip() for x in t.split(",") if x.strip()]  # noqa: E731
    space = fitting.build(exp, names(discrete), names(continuous))
    tgt = fitting.target(exp)
    out_dir = Path(out) if out else Path("numasim-results") / file_part(exp.name)
    click.echo(f"numasim: fitting {exp.name}: {len(space.combos())} combinations × up to "
               f"{budget} evaluations, {len(tgt.cells)} cells × 2 variants × {replications} "
               "replications each", err=True)  # fmt: skip
    with ex._executor(jobs or os.cpu_count() or 1, None) as pool:
        ev = fitting.Evaluator(exp, tgt, replications, executor=pool)
        result = fitting.fit(ev, space, budget)
    given = [("--discrete", discrete), ("--continuous", continuous), ("--assume", assume)]
    command = " ".join([f"numasim fit {name} --replications {replications} --budget {budget}",
                        *(f"{k} {v}" for k, v in given if v)])  # fmt: skip
    paths = profile.write(result, exp, command, out_dir)
    click.echo(fit_report.text(exp, result))
    click.echo(f"wrote {', '.join(str(p) for p in paths)}")


@cli.command()
@click.option("--machine", "machines", required=True, help="Preset or machine file (comma list).")
@click.option(
    "--workload",
    "workload",
    required=True,
    help="A generator spec with the process count, e.g. n=200,kind=io (docs/workloads.md), or a "
    "mix (a .toml mix file or a shipped mix's name, docs/apps.md).",
)
@click.option(
    "--policies",
    required=True,
    help="POLICY[@DOMAINS] entries, the baseline first: linux26@two-level,linux26@flat "
    "(options as in run --policy: origin-aware:v1=off@multilevel).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Master seed, 0 … 2^63 − 1 (as an experiment file's seed): each replication's workload "
    "seed derives from it. A single run's --seed takes 0 … 2^64 − 1.",
)
@_experiment_options
def compare(machines, workload, policies, seed, replications, jobs, cluster, confidence, out,
            fresh, assume, as_json) -> None:  # fmt: skip
    """Compare policies on one workload with paired replications (the first is the baseline)."""
    from numasim import experiment as ex
    from numasim.apps import MIX_SUFFIX, Mix, is_mix_name

    _check_common(replications, confidence)
    if Path(workload).suffix.lower() == MIX_SUFFIX or is_mix_name(workload):
        # A mix is a spec: its n (rounds of its list, default 1) is the one n compared.
        workload = Mix.resolve(workload).spec
        if not any(p.startswith("n=") for p in workload.split(",")):
            workload += ",n=1"
    elif Path(workload).suffix.lower() in {".csv", ".json"} or Path(workload).is_file():
        raise click.UsageError(
            f"--workload: '{workload}' is a file; compare generates its replications from a "
            "spec such as n=200,kind=cpu (run a workload file with `numasim run --workload FILE`)"
        )
    for option, text in (
        ("--machine", machines),
        ("--workload", workload),
        ("--policies", policies),
    ):
        if re.search(r"(^|,)\s*(,|$)", text):
            raise click.UsageError(f"{option}: '{text}' has an empty entry (a comma too many)")
    machine_list = [m.strip() for m in machines.split(",")]
    twice = sorted({m for m in machine_list if machine_list.count(m) > 1})
    if twice:
        raise click.UsageError(f"--machine: {', '.join(twice)} named more than once")
    parts = [p.strip() for p in workload.split(",")]
    ns = [p for p in parts if p.startswith("n=")]
    if len(ns) != 1:
        raise click.UsageError("--workload must give the process count once, e.g. n=200,kind=cpu")
    try:
        n = int(ns[0][2:])
    except ValueError:
        raise click.UsageError(f"--workload: '{ns[0]}' is not a process count") from None
    # Commas separate variants and a policy's options: a variant starts with a name followed
    # by '@', ':', ',' or the end ("origin-aware:v1=off,v2=off@multilevel,linux26").
    variants = [p.strip() for p in re.split(r",(?=[\w-]+(?:[@:,]|$))", policies)]
    if len(variants) < 2:
        raise click.UsageError("--policies needs a baseline and at least one policy")
    exp = ex.from_dict(
        {"name": "compare", "machines": machine_list,
         "workload": [{"name": "w", "spec": ",".join(p for p in parts if not p.startswith("n="))}],
         "sweep": {"n": [n]}, "baseline": variants[0], "policies": variants[1:],
         "replications": 1, "confidence": confidence or 0.95, "seed": seed},
        ex.COMPARE,
    )  # fmt: skip
    exp.replications = replications or 30
    ex.check_budget(exp, "--replications")
    exp = _experiment_assume(exp, assume)
    _run_experiment(exp, out, jobs, cluster, confidence, as_json, fresh)


@cli.command(name="check-policy")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--class", "class_name", default=None, help="Check only this class of FILE.")
@click.option("--machine", default="numa-4x8", show_default=True, help="Machine of the run.")
@click.option("--workload", default="n=200,kind=mixed,exec=100,arrival=random",
              show_default=True, help="Workload spec of the run.")  # fmt: skip
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=1, show_default=True)
def check_policy(file: str, class_name: str | None, machine: str, workload: str,
                 seed: int) -> None:  # fmt: skip
    """Check that a Python policy gives one result per seed: each class of FILE runs one
    scenario twice, in fresh interpreters with different string-hash seeds, and the two results
    must be the same bit for bit (exit 1 if they differ)."""
    from numasim.policy.check import check, classes_in

    names = [class_name] if class_name else classes_in(Path(file))
    if not names:
        raise _core.InputError(f"{file}: defines no subclass of numasim.policy.Policy")
    differ = 0
    for name in names:
        verdict = check(f"py:{file}:{name}", machine, workload, seed)
        if verdict.same:
            click.echo(f"{name}: same result under two hash seeds ({verdict.digests[0][:16]})")
        else:
            differ += 1
            digests = ", ".join(d[:16] for d in verdict.digests)
            click.echo(f"{name}: results differ between two interpreters ({digests}): look for "
                       "set or dict order of strings, time.time(), the random module, module "
                       "globals")  # fmt: skip
    if differ:
        raise click.exceptions.Exit(1)


@cli.group(name="list")
def list_() -> None:
    """List what numasim ships."""


def _echo_listing(rows: list[tuple[str, str, str]]) -> None:
    """Name and a one-line description, then an indented second line (source or reference)."""
    width = max(len(name) for name, _, _ in rows)
    for name, first, second in rows:
        click.echo(f"{name:<{width}}  {first}")
        click.echo(f"{'':<{width}}  {second}")


@list_.command(name="machines")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_machines(as_json: bool) -> None:
    """Preset machines, with a one-line description and source."""
    items = presets()
    if as_json:
        click.echo(
            json.dumps(
                [{"name": p.name, "description": p.description, "source": p.source} for p in items]
            )
        )
        return
    _echo_listing([(p.name, p.description, f"source: {p.source}") for p in items])


@list_.command(name="policies")
def list_policies() -> None:
    """Balancing policies, with a one-line description, reference and default domains."""
    _echo_listing(
        [(name, f"{description} (default domains: {domains})", f"reference: {reference}")
         for name, description, reference, domains in policies()]
    )  # fmt: skip


@list_.command(name="examples")
def list_examples() -> None:
    """Example policies written in Python (docs/writing-a-policy.md): each file, its idea and
    the setting that names its class, with the file's path in this installation."""
    import ast

    from numasim.machine import data_dir

    rows = []
    for path in sorted(data_dir("policies").glob("*.py")):
        tree = ast.parse(path.read_text())
        idea = (ast.get_docstring(tree) or "").split("\n", 1)[0]
        for cls in (n.name for n in tree.body if isinstance(n, ast.ClassDef)):
            rows.append((path.name, idea, f"--policy py:{path}:{cls}"))
    _echo_listing(rows)


@list_.command(name="experiments")
def list_experiments() -> None:
    """Experiments shipped with numasim (numasim reproduce NAME)."""
    from numasim.experiment import list_experiments as items

    _echo_listing([(e.name, e.title, f"source: {e.source}") for e in items()])


@list_.command(name="apps")
@click.option("--sources", "sources", default=None, metavar="NAME",
              help="Print each field of application NAME with its value and source.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the profiles as JSON.")
def list_apps(sources: str | None, as_json: bool) -> None:
    """Application profiles (PARSEC-like) for app=NAME:T workloads and mix files."""
    from numasim import apps

    if sources is not None and as_json:
        click.echo(json.dumps(apps.profile(sources)))
    elif sources is not None:
        click.echo(apps.sources_text(sources))
    elif as_json:
        click.echo(json.dumps(apps.registry()))
    else:
        click.echo(apps.listing())
        mixes = apps.shipped_mixes()
        if mixes:
            click.echo(f"mixes (--workload NAME or a .toml mix file): {', '.join(mixes)}")


@list_.command(name="assumptions")
def list_assumptions() -> None:
    """Modelling assumptions: each one's values, the profiles' values and their sources; then
    the open choices the ablation tries."""
    from numasim import choices

    click.echo(assumptions_listing())
    click.echo("")
    click.echo(choices.listing())


@list_.command(name="builders")
def list_builders() -> None:
    """Scheduling-domain builders, with a one-line description and reference."""
    _echo_listing([(name, desc, f"reference: {ref}") for name, desc, ref in builders()])


cli.add_command(kernel_run)
cli.add_command(validate)
cli.add_command(import_trace_command)
cli.add_command(export_rtapp)
cli.add_command(replay_command)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the CLI and turns every input error into exit code 2 and one line,
    Ctrl-C and SIGTERM into one line and exit code 130."""
    stop_on_sigterm()
    die_with_command()  # started by another numasim command (bench): end with it
    try:
        # Not cli.main: on Ctrl-C it prints an empty line before its own exception.
        with cli.make_context("numasim", list(sys.argv[1:] if argv is None else argv)) as ctx:
            cli.invoke(ctx)
    except click.exceptions.Exit as e:
        return e.exit_code
    except BrokenPipeError:
        # The reader of our output is gone (`numasim list … | head`): nothing more to say, and
        # Python's flush of stdout at exit must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (click.Abort, KeyboardInterrupt):
        click.echo("numasim: interrupted", err=True)
        exit_now(EXIT_INTERRUPTED)  # a call of the core left running (topology, trace)
        return EXIT_INTERRUPTED
    except Interrupted as e:
        click.echo(
            f"interrupted: {_count(e.saved)} of {_count(e.total)} runs saved in {e.out}; "
            "run the same command to resume",
            err=True,
        )
        exit_now(EXIT_INTERRUPTED)  # a stopped pool's thread that did not end
        return EXIT_INTERRUPTED
    except click.UsageError as e:
        message = " ".join(e.format_message().split())
        click.echo(f"numasim: error: {message}", err=True)
        return EXIT_BAD_INPUT
    except _core.PolicyError as e:
        if e.__cause__ is not None:
            # The policy's own code raised: its traceback is the useful message.
            from numasim.policy.errors import user_traceback

            click.echo(user_traceback(e.__cause__), err=True, nl=False)
        click.echo(f"numasim: error: {' '.join(str(e).split())}", err=True)
        return EXIT_BAD_INPUT
    except _core.InputError as e:
        click.echo(f"numasim: error: {' '.join(str(e).split())}", err=True)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
