"""The HTML page of a run escapes what a generator wrote: it is opened by the people a
generator is ranked by, and a test's code is untrusted text."""

from __future__ import annotations

import json

import pytest

from killbench.errors import UserError
from killbench.html_report import render_html

HOSTILE = '''from basic import is_big


def test_big():
    assert "<script>alert(1)</script>" != str(is_big(11))
'''


def _run(tmp_path):
    run = tmp_path / "run"
    (run / "tasks").mkdir(parents=True)
    (run / "candidates").mkdir()
    (run / "candidates" / "abc.py").write_text(HOSTILE)
    task = {"id": "m1", "path": "src/basic/__init__.py", "line": 12, "function": "is_big",
            "operator": "compare-flip", "diff": "--- a\n+++ b\n-    return n > T\n+    return n >= T\n"}
    (run / "tasks" / "basic.json").write_text(json.dumps([task, dict(task, id="m2", line=20)]))
    rate = {"k": 1, "n": 2, "low": 0.1, "high": 0.9}
    key = "tests/test_killbench_abc.py::test_big"
    score = {"killbench": "0", "benchmark": "1.0.0", "split": "full", "manifest_digest": "d",
             "pooled_kills": rate, "complete": True,
             "run": {"generator": {"name": "gen<b>", "version": "1"}, "model": None,
                     "isolation": "bwrap", "outside_rules": []},
             "targets": {"basic": {"kills": rate, "kept_tests": 1, "kept_files": 1,
                                   "population_source": "manifest x",
                                   "kills_by_test": {key: ["m1", "h9"]},
                                   "classes_by_test": {key: "value"},
                                   "file_funnel": {"files": 1, "collected": 1},
                                   "test_funnel": {"tests": 1, "kept": 1},
                                   "rejections": {}}}}
    (run / "score.json").write_text(json.dumps(score))
    return run


def test_the_page_escapes_code_and_names_and_shows_each_tasks_status(tmp_path):
    page = render_html(_run(tmp_path))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "gen<b>" not in page and "gen&lt;b&gt;" in page
    rows = page.split("<tr")
    [m1] = [r for r in rows if "<code>m1</code>" in r]
    [m2] = [r for r in rows if "<code>m2</code>" in r]
    assert m1.startswith(' class="killed"') and "test_big" in m1
    assert m2.startswith(' class="survived"') and "no kept test kills it" in m2
    assert "kills 1 task(s), 1 held-out" in page  # h9 is not a task: a held-out kill
    assert "1 / 2 (50.0%)" in page


def test_a_run_that_was_never_scored_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="killbench score"):
        render_html(tmp_path / "empty")


@pytest.mark.slow
@pytest.mark.skipif(__import__("shutil").which("chromium") is None,
                    reason="no chromium (CI installs Debian's)")
def test_a_real_browser_renders_the_report_of_a_committed_run(tmp_path):
    """`killbench report --html` on the committed amplify lite bundle, opened by headless
    chromium: the DOM it builds has one killed row per task kill, the four plots decoded,
    and a screenshot is written."""
    import subprocess
    import tarfile
    from pathlib import Path

    from click.testing import CliRunner

    from killbench.cli import main

    bundle = Path(__file__).resolve().parent.parent / "submissions" / \
        "amplify-3-v0.2-lite-1.0.killbench.tar.gz"
    with tarfile.open(bundle) as tf:
        tf.extractall(tmp_path, filter="data")
    run = tmp_path / "bundle"
    result = CliRunner().invoke(main, ["report", str(run), "--out", str(tmp_path / "rep"), "--html"])
    assert result.exit_code == 0, result.output
    page = tmp_path / "rep" / "report.html"
    kills = json.loads((run / "score.json").read_text())["pooled_kills"]["k"]
    args = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}"]
    dom = subprocess.run(args + ["--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<tr class="killed">') == kills == 3
    assert dom.stdout.count("data:image/png;base64,") == 4
    shot = tmp_path / "shot.png"
    done = subprocess.run(args + ["--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and shot.stat().st_size > 50_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
