"""The terminal view of a score: reads a ``Score``, prints it; computes nothing."""

from __future__ import annotations

from tabulate import tabulate

from .metrics import FILE_FUNNEL, TEST_FUNNEL, RateRecord, Score


def rate_text(d: RateRecord) -> str:
    if not d.n:
        return f"0 / 0 {d.what}"
    return (f"{d.k} / {d.n} ({100 * d.k / d.n:.1f}%) [95% CI {100 * d.low:.1f}%-"
            f"{100 * d.high:.1f}%] of {d.what}")


def budget_text(budgets: dict) -> str:
    """What bounded a generator on a target: tokens only when a token budget applied."""
    parts = []
    if budgets.get("tokens") is not None:
        parts.append(f"{budgets['tokens']} tokens")
    parts.append(f"{budgets.get('gate_calls')} gate calls")
    parts.append(f"{budgets.get('seconds', 0):.0f} s")
    return ", ".join(parts)


def render_score(score: Score) -> str:
    run = score.run
    g = run["generator"]
    lines = [f"killbench {score.killbench} · benchmark {score.benchmark or '(none)'} · "
             f"{score.split} split · manifest digest {score.manifest_digest or '(none)'}",
             f"generator {g['name']} {g['version']} · model {run.get('model') or '(none)'} · "
             f"isolation {run.get('isolation')}"
             + (f" · OUTSIDE THE RULES: {'; '.join(run['outside_rules'])}" if run.get("outside_rules")
                else ""), ""]
    if not score.complete:
        lines += ["INCOMPLETE RUN (not comparable, not for the leaderboard): "
                  + "; ".join(score.incomplete), ""]
    for name, t in score.targets.items():
        lines.append(f"## {name} ({t.population_source})")
        lines.append(f"kills:    {rate_text(t.kills)}")
        if t.controls is not None and (t.controls.positive or t.controls.negative):
            lines.append(f"controls: positive {t.controls.positive_kept} of {t.controls.positive} "
                         f"kept by the gate; {t.controls.negative} negative among the tasks "
                         "(which is sealed; the leaderboard and verify check them)")
        for place, rr in t.kills_by_place.items():
            lines.append(f"          {place}: {rr.k} / {rr.n}")
        if t.timeouts_on_task_set:
            lines.append(f"          {t.timeouts_on_task_set} task-set mutants timed out (not kills)")
        tr = t.transfer
        if tr.within_function_all.n:
            lines.append(f"transfer: within function {rate_text(tr.within_function_executed)}")
            lines.append(f"          within function {rate_text(tr.within_function_all)}")
        else:  # "0 / 0" read as a failure; there was nothing to count
            lines.append("transfer: within function: none to count (no held-out mutant in the "
                         "functions of the kept tests' tasks; task-less tests have none)")
        lines.append(f"          cross function  {rate_text(tr.cross_function)}")
        if tr.minimum is None:
            lines.append(f"          held-out population {tr.population} (no pre-registered minimum)")
        else:
            lines.append(f"          held-out population {tr.population}, pre-registered minimum "
                         f"{tr.minimum}: {'met' if tr.minimum_met else 'NOT met'}")
        lines.append("files:    " + " -> ".join(f"{k} {t.file_funnel[k]}" for k in FILE_FUNNEL))
        lines.append("tests:    " + " -> ".join(f"{k} {t.test_funnel[k]}" for k in TEST_FUNNEL))
        if t.rejections:
            lines.append("rejected: " + ", ".join(f"{k} {v}" for k, v in t.rejections.items()))
        for key, why in t.excluded_kept_tests.items():
            lines.append(f"excluded: {key}: {why}")
        rows = [[c, v.tests, v.task_kills, v.held_out_kills] for c, v in t.by_class.items()]
        lines.append(tabulate(rows, headers=["assertion class", "kept tests", "task kills",
                                             "held-out kills"], tablefmt="github"))
        sp = t.specificity
        lines.append(f"specificity: {sp.exactly_one} of {sp.tests} kept tests kill exactly one "
                     f"task-set mutant; distribution {sp.task_kills_per_test}")
        c = t.cost
        scalars = {k: v for k, v in c.generator_metrics.items() if not isinstance(v, dict)}
        spent = f"{c.tokens_in} tokens in, {c.tokens_out} out" if c.budgets.get("tokens") is not None \
            else "no tokens (model-free)"
        per_kill = f"; {c.tokens_per_kill} tokens per kill" if c.tokens_per_kill else ""
        lines.append(f"cost: {spent}{per_kill}; {c.gate_calls} gate calls; generation {c.wall_s:.0f} s "
                     f"wall, {c.cpu_s:.0f} s CPU; budget {budget_text(c.budgets)}"
                     + (f"; generator: {', '.join(f'{k} {v}' for k, v in sorted(scalars.items()))}"
                        if scalars else ""))
        b = t.beyond_the_suite.held_out
        lines.append(f"beyond the suite: {len(b)} held-out mutants the target's own suite misses are "
                     "killed by kept tests" + ("".join(f"\n  - {x['path']}:{x['line']} {x['operator']} "
                                                      f"by {', '.join(x['killed_by'])}" for x in b)))
        lines.append("")
    for pr in score.predictions:
        flags = ("" if pr["intact"] else " [TEXT CHANGED SINCE REGISTRATION]") + \
            ("" if pr["before_run"] else " [REGISTERED AFTER THE RUN STARTED]")
        lines.append(f"prediction {pr['sha256'][:12]} ({pr['registered_at']}){flags}: {pr['text']}"
                     + (f"\n  check {pr['check']}: {pr['outcome'].upper()}" if pr.get("check")
                        else "\n  no machine check stored: judge it against the numbers above"))
    p = score.pooled_kills
    if p:
        lines.append(f"pooled kills: {p.k} / {p.n} ({100 * p.estimate:.1f}%) [95% CI "
                     f"{100 * p.low:.1f}%-{100 * p.high:.1f}%] of {p.what} "
                     f"({p.method}, {p.resamples} resamples, seed {p.seed})")
    for place, x in (score.pooled_kills_by_place or {}).items():
        lines.append(f"              {place}: {x['k']} / {x['n']}")
    v = score.value_class_share
    lines.append(f"value-class share: {v.k} / {v.n} kept tests" + (
        f"; tokens per kill {score.tokens_per_kill}" if score.tokens_per_kill else ""))
    return "\n".join(lines)
