"""Reports people look at: a Markdown report with plots, the leaderboard, and the
per-mutant export in the mutation-testing-report-schema JSON (the format the
mutation-testing-elements HTML viewer reads).

Every number comes from score.json files (written by `killbench score`) or from
bundles; nothing here runs tests or calls a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from tabulate import tabulate

from .errors import UserError
from .metrics import TEST_FUNNEL
from .stats import tied_groups


def _load(run_dir: Path) -> dict:
    p = run_dir / "score.json"
    if not p.exists():
        raise UserError(f"{run_dir} has no score.json: run `killbench score {run_dir}` first")
    return json.loads(p.read_text())


def _label(score: dict) -> str:
    g = score["run"]["generator"]
    m = score["run"].get("model")
    split = score.get("split")
    return (f"{g['name']} {g.get('version', '')}".strip() + (f" / {m}" if m else "")
            + (f" [{split}]" if split and split != "full" else ""))


def _pct(k, n) -> str:
    return f"{k} / {n} ({100 * k / n:.1f}%)" if n else f"{k} / 0"


def ci_text(d: dict, label: str = "") -> str:
    """A rate with its interval, as every table of scores shows it (`label` names it)."""
    return f"{_pct(d['k'], d['n'])} [{label}{100 * d['low']:.1f}-{100 * d['high']:.1f}%]"


def _tokens(score: dict) -> int:
    return sum(t.get("cost", {}).get("tokens_in", 0) + t.get("cost", {}).get("tokens_out", 0)
               for t in score["targets"].values())


def _plots(scores: list[dict], labels: list[str], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = []
    # 1. forest plot: pooled kill rate per generator with its interval, each target a marker
    #    of its own (the legend names them); the axis is scaled to the data
    import itertools

    targets = sorted({n for s in scores for n in s["targets"]})
    colors = plt.get_cmap("tab20")
    markers = itertools.cycle("os^vD<>ph*X")
    style = {n: (colors(i % 20), next(markers)) for i, n in enumerate(targets)}
    fig, ax = plt.subplots(figsize=(8, 1.8 + 0.7 * len(scores)))
    top = 0.05
    seen = set()
    for i, s in enumerate(scores):
        p = s.get("pooled_kills")
        if p:
            ax.errorbar(p["estimate"], i, xerr=[[p["estimate"] - p["low"]], [p["high"] - p["estimate"]]],
                        fmt="o", color="black", capsize=4, zorder=3)
            top = max(top, p["high"])
        spread = max(1, len(s["targets"]) - 1)
        for j, (name, t) in enumerate(sorted(s["targets"].items())):
            k, n = t["kills"]["k"], t["kills"]["n"]
            if n:
                color, marker = style[name]
                # spread down the row: twelve targets at 0.0 are twelve markers, not one
                ax.plot(k / n, i + 0.12 + 0.3 * j / spread, marker, color=color, alpha=0.8,
                        markersize=5, label=name if name not in seen else None)
                seen.add(name)
                top = max(top, k / n)
    ax.set_yticks(range(len(scores)), labels)
    right = min(1.0, top * 1.15 + 0.02)
    ax.set_xlim(-0.02 * right, right)  # a marker at 0 is whole, not cut by the axis
    ax.set_ylim(len(scores) - 0.45, -0.6)
    ax.set_xlabel("kill rate on the task set\n(black: pooled over targets, 95% cluster bootstrap; "
                  "markers: one target each)")
    if seen:
        ax.legend(fontsize=7, ncol=2, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "kill_rate.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    names.append("kill_rate.png")
    # 2. funnel
    fig, ax = plt.subplots(figsize=(9, 4))
    stages = None
    width = 0.8 / max(1, len(scores))
    for i, s in enumerate(scores):
        total: dict[str, int] = {}
        for t in s["targets"].values():
            for k, v in t["test_funnel"].items():
                total[k] = total.get(k, 0) + v
        stages = [k for k in TEST_FUNNEL if k in total]
        ax.bar([x + i * width for x in range(len(stages))], [total[k] for k in stages], width,
               label=labels[i])
    if stages:
        ax.set_xticks([x + width * (len(scores) - 1) / 2 for x in range(len(stages))], stages,
                      rotation=30, ha="right")
    ax.set_ylabel("tests")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of tests
    ax.set_title("the gate's funnel: where written tests are lost")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "funnel.png", dpi=120, bbox_inches="tight")
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
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("transfer by assertion class: do kept tests catch faults they were not shown?")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "transfer_by_class.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    names.append("transfer_by_class.png")
    # 4. kill rate against tokens: rates (entries may have task sets of different sizes),
    #    with their intervals; a model-free generator sits at 0 tokens on a symlog axis
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (s, label) in enumerate(zip(scores, labels)):
        p = s.get("pooled_kills")
        if not p or not p["n"]:
            continue
        x = _tokens(s)
        ax.errorbar(x, p["estimate"], yerr=[[p["estimate"] - p["low"]], [p["high"] - p["estimate"]]],
                    fmt="o", capsize=3)
        ax.annotate(f"{label} ({p['k']}/{p['n']})", (x, p["estimate"]), fontsize=7,
                    xytext=(6, 8 if i % 2 == 0 else -12), textcoords="offset points")
    ax.set_xscale("symlog", linthresh=1000)
    ax.set_xlim(left=0, right=max([10_000] + [3 * _tokens(s) for s in scores]))
    ax.set_xlabel("tokens spent, all targets (in + out; symlog)")
    ax.set_ylabel("kill rate on the task set (pooled)")
    ax.set_ylim(bottom=0)
    ax.set_title("kills against cost")
    fig.tight_layout()
    fig.savefig(out / "kills_vs_tokens.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    names.append("kills_vs_tokens.png")
    return names


def write_report(run_dirs: list[Path], out: Path, html: bool = False) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    scores = [_load(d) for d in run_dirs]
    labels = [_label(s) for s in scores]
    digests = {s.get("manifest_digest") for s in scores}
    lines = ["# killbench report", "",
             f"killbench {scores[0]['killbench']} · manifest digest(s) {', '.join(map(str, sorted(map(str, digests))))}", ""]
    if len(digests) > 1 or len({s.get("split", "full") for s in scores}) > 1:
        lines += ["**Warning: these runs were scored on different manifests or splits; their "
                  "kill rates are not over the same tasks and are not comparable.**", ""]
    from .render import budget_text

    rows = []
    for s, label in zip(scores, labels):
        p = s.get("pooled_kills")
        budgets = next(iter(s["run"].get("budgets", {}).values()), {})
        rows.append([label, budget_text(budgets) if budgets else "-", s["run"].get("isolation", "-"),
                     ci_text(p) if p else "-", _tokens(s)])
    lines += ["## Kills (pooled over targets)", "",
              tabulate(rows, headers=["generator", "budget (first target)", "isolation",
                                      "kills [95% CI]", "tokens"], tablefmt="github"), ""]
    for s, label in zip(scores, labels):
        lines += [f"## {label}", ""]
        trows = []
        for name, t in s["targets"].items():
            tr = t["transfer"]
            trows.append([name, ci_text(t["kills"]), t["kept_tests"], ci_text(tr["within_function_all"]),
                          ci_text(tr["cross_function"]),
                          {None: "-", True: "met", False: "not met"}[tr["minimum_met"]],
                          t["specificity"]["exactly_one"], len(t["beyond_the_suite"]["held_out"])])
        lines += [tabulate(trows, headers=["target", "kills", "kept", "transfer within fn",
                                           "transfer cross fn", "held-out minimum",
                                           "kept tests killing exactly one", "beyond the suite"],
                           tablefmt="github"), ""]
    names = _plots(scores, labels, out)
    lines += ["## Plots", ""] + [f"![{n}]({n})" for n in names] + [""]
    if html:
        from .html_report import render_report

        page = out / "report.html"
        page.write_text(render_report(run_dirs, [out / n for n in names]), encoding="utf-8")
        lines += ["## Browse", "", f"[{page.name}]({page.name}): one self-contained page with "
                  "every task (its diff, verdict and the kept tests that kill it), every kept "
                  "test's code, the gate's funnels and these plots.", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


class Entry:
    """One bundle as the leaderboard sees it: its numbers recomputed from its own evidence,
    or the reason it is not listed with numbers."""

    def __init__(self, path: Path, score=None, config=None, refused: str | None = None,
                 earlier: str | None = None):
        self.path, self.score, self.config, self.refused, self.earlier = path, score, config, refused, earlier
        self.checked = "recomputed"
        self.negative_hits: list[tuple[str, str, str]] | None = None  # None: list sealed here
        self.withdrawn = 0  # negative controls among its tasks that were withdrawn after the seal
        self.rules_problems: list[str] = []

    @property
    def benchmark(self) -> str:
        """What the run was generated against (its config), never what this checkout has:
        a recomputed score names this checkout's benchmark whatever the bundle was."""
        return (self.config or {}).get("benchmark") or "0.1"

    @property
    def split(self) -> str:
        return (self.config or {}).get("split", "full")


def check_bundle(path: Path) -> Entry:
    """Unpack a bundle and recompute its score from its evidence; refuse it on any mismatch."""
    import tempfile

    from .bundle import _unpack, check_files, compare_numbers, provenance
    from .errors import KillbenchError
    from .evidence import KillMatrix, load
    from .locations import cache_subdir
    from .score import RunRecords, compute

    with tempfile.TemporaryDirectory(prefix="leaderboard-", dir=cache_subdir("tmp")) as tmp:
        try:
            root = _unpack(path, Path(tmp))
        except KillbenchError as exc:
            return Entry(path, refused=str(exc))
        if not (root / "candidates.jsonl").exists() and (root / "gate.jsonl").exists():
            env = {}
            if (root / "environment.json").exists():
                env = json.loads((root / "environment.json").read_text())
            return Entry(path, earlier=f"a bundle of killbench {env.get('killbench', '0.1')} "
                                       "(format 1): not re-checked by this version, not ranked")
        problems = check_files(root)
        if problems:
            return Entry(path, refused="; ".join(problems[:3]))
        try:
            records = RunRecords(root)
            matrices = {n: load(root / "evidence" / "kills" / f"{n}.json", KillMatrix)
                        for n in records.config.targets}
            claimed = json.loads((root / "score.json").read_text())
            p = claimed.get("pooled_kills") or {}
            fresh = compute(records, matrices, p.get("resamples", 10_000), p.get("seed", 0))
            origin = provenance(records, root, claimed)
        except (KillbenchError, ValueError) as exc:
            return Entry(path, refused=f"its records are not valid: {str(exc)[:300]}")
        if origin:
            return Entry(path, refused="provenance: " + "; ".join(origin)[:300])
        from .manifests import WITHDRAWN
        if records.config.manifest_digest in WITHDRAWN:
            return Entry(path, refused=f"run against manifest digest "
                                       f"{records.config.manifest_digest[:16]}…, withdrawn: "
                                       f"{WITHDRAWN[records.config.manifest_digest][:200]}")
        if not fresh.complete:
            return Entry(path, refused="an incomplete run: " + "; ".join(fresh.incomplete)[:300])
        diff = compare_numbers(claimed, fresh.dump(), "its evidence gives")
        if diff:
            return Entry(path, refused=f"score.json does not follow from its evidence ({len(diff)} "
                                       f"numbers differ, e.g. {diff[0][:200]})")
        entry = Entry(path, score=fresh.dump(), config=records.config.dump())
        sealed = current_sealed()  # read and checked against its commitment once per bundle
        entry.negative_hits = negative_control_hits(records, fresh.dump(), sealed)
        entry.withdrawn = withdrawn_controls(records, sealed)
        entry.rules_problems = rules_claim(records)
        return entry


_UNREAD = object()


def current_sealed():
    """The current benchmark's sealed list of negative controls, or None where it is not
    available."""
    from .controls import load_sealed
    from .manifests import current_benchmark, load_manifests

    return load_sealed(current_benchmark(), load_manifests())


def withdrawn_controls(records, sealed=_UNREAD) -> int:
    """How many of the run's tasks are negative controls withdrawn after the seal."""
    if sealed is _UNREAD:
        sealed = current_sealed()
    if sealed is None:
        return 0
    n = 0
    for name in records.config.targets:
        tasks = set(records.population(name).task_set)
        n += len((sealed.ids(name) - sealed.active(name)) & tasks)
    return n


def rules_claim(records) -> list[str]:
    """A run that says it kept the benchmark's rules must show it: the rules it recorded are
    the shipped ones, nothing was overridden, the isolation and the gate's deadline are the
    rules', every target's budgets are the rules' for its task count, and what it used is
    within them (gate calls counted from its evidence)."""
    from .rules import load_rules

    config = records.config
    if config.outside_rules:
        return []  # declared outside: listed as such, never grouped
    rules = load_rules()
    out = []
    if config.rules != rules.to_dict():
        out.append("claims the rules but recorded other rules than the shipped ones")
    if config.overrides:
        out.append(f"claims the rules but overrode {sorted(config.overrides)}")
    if config.isolation != rules.isolation or config.gate_timeout_s != rules.gate_timeout_s:
        out.append("claims the rules but ran with another isolation level or gate deadline")
    for name, t in config.targets.items():
        want = rules.budgets(t.tasks, config.generator.needs_model)
        if t.budgets != want:
            out.append(f"{name}: claims the rules but its budgets are {t.budgets.dump()}, the rules "
                       f"give {want.dump()}")
        used = len({(e.candidate, e.task) for e in records.entries if e.target == name})
        if t.budgets.gate_calls is not None and used > t.budgets.gate_calls:
            out.append(f"{name}: {used} distinct gate calls in its evidence, over its budget of "
                       f"{t.budgets.gate_calls}")
        isolations = {p.isolation for e in records.entries if e.target == name for p in e.phases}
        if isolations - {config.isolation}:
            out.append(f"{name}: gate phases ran under {sorted(isolations)}, not {config.isolation}")
    return out


def negative_control_hits(records, score: dict, sealed=_UNREAD) -> list[tuple[str, str, str]] | None:
    """Kept tests that kill a negative control, or were kept by the gate for one (each is
    a test that saw the edit by a route other than behaviour); None when the sealed list is
    not available here."""
    if sealed is _UNREAD:
        sealed = current_sealed()
    if sealed is None:
        return None
    hits = []
    for name, t in score["targets"].items():
        ids = sealed.active(name)  # a withdrawn control is an ordinary task
        for key, killed in sorted(t.get("kills_by_test", {}).items()):
            for i in sorted(set(killed) & ids):
                hits.append((name, i, f"{key} kills it"))
        for e in records.entries:
            if e.target == name and e.task in ids and e.kept:
                hits.append((name, e.task, f"{e.candidate} was kept for it"))
    return sorted(set(hits))


def controls_cell(entry: Entry) -> str:
    """positive kept / held, negative killed / count ("sealed" where the list is not here)."""
    ts = entry.score["targets"].values()
    pos = sum((t.get("controls") or {}).get("positive", 0) for t in ts)
    kept = sum((t.get("controls") or {}).get("positive_kept", 0) for t in ts)
    neg = sum((t.get("controls") or {}).get("negative", 0) for t in ts)
    hits = getattr(entry, "negative_hits", None)
    withdrawn = getattr(entry, "withdrawn", 0)
    negative = f"sealed ({neg})" if hits is None else \
        f"{len({(t, i) for t, i, _ in hits})} of {neg - withdrawn} killed" + \
        (f" ({withdrawn} more withdrawn: docs/benchmark.md)" if withdrawn else "")
    return f"positive {kept} of {pos} kept; negative {negative}"


def _current_sources(manifests: dict, split: str) -> dict[str, str]:
    """target -> the population source a run on this checkout's manifests and split has."""
    from .manifests import target_digest

    return {name: f"manifest {target_digest(m)}" + (f" {split} split" if split != "full" else "")
            for name, m in manifests.items()}


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


def _budget_cell(config: dict) -> str:
    from .render import budget_text

    budgets = [t["budgets"] for t in config.get("targets", {}).values()]
    if not budgets:
        return "-"
    per = {k: sum((b.get(k) or 0) for b in budgets) for k in ("gate_calls", "seconds")}
    tokens = [b.get("tokens") for b in budgets]
    text = budget_text({"tokens": tokens[0] if tokens[0] is not None else None,
                        "gate_calls": per["gate_calls"], "seconds": per["seconds"]})
    return text.replace(" tokens", " tokens per target", 1) if tokens[0] is not None else text


def verified_record(path: Path) -> dict | None:
    from .cite import load_record

    return load_record(path)


def reexecuted_differences(path: Path, sample: int, seed: int) -> list[str]:
    """Re-execute a seeded sample of the bundle's gate entries and kill runs (every run that
    claims a kill among them); what differs from the bundle, empty when nothing does."""
    from .bundle import verify
    from .errors import KillbenchError

    try:
        problems, _ = verify(path, sample=sample, seed=seed)
    except KillbenchError as exc:
        problems = [f"could not be re-executed here: {exc}"]
    return problems


def _reexecute(entry: Entry, sample: int, seed: int, differences=reexecuted_differences) -> None:
    """Refuse the entry on any difference its re-executed sample shows (the first is named)."""
    problems = differences(entry.path, sample, seed)
    if problems:
        entry.refused = (f"a re-executed sample ({sample} per target, seed {seed}) differs from the "
                         f"bundle ({len(problems)} differences, e.g. {problems[0][:200]})")
        entry.score = None
    else:
        entry.checked = f"sample of {sample} re-executed"


def write_leaderboard(folder: Path, out: Path, reexecute: int | None = 2, seed: int = 0,
                      differences=reexecuted_differences) -> Path:
    """Rows from bundles, every number recomputed from each bundle's evidence and, for entries
    on this checkout's benchmark, a seeded sample of each re-executed (`reexecute` per target;
    None skips it, and the board says so). Groups only among comparable entries of one split,
    over that split's whole task set (a target an entry did not run counts as no kills).
    `differences` is the re-execution itself (a test of the rendering alone replaces it)."""
    from .manifests import load_manifests

    if not folder.is_dir():
        raise UserError(f"{folder}: no such directory of bundles (give --bundles DIR)")
    bundles = sorted(folder.glob("*.tar.gz"))
    if not bundles:
        raise UserError(f"no bundles (*.tar.gz) in {folder}")
    manifests = load_manifests()
    if not manifests:
        raise UserError("this installation has no manifests: the leaderboard has nothing to rank on")
    benchmark = ", ".join(sorted({m.get("benchmark", "?") for m in manifests.values()}))
    splits = {sp: {name: sorted(m["splits"][sp]) for name, m in manifests.items()}
              for sp in ("full", "lite")}
    entries = [check_bundle(b) for b in bundles]
    status = {}
    for e in entries:
        if e.score is not None:
            status[e.path.name] = _benchmark_status(e.score, _current_sources(manifests, e.split))
    for e in entries:  # a claim to have kept the rules is checked for entries on this benchmark
        if e.score is not None and e.benchmark == benchmark and e.rules_problems:
            e.refused = "provenance: " + "; ".join(e.rules_problems)[:300]
            e.score = None
    on_bench = [e for e in entries if e.score is not None and e.benchmark == benchmark
                and all(v == "current" for v in status[e.path.name].values())]
    if reexecute is not None:
        for e in on_bench:
            _reexecute(e, reexecute, seed, differences)
    listed = [e for e in entries if e.score is not None and e.benchmark == benchmark]
    older = [e for e in entries if e.score is not None and e.benchmark != benchmark]
    lines = ["# Leaderboard", "", "<!-- generated by `killbench leaderboard`; do not edit by hand -->", "",
             f"Benchmark {benchmark}: {len(manifests)} targets, "
             + ", ".join(f"{sum(len(v) for v in splits[sp].values())} tasks in the {sp} split"
                         for sp in ("full", "lite")) + ". "
             "Every number below is recomputed by `killbench leaderboard` from the bundle's own "
             "evidence (its gate records and kill matrices), and for every entry on this "
             "benchmark every kill run that claims a task kill, every kept gate entry of a file "
             "that claims one, and a seeded sample of the other runs and entries are "
             "re-executed from scratch"
             + ("" if reexecute is not None else " (not this time: the board was written with "
                "re-execution off)") + ". A bundle whose score.json does not follow from its "
             "evidence, whose files do not match their sums, whose tasks were generated against "
             "other manifests than it was scored on, whose re-executed sample differs, or whose "
             "run is incomplete, or whose claim to have kept the rules does not hold (its recorded "
             "rules, budgets, isolation and gate calls are checked), is not listed with numbers. "
             "\"verified\" means a full `killbench verify` of the same bytes passed on this "
             "benchmark (its record, beside the bundle, is a claim anyone can check by running "
             "verify again; the numbers shown never come from it). Where that verify found kept "
             "tests that pass under the run's recorded hash seed but not under its own (a "
             "finding, not a difference: docs/DESIGN.md), their count follows the date.", "",
             "\"kills\" counts over the targets an entry ran, with a 95% interval; \"of the "
             "split\" counts the same kills over every target's tasks in the entry's split (a "
             "target not run kills nothing). \"targets\" says how many targets were scored "
             "against this benchmark's manifest of them; an entry on a target outside the "
             "benchmark, or outside the benchmark's rules, is listed but not grouped. \"budget\" "
             "is what bounded the generator, summed over its targets; \"gate calls\" and "
             "\"generation\" are what it used.", "",
             "Group: entries of one split in one group are not distinguishable from the group's "
             "leader (exact McNemar over the split's whole task set, Holm-corrected); ranks within "
             "a group mean nothing.", ""]
    for sp in ("full", "lite"):
        mine = [e for e in listed if e.split == sp and e.score is not None]
        if not mine:
            continue
        lines += [f"## {sp.capitalize()} split", "", _table(mine, status, splits[sp], manifests), "",
                  f"Per target, {sp} split: task kills of each entry (its killed tasks among the "
                  "target's tasks in the split; `-`: the entry did not run the target).", "",
                  _per_target(mine, splits[sp]), ""]
    if older:
        lines += ["## Scored on earlier benchmark versions", "",
                  "Numbers recomputed from each bundle's own evidence, on the manifests it was "
                  "run against; not re-executed and never ranked against this benchmark.", "",
                  tabulate([[e.benchmark, _label(e.score), ci_text(e.score["pooled_kills"])
                             if e.score.get("pooled_kills") else "-", e.score["killbench"], e.path.name]
                            for e in older],
                           headers=["benchmark", "generator", "kills [95% CI]", "killbench", "bundle"],
                           tablefmt="github"), ""]
    refused = [e for e in entries if e.refused]
    earlier = [e for e in entries if e.earlier]
    if refused:
        lines += ["## Not listed", "", tabulate([[e.path.name, e.refused] for e in refused],
                                                headers=["bundle", "why"], tablefmt="github"), ""]
    if earlier:
        lines += ["## Earlier formats", "", tabulate([[e.path.name, e.earlier] for e in earlier],
                                                     headers=["bundle", "status"], tablefmt="github"), ""]
    out.write_text("\n".join(lines))
    return out


def _per_target(listed: list[Entry], tasks: dict[str, list[str]]) -> str:
    """Targets down, entries across (in the split table's order): where a pooled number
    comes from, and whether one target carries it."""
    order = sorted(listed, key=lambda e: (-(e.score.get("pooled_kills") or {"estimate": 0})["estimate"],
                                          e.path.name))
    heads = []
    for e in order:
        gen = e.config["generator"]
        model = e.config.get("model")
        heads.append(f"{gen['name']} {gen.get('version', '')}".strip() + (f" · {model}" if model else ""))
    rows = []
    for name in sorted(tasks):
        ids = set(tasks[name])
        row = [name, len(ids)]
        for e in order:
            t = e.score["targets"].get(name)
            row.append("-" if t is None else len(ids & set(t.get("killed_task_ids", []))))
        rows.append(row)
    return tabulate(rows, headers=["target", "tasks", *heads], tablefmt="github")


def _table(listed: list[Entry], status: dict, tasks: dict[str, list[str]], manifests: dict) -> str:
    total = sum(len(v) for v in tasks.values())
    comparable = {e.path.name: e.score for e in listed
                  if status[e.path.name] and all(v == "current" for v in status[e.path.name].values())
                  and not e.score["run"].get("outside_rules") and not getattr(e, "negative_hits", None)}
    groups = {name: 1 for name in comparable}  # one comparable entry is a group of its own
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
    # comparable entries first, then by pooled rate (a count over more targets is no better)
    for e in sorted(listed, key=lambda e: (e.path.name not in comparable,
                                           -(e.score.get("pooled_kills") or {"estimate": 0})["estimate"])):
        score, config = e.score, e.config
        p = score.get("pooled_kills") or {"k": 0, "n": 0, "low": 0, "high": 0}
        kept = sum(t["kept_tests"] for t in score["targets"].values())
        value = sum(t["by_class"]["value"]["tests"] for t in score["targets"].values())
        wk = sum(t["transfer"]["within_function_all"]["k"] for t in score["targets"].values())
        wn = sum(t["transfer"]["within_function_all"]["n"] for t in score["targets"].values())
        gate_calls = sum(t["cost"]["gate_calls"] for t in score["targets"].values())
        wall = sum(t["cost"]["wall_s"] for t in score["targets"].values())
        st = status[e.path.name]
        on_bench = sum(1 for v in st.values() if v == "current")
        flags = sorted(f"{n} {v}" for n, v in st.items() if v != "current")
        targets = f"{on_bench} of {len(manifests)}" + (f" ({', '.join(flags)})" if flags else "")
        whole = _pct(p["k"], total) if e.path.name in comparable and total else "-"
        gen = config["generator"]
        rules = "outside: " + "; ".join(score["run"]["outside_rules"]) if score["run"].get("outside_rules") \
            else "rules"
        hits = getattr(e, "negative_hits", None)
        if hits:
            rules = "controls failed: " + "; ".join(f"{t} {i}: {what}" for t, i, what in hits[:3])
        tpk = score.get("tokens_per_kill")
        verified = verified_record(e.path)
        checked = f"verified {verified['date'][:10]}" if verified else e.checked
        if verified and verified.get("findings_count"):
            checked += f" ({verified['findings_count']} seed-dependent kept tests)"
        rows.append([groups.get(e.path.name, "-"), f"{gen['name']} {gen.get('version', '')}".strip(),
                     config.get("model") or "-", _budget_cell(config), rules,
                     score["run"].get("isolation", "-"), gate_calls, f"{wall:.0f} s", targets,
                     ci_text(p) if p["n"] else "-", whole, _pct(wk, wn), _pct(value, kept),
                     tpk if tpk else ("-" if config.get("model") else "0 (model-free)"),
                     controls_cell(e), checked, score["killbench"], e.path.name])
    return tabulate(rows, headers=["group", "generator", "model", "budget", "rules", "isolation",
                                   "gate calls", "generation", "targets", "kills [95% CI]",
                                   "of the split", "transfer within fn", "value-class share",
                                   "tokens per kill", "controls", "checked", "killbench", "bundle"],
                    tablefmt="github")


STATUS = {"killed": "Killed", "survived": "Survived", "timeout": "Timeout", "invalid": "CompileError",
          "harness-error": "RuntimeError"}


def export_mutation_testing_report(run_dir: Path, target_name: str | None = None) -> dict:
    """Per-mutant results in the mutation-testing-report-schema (version 2) format: each
    task-set and held-out mutant with the kept tests that kill it. Reads the run directory
    only (its frozen populations hold the source text): no target is prepared, nothing runs."""
    from .evidence import Population, load

    score = _load(run_dir)
    names = list(score["targets"])
    if target_name is not None:
        if target_name not in score["targets"]:
            raise UserError(f"--target {target_name!r}: the run has no such target "
                            f"(it has: {', '.join(names)})")
        names = [target_name]
    files: dict[str, dict] = {}
    tests: dict[str, dict] = {}
    for name in names:
        t = score["targets"][name]
        pop = load(run_dir / "population" / f"{name}.json", Population)
        rows = pop.by_id()
        killers: dict[str, list[str]] = {}
        for key, ids in t["kills_by_test"].items():
            for i in ids:
                killers.setdefault(i, []).append(key)
            path, _, test = key.partition("::")
            tests.setdefault(path, {"tests": []})["tests"].append({"id": key, "name": test})
        task = set(pop.task_set)
        for i in sorted(task | set(pop.held_out)):
            m = rows[i]
            text = pop.sources.get(m.path)
            if text is None:
                raise UserError(f"{run_dir}: the population of {name} has no source text of {m.path}")
            key = f"{name}/{m.path}" if len(names) > 1 else m.path
            entry = files.setdefault(key, {"language": "python", "source": text, "mutants": []})
            lines = text.encode("utf-8").splitlines(keepends=True)

            def char_col(line: int, byte_col: int) -> int:
                return len(lines[line - 1][:byte_col].decode("utf-8", "replace")) + 1

            by = sorted(killers.get(i, []))
            entry["mutants"].append({
                "id": i, "mutatorName": m.operator, "replacement": m.replacement,
                "location": {"start": {"line": m.line, "column": char_col(m.line, m.col)},
                             "end": {"line": m.end_line, "column": char_col(m.end_line, m.end_col)}},
                "status": "Killed" if by else "Survived", "killedBy": by,
                "statusReason": ("task set" if i in task else "held-out")
                + f"; the target's own suite: {m.verdict}"})
    return {"schemaVersion": "2", "thresholds": {"high": 80, "low": 60}, "files": files,
            "testFiles": tests,
            "framework": {"name": "killbench", "version": score["killbench"]},
            "config": {"generator": score["run"]["generator"], "model": score["run"].get("model"),
                       "manifest_digest": score.get("manifest_digest")}}
