"""A generator that yields the test files of an existing bundle again, in their order.

For re-scoring a submission made by an earlier killbench with this one: every file goes
through today's gate and scoring exactly as a generator's would, so the difference between
the bundle's numbers and the new ones is the instrument's, not the generator's.

    killbench run -g bench.replay_bundle:ReplayBundle -o bundle=submissions/X.killbench.tar.gz \
        -t cachetools,toolz,... --out runs/replayed

(run from the checkout, so that `bench` is importable; reads bundles of format 1 and 2).
"""

from __future__ import annotations

import json
import tarfile

from killbench.generation import CandidateTest


class ReplayBundle:
    name = "replay-bundle"
    version = "1"
    needs_model = False

    def __init__(self, bundle: str):
        self.bundle = bundle
        with tarfile.open(bundle) as tf:
            names = set(tf.getnames())
            read = lambda n: tf.extractfile(n).read()  # noqa: E731
            if "bundle/candidates.jsonl" in names:  # format 2: the submissions
                rows = [json.loads(x) for x in read("bundle/candidates.jsonl").splitlines() if x.strip()]
            else:  # format 1: gate.jsonl held one line per yielded file
                rows = [json.loads(x) for x in read("bundle/gate.jsonl").splitlines() if x.strip()]
            self.rows = [{**r, "source": read(f"bundle/candidates/{r['candidate']}.py")
                          .decode("utf-8", "surrogatepass")} for r in rows]

    def generate(self, ctx):
        tasks = {t.id for t in ctx.tasks}
        for r in self.rows:
            if r["target"] != ctx.target:
                continue
            task = r.get("task")
            if task is not None and task not in tasks:
                ctx.log(f"task {task} of the bundle is not a task here: skipped")
                continue
            yield CandidateTest(r["source"], task=task, attempt=r.get("attempt", 1),
                                meta={"replayed_from": self.bundle})
