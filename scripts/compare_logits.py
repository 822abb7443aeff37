#!/usr/bin/env python3
"""Compares two --dump-logits files (reference first): greedy tokens, per-row relative
L2 of the logits, and for every token mismatch the reference's top-1/top-2 margin, so a
mismatch can be shown to be a near-tie (MODEL.md D15: margin < 0.5)."""
import json
import math
import sys


def main(ref_path, got_path, near_tie=0.5):
    ref, got = json.load(open(ref_path)), json.load(open(got_path))
    worst = 0.0
    for r, g in zip(ref["logits"], got["logits"]):
        num = sum((a - b) ** 2 for a, b in zip(r, g))
        den = sum(a * a for a in r) or 1e-30
        worst = max(worst, math.sqrt(num / den))
    n = min(len(ref["tokens"]), len(got["tokens"]))
    first = next((i for i in range(n) if ref["tokens"][i] != got["tokens"][i]), None)
    print(f"{got_path} vs {ref_path}: {n} tokens, logits max per-row relative L2 {worst:.3e}")
    if first is None:
        print("  greedy tokens identical")
        return 0
    row = sorted(ref["logits"][first], reverse=True)
    margin = row[0] - row[1]
    verdict = "near-tie" if margin < near_tie else "NOT a near-tie"
    print(f"  first token mismatch at generated index {first}: ref {ref['tokens'][first]} "
          f"got {got['tokens'][first]}, ref margin {margin:.4f} ({verdict}); later tokens "
          f"follow different prefixes")
    return 0 if margin < near_tie else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
