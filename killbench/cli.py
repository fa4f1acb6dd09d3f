"""The command line: parse arguments, call the library, print, exit with a documented code."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from . import __version__
from .errors import ExitCode, KillbenchError


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="killbench: %(message)s", stream=sys.stderr)


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KillbenchError as exc:
            click.echo(f"killbench: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.echo("killbench: interrupted; results so far are in the journal, "
                       "run the same command again to resume", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="killbench")
@click.option("-v", "--verbose", is_flag=True, help="More log output.")
def main(verbose: bool) -> None:
    """killbench: score test generators by mutation testing."""
    _setup_logging(verbose)


def _jobs_option(f):
    return click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
                        help="Parallel workers (default: the number of cores).")(f)


@main.command()
@click.argument("target")
@_jobs_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every mutant as a record to this file.")
@click.option("--fresh", is_flag=True, help="Ignore an earlier journal and baseline (kept aside).")
@click.option("--operators", default=None,
              help="Comma-separated operator names (default: the default set).")
@click.option("--timeout-factor", type=click.FloatRange(min=1.0), default=3.0, show_default=True,
              help="A run's deadline is this times its baseline time, plus the floor.")
@click.option("--timeout-floor", type=click.FloatRange(min=0.5), default=10.0, show_default=True,
              help="Seconds added to every deadline.")
def mutate(target: str, jobs, json_path, fresh, operators, timeout_factor, timeout_floor) -> None:
    """Run TARGET's own suite against every mutant (a pin name or a project directory)."""
    from .config import resolve
    from .harness import mutate_target
    from .summary import render, to_json

    from .mutate import OPERATORS
    from .runner import RunSettings

    spec = resolve(target)
    ops = [o.strip() for o in operators.split(",")] if operators else None
    unknown = sorted(set(ops or ()) - set(OPERATORS))
    if unknown:
        raise click.BadParameter(f"unknown operators {unknown}; known: {', '.join(OPERATORS)}",
                                 param_hint="--operators")
    run = mutate_target(spec, jobs=jobs, operators=ops, fresh=fresh,
                        settings=RunSettings(timeout_factor, timeout_floor))
    click.echo(render(run))
    if json_path:
        json_path.write_text(json.dumps(to_json(run), indent=1, sort_keys=True))
        click.echo(f"wrote {len(run.records)} mutant records to {json_path}")


@main.command()
@click.argument("target")
@_jobs_option
@click.option("--sample", type=click.IntRange(min=1), default=8, show_default=True,
              help="Mutants sampled for the parallel/serial and selection checks.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the checks as JSON.")
def doctor(target: str, jobs, sample, seed, json_path) -> None:
    """Run the instrument checks on TARGET; exit 0 only if all hold."""
    from .config import resolve
    from .doctor import run_doctor
    from .harness import default_jobs

    checks, prepared = run_doctor(resolve(target), jobs=jobs or default_jobs(), sample=sample,
                                  seed=seed)
    for c in checks:
        click.echo(f"[{'ok' if c.ok else 'FAIL'}] {c.name}")
        click.echo(f"     expected: {c.expected}")
        click.echo(f"     observed: {c.observed}")
        for d in c.details:
            click.echo(f"       - {d}")
    failed = [c for c in checks if not c.ok]
    click.echo(f"{len(checks) - len(failed)} / {len(checks)} checks hold for {prepared.name}")
    if json_path:
        json_path.write_text(json.dumps({"target": prepared.name, "fingerprint": prepared.fingerprint,
                                         "checks": [c.to_dict() for c in checks]}, indent=1))
    sys.exit(int(ExitCode.CHECK_FAILED) if failed else 0)


if __name__ == "__main__":
    main()
