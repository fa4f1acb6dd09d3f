"""one-prompt: one request per target module, "write more tests", no mutant shown; the
answer is split into test functions and each becomes its own candidate with no task
(the gate only checks that it passes cleanly; scoring later runs the kept tests
against every task). The seed's "556 tests, 9 of 53" approach.

Only modules that hold at least one task are asked about (a module with no task can
add no kill and would only spend the budget). A module longer than
``max_source_chars`` is sent in parts, cut between top-level statements, one request
per part, so that every prompt fits a small model's context window.
"""

from __future__ import annotations

from killbench.generation import CandidateTest, GenerationContext, module_name

from . import _common as c

CHAT = "one_prompt.chat.v1.txt"
COMPLETION = "one_prompt.completion.v1.txt"
STOP = ["\nif __name__", "\n```"]


class OnePromptGenerator:
    name = "one-prompt"
    version = "1"
    needs_model = True

    def __init__(self, **options):
        self.opts = c.Options.parse(self.name, options, defaults={"max_tokens": 2048},
                                    extra={"max_source_chars": (16000, c.int_option)})

    def prompt_hashes(self) -> dict[str, str]:
        return c.prompt_hashes(CHAT, COMPLETION)

    def generate(self, ctx: GenerationContext):
        mode, prompt, tasks = c.start(self.opts, ctx, CHAT, COMPLETION)
        paths = sorted({t.path for t in tasks} & set(ctx.sources))
        ctx.log(f"{len(paths)} modules (holding {len(tasks)} tasks), {mode} mode")
        test_files = ", ".join(ctx.test_files) or "none"
        seen: set[str] = set()
        for path in paths:
            module = module_name(ctx.modules[path])
            parts = c.split_source(ctx.sources[path], self.opts.extra["max_source_chars"])
            for i, source in enumerate(parts, 1):
                part = f", part {i} of {len(parts)}" if len(parts) > 1 else ""
                attempt_id = f"{module}/{i}"
                if mode == "chat":
                    messages = [
                        {"role": "system", "content": prompt.render("system")},
                        {"role": "user", "content": prompt.render(
                            "user", module=module, path=path, part=part,
                            source=source.rstrip("\n"), test_files=test_files)}]
                    answer = c.ask(ctx, messages, opts=self.opts, mode="chat",
                                   attempt_id=attempt_id)
                    if answer is None:
                        continue
                    ex = c.extract(answer.text)
                else:
                    name = _first_test_name(source)
                    text = prompt.render("prompt", module=module, path=path, part=part,
                                         source_comment=c.comment(source), test_name=name)
                    prompt_text = c.completion_prompt(text)
                    answer = c.ask(ctx, [{"role": "user", "content": prompt_text}], opts=self.opts,
                                   mode="completion", attempt_id=attempt_id, stop=STOP)
                    if answer is None:
                        continue
                    head = f"import pytest\n\nimport {module}\nfrom {module} import *\n\n\n"
                    ex = c.extract(f"{head}def {name}():\n" + answer.text)
                meta = {**answer.meta, **ex.meta(), "module": module, "part": i}
                if not ex.tests:  # nothing usable: one candidate, for the gate to reject
                    yield CandidateTest(ex.file(), task=None, attempt=1, meta=meta)
                    continue
                for n, test in enumerate(ex.tests, 1):
                    source_file = ex.file([test])
                    if source_file in seen:
                        continue
                    seen.add(source_file)
                    yield CandidateTest(source_file, task=None, attempt=1,
                                        meta={**meta, "test": test[0], "index": n})


def _first_test_name(source: str) -> str:
    """``test_<first public function or class>`` of a module's source."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "test_module"
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and not node.name.startswith("_"):
            return f"test_{node.name.lower()}"
    return "test_module"
