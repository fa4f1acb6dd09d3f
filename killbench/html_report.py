"""One scored run as a page a person can browse: every task with its diff and the kept
tests that kill it, every kept test's code, and the held-out kills, per target.

A reporter only: it reads the run directory (score.json, the tasks, the candidates) and
computes nothing a score does not already hold. Everything shown that a generator wrote
(test names, code) is escaped: the page is opened by people ranking untrusted output.
The page is one self-contained file with no script and no remote resource, so it opens
offline and from a bundle as it is.
"""

from __future__ import annotations

import ast
import html
import json
from pathlib import Path

from .errors import UserError
from .report import ci_text

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; width: 100%; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.killed { background: #e3f6e3; } .survived { background: #fbe9e9; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 0.9em; }
.badge.killed { border: 1px solid #6b6; } .badge.survived { border: 1px solid #c66; }
pre { background: #f8f8f8; padding: 6px; margin: 0; font-size: 12.5px;
      white-space: pre-wrap; overflow-wrap: anywhere; }
table.tasks { table-layout: fixed; } td { overflow-wrap: anywhere; }
.add { color: #075e07; } .del { color: #9b1111; } .meta { color: #777; }
summary { cursor: pointer; } .muted { color: #666; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _rate(d: dict | None) -> str:
    if not d or not d.get("n"):
        return "-"
    return ci_text(d, "95% CI ")


def _diff(text: str) -> str:
    out = []
    for line in text.splitlines():
        cls = "meta" if line.startswith(("---", "+++", "@@")) else \
            "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        out.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def _test_source(run_dir: Path, key: str) -> str | None:
    """The function of kept test `key` ("tests/test_killbench_<candidate>.py::name[...]")
    from its candidate file, or None when it cannot be found."""
    path, _, name = key.partition("::")
    cid = Path(path).stem.removeprefix("test_killbench_")
    name = name.split("[")[0].split("::")[-1]
    file = run_dir / "candidates" / f"{cid}.py"
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.get_source_segment(text, node, padded=True)
    return None


def _target_section(run_dir: Path, name: str, t: dict, prefix: str = "") -> list[str]:
    tasks_file = run_dir / "tasks" / f"{name}.json"
    tasks = json.loads(tasks_file.read_text()) if tasks_file.exists() else []
    killers: dict[str, list[str]] = {}
    held_out: dict[str, list[str]] = {}
    task_ids = {x["id"] for x in tasks}
    for key, ids in t["kills_by_test"].items():
        for i in ids:
            (killers if i in task_ids else held_out).setdefault(i, []).append(key)
    anchors = {key: f"{prefix}{_e(name)}-test-{n}"
               for n, key in enumerate(sorted(t["kills_by_test"]))}
    out = [f'<h2 id="{prefix}{_e(name)}">{_e(name)}</h2>',
           f"<p>kills: <b>{_e(_rate(t['kills']))}</b> of the task set; kept tests "
           f"{t['kept_tests']} in {t['kept_files']} files; held-out mutants killed "
           f"{len(held_out)}; source: {_e(t.get('population_source', '-'))}</p>",
           '<table class="tasks"><colgroup><col style="width:10em"><col style="width:13em">'
           '<col style="width:8em"><col><col style="width:15em"></colgroup>'
           "<tr><th>task</th><th>where</th><th>operator</th><th>diff</th>"
           "<th>status</th></tr>"]
    for task in tasks:
        by = sorted(killers.get(task["id"], []))
        status = "killed" if by else "survived"
        links = "<br>".join(f'<a href="#{anchors[k]}">{_e(k.split("::", 1)[-1])}</a>'
                            for k in by) or "no kept test kills it"
        out.append(f'<tr class="{status}"><td><code>{_e(task["id"])}</code></td>'
                   f'<td>{_e(task["path"])}:{task["line"]}<br>'
                   f'<span class="muted">{_e(task.get("function") or "(module level)")}</span></td>'
                   f'<td>{_e(task["operator"])}</td><td>{_diff(task["diff"])}</td>'
                   f'<td><span class="badge {status}">{status}</span><br>{links}</td></tr>')
    out.append("</table>")
    if t["kills_by_test"]:
        out.append("<h3>Kept tests that kill a mutant</h3>")
        for key in sorted(t["kills_by_test"]):
            ids = t["kills_by_test"][key]
            in_tasks = [i for i in ids if i in task_ids]
            cls = t.get("classes_by_test", {}).get(key, "-")
            src = _test_source(run_dir, key)
            out.append(f'<details id="{anchors[key]}" open><summary><code>{_e(key)}</code> '
                       f'· assertion class {_e(cls)} · kills {len(in_tasks)} task(s), '
                       f'{len(ids) - len(in_tasks)} held-out</summary>'
                       + (f"<pre>{_e(src)}</pre>" if src else
                          '<p class="muted">(its code is not in this run directory)</p>')
                       + "</details>")
    return out


def _run_section(run_dir: Path, index: int) -> tuple[str, list[str]]:
    """One run: its heading, pooled numbers, per-target table with the gate's funnels, and
    each target's tasks and kept tests. Anchors are prefixed by the run's index, so that
    several runs share one page."""
    score_path = run_dir / "score.json"
    if not score_path.exists():
        raise UserError(f"{run_dir}: no score.json (run `killbench score {run_dir}` first)")
    score = json.loads(score_path.read_text())
    run = score["run"]
    gen = run["generator"]
    gen_label = f"{gen['name']} {gen.get('version', '')}".strip() if isinstance(gen, dict) else str(gen)
    label = gen_label + (f" · {run['model']}" if run.get("model") else "")
    outside = run.get("outside_rules") or []
    head = [f'<h1 id="run{index}">{_e(label)}</h1>',
            f"<p>run directory <code>{_e(run_dir)}</code> · benchmark "
            f"{_e(score.get('benchmark', '-'))} · {_e(score.get('split', 'full'))} split · "
            f"killbench {_e(score['killbench'])} · isolation {_e(run.get('isolation', '-'))}"
            f" · manifest digest <code>{_e(score.get('manifest_digest', '-'))}</code></p>",
            f"<p>pooled task kills: <b>{_e(_rate(score.get('pooled_kills')))}</b>"
            + (f" · tokens per kill {_e(score['tokens_per_kill'])}" if score.get("tokens_per_kill")
               else "") + "</p>"]
    if outside:
        head.append(f"<p><b>Outside the benchmark's rules:</b> {_e('; '.join(outside))}</p>")
    if not score.get("complete", True):
        head.append("<p><b>Incomplete run:</b> not every target was scored.</p>")
    from .metrics import FILE_FUNNEL, TEST_FUNNEL

    rows = "".join(
        f'<tr><td><a href="#r{index}-{_e(n)}">{_e(n)}</a></td><td class="n">'
        f'{_e(_rate(t["kills"]))}</td><td class="n">{t["kept_tests"]}</td>'
        f'<td>{_e(" → ".join(str(t.get("file_funnel", {}).get(k, 0)) for k in FILE_FUNNEL))}</td>'
        f'<td>{_e(" → ".join(str(t.get("test_funnel", {}).get(k, 0)) for k in TEST_FUNNEL))}</td>'
        f'<td>{_e(", ".join(f"{k} {v}" for k, v in sorted(t.get("rejections", {}).items())) or "-")}</td></tr>'
        for n, t in score["targets"].items())
    head.append("<table><tr><th>target</th><th>task kills [95% CI]</th><th>kept tests</th>"
                f"<th>files: {_e(' → '.join(FILE_FUNNEL))}</th>"
                f"<th>tests: {_e(' → '.join(TEST_FUNNEL))}</th><th>rejected</th></tr>"
                + rows + "</table>")
    body = []
    for name, t in score["targets"].items():
        body += _target_section(run_dir, name, t, prefix=f"r{index}-")
    return label, head + body


def _page(title: str, parts: list[str]) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def render_html(run_dir: Path) -> str:
    """One run's page."""
    label, parts = _run_section(run_dir, 1)
    return _page(f"killbench: {label}", parts)


def render_report(run_dirs: list[Path], plots: list[Path] = ()) -> str:
    """Several runs on one self-contained page: the plots embedded (data URIs), then each
    run's section."""
    import base64

    sections = [_run_section(d, i) for i, d in enumerate(run_dirs, 1)]
    parts = ["<h1>killbench report</h1>",
             "<ul>" + "".join(f'<li><a href="#run{i}">{_e(label)}</a></li>'
                              for i, (label, _) in enumerate(sections, 1)) + "</ul>"]
    for p in plots:
        data = base64.b64encode(Path(p).read_bytes()).decode("ascii")
        parts.append(f'<p><img alt="{_e(Path(p).stem)}" style="max-width:100%" '
                     f'src="data:image/png;base64,{data}"></p>')
    for _, body in sections:
        parts += body
    return _page("killbench report", parts)


def write_html(run_dir: Path, out: Path) -> Path:
    out.write_text(render_html(run_dir), encoding="utf-8")
    return out
