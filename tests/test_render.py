"""The terminal rendering of a score, from a committed bundle's score.json."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from killbench.metrics import Score
from killbench.render import render_score

BUNDLE = Path(__file__).resolve().parent.parent / "submissions" / \
    "amplify-3-v0.2-lite-1.0.killbench.tar.gz"


def test_a_target_with_nothing_to_count_within_function_says_so_not_0_of_0():
    with tarfile.open(BUNDLE) as tf:
        score = Score.model_validate(json.load(tf.extractfile("bundle/score.json")))
    text = render_score(score)
    sections = {s.split(" ", 1)[0]: s for s in text.split("\n## ")[1:]}
    counted = [n for n, t in score.targets.items() if t.transfer.within_function_all.n]
    empty = [n for n, t in score.targets.items() if not t.transfer.within_function_all.n]
    assert counted and empty
    for n in counted:
        t = score.targets[n].transfer.within_function_all
        assert f"within function {t.k} / {t.n} (" in sections[n]
    for n in empty:
        assert "within function: none to count" in sections[n]
        assert "within function 0 / 0" not in sections[n]
