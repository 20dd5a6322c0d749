#!/bin/bash
# One trial of legged_gym's default (4096 x 24, stock flags, compile cache on, seed 1) on the GPU, with held-out
# passes that stop once decided, to compare its evaluation seconds with the same trial before
# (benchmarks/data/h200_sweep_12, trial 0); then the ahead-of-time compiler on CUDA for one shape.
# Run on the device machine after the wheels are installed (benchmarks/RESULTS.md, section 7).
set -eu
OUT=${OUT:-/tmp/out}
nvidia-smi -L
python -m sweep.trial num_envs=4096 num_steps_per_env=24 profile=gpu price.gpu=h200 seed=1 \
  flags.compile_cache=true run_id=eval_after out="$OUT/eval_after" || echo "trial exit status $?"
cat > /tmp/plan.json <<JSON
{"backend": "mjx_locomotion", "profile": "gpu", "device": "auto", "shapes": [[2048, {"buffer_donation": true}]],
 "out": "$OUT/eval_after/precompile.jsonl"}
JSON
python -m sweep.precompile /tmp/plan.json
cat "$OUT/eval_after/precompile.jsonl"
