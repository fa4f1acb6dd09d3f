"""untargeted: one request per task, shown the function that holds the mutant but not
the mutant; one test per request, attributed to the task. The seed's control for
targeting: same model, same budget, same gate, no knowledge of the fault.

Several tasks often sit in one function. So that they do not ask the very same
question (and get the same answer), the k-th request for a function also shows the
tests already written for it and asks for a different one: what changes between
requests is never the mutant.
"""

from __future__ import annotations

from killbench.generation import CandidateTest, GenerationContext

from . import _common as c

CHAT = "untargeted.chat.v1.txt"
COMPLETION = "untargeted.completion.v1.txt"
STOP = ["\n\n", "\ndef ", "\nclass ", "\nif __name__"]  # the body ends at its first blank line
MAX_PREVIOUS_CHARS = 4000  # tests shown from earlier requests on the same function


class UntargetedGenerator:
    name = "untargeted"
    version = "1"
    needs_model = True

    def __init__(self, **options):
        self.opts = c.Options.parse(self.name, options, defaults={"max_tokens": 600})

    def prompt_hashes(self) -> dict[str, str]:
        return c.prompt_hashes(CHAT, COMPLETION)

    def generate(self, ctx: GenerationContext):
        mode, prompt, tasks = c.start(self.opts, ctx, CHAT, COMPLETION)
        ctx.log(f"{len(tasks)} tasks, one request each, {mode} mode")
        written: dict[tuple[str, str], list[str]] = {}  # (path, function source) -> tests
        for task in tasks:
            key = (task.path, task.function_source)
            earlier = _recent(written.get(key, []))
            if mode == "chat":
                previous = prompt.render("previous", tests="\n\n".join(earlier).rstrip("\n")) \
                    if earlier else ""
                messages = [
                    {"role": "system", "content": prompt.render("system")},
                    {"role": "user", "content": prompt.render(
                        "user", module=task.module, path=task.path,
                        function_source=task.function_source.rstrip("\n"), previous=previous)}]
                answer = c.ask(ctx, messages, opts=self.opts, mode="chat",
                               attempt_id=f"{task.id}/1")
                if answer is None:
                    continue
                ex = c.extract(answer.text)
            else:
                imports, name = c.import_lines(task), c.test_name(task)
                previous = "\n" + prompt.render("previous", tests_comment=c.comment(
                    "\n\n".join(earlier))) if earlier else ""
                text = prompt.render("prompt", module=task.module, path=task.path,
                                     function_comment=c.comment(task.function_source),
                                     previous=previous, imports=imports, test_name=name)
                prompt_text = c.completion_prompt(text)
                answer = c.ask(ctx, [{"role": "user", "content": prompt_text}], opts=self.opts,
                               mode="completion", attempt_id=f"{task.id}/1", stop=STOP)
                if answer is None:
                    continue
                ex = c.extract(f"{imports}\n\n\ndef {name}():\n" + answer.text)
            written.setdefault(key, []).extend(src for _, src in ex.tests)
            yield CandidateTest(ex.file(), task=task.id, attempt=1,
                                meta={**answer.meta, **ex.meta()})


def _recent(tests: list[str]) -> list[str]:
    """The latest tests that fit in MAX_PREVIOUS_CHARS, oldest first."""
    out, size = [], 0
    for src in reversed(tests):
        if size + len(src) > MAX_PREVIOUS_CHARS:
            break
        out.append(src)
        size += len(src)
    return out[::-1]
