"""Reports people look at: a Markdown report with plots, the leaderboard, and the
per-mutant export in the mutation-testing-report-schema JSON (the format the
mutation-testing-elements HTML viewer reads).

Every number comes from score.json files (written by `killbench score`) or from
bundles; nothing here runs tests or calls a model.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tabulate import tabulate

from .errors import UserError
from .score import FUNNEL
from .stats import tied_groups


def _load(run_dir: Path) -> dict:
    p = run_dir / "score.json"
    if not p.exists():
        raise UserError(f"{run_dir} has no score.json: run `killbench score {run_dir}` first")
    return json.loads(p.read_text())


def _label(score: dict) -> str:
    g = score["run"]["generator"]["name"]
    m = score["run"].get("model")
    return g + (f" / {m}" if m else "")


def _pct(k, n) -> str:
    return f"{k} / {n} ({100 * k / n:.1f}%)" if n else f"{k} / 0"


def _ci(d: dict) -> str:
    return f"{_pct(d['k'], d['n'])} [{100 * d['low']:.1f}-{100 * d['high']:.1f}%]"


def _tokens(score: dict) -> int:
    return sum(t.get("cost", {}).get("tokens_in", 0) + t.get("cost", {}).get("tokens_out", 0)
               for t in score["targets"].values())


def _plots(scores: list[dict], labels: list[str], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    # 1. forest plot: pooled kill rate per generator with its interval, targets as dots
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.6 * len(scores)))
    for i, s in enumerate(scores):
        p = s.get("pooled_kills")
        if p:
            ax.errorbar(p["estimate"], i, xerr=[[p["estimate"] - p["low"]], [p["high"] - p["estimate"]]],
                        fmt="o", color="black", capsize=4)
        for t in s["targets"].values():
            k, n = t["kills"]["k"], t["kills"]["n"]
            if n:
                ax.plot(k / n, i + 0.15, ".", color="tab:blue", alpha=0.6)
    ax.set_yticks(range(len(scores)), labels)
    ax.set_xlim(0, 1)
    ax.set_xlabel("kill rate on the task set (dot: one target; bar: pooled, 95% cluster bootstrap)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "kill_rate.png", dpi=120)
    plt.close(fig)
    names.append("kill_rate.png")
    # 2. funnel
    fig, ax = plt.subplots(figsize=(9, 4))
    stages = None
    width = 0.8 / max(1, len(scores))
    for i, s in enumerate(scores):
        total: dict[str, int] = {}
        for t in s["targets"].values():
            for k, v in t["funnel"].items():
                total[k] = total.get(k, 0) + v
        stages = [k for k in (*FUNNEL, "kills beyond its own mutant") if k in total]
        ax.bar([x + i * width for x in range(len(stages))], [total[k] for k in stages], width,
               label=labels[i])
    if stages:
        ax.set_xticks([x + width * (len(scores) - 1) / 2 for x in range(len(stages))], stages,
                      rotation=30, ha="right")
    ax.set_ylabel("tests")
    ax.set_title("the gate's funnel: where written tests are lost")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "funnel.png", dpi=120)
    plt.close(fig)
    names.append("funnel.png")
    # 3. transfer by assertion class
    fig, ax = plt.subplots(figsize=(8, 4))
    classes = ["value", "exception", "existence", "none"]
    for i, s in enumerate(scores):
        held = [sum(t["by_class"][c]["held_out_kills"] for t in s["targets"].values()) for c in classes]
        ax.bar([x + i * width for x in range(len(classes))], held, width, label=labels[i])
    ax.set_xticks([x + width * (len(scores) - 1) / 2 for x in range(len(classes))], classes)
    ax.set_ylabel("held-out mutants killed")
    ax.set_title("transfer by assertion class: do kept tests catch faults they were not shown?")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "transfer_by_class.png", dpi=120)
    plt.close(fig)
    names.append("transfer_by_class.png")
    # 4. kills vs tokens
    fig, ax = plt.subplots(figsize=(6, 4))
    for s, label in zip(scores, labels):
        p = s.get("pooled_kills") or {"k": 0}
        ax.scatter(_tokens(s), p["k"], s=40)
        ax.annotate(label, (_tokens(s), p["k"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("tokens spent (in + out)")
    ax.set_ylabel("task-set mutants killed")
    ax.set_title("kills against cost")
    fig.tight_layout()
    fig.savefig(out / "kills_vs_tokens.png", dpi=120)
    plt.close(fig)
    names.append("kills_vs_tokens.png")
    return names


def write_report(run_dirs: list[Path], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    scores = [_load(d) for d in run_dirs]
    labels = [_label(s) for s in scores]
    digests = {s.get("manifest_digest") for s in scores}
    lines = ["# killbench report", "",
             f"killbench {scores[0]['killbench']} · manifest digest(s) {', '.join(map(str, sorted(map(str, digests))))}", ""]
    rows = []
    for s, label in zip(scores, labels):
        p = s.get("pooled_kills")
        rows.append([label, s["run"].get("budget_per_target"),
                     _ci(p) if p else "-", _tokens(s)])
    lines += ["## Kills (pooled over targets)", "",
              tabulate(rows, headers=["generator", "budget/target", "kills [95% CI]", "tokens"],
                       tablefmt="github"), ""]
    for s, label in zip(scores, labels):
        lines += [f"## {label}", ""]
        trows = []
        for name, t in s["targets"].items():
            tr = t["transfer"]
            trows.append([name, _ci(t["kills"]), t["kept_tests"], _ci(tr["within_function_all"]),
                          _ci(tr["cross_function"]),
                          {None: "-", True: "met", False: "not met"}[tr["minimum_met"]],
                          t["specificity"]["exactly_one"], len(t["beyond_the_suite"]["held_out"])])
        lines += [tabulate(trows, headers=["target", "kills", "kept", "transfer within fn",
                                           "transfer cross fn", "held-out minimum",
                                           "kept tests killing exactly one", "beyond the suite"],
                           tablefmt="github"), ""]
    names = _plots(scores, labels, out)
    lines += ["## Plots", ""] + [f"![{n}]({n})" for n in names] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _bundle_score(archive: Path) -> tuple[dict, dict]:
    with tarfile.open(archive) as tf:
        score = json.loads(tf.extractfile("bundle/score.json").read())
        config = json.loads(tf.extractfile("bundle/config.json").read())
    return score, config


def _benchmark_status(score: dict, current: dict[str, str]) -> dict[str, str]:
    """Per target of a submission: `current` (scored against this checkout's manifest of that
    target), `stale` (an older manifest of it) or `outside` (not a benchmark target)."""
    out = {}
    for name, t in score["targets"].items():
        if name not in current:
            out[name] = "outside"
        else:
            out[name] = "current" if t.get("population_source") == current[name] else "stale"
    return out


def write_leaderboard(folder: Path, out: Path) -> Path:
    """Rows from bundles; groups only among entries scored on this checkout's manifests, compared
    over the whole benchmark task set (a target an entry did not run counts as no kills)."""
    from .manifests import load_manifests, target_digest

    bundles = sorted(folder.glob("*.tar.gz"))
    if not bundles:
        raise UserError(f"no bundles (*.tar.gz) in {folder}")
    manifests = load_manifests()
    current = {name: f"manifest {target_digest(m)}" for name, m in manifests.items()}
    tasks = {name: sorted(m["task_set"]) for name, m in manifests.items()}
    total = sum(len(v) for v in tasks.values())
    entries = []
    for b in bundles:
        score, config = _bundle_score(b)
        entries.append((b, score, config, _benchmark_status(score, current)))
    comparable = {b.name: score for b, score, _, status in entries
                  if status and all(v == "current" for v in status.values())}
    groups = {}
    if len(comparable) > 1:
        vectors = {}
        for bname, score in comparable.items():
            vec = []
            for name in sorted(tasks):
                killed = set(score["targets"].get(name, {}).get("killed_task_ids", []))
                vec += [i in killed for i in tasks[name]]
            vectors[bname] = vec
        for gi, group in enumerate(tied_groups(vectors), 1):
            for name in group:
                groups[name] = gi
    rows = []
    for b, score, config, status in sorted(entries, key=lambda e: -(e[1].get("pooled_kills") or {"k": 0})["k"]):
        p = score.get("pooled_kills") or {"k": 0, "n": 0, "low": 0, "high": 0}
        kept = sum(t["kept_tests"] for t in score["targets"].values())
        value = sum(t["by_class"]["value"]["tests"] for t in score["targets"].values())
        wk = sum(t["transfer"]["within_function_all"]["k"] for t in score["targets"].values())
        wn = sum(t["transfer"]["within_function_all"]["n"] for t in score["targets"].values())
        tokens = _tokens(score)
        on_bench = sum(1 for v in status.values() if v == "current")
        flags = sorted(f"{n} {v}" for n, v in status.items() if v != "current")
        targets = f"{on_bench} of {len(manifests)}" + (f" ({', '.join(flags)})" if flags else "")
        whole = _pct(p["k"], total) if b.name in comparable and total else "-"
        gen = config["generator"]
        rows.append([groups.get(b.name, "-"), f"{gen['name']} {gen.get('version', '')}".strip(),
                     config.get("model") or "-",
                     config.get("budget_per_target"), targets, _ci(p) if p["n"] else "-", whole,
                     _pct(wk, wn), _pct(value, kept), round(tokens / p["k"], 1) if p["k"] else "-",
                     score["killbench"], b.name])
    lines = ["# Leaderboard", "", "<!-- generated by `killbench leaderboard`; do not edit by hand -->", "",
             f"{len(manifests)} benchmark targets, {total} task-set mutants. "
             "\"kills\" counts over the targets an entry ran, with a 95% interval; \"of the "
             "benchmark\" counts the same kills over every target's task set (a target not run "
             "kills nothing). \"targets\" says how many targets were scored against this "
             "checkout's manifest of them; an entry scored against an older manifest of a target "
             "(stale) or on a target outside the benchmark is listed but not grouped.", "",
             "Group: entries in one group are not distinguishable from the group's leader (exact "
             "McNemar over the whole benchmark task set, Holm-corrected); ranks within a group "
             "mean nothing.", "",
             tabulate(rows, headers=["group", "generator", "model", "budget", "targets",
                                     "kills [95% CI]", "of the benchmark", "transfer within fn",
                                     "value-class share", "tokens per kill", "killbench", "bundle"],
                      tablefmt="github"), ""]
    out.write_text("\n".join(lines))
    return out


STATUS = {"killed": "Killed", "survived": "Survived", "timeout": "Timeout", "invalid": "CompileError",
          "harness-error": "RuntimeError"}


def export_mutation_testing_report(run_dir: Path, target_name: str | None = None) -> dict:
    """Per-mutant results in the mutation-testing-report-schema (version 2) format: each
    task-set and held-out mutant with the kept tests that kill it."""
    from .config import resolve
    from .score import population
    from .targets import prepare

    score = _load(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    names = [target_name] if target_name else list(score["targets"])
    files: dict[str, dict] = {}
    tests: dict[str, dict] = {}
    for name in names:
        t = score["targets"][name]
        spec = resolve(config["targets"][name].get("ref", name))
        target = prepare(spec)
        pop = population(spec, target, 1)
        killers: dict[str, list[str]] = {}
        for cid, ids in t["kills_by_test"].items():
            for i in ids:
                killers.setdefault(i, []).append(cid)
            tests[f"candidates/{cid}.py"] = {"tests": [{"id": cid, "name": f"test_killbench_{cid}"}]}
        for i in sorted(set(pop.task_set) | set(pop.held_out)):
            m = pop.mutants[i]
            text = (target.tree / m.path).read_text(encoding="utf-8")
            entry = files.setdefault(m.path, {"language": "python", "source": text, "mutants": []})
            lines = text.encode("utf-8").splitlines(keepends=True)

            def char_col(line: int, byte_col: int) -> int:
                return len(lines[line - 1][:byte_col].decode("utf-8", "replace")) + 1

            by = sorted(killers.get(i, []))
            status = "Killed" if by else ("Survived" if i in set(pop.task_set) or
                                          pop.baseline_verdict.get(i) != "invalid" else "CompileError")
            entry["mutants"].append({
                "id": i, "mutatorName": m.operator, "replacement": m.replacement,
                "location": {"start": {"line": m.line, "column": char_col(m.line, m.col)},
                             "end": {"line": m.end_line, "column": char_col(m.end_line, m.end_col)}},
                "status": status, "killedBy": by,
                "statusReason": ("task set" if i in set(pop.task_set) else "held-out")
                + f"; the target's own suite: {pop.baseline_verdict.get(i)}"})
    return {"schemaVersion": "2", "thresholds": {"high": 80, "low": 60}, "files": files,
            "testFiles": tests,
            "framework": {"name": "killbench", "version": score["killbench"]},
            "config": {"generator": score["run"]["generator"], "model": score["run"].get("model"),
                       "manifest_digest": score.get("manifest_digest")}}
