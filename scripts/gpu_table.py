#!/usr/bin/env python3
"""Tables of predicted against measured step times from scripts/gpu-validation.sh's output.

    scripts/gpu_table.py DIR [--placer build/release/placer] [--models ../shared/models]

For every placement that `placer validate` ran (DIR/<model>.<mode>.validate.json) prints the
measured median, the profiled simulation (validate's own prediction, with DIR/<model>.<mode>.profile.json)
and the cost model alone on the `h100-box` preset (`placer simulate`, no profile), each with its
error (simulated - measured) / measured, then the median and worst absolute error of each.
"""
import argparse, glob, json, os, statistics, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--placer", default="build/release/placer")
ap.add_argument("--models", default="../shared/models")
ap.add_argument("--cluster", default="h100-box", help="cluster of the cost-model-only prediction")
ap.add_argument("--recalibrate", action="store_true",
                help="re-simulate with each profile's calibration residual spread in proportion to op times "
                     "(placer profile's rule since 2026-11-23) instead of evenly (the rule the data was taken with), "
                     "on DIR/local-cluster.json")
ap.add_argument("--leave-one-out", action="store_true",
                help="price each model with a cluster fitted (placer fit on DIR/local-cluster.json) to the other models' "
                     "profiles only, instead of --cluster")
ap.add_argument("--only", action="append", help="only this model (repeatable)")
ap.add_argument("--quiet", action="store_true", help="print the summary lines only")
a = ap.parse_args()
model_label = "leave-one-model-out fit" if a.leave_one_out else a.cluster

def fitted_without(model):
    """A cluster fitted to every profile in DIR except `model`'s."""
    profiles = sorted(p for p in glob.glob(os.path.join(a.dir, "*.profile.json")) if os.path.basename(p).split(".")[0] != model)
    models = [os.path.join(a.models, os.path.basename(p).split(".")[0] + ".onnx") for p in profiles]
    out = os.path.join(tempfile.mkdtemp(), "fitted.json")
    subprocess.run([a.placer, "fit", "--cluster", os.path.join(a.dir, "local-cluster.json"), "--models", ",".join(models),
                    "--profiles", ",".join(profiles), "-o", out], check=True, capture_output=True)
    return out

loo = {}

def simulate(model, mode, placement):
    cluster = a.cluster
    if a.leave_one_out:
        if model not in loo:
            loo[model] = fitted_without(model)
        cluster = loo[model]
    cmd = [a.placer, "simulate", "--model", os.path.join(a.models, model + ".onnx"), "--cluster", cluster, "--mode", mode, "--json"]
    if placement.startswith("all on "):
        cmd += ["--on", placement[len("all on "):]]
    else:
        cmd += ["--placement", os.path.join("examples/h100", os.path.basename(placement))]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["step_time_s"]

def recalibrated(model, mode):
    """The profile with its positive residuals moved from an even share per op to a share in
    proportion to each op's isolated time (negative residuals were already proportional)."""
    p = json.load(open(os.path.join(a.dir, f"{model}.{mode}.profile.json")))
    s = json.load(open(os.path.join(a.dir, f"{model}.{mode}.profile-summary.json")))
    for k in s["kinds"]:
        ops = p["times_s"][k["kind"]]["ops"]
        for forward, res in ((True, k["forward_residual_s"]), (False, k["backward_residual_s"])):
            group = [n for n, v in ops.items() if v > 0 and
                     (not (n.endswith("/grad") or n.startswith("loss/") or n.startswith("update/"))) == forward]
            if res <= 0 or not group:
                continue
            raw = {n: ops[n] - res / len(group) for n in group}
            total = sum(raw.values())
            for n in group:
                ops[n] = raw[n] * (total + res) / total
    path = os.path.join(tempfile.mkdtemp(), f"{model}.{mode}.profile.json")
    json.dump(p, open(path, "w"))
    return path

def profiled(model, mode, placement, profile):
    cmd = [a.placer, "simulate", "--model", os.path.join(a.models, model + ".onnx"), "--cluster",
           os.path.join(a.dir, "local-cluster.json"), "--mode", mode, "--profile", profile, "--json"]
    if placement.startswith("all on "):
        cmd += ["--on", placement[len("all on "):]]
    else:
        cmd += ["--placement", os.path.join("examples/h100", os.path.basename(placement))]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["step_time_s"]

rows = []
for path in sorted(glob.glob(os.path.join(a.dir, "*.validate.json"))):
    model, mode = os.path.basename(path).split(".")[:2]
    if a.only and model not in a.only:
        continue
    profile = recalibrated(model, mode) if a.recalibrate else None
    for p in json.load(open(path))["placements"]:
        name = p["placement"] if p["placement"].startswith("all on ") else os.path.basename(p["placement"])
        model_s = simulate(model, mode, p["placement"])
        sim = profiled(model, mode, p["placement"], profile) if profile else p["simulated_s"]
        rows.append((model, mode, name, p["median_s"], p["p10_s"], p["p90_s"], sim, model_s))

out = (lambda *x, **k: None) if a.quiet else print
out(f"| model | mode | placement | measured ms (p10-p90) | profiled sim ms | error | {model_label} cost model ms | error |")
out("| --- | --- | --- | --- | --- | --- | --- | --- |")
errs_p, errs_m = [], []
for model, mode, name, med, p10, p90, sim, mod in rows:
    ep, em = (sim - med) / med, (mod - med) / med
    errs_p.append(abs(ep)); errs_m.append(abs(em))
    out(f"| {model} | {mode} | {name.replace('.json','')} | {med*1e3:.2f} ({p10*1e3:.2f}-{p90*1e3:.2f}) | {sim*1e3:.2f} | {ep*100:+.1f}% | {mod*1e3:.2f} | {em*100:+.1f}% |")
for label, e in (("profiled simulation", errs_p), (f"cost model alone ({model_label})", errs_m)):
    print(f"\n{label}: {len(e)} cases, median |error| {statistics.median(e)*100:.1f}%, worst {max(e)*100:.1f}%, "
          f"{sum(x > 0.25 for x in e)} over 25%, {sum(x <= 0.10 for x in e)} within 10%")
