#!/usr/bin/env bash
# Profiles and validates the shared models on this machine's CPU and first GPU (the table of
# docs/execution.md, "Measured on a GPU machine"): for each model and mode, `placer profile` on the
# `local` cluster, then `placer validate` of all-GPU, all-CPU and the module-level CPU/GPU splits in
# examples/h100/<model>.*.json, with and without the profile.
#
#   scripts/gpu-validation.sh PLACER MODELS_DIR OUT_DIR [MODEL...]
#
# Writes OUT_DIR/<model>.<mode>.profile.json (the profile), .profile-summary.json and
# .validate.json (measured and profiled-simulation step times). scripts/gpu_table.py OUT_DIR adds
# the cost model's predictions without a profile (the `h100-box` preset) and prints the tables.
# STEPS, WARMUP and REPEATS (environment) override 5, 2 and 3.
set -uo pipefail
placer=$1 models=$2 out=$3
shift 3
list=("$@")
[ ${#list[@]} -gt 0 ] || list=(cifarnet resnet50 inception_v3 vgg16 rnnlm bert_base nmt)
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
steps=${STEPS:-5} warmup=${WARMUP:-2} repeats=${REPEATS:-3}
for model in "${list[@]}"; do
  m="$models/$model.onnx"
  placements=$(ls "$here"/examples/h100/"$model".*.json 2>/dev/null | paste -sd, -)
  for mode in training inference; do
    base="$out/$model.$mode"
    echo "== $model $mode ($(date +%T))"
    "$placer" profile --model "$m" --cluster local --mode "$mode" -o "$base.profile.json" \
      --steps "$steps" --warmup "$warmup" --repeats "$repeats" --json > "$base.profile-summary.json" || { echo "profile failed"; continue; }
    args=(--model "$m" --cluster local --mode "$mode" --on gpu:0,cpu:0 --steps "$steps" --warmup "$warmup" --json)
    [ -n "$placements" ] && args+=(--placements "$placements")
    "$placer" validate "${args[@]}" --profile "$base.profile.json" > "$base.validate.json" || echo "validate failed"
    python3 -c "import json,sys; [print(f\"  {p.get('placement','?'):60s} measured {p['median_s']*1e3:9.2f} ms  simulated {p['simulated_s']*1e3:9.2f} ms  error {p['error']*100:+6.1f}%\") for p in json.load(open(sys.argv[1]))['placements']]" "$base.validate.json" 2>/dev/null || true
  done
done
