"""What the data audit's differential check sees of a real package's own test suite, beside an
older version of the check (issue 43: the old one saw nothing of TestCase-style suites).

    python bench/diffcheck_real.py --compare c22c94d --out bench/results/diffcheck-real.json

Downloads the package's sdist from PyPI with pip (pinned by sha256), unpacks it, and runs
harness/floe_harness/audit/diffcheck.py (this tree's, and the one at --compare) on it as the
audit does, with the package's module as the changed file and its test file as the tests. For
each it records the wall time, how many variants logged a call, how many of the module's
functions the tests were seen calling, and how many were replayed on other inputs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "harness" / "floe_harness" / "audit" / "diffcheck.py"
# the package, version, sdist hash, changed module and test file measured
CASES = [
    {"package": "more-itertools", "version": "10.1.0", "sha256": "626c369fa0eb37bac0291bce8259b332fd59ac792fa5497b59837309cd5b114a",
     "targets": "more_itertools/more.py", "tests": "tests/test_more.py", "style": "unittest.TestCase methods with subTest; functions re-exported by `from .more import *`"},
]


def sdist(case: dict, cache: Path) -> Path:
    name = f"{case['package']}-{case['version']}.tar.gz"
    path = cache / name
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", f"{case['package']}=={case['version']}", "-d", str(cache)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != case["sha256"]:
        raise SystemExit(f"{path}: sha256 {digest}, expected {case['sha256']}: delete it and run again, or update the pin")
    return path


def measure(script: Path, tree: Path, case: dict) -> dict:
    started = time.monotonic()
    r = subprocess.run([sys.executable, str(script), ".", "--targets", case["targets"], "--tests", case["tests"]], cwd=tree, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - started
    out = json.loads(r.stdout.strip().splitlines()[-1])
    v = out["variants"]
    calls = lambda events: [e for e in events if isinstance(e, list) and len(e) == 6]  # noqa: E731
    tests = {k: e for k, e in v.items() if not k.startswith("replay::")}
    replays = [k for k in v if k.startswith("replay::")]
    return {
        "wallSeconds": round(wall, 1), "importError": out["importError"], "variants": len(v),
        "testVariants": len(tests), "testVariantsWithCalls": sum(1 for e in tests.values() if calls(e)),
        "functionsCalled": len({c[0] for e in tests.values() for c in calls(e)}),
        "replays": len(replays), "functionsReplayed": len({k.split("#")[0] for k in replays}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare", default="c22c94d", help="a git ref whose diffcheck.py is measured beside this tree's")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "diffcheck-real.json"))
    a = ap.parse_args()
    cache = Path(os.environ.get("FLOE_HOME", ROOT / ".floe")) / "cache" / "sdists"
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "diffcheck_old.py"
        old.write_text(subprocess.run(["git", "show", f"{a.compare}:harness/floe_harness/audit/diffcheck.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout)
        for case in CASES:
            with tarfile.open(sdist(case, cache)) as tf:
                tf.extractall(tmp)  # the sdist is pinned by its sha256
            tree = Path(tmp) / f"{case['package']}-{case['version']}"
            rows.append({**case, "now": measure(SCRIPT, tree, case), "before": {"ref": a.compare, **measure(old, tree, case)}})
            print(json.dumps(rows[-1]))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    Path(a.out).write_text(json.dumps({"command": "python bench/diffcheck_real.py --compare " + a.compare, "code": head, "python": sys.version.split()[0],
                                       "date": time.strftime("%Y-%m-%d"), "cases": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
