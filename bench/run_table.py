"""One line per scored run or bundle: kills with their interval, the funnel summed over
targets (files, tests, kept, each rejection reason), tokens and generation time. Reads
only score.json, so every figure is the score's own. Usage:

    python bench/run_table.py RUN_DIR_OR_BUNDLE [...]
"""

from __future__ import annotations

import json
import sys
import tarfile
from collections import Counter
from pathlib import Path


def load_score(path: Path) -> dict:
    if path.is_dir():
        return json.loads((path / "score.json").read_text())
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/score.json")
                      or m.name == "score.json")
        return json.load(tar.extractfile(member))


def row(path: Path) -> dict:
    s = load_score(path)
    run = s["run"]
    pooled = s["pooled_kills"]
    rejections: Counter = Counter()
    files = tests = kept = tin = tout = 0
    wall = 0.0
    for t in s["targets"].values():
        rejections.update(t["rejections"])
        files += t["file_funnel"].get("files", 0)
        tests += t["test_funnel"].get("tests", 0)
        kept += t["test_funnel"].get("kept", 0)
        tin += t["cost"]["tokens_in"]
        tout += t["cost"]["tokens_out"]
        wall += t["cost"]["wall_s"]
    return {
        "run": path.name,
        "generator": f"{run['generator']['name']} {run['generator']['version']}",
        "model": run.get("model") or "-",
        "split": s.get("split"),
        "kills": f"{pooled['k']} / {pooled['n']} [{100 * pooled['low']:.1f}-{100 * pooled['high']:.1f}%]",
        "files": files, "tests": tests, "kept tests": kept,
        "rejected": ", ".join(f"{k} {v}" for k, v in sorted(rejections.items())),
        "tokens in/out": f"{tin:,} / {tout:,}",
        "tokens per kill": s.get("tokens_per_kill"),
        "generation s": round(wall),
    }


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for a in argv:
        print(json.dumps(row(Path(a))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
