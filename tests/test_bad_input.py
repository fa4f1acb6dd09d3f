"""Bad input on the command line: one clear line, a non-zero exit code, and nothing left
behind (no run directory that looks like a run). Each row is a mistake a new user made."""

import pytest
from click.testing import CliRunner

from killbench.cli import main
from killbench.errors import ExitCode

NO_KEYS = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "KILLBENCH_BASE_URL": None,
           "ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None}

# (arguments, words the message must hold); every row must exit USER_ERROR
CASES = {
    "unknown target after a good one": (["run", "-t", "cachetools,nosuch"], ["unknown target 'nosuch'"]),
    "empty target list": (["run", "-t", ""], ["give one or more targets"]),
    "only a comma": (["run", "-t", ","], ["give one or more targets"]),
    "unknown amplify option": (["run", "-o", "nosuch=1"], ["no option nosuch", "search_calls"]),
    "ill-typed amplify option": (["run", "-o", "search_calls=abc"], ["not an integer"]),
    "option without a value": (["run", "-o", "search_calls"], ["KEY=VALUE"]),
    "model without its key": (["run", "-g", "targeted-gated", "--model", "openai/gpt-4.1"],
                              ["OPENAI_API_KEY"]),
    "model name without a provider": (["run", "-g", "targeted-gated", "--model", "gpt-4.1"],
                                      ["provider/model"]),
    "unknown provider": (["run", "-g", "targeted-gated", "--model", "nosuch/x"],
                         ["unknown model provider 'nosuch'"]),
    "model generator without a model": (["run", "-g", "one-prompt"], ["give --model"]),
    "unknown generator": (["run", "-g", "nosuch"], ["unknown generator 'nosuch'"]),
    "model option misspelt": (["run", "-g", "targeted-gated", "--model", "replay/x", "-o",
                               "max_attempt=2"], ["no option max_attempt", "max_attempts"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_refuses_bad_input_before_any_work(case, tmp_path):
    args, words = CASES[case]
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [*args, "--out", str(out)], env=NO_KEYS)
    assert result.exit_code == ExitCode.USER_ERROR, result.output
    for w in words:
        assert w in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_preregister_without_a_prediction_says_so(tmp_path):
    result = CliRunner().invoke(main, ["preregister", "--run", str(tmp_path / "r")])
    assert result.exit_code == ExitCode.USER_ERROR
    assert "no prediction given" in result.output


def test_a_path_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["preregister", "--run", str(blocker / "run"), "x"])
    assert result.exit_code == ExitCode.USER_ERROR
    assert str(blocker) in result.output and "Traceback" not in result.output


def test_leaderboard_without_the_submissions_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["leaderboard"])
    assert result.exit_code == ExitCode.USER_ERROR
    assert "--bundles" in result.output and "no such folder" in result.output


@pytest.mark.parametrize("args, expected", [
    (["run", "-v", "-t", "x"], ["-v", "run", "-t", "x"]),
    (["-v", "run"], ["-v", "run"]),
    (["run", "-o", "-v"], ["run", "-o", "-v"]),  # the value of an option stays
    (["run", "--", "-v"], ["run", "--", "-v"]),
    (["manifests", "build", "--verbose"], ["--verbose", "manifests", "build"]),
    (["nosuch", "-v"], ["nosuch", "-v"]),  # click names the unknown command
    (["verify", "x.tar.gz", "-q"], ["-q", "verify", "x.tar.gz"]),
])
def test_verbose_is_accepted_anywhere(args, expected):
    assert main._verbose_first(list(args)) == expected


def test_verbose_after_the_subcommand_turns_on_debug_logging(tmp_path):
    result = CliRunner().invoke(main, ["preregister", "-v", "--run", str(tmp_path / "r")])
    assert result.exit_code == ExitCode.USER_ERROR  # parsed: -v is not "no such option"
    assert "no prediction given" in result.output


def test_preregister_stores_every_check(tmp_path):
    """Two --check options (a range) were once stored as the last one alone."""
    from killbench.preregister import predictions

    run = tmp_path / "r"
    result = CliRunner().invoke(main, ["preregister", "--run", str(run), "--check",
                                       "pooled.kills >= 35", "--check", "pooled.kills <= 43",
                                       "between 35 and 43"])
    assert result.exit_code == 0, result.output
    assert [p["check"] for p in predictions(run)] == ["pooled.kills >= 35", "pooled.kills <= 43"]
    bad = CliRunner().invoke(main, ["preregister", "--run", str(tmp_path / "s"), "--check",
                                    "pooled.kills >= 1", "--check", "pooled.nosuch < 1", "x"])
    assert bad.exit_code == ExitCode.USER_ERROR and not (tmp_path / "s").exists()


def test_targets_all_names_every_pinned_target(tmp_path, monkeypatch):
    """`--targets all` is the benchmark's twelve pins, in order: a leaderboard row needs
    every one, and listing them by hand is how a run ends up with one target missing."""
    import killbench.run
    from killbench.config import list_pins

    seen = {}

    def stop_here(generator, names, **kw):
        seen["names"] = names
        raise SystemExit(0)

    monkeypatch.setattr(killbench.run, "run_generator", stop_here)
    CliRunner().invoke(main, ["run", "-t", "all", "--out", str(tmp_path / "r")], env=NO_KEYS)
    pins = [p.stem for p in list_pins()]
    assert len(pins) == 12 and "cachetools" in pins and "toolz" in pins
    assert seen["names"] == pins


def test_bad_bundles_and_unwritable_outputs_are_one_line_each(tmp_path):
    """A text file or a truncated archive given to verify, and an output path that cannot
    be made, each get one line naming the file and a non-zero exit, never a traceback."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    real = root / "submissions" / "amplify-3-v0.2-lite-1.0.killbench.tar.gz"
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(real.read_bytes()[:20000])
    run = tmp_path / "run"
    import tarfile

    with tarfile.open(real) as tf:
        tf.extractall(tmp_path / "x", filter="data")
    shutil.move(tmp_path / "x" / "bundle", run)
    cases = [(["verify", str(text)], [str(text), "not a tar archive"]),
             (["verify", str(cut)], [str(cut), "not a readable killbench bundle"]),
             (["report", str(run), "--out", "/proc/nosuch/rep"], ["/proc/nosuch"]),
             (["export", str(run), "--out", "/proc/nosuch/x.json"], ["/proc/nosuch"])]
    for args, words in cases:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == ExitCode.USER_ERROR, (args, result.output)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in result.output, result.output
        for w in words:
            assert w in result.output, (args, result.output)


def test_quiet_anywhere_silences_progress_and_keeps_errors(tmp_path):
    import logging

    text = tmp_path / "notes.txt"
    text.write_text("x")
    result = CliRunner().invoke(main, ["verify", str(text), "-q"])
    assert result.exit_code == ExitCode.USER_ERROR and "not a readable killbench bundle" in result.output
    assert logging.getLogger().getEffectiveLevel() == logging.WARNING
    both = CliRunner().invoke(main, ["-v", "-q", "verify", str(text)])
    assert both.exit_code == 2 and "give one" in both.output
    logging.getLogger().setLevel(logging.INFO)
