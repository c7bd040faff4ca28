"""The ``numasim import-trace`` command (registered by numasim.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import click


def _pids(text: str | None) -> set[int] | None:
    from numasim._core import InputError
    from numasim.kernel.parse import parse_cpulist

    if text is None:
        return None
    try:
        return set(parse_cpulist(text))
    except ValueError:
        raise InputError(f"--pids: {text!r} is not a list of pids (like 256-263,300)") from None


def _reading(command):
    """The options both import-trace and replay take: which threads of the trace, read how."""
    options = [
        click.option("--pids", default=None,
                     help="Only these traced pids (a list like 256-263,300)."),
        click.option("--comm", default=None,
                     help="Only threads whose name matches this regex."),
        click.option("--trace-processor", "trace_processor", default=None, metavar="PATH",
                     help="A trace_processor_shell binary, to read a Perfetto trace (numasim "
                     "never downloads one)."),
        click.option("--closed-loop", is_flag=True,
                     help="Replay each sleep woken by a replayed thread as a wait for that "
                     "thread (perf sched replay's model) instead of a timed block."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


@click.command(name="import-trace")
@click.argument("trace_path", metavar="TRACE")
@click.option("--out", "-o", default=None,
              help="Write the workload here (.json or .csv), for run --workload FILE.")  # fmt: skip
@click.option("--machine", "machine_spec", default=None,
              help="Preset or machine file of the traced machine (default: the numactl "
              "--hardware or sysfs capture beside the trace).")  # fmt: skip
@_reading
@click.option("--keep-kernel", is_flag=True,
              help="Keep per-CPU kernel threads (pinned to their CPU).")  # fmt: skip
@click.option("--mem", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Memory intensity of every process (the trace cannot tell it).")  # fmt: skip
@click.option("--seed", type=click.IntRange(0, (1 << 63) - 1), default=0, show_default=True,
              help="Seed of the processes' burst and wait draws.")  # fmt: skip
@click.option("--events", "events_dir", default=None,
              help="Also save the real schedule as numasim's run events in this directory, as "
              "run --out saves a run (numasim trace DIR --report FILE reads it).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the import's summary as JSON.")
def import_trace_command(
    trace_path: str,
    out: str | None,
    events_dir: str | None,
    machine_spec: str | None,
    pids: str | None,
    comm: str | None,
    keep_kernel: bool,
    mem: float,
    seed: int,
    closed_loop: bool,
    trace_processor: str | None,
    as_json: bool,
) -> None:
    """Turn a scheduler trace into a workload: one process per traced thread, with the CPU
    time, bursts, sleeps, arrival and spawn CPU the trace shows (docs/workloads.md, "Replaying
    a real trace"). TRACE is ftrace text (tracefs's trace file, trace-cmd report), perf script
    output of perf sched record, gzip or not, a directory holding one, a real-kernel run's
    boot-N.raw.tar.gz, a Perfetto trace (with --trace-processor), or an rt-app JSON
    description."""
    from numasim import _core, replay
    from numasim._core import InputError
    from numasim.sim import Workload

    files = replay.read(trace_path, trace_processor)
    if out is not None and Path(out).suffix.lower() not in (".json", ".csv"):
        raise InputError(f"{out}: a workload file must end in .csv or .json")
    if files.text.lstrip().startswith("{"):  # an rt-app description
        if events_dir is not None:
            raise InputError(f"{files.origin}: an rt-app description has no schedule: "
                             "--events needs a trace")  # fmt: skip
        _import_rtapp(files, out, seed)
        return
    machine = _machine(files, machine_spec)
    _, imported = replay.import_trace(
        files, machine, pids=_pids(pids), comm=comm, keep_kernel=keep_kernel, mem=mem, seed=seed,
        closed_loop=closed_loop,
    )  # fmt: skip
    workload = Workload(_core.Workload.from_json(json.dumps(imported.workload), files.origin))
    if out is not None:
        workload.save(out)
    if events_dir is not None:
        from numasim.replay import events

        events.save(imported, machine, workload, _label(trace_path, pids, comm), seed,
                    events_dir)  # fmt: skip
    summary = _summary(imported, machine)
    if as_json:
        click.echo(json.dumps(summary, indent=1))
        return
    procs = imported.workload["processes"]
    io = sum(p["kind"] == "io" for p in procs)
    click.echo(
        f"{files.origin}: {len(procs)} processes ({io} io, {len(procs) - io} cpu) on "
        f"{machine.name or 'the machine'} ({machine.cpus} CPUs)"
        + (f", written to {out}" if out else "")
        + (f"; the real schedule saved as run events in {events_dir}" if events_dir else "")
    )
    left = summary["left_out"]
    click.echo(
        f"left out: {left['per_cpu_kernel_threads']} per-CPU kernel threads, "
        f"{left['not_selected']} not selected, {left['never_ran']} that never ran"
    )
    if imported.alive_at_start:
        click.echo(
            f"{len(imported.alive_at_start)} alive when the trace began: they arrive at its start"
        )
    if imported.alive_at_end:
        click.echo(
            f"{len(imported.alive_at_end)} alive when it ended: their demand is the CPU time traced"
        )
    if imported.closed is not None:
        click.echo(_closed_line(imported.closed))
    for note in imported.notes:
        click.echo(f"note: {note}")


def _label(trace_path: str, pids: str | None, comm: str | None) -> str:
    """What a saved real schedule names as its workload: the trace and the selection."""
    chosen = [f"--pids {pids}" if pids else "", f"--comm {comm}" if comm else ""]
    return " ".join([f"trace {Path(trace_path).name}", *filter(None, chosen)])


def _closed_line(closed) -> str:
    timed = sum(closed.timed.values())
    why = "; ".join(f"{n} {reason}" for reason, n in sorted(closed.timed.items()))
    return f"closed loop: {closed.waits} sleeps wait for their waker, {timed} stay timed blocks" + (
        f" ({why})" if why else ""
    )


def _import_rtapp(files, out: str | None, seed: int) -> None:
    from numasim import _core
    from numasim._core import InputError
    from numasim.replay import rtapp
    from numasim.sim import Workload

    try:
        data = json.loads(files.text)
    except json.JSONDecodeError as e:
        raise InputError(f"{files.origin}: line {e.lineno}: not JSON: {e.msg}") from None
    text = json.dumps(rtapp.load(data, files.origin, seed))
    workload = Workload(_core.Workload.from_json(text, files.origin))
    if out is not None:
        workload.save(out)
    click.echo(
        f"{files.origin}: {len(workload)} processes from rt-app tasks"
        + (f", written to {out}" if out else "")
    )


def _machine(files, machine_spec: str | None):
    from numasim._core import InputError
    from numasim.kernel.runner import check_nodes
    from numasim.machine import Machine
    from numasim.replay import SYSFS_NAME, machine_beside

    if machine_spec is None:
        machine = machine_beside(files)
        if machine is None:
            raise InputError(
                f"{files.origin}: no machine: give --machine, or put numactl --hardware "
                "output (numactl.txt) beside the trace"
            )
        return machine
    machine = Machine.load(machine_spec)
    if SYSFS_NAME in files.beside:  # the traced kernel's view: the same machine, or one line
        check_nodes(files.beside[SYSFS_NAME], machine, files.origin)
    return machine


def _summary(imported, machine) -> dict:
    return {
        "machine": machine.name,
        "processes": imported.mapping(),
        "left_out": {
            "per_cpu_kernel_threads": len(imported.dropped_kernel),
            "not_selected": imported.not_selected,
            "never_ran": len(imported.never_ran),
        },
        "alive_at_start": [t.pid for t in imported.alive_at_start],
        "alive_at_end": [t.pid for t in imported.alive_at_end],
        "notes": imported.notes,
        **_closed_json(imported),
    }


def _closed_json(imported) -> dict:
    """The closed loop's counts for --json (nothing under open loop)."""
    if imported.closed is None:
        return {}
    return {"closed_loop": {"waits": imported.closed.waits, "timed": dict(imported.closed.timed)}}


@click.command(name="export-rtapp")
@click.option("--machine", "machine_spec", required=True, help="Preset or machine file.")
@click.option("--workload", "workload_spec", required=True,
              help="Spec (n=20,kind=io,…) or workload file (.csv/.json).")  # fmt: skip
@click.option("--seed", type=click.IntRange(0, (1 << 63) - 1), default=0, show_default=True,
              help="Seed of a generated workload.")  # fmt: skip
@click.option("--out", "-o", required=True, help="The rt-app JSON file to write.")
def export_rtapp(machine_spec: str, workload_spec: str, seed: int, out: str) -> None:
    """Write a workload as an rt-app description (docs/workloads.md, "rt-app"): one task per
    process; numasim import-trace reads it back as the same workload."""
    from numasim.machine import Machine
    from numasim.replay import rtapp
    from numasim.sim import Workload

    machine = Machine.load(machine_spec)
    workload = Workload.resolve(machine, workload_spec, seed)
    data = rtapp.export(json.loads(workload._core.to_json()), workload_spec)
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    click.echo(f"{out}: {len(data['tasks'])} rt-app tasks")


@click.command(name="replay")
@click.argument("trace_path", metavar="TRACE")
@click.option("--machine", "machine_spec", default=None,
              help="Preset or machine file to replay on (default: the traced machine, from "
              "the capture beside the trace).")  # fmt: skip
@click.option("--policy", default="linux", show_default=True, help="Policy of the replay.")
@_reading
@click.option("--keep-kernel", is_flag=True, help="Keep per-CPU kernel threads (pinned).")
@click.option("--mem", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Memory intensity of every process.")  # fmt: skip
@click.option("--seed", type=click.IntRange(0, (1 << 63) - 1), default=0, show_default=True,
              help="Seed of the replay.")  # fmt: skip
@click.option("--assume", default=None,
              help="Modelling assumptions of the replay (numasim list assumptions).")  # fmt: skip
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95,
              show_default=True, help="Level of the paired differences' intervals.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--report", "report_file", default=None,
              help="Also write both schedules and their differences as an HTML page.")  # fmt: skip
@click.option("--events", "events_dir", default=None,
              help="Also save both schedules as numasim's run events: DIR/real and "
              "DIR/simulated, as run --out saves a run (numasim trace reads each).")  # fmt: skip
def replay_command(
    trace_path: str,
    machine_spec: str | None,
    policy: str,
    pids: str | None,
    comm: str | None,
    keep_kernel: bool,
    mem: float,
    seed: int,
    assume: str | None,
    closed_loop: bool,
    trace_processor: str | None,
    confidence: float,
    as_json: bool,
    report_file: str | None,
    events_dir: str | None,
) -> None:
    """Replay a trace's threads under a policy and put the simulated schedule beside the real
    one, task by task: run time, waiting, delay per wake-up, turnaround, migrations by kind,
    distance and domain level, CPU time per node; paired differences with intervals and
    distribution distances of waiting times and wake-up delays (docs/workloads.md, "Replaying
    a real trace")."""
    from numasim import _core, replay
    from numasim.machine import Machine
    from numasim.replay import compare, events
    from numasim.sim import Workload, default_domains, simulate

    if assume is not None:
        from numasim.assumptions import resolve

        resolve(assume, "--assume")  # its errors name the option
    files = replay.read(trace_path, trace_processor)
    if report_file is not None:
        from numasim.cli import _check_writable

        _check_writable(report_file, "--report")
    if events_dir is not None:  # refused before the replay runs, not after
        from numasim.cli import _check_out_dir

        _check_out_dir(Path(events_dir))
    traced = _machine(files, None) if machine_spec is None else replay.machine_beside(files)
    machine = Machine.load(machine_spec) if machine_spec is not None else traced
    sched, imported = replay.import_trace(
        files, traced or machine, pids=_pids(pids), comm=comm, keep_kernel=keep_kernel,
        mem=mem, seed=seed, closed_loop=closed_loop,
    )  # fmt: skip
    workload = Workload(_core.Workload.from_json(json.dumps(imported.workload), files.origin))
    result = simulate(machine, workload, policy, seed=seed, trace=True, assume=assume)
    real = compare.real_tasks(sched, imported, traced or machine)
    sim = compare.sim_tasks(result.raw, machine)
    summary = compare.compare(real, sim, confidence)
    pids_traced = [t.pid for t in imported.threads]
    if report_file is not None:
        from numasim.replay import page

        title = f"{Path(trace_path).name} · {policy} on {machine.name} · {len(real)} tasks"
        sub = f"traced on {(traced or machine).name}; replay seed {seed}"
        real_spans, sim_spans = page.spans(imported, traced or machine, result.raw, machine)
        real_raw = events.real_run(imported, traced or machine)
        Path(report_file).write_text(
            page.html_page(title, sub, summary, real, sim, pids_traced, real_spans, sim_spans,
                           real_raw, result.raw)
        )  # fmt: skip
    if events_dir is not None:
        from numasim.cli import _save_run
        from numasim.saved import RunRecord

        label = _label(trace_path, pids, comm)
        events.save(imported, traced or machine, workload, label, seed,
                    Path(events_dir) / "real")  # fmt: skip
        domains = default_domains(policy, "--policy")
        record = RunRecord.of(machine, policy, domains, label, seed, result)
        _save_run(record, result, workload, Path(events_dir) / "simulated")
    if as_json:
        out = {"policy": policy, "machine": machine.name, "traced_pids": pids_traced, **summary,
               **_closed_json(imported), "real": real, "sim": sim}  # fmt: skip
        click.echo(json.dumps(out, indent=1))
        return
    click.echo(
        f"{files.origin}: {len(real)} tasks replayed under {policy} on "
        f"{machine.name or 'the machine'} (seed {seed})"
    )
    if imported.closed is not None:
        click.echo(_closed_line(imported.closed))
    click.echo(compare.text(summary, real, sim, pids_traced))
    if events_dir is not None:
        click.echo(f"both schedules saved as run events in {events_dir}/real and "
                   f"{events_dir}/simulated (numasim trace DIR --report FILE)")  # fmt: skip
