"""The built-in model-driven generators (one-prompt, untargeted, targeted-gated) and
user plug-ins, driven through `killbench.run.run_generator` on the fixture target
`basic` with a loopback OpenAI server (tests/model_servers.py) scripted to answer known
things: a good test, a test failing on clean code, one that misses the mutant, prose.
What is checked is what a comparison of generators rests on: which requests were sent
(and that the gate's reasons reach the next targeted-gated prompt), which candidates
were written and how the gate judged them, tokens as the API reported them, the budget
stopping a run, exact replay, and registration of a generator that is not killbench's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from killbench.errors import UserError
from killbench.models import Transcript
from killbench.plugins import load_generator, registered
from killbench.run import run_generator

import fixture_generators as fg
from model_servers import FakeOpenAI, Reply

from generators import _common as c
from generators.one_prompt import OnePromptGenerator
from generators.targeted_gated import TargetedGatedGenerator
from generators.untargeted import UntargetedGenerator

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = Path(__file__).parent / "fixtures" / "plugin_pkg"
MODEL = "openai-compatible/fake-model"
ENV = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KILLBENCH_BASE_URL", "KILLBENCH_API_KEY"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


class Answering(FakeOpenAI):
    """A fake OpenAI server whose answer is a function of the request body."""

    def __init__(self, answer):
        super().__init__(*[Reply("")] * 500)
        self.answer = answer

    def render(self, kind, body, reply):
        return super().render(kind, body, self.answer(body))


def fenced(code: str, prose: str = "Here is the test:") -> str:
    return f"{prose}\n\n```python\n{code.strip()}\n```\n"


def last_user(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


def gate_lines(run: Path) -> list[dict]:
    """Each yielded file, in the order the generator yielded it, with the gate's verdict."""
    from killbench.evidence import GateEntry, Submission, read_jsonl

    entries = {(e.candidate, e.task): e for e in read_jsonl(run / "evidence" / "gate.jsonl", GateEntry)}
    out = []
    for sub in read_jsonl(run / "candidates.jsonl", Submission):
        e = entries[(sub.candidate, sub.task)]
        out.append({**sub.dump(), "kept": e.kept, "reason": e.reason})
    return out


def candidate(run: Path, entry: dict) -> str:
    return (run / "candidates" / f"{entry['candidate']}.py").read_text()


def summary_of(run: Path) -> dict:
    return next(iter(json.loads((run / "summary.json").read_text()).values()))


def run(ref, project, out, **kw):
    kw.setdefault("jobs", 2)
    kw.setdefault("gate_timeout", 30)
    return run_generator(ref, [str(project)], out=out, **kw)


# --- without a target: extraction, prompts, options ------------------------------------

def test_extraction_keeps_valid_test_functions_with_their_imports():
    answer = ("Sure! Tests:\n```python\nimport pytest\nfrom basic import is_big\n\n"
              "def helper():\n    return 11\n\ndef test_a():\n    assert is_big(helper())\n\n"
              "@pytest.mark.parametrize('n', [1, 2])\ndef test_b(n):\n    assert not is_big(n)\n\n"
              "def test_cut():\n    assert is_big(\n```\nHope this helps.")
    ex = c.extract(answer)
    assert [n for n, _ in ex.tests] == ["test_a", "test_b"]  # the test cut short is dropped
    assert ex.how == "fenced+salvaged"
    one = ex.file([ex.tests[1]])
    assert one.startswith("import pytest\nfrom basic import is_big\n")
    assert "def helper()" in one and "@pytest.mark.parametrize" in one and "test_a" not in one
    compile(one, "t.py", "exec")
    # no fence: the whole answer; several blocks are joined
    assert c.extract("def test_x():\n    assert 1\n").tests[0][0] == "test_x"
    two = c.extract("```python\nimport os\n```\ntext\n```py\ndef test_y():\n    assert os.sep\n```")
    assert two.file() == "import os\n\n\ndef test_y():\n    assert os.sep\n"
    # an unterminated block (max_tokens hit) still counts
    assert c.extract("```python\ndef test_z():\n    assert True\n").tests[0][0] == "test_z"


@pytest.mark.parametrize("answer", ["I am sorry, I cannot write that test.", "", "```\n\n```",
                                    "def test_(:\n", "Sure"])
def test_a_non_python_answer_becomes_a_candidate_never_a_crash(answer):
    ex = c.extract(answer)
    assert ex.tests == []
    src = ex.file()
    assert isinstance(src, str) and src.strip() == c.code_of(answer)[0].strip()


def test_prompts_are_versioned_files_and_hashed():
    for gen in (OnePromptGenerator(), UntargetedGenerator(), TargetedGatedGenerator()):
        hashes = gen.prompt_hashes()
        assert len(hashes) == 2
        for name, digest in hashes.items():
            assert re.fullmatch(r"[a-z_]+\.(chat|completion)\.v\d+\.txt", name)
            data = (ROOT / "generators" / "prompts" / name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == digest
            assert data.decode().startswith(f"# killbench prompt {gen.name}/")
    tg = c.load_prompt("targeted_gated.chat.v2.txt")
    from killbench.gate import REASONS
    assert all(tg.has(f"reason {r}") for r in REASONS)  # every rejection can be explained


def test_options_are_checked_and_coerced():
    gen = TargetedGatedGenerator(max_attempts="2", max_tokens="300", functions="a,b.c")
    assert gen.max_attempts == 2 and gen.opts.max_tokens == 300
    assert gen.opts.functions == ("a", "b.c")
    with pytest.raises(UserError, match="no option nope; its options:"):
        UntargetedGenerator(nope="1")
    with pytest.raises(UserError, match="max_attempts='x': not an integer"):
        TargetedGatedGenerator(max_attempts="x")
    with pytest.raises(UserError, match="mode='poem'"):
        OnePromptGenerator(mode="poem")


def test_base_model_providers_default_to_completion_mode():
    class Client:
        modes = frozenset({"chat", "completion"})

        def __init__(self, provider):
            self.provider, self.name = provider, provider + "/m"

    auto = c.Options()
    assert c.resolve_mode(auto, Client("local")) == "completion"  # also replay of a local run
    assert c.resolve_mode(auto, Client("openai")) == "chat"
    assert c.resolve_mode(c.Options(mode="completion"), Client("openai")) == "completion"
    only_chat = Client("anthropic")
    only_chat.modes = frozenset({"chat"})
    with pytest.raises(UserError, match="does not support mode=completion"):
        c.resolve_mode(c.Options(mode="completion"), only_chat)


# --- the built-ins on the fixture target ------------------------------------------------

IS_BIG = {"functions": "is_big"}  # one task: `n > THRESHOLD` -> `n >= THRESHOLD`


@pytest.mark.slow
def test_targeted_gated_feeds_the_gates_reasons_back_then_replays_exactly(
        fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    script = [Reply(fenced(fg.FAILS_ON_CLEAN), 100, 30), Reply(fenced(fg.DOES_NOT_DETECT), 220, 31),
              Reply(fenced(fg.KILLS_BOUNDARY, "Corrected:"), 350, 32)]
    with FakeOpenAI(*script) as server:
        out = run("targeted-gated", project, tmp_path / "run", model=MODEL, base_url=server.url,
                  options=IS_BIG, budget=50_000, no_cache=True)
    reqs = [r.body for r in server.received]
    assert len(reqs) == 3 and all(r["max_tokens"] == 600 for r in reqs)
    first = last_user(reqs[0])
    assert "def is_big" in first and "+    return n >= THRESHOLD" in first
    assert "-    return n > THRESHOLD" in first
    # attempt 2 is told why attempt 1 was rejected, with the gate's own message
    assert len(reqs[1]["messages"]) == 4 and reqs[1]["messages"][2]["role"] == "assistant"
    retry = last_user(reqs[1])
    assert "failed on the original code" in retry and "AssertionError" in retry
    assert "test_wrong" in retry
    retry = last_user(reqs[2])
    assert "passed on the changed code too" in retry and "passed on the mutant too" in retry
    assert len(reqs[2]["messages"]) == 6

    gate = gate_lines(out)
    assert [(g["attempt"], g["kept"], g["reason"]) for g in gate] == [
        (1, False, "fails-on-clean"), (2, False, "did-not-detect"), (3, True, None)]
    assert len({g["task"] for g in gate}) == 1
    assert candidate(out, gate[2]).strip() == fg.KILLS_BOUNDARY.strip()
    assert [g["meta"]["usage"] for g in gate] == [
        {"input_tokens": 100, "output_tokens": 30}, {"input_tokens": 220, "output_tokens": 31},
        {"input_tokens": 350, "output_tokens": 32}]
    s = summary_of(out)
    assert (s["files"], s["kept_tests"], s["rejected"]["fails-on-clean"],
            s["rejected"]["did-not-detect"]) == (3, 1, 1, 1)
    assert s["gate_calls_by_generator"] == 3 and s["gate_calls"] == 3 and s["stopped"] is None
    assert (s["budget"]["spent_in"], s["budget"]["spent_out"], s["budget"]["calls"]) == (670, 93, 3)
    calls = Transcript.read(out / "transcript.jsonl")
    assert [x["attempt_id"].rsplit("/", 1)[1] for x in calls] == ["1", "2", "3"]
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "targeted-gated"
    assert set(config["generator"]["prompts"]) == {"targeted_gated.chat.v2.txt",
                                                   "targeted_gated.completion.v2.txt"}

    # replay: no server, the same requests answered from the transcript, the same tests
    again = run("targeted-gated", project, tmp_path / "replayed", model=f"replay/{out}",
                options=IS_BIG, budget=50_000)
    assert [(g["candidate"], g["attempt"], g["kept"], g["reason"]) for g in gate_lines(again)] \
        == [(g["candidate"], g["attempt"], g["kept"], g["reason"]) for g in gate]
    assert summary_of(again)["budget"]["spent"] == s["budget"]["spent"]
    assert all(x["source"] == "replay" for x in Transcript.read(again / "transcript.jsonl"))


@pytest.mark.slow
def test_untargeted_sees_the_function_never_the_mutant(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    good = "from basic import sign\n\n\ndef test_sign_zero():\n    assert sign(0) == 1\n"
    clean_fail = "from basic import sign\n\n\ndef test_sign_wrong():\n    assert sign(2) == -1\n"
    script = [Reply("I would need to see more of the library first.", 50, 12),
              Reply(fenced(good), 60, 20), Reply(fenced(clean_fail), 90, 20)]
    with FakeOpenAI(*script) as server:
        out = run("untargeted", project, tmp_path / "run", model=MODEL, base_url=server.url,
                  options={"functions": "sign"}, no_cache=True)
    tasks = json.loads((out / "tasks" / "basic.json").read_text())
    sign_tasks = [t for t in tasks if t["function"] == "sign"]
    assert len(sign_tasks) == 3
    reqs = [r.body for r in server.received]
    assert len(reqs) == 3  # one request per task
    for body in reqs:
        prompt = last_user(body)
        assert "def sign(n):" in prompt and "return 1 if n >= 0 else-1" in prompt
        assert "@@" not in prompt and "```diff" not in prompt
        for t in sign_tasks:  # no mutated line is shown
            mutated = [x[1:] for x in t["diff"].splitlines() if x.startswith("+") and
                       not x.startswith("+++")]
            assert all(m not in prompt for m in mutated)
    # the answer with no test is not shown as "already written"; the good one is
    assert "Tests already written" not in last_user(reqs[1])
    assert "Tests already written" in last_user(reqs[2]) and "test_sign_zero" in last_user(reqs[2])
    gate = gate_lines(out)
    assert [g["task"] for g in gate] == [t["id"] for t in sign_tasks]
    assert all(g["attempt"] == 1 for g in gate)
    assert gate[0]["reason"] == "syntax-error"
    assert candidate(out, gate[0]) == "I would need to see more of the library first."
    assert gate[1]["reason"] in (None, "did-not-detect") and candidate(out, gate[1]) == good
    assert gate[2]["reason"] == "fails-on-clean"
    s = summary_of(out)
    assert s["files"] == 3 and s["gate_calls_by_generator"] == 0  # untargeted never gates
    assert s["gate_calls"] == 3  # the harness gated each file it yielded
    assert (s["budget"]["spent_in"], s["budget"]["spent_out"]) == (200, 52)


@pytest.mark.slow
def test_one_prompt_splits_the_answer_into_task_less_tests(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    answer = fenced("""
import pytest
from basic import is_big, parse_positive


def test_big():
    assert is_big(50)


def test_parse_wrong():
    assert parse_positive("3") == 4


def test_parse_negative():
    with pytest.raises(ValueError):
        parse_positive("-2")


def test_cut_short():
    assert parse_positive(
""", "Here are more tests for the module.")
    with FakeOpenAI(Reply(answer, 400, 180, finish_reason="length")) as server:
        out = run("one-prompt", project, tmp_path / "run", model=MODEL, base_url=server.url,
                  no_cache=True)
    [req] = server.received  # one module, one request
    prompt = last_user(req.body)
    assert "Write more pytest tests for this module" in prompt and "def untested(items)" in prompt
    assert "tests/test_basic.py" in prompt and "```diff" not in prompt
    assert req.body["max_tokens"] == 2048
    gate = gate_lines(out)
    assert all(g["task"] is None for g in gate)
    by_test = {g["meta"]["test"]: (g["kept"], g["reason"]) for g in gate}
    assert by_test == {"test_big": (True, None), "test_parse_wrong": (False, "fails-on-clean"),
                       "test_parse_negative": (True, None)}
    src = candidate(out, next(g for g in gate if g["meta"]["test"] == "test_big"))
    assert src.startswith("import pytest\nfrom basic import is_big, parse_positive\n")
    assert "test_parse" not in src
    assert {g["meta"]["request_hash"] for g in gate} == {gate[0]["meta"]["request_hash"]}
    s = summary_of(out)
    assert (s["files"], s["kept_tests"]) == (3, 2)
    assert (s["budget"]["spent_in"], s["budget"]["spent_out"]) == (400, 180)


@pytest.mark.slow
def test_budget_exhaustion_stops_the_run_and_keeps_what_was_written(
        fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    prose = Reply("Let me think about this mutant step by step.", 150, 20)
    with FakeOpenAI(*[prose] * 10) as server:
        out = run("targeted-gated", project, tmp_path / "run", model=MODEL, base_url=server.url,
                  budget=250, no_cache=True)
    reqs = [r.body for r in server.received]
    # 250 tokens: the first call may write 250, the second what is left (80), then none
    assert [r["max_tokens"] for r in reqs] == [250, 80]
    s = summary_of(out)
    assert s["stopped"].startswith("budget exhausted")
    # the same prose twice: two attempts, one distinct file (gated once)
    assert s["attempts"] == 2 and s["files"] == 1 and s["rejected"]["syntax-error"] == 1
    assert s["budget"]["spent"] == 340 and s["budget"]["overshoot"] == 90
    assert s["budget"]["refused_calls"] == 1
    assert [g["attempt"] for g in gate_lines(out)] == [1, 2]
    lines = Transcript.read(out / "transcript.jsonl")
    assert [x["kind"] for x in lines] == ["call", "call", "budget-exhausted"]


@pytest.mark.slow
def test_completion_mode_for_base_models(fixture_target, use_cache, tmp_path):
    project = fixture_target("basic")
    script = [Reply("    assert is_big(100) is True\n", 300, 9),
              Reply("    assert is_big(10) is False\n", 380, 9)]
    with FakeOpenAI(*script) as server:
        out = run("targeted-gated", project, tmp_path / "run", model=MODEL, base_url=server.url,
                  options={**IS_BIG, "mode": "completion", "max_attempts": "2",
                           "max_tokens": "120"}, no_cache=True)
    reqs = server.received
    assert [r.path for r in reqs] == ["/v1/completions"] * 2
    first, second = reqs[0].body["prompt"], reqs[1].body["prompt"]
    assert first.endswith("from basic import is_big\n\n\ndef test_is_big():\n")
    assert "# +    return n >= THRESHOLD" in first and "#     return n > THRESHOLD" in first
    assert reqs[0].body["stop"] == ["\n\n", "\ndef ", "\nclass ", "\nif __name__"]
    assert reqs[0].body["max_tokens"] == 120
    assert "# An earlier test was rejected: it passed on the changed code too" in second
    assert "#     assert is_big(100) is True" in second and second.endswith("def test_is_big():\n")
    gate = gate_lines(out)
    assert [(g["attempt"], g["reason"]) for g in gate] == [(1, "did-not-detect"), (2, None)]
    assert candidate(out, gate[1]) == ("import pytest\nimport basic\nfrom basic import is_big\n\n\n"
                                       "def test_is_big():\n    assert is_big(10) is False\n")
    assert gate[1]["meta"]["mode"] == "completion"


# --- a user's generator: module:attr and an entry point of a package that is not killbench --

@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """tests/fixtures/plugin_pkg, installed with pip into a directory of its own (no
    network, nothing added to killbench's environment)."""
    site = tmp_path_factory.mktemp("plugin-site")
    build = tmp_path_factory.mktemp("plugin-src")
    import shutil
    shutil.copytree(PLUGIN, build / "pkg")  # pip may write build files next to the source
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-index", "--disable-pip-version-check", "--target", str(site),
                           str(build / "pkg")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (site / "kb_example_plugin" / "__init__.py").is_file()
    return site


def _plugin_answer(body):
    prompt = last_user(body)
    if "return n >= THRESHOLD" in prompt:
        return Reply(fenced(fg.KILLS_BOUNDARY), 120, 25)
    return Reply("No idea.", 100, 3)


def test_plugin_registers_by_entry_point(plugin_site, monkeypatch):
    assert "one-shot" not in registered()
    monkeypatch.syspath_prepend(str(plugin_site))
    assert registered()["one-shot"] == "kb_example_plugin:OneShotGenerator"
    gen = load_generator("one-shot", {"max_tokens": "123"})
    assert gen.name == "one-shot" and gen.max_tokens == 123
    assert type(load_generator("kb_example_plugin:OneShotGenerator")).__name__ == "OneShotGenerator"


@pytest.mark.slow
def test_plugin_runs_from_the_command_line_by_entry_point(plugin_site, fixture_target, use_cache,
                                                         tmp_path):
    project = fixture_target("basic")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(plugin_site), "KILLBENCH_CACHE": str(use_cache)}
    with Answering(_plugin_answer) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "killbench.cli", "run", "--generator", "one-shot", "--targets",
             str(project), "--model", MODEL, "--base-url", server.url, "--no-cache", "--out",
             str(out), "-o", "max_tokens=200", "--jobs", "2"],
            capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["generator"]["name"] == "one-shot" and config["generator"]["ref"] == "one-shot"
    gate = gate_lines(out)
    tasks = json.loads((out / "tasks" / "basic.json").read_text())
    assert len(gate) == len(tasks) == len(server.received)
    kept = [g for g in gate if g["kept"]]
    assert len(kept) == 1 and candidate(out, kept[0]).strip() == fg.KILLS_BOUNDARY.strip()
    assert {g["reason"] for g in gate if not g["kept"]} == {"syntax-error"}


@pytest.mark.slow
def test_plugin_runs_as_module_attr(plugin_site, fixture_target, use_cache, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    project = fixture_target("basic")
    with Answering(lambda body: Reply("No idea.", 100, 3)) as server:
        out = run("kb_example_plugin:OneShotGenerator", project, tmp_path / "run", model=MODEL,
                  base_url=server.url, budget=300, no_cache=True)
    s = summary_of(out)
    # 300 tokens: each "No idea." costs 103, the fourth call is refused by the budget and
    # the plug-in stops cleanly (it catches BudgetExhausted itself)
    assert s["budget"]["calls"] == 3 and s["budget"]["refused_calls"] == 1
    assert s["files"] == 3 and s["stopped"] is None


def test_docs_worked_example_is_the_fixture_plugin():
    """docs/generators.md shows the plug-in package verbatim: the example a user
    follows is the one this file installs and runs."""
    doc = (ROOT / "docs" / "generators.md").read_text()
    code = (PLUGIN / "src" / "kb_example_plugin" / "__init__.py").read_text()
    assert code.strip() in doc, "docs/generators.md does not show the plug-in's code as it is"
    pyproject = (PLUGIN / "pyproject.toml").read_text()
    table = pyproject[pyproject.index("[project.entry-points"):].strip()
    assert table in doc and 'name = "kb-example-plugin"' in doc
