"""The frozen benchmark: build, verify and digest per-target manifests.

A manifest holds every mutant of the benchmark population of one target with its
baseline verdict and reachability, and three derived sets: the task set (survived,
reachable, not unkillable), the held-out population (mutants no generator is shown,
for transfer) and the unkillable mutants with their reasons. Manifests hold only
what is deterministic (no durations, no paths of this machine), so building twice
gives identical bytes, and the digest over all of them names the benchmark.

The build settings (seed, sample sizes, the held-out minimum) are read from
``manifests/build.toml``, which is committed before the manifests are built: that is
the pre-registration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tomli

from . import __version__
from .config import TargetSpec
from .errors import InvariantError, KillbenchError, UserError
from .workspace import exclusive
from .harness import (enumerate_target, load_or_run_baseline, reach_all, run_candidates,
                      summarize, workdir_for)
from .journal import Journal
from .locations import repo_root
from .mutate import Candidate, default_operators, held_out_operators
from .population import is_task, split
from .records import MutantRecord
from .runner import RunSettings
from .targets import prepare

log = logging.getLogger("killbench")

SCHEMA = 1
RECORD_FIELDS = ("id", "path", "line", "end_line", "col", "end_col", "start", "end", "function",
                 "operator", "original", "replacement", "unkillable", "verdict", "killed_by",
                 "reachable", "import_time", "covered_by", "ran", "selection")


@dataclass(frozen=True)
class BuildSettings:
    """What a manifest build depends on besides the pins; pre-registered in build.toml."""

    seed: int = 0
    max_mutants: int = 300  # default-operator mutants sampled per target (all when fewer)
    max_held_out_family: int = 100  # held-out-family mutants per target
    per_function_min: int = 1  # held-out mutants every task-set function must have
    heldout_minimum: int = 100  # per target: the held-out population size the build aims for
    timeout_factor: float = 3.0
    timeout_floor: float = 10.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def manifests_dir() -> Path:
    return repo_root() / "manifests"


def load_build_settings(path: Path | None = None) -> BuildSettings:
    path = path or manifests_dir() / "build.toml"
    if not path.exists():
        return BuildSettings()
    data = tomli.loads(path.read_text())
    known = set(BuildSettings.__dataclass_fields__)
    unknown = set(data) - known - {"schema"}
    if unknown:
        raise UserError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    return BuildSettings(**{k: v for k, v in data.items() if k in known})


def canonical_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _rank(seed: int, mutant_id: str) -> str:
    return hashlib.sha256(f"{seed}:{mutant_id}".encode()).hexdigest()


def _record(r: MutantRecord) -> dict:
    d = r.to_dict()
    d["covered_by"] = list(r.reach.covered_by)
    return {k: d[k] for k in RECORD_FIELDS}


def _pick_held_out_family(candidates: list[Candidate], task_functions: set, settings: BuildSettings) -> list[Candidate]:
    """Held-out-family mutants, those in task-set functions first, then the rest."""
    valid = [c for c in candidates if c.compiles and not c.mutant.unkillable]
    valid.sort(key=lambda c: (c.mutant.function not in task_functions, _rank(settings.seed, c.mutant.id)))
    return valid[: settings.max_held_out_family]


def build_manifest(spec: TargetSpec, settings: BuildSettings, jobs: int,
                   show_progress: bool = True) -> dict:
    """Run the pre-registered build for one target; returns the manifest (a plain dict)."""
    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        return _build_manifest(spec, target, settings, jobs, show_progress)


def _build_manifest(spec: TargetSpec, target, settings: BuildSettings, jobs: int,
                    show_progress: bool) -> dict:
    workdir = workdir_for(target)
    workdir.mkdir(parents=True, exist_ok=True)
    baseline = load_or_run_baseline(target, workdir)
    run_settings = RunSettings(settings.timeout_factor, settings.timeout_floor)
    all_default = enumerate_target(target, default_operators())
    all_family = enumerate_target(target, held_out_operators())
    everything = {c.mutant.id: c for c in all_default + all_family}
    if len(everything) != len(all_default) + len(all_family):
        raise KillbenchError(f"target {spec.name}: two mutants share an id")
    reaches = reach_all(target, baseline, list(everything.values()))
    header = {"killbench": __version__, "fingerprint": target.fingerprint, "build": settings.to_dict(),
              "purpose": "manifest"}
    journal = Journal(workdir / "manifest-journal.jsonl", header)
    try:
        ranked = sorted(all_default, key=lambda c: _rank(settings.seed, c.mutant.id))
        sampled = ranked[: settings.max_mutants]
        first = run_candidates(target, baseline, sampled, reaches, journal, jobs, run_settings,
                               show_progress, f"{spec.name} (sample)")
        task = {r.mutant.id for r in first
                if is_task(r.outcome.verdict, r.reach.reachable, r.mutant.unkillable)}
        task_functions = {everything[i].mutant.function for i in task}
        family = _pick_held_out_family(all_family, task_functions, settings)
        chosen = {c.mutant.id for c in sampled} | {c.mutant.id for c in family}
        # every task-set function gets held-out mutants: top up from the unsampled ones
        per_fn = Counter(everything[i].mutant.function for i in chosen - task
                         if everything[i].compiles and not everything[i].mutant.unkillable)
        extra = []
        spare = sorted((c for c in ranked[settings.max_mutants:] if c.compiles and not c.mutant.unkillable),
                       key=lambda c: _rank(settings.seed, c.mutant.id))
        for fn in sorted(task_functions, key=str):
            need = settings.per_function_min - per_fn.get(fn, 0)
            for c in spare:
                if need <= 0:
                    break
                if c.mutant.function == fn and c.mutant.id not in chosen:
                    extra.append(c)
                    chosen.add(c.mutant.id)
                    need -= 1
        second = run_candidates(target, baseline, family + extra, reaches, journal, jobs,
                                run_settings, show_progress, f"{spec.name} (held-out)")
    finally:
        journal.close()
    records = sorted(first + second, key=lambda r: (r.mutant.path, r.mutant.start, r.mutant.end,
                                                     r.mutant.operator, r.mutant.replacement))
    roles = {c.mutant.id: "sample" for c in sampled}
    roles.update({c.mutant.id: "held-out-family" for c in family})
    roles.update({c.mutant.id: "held-out-extra" for c in extra})
    return _assemble(target, baseline, records, task, roles, settings)


def _assemble(target, baseline, records: list[MutantRecord], task: set, roles: dict,
              settings: BuildSettings) -> dict:
    """The manifest dict. Counts and the task set are over the sample; the held-out
    population is everything else that is valid and killable."""
    sample = [r for r in records if roles[r.mutant.id] == "sample"]
    counts = summarize(sample)
    rows = [{"id": r.mutant.id, "verdict": r.outcome.verdict, "reachable": r.reach.reachable,
             "unkillable": r.mutant.unkillable, "role": roles[r.mutant.id]} for r in records]
    task_sorted, held_out = split(rows)
    unkillable = {r.mutant.id: r.mutant.unkillable for r in records if r.mutant.unkillable}
    if task_sorted != sorted(task):
        raise InvariantError("the manifest's task set is not the task-set rule over its sample")
    if set(held_out) & set(task_sorted):
        raise InvariantError("the held-out population overlaps the task set")
    by_id = {r.mutant.id: r for r in records}
    task_fns = sorted({by_id[i].mutant.function or "<module>" for i in task})
    held_fn = Counter(by_id[i].mutant.function or "<module>" for i in held_out)
    missing = [fn for fn in task_fns if held_fn.get(fn, 0) < settings.per_function_min]
    spec = target.spec
    return {
        "schema": SCHEMA,
        "killbench": __version__,
        "target": {**spec.canonical(), "source_lines": _source_lines(target)},
        "build": settings.to_dict(),
        "operators": {"default": list(default_operators()), "held_out_only": list(held_out_operators())},
        "baseline": {"tests": len(baseline.tests), "flaky": baseline.flaky,
                     "deselected": baseline.deselected, "skipped": len(baseline.skipped),
                     "lines_hit": baseline.lines_hit, "lines_total": baseline.lines_total},
        "counts": {**counts, "population": len(records), "held_out": len(held_out),
                   "roles": dict(sorted(Counter(roles.values()).items()))},
        "task_set": task_sorted,
        "held_out": {
            "ids": held_out,
            "size": len(held_out),
            "minimum": settings.heldout_minimum,
            "minimum_met": len(held_out) >= settings.heldout_minimum,
            "task_functions": len(task_fns),
            "task_functions_without_held_out": missing,
        },
        "unkillable": dict(sorted(unkillable.items())),
        "mutants": [dict(_record(r), role=roles[r.mutant.id]) for r in records],
    }


def _source_lines(target) -> int:
    n = 0
    for sf in target.sources:
        n += sum(1 for line in (target.tree / sf.path).read_text(encoding="utf-8").splitlines()
                 if line.strip())
    return n


def write_manifest(manifest: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{manifest['target']['name']}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(canonical_bytes(manifest))
    os.replace(tmp, path)
    return path


def load_manifests(directory: Path | None = None) -> dict[str, dict]:
    directory = directory or manifests_dir()
    out = {}
    for p in sorted(directory.glob("*.json")):
        if p.name == "index.json":
            continue
        data = json.loads(p.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            raise UserError(f"{p}: manifest schema {data.get('schema')!r}, this killbench reads {SCHEMA}")
        out[data["target"]["name"]] = data
    return out


def digest(manifests: dict[str, dict]) -> str:
    """sha256 over the canonical content of all manifests, in name order."""
    h = hashlib.sha256()
    for name in sorted(manifests):
        h.update(name.encode() + b"\0" + canonical_bytes(manifests[name]))
    return h.hexdigest()


def target_digest(manifest: dict) -> str:
    """sha256 of one target's canonical manifest: what a run's tasks come from. Unlike the
    benchmark digest it does not move when another target is added."""
    return hashlib.sha256(canonical_bytes(manifest)).hexdigest()


def index_of(manifests: dict[str, dict]) -> dict:
    rows = []
    for name in sorted(manifests):
        m = manifests[name]
        c = m["counts"]
        v = c["verdicts"]
        rows.append({"name": name, "version": m["target"]["version"], "digest": target_digest(m),
                     "source_lines": m["target"]["source_lines"], "tests": m["baseline"]["tests"],
                     "line_coverage": [m["baseline"]["lines_hit"], m["baseline"]["lines_total"]],
                     "mutants": c["mutants"], "killed": v["killed"], "survived": v["survived"],
                     "timeout": v["timeout"], "invalid": v["invalid"], "harness_error": v["harness-error"],
                     "reachable_survivors": c["survived_reachable"], "unkillable": c["unkillable"],
                     "task_set": len(m["task_set"]), "held_out": m["held_out"]["size"],
                     "held_out_minimum_met": m["held_out"]["minimum_met"]})
    # the killbench that built the manifests, not the one reading them: a new release of the
    # package does not change the benchmark or its index
    built_by = ", ".join(sorted({m.get("killbench", "?") for m in manifests.values()})) or __version__
    return {"schema": SCHEMA, "killbench": built_by, "digest": digest(manifests), "targets": rows}


def write_index(directory: Path | None = None) -> dict:
    directory = directory or manifests_dir()
    index = index_of(load_manifests(directory))
    (directory / "index.json").write_bytes(canonical_bytes(index))
    return index


def current_digest(directory: Path | None = None) -> str | None:
    """The digest every printed or written result carries (None if no manifests)."""
    manifests = load_manifests(directory)
    return digest(manifests) if manifests else None


@contextmanager
def fresh_cache():
    """A throw-away cache root: verify downloads and builds everything from scratch."""
    old = os.environ.get("KILLBENCH_CACHE")
    from .locations import cache_subdir

    with tempfile.TemporaryDirectory(prefix="manifests-verify-", dir=cache_subdir("tmp")) as tmp:
        os.environ["KILLBENCH_CACHE"] = tmp
        try:
            yield Path(tmp)
        finally:
            if old is None:
                os.environ.pop("KILLBENCH_CACHE", None)
            else:
                os.environ["KILLBENCH_CACHE"] = old


def verify_manifest(spec: TargetSpec, manifest: dict, sample: int, seed: int, jobs: int) -> list[str]:
    """Re-run a seeded sample of the manifest's mutants from scratch; the differences."""
    from .harness import run_mutants
    from .records import Mutant
    from .runner import selection_for

    if manifest["target"] != {**spec.canonical(), "source_lines": manifest["target"]["source_lines"]}:
        return [f"{spec.name}: the pin differs from the one the manifest was built from"]
    build = BuildSettings(**manifest["build"])
    with fresh_cache():
        target = prepare(spec)
        workdir = workdir_for(target)
        workdir.mkdir(parents=True, exist_ok=True)
        baseline = load_or_run_baseline(target, workdir)
        rng = random.Random(seed)
        records = manifest["mutants"]
        picked = rng.sample(records, min(sample, len(records)))
        names = set(Mutant.__dataclass_fields__)
        cands = {}
        for rec in picked:
            m = Mutant(**{k: rec[k] for k in names})
            cands[m.id] = Candidate(m, compiles=rec["verdict"] != "invalid")
        reaches = reach_all(target, baseline, list(cands.values()))
        problems = []
        todo = []
        from .harness import decided_without_run
        outcomes = {}
        for i, c in cands.items():
            out = decided_without_run(c, reaches[i], baseline)
            if out is None:
                todo.append((c.mutant, selection_for(reaches[i], baseline)))
            else:
                outcomes[i] = out
        run_mutants(target, baseline, todo, workdir, jobs, lambda m, o: outcomes.__setitem__(m.id, o),
                    RunSettings(build.timeout_factor, build.timeout_floor), sandbox_prefix="verify")
        for rec in picked:
            i = rec["id"]
            got_v, got_r = outcomes[i].verdict, reaches[i].reachable
            if got_v != rec["verdict"] or got_r != rec["reachable"]:
                problems.append(f"{spec.name} {i} {rec['path']}:{rec['line']} {rec['operator']}: "
                                f"manifest {rec['verdict']}/{'reachable' if rec['reachable'] else 'unreached'}, "
                                f"now {got_v}/{'reachable' if got_r else 'unreached'}")
    return problems


SEED_REFERENCE = (
    "The study this benchmark comes from reported 455 mutants across twelve libraries, "
    "133 surviving the libraries' own suites, 53 of those on lines the suites execute.")


# Where a reachable mutant sits: on a line a test of the suite runs, or on one only an import
# runs (no test's coverage context holds it). Shared by the benchmark page and the score.
RUN_BY_A_TEST, IMPORT_ONLY = "run by a test", "import only"


def survivor_places(manifest: dict) -> Counter:
    """Where each surviving sampled mutant sits: run by a test, import only, unreached, unkillable."""
    c = Counter({RUN_BY_A_TEST: 0, IMPORT_ONLY: 0, "unreached": 0, "unkillable": 0})
    for r in manifest["mutants"]:
        if r["role"] != "sample" or r["verdict"] != "survived":
            continue
        if r["unkillable"]:
            c["unkillable"] += 1
        elif not r["reachable"]:
            c["unreached"] += 1
        else:
            c[RUN_BY_A_TEST if r["covered_by"] else IMPORT_ONLY] += 1
    return c


def render_benchmark_md(index: dict, manifests: dict[str, dict]) -> str:
    """docs/benchmark.md, generated from the manifests (never typed by hand)."""
    from tabulate import tabulate

    headers = ["target", "version", "source lines", "tests", "line coverage", "mutants", "killed",
               "survived", "timeout", "reachable survivors", "unkillable", "task set", "held-out",
               "held-out minimum met"]
    rows, tot = [], Counter()
    for r in index["targets"]:
        hit, total = r["line_coverage"]
        rows.append([r["name"], r["version"], r["source_lines"], r["tests"],
                     f"{hit} / {total} ({100 * hit / total:.0f}%)" if total else "-",
                     r["mutants"], r["killed"], r["survived"], r["timeout"],
                     r["reachable_survivors"], r["unkillable"], r["task_set"], r["held_out"],
                     "yes" if r["held_out_minimum_met"] else "no"])
        for k in ("mutants", "killed", "survived", "timeout", "reachable_survivors", "unkillable",
                  "task_set", "held_out"):
            tot[k] += r[k]
    rows.append(["**all**", "", "", "", "", tot["mutants"], tot["killed"], tot["survived"],
                 tot["timeout"], tot["reachable_survivors"], tot["unkillable"], tot["task_set"],
                 tot["held_out"], ""])
    where_rows, where = [], Counter()
    for r in index["targets"]:
        c = survivor_places(manifests[r["name"]])
        where.update(c)
        where_rows.append([r["name"], sum(c.values()), c["run by a test"], c["import only"],
                           c["unreached"], c["unkillable"], r["task_set"]])
    where_rows.append(["**all**", sum(where.values()), where["run by a test"], where["import only"],
                       where["unreached"], where["unkillable"], tot["task_set"]])
    any_m = next(iter(manifests.values()), None)
    build = any_m["build"] if any_m else {}
    lines = [
        "# The benchmark",
        "",
        "<!-- generated by `killbench manifests build`; do not edit by hand -->",
        "",
        f"killbench {index['killbench']} · manifest digest `{index['digest']}`",
        "",
        "Counts are over the sampled default-operator population of each target "
        "(\"mutants\"); the held-out population adds held-out-only operator families "
        "(default-argument, exception-handler and slice-bound changes) and the unsampled "
        "mutants needed so that every task-set function has held-out mutants.",
        "",
        tabulate(rows, headers=headers, tablefmt="github"),
        "",
        f"Build settings (pre-registered in `manifests/build.toml`): `{json.dumps(build, sort_keys=True)}`.",
        "",
        "## Where the survivors are",
        "",
        "Each surviving sampled mutant sits on a line that some test runs, on a line that runs "
        "only while a module is imported (module-level statements, class bodies, decorators, "
        "evaluated annotations, `__all__`), or on a line nothing runs. Import-only survivors are "
        "reachable, so they are in the task set: killing one takes a test that checks a "
        "module-level value (a constant, a table, an exported name), not a function's result.",
        "",
        tabulate(where_rows, headers=["target", "survived", "run by a test", "import only",
                                      "unreached", "unkillable", "task set"],
                 tablefmt="github"),
        "",
        "## Beside the reference study",
        "",
        SEED_REFERENCE + " "
        f"Here: {tot['mutants']} sampled mutants, {tot['survived']} survivors, "
        f"{tot['reachable_survivors']} of them reachable and killable (the task set is "
        f"{tot['task_set']}): {where['run by a test']} on lines a test runs, "
        f"{where['import only']} on lines only imports run, {where['unreached']} unreached.",
        "",
        "How they differ, and why: the operator set is wider (fifteen default operators, "
        "every site of each), so each target yields hundreds to thousands of mutants; the "
        "benchmark runs a seeded, pre-registered sample per target (see the build settings) so "
        "that building and verifying it stays within reach of a 2-core machine. Targets and "
        "versions are pinned to current releases, not the study's. Reachability comes from "
        "per-test coverage contexts, with import-time code counted as reached: a line an import "
        "runs is a line a test can check. Counted that way, "
        + (f"most survivors here are reached ({where['run by a test'] + where['import only']} of "
           f"{tot['survived']})" if 2 * (where['run by a test'] + where['import only']) > tot['survived']
           else f"most survivors here are unreached ({where['unreached']} of {tot['survived']})")
        + "; counting only lines a test itself runs, "
        f"{where['run by a test']} of {tot['survived']} are.",
        "",
    ]
    return "\n".join(lines)


def write_benchmark_doc(directory: Path | None = None, out: Path | None = None) -> Path:
    manifests = load_manifests(directory)
    index = index_of(manifests)
    out = out or repo_root() / "docs" / "benchmark.md"
    out.write_text(render_benchmark_md(index, manifests))
    return out
