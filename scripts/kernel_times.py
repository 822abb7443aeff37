#!/usr/bin/env python3
"""Sums an `ncu --csv --metrics gpu__time_duration.sum` report by kernel name.

Usage: scripts/kernel_times.py REPORT.csv [--steps N]
Prints, per kernel (with its template arguments), the launches, the total and the mean time,
its share, and the total per step (N: the profiled steps, dsv4-bench-decode --profiler-steps).
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def base_name(name):
    """'void ns::k<8, 4>(Args)' -> 'k<8, 4>': no return type, namespace or parameter list."""
    # ncu writes the anonymous namespace as "(anonymous namespace)", "<unnamed>" or, in
    # its CSV, "unnamed>"
    name = re.sub(r"\(anonymous namespace\)::|<?unnamed>::", "", name)
    depth, out = 0, []
    for ch in name:  # up to the parameter list; scopes and the return type cut at depth 0
        if ch == "(" and depth == 0:
            break
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if depth == 0 and ch == " ":
            out = []  # a return type ("void") before the name
        elif ch != " ":
            out.append(ch)
        if depth == 0 and out[-2:] == [":", ":"]:
            out = []  # a namespace before the name
    return "".join(out).replace("cuda::", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--steps", type=int, default=1)
    a = ap.parse_args()
    totals, counts = defaultdict(float), defaultdict(int)
    with open(a.report, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines first
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        us = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        us *= {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        k = base_name(row["Kernel Name"])
        totals[k] += us
        counts[k] += 1
    if not totals:
        sys.exit(f"{a.report}: no gpu__time_duration.sum rows (was ncu run with --csv and that metric?)")
    grand = sum(totals.values())
    print(f"{'kernel':<40} {'launches':>9} {'total us':>11} {'mean us':>9} {'share':>7} {'us/step':>10}")
    for k, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{k:<40} {counts[k]:>9} {t:>11.1f} {t / counts[k]:>9.2f} {100 * t / grand:>6.1f}% {t / a.steps:>10.1f}")
    n = sum(counts.values())
    print(f"{'total':<40} {n:>9} {grand:>11.1f} {grand / n:>9.2f} {100.0:>6.1f}% {grand / a.steps:>10.1f}")


if __name__ == "__main__":
    main()
