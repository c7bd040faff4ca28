"""The ``numasim`` command line.

Bad input of any kind ends with exit code 2 and one line on stderr naming the file, the place
and the problem; warnings go to stderr and do not stop the command.
"""

from __future__ import annotations

import json
import sys

import click

from numasim import _core
from numasim.machine import Machine, builders, presets
from numasim.render import domains_text, machine_text, summary_text
from numasim.sim import Workload, default_domains, policies, simulate

EXIT_BAD_INPUT = 2


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
    default="linux",
    show_default=True,
    help="Domain builder: " + ", ".join(b[0] for b in _core.builders()) + ".",
)
@click.option(
    "--cpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="CPUs per node, for a plain distance-table file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (SPEC §2 shape).")
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
    domains = m.domains(builder)
    if as_json:
        click.echo(json.dumps({"machine": m.info, "domains": domains}))
        return
    description = next(b[1] for b in builders() if b[0] == builder)
    click.echo(machine_text(m))
    click.echo()
    click.echo(domains_text(m, domains, m.domain_details(builder), description))


@cli.command()
@click.option("--machine", "machine_spec", required=True, help="Preset, machine file or 'host'.")
@click.option(
    "--workload",
    "workload_spec",
    required=True,
    help="A spec (n=300,kind=cpu,exec=200,arrival=random) or a .csv/.json workload file.",
)
@click.option("--policy", default="linux26", show_default=True, help="Balancing policy.")
@click.option("--domains", "builder", default=None, help="Domain builder (default: the policy's).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--cpus-per-node", type=click.IntRange(min=1), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Write CSV/JSON here.")
def run(
    machine_spec: str,
    workload_spec: str,
    policy: str,
    builder: str | None,
    seed: int,
    cpus_per_node: int | None,
    as_json: bool,
    out: str | None,
) -> None:
    """Simulate one run and print its summary."""
    m = Machine.load(machine_spec, cpus_per_node)
    _warn(m)
    builder = builder or default_domains(policy)
    workload = Workload.resolve(m, workload_spec, seed)
    result = simulate(m, workload, policy=policy, domains=builder)
    if out:
        from pathlib import Path

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        result.processes.to_csv(d / "processes.csv", index=False)
        (d / "summary.json").write_text(json.dumps(result.raw_summary, indent=1) + "\n")
        workload.save(d / "workload.csv")
    if as_json:
        click.echo(json.dumps(result.raw_summary))
    else:
        click.echo(summary_text(m.name, policy, builder, result))
        if out:
            click.echo(f"wrote {out}/processes.csv, {out}/summary.json, {out}/workload.csv")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--only", default=None, help="Comma-separated scenario names (default: all).")
def bench(as_json: bool, only: str | None) -> None:
    """Run the fixed benchmark scenarios: wall time, events, events/s, peak memory."""
    from numasim.bench import run_all, scenarios

    names = only.split(",") if only else None
    known = {s["name"] for s in scenarios()}
    if names and not set(names) <= known:
        unknown = ", ".join(sorted(set(names) - known))
        raise click.UsageError(f"unknown scenario {unknown}; known: {', '.join(sorted(known))}")
    results = run_all(names)
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


@cli.group(name="list")
def list_() -> None:
    """List what numasim ships."""


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
    width = max(len(p.name) for p in items)
    for p in items:
        click.echo(f"{p.name:<{width}}  {p.description}")
        click.echo(f"{'':<{width}}  source: {p.source}")


@list_.command(name="policies")
def list_policies() -> None:
    """Balancing policies, with a one-line description, reference and default domains."""
    items = policies()
    width = max(len(p[0]) for p in items)
    for name, description, reference, domains in items:
        click.echo(f"{name:<{width}}  {description} (default domains: {domains})")
        click.echo(f"{'':<{width}}  reference: {reference}")


@list_.command(name="builders")
def list_builders() -> None:
    """Scheduling-domain builders, with a one-line description and reference."""
    items = builders()
    width = max(len(name) for name, _, _ in items)
    for name, description, reference in items:
        click.echo(f"{name:<{width}}  {description}")
        click.echo(f"{'':<{width}}  reference: {reference}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the CLI and turns every input error into exit code 2 and one line."""
    try:
        cli.main(args=argv, prog_name="numasim", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("numasim: aborted", err=True)
        return 130
    except click.UsageError as e:
        message = " ".join(e.format_message().split())
        click.echo(f"numasim: error: {message}", err=True)
        return EXIT_BAD_INPUT
    except _core.InputError as e:
        click.echo(f"numasim: error: {' '.join(str(e).split())}", err=True)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
