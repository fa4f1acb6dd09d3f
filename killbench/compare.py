"""Paired comparison of generators scored on the same task set.

Two runs are compared mutant by mutant: both rates, the difference with a paired
bootstrap interval (resampling whole targets when there are several), the exact
McNemar p-value on the discordant mutants, and one plain sentence. With more runs,
entries are grouped by "not distinguishable from the group's leader" instead of
being given strict ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UserError
from .stats import mcnemar_exact, paired_bootstrap_difference, tied_groups


def _load_score(run_dir: Path) -> dict:
    path = run_dir / "score.json"
    if not path.exists():
        raise UserError(f"{run_dir} has no score.json: run `killbench score {run_dir}` first")
    return json.loads(path.read_text())


def _label(score: dict, run_dir: Path) -> str:
    g = score["run"]["generator"]["name"]
    m = score["run"].get("model")
    return f"{g}" + (f" ({m})" if m else "") + f" [{run_dir.name}]"


def kill_vectors(scores: list[dict]) -> tuple[list[str], list[str], list[list[bool]]]:
    """Mutant ids (target:id), their target, and one kill vector per run, on the shared task set."""
    targets = [set(s["targets"]) for s in scores]
    common = sorted(set.intersection(*targets))
    if not common:
        raise UserError("the runs share no target: nothing to compare")
    ids, clusters, vectors = [], [], [[] for _ in scores]
    for name in common:
        # each target's own manifest decides its task set: runs scored while other targets
        # were added to the benchmark still compare on this one
        sources = {s["targets"][name].get("population_source") for s in scores}
        if len(sources) > 1:
            raise UserError(f"{name}: the runs were scored against different task sets "
                            f"({sorted(map(str, sources))})")
        task_n = {s["targets"][name]["kills"]["n"] for s in scores}
        if len(task_n) > 1:
            raise UserError(f"{name}: the runs have task sets of different sizes {sorted(task_n)}")
        universe = sorted(set().union(*[set(s["targets"][name]["killed_task_ids"]) for s in scores]))
        n = task_n.pop()
        killed = [set(s["targets"][name]["killed_task_ids"]) for s in scores]
        # mutants no run killed are concordant zeros: they count in n, not in the discordance
        for mid in universe:
            ids.append(f"{name}:{mid}")
            clusters.append(name)
            for v, k in zip(vectors, killed):
                v.append(mid in k)
        for j in range(n - len(universe)):
            ids.append(f"{name}:unkilled-{j}")
            clusters.append(name)
            for v in vectors:
                v.append(False)
    return ids, clusters, vectors


def compare_runs(run_dirs: list[Path], resamples: int = 10_000, seed: int = 0) -> dict:
    scores = [_load_score(d) for d in run_dirs]
    labels = [_label(s, d) for s, d in zip(scores, run_dirs)]
    ids, clusters, vectors = kill_vectors(scores)
    n = len(ids)
    out = {"runs": labels, "mutants": n, "kills": [sum(v) for v in vectors]}
    if len(scores) == 2:
        a, b = vectors
        only_a = sum(1 for x, y in zip(a, b) if x and not y)
        only_b = sum(1 for x, y in zip(a, b) if y and not x)
        est = paired_bootstrap_difference(a, b, clusters=clusters if len(set(clusters)) > 1 else None,
                                          resamples=resamples, seed=seed)
        out.update({
            "a_only": only_a, "b_only": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "difference": {"estimate": est[0], "low": est[1], "high": est[2],
                           "method": est.method},
            "sentence": f"{labels[0]} kills {only_a} mutants {labels[1]} misses; "
                        f"{labels[1]} kills {only_b} mutants {labels[0]} misses "
                        f"(of {n} task-set mutants)."})
    else:
        groups = tied_groups(dict(zip(labels, vectors)))
        out["groups"] = groups
    return out


def render_compare(result: dict) -> str:
    n = result["mutants"]
    lines = [f"{label}: {k} / {n} task-set mutants killed" for label, k in zip(result["runs"], result["kills"])]
    if "sentence" in result:
        d = result["difference"]
        lines += [result["sentence"],
                  f"difference (first - second): {100 * d['estimate']:+.1f} points [95% CI "
                  f"{100 * d['low']:+.1f} to {100 * d['high']:+.1f}] ({d['method']})",
                  f"exact McNemar p = {result['mcnemar_p']:.4g} on {result['a_only'] + result['b_only']} "
                  "discordant mutants"]
    else:
        for i, g in enumerate(result["groups"], 1):
            lines.append(f"group {i} (not distinguishable from its leader): {', '.join(g)}")
    return "\n".join(lines)
