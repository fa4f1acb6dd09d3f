"""Every number a run is scored by, as small pure functions of its recorded evidence.

Inputs are records (``evidence``): the population, the submissions, the gate's entries,
the kill matrix, the generation summaries and the run config. Nothing here runs a test,
reads a file or calls a model, so each metric has a fast test on hand-made evidence, and
``verify`` recomputes every number from re-executed evidence the same way.

Every rate is a ``RateRecord``: ``k / n`` with what n counts and a 95% interval.
"""

from __future__ import annotations

from collections import Counter
from pydantic import Field

from .assertions import ASSERTION_CLASSES, classify_file
from .errors import InvariantError
from .evidence import (GateEntry, GenerationSummary, KillMatrix, Population, Record, RunConfig,
                       Submission)
from .population import import_only
from .stats import cluster_bootstrap, rate

RUN_BY_A_TEST, IMPORT_ONLY = "run by a test", "import only"
FILE_FUNNEL = ("files", "accepted (size, text)", "parsed", "not gaming (scan)", "collected")
TEST_FUNNEL = ("tests", "passes on clean", "stable (hash seed, order, directory)",
               "not gaming (disguises, audit)", "kept")
SCORE_SCHEMA = 2


class RateRecord(Record):
    k: int
    n: int
    value: float | None
    low: float
    high: float
    confidence: float = 0.95
    what: str


def r(k: int, n: int, what: str) -> RateRecord:
    return RateRecord(**rate(k, n, what).to_dict())


class Transfer(Record):
    within_function_executed: RateRecord
    within_function_all: RateRecord
    cross_function: RateRecord
    population: int
    minimum: int | None
    minimum_met: bool | None
    by_class: dict[str, int]


class ClassRow(Record):
    tests: int
    task_kills: int
    held_out_kills: int


class Specificity(Record):
    task_kills_per_test: dict[str, int]
    exactly_one: int
    tests: int


class BeyondTheSuite(Record):
    task_set_kills: int
    held_out: list[dict]


class Cost(Record):
    tokens_in: int
    tokens_out: int
    files: int
    tests: int
    tokens_per_file: float | None
    tokens_per_kept_test: float | None
    tokens_per_kill: float | None
    gate_calls: int
    wall_s: float
    cpu_s: float
    budgets: dict
    generator_metrics: dict


class TargetScore(Record):
    target: str
    population_source: str
    split: str = "full"
    complete: bool
    task_set: int
    held_out: int
    kept_tests: int
    kept_files: int
    kills: RateRecord
    kills_by_place: dict[str, RateRecord]
    timeouts_on_task_set: int
    killed_task_ids: list[str]
    file_funnel: dict[str, int]
    test_funnel: dict[str, int]
    rejections: dict[str, int]
    excluded_kept_tests: dict[str, str]
    assertion_classes: dict[str, int]
    by_class: dict[str, ClassRow]
    specificity: Specificity
    transfer: Transfer
    beyond_the_suite: BeyondTheSuite
    kills_by_test: dict[str, list[str]]
    classes_by_test: dict[str, str]
    mutants_run: int
    cost: Cost
    isolation: str
    controls: Controls | None = None


class Controls(Record):
    """Controls held: positive reference tests kept (of how many, every session of the run),
    and how many negative controls the task set holds (which ones is sealed: whether a kept
    test hit one is checked where the list is, by the leaderboard and verify)."""

    positive: int
    positive_kept: int
    negative: int


class Pooled(Record):
    k: int
    n: int
    estimate: float
    low: float
    high: float
    method: str
    resamples: int
    seed: int
    what: str


class Score(Record):
    schema_version: int = SCORE_SCHEMA
    killbench: str
    manifest_digest: str | None
    benchmark: str | None = None
    split: str = "full"
    run: dict
    complete: bool
    incomplete: list[str] = Field(default_factory=list)
    targets: dict[str, TargetScore]
    pooled_kills: Pooled | None
    pooled_kills_by_place: dict[str, dict[str, int]] | None
    value_class_share: RateRecord
    tokens_per_kill: float | None
    predictions: list[dict] = Field(default_factory=list)


# ---------------------------------------------------------------- kills


def kills_by_test(matrix: KillMatrix) -> dict[str, set[str]]:
    """Kept test -> the mutants it kills: passed on clean, failed on the mutant; an
    excluded test kills nothing."""
    out: dict[str, set[str]] = {row.key: set() for row in matrix.rows}
    clean = {row.key: row.clean for row in matrix.rows}
    for run in matrix.runs:
        for key, status in run.cells.items():
            if status == "failed" and clean.get(key) == "passed" and key not in matrix.excluded:
                out.setdefault(key, set()).add(run.mutant)
    return out


def killed(kills: dict[str, set[str]]) -> set[str]:
    return set().union(*kills.values()) if kills else set()


def timeouts(matrix: KillMatrix) -> set[str]:
    return {run.mutant for run in matrix.runs
            if any(st in ("timeout", "interrupted") for st in run.cells.values())}


def task_kills(pop: Population, kills: dict[str, set[str]]) -> RateRecord:
    return r(len(killed(kills) & set(pop.task_set)), len(pop.task_set), "task-set mutants")


def kills_by_place(pop: Population, kills: dict[str, set[str]]) -> dict[str, RateRecord]:
    task = set(pop.task_set)
    imp = import_only(pop)
    by_test = task - imp
    got = killed(kills)
    return {RUN_BY_A_TEST: r(len(got & by_test), len(by_test),
                             "task-set mutants on lines a test of the suite runs"),
            IMPORT_ONLY: r(len(got & imp), len(imp), "task-set mutants on lines only an import runs")}


# ---------------------------------------------------------------- the gate's funnel


def _entries_for(subs: list[Submission], entries: list[GateEntry]) -> list[GateEntry | None]:
    """The gate entry of each distinct submitted (candidate, task), in submission order."""
    by_key = {(e.candidate, e.task): e for e in entries}
    seen, out = set(), []
    for s in subs:
        key = (s.candidate, s.task)
        if key not in seen:
            seen.add(key)
            out.append(by_key.get(key))
    return out


def file_funnel(subs: list[Submission], entries: list[GateEntry]) -> dict[str, int]:
    """files -> accepted -> parsed -> not gaming (scan) -> collected; each step loses the
    files rejected as a whole at that stage (a file not gated is lost at the first)."""
    gated = _entries_for(subs, entries)
    lost = Counter()
    for e in gated:
        if e is None:
            lost["accepted (size, text)"] += 1
        elif e.file_reason in ("too-large", "invalid-text"):
            lost["accepted (size, text)"] += 1
        elif e.file_reason == "syntax-error":
            lost["parsed"] += 1
        elif e.file_reason == "gaming" and e.stage == "scan":
            lost["not gaming (scan)"] += 1
        elif e.file_reason:
            lost["collected"] += 1
    out, left = {}, len(gated)
    for step in FILE_FUNNEL:  # the first step, "files", loses nothing
        left -= lost[step]
        out[step] = left
    return out


TEST_STAGE = {"fails-on-clean": "passes on clean", "resource-limit": "passes on clean",
              "aborts-run": "passes on clean", "not-run": "passes on clean",
              "skipped": "passes on clean", "timeout": "passes on clean",
              "flaky": "stable (hash seed, order, directory)",
              "gaming": "not gaming (disguises, audit)", "tampering": "not gaming (disguises, audit)",
              "did-not-detect": "kept"}


def test_funnel(subs: list[Submission], entries: list[GateEntry]) -> dict[str, int]:
    """tests -> passes on clean -> stable -> not gaming -> kept, over the test functions of
    the files that had tests collected."""
    lost = Counter()
    total = 0
    for e in _entries_for(subs, entries):
        if e is None or e.file_reason:
            continue
        for t in e.tests:
            total += 1
            if t.kept:
                continue
            stage = TEST_STAGE.get(t.reason)
            if stage is None:
                raise InvariantError(f"rejection reason {t.reason!r} has no place in the test funnel")
            if t.reason == "timeout" and t.stage in ("mutant", "mutant-disguised"):
                stage = "kept"
            elif t.reason == "flaky" and t.stage == "mutant-disguised":
                stage = "kept"
            lost[stage] += 1
    out, left = {}, total
    for step in TEST_FUNNEL:  # the first step, "tests", loses nothing
        left -= lost[step]
        out[step] = left
    return out


def rejections(subs: list[Submission], entries: list[GateEntry]) -> dict[str, int]:
    """reason -> how many files (file-level) or tests were rejected for it."""
    c = Counter()
    for e in _entries_for(subs, entries):
        if e is None:
            c["not gated (gate-call budget spent)"] += 1
        elif e.file_reason:
            c[f"{e.file_reason} (file)"] += 1
        else:
            c.update(t.reason for t in e.tests if not t.kept)
    return dict(sorted(c.items()))


# ---------------------------------------------------------------- what kept tests are


def assertion_classes(sources: dict[str, str], keys: list[str]) -> dict[str, str]:
    """Kept test (node id) -> its assertion class, from its own function's AST."""
    out = {}
    per_file: dict[str, dict[str, str]] = {}
    for key in keys:
        path, _, name = key.partition("::")
        if path not in per_file:
            source = sources.get(path)
            try:
                per_file[path] = classify_file(source) if source is not None else {}
            except (ValueError, SyntaxError):
                per_file[path] = {}
        out[key] = per_file[path].get(name.split("[", 1)[0], "none")
    return out


def by_class(pop: Population, kills: dict[str, set[str]], classes: dict[str, str]) -> dict[str, ClassRow]:
    task, held = set(pop.task_set), set(pop.held_out)
    out = {}
    for c in ASSERTION_CLASSES:
        tests = [k for k in kills if classes.get(k) == c]
        ks = set().union(*[kills[k] for k in tests]) if tests else set()
        out[c] = ClassRow(tests=len(tests), task_kills=len(ks & task), held_out_kills=len(ks & held))
    return out


def specificity(pop: Population, kills: dict[str, set[str]]) -> Specificity:
    task = set(pop.task_set)
    counts = Counter(len(v & task) for v in kills.values())
    return Specificity(task_kills_per_test={str(k): v for k, v in sorted(counts.items())},
                       exactly_one=counts.get(1, 0), tests=len(kills))


def transfer(pop: Population, kills: dict[str, set[str]], written_for: dict[str, str | None],
             reached: dict[str, set[str]], classes: dict[str, str]) -> Transfer:
    """Kept tests frozen, against the held-out population: within the functions of the tasks
    they were written for, and across functions."""
    rows = pop.by_id()
    held = set(pop.held_out)
    fn_of = {i: rows[i].function for i in rows}
    test_fns = {k: {fn_of[t]} if t in fn_of else set() for k, t in written_for.items()}
    fns = set().union(*test_fns.values()) if test_fns else set()
    within_pop = {i for i in held if fn_of[i] in fns}
    ever_reached = set().union(*reached.values()) if reached else set()
    within_exec = within_pop & ever_reached
    within_killed = {i for i in within_pop
                     if any(i in kills[k] and fn_of[i] in test_fns.get(k, ()) for k in kills)}
    cross_pop = held - within_pop
    cross_killed = cross_pop & killed(kills)
    return Transfer(
        within_function_executed=r(len(within_killed & within_exec), len(within_exec),
                                   "held-out mutants in the tests' functions, on lines kept tests execute"),
        within_function_all=r(len(within_killed), len(within_pop),
                              "held-out mutants in the tests' functions"),
        cross_function=r(len(cross_killed), len(cross_pop), "held-out mutants in other functions"),
        population=len(held), minimum=pop.held_out_minimum,
        minimum_met=None if pop.held_out_minimum is None else len(held) >= pop.held_out_minimum,
        by_class={c: sum(1 for i in within_killed | cross_killed
                         if any(i in kills[k] and classes.get(k) == c for k in kills))
                  for c in ASSERTION_CLASSES})


def beyond_the_suite(pop: Population, kills: dict[str, set[str]]) -> BeyondTheSuite:
    rows = pop.by_id()
    out = []
    for i in sorted(pop.held_out):
        if rows[i].verdict != "killed":
            by = sorted(k for k in kills if i in kills[k])
            if by:
                m = rows[i]
                out.append({"mutant": i, "path": m.path, "line": m.line, "operator": m.operator,
                            "baseline_verdict": m.verdict, "killed_by": by})
    return BeyondTheSuite(task_set_kills=len(killed(kills) & set(pop.task_set)), held_out=out)


def cost(summary: GenerationSummary | None, files: int, tests: int, kept: int, k: int) -> Cost:
    s = summary
    t_in, t_out = (s.tokens_in, s.tokens_out) if s else (0, 0)
    tokens = t_in + t_out

    def per(n):
        return round(tokens / n, 1) if n and tokens else (0.0 if n else None)

    return Cost(tokens_in=t_in, tokens_out=t_out, files=files, tests=tests,
                tokens_per_file=per(files), tokens_per_kept_test=per(kept), tokens_per_kill=per(k),
                gate_calls=s.gate_calls if s else 0, wall_s=s.wall_s if s else 0.0,
                cpu_s=s.cpu_s if s else 0.0, budgets=s.budgets.dump() if s else {},
                generator_metrics=dict(s.generator_metrics) if s else {})


# ---------------------------------------------------------------- one target, a run


def controls_held(pop: Population, control_entries: list[GateEntry]) -> Controls:
    """A positive control is held when every gating of its reference test in the run kept
    it (and it was gated at least once)."""
    positive = [pc["id"] for pc in pop.controls.get("positive", [])]
    by_task: dict[str, list[GateEntry]] = {}
    for e in control_entries:
        by_task.setdefault(e.task, []).append(e)
    held = sum(1 for i in positive if by_task.get(i)
               and all(e.file_reason is None and e.tests and all(t.kept for t in e.tests)
                       for e in by_task[i]))
    neg = (pop.controls.get("negative") or {}).get("count", 0)
    return Controls(positive=len(positive), positive_kept=held, negative=neg)


def target_score(pop: Population, subs: list[Submission], entries: list[GateEntry],
                 matrix: KillMatrix, summary: GenerationSummary | None,
                 sources: dict[str, str], complete: bool,
                 control_entries: list[GateEntry] = ()) -> TargetScore:
    """Every number of one target. `sources`: kept files' text by their path in the run
    (tests/test_killbench_ID.py), for the assertion classifier."""
    kills = kills_by_test(matrix)
    killed_all = killed(kills)
    task = set(pop.task_set)
    classes = assertion_classes(sources, sorted(kills))
    written_for = {row.key: row.task for row in matrix.rows}
    reached = {row.key: set(row.reached) for row in matrix.rows}
    ff, tf = file_funnel(subs, entries), test_funnel(subs, entries)
    kept_files = len({row.candidate for row in matrix.rows})
    k = len(killed_all & task)
    return TargetScore(
        target=pop.target, population_source=pop.source, split=pop.split, complete=complete,
        task_set=len(pop.task_set), held_out=len(pop.held_out), kept_tests=len(matrix.rows),
        kept_files=kept_files, kills=task_kills(pop, kills), kills_by_place=kills_by_place(pop, kills),
        timeouts_on_task_set=len((timeouts(matrix) - killed_all) & task),
        killed_task_ids=sorted(killed_all & task), file_funnel=ff, test_funnel=tf,
        rejections=rejections(subs, entries), excluded_kept_tests=dict(sorted(matrix.excluded.items())),
        assertion_classes=dict(sorted(Counter(classes.values()).items())),
        by_class=by_class(pop, kills, classes), specificity=specificity(pop, kills),
        transfer=transfer(pop, kills, written_for, reached, classes),
        beyond_the_suite=beyond_the_suite(pop, kills),
        kills_by_test={key: sorted(v) for key, v in sorted(kills.items())},
        classes_by_test=dict(sorted(classes.items())),
        mutants_run=len({run.mutant for run in matrix.runs}),
        cost=cost(summary, ff["files"], tf["tests"], len(matrix.rows), k),
        isolation=matrix.isolation, controls=controls_held(pop, list(control_entries)))


def pooled(targets: dict[str, TargetScore], resamples: int, seed: int) -> Pooled | None:
    clusters = [(t.kills.k, t.kills.n) for t in targets.values()]
    if not clusters or not sum(n for _, n in clusters):
        return None
    est = cluster_bootstrap(clusters, resamples=resamples, seed=seed)
    return Pooled(k=sum(k for k, _ in clusters), n=sum(n for _, n in clusters), estimate=est[0],
                  low=est[1], high=est[2], method=est.method,
                  resamples=resamples, seed=seed, what="task-set mutants, pooled over targets")


def value_class_share(targets: dict[str, TargetScore]) -> RateRecord:
    value = sum(t.by_class["value"].tests for t in targets.values())
    kept = sum(t.kept_tests for t in targets.values())
    return r(value, kept, "kept tests whose strongest assertion checks a concrete value")


def tokens_per_kill(targets: dict[str, TargetScore]) -> float | None:
    tokens = sum(t.cost.tokens_in + t.cost.tokens_out for t in targets.values())
    k = sum(t.kills.k for t in targets.values())
    return round(tokens / k, 1) if k else None


def run_score(config: RunConfig, targets: dict[str, TargetScore], *, killbench: str,
              manifest_digest: str | None, incomplete: list[str], resamples: int,
              seed: int, benchmark: str | None = None) -> Score:
    places = [t.kills_by_place for t in targets.values()]
    by_place = {p: {"k": sum(x[p].k for x in places), "n": sum(x[p].n for x in places)}
                for p in (RUN_BY_A_TEST, IMPORT_ONLY)} if places else None
    return Score(
        killbench=killbench, manifest_digest=manifest_digest, benchmark=benchmark,
        split=config.split,
        run={"generator": config.generator.dump(), "model": config.model, "seed": config.seed,
             "isolation": config.isolation, "outside_rules": list(config.outside_rules),
             "budgets": {n: t.budgets.dump() for n, t in config.targets.items()},
             "gate_timeout_s": config.gate_timeout_s, "options": config.options},
        complete=not incomplete, incomplete=incomplete, targets=targets,
        pooled_kills=pooled(targets, resamples, seed), pooled_kills_by_place=by_place,
        value_class_share=value_class_share(targets), tokens_per_kill=tokens_per_kill(targets))


__all__ = ["FILE_FUNNEL", "IMPORT_ONLY", "RUN_BY_A_TEST", "Score", "TEST_FUNNEL", "TargetScore",
           "kills_by_test", "run_score", "target_score"]
