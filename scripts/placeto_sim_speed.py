#!/usr/bin/env python3
"""Times Placeto's published Python simulator against `placer simulate --random` on the same graph,
the same kind of placements (one uniformly random device per op) and the same core, in turn.

The issue that set the simulator's speed goal measures it against Placeto's simulator (Addanki et
al., NeurIPS 2019), "0.14 to 0.24 million ops per second on this kind of machine". This script
measures that reference on the machine at hand. Placeto's code is not part of placer: pass the
folder holding its `tf_sim.py` (`sim/tf_placement_sim/tf_sim.py` in the paper's public code,
github.com/aravic/generalizable-device-placement; it needs only Python's standard library).

    scripts/placeto_sim_speed.py --tf-sim DIR [--placer build/release/placer]
        [--model ../shared/models/nmt4.onnx] [--cluster k80x4] [--mode inference]
        [--random 300] [--seed 1] [--rounds 5] [--cpu 1]

What Placeto's simulator is given: every op of placer's graph (`placer inspect --save-graph`) as a
node, its inputs as edges from the ops that produce them (tensors without a producer, and so
without an op, add no edge), each op's time on gpu:0 from placer's own trace of the graph on
`--cluster` (`placer simulate --on gpu:0 --trace`; folded ops, absent from the trace, take 0) and
each output's bytes from its shape; devices cpu:0 and gpu:0..N-1 as named by the cluster. Its
simulate() calls alone are timed (placements drawn beforehand, one warm-up call), as placer times
its own. Each round runs one after the other, pinned to core `--cpu` with `taskset` when it is
available; the ratio is taken within a round, since this kind of machine changes speed from one
minute to the next. Standard library only."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
               "uint8": 1, "bool": 1}


def placeto_rate(tf_sim_dir, graph_path, trace_path, devices, n, seed):
    """Runs in a child process (see main): simulated ops per second of Placeto's simulate()."""
    sys.path.insert(0, tf_sim_dir)
    import warnings
    warnings.simplefilter("ignore")  # its `is` comparisons with literals warn on Python >= 3.8
    from tf_sim import Simulator  # noqa: E402 (Placeto's, from --tf-sim)

    graph = json.load(open(graph_path))
    trace = json.load(open(trace_path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    cost = {e["name"]: e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") != "transfer"}
    tensor_bytes = {}
    for t in graph["tensors"]:
        elements = 1
        for d in t.get("shape", []):
            elements *= max(int(d), 1)
        tensor_bytes[t["name"]] = elements * DTYPE_BYTES.get(t.get("dtype", "float32"), 4)
    producer = {y: (op["name"], i) for op in graph["ops"] for i, y in enumerate(op["outputs"])}

    class Node:  # what Placeto reads of a TensorFlow NodeDef
        def __init__(self, name, op_type, inputs):
            self.name, self.op, self.device, self.input = name, op_type, "", inputs

    class MetaGraph:  # ... and of a MetaGraphDef
        def __init__(self, nodes):
            self.graph_def = type("GraphDef", (), {})()
            self.graph_def.node = nodes

    nodes = [Node(op["name"], op["type"], [f"{producer[x][0]}:{producer[x][1]}" for x in op["inputs"] if x in producer])
             for op in graph["ops"]]
    outputs = {op["name"]: [tensor_bytes[y] for y in op["outputs"]] for op in graph["ops"]}
    sim = Simulator(MetaGraph(nodes), {name: cost.get(name, 0) for name in outputs}, outputs, list(devices))
    rng = random.Random(seed)
    names = [op["name"] for op in graph["ops"]]
    placements = [{name: rng.choice(devices) for name in names} for _ in range(n)]
    sim.simulate(dict(placements[0]))  # warm-up
    wall = 0.0
    for placement in placements:
        start = time.perf_counter()
        sim.simulate(placement)
        wall += time.perf_counter() - start
    return n * len(names) / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tf-sim", help="folder holding Placeto's tf_sim.py")
    ap.add_argument("--placer", default=os.path.join(ROOT, "build", "release", "placer"))
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "nmt4.onnx"))
    ap.add_argument("--cluster", default="k80x4")
    ap.add_argument("--mode", default="inference")
    ap.add_argument("--random", type=int, default=300, help="placements per round for placer (Placeto: a third)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=1, help="core to pin both to (taskset), -1: none")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # graph trace devices n seed
        graph, trace, devices, n, seed = args.child
        print(placeto_rate(args.tf_sim, graph, trace, devices.split(","), int(n), int(seed)))
        return 0
    if not args.tf_sim or not os.path.isfile(os.path.join(args.tf_sim, "tf_sim.py")):
        sys.exit("give --tf-sim DIR, the folder holding Placeto's tf_sim.py (see --help)")
    pin = ["taskset", "-c", str(args.cpu)] if args.cpu >= 0 and shutil.which("taskset") else []
    with tempfile.TemporaryDirectory() as tmp:
        graph, trace = os.path.join(tmp, "graph.json"), os.path.join(tmp, "trace.json")
        run = lambda cmd: subprocess.run(cmd, check=True, capture_output=True, text=True).stdout  # noqa: E731
        run([args.placer, "inspect", args.model, "--mode", args.mode, "--save-graph", graph])
        run([args.placer, "simulate", "--model", args.model, "--cluster", args.cluster, "--mode", args.mode, "--on", "gpu:0",
             "--trace", trace])
        clusters = json.loads(run([args.placer, "clusters", "--json"]))
        preset = next((c for c in (clusters if isinstance(clusters, list) else clusters.get("clusters", [])) if c.get("name") == args.cluster), None)
        if preset is None:
            sys.exit(f"cluster {args.cluster!r} is not one of placer's presets")
        devices = [d if isinstance(d, str) else d["name"] for d in preset["devices"]]
        ops = len(json.load(open(graph))["ops"])
        where = f"pinned to core {args.cpu}" if pin else "not pinned"
        print(f"{os.path.normpath(args.model)}: {ops} ops, {args.mode}; {args.cluster}: {len(devices)} devices; {where}")
        ratios = []
        for r in range(args.rounds):
            placeto = float(run(pin + [sys.executable, os.path.abspath(__file__), "--tf-sim", args.tf_sim, "--child", graph, trace,
                                       ",".join(devices), str(max(1, args.random // 3)), str(args.seed)]))
            ours = json.loads(run(pin + [args.placer, "simulate", "--model", args.model, "--cluster", args.cluster, "--mode", args.mode,
                                         "--random", str(args.random), "--seed", str(args.seed), "--json"]))["ops_per_second"]
            ratios.append(ours / placeto)
            print(f"round {r + 1}: Placeto {placeto / 1e6:.3f} M ops/s, placer {ours / 1e6:.2f} M ops/s, {ours / placeto:.0f}x")
        ratios.sort()
        print(f"placer / Placeto: median {ratios[len(ratios) // 2]:.0f}x (range {ratios[0]:.0f}-{ratios[-1]:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
