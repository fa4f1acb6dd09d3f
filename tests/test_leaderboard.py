"""The leaderboard groups only entries scored on this checkout's manifests, over the whole
benchmark task set; a stale or outside entry is listed, flagged, and left out of the groups."""

from __future__ import annotations

import io
import json
import tarfile

from killbench.manifests import load_manifests, target_digest
from killbench.report import write_leaderboard


def _target(source: str, killed: list[str], n: int) -> dict:
    zero = {"tests": 0, "task_kills": 0, "held_out_kills": 0}
    return {"population_source": source, "kept_tests": len(killed), "killed_task_ids": killed,
            "kills": {"k": len(killed), "n": n},
            "by_class": {"value": dict(zero, tests=len(killed))},
            "transfer": {"within_function_all": {"k": 0, "n": 0}}, "cost": {}}


def _bundle(path, name: str, targets: dict) -> None:
    k = sum(t["kills"]["k"] for t in targets.values())
    n = sum(t["kills"]["n"] for t in targets.values())
    score = {"killbench": "0.1.0", "targets": targets,
             "pooled_kills": {"k": k, "n": n, "low": 0.0, "high": 0.5}}
    config = {"generator": {"name": name, "version": "7"}, "model": None, "budget_per_target": 1000}
    with tarfile.open(path, "w:gz") as tf:
        for member, obj in (("bundle/score.json", score), ("bundle/config.json", config)):
            data = json.dumps(obj).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[-1].endswith(".tar.gz"):
            rows[cells[-1]] = cells
    return rows


def test_groups_over_the_whole_benchmark(tmp_path):
    manifests = load_manifests()
    m = manifests["cachetools"]
    src = f"manifest {target_digest(m)}"
    tasks = sorted(m["task_set"])
    total = sum(len(x["task_set"]) for x in manifests.values())
    _bundle(tmp_path / "strong.tar.gz", "strong", {"cachetools": _target(src, tasks[:10], len(tasks))})
    _bundle(tmp_path / "weak.tar.gz", "weak", {"cachetools": _target(src, [], len(tasks))})
    _bundle(tmp_path / "old.tar.gz", "old", {"cachetools": _target("manifest " + "0" * 64, tasks, len(tasks))})
    _bundle(tmp_path / "own.tar.gz", "own", {"some-project": _target("mutate abc", ["x"], 3)})
    rows = _rows(write_leaderboard(tmp_path, tmp_path / "board.md").read_text())
    # 10 discordant mutants all one way: exact McNemar p = 2 * 0.5**10, so two groups
    assert rows["strong.tar.gz"][0] == "1" and rows["weak.tar.gz"][0] == "2"
    assert rows["strong.tar.gz"][1] == "strong 7"  # the generator's version is part of the entry
    assert rows["strong.tar.gz"][4] == f"1 of {len(manifests)}"
    assert rows["strong.tar.gz"][6].startswith(f"10 / {total} ")
    # the stale entry killed everything, yet it is neither grouped nor counted on the benchmark
    assert rows["old.tar.gz"][0] == "-" and "cachetools stale" in rows["old.tar.gz"][4]
    assert rows["old.tar.gz"][6] == "-"
    assert rows["own.tar.gz"][0] == "-" and "some-project outside" in rows["own.tar.gz"][4]


def test_the_committed_docs_are_generated_from_the_committed_data(tmp_path):
    """docs/leaderboard.md and docs/benchmark.md are outputs: a hand edit, or a bundle or
    manifest added without regenerating them, fails here."""
    from pathlib import Path

    from killbench.manifests import index_of, render_benchmark_md

    root = Path(__file__).resolve().parent.parent
    board = write_leaderboard(root / "submissions", tmp_path / "leaderboard.md").read_text()
    assert board == (root / "docs" / "leaderboard.md").read_text()
    manifests = load_manifests(root / "manifests")
    assert render_benchmark_md(index_of(manifests), manifests) == (root / "docs" / "benchmark.md").read_text()
