#!/usr/bin/env python3
"""Draws a dsv4-bench-decode JSON as a PNG: ms per plain step vs context (with the
floor at 4.3 TB/s), and verify ms vs T (with the plain step as reference).
usage: bench/plot_decode.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        run = json.load(f)
    plain = [r for r in run["rows"] if r["kind"] == "plain"]
    verify = [r for r in run["rows"] if r["kind"] == "verify"]
    fig, axes = plt.subplots(1, 2 if verify else 1, figsize=(11 if verify else 6, 4.2), squeeze=False)
    ax = axes[0][0]
    ctx = [r["context"] for r in plain]
    ax.plot(ctx, [r["ms_per_step"] for r in plain], "o-", label="measured (median)")
    ax.plot(ctx, [r["ms_per_step"] / r["ratio_at_4_3"] for r in plain], "k--", label="floor at 4.3 TB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (positions)")
    ax.set_ylabel("ms per decode step")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{run['model']}: plain decode")
    ax.legend()
    if verify:
        ax = axes[0][1]
        t = [r["rows"] for r in verify]
        ax.plot(t, [r["ms_per_step"] for r in verify], "o-", label="verify round (median)")
        ax.plot(t, [r["ms_per_step"] / r["ratio_to_plain"] for r in verify], "k:", label="one plain step")
        ax.set_xlabel("rows T")
        ax.set_ylabel("ms per round")
        ax.set_ylim(bottom=0)
        ax.set_title(f"verify at context {verify[0]['context']}")
        ax.legend()
    fig.suptitle(run.get("label", ""), fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
