"""Speed and memory of the local models, on this machine, as killbench serves them.

    nice -n 10 .venv/bin/python bench/local_models.py [--models NAME ...] [--reps 3]
        [--configs 1:PASSIVE 2:PASSIVE 2:ACTIVE] [--prompt-tokens 1200] [--gen-tokens 64]
        [--load 0]

For each installed catalogue model, --reps times, and each time for each
threads:OMP_WAIT_POLICY setting in turn (DEFAULT: the variable unset), starts killbench's
own server (killbench.models.local.LocalServer: the same child process, flags and
environment as a run, but that setting), sends one request of a prompt of about
--prompt-tokens tokens (a targeted-gated-like request: the instructions and the source
of Python's fractions.py) that must generate exactly --gen-tokens tokens (ignore_eos),
watches the idle server's CPU for --idle-s seconds, and stops it. Settings are
interleaved so that a change in the shared machine's load falls on all of them alike.
--load N runs N busy-looping processes (at the bench's own priority) beside the server
for the whole measurement: a machine loaded by a gate run or by another user, on purpose.

Per request it records the server's own timings (prompt tokens/s, generated tokens/s,
from the response's `timings`), the server process's CPU seconds over the request
(/proc/PID/stat) divided by its wall time (cores kept busy: busy-waiting shows here),
the same for the idle server after the request, the load average, the start-up time,
and the peak resident set of the server process (VmHWM in /proc/PID/status: the mapped
model file counts, as far as it is resident) and its anonymous part (RssAnon). It prints one JSON
line per request and per server, then a JSON summary: medians per model and setting,
and the estimated model time of one targeted-gated attempt (1,200 prompt tokens and
250 generated, by default) from the median speeds.

Exit status: 0 when every request generated exactly --gen-tokens tokens and reported
its timings, 1 otherwise. Models whose extra is not installed are skipped (listed).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from killbench.models import local  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, all threads


def memory_mib(pid: int) -> dict:
    """VmHWM (peak resident set), and the resident set now split into anonymous memory
    (the KV cache, buffers, weights repacked for the CPU) and mapped file pages (the
    model file, which the kernel can drop and read again)."""
    keys = {"VmHWM:": "peak_rss_mib", "RssAnon:": "rss_anon_mib", "RssFile:": "rss_file_mib"}
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.split()[0] in keys:
                out[keys[line.split()[0]]] = round(int(line.split()[1]) / 1024)
    return out


def post(url: str, body: dict, timeout: float = 1800) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def build_prompt(root: str, tokens: int) -> str:
    """The instructions and as many lines of fractions.py as fit in `tokens` tokens."""
    head = ("A mutation-testing tool changed a function in module `fractions`. Write one "
            "pytest test that passes on the original code and fails on the changed code.\n\n"
            "```python\n")
    lines = inspect.getsource(inspect.getmodule(Fraction)).splitlines(keepends=True)

    def count(text: str) -> int:
        return len(post(f"{root}/tokenize", {"content": text})["tokens"])

    lo, hi = 0, len(lines)
    while lo < hi:  # the most lines whose prompt stays within the token count
        mid = (lo + hi + 1) // 2
        if count(head + "".join(lines[:mid]) + "```\n") <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return head + "".join(lines[:lo]) + "```\n"


def one_request(model: local.LocalModel, threads: int, policy: str, rep: int, args) -> dict:
    """A fresh server with this setting, one request, its figures; the server stopped."""
    srv = local.LocalServer(model, local.model_file(model))
    srv.threads = threads
    env = srv.environment()
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "DEFAULT":  # DEFAULT: the variable unset (OpenMP's own default)
        env["OMP_WAIT_POLICY"] = policy
    srv.environment = lambda: env
    srv.start()
    try:
        root = f"http://127.0.0.1:{srv.port}"
        content = build_prompt(root, args.prompt_tokens - (20 if model.mode == "chat" else 0))
        body = {"model": model.name, "max_tokens": args.gen_tokens, "temperature": 0,
                "cache_prompt": False, "ignore_eos": True}
        if model.mode == "chat":
            url = f"{root}/v1/chat/completions"
            body["messages"] = [{"role": "system", "content": "You write pytest tests."},
                                {"role": "user", "content": content}]
        else:
            url = f"{root}/v1/completions"
            body["prompt"] = content
        load0 = os.getloadavg()[0]
        cpu0, wall0 = cpu_seconds(srv.proc.pid), time.monotonic()
        resp = post(url, body)
        cpu, wall = cpu_seconds(srv.proc.pid) - cpu0, time.monotonic() - wall0
        idle0 = cpu_seconds(srv.proc.pid)
        time.sleep(args.idle_s)  # what the idle server burns (a spinning OpenMP thread)
        idle = (cpu_seconds(srv.proc.pid) - idle0) / args.idle_s
        t, usage = resp.get("timings") or {}, resp.get("usage") or {}
        row = {"model": model.name, "threads": threads, "omp_wait_policy": policy,
               "rep": rep, "prompt_tokens": usage.get("prompt_tokens"),
               "generated_tokens": usage.get("completion_tokens"),
               "prompt_tok_s": t.get("prompt_per_second"),
               "gen_tok_s": t.get("predicted_per_second"),
               "wall_s": round(wall, 2), "server_cpu_s": round(cpu, 2),
               "cpu_per_wall": round(cpu / wall, 2), "idle_cpu_per_wall": round(idle, 2),
               "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
               "startup_s": round(srv.startup_s, 2), **memory_mib(srv.proc.pid),
               "model_file_mib": round(srv.gguf.stat().st_size / 2**20)}
        row["ok"] = (row["generated_tokens"] == args.gen_tokens
                     and row["prompt_tok_s"] is not None and row["gen_tok_s"] is not None)
        print(json.dumps(row), flush=True)
        return row
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=list(local.CATALOGUE))
    ap.add_argument("--configs", nargs="*", default=["1:PASSIVE", "2:PASSIVE", "2:ACTIVE"],
                    help="threads:OMP_WAIT_POLICY")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=1200)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the server")
    ap.add_argument("--idle-s", type=float, default=3.0,
                    help="seconds to watch the idle server's CPU after each request")
    ap.add_argument("--attempt", default="1200:250",
                    help="prompt:generated tokens of one attempt, for the estimate")
    args = ap.parse_args()
    a_in, a_out = map(int, args.attempt.split(":"))

    summary, ok, skipped = [], True, {}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.load)]
    try:
        ok, skipped = measure(args, a_in, a_out, summary)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(json.dumps({"summary": summary, "skipped": skipped, "cpus": os.cpu_count(),
                      "load_processes": args.load,
                      "runtime": f"{local.RUNTIME} {local._version(local.RUNTIME)}",
                      "ok": ok}, indent=1))
    return 0 if ok else 1


def measure(args, a_in: int, a_out: int, summary: list) -> tuple[bool, dict]:
    """Every setting once per repetition, in turn (so a change in the machine's load
    falls on all settings alike), then the medians per model and setting."""
    skipped = {}
    models = []
    for name in args.models:
        model = local.CATALOGUE[name]
        lacking = local.missing(model)
        if lacking:
            skipped[name] = f"{local.install_hint(model.extra)} (missing: {', '.join(lacking)})"
        else:
            models.append(model)
    configs = [(int(c.split(":")[0]), c.split(":")[1]) for c in args.configs]
    rows = [one_request(model, threads, policy, rep, args)
            for model in models for rep in range(1, args.reps + 1)
            for threads, policy in configs]
    for model in models:
        for threads, policy in configs:
            mine = [r for r in rows if (r["model"], r["threads"], r["omp_wait_policy"])
                    == (model.name, threads, policy)]

            def med(key, nd=2):
                return round(statistics.median(r[key] for r in mine), nd)

            def rng(key, nd=2):
                return [round(min(r[key] for r in mine), nd), round(max(r[key] for r in mine), nd)]

            pp, tg = med("prompt_tok_s", 1), med("gen_tok_s")
            summary.append({
                "model": model.name, "threads": threads, "omp_wait_policy": policy,
                "reps": len(mine), "prompt_tokens": med("prompt_tokens", 0),
                "median_prompt_tok_s": pp, "range_prompt_tok_s": rng("prompt_tok_s", 1),
                "median_gen_tok_s": tg, "range_gen_tok_s": rng("gen_tok_s"),
                "median_cpu_per_wall": med("cpu_per_wall"),
                "median_idle_cpu_per_wall": med("idle_cpu_per_wall"),
                "median_startup_s": med("startup_s"), "max_peak_rss_mib": max(
                    r["peak_rss_mib"] for r in mine), "rss_anon_mib": med("rss_anon_mib", 0),
                "model_file_mib": mine[0]["model_file_mib"],
                "load_range": [min(r["load_before"] for r in mine),
                               max(r["load_after"] for r in mine)],
                "load_processes": args.load,
                f"attempt_{a_in}_{a_out}_model_s": round(a_in / pp + a_out / tg, 1)})
    return all(r["ok"] for r in rows), skipped


if __name__ == "__main__":
    raise SystemExit(main())
