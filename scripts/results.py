#!/usr/bin/env python3
"""Regenerates docs/results.md: runs `placer compare --json` on the papers' models on k80x4
(training step) and writes the table with the figures the runs printed. Usage:
    scripts/results.py [--placer build/release/placer] [--models DIR] [--algos a,b,...] [--out docs/results.md]
Standard library only."""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODELS = [("inception_v3", "Inception-V3, batch 32"), ("rnnlm", "RNNLM (2-layer LSTM, batch 64)"), ("nmt", "NMT (2+2-layer GNMT-style, batch 64)")]


def fmt_time(s):
    return "-" if s is None else (f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.1f} ms")


def gib(b):
    return f"{b / 2**30:.2f}"


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def svg_curves(path, title, curves, reference=None):
    """Writes a small SVG line chart: best step time so far (ms) against samples, one line per
    placer; `reference` draws horizontal lines (label -> seconds) for baselines."""
    w, h, left, bottom, top, right = 640, 360, 70, 40, 30, 150
    xs = [x for pts in curves.values() for x, _ in pts] or [1]
    ys = [y for pts in curves.values() for _, y in pts] + list((reference or {}).values())
    xmax, ymin, ymax = max(xs), min(ys) * 0.95, max(ys) * 1.05
    if ymax <= ymin:
        ymax = ymin + 1e-9
    sx = lambda x: left + (w - left - right) * x / xmax
    sy = lambda y: h - bottom - (h - bottom - top) * (y - ymin) / (ymax - ymin)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">placements sampled</text>',
           f'<text x="14" y="{(top + h - bottom) / 2}" transform="rotate(-90 14 {(top + h - bottom) / 2})" text-anchor="middle">best step time (ms)</text>']
    for i in range(5):
        y = ymin + (ymax - ymin) * i / 4
        out.append(f'<text x="{left - 4}" y="{sy(y) + 4}" text-anchor="end">{y * 1e3:.0f}</text>')
        x = xmax * i / 4
        out.append(f'<text x="{sx(x)}" y="{h - bottom + 14}" text-anchor="middle">{x:.0f}</text>')
    legend_y = top + 10
    for i, (label, secs) in enumerate((reference or {}).items()):
        out.append(f'<line x1="{left}" y1="{sy(secs)}" x2="{w - right}" y2="{sy(secs)}" stroke="#888" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{w - right + 4}" y="{sy(secs) + 4}" fill="#555">{label}</text>')
    for i, (label, pts) in enumerate(curves.items()):
        c = colors[i % len(colors)]
        poly = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{poly}"/>')
        out.append(f'<text x="{left + 10}" y="{legend_y + 14 * i}" fill="{c}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def read_curve(path):
    pts = []
    with open(path) as f:
        for line in f:
            cells = line.strip().split(",")
            try:
                sample, best = float(cells[0]), float(cells[2])
            except (ValueError, IndexError):
                continue  # header
            if best > 0:
                pts.append((sample, best))
    return pts


def learned_section(args, models):
    """ColocRL and HDP on each model and cluster: learning curves (SVG) and final step times
    against the classic placers, from the figures the runs printed."""
    lines = ["## Learned placers", ""]
    os.makedirs(os.path.join(ROOT, "docs/img"), exist_ok=True)
    for cluster in args.learned_clusters.split(","):
        for model, title in models:
            path = os.path.join(args.models, model + ".onnx")
            base = subprocess.run([args.placer, "compare", "--model", path, "--cluster", cluster, "--algos", args.baselines,
                                   "--seed", args.seed, "--json", "--quiet"], capture_output=True, text=True)
            if base.returncode != 0:
                sys.exit(f"compare failed: {base.stderr.strip()}")
            bj = json.loads(base.stdout)
            rows = {r["algo"]: r for r in bj["rows"]}
            curves, finals = {}, {}
            for algo in args.learned.split(","):
                curve = os.path.join("/tmp", f"placer-curve-{model}-{cluster}-{algo}.csv")
                cmd = [args.placer, "place", "--model", path, "--cluster", cluster, "--algo", algo, "--seconds", str(args.learned_seconds),
                       "--seed", args.seed, "--curve", curve, "--json", "--quiet"]
                print("running:", " ".join(cmd), file=sys.stderr)
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    finals[algo] = {"error": out.stderr.strip()}
                    continue
                finals[algo] = json.loads(out.stdout)
                curves[algo] = read_curve(curve)
            ref = {}
            for a in ("single", "expert", "m-etf", "local-search"):
                if a in rows and rows[a].get("fits"):
                    ref[a] = rows[a]["step_time_s"]
            img = f"img/curve-{model}-{cluster}.svg"
            svg_curves(os.path.join(ROOT, "docs", img), f"{title} on {cluster}", curves, ref)
            lines += [f"### {title} on {cluster}", "", f"![learning curves]({img})", "",
                      "| placer | step time | fits | samples | wall time | vs best classic |", "| --- | --- | --- | --- | --- | --- |"]
            best_classic = min((r["step_time_s"] for r in bj["rows"] if r.get("fits")), default=None)
            for algo, f in finals.items():
                if "error" in f:
                    lines.append(f"| {algo} | error: {f['error']} | | | | |")
                    continue
                gap = f"{(f['step_time_s'] / best_classic - 1) * 100:+.1f}%" if best_classic else "-"
                lines.append(f"| {algo} | {fmt_time(f['step_time_s'])} | {'yes' if f['fits'] else 'NO'} | {f['samples']} | {f['wall_s']:.0f} s | {gap} |")
            for r in bj["rows"]:
                if "error" in r:
                    continue
                lines.append(f"| {r['algo']} | {fmt_time(r['step_time_s'])} | {'yes' if r['fits'] else 'NO'} | {r.get('samples', '')} | {r['wall_s']:.2f} s | "
                             f"{(r['step_time_s'] / best_classic - 1) * 100:+.1f}% |" if best_classic else "")
            lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", default=os.path.join(ROOT, "build/release/placer"))
    ap.add_argument("--models", default=os.path.join(ROOT, "../shared/models"))
    ap.add_argument("--cluster", default="k80x4")
    ap.add_argument("--algos", default="all")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/results.md"))
    ap.add_argument("--learned", default="colocrl,hdp", help="learned placers to run ('' to skip)")
    ap.add_argument("--learned-seconds", type=int, default=120)
    ap.add_argument("--learned-clusters", default="k80x2,k80x4")
    ap.add_argument("--baselines", default="single,expert,metis,scotch,m-etf,m-sct,local-search")
    args = ap.parse_args()

    sections = []
    for model, title in MODELS:
        path = os.path.join(args.models, model + ".onnx")
        cmd = [args.placer, "compare", "--model", path, "--cluster", args.cluster, "--algos", args.algos, "--seed", args.seed, "--json", "--quiet"]
        print("running:", " ".join(cmd), file=sys.stderr)
        start = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"compare failed on {model}: {out.stderr.strip()}")
        j = json.loads(out.stdout)
        wall = time.time() - start
        devices = None
        lines = [f"### {title}", "",
                 f"`{' '.join(['placer'] + cmd[1:]).replace(args.models, '../shared/models')}` — lower bound {fmt_time(j['lower_bound_s'])}, "
                 f"best single device {fmt_time(j['single_device_step_time_s'])}, best placement that fits: **{j['best']}** "
                 f"(the whole comparison took {wall:.1f} s).", ""]
        rows = j["rows"]
        for r in rows:
            if r.get("peak_memory_bytes"):
                devices = list(r["peak_memory_bytes"].keys())
                break
        header = "| algorithm | step time | speedup over 1 device | gap to lower bound | fits | wall time | " + " | ".join(f"peak GiB {d}" for d in devices or []) + " |"
        lines += [header, "|" + " --- |" * (6 + len(devices or []))]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['algo']} | error: {r['error']} | | | no | {r['wall_s']:.2f} s |" + " |" * len(devices or []))
                continue
            peaks = " | ".join(gib(r["peak_memory_bytes"][d]) for d in devices)
            best = "**" if r["algo"] == j["best"] else ""
            lines.append(f"| {best}{r['algo']}{best} | {fmt_time(r['step_time_s'])} | {'-' if r['speedup_over_single'] is None else format(r['speedup_over_single'], '.2f') + 'x'} | "
                         f"{'-' if r['gap_to_lower_bound'] is None else format(r['gap_to_lower_bound'] * 100, '.0f') + '%'} | {'yes' if r['fits'] else 'NO'} | {r['wall_s']:.2f} s | {peaks} |")
        sections.append("\n".join(lines))

    doc = f"""# Results

Regenerated by `scripts/results.py` (do not edit by hand): every classic placer of `placer compare`
on the training step (SGD) of the device-placement papers' models, on `{args.cluster}` (one
Haswell CPU and four K80 GPUs, [clusters.md](clusters.md)), in placer's simulator
([simulator.md](simulator.md)). Step times are simulated; wall times are each algorithm's own
running time on the machine below. "Speedup" is over the best single device that fits; "gap" is
how far above the lower bound ([simulator.md](simulator.md#lower-bounds)) a placement is.

Machine: {machine()}; date {time.strftime('%Y-%m-%d')}.

""" + "\n\n".join(sections) + "\n"
    if args.learned:
        doc += "\n" + learned_section(args, MODELS) + "\n"
    with open(args.out, "w") as f:
        f.write(doc)
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
