"""Issue 21: the statistical mutants that once survived the whole suite, applied by hand one at a time;
each must fail the stats tests (prints KILLED or SURVIVED per mutant). Run from the repository root:
`python bench/stats_hand_mutants.py`."""
import subprocess, sys
from pathlib import Path
M = [
 ("killbench/stats.py", "p <= alpha / (m - i)", "p <= alpha / (m + i)", 1),
 ("killbench/stats.py", "p <= alpha / (m - i)", "p < alpha / (m - i)", 1),
 ("killbench/stats.py", "                rejected.add(name)\n            else:\n                break", "                rejected.add(name)\n            else:\n                continue", 1),
 ("killbench/stats.py", "sums[:, 0] / sums[:, 1], confidence", "sums[:, 0] * sums[:, 1], confidence", 1),
 ("killbench/stats.py", "rest = max(0.0, 1.0 - (a_only + b_only) / n)", "rest = max(0.0, 1.0 - (a_only - b_only) / n)", 1),
 ("killbench/stats.py", '    _check_resamples(resamples)\n    _check_confidence(confidence)\n    va', '    _check_confidence(confidence)\n    va', 1),
 ("killbench/stats.py", '    _check_resamples(resamples)\n    _check_confidence(confidence)\n    va', '    _check_resamples(resamples)\n    va', 1),
 ("killbench/stats.py", "if floor and (below or above):", "if floor and (below and above):", 1),
 ("killbench/stats.py", '        _check_count(f"n of cluster {i}", n)\n', '', 1),
 ("killbench/stats.py", '        _check_count(f"k of cluster {i}", k)\n', '', 1),
 ("killbench/stats.py", '    _check_count("b", b)\n', '', 1),
 ("killbench/stats.py", '    _check_count("c", c)\n', '', 1),
 ("killbench/compare.py", "len(set(clusters)) > 1", "len(set(clusters)) >= 1", 1),
]
for path, old, new, _ in M:
    p = Path(path); orig = p.read_text()
    assert orig.count(old) >= 1, old
    p.write_text(orig.replace(old, new, 1))
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                            "tests/test_stats_decisions.py", "tests/test_stats.py", "tests/test_compare_prereg.py"],
                           capture_output=True, text=True)
        print("KILLED " if r.returncode == 1 else f"SURVIVED(rc={r.returncode})", repr(new[:60]))
    finally:
        p.write_text(orig)
