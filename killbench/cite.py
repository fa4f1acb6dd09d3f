"""Citing a result: the record a full verify leaves beside a bundle, and the citation block
(plain text and BibTeX) printed for a verified bundle.

A number from killbench is cited with four things that pin it down: the benchmark version
(not the package's), the digest of the manifests it was scored on, the split, and the sha256
of the bundle whose evidence gives it. Anyone can re-run ``killbench verify`` on the same
bytes; the record only says that someone did, when, and with which versions.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from . import __version__
from .errors import UserError
from .targets import sha256_file

VERIFIED_SUFFIX = ".verified.json"


def record_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + VERIFIED_SUFFIX)


def write_record(bundle: Path, problems: list[str], score, findings: list[str] = ()) -> Path:
    """After a full verify: bundle sha256, versions, date, outcome (and the differences, and
    the findings that are none: kept tests that depend on the hash seed)."""
    from .manifests import current_benchmark, current_digest

    data = {"bundle": bundle.name, "bundle_sha256": sha256_file(bundle), "killbench": __version__,
            "benchmark": current_benchmark(), "manifest_digest": current_digest(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "outcome": "failed" if problems else "passed", "differences": problems[:50],
            "findings": list(findings)[:200], "findings_count": len(findings)}
    if score is not None and not problems:
        s = score.dump() if hasattr(score, "dump") else score
        p = s.get("pooled_kills") or {}
        data["result"] = {"split": s.get("split", "full"), "k": p.get("k"), "n": p.get("n"),
                          "low": p.get("low"), "high": p.get("high"),
                          "generator": s["run"]["generator"], "model": s["run"].get("model")}
    out = record_path(bundle)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    return out


def load_record(bundle: Path) -> dict | None:
    """The passed verify record of exactly these bytes, or None."""
    path = record_path(bundle)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if data.get("bundle_sha256") != sha256_file(bundle) or data.get("outcome") != "passed":
        return None
    return data


def citation(bundle: Path) -> tuple[str, str]:
    """(plain text, BibTeX) for a verified bundle; a clear error for any other."""
    if not bundle.is_file():
        raise UserError(f"{bundle}: no such bundle")
    rec = load_record(bundle)
    if rec is None:
        why = ("its verify record names other bytes or did not pass"
               if record_path(bundle).exists() else "it has no verify record beside it")
        raise UserError(f"{bundle} is not verified ({why}): run `killbench verify {bundle}` "
                        "(the full verify, without --sample) and cite it when that passes")
    from .manifests import current_benchmark, current_digest
    from .report import check_bundle

    if (rec.get("benchmark"), rec.get("manifest_digest")) != (current_benchmark(), current_digest()):
        raise UserError(f"{bundle} was verified on benchmark {rec.get('benchmark')} (manifests "
                        f"{str(rec.get('manifest_digest'))[:12]}), not on this one: verify it again here")
    # the numbers cited come from the bundle's own evidence, recomputed now; the record only
    # says that a full re-execution of these bytes passed
    entry = check_bundle(bundle)
    if entry.score is None:
        raise UserError(f"{bundle} cannot be cited: {entry.refused or entry.earlier}")
    s = entry.score
    p = s.get("pooled_kills") or {}
    r = {"split": (entry.config or {}).get("split", "full"), "k": p.get("k"), "n": p.get("n"),
         "low": p.get("low"), "high": p.get("high"), "generator": s["run"]["generator"],
         "model": s["run"].get("model")}
    gen = r.get("generator") or {}
    label = f"{gen.get('name', '?')} {gen.get('version', '')}".strip()
    model = r.get("model") or "model-free"
    k, n = r.get("k"), r.get("n")
    rate = (f"{k} / {n} task-set mutants killed ({100 * k / n:.1f}%, 95% CI "
            f"{100 * r['low']:.1f}-{100 * r['high']:.1f}%)") if n else "no task-set mutants"
    plain = "\n".join([
        f"killbench benchmark {rec['benchmark']}, {r.get('split', 'full')} split",
        f"manifest digest {rec['manifest_digest']}",
        f"entry: {label} ({model}): {rate}",
        f"bundle {rec['bundle']} sha256 {rec['bundle_sha256']}",
        f"verified {rec['date']} with killbench {rec['killbench']}",
    ])
    key = "killbench-" + "".join(c if c.isalnum() else "-" for c in label.lower()) + "-" + rec["bundle_sha256"][:8]
    bib = "\n".join([
        f"@misc{{{key},",
        f"  title = {{killbench {rec['benchmark']} ({r.get('split', 'full')} split): {label}, {model}}},",
        f"  note = {{{rate}. Manifest digest {rec['manifest_digest']}; bundle sha256 "
        f"{rec['bundle_sha256']}; verified {rec['date'][:10]} with killbench {rec['killbench']}}},",
        f"  year = {{{rec['date'][:4]}}},",
        "}",
    ])
    return plain, bib
