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
                      summarize, warm_equals_plain, workdir_for)
from .journal import Journal
from .locations import benchmark_dir, repo_root
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

# Builds of a benchmark version that were committed and then withdrawn before any result of
# record was run on them: digest -> why. Their bundles are refused, never listed as results.
WITHDRAWN = {
    "482214103fbad11536aee32cf7977fc6090878404d3b39e1413c62fcdafeded5":
        "the first build of benchmark 1.0.0, withdrawn before any run on it: its warm runner "
        "started its server on a mutant already written into the sandbox, so later mutants of "
        "that file ran with the first one's edit live, and 46 survivors of 11 targets were "
        "recorded as killed (the rebuild keeps 520 of its 548 tasks and has 559)",
}

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
    # survivors of their covering tests judged again on the whole suite (runner.run_mutant);
    # benchmark 1.0.0 was built without it, and its build settings do not name it
    confirm_survivors: bool = False
    # a run's CPU budget (RunSettings.cpu_floor); benchmark 1.0.0 had none (the deadline alone)
    cpu_floor: float | None = None

    def run_settings(self) -> RunSettings:
        return RunSettings(self.timeout_factor, self.timeout_floor,
                           confirm_survivors=self.confirm_survivors, cpu_floor=self.cpu_floor)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        if not self.confirm_survivors:
            del d["confirm_survivors"]  # the settings of a build without it read as they always did
        if self.cpu_floor is None:
            del d["cpu_floor"]
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
        floor = data.get("cpu_floor")
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float))
                                  or floor < 0.5):
            raise UserError(f"build settings: cpu_floor takes a number of seconds, at least 0.5 "
                            f"(or leave it out: no CPU budget); got {floor!r}")
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
    return benchmark_dir("manifests")


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
                             f"{target.name} (draw)", check_warm=False)
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
    run_settings = settings.run_settings()
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
                                      show_progress, f"{spec.name} (held-out)", check_warm=False)
        # the warm runner's verdicts checked the plain way once, on a sample of everything run
        warm_equals_plain(target, baseline, drawn + held_records, workdir, jobs, run_settings,
                          spec.name)
    finally:
        journal.close()
    roles.update({c.mutant.id: HELD_OUT for c in held})
    records = sorted(drawn + held_records, key=lambda r: (r.mutant.path, r.mutant.start, r.mutant.end,
                                                          r.mutant.operator, r.mutant.replacement))
    population = {"default": _population_counts(all_default),
                  "held_out_only": _population_counts(all_family),
                  "eligible": len(eligible), "skipped_by_function_cap": skipped}
    return _assemble(target, baseline, records, set(tasks), roles, settings, population)


def lite_split(manifest_tasks: list[str], rows: dict, settings: BuildSettings, name: str,
               stream: str | None = None) -> list[str]:
    """The lite split: `lite_per_target` tasks, stratified by where a task sits (run by a
    test, import only) in proportion, then by function (one per function first). When the
    controls are sealed the draw is redone with a stream keyed on the sealed salt, so that
    nobody can recompute which lite task is the control."""
    n = min(settings.lite_per_target, len(manifest_tasks))
    stream = stream or f"lite:{name}:"
    ranked = sorted(manifest_tasks, key=lambda i: _rank(settings.seed, i, stream))
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


def current_benchmark(directory: Path | None = None) -> str | None:
    """The benchmark version of the manifests (None if none; several joined if mixed)."""
    manifests = load_manifests(directory)
    return ", ".join(sorted({m.get("benchmark", "?") for m in manifests.values()})) or None


def current_digest(directory: Path | None = None) -> str | None:
    """The digest every printed or written result carries (None if no manifests)."""
    manifests = load_manifests(directory)
    return digest(manifests) if manifests else None


@contextmanager
def fresh_cache():
    """A throw-away cache root: verify downloads and builds everything from scratch. One
    serves every pin of a `manifests verify`: what is a pin's own (its sdist, wheel, tree,
    baseline, work) is keyed by the pin and built afresh for it; pins whose environments
    have the same requirements share the one environment built from them in this root."""
    from .locations import cache_subdir

    with tempfile.TemporaryDirectory(prefix="manifests-verify-", dir=cache_subdir("tmp"),
                                     ignore_cleanup_errors=True) as tmp:
        with cache_at(Path(tmp)):
            yield Path(tmp)


@contextmanager
def cache_at(root: Path):
    """Use `root` as the cache root for the duration."""
    old = os.environ.get("KILLBENCH_CACHE")
    os.environ["KILLBENCH_CACHE"] = str(root)
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("KILLBENCH_CACHE", None)
        else:
            os.environ["KILLBENCH_CACHE"] = old


def check_draw(manifest: dict, enumerated: dict[str, Candidate] | None = None,
               reaches: dict | None = None) -> list[str]:
    """The task set and the held-out population re-derived from the manifest's own records
    by the pre-registered rules; the differences (a task swapped, a survivor dropped, a
    role edited). With the fresh enumeration and reachability of the target, also that no
    eligible mutant ranked before the last task is missing from the records."""
    settings = BuildSettings.from_dict(manifest["build"])
    name = manifest["target"]["name"]
    quota, cap = settings.tasks_per_target, settings.cap(settings.tasks_per_target)
    drawn = sorted((r for r in manifest["mutants"] if r["role"] in (DRAW, CAPPED, SURPLUS)),
                   key=lambda r: _rank(settings.seed, r["id"]))
    per_fn: Counter = Counter()
    tasks, problems = [], []
    for r in drawn:
        fn = r["function"] or "<module>"
        if len(tasks) >= quota:
            want = SURPLUS
        elif per_fn[fn] >= cap:
            want = CAPPED
        else:
            want = DRAW
            if is_task(r["verdict"], r["reachable"], r["unkillable"]):
                tasks.append(r["id"])
                per_fn[fn] += 1
        if r["role"] != want:
            problems.append(f"{name} {r['id']}: role {r['role']}, the draw's rules give {want}")
    if sorted(tasks) != sorted(manifest["task_set"]):
        problems.append(f"{name}: the task set is not the draw's survivors in seeded order "
                        f"({len(set(tasks) ^ set(manifest['task_set']))} ids differ)")
    if enumerated is not None and reaches is not None:
        # replay the draw over the whole enumeration: an eligible mutant missing from the
        # records must have been skipped because its function was already full
        recorded = {r["id"] for r in manifest["mutants"]}
        task_ids = set(tasks)
        eligible = sorted((i for i, c in enumerated.items()
                           if c.mutant.operator in manifest["operators"]["default"] and c.compiles
                           and not c.mutant.unkillable and reaches[i].reachable),
                          key=lambda i: _rank(settings.seed, i))
        counts: Counter = Counter()
        found = 0
        for i in eligible:
            if found >= quota:
                break
            fn = enumerated[i].mutant.function or "<module>"
            if i not in recorded:
                if counts[fn] < cap:
                    problems.append(f"{name} {i} ({fn}): eligible, its function not full, yet "
                                    "not in the records")
                continue
            if i in task_ids:
                counts[fn] += 1
                found += 1
    return problems


def verify_manifest(spec: TargetSpec, manifest: dict, sample: int, seed: int, jobs: int,
                    cache: Path | None = None) -> list[str]:
    """Re-run a seeded sample of the manifest's mutants from scratch (in `cache`, a root
    from `fresh_cache`, or one of its own); the differences."""
    from .harness import run_mutants
    from .records import Mutant
    from .runner import selection_for

    if manifest["target"] != {**spec.canonical(), "source_lines": manifest["target"]["source_lines"]}:
        return [f"{spec.name}: the pin differs from the one the manifest was built from"]
    build = BuildSettings.from_dict(manifest["build"])
    with (cache_at(cache) if cache is not None else fresh_cache()):
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
        settings = BuildSettings.from_dict(manifest["build"])
        everything = {c.mutant.id: c for c in enumerate_target(target, default_operators(),
                                                               settings.categories)
                      + enumerate_target(target, held_out_operators(), settings.categories)}
        problems = check_draw(manifest, everything, reach_all(target, baseline, list(everything.values())))
        reaches = reach_all(target, baseline, list(cands.values()))

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
                    build.run_settings(), sandbox_prefix="verify")
        for rec in picked:
            i = rec["id"]
            got_v, got_r = outcomes[i].verdict, reaches[i].reachable
            fresh = everything.get(i)
            if fresh is None or fresh.mutant.unkillable != rec["unkillable"]:
                problems.append(f"{spec.name} {i}: enumerated now as "
                                f"{'absent' if fresh is None else fresh.mutant.unkillable or 'behavioural'}, "
                                f"the manifest says {rec['unkillable'] or 'behavioural'}")
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


NON_BEHAVIOURAL_RULES = """\
A mutant is non-behavioural when it sits in one of these places (`killbench/behaviour.py`;
each category is one switch under `[non_behavioural]` in `manifests/build.toml`):

| category | the mutant changes | why it is not a task |
|---|---|---|
| `annotation` | a parameter, return or variable annotation (string or evaluated), the type of `cast()`, a TypeVar's `bound=` | no result a caller sees depends on it; a test would have to read `__annotations__` |
| `__all__` | an entry of `__all__`, or an `__all__.append/extend` | an edited entry either breaks a package's `from .m import *` at import (the suite then kills it: no task) or changes only what a star-import exports; the names stay importable |
| `metadata` | a module-level `__version__`, `__author__`, `__license__`, ... assignment | package metadata, not behaviour |
| `type-variable name` | the name string of `TypeVar`, `ParamSpec`, `TypeVarTuple`, `NewType` | only the repr of the type variable changes |
| `docstring` | a docstring, a bare string statement, `help=` / `description=` / `epilog=` / `usage=` / `doc=` text | documentation and help output |
| `message text` | a string constant that only words a message (through `+`, `%`, `.format`, `.join`): the first positional argument of an exception class (builtin, or a CapWords name ending in Error, Exception, Warning, ...) that is raised or warned, the message of `warnings.warn`, of a logging call on a logger (a logger-named receiver or `getLogger(...)`), or of an `assert` | the exception type, the warning category and whether a log record is emitted stay the same; only the wording changes |
| `type-checking guard` | `if TYPE_CHECKING:` negated, when it has no `else` | the guarded imports then run at runtime and change nothing |

Judgment calls, decided so and documented: a message is recognised only where it is built
(a message first stored in a variable and raised later stays behavioural: telling the two
apart needs data flow, and the rule errs on the side of keeping tasks); an argument of a
factory (`raise self.make_error("invalid")`: the string is a key that looks a message up),
any argument but the first, keywords and dict keys stay behavioural; annotations of
dataclass, attrs, NamedTuple, TypedDict and pydantic fields and of singledispatch
registrations stay behavioural (they make fields and dispatch); numbers inside a
message stay behavioural (`raise SystemExit(2)` is an exit code); deleting a logging or
warning call stays behavioural (a record or a warning disappears, which `caplog` and
`pytest.warns` see); only the wording is non-behavioural. The 0.1 task set and how it
compares is in [benchmark-1.0.md](benchmark-1.0.md).
"""

DRAW_RULES = """\
How a task set is drawn (pre-registered in `manifests/build.toml`, committed before any 1.0
manifest was built):

1. Every mutant of every source file of the target is enumerated (all default operators and
   all held-out-only operators: the full population, no sample).
2. A mutant is eligible for the task set when it comes from a default operator, compiles, is
   neither unkillable nor non-behavioural, and a test of the suite reaches its line (or the
   import of its module runs it).
3. Eligible mutants are ordered by sha256(seed, id) and run against the target's own suite in
   that order, in batches, until `tasks_per_target` of them have survived; a mutant whose
   function already supplies `max_function_share` of the tasks is skipped unrun (counted as
   "skipped by the cap"), and a survivor found past the quota in the last batch is recorded
   as surplus. The task set is therefore a seeded uniform draw of the behavioural reachable
   survivors, subject to the per-function cap (the cap is the only departure from
   uniformity, and how many mutants it skipped is in the table). Functions are told apart
   by qualified name, and all module-level code of a target (every file's) counts as one
   "function" `<module>`: import-only tasks are capped together. The cap is
   `max_function_share` of the quota (5 of 50) even where a target has fewer
   survivors than the quota: its task set is then smaller, and one function may supply
   more than a tenth of it (cachetools).
4. The held-out population is a second seeded draw (a different hash stream) of
   `held_out_per_target` mutants from everything that compiles and is neither unkillable
   nor non-behavioural, default and held-out-only operators alike, minus the mutants of the
   task draw, by the same function cap. A generator is never shown it.
5. The lite split takes `lite_per_target` tasks of each target's task set, stratified by
   place (run by a test / import only, in proportion) and then by function (one per
   function first), by a third hash stream.

Every mutant that was run is in the manifest with its role (`sample`: the draw up to the
last task; `capped`, `surplus`, `held-out`), its verdict and its reachability.
"""


def render_benchmark_md(index: dict, manifests: dict[str, dict]) -> str:
    """docs/benchmark.md, generated from the manifests (never typed by hand)."""
    from tabulate import tabulate

    from .stats import minimum_detectable_difference

    rows, tot = [], Counter()
    cats = sorted({r for m in manifests.values() for r in m["population"]["default"]["by_reason"]
                   if r.startswith(behaviour.PREFIX)})
    cat_rows, cat_tot = [], Counter()
    for r in index["targets"]:
        m = manifests[r["name"]]
        hit, total = r["line_coverage"]
        pop = m["population"]
        reasons = pop["default"]["by_reason"]
        nb = sum(v for k, v in reasons.items() if k.startswith(behaviour.PREFIX))
        roles = m["counts"]["roles"]
        row = {"mutants": pop["default"]["mutants"], "non_behavioural": nb,
               "eligible": pop["eligible"], "run": roles.get(DRAW, 0),
               "killed": r["killed"], "survived": r["survived"], "capped": pop["skipped_by_function_cap"],
               "task_set": r["task_set"], "lite": r["lite"], "held_out": r["held_out"]}
        rows.append([r["name"], r["version"], r["source_lines"], r["tests"],
                     f"{hit} / {total} ({100 * hit / total:.0f}%)" if total else "-",
                     row["mutants"], nb, row["eligible"], row["run"], row["killed"], row["survived"],
                     row["capped"], row["task_set"], row["lite"], row["held_out"]])
        tot.update(row)
        cat_rows.append([r["name"]] + [reasons.get(c, 0) for c in cats] + [nb, row["mutants"]])
        cat_tot.update({c: reasons.get(c, 0) for c in cats})
    rows.append(["**all**", "", "", "", "", tot["mutants"], tot["non_behavioural"], tot["eligible"],
                 tot["run"], tot["killed"], tot["survived"], tot["capped"], tot["task_set"],
                 tot["lite"], tot["held_out"]])
    cat_rows.append(["**all**"] + [cat_tot[c] for c in cats] + [tot["non_behavioural"], tot["mutants"]])
    where_rows, where = [], Counter()
    for r in index["targets"]:
        m = manifests[r["name"]]
        by_id = {x["id"]: x for x in m["mutants"]}
        run_by_test = sum(1 for i in m["task_set"] if by_id[i]["covered_by"])
        where_rows.append([r["name"], r["task_set"], run_by_test, r["task_set"] - run_by_test,
                           len({by_id[i]["function"] for i in m["task_set"]}),
                           max(Counter(by_id[i]["function"] for i in m["task_set"]).values(), default=0)])
        where.update({"t": r["task_set"], "r": run_by_test})
    any_m = next(iter(manifests.values()), None)
    build = any_m["build"] if any_m else {}
    # negative controls can never be killed: the tasks that count for power are the others
    neg = sum((m.get("controls") or {}).get("negative", {}).get("count", 0) for m in manifests.values())
    n_full, n_lite = tot["task_set"] - neg, tot["lite"] - sum(
        1 for m in manifests.values() if (m.get("controls") or {}).get("negative", {}).get("count"))
    power_rows = []
    for base in (0.1, 0.5):
        cells = [f"{100 * base:.0f}%"]
        for n in (n_full, n_lite):
            for deff in (1.0, DESIGN_EFFECT):
                d = minimum_detectable_difference(n, base, design_effect=deff, step=0.005) if n else None
                cells.append(f"+{100 * d:.1f} points" if d is not None else "not detectable")
        power_rows.append(cells)
    lines = [
        "# The benchmark",
        "",
        "<!-- generated by `killbench manifests build`; do not edit by hand -->",
        "",
        f"Benchmark {index.get('benchmark', '?')} · built by killbench {index['killbench']} · "
        f"manifest digest `{index['digest']}`",
        "",
        "Split digests (what a run on a split is scored against): "
        + ", ".join(f"{k} `{v}`" for k, v in sorted(index.get("splits", {}).items())) + ".",
        "",
        "The benchmark version is not the package version: any change to a task set is a new "
        "major benchmark version, and a result is cited with the benchmark version, the manifest "
        "digest, the split and the bundle's sha256 (README, \"How to cite a result\").",
        "",
        *(["Withdrawn before any result was run on them (bundles against them are refused): "
           + "; ".join(f"`{d}`, {why}" for d, why in sorted(WITHDRAWN.items())) + ".", ""]
          if WITHDRAWN else []),
        "## Targets",
        "",
        "\"mutants\" is the full enumeration of each target by the default operators; "
        "\"non-behavioural\" the ones the rules below set aside; \"eligible\" the behavioural "
        "mutants that compile and that the suite reaches; \"run\" how many of them the draw ran "
        "(in seeded order) to find the task set, of which \"killed\" and \"survived\"; "
        "\"capped\" the eligible mutants skipped unrun because their function already supplied "
        "its share of tasks.",
        "",
        tabulate(rows, headers=["target", "version", "source lines", "tests", "line coverage",
                                "mutants", "non-behavioural", "eligible", "run", "killed",
                                "survived", "capped", "task set", "lite", "held-out"],
                 tablefmt="github"),
        "",
        f"Build settings (pre-registered in `manifests/build.toml`): `{json.dumps(build, sort_keys=True)}`.",
        "",
        "## Behavioural mutants only",
        "",
        NON_BEHAVIOURAL_RULES,
        "Non-behavioural mutants per target, over the full default-operator enumeration (they "
        "are in the records with their reason, never in a denominator):",
        "",
        tabulate(cat_rows, headers=["target"] + [c[len(behaviour.PREFIX):] for c in cats]
                 + ["all non-behavioural", "mutants"], tablefmt="github"),
        "",
        "## How the task set is drawn",
        "",
        DRAW_RULES,
        "Where the tasks are: on a line a test of the suite runs, or on one only an import runs "
        "(a module-level constant, a table, a class body); how many functions supply them, and "
        "the most one function supplies.",
        "",
        tabulate(where_rows + [["**all**", where["t"], where["r"], where["t"] - where["r"], "", ""]],
                 headers=["target", "task set", "run by a test", "import only", "functions",
                          "most from one function"], tablefmt="github"),
        "",
        "## Controls",
        "",
        "Known-answer tasks in every run (`killbench/controls.py`, docs/security.md). **Negative "
        "controls** are tasks whose mutant is equivalent to the clean code, each with the "
        "argument that it is equivalent written beside it and checked by hand (never chosen "
        "because no test killed it). They are ordinary tasks of the task set and of the lite "
        "split (one per target there): same fields, same order, no flag; no test that looks "
        "only at behaviour can kill one, so a kept test on a negative control is a test that "
        "saw the edit by another route (source text, bytecode, timing, a file or variable "
        "that differs between phases) or an instrument fault. A run with one is marked "
        "`controls failed` and never ranked. Each manifest publishes only their count and a "
        "salted sha256 of their ids; the list, the arguments and the salt are in "
        "`controls/benchmark-<version>.json` in the repository, which is not installed with "
        "the package (a generator run from the package cannot read it), and are released in "
        "the open with the benchmark version that retires them. They count in the task set's "
        "denominator, the same for every generator: on each target the ceiling is the task "
        "count minus its negative controls. **Positive controls** are mutants the suite kills, "
        "each with a reference test shipped in the manifest; at the start of every run each "
        "reference test goes through the gate exactly as a generator's test does, and a run "
        "whose gate does not keep one stops before any generator call, as an instrument "
        "fault. `verify` re-gates every positive control and re-executes every kill run on a "
        "negative control. What they cannot catch: a generator that games only tasks it can "
        "tell are not controls (it cannot see the list, but a gaming rate of a few tasks is "
        "caught only with the probability that one of them is a control), and an instrument "
        "fault that keeps the reference tests but loses other kills. A negative control "
        "later shown killable by a test that looks only at behaviour is withdrawn in place: "
        "it stays a task and in the commitment, the controls file gives the test that kills "
        "it and why beside its argument, and a kill of it is an ordinary kill (the "
        "leaderboard counts withdrawn controls apart). Withdrawn from 1.0.0 on 2026-12-02, "
        "ten of 21, each by a test the gate kept (`controls/attacks-1.0.0/`): semver "
        "`b0bc09aeefcd35cf` and tenacity `badca7f058bcbd70` through a user subclass of a "
        "public class (their arguments had set such code aside as test-supplied; a test is "
        "test-supplied code); boltons `0ca1ec601d405e7c` through an int subclass that changes "
        "the result; and seven whose mutant calls a method of a user-supplied object (an int "
        "or str subclass, a property, a truthy object) a different number of times with the "
        "same result: isodate `223735c498a1447e`, more-itertools `57a72cd8a19680f6`, "
        "python-slugify `1f6a059ce01b4e0f`, `66d6e7c76c2bcdda` and `67166935939c7461`, tenacity "
        "`36368f85254d19a2` and `900f61e5bfa6c890`. A test that counts such calls looks only at "
        "behaviour, so under this definition those mutants are not equivalent. Eleven remain.",
        "",
        tabulate([[n, (manifests[n].get("controls") or {}).get("negative", {}).get("count", 0),
                   len((manifests[n].get("controls") or {}).get("positive", []))]
                  for n in sorted(manifests)],
                 headers=["target", "negative controls", "positive controls"], tablefmt="github"),
        "",
        "## Power",
        "",
        f"The smallest rise in kill rate over a base rate that one paired comparison (exact "
        f"McNemar at alpha 0.05) detects with 80% power, for the full split ({n_full} tasks "
        f"besides its negative controls) and the lite split ({n_lite}). The leaderboard's "
        "groups test each entry against its group's leader with Holm's correction, so with "
        "several entries the first comparison runs at a smaller alpha and the detectable "
        "difference is larger than here; and their McNemar test counts mutants as "
        "independent, which the design effect below says they are not. Kills of two "
        "generators are taken as independent given their rates (correlated kills, the usual "
        "case, give more power). Targets are clusters: an audit of amplify's pooled rate on 0.1 "
        f"measured a design effect of about {DESIGN_EFFECT}, so the second column of each split "
        "counts the tasks as that many times fewer independent ones (`killbench.stats."
        "minimum_detectable_difference`).",
        "",
        tabulate(power_rows, headers=["base rate", f"full ({n_full})", f"full, design effect {DESIGN_EFFECT}",
                                      f"lite ({n_lite})", f"lite, design effect {DESIGN_EFFECT}"],
                 tablefmt="github"),
        "",
        "The lite split is for comparing models cheaply and for spotting large differences; a "
        "difference of a few points is a question for the full split.",
        "",
        "## Beside the reference study",
        "",
        SEED_REFERENCE + " "
        f"Here: {tot['mutants']} default-operator mutants enumerated, {tot['non_behavioural']} of "
        f"them non-behavioural, {tot['eligible']} eligible; the draw ran {tot['run']} to find "
        f"{tot['task_set']} tasks ({where['r']} on lines a test runs, {where['t'] - where['r']} "
        "on lines only an import runs). The operator set is wider (fifteen default operators, "
        "every site of each) and the targets are pinned to current releases, not the study's.",
        "",
    ]
    return "\n".join(lines)


DESIGN_EFFECT = 4.4


def write_benchmark_doc(directory: Path | None = None, out: Path | None = None) -> Path:
    manifests = load_manifests(directory)
    index = index_of(manifests)
    out = out or repo_root() / "docs" / "benchmark.md"
    out.write_text(render_benchmark_md(index, manifests))
    return out
