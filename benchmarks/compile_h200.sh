#!/bin/bash
# Start-up and compilation of one trial in a fresh process, with the persistent XLA cache cold and then warm
# (benchmarks/RESULTS.md, section 9). Run on the device machine after the wheels of ../shared/tools/device-wheels.sh
# are installed, from the project root: bash benchmarks/compile_h200.sh <label> (the label names the output folders;
# PYTHONPATH picks the tree that runs, so two trees can be compared in one call).
set -u
OUT=${OUT:-/tmp/out}
label=${1:-now}
nvidia-smi -L
rm -rf ~/.cache/sweep/jax
args="num_envs=4096 num_steps_per_env=24 profile=gpu cap_s=12 flags.fused_optimizer=true flags.buffer_donation=true flags.compile_cache=true"
for run in cold warm; do
  python -m sweep.trial $args out=$OUT/$label-$run run_id=$label-$run 2>&1 | grep -v "^Failed to import" > $OUT/$label-$run.log
  python - "$OUT/$label-$run/ledger.jsonl" "$label $run" <<'PY'
import json, sys
row = [json.loads(line) for line in open(sys.argv[1])][-1]
p = row["phases_s"]
print(f"{sys.argv[2]}: start-up {p['startup']:.2f} s, compilation {p['compile']:.2f} s, billable {row['billable_s']:.1f} s")
PY
done
