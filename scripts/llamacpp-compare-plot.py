#!/usr/bin/env python3
"""Plots a scripts/llamacpp-compare.sh run: output tokens/s, TTFT p99 and ITL p99 against the
offered load (Poisson rates) for convoy and each llama-server, one panel each, the SLO's limits
dashed.

    python3 scripts/llamacpp-compare-plot.py OUT_DIR docs/perf/llamacpp-compare.png

Needs matplotlib (e.g. `python3 -m venv /tmp/plot && /tmp/plot/bin/pip install matplotlib`).
"""
import glob
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR PNG")
    out, png = sys.argv[1], sys.argv[2]
    runs = {}  # engine -> [(rate, class "all")]
    for path in glob.glob(f"{out}/serve/r*-*.json"):
        m = re.match(r"r([0-9.]+)-(.+)\.json$", os.path.basename(path))
        run = json.load(open(path))
        a = next((c for c in run.get("classes", []) if c["name"] == "all"), None)
        if m and a:
            runs.setdefault(m.group(2), []).append((float(m.group(1)), a))
    if not runs:
        sys.exit(f"no rate runs in {out}/serve")
    machine = dict(line.rstrip("\n").split("=", 1) for line in open(f"{out}/machine.txt")
                   if "=" in line)
    slo = {"TTFT p99 (ms)": float(machine["slo_ttft_ms"]), "ITL p99 (ms)": float(machine["slo_itl_ms"])}
    names = {"convoy": "convoy (bf16)", "llama-bf16": "llama.cpp BF16",
             "llama-f16": "llama.cpp F16", "llama-q4_1": "llama.cpp Q4_1"}
    panels = [("output tokens/s", lambda a: a["output_tokens_per_s"]),
              ("TTFT p99 (ms)", lambda a: a["ttft_s"]["p99"] * 1e3 if a["ttft_s"].get("count") else None),
              ("ITL p99 (ms)", lambda a: a["itl_s"]["p99"] * 1e3 if a["itl_s"].get("count") else None)]
    fig, axes = plt.subplots(1, len(panels), figsize=(10, 3.2))
    for ax, (title, get) in zip(axes, panels):
        for engine in sorted(runs, key=lambda e: (e != "convoy", e)):
            points = sorted((r, get(a)) for r, a in runs[engine] if get(a) is not None)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    label=names.get(engine, engine))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("offered requests/s (Poisson)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if title in slo:
            ax.set_yscale("log")
            ax.axhline(slo[title], color="grey", linestyle="--", linewidth=1)
            ax.annotate("SLO", (ax.get_xlim()[0], slo[title]), fontsize=8, color="grey",
                        xytext=(3, 3), textcoords="offset points")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    print(f"{png}: {os.path.getsize(png)} bytes")


if __name__ == "__main__":
    main()
