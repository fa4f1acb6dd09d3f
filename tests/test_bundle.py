"""A bundle re-gates and re-scores to the same evidence and numbers; an edited one is caught,
and every edit is named."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from killbench.bundle import bundle, verify
from killbench.errors import UserError
from killbench.report import export_mutation_testing_report, write_leaderboard, write_report
from killbench.run import run_generator
from killbench.score import score_run


def rewrite(archive, edits: dict, resum: bool = True):
    """Edit members of a bundle and (as a careful forger would) recompute SHA256SUMS."""
    with tarfile.open(archive) as tf:
        files = {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    for name, fn in edits.items():
        files[name] = fn(files[name])
    if resum:
        sums = "".join(f"{hashlib.sha256(v).hexdigest()}  {k[len('bundle/'):]}\n"
                       for k, v in sorted(files.items()) if k != "bundle/SHA256SUMS")
        files["bundle/SHA256SUMS"] = sums.encode()
    with tarfile.open(archive, "w:gz") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def edit_json(fn):
    def apply(data: bytes) -> bytes:
        obj = json.loads(data)
        fn(obj)
        return json.dumps(obj).encode()
    return apply


def forge_consistently(archive, work, edit_matrix):
    """Edit the kill matrix, then recompute score.json from the edited evidence and the sums:
    a bundle that is consistent with itself and false."""
    from killbench.evidence import KillMatrix, load
    from killbench.score import RunRecords, compute

    with tarfile.open(archive) as tf:
        tf.extractall(work, filter="data")
    root = work / "bundle"
    path = root / "evidence" / "kills" / "basic.json"
    path.write_bytes(edit_json(edit_matrix)(path.read_bytes()))
    records = RunRecords(root)
    matrices = {n: load(root / "evidence" / "kills" / f"{n}.json", KillMatrix)
                for n in records.config.targets}
    score = compute(records, matrices, 2000, 0).dump()
    files = {p.relative_to(work).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    files["bundle/score.json"] = json.dumps(score).encode()
    with tarfile.open(archive, "w:gz") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    rewrite(archive, {})


@pytest.mark.slow
def test_bundle_verify_and_tamper(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    run = tmp_path / "run"
    run_generator("fixture_generators:FewTests", [str(project)], out=run, jobs=2, gate_timeout=20)
    score_run(run, jobs=2, resamples=2000)
    archive = bundle(run, tmp_path / "sub.tar.gz")

    problems, fresh = verify(archive, jobs=2)
    assert problems == []
    assert fresh.targets["basic"].kills.k == 1
    problems, _ = verify(archive, jobs=2, sample=1)
    assert problems == []

    # the views people look at, from the same run; export reads the run directory only
    report = write_report([run], tmp_path / "report", html=True)
    assert {p.name for p in (tmp_path / "report").glob("*.png")} == {
        "kill_rate.png", "funnel.png", "transfer_by_class.png", "kills_vs_tokens.png"}
    assert "1 / 6 (16.7%)" in report.read_text()
    page = (tmp_path / "report" / "report.html").read_text()
    assert "report.html" in report.read_text() and page.count("data:image/png;base64,") == 4
    [killed_row] = [r for r in page.split("<tr") if r.startswith(' class="killed"')]
    [key] = [k for k, ids in json.loads((run / "score.json").read_text())["targets"]["basic"]
             ["kills_by_test"].items() if ids]
    assert key.split("::")[1] in killed_row  # the task's row names the test that kills it
    assert f"def {key.split('::')[1].split('[')[0]}(" in page  # and the test's code is shown
    board = write_leaderboard(tmp_path, tmp_path / "leaderboard.md").read_text()
    assert "few-tests" in board and "sub.tar.gz" in board and "bwrap" in board
    mtr = export_mutation_testing_report(run)
    assert mtr["schemaVersion"] == "2" and set(mtr["thresholds"]) == {"high", "low"}
    mutants = [m for f in mtr["files"].values() for m in f["mutants"]]
    assert len(mutants) == 16  # 6 task-set + 10 held-out mutants of the fixture
    killed = [m for m in mutants if m["status"] == "Killed"]
    assert len(killed) == 2 and all(m["killedBy"] for m in killed)
    assert all(m["location"]["start"]["column"] >= 1 for m in mutants)
    with pytest.raises(UserError, match="no such target"):
        export_mutation_testing_report(run, "nosuch")

    # each edit, sums recomputed, is named
    cases = {
        "value_class_share": ({"bundle/score.json": edit_json(
            lambda s: s["value_class_share"].update(k=0))}, "value_class_share.k"),
        "tokens": ({"bundle/score.json": edit_json(
            lambda s: s["targets"]["basic"]["cost"].update(tokens_in=123))},
            "targets.basic.cost.tokens_in"),
        "kills": ({"bundle/score.json": edit_json(
            lambda s: s["targets"]["basic"]["kills"].update(k=5))}, "targets.basic.kills.k"),
    }
    for name, (edits, expected) in cases.items():
        forged = tmp_path / f"forged-{name.replace(' ', '-')}.tar.gz"
        forged.write_bytes(archive.read_bytes())
        rewrite(forged, edits)
        problems, _ = verify(forged, jobs=2, sample=3)
        assert any(expected in p for p in problems), (name, problems)
    # a fabricated kill matrix with a score.json recomputed from it: only re-execution sees it
    forged = tmp_path / "forged-matrix.tar.gz"
    forged.write_bytes(archive.read_bytes())
    forge_consistently(forged, tmp_path / "unpacked", lambda m: [
        run.update(cells={k: "failed" for k in run["cells"]}) for run in m["runs"]])
    problems, _ = verify(forged, jobs=2)
    assert not any("its own evidence gives" in p for p in problems)
    assert any("kill matrix" in p and "re-executed passed" in p for p in problems), problems
    # an edited test file no longer matches its name; stale sums are caught before anything runs
    kept_file = next(n for n in tarfile.open(archive).getnames()
                     if n.startswith("bundle/candidates/") and b"is False" in
                     tarfile.open(archive).extractfile(n).read())
    edited, stale = tmp_path / "edited.tar.gz", tmp_path / "stale.tar.gz"
    edited.write_bytes(archive.read_bytes())
    stale.write_bytes(archive.read_bytes())
    rewrite(edited, {kept_file: lambda d: d.replace(b"is False", b"is not True")})
    assert any("the test was edited" in p for p in verify(edited, jobs=2)[0])
    rewrite(stale, {"bundle/score.json": lambda d: d + b" "}, resum=False)
    assert verify(stale, jobs=2)[0] == ["score.json: content does not match SHA256SUMS"]
