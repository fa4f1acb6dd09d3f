"""`killbench manifests verify` on committed manifests: a fresh download, fresh
environment and fresh sandboxes reproduce a seeded sample of verdicts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from killbench.manifests import load_manifests

BUILT = sorted(load_manifests())


@pytest.mark.slow
def test_verify_sample(use_cache):
    """Two pins from scratch in CI, verified side by side (a fresh environment, shared by
    the two, and clean runs); all twelve are verified by `killbench manifests verify` with
    no name. Each pin gets its line, whatever order they finish in."""
    names = [n for n in ("cachetools", "toolz") if n in BUILT]
    proc = subprocess.run([sys.executable, "-m", "killbench.cli", "manifests", "verify", *names,
                           "--sample", "4", "--seed", "1", "--jobs", "2"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = sorted(line.split(":")[0] for line in proc.stdout.splitlines() if line.endswith(" s)"))
    assert lines == sorted(names), proc.stdout


def test_committed_manifests_match_the_index():
    from killbench.manifests import index_of, manifests_dir
    import json

    assert BUILT, "the benchmark ships at least one manifest"
    index = json.loads((manifests_dir() / "index.json").read_text())
    assert index == json.loads(json.dumps(index_of(load_manifests())))


@pytest.mark.parametrize("split_name", ["full", "lite"])
def test_provenance_of_a_limited_run_is_its_manifest_cut_the_same_way(split_name):
    """`run --limit N` populations ("manifest <digest>, first N tasks") were parsed with the
    comma in the digest, and so skipped the provenance check on the full split, and failed it
    on the lite one (the manifest's split has more tasks than the cut)."""
    from types import SimpleNamespace

    from killbench.bundle import population_content
    from killbench.manifests import load_manifests, target_digest
    from killbench.population import from_manifest, limited

    m = load_manifests()["cachetools"]
    source = f"manifest {target_digest(m)}" + ("" if split_name == "full" else " lite split")
    pop = limited(from_manifest(m, source, {}, split_name), 2)
    assert pop.limit == 2 and len(pop.task_set) == 2 and pop.source.endswith(", first 2 tasks")

    def records(p):
        return SimpleNamespace(config=SimpleNamespace(targets={"cachetools": None}),
                               population=lambda name: p)

    assert population_content(records(pop)) == []
    forged = pop.model_copy(update={"task_set": [pop.task_set[0], m["held_out"]["ids"][0]]})
    assert population_content(records(forged)) == [
        "cachetools: the population's task_set is not its manifest's"]
