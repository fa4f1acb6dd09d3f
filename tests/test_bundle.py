"""A bundle re-gates and re-scores to the same numbers; a tampered one is caught."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from killbench.bundle import bundle, verify
from killbench.report import export_mutation_testing_report, write_leaderboard, write_report
from killbench.run import run_generator
from killbench.score import score_run


def _rewrite(archive, edits: dict):
    """Edit members of a bundle and recompute SHA256SUMS, as a careful tamperer would."""
    with tarfile.open(archive) as tf:
        files = {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    for name, fn in edits.items():
        files[name] = fn(files[name])
    sums = "".join(f"{hashlib.sha256(v).hexdigest()}  {k[len('bundle/'):]}\n"
                   for k, v in sorted(files.items()) if k != "bundle/SHA256SUMS")
    files["bundle/SHA256SUMS"] = sums.encode()
    with tarfile.open(archive, "w:gz") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.mark.slow
def test_bundle_verify_and_tamper(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    run = tmp_path / "run"
    run_generator("fixture_generators:FewTests", [str(project)], out=run, jobs=2, gate_timeout=20)
    (run / "score.json").write_text(json.dumps(score_run(run, jobs=2, resamples=2000)))
    archive = bundle(run, tmp_path / "sub.tar.gz")

    problems, fresh = verify(archive, jobs=2)
    assert problems == []
    assert fresh["targets"]["basic"]["kills"]["k"] == 1

    # the views people look at, from the same run
    report = write_report([run], tmp_path / "report")
    assert {p.name for p in (tmp_path / "report").glob("*.png")} == {
        "kill_rate.png", "funnel.png", "transfer_by_class.png", "kills_vs_tokens.png"}
    assert "1 / 8 (12.5%)" in report.read_text()
    board = write_leaderboard(tmp_path, tmp_path / "leaderboard.md").read_text()
    assert "few-tests" in board and "sub.tar.gz" in board
    mtr = export_mutation_testing_report(run)
    assert mtr["schemaVersion"] == "2" and set(mtr["thresholds"]) == {"high", "low"}
    mutants = [m for f in mtr["files"].values() for m in f["mutants"]]
    assert len(mutants) == 18  # 8 task-set + 10 held-out mutants of the fixture
    assert {m["status"] for m in mutants} <= {"Killed", "Survived", "NoCoverage", "Timeout",
                                             "CompileError", "RuntimeError", "Ignored"}
    killed = [m for m in mutants if m["status"] == "Killed"]
    assert len(killed) == 2 and all(m["killedBy"] for m in killed)
    assert all(m["location"]["start"]["column"] >= 1 for m in mutants)

    kept_file = next(n for n in tarfile.open(archive).getnames()
                     if n.startswith("bundle/candidates/") and b"is False" in
                     tarfile.open(archive).extractfile(n).read())

    def inflate(data: bytes) -> bytes:
        s = json.loads(data)
        s["targets"]["basic"]["kills"]["k"] = 5
        return json.dumps(s).encode()

    _rewrite(archive, {"bundle/score.json": inflate,
                       kept_file: lambda d: d.replace(b"is False", b"is not True")})
    problems, _ = verify(archive, jobs=2)
    text = "\n".join(problems)
    assert "basic.kills: bundle says (5, 8), re-scored (1, 8)" in text
    assert "the test was edited" in text


def test_verify_finds_every_task_where_two_operators_make_the_same_edit(tmp_path):
    # `flag=False` -> `True` is made by bool-constant (task set) and by default-argument
    # (held-out family): verify must rebuild both ids, as the manifest build enumerates them
    from types import SimpleNamespace

    from killbench.bundle import _task_mutants
    from killbench.mutate import default_operators, enumerate_file, held_out_operators

    src = "def f(flag=False):\n    return flag\n"
    (tmp_path / "m.py").write_text(src)
    ids = {c.mutant.id for ops in (default_operators(), held_out_operators())
           for c in enumerate_file("m.py", src, ops)}
    target = SimpleNamespace(name="t", tree=tmp_path, sources=[SimpleNamespace(path="m.py")])
    assert set(_task_mutants(target, {i: {} for i in ids})) == ids
