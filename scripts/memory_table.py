#!/usr/bin/env python3
"""Measured against simulated peak memory, from `placer validate --json` outputs.

    scripts/memory_table.py FILE.json...

Prints a Markdown table: one row per placement and memory that held one cluster device (the host,
or a CUDA device), with the measured peak, the simulated peak of that device and the error
(simulated - measured) / measured; then the median and worst absolute error. A memory that held
several devices (several CPUs, or the test mode) has no simulated peak beside it and is listed
without one. docs/execution.md#memory has the figures this gave.
"""
import json, os, statistics, sys


def mib(b):
    return f"{b / 2**20:,.1f} MiB"


def main(paths):
    if not paths:
        sys.exit(__doc__)
    print("| model | mode | placement | memory | devices | measured peak | simulated peak | error |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: |")
    errors = []
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        model = os.path.basename(run.get("model", path)).removesuffix(".onnx")
        for p in run.get("placements", []):
            for m in p.get("memory", []):
                sim = m.get("simulated_peak_bytes")
                err = m.get("error")
                if err is not None:
                    errors.append(abs(err))
                print(f"| {model} | {run.get('mode', '')} | {p.get('placement', '')} | {m['memory']} | {', '.join(m['devices'])} | "
                      f"{mib(m['peak_bytes'])} | {mib(sim) if sim is not None else ''} | {f'{100 * err:+.1f}%' if err is not None else ''} |")
    if errors:
        print(f"\n{len(errors)} memories: median |error| {100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
