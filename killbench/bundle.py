"""Submissions: pack a run into one archive, and verify one.

A bundle holds what is needed to re-score a run without calling a model: the config,
every candidate test (kept and rejected), the submissions, the gate's evidence and the
kill matrices, the frozen populations, the task sets, the transcript and the journal, the
score as submitted and a list of sha256 sums. ``verify`` checks, in this order, and names
every difference it finds:

1. the archive: readable, every file listed in SHA256SUMS and matching it, nothing
   unlisted, every candidate matching its content-hash name, every record valid;
2. the score: recomputed from the bundle's own evidence, every number of score.json
   (an edited number, or evidence edited without its score, is a difference);
3. the populations: the bundle's must be this checkout's (same manifest, same sets);
4. the evidence: every submission re-gated in fresh sandboxes and every kill-matrix run
   re-executed (or a seeded sample of each, ``sample``), compared test by test;
5. the numbers again, recomputed from the re-executed evidence (full verify only).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import platform
import random
import re
import sys
import tarfile
import tempfile
from contextlib import ExitStack
from pathlib import Path

from pydantic import ValidationError

from . import __version__
from .config import resolve
from .errors import KillbenchError, UserError
from .evidence import KillMatrix, Population, load
from .gate import CLEAN, HASHSEED, MUTANT_DISGUISED, NEUTRAL, Gate, candidate_id, decide
from .harness import default_jobs, load_or_run_baseline, workdir_for
from .manifests import current_digest
from .population import freeze, mutant
from .sandbox import Sandbox
from .score import RunRecords, compute
from .scoring import kill_matrix
from .targets import prepare
from .workspace import exclusive

FILES = ("config.json", "summary.json", "journal.jsonl", "candidates.jsonl", "transcript.jsonl",
         "predictions.jsonl", "generator.log", "score.json")
DIRS = ("candidates", "tasks", "population", "evidence", "evidence/kills")

log = logging.getLogger("killbench")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle(run_dir: Path, out: Path | None = None) -> Path:
    records = RunRecords(run_dir)
    if not (run_dir / "score.json").exists():
        raise UserError(f"{run_dir} has no score.json: run `killbench score {run_dir}` before bundling")
    if not records.state["complete"]:
        raise UserError(f"{run_dir} is an incomplete run ({'; '.join(records.incomplete())}); "
                        "resume it with the same `killbench run` command, then score it")
    files: dict[str, bytes] = {}
    for name in FILES:
        if (run_dir / name).exists():
            files[name] = (run_dir / name).read_bytes()
    for d in DIRS:
        for p in sorted((run_dir / d).glob("*")):
            if p.is_file() and not p.name.endswith(".tmp"):
                files[f"{d}/{p.name}"] = p.read_bytes()
    files["environment.json"] = json.dumps({
        "killbench": __version__, "python": sys.version, "platform": platform.platform(),
        "manifest_digest": current_digest()}, indent=1, sort_keys=True).encode()
    files["SHA256SUMS"] = "".join(f"{_sha(v)}  {k}\n" for k, v in sorted(files.items())).encode()
    out = out or run_dir.with_suffix(".killbench.tar.gz")
    with tarfile.open(out, "w:gz") as tf:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"bundle/{name}")
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return out


def _unpack(archive: Path, dest: Path) -> Path:
    try:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        # tarfile's ReadError lists every compression it tried, one per line: the first
        # line, or what it means, is the one that helps
        why = "not a tar archive (gzip, bzip2, xz or plain)" if type(exc) is tarfile.ReadError \
            else (str(exc).splitlines() or [""])[0]
        raise UserError(f"{archive}: not a readable killbench bundle ({type(exc).__name__}: {why}); "
                        "give a file written by `killbench bundle`") from None
    root = dest / "bundle"
    if not (root / "config.json").exists():
        raise UserError(f"{archive}: no bundle/config.json inside; not a killbench bundle")
    return root


def check_files(root: Path) -> list[str]:
    """Differences between the unpacked files and their sums and names."""
    problems = []
    if not (root / "SHA256SUMS").exists():
        return ["SHA256SUMS is missing"]
    sums = {}
    for line in (root / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    for name in sorted(present - set(sums)):
        problems.append(f"{name}: in the bundle but not in SHA256SUMS")
    for name, digest in sorted(sums.items()):
        p = root / name
        if not p.exists():
            problems.append(f"{name}: listed in SHA256SUMS but missing")
        elif _sha(p.read_bytes()) != digest:
            problems.append(f"{name}: content does not match SHA256SUMS")
    for p in sorted((root / "candidates").glob("*.py")):
        text = p.read_bytes().decode("utf-8", "surrogatepass")
        if candidate_id(text) != p.stem:
            problems.append(f"candidates/{p.name}: the test was edited (its hash is {candidate_id(text)})")
    return problems


def flatten(obj, prefix: str = "") -> dict[str, object]:
    """Every leaf of a JSON document by its dotted path (lists by index)."""
    out: dict[str, object] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(obj, list) and obj and isinstance(obj[0], (dict, list)):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = tuple(obj) if isinstance(obj, list) else obj
    return out


IGNORED = {"killbench", "manifest_digest", "benchmark"}  # reported apart: they name this checkout


# fields a later killbench added to the score: a bundle scored before they existed lacks
# them (they carry no kill number: the split is read from the config, and negative controls
# from the evidence)
ADDED = ("split", "controls")


def _added(key: str) -> bool:
    parts = key.split(".")
    return parts[-1] in ADDED or (len(parts) >= 2 and parts[-2] == "controls")


def compare_numbers(claimed: dict, fresh: dict, what: str) -> list[str]:
    a, b = flatten(claimed), flatten(fresh)
    out = []
    for key in sorted(set(a) | set(b)):
        if key in IGNORED or key.startswith("predictions."):
            continue
        if key not in a and _added(key):
            continue
        va, vb = a.get(key, "(absent)"), b.get(key, "(absent)")
        if isinstance(va, float) and isinstance(vb, float) and abs(va - vb) < 1e-9:
            continue
        if va != vb:
            out.append(f"{key}: bundle says {va!r}, {what} {vb!r}")
    return out


def provenance(records, root: Path, claimed: dict) -> list[str]:
    """Differences between what the run was generated against and what it was scored and
    bundled against: the manifests named at the start, in each frozen population, in the
    score and in the bundle's environment, and the task split."""
    out = []
    config = records.config
    for name, tconf in config.targets.items():
        pop = records.population(name)
        if pop.source != tconf.population:
            out.append(f"{name}: tasks were generated against {tconf.population} but the bundle's "
                       f"population is {pop.source}")
        if pop.split != config.split:
            out.append(f"{name}: the run was given the {config.split} split, its population is "
                       f"the {pop.split} split")
        t = claimed.get("targets", {}).get(name, {})
        if t.get("population_source", pop.source) != pop.source:
            out.append(f"{name}: scored against {t.get('population_source')}, generated against "
                       f"{pop.source}")
    out += population_content(records)
    digests = {"run start": config.manifest_digest, "score": claimed.get("manifest_digest")}
    env = root / "environment.json"
    if env.exists():
        digests["bundle"] = json.loads(env.read_text()).get("manifest_digest")
    if len({d for d in digests.values()}) > 1:
        out.append("the manifests changed between generation and submission: "
                   + ", ".join(f"{k} {(v or '-')[:12]}" for k, v in digests.items()))
    return out


def population_content(records) -> list[str]:
    """A bundle's populations said to come from an installed manifest must be that
    manifest's, record by record (the mutant's span and replacement, its reach, its
    verdict, the sets and the controls): an edited row would otherwise be re-gated and
    re-scored as the bundle has it, and reproduce."""
    from .manifests import load_manifests, target_digest
    from .population import from_manifest, limited

    manifests = {target_digest(m): m for m in load_manifests().values()}
    out = []
    for name in records.config.targets:
        pop = records.population(name)
        # "manifest <digest>[ lite split][, first N tasks]"
        found = re.match(r"manifest ([0-9a-f]{64})\b", pop.source)
        m = manifests.get(found.group(1)) if found else None
        if m is None:
            continue  # another manifest or a project of the user's: not comparable here (stale)
        want = limited(from_manifest(m, pop.source, {}, pop.split), pop.limit)
        if pop.target != want.target and pop.target != name:
            out.append(f"{name}: the population names target {pop.target}")
        if [x.model_dump() for x in pop.mutants] != [x.model_dump() for x in want.mutants]:
            bad = next((a.id for a, b in zip(pop.mutants, want.mutants) if a != b), "?")
            out.append(f"{name}: the population's mutant records are not its manifest's (e.g. {bad})")
        for field in ("task_set", "held_out", "split", "controls", "held_out_minimum"):
            if getattr(pop, field) != getattr(want, field):
                out.append(f"{name}: the population's {field} is not its manifest's")
    return out


def _tokens_from_transcript(root: Path) -> dict[str, tuple[int, int]]:
    """Tokens in and out that the transcript's calls record, as the summaries must say them
    (key ``"*"``: the run's total).

    A resumed target starts again from its first call, and its budget is charged again by
    the replies its own transcript serves back (models/cache.py, TranscriptCache); so what a
    summary says is the sum over the calls of the target's last start (the journal's
    ``target-start`` lines, in time order: targets run one after another). A call of an
    earlier start that the last start did not ask again was paid for all the same and is
    counted too, so a resume can never hide tokens."""
    from collections import Counter
    from datetime import datetime

    from .models import Transcript

    path = root / "transcript.jsonl"
    if not path.exists():
        return {}
    starts: list[tuple[datetime, str, int]] = []
    journal = root / "journal.jsonl"
    if journal.exists():
        for line in journal.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line) if line.strip() else {}
            if entry.get("kind") == "target-start":
                starts.append((datetime.fromisoformat(entry["at"]), entry["target"], len(starts)))
    starts.sort()
    last = {target: index for _, target, index in starts}  # each target's last start
    segments: dict[int | None, list[dict]] = {}
    for line in Transcript.read(path):
        if line.get("kind") != "call" or not line.get("usage"):
            continue
        at = datetime.fromisoformat(line["timestamp"]) if line.get("timestamp") else None
        begun = [s for s in starts if at is not None and s[0] <= at]
        segments.setdefault(begun[-1][2] if begun else None, []).append(line)
    final = set(last.values())
    counted = [c for index, calls in segments.items() if index is None or index in final
               for c in calls]
    target_of = {index: target for _, target, index in starts}
    again = {t: Counter(c.get("request_hash") for c in segments.get(i, [])
                        if c.get("source") != "api") for t, i in last.items()}
    for index in sorted(i for i in segments if i is not None and i not in final):
        # an earlier start's model call: served again to its target's last start (from the
        # transcript), or counted here; its other lines cost nothing or were asked again
        served = again[target_of[index]]
        for c in segments[index]:
            if c.get("source") != "api":
                continue
            if served[c.get("request_hash")] > 0:
                served[c.get("request_hash")] -= 1
            else:
                counted.append(c)
    totals = [sum(c["usage"].get("input_tokens") or 0 for c in counted),
              sum(c["usage"].get("output_tokens") or 0 for c in counted)]
    return {"*": (totals[0], totals[1])}


def verify(archive: Path, jobs: int | None = None, sample: int | None = None, seed: int = 0,
           progress=None, findings: list[str] | None = None) -> tuple[list[str], object]:
    """Differences between a bundle's claims and what its evidence and a re-execution say;
    and the score recomputed from the re-executed evidence (or the bundle's, with `sample`).
    What the re-execution found that is no difference from the bundle's claims (a kept test
    that depends on the hash seed) is appended to `findings`."""
    jobs = jobs or default_jobs()
    with tempfile.TemporaryDirectory(prefix="verify-", dir=_tmp_root()) as tmp, ExitStack() as held:
        root = _unpack(archive, Path(tmp))
        problems = check_files(root)
        if problems:
            return problems, None
        try:
            records = RunRecords(root)
            matrices = {n: load(root / "evidence" / "kills" / f"{n}.json", KillMatrix)
                        for n in records.config.targets}
            claimed = json.loads((root / "score.json").read_text())
        except (KillbenchError, ValidationError, json.JSONDecodeError) as exc:
            return [f"the bundle's records are not valid: {exc}"], None
        if not records.state["complete"]:
            problems.append("the run is incomplete: " + "; ".join(records.incomplete()))
        # 2. the score follows from the bundle's own evidence, under the manifests it was
        # generated against
        problems += provenance(records, root, claimed)
        own = compute(records, matrices, *_resampling(claimed))
        problems += compare_numbers(claimed, own.dump(), "its own evidence gives")
        tokens = _tokens_from_transcript(root).get("*")
        if tokens is not None:
            claimed_in = sum(s.tokens_in for s in records.summaries.values())
            claimed_out = sum(s.tokens_out for s in records.summaries.values())
            if (claimed_in, claimed_out) != tokens:
                problems.append(f"tokens: the summaries say {claimed_in} in / {claimed_out} out, the "
                                f"transcript's calls {tokens[0]} in / {tokens[1]} out")
        # 3. populations are this checkout's; 4. evidence re-executed
        fresh_matrices = {}
        for name, tconf in records.config.targets.items():
            spec = resolve(tconf.ref)
            target = prepare(spec)
            workdir = workdir_for(target)
            held.enter_context(exclusive(workdir, spec.name))
            pop = records.population(name)
            here = freeze(target, jobs, pop.split)
            if (here.source, here.task_set, here.held_out) != (pop.source, pop.task_set, pop.held_out):
                problems.append(f"{name}: the bundle's population ({pop.source}, {len(pop.task_set)} "
                                f"tasks) is not this checkout's ({here.source}, {len(here.task_set)} "
                                "tasks)")
                continue
            # from here on the checkout's population, never the bundle's rows
            task = set(here.task_set)
            killers = {r.candidate for r in matrices[name].runs
                       if r.mutant in task and "failed" in r.cells.values()}
            problems += _regate(records, name, target, workdir, here, jobs, sample, seed, progress,
                                killers, findings)
            problems += _recheck_controls(records, name, target, workdir, here)
            fresh = _rescore(records, name, target, workdir, here, matrices[name], jobs, sample, seed,
                             _sealed_ids(name))
            problems += _compare_matrices(name, matrices[name], fresh)
            fresh_matrices[name] = fresh
        if sample is not None:
            return problems, own
        # 5. the numbers from the re-executed evidence
        if len(fresh_matrices) == len(records.config.targets):
            again = compute(records, fresh_matrices, *_resampling(claimed))
            problems += compare_numbers(claimed, again.dump(), "re-executed")
            return problems, again
        return problems, own


def _tmp_root() -> Path:
    from .locations import cache_subdir

    return cache_subdir("tmp")


def _resampling(claimed: dict) -> tuple[int, int]:
    p = claimed.get("pooled_kills") or {}
    return p.get("resamples", 10_000), p.get("seed", 0)


def _pick(items: list, sample: int | None, seed: int, salt: str) -> list:
    if sample is None or sample >= len(items):
        return list(items)
    return random.Random(f"{seed}:{salt}").sample(list(items), sample)


def _regate(records, name, target, workdir, pop, jobs, sample, seed, progress,
            killers: set[str] = frozenset(), findings: list[str] | None = None) -> list[str]:
    baseline = load_or_run_baseline(target, workdir)
    rows = pop.by_id()
    mutants = {i: mutant(rows[i]) for i in pop.task_set}
    sandboxes = [Sandbox(target, workdir / "sandboxes" / f"verify{i}", trusted=False,
                         isolation=records.config.isolation) for i in range(jobs)]
    gate = Gate(sandboxes, baseline, timeout=records.config.gate_timeout_s)
    entries = {(e.candidate, e.task): e for e in records.entries if e.target == name}
    todo = sorted(entries)
    # every kept entry of a file whose tests claim a task kill, and a seeded sample of the rest
    must = [k for k in todo if k[0] in killers and entries[k].kept]
    picked = must + [k for k in _pick([k for k in todo if k not in set(must)], sample, seed,
                                      f"gate:{name}")]
    problems = []
    from concurrent.futures import ThreadPoolExecutor

    def one(key):
        cid, task = key
        found: list[str] = []
        fresh = regate_entry(gate, entries[key], records.candidate(cid),
                             mutants.get(task) if task else None, seed, found)
        return key, (fresh, found)

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for i, (key, (fresh, found)) in enumerate(ex.map(one, picked), 1):
            if findings is not None:
                findings += found
            if progress:
                progress(f"{name} gate", i, len(picked))
            old = entries[key]
            label = f"{name} gate {key[0]}" + (f" (task {key[1]})" if key[1] else "")
            if old.file_reason != fresh.file_reason:
                problems.append(f"{label}: bundle says file {old.file_reason or 'judged test by test'}"
                                f", re-gated {fresh.file_reason or 'judged test by test'}")
                continue
            a = _verdicts(old)
            b = _verdicts(fresh)
            for nodeid in _differing(old, fresh):
                problems.append(f"{label} {nodeid.split('::', 1)[-1]}: bundle says "
                                f"{_verdict(a.get(nodeid))}, re-gated {_verdict(b.get(nodeid))}")
    return problems


def regate_entry(gate: Gate, old, source: str, task_mutant, seed: int,
                 findings: list[str] | None = None):
    """The gate's entry for a bundle's candidate, re-executed here: its verdicts are the ones
    verify settles on.

    Every draw is fresh first, as in the run. The two kinds of draw guard against different
    things, so they are replayed differently:

    - The hash seed catches accidental order dependence; it is no defence against a forger (a
      test can read its own seed: PYTHONHASHSEED, hash("a")). A kept test that the fresh
      check rejects at the hash-seed phase and at no other (its fresh disguises, order and
      mutant runs all count) is settled by the run's recorded hash seed alone, and the
      dependence is appended to `findings`, not reported as a difference.
    - A disguise guards against a test that notices the mutant's text, and a chosen disguise
      could spare one: recorded disguises are replayed only to confirm tests the bundle says
      were rejected, a claim that can only lose the submitter kept tests.

    Draws a bundle did not record (one from before they were) are tried as a fixed series of
    seeded draws."""
    fresh = gate.check(source, task_mutant, target=old.target)
    differing = _differing(old, fresh)
    if not differing:
        return fresh
    said = {t.nodeid: t for t in old.tests}
    lost = [n for n in differing if n in said and said[n].kept]
    noted: list[str] = []
    if lost:
        settled = _settle_by_hashseed(gate, old, fresh, lost, source, task_mutant, seed)
        if settled is None:
            return fresh
        fresh, noted = settled
        differing = _differing(old, fresh)
    if differing:
        if not _rejections_only(old, differing):
            return fresh
        for hashseeds, disguise_seeds in _replays(old, seed):
            again = gate.check(source, task_mutant, target=old.target, hashseeds=hashseeds,
                               disguise_seeds=disguise_seeds)
            if not lost and not _differing(old, again):
                break
            now = {t.nodeid: t for t in again.tests}
            if all(n in now and _verdict_of(now[n]) == _verdict_of(said[n]) for n in differing):
                again = _with_verdicts(fresh, {n: now[n] for n in differing})
                break
        else:
            return fresh
        fresh = again
    if findings is not None:
        findings += noted
    return fresh


def _verdict_of(t) -> tuple[bool, str | None, str]:
    return t.kept, t.reason, t.stage


def _with_verdicts(entry, verdicts: dict):
    return entry.model_copy(update={"tests": [verdicts.get(t.nodeid, t) for t in entry.tests]})


def _settle_by_hashseed(gate: Gate, old, fresh, lost: list[str], source: str, task_mutant,
                        seed: int):
    """(`fresh` with the `lost` tests' verdicts settled, the findings) where the hash seed is
    the only thing that rejected them and the run's seed passes them; else None."""
    said = {t.nodeid: t for t in old.tests}
    now = {t.nodeid: t for t in fresh.tests}
    if not all(n in now and not now[n].kept and now[n].stage == HASHSEED for n in lost):
        return None  # a kept test rejected by anything else: the difference stands
    phases = {p.phase: p for p in fresh.phases}
    # every other phase of the fresh check must keep them: its disguises, order and mutant runs
    without = {v.nodeid: v for v in decide(lost, {k: p for k, p in phases.items() if k != HASHSEED},
                                           task_mutant is not None)}
    if any(_verdict_of(without[n]) != _verdict_of(said[n]) for n in lost):
        return None
    recorded = next((p.hashseed for p in old.phases if p.phase == HASHSEED), None)
    if recorded and not _valid_draw(HASHSEED, recorded):
        return None
    tries = [recorded] if recorded else [_series_hashseed(seed, old.candidate, k)
                                         for k in range(LEGACY_DRAW_TRIES)]
    for hashseed in tries:
        again = gate.check(source, task_mutant, target=old.target, hashseeds={HASHSEED: hashseed})
        ran = {p.phase: p for p in again.phases}
        if HASHSEED not in ran:
            continue
        # only the clean runs of this check count: its disguises are fresh ones, and the fresh
        # check's were already required above
        clean = decide(lost, {CLEAN: ran[CLEAN], HASHSEED: ran[HASHSEED]}, False)
        if all(v.kept for v in clean):
            label = f"{old.target} gate {old.candidate}" + (f" (task {old.task})" if old.task else "")
            run_seed = (f"the run's hash seed {hashseed}" if recorded else
                        f"hash seed {hashseed} (a seeded draw: the bundle records none)")
            noted = [f"{label} {n.split('::', 1)[-1]}: kept under {run_seed}, {now[n].reason} under "
                     f"hash seed {phases[HASHSEED].hashseed} (seed-dependent; the run's one random "
                     "seed let it through)" for n in lost]
            return _with_verdicts(fresh, {n: without[n] for n in lost}), noted
    return None


def _series_hashseed(seed: int, candidate: str, k: int) -> str:
    return str(random.Random(f"{seed}:hashseed:{candidate}:{k}").randint(1, 2**32 - 1))


# how many seeded draws verify tries for a bundle that did not record its own
LEGACY_DRAW_TRIES = 16


def _replays(old, seed: int):
    """The run's recorded draws; a series of LEGACY_DRAW_TRIES where one is missing."""
    ran = {p.phase: p for p in old.phases}

    def recorded(phase: str) -> str | None:
        p = ran.get(phase)
        return p and (p.hashseed if phase == HASHSEED else p.disguise_seed)

    def draw(phase: str, k: int) -> str:
        if recorded(phase):
            return recorded(phase)
        if phase == HASHSEED:
            return _series_hashseed(seed, old.candidate, k)
        return str(random.Random(f"{seed}:{phase}:{old.candidate}:{k}").getrandbits(64))

    if any(phase in ran and recorded(phase) and not _valid_draw(phase, recorded(phase))
           for phase in DRAWN_PHASES):
        return  # a draw no run could have made confirms nothing: the difference stands
    missing = any(phase in ran and not recorded(phase) for phase in DRAWN_PHASES)
    for k in range(LEGACY_DRAW_TRIES if missing else 1):
        yield ({HASHSEED: draw(HASHSEED, k)},
               {phase: draw(phase, k) for phase in DRAWN_PHASES if phase != HASHSEED})


# the phases whose conditions are drawn at random in each check
DRAWN_PHASES = (HASHSEED, NEUTRAL, MUTANT_DISGUISED)


def _valid_draw(phase: str, value: str) -> bool:
    """A value the gate draws for this phase: a hash seed in 1..2**32-1, a disguise seed of
    64 bits. Anything else (PYTHONHASHSEED=abc stops Python before any test runs, which
    would "confirm" any rejection) is refused."""
    if not value.isascii() or not value.isdecimal() or len(value) > 20:
        return False
    low, top = (1, 2**32 - 1) if phase == HASHSEED else (0, 2**64 - 1)
    return low <= int(value) <= top


def _verdicts(entry) -> dict[str, tuple[bool, str | None, str]]:
    # the stage too: the test funnel places a rejection by it
    return {t.nodeid: (t.kept, t.reason, t.stage) for t in entry.tests}


def _differing(old, fresh) -> list[str]:
    """The node ids whose verdict differs (every one, when the file's own verdict does)."""
    if old.file_reason != fresh.file_reason:
        return sorted({t.nodeid for t in old.tests} | {t.nodeid for t in fresh.tests}) or [""]
    a, b = _verdicts(old), _verdicts(fresh)
    return [n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]


def _rejections_only(old, differing: list[str]) -> bool:
    """Every difference is a test the bundle says the gate rejected."""
    said = {t.nodeid: t for t in old.tests}
    return bool(differing) and all(n in said and not said[n].kept for n in differing)


def _sealed_ids(name: str, active: bool = False) -> set[str]:
    """The target's sealed negative controls (all of them: every kill run on one is
    re-executed), or with `active` those a kept test on which fails the controls."""
    from .controls import load_sealed
    from .manifests import current_benchmark, load_manifests

    sealed = load_sealed(current_benchmark(), load_manifests())
    if sealed is None:
        return set()
    return sealed.active(name) if active else sealed.ids(name)


def _recheck_controls(records, name, target, workdir, pop: Population) -> list[str]:
    """Every positive control re-gated here (it must be kept, as at the run's start), and no
    kept test of the bundle on a negative control (where the sealed list is available)."""
    problems = []
    positive = pop.controls.get("positive", [])
    if positive:
        baseline = load_or_run_baseline(target, workdir)
        sb = Sandbox(target, workdir / "sandboxes" / "verify-controls", trusted=False,
                     isolation=records.config.isolation)
        gate = Gate([sb], baseline, timeout=records.config.gate_timeout_s)
        rows = pop.by_id()
        for pc in positive:
            e = gate.check(pc["test"], mutant(rows[pc["id"]]), target=name)
            if e.file_reason or not e.tests or not all(t.kept for t in e.tests):
                problems.append(f"{name}: positive control {pc['id']} ({pc['file']}) is not kept by "
                                f"the gate here ({e.reason}): an instrument fault on this machine")
        recorded = {e.task for e in records.control_entries if e.target == name}
        missing = sorted({pc["id"] for pc in positive} - recorded)
        if missing:
            problems.append(f"{name}: the run has no record of positive controls {missing} "
                            "(they are gated at the start of every run)")
    ids = _sealed_ids(name, active=True)
    for e in records.entries:
        if e.target == name and e.task in ids and e.kept:
            problems.append(f"{name}: {e.candidate} was kept for a negative control ({e.task}): "
                            "controls failed")
    return problems


def _verdict(v) -> str:
    if v is None:
        return "(absent)"
    return ("kept" if v[0] else v[1]) + f" at {v[2]}"


def _rescore(records, name, target, workdir, pop: Population, claimed: KillMatrix, jobs, sample,
             seed, negative: set[str] = frozenset()) -> KillMatrix:
    files = records.kept_files(name)
    if sample is None:
        return kill_matrix(target, pop, files, jobs=jobs, workdir=workdir,
                           isolation=records.config.isolation)
    # a sample: the clean runs of every file, EVERY run that claims a kill of a task (what the
    # score counts: a forged kill cannot hide in a sample whose seed the submitter can
    # predict), and a seeded sample of the others
    task = set(pop.task_set)
    claims = [r for r in claimed.runs if r.mutant in task and "failed" in r.cells.values()]
    rest = [r for r in claimed.runs if not (r.mutant in task and "failed" in r.cells.values())]
    keep = {(r.candidate, r.mutant) for r in claims + _pick(rest, sample, seed, f"runs:{name}")}
    keep |= {(r.candidate, r.mutant) for r in claimed.runs if r.mutant in negative}  # every control
    fresh = kill_matrix(target, pop, files, jobs=jobs, workdir=workdir,
                        isolation=records.config.isolation, only=keep)
    return fresh


def _compare_matrices(name: str, claimed: KillMatrix, fresh: KillMatrix) -> list[str]:
    out = []
    a = {r.key: (r.clean, tuple(r.reached)) for r in claimed.rows}
    b = {r.key: (r.clean, tuple(r.reached)) for r in fresh.rows}
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            what = "absent" if key not in b or key not in a else (
                f"clean {a[key][0]} / {len(a[key][1])} reached vs clean {b[key][0]} / "
                f"{len(b[key][1])} reached")
            out.append(f"{name} kill matrix row {key.split('::', 1)[-1]}: differs ({what})")
    runs_b = {(r.candidate, r.mutant): r for r in fresh.runs}
    for run in claimed.runs:
        other = runs_b.get((run.candidate, run.mutant))
        if other is None:
            continue  # not in the sample
        for key in sorted(set(run.cells) | set(other.cells)):
            if run.cells.get(key) != other.cells.get(key):
                out.append(f"{name} kill matrix {key.split('::', 1)[-1]} x mutant {run.mutant}: "
                           f"bundle says {run.cells.get(key)}, re-executed {other.cells.get(key)}")
    if set(fresh.excluded) != set(claimed.excluded):
        out.append(f"{name}: excluded kept tests differ: bundle {sorted(claimed.excluded)}, "
                   f"re-executed {sorted(fresh.excluded)}")
    return out


__all__ = ["bundle", "check_files", "compare_numbers", "flatten", "verify"]
