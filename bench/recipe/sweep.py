"""Run stress_proxy.py over a list of settings in parallel, one process (one thread) each,
and merge the curves into one JSON file plus a table on stdout.

    python bench/recipe/sweep.py --gold G --init V0 --configs bench/recipe/sweep1.txt --out results.json -j 15

Each non-empty, non-# line of the configs file is ``label  --flag value ...`` (flags of stress_proxy.py).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold", required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("-j", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    jobs = []
    with open(a.configs) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                label, *flags = shlex.split(line)
                jobs.append((label, flags))
    tmp = tempfile.mkdtemp(prefix="sweep-")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "FLOE_ENGINE_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}

    def run(job):
        label, flags = job
        out = os.path.join(tmp, f"{label}.json")
        cmd = [a.python, os.path.join(HERE, "stress_proxy.py"), "--gold", a.gold, "--init", a.init, "--out", out,
               "--label", label, *flags]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return {"label": label, "error": p.stderr[-2000:]}
        with open(out) as f:
            return json.load(f)

    with ThreadPoolExecutor(a.j) as ex:
        results = list(ex.map(run, jobs))
    with open(a.out, "w") as f:
        json.dump(results, f)
    for r in results:
        if "error" in r:
            print(f"{r['label']:<28} ERROR {r['error'][-300:]}")
            continue
        c = r["curve"]
        print(f"{r['label']:<28} peak {r['peak']:.2f} last5th min {r['last_fifth_min']:.2f} mean "
              f"{r['last_fifth_mean']:.2f} {r['seconds']:>6.0f}s | " + " ".join(f"{x:.2f}" for x in c))


if __name__ == "__main__":
    main(sys.argv[1:])
