"""Known-answer controls in every run: what shows, on the day and the machine of a run,
that the gate still tells a real kill from a gamed one.

Negative controls are tasks whose mutant is equivalent to the clean code (the argument for
each is written in the controls file and was checked by hand). They are ordinary tasks in
the task list a generator receives: same fields, same order, no flag. No test that looks
only at behaviour can kill one, so a kept test on a negative control proves the test saw
the edit by another route (source text, bytecode, timing, a file or variable that differs
between phases), or that the instrument is wrong. The manifest publishes only how many
there are and a salted hash of their ids; the list and the salt are in the controls file,
which is not part of the installed package (a generator run from the package cannot read
it) and is released with the benchmark version that retires them.

Positive controls are mutants the suite kills with a reference test shipped in the
manifest. At the start of every run each reference test goes through the gate exactly as
a generator's test does; if one is not kept, the run stops before any model call, as an
instrument fault.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import HarnessError, UserError
from .locations import repo_root

ENV = "KILLBENCH_CONTROLS"


def commitment(salt: str, ids: list[str]) -> str:
    """sha256 over the salt and the sorted ids: what the manifest publishes."""
    return hashlib.sha256((salt + "\n" + "\n".join(sorted(ids))).encode()).hexdigest()


@dataclass(frozen=True)
class SealedList:
    """The negative controls of one benchmark version, per target, with their arguments."""

    benchmark: str
    salt: str
    negative: dict[str, list[dict]]  # target -> [{id, argument, ...}]
    path: Path

    def ids(self, target: str) -> set[str]:
        """Every sealed id (what the manifest's commitment is over)."""
        return {c["id"] for c in self.negative.get(target, [])}

    def active(self, target: str) -> set[str]:
        """The ids a kill of which marks a run: a control later shown killable by a test that
        looks only at behaviour is withdrawn in place (it stays a task, and sealed), with the
        test that kills it written beside it (docs/benchmark.md)."""
        return {c["id"] for c in self.negative.get(target, []) if not c.get("withdrawn")}


def default_path(benchmark: str) -> Path:
    return repo_root() / "controls" / f"benchmark-{benchmark}.json"


def load_sealed(benchmark: str | None, manifests: dict[str, dict] | None = None) -> SealedList | None:
    """The sealed list (KILLBENCH_CONTROLS, else the checkout's controls/ file), checked
    against every manifest's commitment; None where this installation has none (a package
    install: the numbers then say "sealed")."""
    if benchmark is None:
        return None
    env = os.environ.get(ENV)
    path = Path(env) if env else default_path(benchmark)
    if not path.is_file():
        if env:
            raise UserError(f"{ENV}={env}: no such controls file")
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    sealed = SealedList(benchmark=data.get("benchmark"), salt=data.get("salt", ""),
                        negative={t: list(v) for t, v in data.get("negative", {}).items()}, path=path)
    if sealed.benchmark != benchmark:
        raise UserError(f"{path}: controls of benchmark {sealed.benchmark}, the manifests are {benchmark}")
    for name in sealed.negative:
        if manifests is not None and name in manifests and \
                manifests[name].get("controls", {}).get("negative") is None:
            raise HarnessError(f"{path} names negative controls of {name}, whose manifest "
                               "publishes no commitment to them")
    for name, m in (manifests or {}).items():
        neg = m.get("controls", {}).get("negative")
        if neg is None:
            continue
        ids = sorted(sealed.ids(name))
        if len(ids) != neg["count"] or commitment(sealed.salt, ids) != neg["commitment"]:
            raise HarnessError(f"{path}: the negative controls of {name} do not match the "
                               "commitment its manifest publishes (a list was edited or swapped)")
    return sealed


def negative_count(manifest: dict) -> int:
    return (manifest.get("controls", {}).get("negative") or {}).get("count", 0)


def positive_controls(manifest: dict) -> list[dict]:
    return list(manifest.get("controls", {}).get("positive", []))


def add_to_manifest(manifest: dict, salt: str, negative_ids: list[str],
                    positive: list[dict], lite_control: str | None,
                    lite: list[str] | None = None) -> dict:
    """The manifest with its controls: the negative ones' count and commitment (they must be
    tasks already, on lines a test runs), the positive ones with their reference tests
    (mutants the suite kills), and the lite split (`lite`, else the manifest's) with one
    negative control."""
    name = manifest["target"]["name"]
    by_id = {r["id"]: r for r in manifest["mutants"]}
    task = set(manifest["task_set"])
    for i in negative_ids:
        if i not in task:
            raise UserError(f"{name}: negative control {i} is not a task of the manifest")
        if not by_id[i]["covered_by"]:
            raise UserError(f"{name}: negative control {i} is on a line only an import runs")
    for p in positive:
        r = by_id.get(p["id"])
        if r is None or r["verdict"] != "killed":
            raise UserError(f"{name}: positive control {p['id']} is not a mutant the suite kills")
    out = dict(manifest)
    out["controls"] = {
        "negative": {"count": len(negative_ids), "commitment": commitment(salt, negative_ids)},
        "positive": [{"id": p["id"], "file": p["file"], "test": p["test"]} for p in positive],
    }
    if lite_control is not None:
        if lite_control not in negative_ids:
            raise UserError(f"{name}: the lite split's control must be a negative control")
        splits = dict(out["splits"])
        splits["lite"] = sorted(set(lite if lite is not None else splits["lite"]) | {lite_control})
        out["splits"] = splits
    elif lite is not None:
        out["splits"] = dict(out["splits"], lite=sorted(lite))
    return out


def seal(path: Path, directory: Path | None = None) -> dict[str, dict]:
    """Write the controls of `path` (the sealed file: salt, negative controls with their
    arguments, positive controls with their reference tests) into the manifests: the
    maintainers' step after a build. Returns the updated manifests (also written)."""
    from .manifests import BuildSettings, _rank, lite_split, load_manifests, write_manifest

    data = json.loads(path.read_text())
    manifests = load_manifests(directory)
    benchmark = {m.get("benchmark") for m in manifests.values()}
    if benchmark != {data.get("benchmark")}:
        raise UserError(f"{path}: controls of benchmark {data.get('benchmark')}, the manifests "
                        f"are {sorted(map(str, benchmark))}")
    salt = data.get("salt") or ""
    if len(salt) < 32:
        raise UserError(f"{path}: the salt must be at least 32 random characters")
    out = {}
    for name, m in manifests.items():
        settings = BuildSettings.from_dict(m["build"])
        seed = settings.seed
        negative = [c["id"] for c in data.get("negative", {}).get(name, [])]
        for c in data.get("negative", {}).get(name, []):
            if not c.get("argument"):
                raise UserError(f"{path}: negative control {c['id']} of {name} has no argument")
        positive = []
        for p in data.get("positive", {}).get(name, []):
            positive.append({"id": p["id"], "file": p["file"], "test": p["test"]})
        # the lite split drawn again, keyed on the salt: the other tasks by the lite rule,
        # and one control (sealing twice gives the same split)
        rows = {r["id"]: r for r in m["mutants"]}
        others = [i for i in m["task_set"] if i not in set(negative)]
        lite = lite_split(others, rows, settings, name, stream=f"lite:{salt}:{name}:")
        control = min(negative, key=lambda i: _rank(seed, i, f"lite-control:{salt}:{name}:")) \
            if negative else None
        updated = add_to_manifest({k: v for k, v in m.items() if k != "controls"}, salt,
                                  negative, positive, control, lite)
        write_manifest(updated, directory or _manifests_dir())
        out[name] = updated
    return out


def _manifests_dir() -> Path:
    from .manifests import manifests_dir

    return manifests_dir()
