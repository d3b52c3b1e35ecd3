#!/usr/bin/env python3
"""How precisely a run knows its sampled shares: for each path of 3-8% (`--low`, `--high`) in a
results file, its 95% half-width by compare's round-level rule (profiler/src/shares.rs: the
ratio estimate over the rounds, its variance from the rounds' spread, floored at the binomial
one, Student's t at rounds - 1), the binomial half-width beside it, and how many rounds of the
same size +-1 percentage point would take with the spread as measured.
Usage: bench/share-precision.py RESULTS.json (a run with 2 or more rounds; stdlib only)."""
import argparse
import json
import math

# Two-sided 95% critical values of Student's t (standard tables); past 40 df, the normal's.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 40: 2.021}


def t95(df):
    if not math.isfinite(df) or df > 40:
        return 1.96
    return T95[max(k for k in T95 if k <= df)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--low", type=float, default=0.03)
    ap.add_argument("--high", type=float, default=0.08)
    ap.add_argument("--target", type=float, default=0.01, help="half-width to reach")
    a = ap.parse_args()
    doc = json.load(open(a.results))
    halves = []
    for w in doc["workloads"]:
        p = w.get("profile") or {}
        own = p.get("round_samples") or []
        for path in p.get("paths", []):
            rounds = [(x, n) for x, n in zip(path.get("round_samples") or [], own) if n > 0]
            if len(rounds) < 2:
                continue
            r = len(rounds)
            hits, total = sum(x for x, _ in rounds), sum(n for _, n in rounds)
            share = hits / total
            if not a.low <= share <= a.high:
                continue
            mean = total / r
            per_round = sum(((x - share * n) / mean) ** 2 for x, n in rounds) / (r - 1)
            binomial = share * (1 - share) / total
            var, df = (per_round / r, r - 1) if per_round / r > binomial else (binomial, math.inf)
            half = t95(df) * math.sqrt(var)
            floor = max(per_round, share * (1 - share) / mean)
            need = next((k for k in range(2, 1000)
                         if t95(k - 1) * math.sqrt(floor / k) <= a.target), None)
            halves.append(half)
            print(f"{w['name']:16} {path['kind']:9} {path['name']:34} {100 * share:4.1f}% "
                  f"of {total:6} samples, {r} rounds: +-{100 * half:4.1f} pp "
                  f"(binomial +-{100 * 1.96 * math.sqrt(binomial):4.1f}); "
                  f"+-{100 * a.target:g} pp in {need or '>999'} rounds")
    if halves:
        halves.sort()
        print(f"{len(halves)} paths: median +-{100 * halves[len(halves) // 2]:.1f} pp, "
              f"{100 * halves[0]:.1f}-{100 * halves[-1]:.1f}")
    else:
        print("no path in range with per-round counts")


if __name__ == "__main__":
    main()
