"""How often chance alone breaks the stress test's hold rule (core/stress.ts): a policy whose true
success rate p is steady over the last third, batches of `batch` attempts, `updates` updates in
the last third (plus the two before it, which the first 3-update averages reach back to). The
rule holds when the last third's 3-update average never falls more than 0.05 below its peak.

    python bench/recipe/hold_chance.py                 # batches of 32 (14 updates) and 64 (7)
    python bench/recipe/hold_chance.py --batch 48 --updates 10 --p 0.95 0.97
"""
from __future__ import annotations

import argparse
import random


def hold_chance(p: float, batch: int, updates: int, trials: int, rng: random.Random, tol: float = 0.05) -> float:
    ok = 0
    for _ in range(trials):
        r = [sum(rng.random() < p for _ in range(batch)) / batch for _ in range(updates + 2)]
        avg = [sum(r[i:i + 3]) / 3 for i in range(updates)]
        ok += max(avg) - min(avg) <= tol + 1e-12
    return ok / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="*", default=[32, 64])
    ap.add_argument("--updates", type=int, nargs="*", default=[14, 7], help="last-third updates, one per --batch")
    ap.add_argument("--p", type=float, nargs="*", default=[0.94, 0.96, 0.97, 0.98, 0.99])
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if len(a.updates) != len(a.batch):
        ap.error("give one --updates value per --batch value")
    rng = random.Random(a.seed)
    print("p     " + "  ".join(f"batch {b} x {u}" for b, u in zip(a.batch, a.updates)))
    for p in a.p:
        print(f"{p:.2f}  " + "  ".join(f"{hold_chance(p, b, u, a.trials, rng):>13.3f}" for b, u in zip(a.batch, a.updates)))


if __name__ == "__main__":
    main()
