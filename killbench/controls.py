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
        return {c["id"] for c in self.negative.get(target, [])}


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
                    positive: list[dict], lite_control: str | None) -> dict:
    """The manifest with its controls: the negative ones' count and commitment (they must be
    tasks already, on lines a test runs), the positive ones with their reference tests
    (mutants the suite kills), and one negative control added to the lite split."""
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
        splits["lite"] = sorted(set(splits["lite"]) | {lite_control})
        out["splits"] = splits
    return out


def seal(path: Path, directory: Path | None = None) -> dict[str, dict]:
    """Write the controls of `path` (the sealed file: salt, negative controls with their
    arguments, positive controls with their reference tests) into the manifests: the
    maintainers' step after a build. Returns the updated manifests (also written)."""
    from .manifests import _rank, load_build_settings, load_manifests, write_manifest

    data = json.loads(path.read_text())
    manifests = load_manifests(directory)
    benchmark = {m.get("benchmark") for m in manifests.values()}
    if benchmark != {data.get("benchmark")}:
        raise UserError(f"{path}: controls of benchmark {data.get('benchmark')}, the manifests "
                        f"are {sorted(map(str, benchmark))}")
    salt = data.get("salt") or ""
    if len(salt) < 32:
        raise UserError(f"{path}: the salt must be at least 32 random characters")
    seed = load_build_settings().seed
    out = {}
    for name, m in manifests.items():
        negative = [c["id"] for c in data.get("negative", {}).get(name, [])]
        for c in data.get("negative", {}).get(name, []):
            if not c.get("argument"):
                raise UserError(f"{path}: negative control {c['id']} of {name} has no argument")
        positive = []
        for p in data.get("positive", {}).get(name, []):
            positive.append({"id": p["id"], "file": p["file"], "test": p["test"]})
        lite = sorted((i for i in negative if i not in m["splits"]["lite"]),
                      key=lambda i: _rank(seed, i, f"lite-control:{name}:"))
        updated = add_to_manifest({k: v for k, v in m.items() if k != "controls"}, salt,
                                  negative, positive, lite[0] if lite else None)
        write_manifest(updated, directory or _manifests_dir())
        out[name] = updated
    return out


def _manifests_dir() -> Path:
    from .manifests import manifests_dir

    return manifests_dir()
