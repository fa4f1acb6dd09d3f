"""The leaderboard recomputes every number from each bundle's evidence, refuses a bundle
whose numbers do not follow from it, and groups only entries scored on this checkout's
manifests, over the whole benchmark task set."""

from __future__ import annotations

import json

import pytest

from killbench.manifests import load_manifests
from killbench.report import write_leaderboard

from bundles import make_bundle
from test_bundle import edit_json, rewrite


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.split("## Not listed")[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[-1].endswith(".tar.gz"):
            rows[cells[-1]] = cells
    return rows


def _refused(text: str) -> dict[str, str]:
    out = {}
    if "## Not listed" in text:
        for line in text.split("## Not listed")[1].split("##")[0].splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 2 and cells[0].endswith(".tar.gz"):
                out[cells[0]] = cells[1]
    return out


HEAD = ["group", "generator", "model", "budget", "rules", "isolation", "gate calls", "generation",
        "targets", "kills", "of the split"]


def test_groups_over_the_whole_benchmark(tmp_path):
    manifests = load_manifests()
    tasks = sorted(manifests["cachetools"]["task_set"])
    total = sum(len(x["task_set"]) for x in manifests.values())
    make_bundle(tmp_path, "strong", {"cachetools": tasks[:10]})
    make_bundle(tmp_path, "weak", {"cachetools": []})
    make_bundle(tmp_path, "old", {"cachetools": tasks}, source="manifest " + "0" * 64)
    make_bundle(tmp_path, "own", {"some-project": tasks[:1]})
    make_bundle(tmp_path, "loose", {"cachetools": tasks[:12]}, outside_rules=["isolation none"])
    # these bundles' kills are made by hand (nothing ran): the numbers are checked against
    # their evidence, and re-execution, which would refuse them all, is off
    text = write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=None).read_text()
    rows = {k: dict(zip(HEAD, v)) for k, v in _rows(text).items()}
    # 10 discordant mutants all one way: exact McNemar p = 2 * 0.5**10, so two groups
    assert rows["strong.tar.gz"]["group"] == "1" and rows["weak.tar.gz"]["group"] == "2"
    assert rows["strong.tar.gz"]["generator"] == "strong 7"  # the version is part of the entry
    assert rows["strong.tar.gz"]["targets"] == f"1 of {len(manifests)}"
    assert rows["strong.tar.gz"]["of the split"].startswith(f"10 / {total} ")
    assert rows["strong.tar.gz"]["isolation"] == "bwrap"
    assert rows["strong.tar.gz"]["gate calls"] == "10"
    from killbench.rules import load_rules

    b = load_rules().budgets(len(tasks), needs_model=False)
    assert rows["strong.tar.gz"]["budget"] == f"{b.gate_calls} gate calls, {b.seconds:.0f} s"  # no tokens
    # the stale entry killed everything, yet it is neither grouped nor counted on the benchmark
    assert rows["old.tar.gz"]["group"] == "-" and "cachetools stale" in rows["old.tar.gz"]["targets"]
    assert rows["old.tar.gz"]["of the split"] == "-"
    assert rows["own.tar.gz"]["group"] == "-" and "some-project outside" in rows["own.tar.gz"]["targets"]
    # outside the rules: listed, flagged, never grouped
    assert rows["loose.tar.gz"]["group"] == "-" and rows["loose.tar.gz"]["rules"].startswith("outside")
    # per target: where each pooled number comes from
    per = text.split("Per target, full split")[1].split("\n## ")[0]
    lines = [[c.strip() for c in line.strip().strip("|").split("|")] for line in per.splitlines()
             if line.startswith("|")]
    head, body = lines[0], {r[0]: dict(zip(lines[0], r)) for r in lines[2:]}
    assert head[:2] == ["target", "tasks"] and "strong 7" in head and "weak 7" in head
    cache = body["cachetools"]
    assert cache["tasks"] == str(len(manifests["cachetools"]["splits"]["full"]))
    assert cache["strong 7"] == "10" and cache["weak 7"] == "0" and cache["loose 7"] == "12"
    assert body["toolz"]["strong 7"] == "-"  # not run


def test_a_forged_bundle_is_not_listed(tmp_path):
    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    honest = make_bundle(tmp_path, "honest", {"cachetools": tasks[:2]})
    forged = tmp_path / "forged.tar.gz"
    forged.write_bytes(honest.read_bytes())
    # 50 kills claimed through a test that does not exist, sums recomputed
    rewrite(forged, {"bundle/score.json": edit_json(lambda s: s["targets"]["cachetools"]["kills"]
                                                    .update(k=20))})
    stale = tmp_path / "stale.tar.gz"
    stale.write_bytes(honest.read_bytes())
    rewrite(stale, {"bundle/score.json": lambda d: d.replace(b'"k": 2', b'"k": 9')}, resum=False)
    text = write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=None).read_text()
    rows, refused = _rows(text), _refused(text)
    assert set(rows) == {"honest.tar.gz"}
    assert "does not follow from its evidence" in refused["forged.tar.gz"]
    assert "does not match SHA256SUMS" in refused["stale.tar.gz"]


@pytest.mark.slow
def test_a_fabricated_kill_matrix_is_refused_by_re_execution(tmp_path, use_cache):
    """Evidence made up consistently (a kill matrix and gate records claiming a kill that a
    test which asserts nothing cannot make, score and sums recomputed) follows from itself;
    only running it again shows it is false."""
    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    make_bundle(tmp_path, "fabricated", {"cachetools": tasks[:1]})
    text = write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=1).read_text()
    rows, refused = _rows(text), _refused(text)
    assert not rows
    assert "re-executed sample" in refused["fabricated.tar.gz"]


def test_a_claim_to_have_kept_the_rules_is_checked(tmp_path):
    """A run given ten times the rules' gate calls whose config still claims the rules (no
    outside_rules), scored and bundled consistently, is refused: its recorded budgets are
    not the rules' for its task count."""
    from killbench.bundle import bundle
    from killbench.evidence import KillMatrix, RunConfig, load, write
    from killbench.score import RunRecords, compute

    from bundles import make_run

    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    make_bundle(tmp_path, "honest", {"cachetools": tasks[:1]})
    run = make_run(tmp_path / "run-loose", "loose", {"cachetools": tasks[:1]})
    config = load(run / "config.json", RunConfig)
    config.targets["cachetools"].budgets.gate_calls *= 10
    write(run / "config.json", config)
    records = RunRecords(run)
    matrix = load(run / "evidence" / "kills" / "cachetools.json", KillMatrix)
    (run / "score.json").write_text(json.dumps(compute(records, {"cachetools": matrix}, 2000, 0).dump()))
    bundle(run, tmp_path / "loose.tar.gz")
    refused = _refused(write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=None).read_text())
    assert "claims the rules but its budgets" in refused["loose.tar.gz"]
    assert "honest.tar.gz" not in refused


def test_provenance_generated_against_other_manifests_is_refused(tmp_path):
    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    honest = make_bundle(tmp_path, "honest", {"cachetools": tasks[:1]})
    moved = tmp_path / "moved.tar.gz"
    moved.write_bytes(honest.read_bytes())
    # the config says the run started under other manifests; sums recomputed
    rewrite(moved, {"bundle/config.json": edit_json(lambda c: c.update(manifest_digest="0" * 64))})
    refused = _refused(write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=None).read_text())
    assert "manifests changed between generation and submission" in refused["moved.tar.gz"]


@pytest.mark.slow
def test_the_committed_docs_are_generated_from_the_committed_data(tmp_path):
    """docs/leaderboard.md and docs/benchmark.md are outputs: a hand edit, or a bundle or
    manifest added without regenerating them, fails here. Every number is still recomputed
    from each bundle's evidence; the re-execution of the committed bundles (twelve target
    environments and every claimed kill, 17 minutes from an empty cache) is what
    `killbench leaderboard` does when the board is written, and is replaced here by a stand-in
    that finds no difference and records what it was asked to run. Re-execution itself is
    tested on constructed bundles (the fabricated kill matrix below, tests/test_bundle.py)."""
    from pathlib import Path

    from killbench.manifests import index_of, render_benchmark_md

    root = Path(__file__).resolve().parent.parent
    asked = []

    def no_difference(path, sample, seed):
        asked.append((path.name, sample, seed))
        return []

    board = write_leaderboard(root / "submissions", tmp_path / "leaderboard.md", reexecute=2,
                              differences=no_difference).read_text()
    assert board == (root / "docs" / "leaderboard.md").read_text()
    checked = {line.split("|")[-2].strip() for line in board.splitlines()
               if "sample of 2 re-executed" in line or "| verified " in line}
    assert asked and {name for name, _, _ in asked} == checked
    assert {(sample, seed) for _, sample, seed in asked} == {(2, 0)}
    manifests = load_manifests(root / "manifests")
    assert render_benchmark_md(index_of(manifests), manifests) == (root / "docs" / "benchmark.md").read_text()


def test_cite_prints_the_block_of_a_verified_bundle_only(tmp_path):
    from killbench.cite import citation, write_record
    from killbench.errors import UserError
    from killbench.manifests import current_benchmark, current_digest
    from killbench.score import load_score

    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    b = make_bundle(tmp_path, "cited", {"cachetools": tasks[:2]})
    with pytest.raises(UserError, match="no verify record"):
        citation(b)
    score = load_score(tmp_path / "run-cited" / "score.json")
    write_record(b, ["a difference"], score)  # a verify that failed is no verification
    with pytest.raises(UserError, match="did not pass"):
        citation(b)
    write_record(b, [], score, [f"finding {i}" for i in range(250)])
    forged = json.loads((b.parent / (b.name + ".verified.json")).read_text())
    # findings are no differences: the verify passed, and the record keeps them (the first 200)
    assert forged["outcome"] == "passed" and forged["findings_count"] == 250
    assert forged["findings"] == [f"finding {i}" for i in range(200)]
    board = write_leaderboard(b.parent, tmp_path / "board.md", reexecute=None).read_text()
    assert f"verified {forged['date'][:10]} (250 seed-dependent kept tests)" in board
    forged["result"]["k"] = 25  # a record edited to cite more kills than the evidence gives
    (b.parent / (b.name + ".verified.json")).write_text(json.dumps(forged))
    plain, bib = citation(b)
    import hashlib

    sha = hashlib.sha256(b.read_bytes()).hexdigest()
    assert f"benchmark {current_benchmark()}" in plain and current_digest() in plain
    assert sha in plain and sha in bib and "full split" in plain
    assert bib.startswith("@misc{") and f"2 / {len(tasks)}" in plain
    b.write_bytes(b.read_bytes() + b"\0")  # other bytes than the ones verified
    with pytest.raises(UserError, match="names other bytes"):
        citation(b)


def test_a_bundle_against_a_withdrawn_build_is_refused(tmp_path, monkeypatch):
    from killbench import manifests
    from killbench.manifests import current_digest

    tasks = sorted(load_manifests()["cachetools"]["task_set"])
    make_bundle(tmp_path, "honest", {"cachetools": tasks[:1]})
    monkeypatch.setattr(manifests, "WITHDRAWN", {current_digest(): "a build found wrong"})
    refused = _refused(write_leaderboard(tmp_path, tmp_path / "board.md", reexecute=None).read_text())
    assert "withdrawn: a build found wrong" in refused["honest.tar.gz"]
