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

from . import __version__, behaviour
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

SCHEMA = 2
RECORD_FIELDS = ("id", "path", "line", "end_line", "col", "end_col", "start", "end", "function",
                 "operator", "original", "replacement", "unkillable", "verdict", "killed_by",
                 "reachable", "import_time", "covered_by", "ran", "selection")

# the roles of a manifest's records (see docs/benchmark.md, "How a task set is drawn")
DRAW, CAPPED, SURPLUS, HELD_OUT = "sample", "capped", "surplus", "held-out"
BATCH = 24  # mutants run between two looks at the draw; only the surplus depends on it


@dataclass(frozen=True)
class BuildSettings:
    """What a manifest build depends on besides the pins; pre-registered in build.toml."""

    benchmark: str = "1.0.0"
    seed: int = 0
    tasks_per_target: int = 50  # the task set: behavioural reachable survivors drawn per target
    max_function_share: float = 0.1  # no function supplies more than this share of the tasks
    held_out_per_target: int = 100  # the held-out population drawn per target
    lite_per_target: int = 4  # tasks per target in the lite split
    timeout_factor: float = 3.0
    timeout_floor: float = 10.0
    non_behavioural: tuple = tuple(sorted(behaviour.SWITCHES))  # switches that are on

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["non_behavioural"] = {k: k in self.non_behavioural for k in sorted(behaviour.SWITCHES)}
        return d

    @property
    def categories(self) -> frozenset:
        return frozenset(behaviour.SWITCHES[k] for k in self.non_behavioural)

    def cap(self, quota: int) -> int:
        return max(1, int(quota * self.max_function_share))

    @classmethod
    def from_dict(cls, data: dict) -> "BuildSettings":
        data = dict(data)
        switches = data.pop("non_behavioural", None)
        known = set(cls.__dataclass_fields__) - {"non_behavioural"}
        unknown = set(data) - known
        if unknown:
            raise UserError(f"build settings: unknown keys {sorted(unknown)}; known: "
                            f"{sorted(known | {'non_behavioural'})}")
        if switches is not None:
            if not isinstance(switches, dict):
                raise UserError("build settings: [non_behavioural] must be a table of switches")
            bad = sorted(set(switches) - set(behaviour.SWITCHES))
            if bad or not all(isinstance(v, bool) for v in switches.values()):
                raise UserError(f"build settings: [non_behavioural] takes true/false for "
                                f"{sorted(behaviour.SWITCHES)}; got {switches}")
            data["non_behavioural"] = tuple(sorted(k for k in behaviour.SWITCHES
                                                   if switches.get(k, True)))
        return cls(**data)


def manifests_dir() -> Path:
    return repo_root() / "manifests"


def load_build_settings(path: Path | None = None) -> BuildSettings:
    path = path or manifests_dir() / "build.toml"
    if not path.exists():
        return BuildSettings()
    data = tomli.loads(path.read_text())
    schema = data.pop("schema", SCHEMA)
    if schema != SCHEMA:
        raise UserError(f"{path}: build settings of schema {schema}, this killbench builds {SCHEMA}")
    try:
        return BuildSettings.from_dict(data)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None


def canonical_bytes(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _rank(seed: int, mutant_id: str, stream: str = "") -> str:
    return hashlib.sha256(f"{seed}:{stream}{mutant_id}".encode()).hexdigest()


def _record(r: MutantRecord) -> dict:
    d = r.to_dict()
    d["covered_by"] = list(r.reach.covered_by)
    return {k: d[k] for k in RECORD_FIELDS}


def build_manifest(spec: TargetSpec, settings: BuildSettings, jobs: int,
                   show_progress: bool = True) -> dict:
    """Run the pre-registered build for one target; returns the manifest (a plain dict)."""
    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        return _build_manifest(spec, target, settings, jobs, show_progress)


def _fn(c: Candidate) -> str:
    return c.mutant.function or "<module>"


def _draw_tasks(target, baseline, eligible: list[Candidate], reaches, journal, jobs, run_settings,
                settings: BuildSettings, show_progress: bool):
    """Run eligible mutants in their seeded order until `tasks_per_target` survivors are
    found, no function supplying more than its cap. Returns (records, roles, skipped):
    every mutant run is a record; a mutant whose function is full before it is reached is
    skipped unrun (counted); a survivor found past the quota in the last batch is surplus."""
    quota, cap = settings.tasks_per_target, settings.cap(settings.tasks_per_target)
    per_fn: Counter = Counter()
    tasks: list[str] = []
    records: list[MutantRecord] = []
    roles: dict[str, str] = {}
    skipped = 0
    queue = list(eligible)
    while queue and len(tasks) < quota:
        batch = []
        while queue and len(batch) < BATCH:
            c = queue.pop(0)
            if per_fn[_fn(c)] >= cap:
                skipped += 1
                continue
            batch.append(c)
        if not batch:
            break
        out = run_candidates(target, baseline, batch, reaches, journal, jobs, run_settings, False,
                             f"{target.name} (draw)")
        for c, r in zip(batch, out):  # in the seeded order, whatever order they finished in
            records.append(r)
            if len(tasks) >= quota:
                roles[c.mutant.id] = SURPLUS
            elif per_fn[_fn(c)] >= cap:
                roles[c.mutant.id] = CAPPED
            else:
                roles[c.mutant.id] = DRAW
                if is_task(r.outcome.verdict, r.reach.reachable, r.mutant.unkillable):
                    tasks.append(c.mutant.id)
                    per_fn[_fn(c)] += 1
        if show_progress:
            log.warning("%s: %d of %d tasks after %d mutants run", target.name, len(tasks), quota,
                        len(records))
    return records, roles, skipped, tasks


def _draw_held_out(candidates: list[Candidate], taken: set, settings: BuildSettings) -> list[Candidate]:
    """A seeded uniform draw of held-out mutants, by the same function cap as the tasks."""
    cap = settings.cap(settings.held_out_per_target)
    per_fn: Counter = Counter()
    out = []
    ranked = sorted((c for c in candidates if c.compiles and not c.mutant.unkillable
                     and c.mutant.id not in taken),
                    key=lambda c: _rank(settings.seed, c.mutant.id, "held-out:"))
    for c in ranked:
        if len(out) >= settings.held_out_per_target:
            break
        if per_fn[_fn(c)] < cap:
            out.append(c)
            per_fn[_fn(c)] += 1
    return out


def _population_counts(cands: list[Candidate]) -> dict:
    cats = Counter()
    for c in cands:
        if not c.compiles:
            cats["invalid"] += 1
        elif c.mutant.unkillable:
            cats[c.mutant.unkillable] += 1
        else:
            cats["behavioural"] += 1
    return {"mutants": len(cands), "by_reason": dict(sorted(cats.items()))}


def _build_manifest(spec: TargetSpec, target, settings: BuildSettings, jobs: int,
                    show_progress: bool) -> dict:
    workdir = workdir_for(target)
    workdir.mkdir(parents=True, exist_ok=True)
    baseline = load_or_run_baseline(target, workdir)
    run_settings = RunSettings(settings.timeout_factor, settings.timeout_floor)
    all_default = enumerate_target(target, default_operators(), settings.categories)
    all_family = enumerate_target(target, held_out_operators(), settings.categories)
    everything = {c.mutant.id: c for c in all_default + all_family}
    if len(everything) != len(all_default) + len(all_family):
        raise KillbenchError(f"target {spec.name}: two mutants share an id")
    reaches = reach_all(target, baseline, list(everything.values()))
    header = {"killbench": __version__, "fingerprint": target.fingerprint, "build": settings.to_dict(),
              "purpose": "manifest"}
    journal = Journal(workdir / "manifest-journal.jsonl", header)
    eligible = sorted((c for c in all_default if c.compiles and not c.mutant.unkillable
                       and reaches[c.mutant.id].reachable),
                      key=lambda c: _rank(settings.seed, c.mutant.id))
    try:
        drawn, roles, skipped, tasks = _draw_tasks(target, baseline, eligible, reaches, journal,
                                                   jobs, run_settings, settings, show_progress)
        held = _draw_held_out(all_default + all_family, set(roles), settings)
        held_records = run_candidates(target, baseline, held, reaches, journal, jobs, run_settings,
                                      show_progress, f"{spec.name} (held-out)")
    finally:
        journal.close()
    roles.update({c.mutant.id: HELD_OUT for c in held})
    records = sorted(drawn + held_records, key=lambda r: (r.mutant.path, r.mutant.start, r.mutant.end,
                                                          r.mutant.operator, r.mutant.replacement))
    population = {"default": _population_counts(all_default),
                  "held_out_only": _population_counts(all_family),
                  "eligible": len(eligible), "skipped_by_function_cap": skipped}
    return _assemble(target, baseline, records, set(tasks), roles, settings, population)


def lite_split(manifest_tasks: list[str], rows: dict, settings: BuildSettings, name: str) -> list[str]:
    """The lite split: `lite_per_target` tasks, stratified by where a task sits (run by a
    test, import only) in proportion, then by function (one per function first)."""
    n = min(settings.lite_per_target, len(manifest_tasks))
    ranked = sorted(manifest_tasks, key=lambda i: _rank(settings.seed, i, f"lite:{name}:"))
    strata = {True: [i for i in ranked if rows[i]["covered_by"]],
              False: [i for i in ranked if not rows[i]["covered_by"]]}
    want_run = round(n * len(strata[True]) / len(ranked)) if ranked else 0
    want = {True: want_run, False: n - want_run}
    picked = []
    for key in (True, False):
        seen_fn: set = set()
        first = [i for i in strata[key] if not (rows[i]["function"] in seen_fn or seen_fn.add(rows[i]["function"]))]
        rest = [i for i in strata[key] if i not in first]
        picked += (first + rest)[: want[key]]
    return sorted(picked)


def _assemble(target, baseline, records: list[MutantRecord], task: set, roles: dict,
              settings: BuildSettings, population: dict) -> dict:
    """The manifest dict: every record with its role, the task set (the draw's survivors),
    the lite split and the held-out population."""
    draw = [r for r in records if roles[r.mutant.id] == DRAW]
    counts = summarize(draw)
    rows = [{"id": r.mutant.id, "verdict": r.outcome.verdict, "reachable": r.reach.reachable,
             "unkillable": r.mutant.unkillable, "role": roles[r.mutant.id]} for r in records]
    task_sorted, held_out = split(rows, held_out_roles=(HELD_OUT,))
    unkillable = {r.mutant.id: r.mutant.unkillable for r in records if r.mutant.unkillable}
    if task_sorted != sorted(task):
        raise InvariantError("the manifest's task set is not the task-set rule over its draw")
    if set(held_out) & set(task_sorted):
        raise InvariantError("the held-out population overlaps the task set")
    by_fn = Counter(r.mutant.function or "<module>" for r in records if r.mutant.id in task)
    if by_fn and max(by_fn.values()) > settings.cap(settings.tasks_per_target):
        raise InvariantError("a function supplies more tasks than the pre-registered cap")
    record_rows = [dict(_record(r), role=roles[r.mutant.id]) for r in records]
    lite = lite_split(task_sorted, {r["id"]: r for r in record_rows}, settings, target.spec.name)
    spec = target.spec
    return {
        "schema": SCHEMA,
        "benchmark": settings.benchmark,
        "killbench": __version__,
        "target": {**spec.canonical(), "source_lines": _source_lines(target)},
        "build": settings.to_dict(),
        "operators": {"default": list(default_operators()), "held_out_only": list(held_out_operators())},
        "baseline": {"tests": len(baseline.tests), "flaky": baseline.flaky,
                     "deselected": baseline.deselected, "skipped": len(baseline.skipped),
                     "lines_hit": baseline.lines_hit, "lines_total": baseline.lines_total},
        "population": population,
        "counts": {**counts, "records": len(records), "held_out": len(held_out),
                   "roles": dict(sorted(Counter(roles.values()).items())),
                   "task_set_full": len(task_sorted) >= settings.tasks_per_target},
        "task_set": task_sorted,
        "splits": {"full": task_sorted, "lite": lite},
        "held_out": {"ids": held_out, "size": len(held_out), "minimum": settings.held_out_per_target,
                     "minimum_met": len(held_out) >= settings.held_out_per_target},
        "unkillable": dict(sorted(unkillable.items())),
        "mutants": record_rows,
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


SPLITS = ("full", "lite")


def split_digest(manifests: dict[str, dict], split_name: str) -> str:
    """sha256 over (target, target digest, task ids) of one split: what a run on it is
    scored against. The full split's is not the benchmark digest (that covers everything)."""
    h = hashlib.sha256()
    for name in sorted(manifests):
        m = manifests[name]
        h.update(canonical_bytes({"target": name, "digest": target_digest(m),
                                  "tasks": m["splits"][split_name]}))
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
                     "task_set": len(m["task_set"]), "lite": len(m["splits"]["lite"]),
                     "held_out": m["held_out"]["size"],
                     "held_out_minimum_met": m["held_out"]["minimum_met"]})
    # the killbench that built the manifests, not the one reading them: a new release of the
    # package does not change the benchmark or its index
    built_by = ", ".join(sorted({m.get("killbench", "?") for m in manifests.values()})) or __version__
    benchmark = ", ".join(sorted({m.get("benchmark", "?") for m in manifests.values()}))
    return {"schema": SCHEMA, "benchmark": benchmark, "killbench": built_by,
            "digest": digest(manifests), "splits": {s: split_digest(manifests, s) for s in SPLITS},
            "targets": rows}


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
    build = BuildSettings.from_dict(manifest["build"])
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
