"""What the three model-driven built-in generators share: prompt files, options, the
request mode (chat or completion), one model call, and turning a model's answer into
test files.

Nothing here decides whether a test is good: that is the gate's job. Extraction only
cuts an answer down to what could be a test file (imports, helpers, test functions);
an answer with no usable code still becomes a candidate, which the gate rejects with a
reason (syntax-error, no-test-collected), so a model that answers in prose is scored as
such instead of crashing the run or silently vanishing.
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from killbench.errors import UserError
from killbench.models import BudgetExhausted, ModelError  # noqa: F401 (re-exported for generators)

PROMPTS = files("generators") / "prompts"
# providers that serve base models (no chat template): completion mode by default
COMPLETION_PROVIDERS = frozenset({"local"})
# a request the server refused (e.g. a prompt longer than the context window): the task
# is skipped and the run goes on; any other ModelError (server down, bad key) stops it
SKIPPABLE_STATUS = frozenset({400, 413, 422})
FEEDBACK_MESSAGE_CHARS = 1500
_SECTION = re.compile(r"^=== (.+?) ===[ \t]*$", re.M)


# --- prompt files ------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """One prompt file: ``=== name ===`` sections of ``string.Template`` text.

    Lines before the first section are a header (its first line names the prompt and
    its version) and are never sent. Placeholders are ``$name``; a literal dollar is
    ``$$``. The sha256 of the file's bytes goes into the run config.
    """

    name: str
    sha256: str
    sections: dict[str, str]

    def has(self, section: str) -> bool:
        return section in self.sections

    def render(self, section: str, **values: Any) -> str:
        try:
            text = self.sections[section]
        except KeyError:
            raise UserError(f"prompt {self.name}: no section {section!r}") from None
        try:
            return string.Template(text).substitute({k: str(v) for k, v in values.items()})
        except (KeyError, ValueError) as exc:
            raise UserError(f"prompt {self.name}, section {section!r}: bad placeholder "
                            f"{exc}") from None


def parse_prompt(name: str, data: bytes) -> Prompt:
    text = data.decode("utf-8")
    marks = list(_SECTION.finditer(text))
    if not marks:
        raise UserError(f"prompt {name}: no '=== section ===' line")
    sections = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end():end]
        body = body[1:] if body.startswith("\n") else body
        # one newline before the next section marker belongs to the file, not the text
        sections[m.group(1)] = body[:-1] if body.endswith("\n") else body
    return Prompt(name, hashlib.sha256(data).hexdigest(), sections)


def load_prompt(name: str) -> Prompt:
    """``generators/prompts/NAME`` (the package data), read at run time."""
    path = PROMPTS / name
    if not path.is_file():
        raise UserError(f"prompt file {name} is missing from generators/prompts/")
    return parse_prompt(name, path.read_bytes())


# --- options -----------------------------------------------------------------------


def _int(name: str, value, minimum: int = 1) -> int:
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise UserError(f"option {name}={value!r}: not an integer") from None
    if out < minimum:
        raise UserError(f"option {name}={value!r}: must be at least {minimum}")
    return out


def _float(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UserError(f"option {name}={value!r}: not a number") from None


@dataclass
class Options:
    """Options shared by the three built-ins (``killbench run -o KEY=VALUE``, strings ok)."""

    mode: str = "auto"  # chat | completion | auto (completion for base-model providers)
    max_tokens: int = 600  # output cap asked for per request (the budget may lower it)
    temperature: float = 0.0
    max_tasks: int | None = None  # only the first N tasks (in task-set order)
    functions: tuple[str, ...] = ()  # only tasks in these functions (qualified names)
    extra: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, generator: str, given: dict, *, defaults: dict | None = None,
              extra: dict | None = None) -> Options:
        """``extra``: this generator's own options, name -> (default, converter)."""
        given = dict(given)
        extra = extra or {}
        known = {"mode", "max_tokens", "temperature", "max_tasks", "functions", *extra}
        unknown = sorted(set(given) - known)
        if unknown:
            raise UserError(f"generator {generator!r} has no option {', '.join(unknown)}; "
                            f"its options: {', '.join(sorted(known))}")
        opts = cls(**(defaults or {}))
        if "mode" in given:
            opts.mode = str(given["mode"]).strip().lower()
            if opts.mode not in ("auto", "chat", "completion"):
                raise UserError(f"option mode={given['mode']!r}: use chat, completion or auto")
        if "max_tokens" in given:
            opts.max_tokens = _int("max_tokens", given["max_tokens"])
        if "temperature" in given:
            opts.temperature = _float("temperature", given["temperature"])
        if given.get("max_tasks") not in (None, ""):
            opts.max_tasks = _int("max_tasks", given["max_tasks"])
        if "functions" in given:
            value = given["functions"]
            names = value.split(",") if isinstance(value, str) else list(value)
            opts.functions = tuple(n.strip() for n in names if n and n.strip())
        for name, (default, convert) in extra.items():
            opts.extra[name] = convert(name, given[name]) if name in given else default
        return opts

    def as_dict(self) -> dict:
        out = {"mode": self.mode, "max_tokens": self.max_tokens, "temperature": self.temperature,
               "max_tasks": self.max_tasks, "functions": list(self.functions)}
        out.update(self.extra)
        return out

    def select(self, tasks: list) -> list:
        picked = [t for t in tasks if not self.functions or t.function in self.functions]
        return picked[: self.max_tasks] if self.max_tasks is not None else picked


def int_option(name, value):
    return _int(name, value)


def resolve_mode(opts: Options, model) -> str:
    """chat or completion: the option, else what the model's provider serves."""
    modes = getattr(model, "modes", frozenset({"chat"}))
    if opts.mode != "auto":
        mode = opts.mode
    else:
        mode = getattr(model, "default_mode", None) or (
            "completion" if getattr(model, "provider", None) in COMPLETION_PROVIDERS else "chat")
    if mode not in modes:
        raise UserError(f"{getattr(model, 'name', model)!r} does not support mode={mode} "
                        f"(it supports {', '.join(sorted(modes))}); pass -o mode=chat or "
                        "-o mode=completion")
    return mode


# --- one model call ----------------------------------------------------------------


@dataclass
class Answer:
    text: str
    meta: dict


def ask(ctx, messages: list[dict], *, opts: Options, mode: str, attempt_id: str,
        stop: list[str] | None = None, max_tokens: int | None = None) -> Answer | None:
    """One request. None when the server refused this request (logged, task skipped);
    BudgetExhausted and other ModelErrors propagate (the run records them)."""
    try:
        resp = ctx.model.complete(messages, max_tokens=max_tokens or opts.max_tokens,
                                  temperature=opts.temperature, stop=stop, mode=mode,
                                  attempt_id=attempt_id)
    except ModelError as exc:
        if exc.status in SKIPPABLE_STATUS:
            ctx.log(f"{attempt_id}: request refused, skipped: {exc}")
            return None
        raise
    usage = resp.usage.as_dict() if resp.usage is not None else None
    meta = {"attempt_id": attempt_id, "mode": mode, "request_hash": resp.request_hash,
            "usage": usage, "cached": resp.cached, "finish_reason": resp.finish_reason,
            "max_tokens": resp.max_tokens, "latency_s": round(resp.latency_s, 3)}
    return Answer(resp.text, meta)


# --- from an answer to test files --------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.S | re.M)
PY_FENCES = {"python", "py", "python3", "pytest", ""}


def code_of(text: str) -> tuple[str, str]:
    """The Python in an answer: its fenced python blocks joined (an unterminated block,
    cut by max_tokens, counts), else the whole answer. Returns (code, how)."""
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in PY_FENCES]
    if blocks:
        return "\n\n".join(b.rstrip() for b in blocks) + "\n", "fenced"
    return text, "whole"


def _segment(lines: list[str], node: ast.AST) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[first - 1: node.end_lineno]).rstrip() + "\n"


def _is_test(node: ast.stmt) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name.startswith("test")
    return isinstance(node, ast.ClassDef) and node.name.startswith("Test")


def _is_support(node: ast.stmt) -> bool:
    """Kept with every test: imports, helper functions and classes (fixtures), constants."""
    return isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.Assign, ast.AnnAssign))


def _units(code: str) -> list[str]:
    """Top-level chunks of code that does not parse as a whole (a test cut short by
    max_tokens, prose between functions): each starts at a column-0 statement."""
    lines = code.splitlines(keepends=True)
    starts, prev, open_deco = [], "", False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if (stripped and not line[0].isspace() and not stripped.startswith(("#", ")", "]", "}"))
                and not prev.rstrip().endswith(("\\", ",", "(", "[", "{")) and not open_deco):
            starts.append(i)
        if stripped and not stripped.startswith("#"):
            open_deco = not line[0].isspace() and stripped.startswith("@")
            prev = line
    starts = starts or [0]
    if starts[0] != 0:
        starts.insert(0, 0)
    bounds = starts + [len(lines)]
    return ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


@dataclass
class Extraction:
    """What an answer holds: support code shared by its tests, and each test."""

    code: str  # the code taken from the answer, before cutting
    how: str  # fenced | whole, plus "+salvaged" when parts were dropped
    support: list[str]
    tests: list[tuple[str, str]]  # (name, source)

    def file(self, tests: list[tuple[str, str]] | None = None) -> str:
        """A test file: the support code, then the given tests (default: all)."""
        chosen = self.tests if tests is None else tests
        if not chosen:  # nothing usable: the answer as it came, for the gate to reject
            return self.code if self.code.strip() else self.code + "\n"
        imports = [s for s in self.support if s.startswith(("import ", "from "))]
        rest = [s for s in self.support if s not in imports]
        parts = (["".join(imports)] if imports else []) + rest + [src for _, src in chosen]
        return "\n\n".join(p.rstrip("\n") + "\n" for p in parts)

    def meta(self) -> dict:
        return {"extracted": self.how, "tests_in_answer": len(self.tests)}


def extract(text: str) -> Extraction:
    """Keep the syntactically valid test functions of an answer with their imports."""
    code, how = code_of(text)
    try:
        chunks = [(ast.parse(code), code)]
    except SyntaxError:
        chunks = []
        for unit in _units(code):
            try:
                chunks.append((ast.parse(unit), unit))
            except SyntaxError:
                continue
        how += "+salvaged"
    support, tests, seen = [], [], set()
    for tree, src in chunks:
        lines = src.splitlines(keepends=True)
        for node in tree.body:
            if _is_test(node):
                tests.append((node.name, _segment(lines, node)))
            elif _is_support(node):
                seg = _segment(lines, node)
                if seg not in seen:
                    seen.add(seg)
                    support.append(seg)
    # a support def that a test shadows by name would hide the test: drop it
    names = {n for n, _ in tests}
    support = [s for s in support if not any(s.startswith(f"def {n}(") for n in names)]
    return Extraction(code, how, support, tests)


# --- prompt pieces -----------------------------------------------------------------


def completion_prompt(text: str) -> str:
    """A completion prompt ends with its def line *and* the newline after it, so that the
    model starts the body (the prompt file's last newline is not part of its section)."""
    return text if text.endswith("\n") else text + "\n"


def comment(text: str) -> str:
    """Text as Python comment lines (what a base model sees of code it must not run)."""
    return "\n".join(("# " + line).rstrip() for line in text.rstrip("\n").splitlines()) or "#"


def test_name(task) -> str:
    base = (task.function or "module").replace(".<locals>", "").replace(".", "_")
    slug = re.sub(r"[^0-9A-Za-z_]+", "_", base).strip("_").lower()
    slug = re.sub(r"_+", "_", slug) or "module"
    return f"test_{slug}"


def import_lines(task) -> str:
    """What a completion prompt imports for a task: pytest, the module and the
    top-level name that holds the function."""
    lines = ["import pytest", "", f"import {task.module}"]
    head = (task.function or "").split(".")[0]
    if head.isidentifier():
        lines.append(f"from {task.module} import {head}")
    return "\n".join(lines)


def feedback(prompt: Prompt, result) -> str:
    """Why the gate rejected a test, in the words of the prompt file."""
    reason = getattr(result, "reason", None) or "rejected"
    message = (getattr(result, "message", None) or "").strip()
    if len(message) > FEEDBACK_MESSAGE_CHARS:
        message = message[:FEEDBACK_MESSAGE_CHARS] + " ..."
    section = f"reason {reason}"
    if prompt.has(section):
        return prompt.render(section, message=message or reason)
    return f"{reason}: {message}" if message else reason


def split_source(text: str, limit: int) -> list[str]:
    """A module's source in parts of at most ~limit characters, cut between top-level
    statements (one part when it fits)."""
    if len(text) <= limit:
        return [text]
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [text[i:i + limit] for i in range(0, len(text), limit)]
    lines = text.splitlines(keepends=True)
    cuts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) - 1
            for n in tree.body]
    cuts = [0] + [c for c in cuts if c > 0] + [len(lines)]
    parts, current = [], ""
    for a, b in zip(cuts, cuts[1:]):
        piece = "".join(lines[a:b])
        if current and len(current) + len(piece) > limit:
            parts.append(current)
            current = ""
        current += piece
    if current.strip():
        parts.append(current)
    return parts


def prompt_hashes(*names: str) -> dict[str, str]:
    return {name: load_prompt(name).sha256 for name in names}


def start(opts, ctx, chat: str, completion: str):
    """The mode for this model, its prompt file, and the tasks selected by the options."""
    mode = resolve_mode(opts, ctx.model)
    return mode, load_prompt(chat if mode == "chat" else completion), opts.select(ctx.tasks)
