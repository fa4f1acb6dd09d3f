"""The population a run is scored on: the task set and the held-out mutants of a target.

The task-set rule lives here and nowhere else: a mutant is a task when it belongs to the
task population (the sample of default-operator mutants a manifest drew; every mutant of
a `mutate` run), the target's own suite lets it survive, a test of that suite reaches its
line, and it is not unkillable. The held-out population is every other mutant that
compiles and can be killed: a generator is never shown it, and it scores transfer.

``freeze`` builds the population of one target once, when a run starts, from the frozen
manifest of a pinned target or from a fresh ``mutate`` run of any other project; the run
writes it into its directory, and scoring, export and verify read it from there.
"""

from __future__ import annotations

from .errors import InvariantError, UserError
from .evidence import Population, PopulationMutant
from .records import Mutant


TASK_ROLE = "sample"


def is_task(verdict: str, reachable: bool, unkillable: str | None, role: str = TASK_ROLE) -> bool:
    """The task-set rule: in the task population, survived, reachable, not unkillable."""
    return role == TASK_ROLE and verdict == "survived" and reachable and not unkillable


def is_held_out(verdict: str, unkillable: str | None) -> bool:
    """Outside the task set, a mutant is held out when it compiles and can be killed."""
    return verdict != "invalid" and not unkillable


def split(rows, held_out_roles: tuple[str, ...] | None = None) -> tuple[list[str], list[str]]:
    """(task set, held-out ids) of rows with id, verdict, reachable and unkillable. With
    `held_out_roles` (a manifest's own held-out draw), only rows of those roles are held out;
    without (a `mutate` run), every other mutant that can be killed is."""
    task = sorted(r["id"] for r in rows
                  if is_task(r["verdict"], r["reachable"], r["unkillable"], r.get("role", TASK_ROLE)))
    chosen = set(task)
    held = sorted(r["id"] for r in rows if r["id"] not in chosen
                  and is_held_out(r["verdict"], r["unkillable"])
                  and (held_out_roles is None or r.get("role") in held_out_roles))
    return task, held


def check(pop: Population) -> None:
    """The invariants every population holds, raised as a named error (never `assert`)."""
    rows = {m.id: m for m in pop.mutants}
    if len(rows) != len(pop.mutants):
        raise InvariantError(f"{pop.target}: two mutants of the population share an id")
    task, held = set(pop.task_set), set(pop.held_out)
    if task & held:
        raise InvariantError(f"{pop.target}: {len(task & held)} mutants are both tasks and held out")
    missing = (task | held) - set(rows)
    if missing:
        raise InvariantError(f"{pop.target}: {len(missing)} task or held-out ids are not in the "
                             f"population (e.g. {sorted(missing)[0]})")
    for i in task:
        m = rows[i]
        if not is_task(m.verdict, m.reachable, m.unkillable, m.role):
            raise InvariantError(f"{pop.target}: task {i} is not a reachable, killable survivor")
    for i in held:
        if not is_held_out(rows[i].verdict, rows[i].unkillable):
            raise InvariantError(f"{pop.target}: held-out mutant {i} cannot be killed")


def from_manifest(manifest: dict, source: str, sources: dict[str, str],
                  split_name: str = "full") -> Population:
    """A pinned target's population: the manifest's records and sets, as frozen; the task
    set is the named split of it (the lite split is a pre-registered subset)."""
    keep = set(PopulationMutant.model_fields)
    mutants = [PopulationMutant(**{k: v for k, v in r.items() if k in keep}) for r in manifest["mutants"]]
    from .manifests import HELD_OUT

    task, held = split(manifest["mutants"], held_out_roles=(HELD_OUT,))
    if task != sorted(manifest["task_set"]) or held != sorted(manifest["held_out"]["ids"]):
        raise InvariantError(f"{manifest['target']['name']}: the manifest's task set or held-out "
                             "population is not the rule applied to its own records")
    splits = manifest.get("splits", {"full": task})
    if split_name not in splits:
        raise UserError(f"{manifest['target']['name']}: the manifest has no {split_name!r} split "
                        f"(it has: {', '.join(sorted(splits))})")
    chosen = sorted(splits[split_name])
    if not set(chosen) <= set(task):
        raise InvariantError(f"{manifest['target']['name']}: the {split_name} split holds mutants "
                             "outside the task set")
    controls = dict(manifest.get("controls", {}))
    negative = controls.get("negative")
    if split_name != "full" and negative:
        # the lite split holds exactly one of a target's negative controls when it has any
        # (docs/benchmark.md); the commitment is over the full list, so it is not repeated
        controls["negative"] = {"count": min(1, negative["count"]), "of_full": negative}
    pop = Population(target=manifest["target"]["name"], source=source, mutants=mutants,
                     task_set=chosen, held_out=held, split=split_name,
                     controls=controls,
                     held_out_minimum=manifest["held_out"]["minimum"],
                     sources={p: t for p, t in sources.items()
                              if any(m.path == p for m in mutants)})
    check(pop)
    return pop


def from_records(target: str, records, source: str, sources: dict[str, str]) -> Population:
    """Any project's population, from the records of a `mutate` run (no held-out minimum)."""
    mutants = []
    for r in records:
        d = r.mutant.to_dict()
        mutants.append(PopulationMutant(**d, verdict=r.outcome.verdict, reachable=r.reach.reachable,
                                        import_time=r.reach.import_time,
                                        covered_by=list(r.reach.covered_by)))
    rows = [m.model_dump() for m in mutants]
    task, held = split(rows)
    pop = Population(target=target, source=source, mutants=mutants, task_set=task, held_out=held,
                     held_out_minimum=None,
                     sources={p: t for p, t in sources.items() if any(m.path == p for m in mutants)})
    check(pop)
    return pop


def mutant(m: PopulationMutant) -> Mutant:
    return Mutant.from_dict(m.model_dump())


def import_only(pop: Population) -> set[str]:
    """Task-set mutants on lines only an import runs (no test's coverage context holds them)."""
    rows = pop.by_id()
    return {i for i in pop.task_set if not rows[i].covered_by}


def freeze(target, jobs: int, split_name: str) -> Population:
    """The population of a prepared target: its manifest's, else a fresh mutate run's (which
    has one split, the full one)."""
    from .harness import mutate_target
    from .manifests import load_manifests, target_digest

    spec = target.spec
    texts = {sf.path: (target.tree / sf.path).read_text(encoding="utf-8") for sf in target.sources}
    manifest = load_manifests().get(spec.name) if spec.kind == "pin" else None
    if spec.kind == "pin" and (manifest is None or manifest["target"]["sdist_sha256"] != spec.sdist_sha256):
        raise UserError(f"pin {spec.name!r} has no manifest built from its sdist in this "
                        "installation: a pinned target is scored only on its frozen manifest "
                        "(`killbench manifests build` makes one; a project directory needs none)")
    if manifest is not None:
        source = f"manifest {target_digest(manifest)}" + (f" {split_name} split" if split_name != "full" else "")
        return from_manifest(manifest, source, texts, split_name)
    if split_name != "full":
        raise UserError(f"{spec.name}: the {split_name} split exists only for the benchmark's "
                        "pinned targets; a project of your own has one task set (--split full)")
    run = mutate_target(spec, jobs=jobs, target=target, show_progress=True)
    return from_records(spec.name, run.records, f"mutate {target.fingerprint}", texts)


def limited(pop: Population, limit: int | None) -> Population:
    """The split's first `limit` tasks only (`run --limit`, a quick look): recorded in the
    population's own field, so that provenance can cut the manifest's population the same
    way; the sealed negative count no longer applies to the cut."""
    if limit is None or limit >= len(pop.task_set):
        return pop
    controls = {k: v for k, v in pop.controls.items() if k != "negative"}
    return pop.model_copy(update={"task_set": pop.task_set[:limit], "controls": controls,
                                  "source": f"{pop.source}, first {limit} tasks",
                                  "limit": limit})
