"""Score a finished run directory against the benchmark, with no model call.

The kept tests are frozen: each is run, as written, against every task-set mutant and
every held-out mutant whose line a kept test executes (a mutant on a line no kept
test executes cannot change their outcome and is counted as not killed, the same
rule as the harness's reachability). All kept tests of a target run together in one
pytest process per mutant, and each test's own outcome is read from the probe's
events: a test kills a mutant when it passes on clean code and fails on the mutant.
Timeouts are reported apart and never counted as kills.

Every rate is `k / n` with what n counts, and a 95% interval.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .assertions import ASSERTION_CLASSES, classify_file
from .config import resolve
from .errors import UserError
from .gate import GATE_LIMITS
from .harness import default_jobs, load_or_run_baseline, mutate_target, workdir_for
from .workspace import exclusive
from .manifests import IMPORT_ONLY, RUN_BY_A_TEST, current_digest, load_manifests, target_digest
from .mutate import apply
from .records import Mutant
from .sandbox import Sandbox
from .stats import cluster_bootstrap, rate
from .targets import prepare

FUNNEL = ("attempts", "parsed", "not gaming (scan)", "collected", "passes on clean",
          "stable on clean", "not gaming (neutral edit)", "kept")
SCORE_TIMEOUT = 60.0


@dataclass
class Population:
    """Task set and held-out population of one target, with baseline verdicts."""

    mutants: dict[str, Mutant]
    task_set: list[str]
    held_out: list[str]
    baseline_verdict: dict[str, str]
    minimum: int | None  # pre-registered held-out minimum (None: not pre-registered)
    source: str
    # task-set mutants on lines only an import runs: a kill there checks a module-level value
    import_only: frozenset = frozenset()


def load_run(run_dir: Path) -> tuple[dict, dict, list[dict]]:
    if not (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} is not a run directory (no config.json)")
    config = json.loads((run_dir / "config.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    gate = []
    if (run_dir / "gate.jsonl").exists():
        for line in (run_dir / "gate.jsonl").read_text().splitlines():
            if line.strip():
                gate.append(json.loads(line))
    return config, summary, gate


def population(spec, target, jobs: int) -> Population:
    names = set(Mutant.__dataclass_fields__)
    manifest = load_manifests().get(spec.name) if spec.kind == "pin" else None
    if manifest is not None and manifest["target"]["sdist_sha256"] == spec.sdist_sha256:
        recs = {r["id"]: r for r in manifest["mutants"]}
        return Population({i: Mutant(**{k: r[k] for k in names}) for i, r in recs.items()},
                          list(manifest["task_set"]), list(manifest["held_out"]["ids"]),
                          {i: r["verdict"] for i, r in recs.items()}, manifest["held_out"]["minimum"],
                          f"manifest {target_digest(manifest)}",
                          frozenset(i for i in manifest["task_set"] if not recs[i]["covered_by"]))
    run = mutate_target(spec, jobs=jobs, target=target, show_progress=False)
    task = [r for r in run.records if r.outcome.verdict == "survived"
            and r.reach.reachable and not r.mutant.unkillable]
    task_ids = {r.mutant.id for r in task}
    held = sorted(r.mutant.id for r in run.records if r.mutant.id not in task_ids
                  and r.outcome.verdict != "invalid" and not r.mutant.unkillable)
    return Population({r.mutant.id: r.mutant for r in run.records}, sorted(task_ids), held,
                      {r.mutant.id: r.outcome.verdict for r in run.records}, None,
                      f"mutate {target.fingerprint}",
                      frozenset(r.mutant.id for r in task if not r.reach.covered_by))


def _place_tests(sb: Sandbox, sources: dict[str, str]) -> dict[str, str]:
    """Write kept tests into the sandbox's test dir; file path (rel. tree) -> candidate id."""
    base = sb.tree
    for t in sb.target.spec.tests:
        if (sb.tree / t).is_dir():
            base = sb.tree / t
            break
    out = {}
    for cid, src in sources.items():
        p = base / f"test_killbench_{cid}.py"
        p.write_text(src, encoding="utf-8")
        out[p.relative_to(sb.tree).as_posix()] = cid
    return out


def _per_candidate(report, files: dict[str, str]) -> dict[str, str]:
    """candidate id -> passed / failed, from per-test events (a file fails if any test does)."""
    out = {cid: "passed" for cid in files.values()}
    ran = set()
    for t in report.tests:
        cid = files.get(t.nodeid.split("::", 1)[0])
        if cid is None:
            continue
        ran.add(cid)
        if t.outcome == "failed" and not t.xfail:
            out[cid] = "failed"
    for e in report.collect_errors:
        cid = files.get(e["nodeid"].split("::", 1)[0])
        if cid:
            out[cid] = "failed"
    for cid in out:
        if cid not in ran and out[cid] == "passed":
            out[cid] = "not-run"
    return out


class KillMatrix:
    """Which kept test kills which mutant, by running them."""

    def __init__(self, target, baseline, sources: dict[str, str], jobs: int, workdir: Path):
        self.target = target
        self.sources = sources
        self.sandboxes = [Sandbox(target, workdir / "sandboxes" / f"score{i}") for i in range(jobs)]
        self.files = [_place_tests(sb, sources) for sb in self.sandboxes]
        self._pool = list(range(jobs))
        self._cv = threading.Condition()
        self.timeout = SCORE_TIMEOUT + 2.0 * len(sources)

    def _run(self, i: int, coverage: bool = False):
        sb = self.sandboxes[i]
        report, cov = sb.run_pytest(sorted(self.files[i]), select=None, exclude=[],
                                    timeout=self.timeout, coverage=coverage, limits=GATE_LIMITS)
        return report, cov

    def clean(self) -> tuple[dict[str, str], dict]:
        report, cov = self._run(0, coverage=True)
        return _per_candidate(report, self.files[0]), cov or {}

    def mutant(self, mutant: Mutant) -> tuple[dict[str, str], bool]:
        with self._cv:
            while not self._pool:
                self._cv.wait()
            i = self._pool.pop()
        sb = self.sandboxes[i]
        try:
            original = (self.target.tree / mutant.path).read_bytes()
            sb.write(mutant.path, apply(original, mutant))
            try:
                report, _ = self._run(i)
            finally:
                sb.restore()
            return _per_candidate(report, self.files[i]), report.timed_out
        finally:
            with self._cv:
                self._pool.append(i)
                self._cv.notify()


def _executed(cov: dict, files: dict[str, str]) -> tuple[dict[str, set], set]:
    """(path -> lines executed by some kept test, and import-time lines as (path, line))."""
    lines: dict[str, set] = defaultdict(set)
    at_import = set()
    for path, entry in cov.items():
        for line, ctxs in entry.get("executed", {}).items():
            if "" in ctxs:
                at_import.add((path, int(line)))
            if any(c.split("::", 1)[0] in files for c in ctxs if c):
                lines[path].add(int(line))
    return lines, at_import


def _reached(m: Mutant, lines: dict[str, set], at_import: set, index_cache: dict, target) -> bool:
    from .reach import StatementIndex

    if m.path not in index_cache:
        index_cache[m.path] = StatementIndex((target.tree / m.path).read_text(encoding="utf-8"))
    first = min(index_cache[m.path].statement_line(m.start, m.end, m.line), m.line)
    span = range(first, m.end_line + 1)
    return any(ln in lines.get(m.path, ()) or (m.path, ln) in at_import for ln in span)


def _strongest(classes: dict[str, str]) -> str:
    for c in ASSERTION_CLASSES:
        if c in classes.values():
            return c
    return "none"


def score_target(name: str, ref: str, gate_entries: list[dict], run_dir: Path, jobs: int) -> dict:
    spec = resolve(ref)
    target = prepare(spec)
    with exclusive(workdir_for(target), spec.name):
        return _score_target(name, spec, target, gate_entries, run_dir, jobs)


def _score_target(name: str, spec, target, gate_entries: list[dict], run_dir: Path, jobs: int) -> dict:
    workdir = workdir_for(target)
    baseline = load_or_run_baseline(target, workdir)
    pop = population(spec, target, jobs)
    tasks = {t["id"]: t for t in json.loads((run_dir / "tasks" / f"{name}.json").read_text())}
    if sorted(tasks) != sorted(pop.task_set):
        raise UserError(f"{name}: the run's task set differs from the benchmark's "
                        f"({len(tasks)} vs {len(pop.task_set)} tasks); it cannot be scored against it")
    kept_entries = [e for e in gate_entries if e["kept"]]
    sources = {e["candidate"]: (run_dir / "candidates" / f"{e['candidate']}.py").read_text(encoding="utf-8")
               for e in kept_entries}
    written_for: dict[str, set] = defaultdict(set)
    for e in kept_entries:
        if e["task"]:
            written_for[e["candidate"]].add(e["task"])
    result: dict = {"target": name, "population_source": pop.source, "task_set": len(pop.task_set),
                    "held_out": len(pop.held_out), "kept_tests": len(sources)}
    kills: dict[str, set] = {cid: set() for cid in sources}
    timeouts: set = set()
    excluded: dict[str, str] = {}
    if sources:
        matrix = KillMatrix(target, baseline, sources, jobs, workdir)
        clean, cov = matrix.clean()
        for cid, status in clean.items():
            if status != "passed":
                excluded[cid] = f"{status} on clean code when run with the other kept tests"
        lines, at_import = _executed(cov, matrix.files[0])
        index_cache: dict = {}
        todo = [i for i in pop.task_set + pop.held_out
                if _reached(pop.mutants[i], lines, at_import, index_cache, target)]
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            for mid, (status, timed_out) in zip(todo, ex.map(lambda i: matrix.mutant(pop.mutants[i]), todo)):
                if timed_out:
                    timeouts.add(mid)
                    continue
                for cid, st in status.items():
                    if st == "failed" and cid not in excluded:
                        kills[cid].add(mid)
        result["mutants_run"] = len(todo)
        result["mutants_not_reached_by_kept_tests"] = len(pop.task_set) + len(pop.held_out) - len(todo)
    result["excluded_kept_tests"] = excluded
    task_set, held = set(pop.task_set), set(pop.held_out)
    killed_tasks = set().union(*kills.values()) & task_set if kills else set()
    result["kills"] = rate(len(killed_tasks), len(task_set), "task-set mutants").to_dict()
    result["kills_killable"] = rate(len(killed_tasks), len(task_set), "killable task-set mutants "
                                    "(the task set excludes unkillable mutants by construction)").to_dict()
    by_test = task_set - pop.import_only
    result["kills_by_place"] = {
        RUN_BY_A_TEST: rate(len(killed_tasks & by_test), len(by_test),
                            "task-set mutants on lines a test of the suite runs").to_dict(),
        IMPORT_ONLY: rate(len(killed_tasks & pop.import_only), len(pop.import_only),
                          "task-set mutants on lines only an import runs").to_dict()}
    result["timeouts_on_task_set"] = len(timeouts & task_set)
    result["killed_task_ids"] = sorted(killed_tasks)
    # funnel
    reasons = Counter(e["reason"] for e in gate_entries if not e["kept"])
    result["funnel"] = funnel_of(gate_entries)
    beyond_own = sum(1 for cid in sources if kills[cid] - written_for.get(cid, set()) & task_set)
    result["funnel"]["kills beyond its own mutant"] = beyond_own
    result["rejections"] = dict(sorted(reasons.items()))
    # assertion classes
    classes = {}
    for cid, src in sources.items():
        try:
            classes[cid] = _strongest(classify_file(src))
        except ValueError:
            classes[cid] = "none"
    result["assertion_classes"] = dict(sorted(Counter(classes.values()).items()))
    per_class = {}
    for c in ASSERTION_CLASSES:
        ks = set().union(*[kills[cid] for cid in sources if classes[cid] == c]) if sources else set()
        per_class[c] = {"tests": sum(1 for v in classes.values() if v == c),
                        "task_kills": len(ks & task_set), "held_out_kills": len(ks & held)}
    result["by_class"] = per_class
    # specificity
    spec_counts = Counter(len(kills[cid] & task_set) for cid in sources)
    result["specificity"] = {"task_kills_per_test": {str(k): v for k, v in sorted(spec_counts.items())},
                             "exactly_one": spec_counts.get(1, 0), "tests": len(sources)}
    # transfer
    fn_of = {i: pop.mutants[i].function for i in pop.mutants}
    test_fns = {cid: {tasks[t]["function"] for t in written_for.get(cid, ())} for cid in sources}
    fns = set().union(*test_fns.values()) if test_fns else set()
    within_pop = {i for i in held if fn_of[i] in fns}
    index_cache = {}
    if sources:
        within_exec = {i for i in within_pop
                       if _reached(pop.mutants[i], lines, at_import, index_cache, target)}
    else:
        within_exec = set()
    within_killed = {i for i in within_pop if any(i in kills[cid] and fn_of[i] in test_fns[cid]
                                                   for cid in sources)}
    cross_pop = held - within_pop
    cross_killed = {i for i in cross_pop if any(i in kills[cid] for cid in sources)}
    result["transfer"] = {
        "within_function_executed": rate(len(within_killed & within_exec), len(within_exec),
                                         "held-out mutants in the tests' functions, on lines kept tests execute").to_dict(),
        "within_function_all": rate(len(within_killed), len(within_pop),
                                    "held-out mutants in the tests' functions").to_dict(),
        "cross_function": rate(len(cross_killed), len(cross_pop),
                               "held-out mutants in other functions").to_dict(),
        "population": len(held),
        "minimum": pop.minimum,
        "minimum_met": None if pop.minimum is None else len(held) >= pop.minimum,
        "by_class": {c: sum(1 for i in within_killed | cross_killed
                            if any(i in kills[cid] and classes[cid] == c for cid in sources))
                     for c in ASSERTION_CLASSES},
    }
    # beyond the suite
    beyond = []
    for i in sorted(held):
        if pop.baseline_verdict.get(i) != "killed":
            by = sorted(cid for cid in sources if i in kills[cid])
            if by:
                m = pop.mutants[i]
                beyond.append({"mutant": i, "path": m.path, "line": m.line, "operator": m.operator,
                               "baseline_verdict": pop.baseline_verdict.get(i), "killed_by": by})
    result["beyond_the_suite"] = {"task_set_kills": len(killed_tasks), "held_out": beyond}
    result["kills_by_test"] = {cid: sorted(kills[cid]) for cid in sorted(sources)}
    result["classes_by_test"] = dict(sorted(classes.items()))
    return result


def funnel_of(entries: list[dict]) -> dict:
    """attempts -> parsed -> ... -> kept, each step losing the rejections of its stage."""

    def lost(reason: str, *stages: str) -> int:
        return sum(1 for e in entries if not e["kept"] and e["reason"] == reason
                   and (not stages or e["stage"] in stages))

    steps = [len(entries)]
    losses = [
        lost("syntax-error"),
        lost("gaming", "parse"),
        lost("no-test-collected") + lost("fails-on-clean", "collect"),
        lost("fails-on-clean", "clean") + lost("timeout", "clean", "collect") + lost("modified-target"),
        lost("flaky"),
        lost("gaming", "neutral"),
        lost("did-not-detect") + lost("timeout", "mutant"),
    ]
    for loss in losses:
        steps.append(steps[-1] - loss)
    out = dict(zip(FUNNEL, steps))
    kept = sum(1 for e in entries if e["kept"])
    assert out["kept"] == kept, f"funnel ends at {out['kept']} but {kept} tests were kept: " \
        "a rejection reason is not placed in the funnel"
    return out


def _meta_sum(meta, key: str) -> float:
    """Sum of a numeric cost field wherever it appears in a candidate's meta (model-free
    generators report search calls and seconds there instead of tokens)."""
    if isinstance(meta, dict):
        return sum((v if k == key and isinstance(v, (int, float)) else _meta_sum(v, key))
                   for k, v in meta.items())
    return 0


def score_run(run_dir: Path, jobs: int | None = None, resamples: int = 10_000, seed: int = 0) -> dict:
    config, summary, gate = load_run(run_dir)
    jobs = jobs or default_jobs()
    per_target = {}
    for name, tconf in config.get("targets", {}).items():
        entries = [e for e in gate if e["target"] == name]
        per_target[name] = score_target(name, tconf.get("ref", name), entries, run_dir, jobs)
        s = summary.get(name, {})
        budget = s.get("budget") or {}
        kept = per_target[name]["kept_tests"]
        k = per_target[name]["kills"]["k"]
        attempts = len(entries)
        t_in, t_out = budget.get("spent_in", 0), budget.get("spent_out", 0)
        search_calls = sum(_meta_sum(e.get("meta") or {}, "search_calls") for e in entries)
        search_seconds = sum(_meta_sum(e.get("meta") or {}, "search_seconds") for e in entries)
        per_target[name]["cost"] = {
            "search_calls": search_calls, "search_seconds": round(search_seconds, 3),
            "tokens_in": t_in, "tokens_out": t_out, "attempts": attempts,
            "tokens_per_attempt": round((t_in + t_out) / attempts, 1) if attempts else None,
            "tokens_per_kept_test": round((t_in + t_out) / kept, 1) if kept else None,
            "tokens_per_kill": round((t_in + t_out) / k, 1) if k else None,
            "wall_s": s.get("wall_s"), "generator_gate_calls": s.get("generator_gate_calls", 0)}
    clusters = [(t["kills"]["k"], t["kills"]["n"]) for t in per_target.values()]
    pooled = None
    if clusters and sum(n for _, n in clusters):
        est = cluster_bootstrap(clusters, resamples=resamples, seed=seed)
        pooled = {"k": sum(k for k, _ in clusters), "n": sum(n for _, n in clusters),
                  "estimate": est[0], "low": est[1], "high": est[2],
                  "method": getattr(est, "method", "cluster bootstrap"), "resamples": resamples,
                  "seed": seed, "what": "task-set mutants, pooled over targets"}
    from .preregister import judge, predictions

    result = {"schema": 1, "killbench": __version__, "manifest_digest": current_digest(),
            "run": {"generator": config["generator"], "model": config.get("model"),
                    "budget_per_target": config.get("budget_per_target"), "seed": config.get("seed")},
            "targets": per_target, "pooled_kills": pooled}
    places = [t["kills_by_place"] for t in per_target.values()]
    result["pooled_kills_by_place"] = {
        p: {"k": sum(x[p]["k"] for x in places), "n": sum(x[p]["n"] for x in places)}
        for p in (RUN_BY_A_TEST, IMPORT_ONLY)} if places else None
    result["predictions"] = []
    for pr in predictions(run_dir):
        pr["outcome"] = judge(pr["check"], result) if pr.get("check") else "judge by hand"
        result["predictions"].append(pr)
    return result


def _r(d: dict) -> str:
    if not d["n"]:
        return f"0 / 0 {d['what']}"
    return (f"{d['k']} / {d['n']} ({100 * d['k'] / d['n']:.1f}%) [95% CI {100 * d['low']:.1f}%-"
            f"{100 * d['high']:.1f}%] of {d['what']}")


def render_score(result: dict) -> str:
    from tabulate import tabulate

    run = result["run"]
    lines = [f"killbench {result['killbench']} · manifest digest {result['manifest_digest'] or '(none)'}",
             f"generator {run['generator']['name']} {run['generator']['version']} · model "
             f"{run['model'] or '(none)'} · budget {run['budget_per_target']} tokens per target", ""]
    for name, t in result["targets"].items():
        lines.append(f"## {name} ({t['population_source']})")
        lines.append(f"kills:    {_r(t['kills'])}")
        for place, r in t.get("kills_by_place", {}).items():
            lines.append(f"          {place}: {r['k']} / {r['n']}")
        if t["timeouts_on_task_set"]:
            lines.append(f"          {t['timeouts_on_task_set']} task-set mutants timed out (not kills)")
        tr = t["transfer"]
        lines.append(f"transfer: within function {_r(tr['within_function_executed'])}")
        lines.append(f"          within function {_r(tr['within_function_all'])}")
        lines.append(f"          cross function  {_r(tr['cross_function'])}")
        met = {None: "not pre-registered", True: "met", False: "NOT met"}[tr["minimum_met"]]
        lines.append(f"          held-out population {tr['population']}, pre-registered minimum "
                     f"{tr['minimum']}: {met}")
        order = [k for k in (*FUNNEL, "kills beyond its own mutant") if k in t["funnel"]]
        lines.append("funnel:   " + " -> ".join(f"{k} {t['funnel'][k]}" for k in order))
        if t["rejections"]:
            lines.append("rejected: " + ", ".join(f"{k} {v}" for k, v in t["rejections"].items()))
        rows = [[c, v["tests"], v["task_kills"], v["held_out_kills"]] for c, v in t["by_class"].items()]
        lines.append(tabulate(rows, headers=["assertion class", "kept tests", "task kills",
                                             "held-out kills"], tablefmt="github"))
        sp = t["specificity"]
        lines.append(f"specificity: {sp['exactly_one']} of {sp['tests']} kept tests kill exactly one "
                     f"task-set mutant; distribution {sp['task_kills_per_test']}")
        c = t.get("cost", {})
        lines.append(f"cost: {c.get('tokens_in', 0)} tokens in, {c.get('tokens_out', 0)} out; per kill "
                     f"{c.get('tokens_per_kill')}; wall {c.get('wall_s')} s; gate calls by the "
                     f"generator {c.get('generator_gate_calls', 0)}"
                     + (f"; search: {c['search_calls']} calls, {c['search_seconds']} s"
                        if c.get("search_calls") else ""))
        b = t["beyond_the_suite"]["held_out"]
        lines.append(f"beyond the suite: {len(b)} held-out mutants the target's own suite misses are "
                     "killed by kept tests" + ("".join(f"\n  - {x['path']}:{x['line']} {x['operator']} "
                                                      f"by {', '.join(x['killed_by'])}" for x in b)))
        lines.append("")
    for pr in result.get("predictions", []):
        flags = ("" if pr["intact"] else " [TEXT CHANGED SINCE REGISTRATION]") + \
            ("" if pr["before_run"] else " [REGISTERED AFTER THE RUN STARTED]")
        lines.append(f"prediction {pr['sha256'][:12]} ({pr['registered_at']}){flags}: {pr['text']}"
                     + (f"\n  check {pr['check']}: {pr['outcome'].upper()}" if pr.get("check")
                        else "\n  no machine check stored: judge it against the numbers above"))
    p = result.get("pooled_kills")
    if p:
        lines.append(f"pooled kills: {p['k']} / {p['n']} ({100 * p['estimate']:.1f}%) [95% CI "
                     f"{100 * p['low']:.1f}%-{100 * p['high']:.1f}%] of {p['what']} "
                     f"({p['method']}, {p['resamples']} resamples, seed {p['seed']})")
    for place, x in (result.get("pooled_kills_by_place") or {}).items():
        lines.append(f"              {place}: {x['k']} / {x['n']}")
    return "\n".join(lines)
