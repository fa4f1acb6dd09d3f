"""targeted-gated: one request per task, shown the function and the mutant's diff; the
written test goes through the gate, and on rejection the next attempt is told why
(the gate's reason and message), up to ``max_attempts`` attempts per task, all within
the target's token budget. The approach the seed found to catch 44 of 53.

Every attempt is yielded as a CandidateTest (attempt 1, 2, ...): the harness gates it
again from its cache, at no cost, so the run directory holds each attempt with its
verdict. Chat models get a conversation (each retry adds the rejected answer and the
reason); base models (completion mode) get a test file to continue, where earlier
attempts and their reasons appear as comments.
"""

from __future__ import annotations

from killbench.generation import CandidateTest, GenerationContext

from . import _common as c

CHAT = "targeted_gated.chat.v2.txt"
COMPLETION = "targeted_gated.completion.v2.txt"
STOP = ["\n\n", "\ndef ", "\nclass ", "\nif __name__"]  # the body ends at its first blank line


class TargetedGatedGenerator:
    name = "targeted-gated"
    version = "2"
    needs_model = True

    def __init__(self, **options):
        self.opts = c.Options.parse(self.name, options, defaults={"max_tokens": 600},
                                    extra={"max_attempts": (3, c.int_option)})
        self.max_attempts = self.opts.extra["max_attempts"]

    def prompt_hashes(self) -> dict[str, str]:
        return c.prompt_hashes(CHAT, COMPLETION)

    def generate(self, ctx: GenerationContext):
        mode, prompt, tasks = c.start(self.opts, ctx, CHAT, COMPLETION)
        ctx.log(f"{len(tasks)} tasks, up to {self.max_attempts} attempts each, {mode} mode")
        for task in tasks:
            yield from (self._chat(ctx, prompt, task) if mode == "chat"
                        else self._completion(ctx, prompt, task))

    # --- chat models -----------------------------------------------------------

    def _chat(self, ctx, prompt: c.Prompt, task):
        messages = [
            {"role": "system", "content": prompt.render("system")},
            {"role": "user", "content": prompt.render(
                "user", module=task.module, path=task.path,
                function_source=task.function_source.rstrip("\n"), diff=task.diff.rstrip("\n"))},
        ]
        for attempt in range(1, self.max_attempts + 1):
            answer = c.ask(ctx, messages, opts=self.opts, mode="chat",
                           attempt_id=f"{task.id}/{attempt}")
            if answer is None:
                return
            ex = c.extract(answer.text)
            source = ex.file()
            result = ctx.gate(source, task.id)
            yield CandidateTest(source, task=task.id, attempt=attempt,
                                meta={**answer.meta, **ex.meta()})
            if result.kept:
                return
            messages += [{"role": "assistant", "content": answer.text},
                         {"role": "user", "content": prompt.render(
                             "retry", feedback=c.feedback(prompt, result))}]

    # --- base models -----------------------------------------------------------

    def _completion(self, ctx, prompt: c.Prompt, task):
        imports, name = c.import_lines(task), c.test_name(task)
        head = f"{imports}\n\n\ndef {name}():\n"
        previous = ""
        for attempt in range(1, self.max_attempts + 1):
            text = prompt.render(
                "prompt", module=task.module, path=task.path,
                function_comment=c.comment(task.function_source), diff_comment=c.comment(task.diff),
                previous=previous, imports=imports, test_name=name)
            prompt_text = c.completion_prompt(text)
            answer = c.ask(ctx, [{"role": "user", "content": prompt_text}], opts=self.opts,
                           mode="completion", attempt_id=f"{task.id}/{attempt}", stop=STOP)
            if answer is None:
                return
            ex = c.extract(head + answer.text)
            source = ex.file()
            result = ctx.gate(source, task.id)
            yield CandidateTest(source, task=task.id, attempt=attempt,
                                meta={**answer.meta, **ex.meta()})
            if result.kept:
                return
            body = ex.tests[0][1] if ex.tests else f"def {name}():\n" + answer.text
            previous += "\n" + prompt.render("previous", feedback=c.feedback(prompt, result),
                                             code_comment=c.comment(body))
