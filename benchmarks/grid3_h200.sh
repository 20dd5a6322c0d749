#!/bin/bash
# One device call's piece of the 3-seed H200 table (benchmarks/data/h200_grid3.json, issue 16): record_trials.py
# resumes the grid, starts no trial that could end past the call, and copies the table and its ledger to $OUT.
# Run on the device machine after the wheels of ../shared/tools/device-wheels.sh are installed, from the project root:
#   bash benchmarks/grid3_h200.sh $((588 - SECONDS))      # the seconds left in the call (the install's are spent)
# A warm machine keeps the newest recording in /tmp/grid3 between calls; a fresh one starts from the committed table.
# Afterwards, here: copy the two files into benchmarks/data/ and update its README line. Its passes are stepped from
# Python (--stepped-passes), as its first 81 points were recorded before the env's own loop (RESULTS 13).
set -u
OUT=${OUT:-/tmp/out}
limit=${1:-588}
G=/tmp/grid3
export PYTHONPATH=/tmp/site:$PWD XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$G" "$OUT"
[ -f "$G/h200_grid3.jsonl" ] || cp benchmarks/data/h200_grid3.json benchmarks/data/h200_grid3.jsonl "$G/"
timeout -s INT $((limit - SECONDS)) python benchmarks/record_trials.py grid --num-envs 2048,4096,8192 \
  --horizons 8,12,24,32 --flags buffer_donation,cuda_graph_update --seeds 1,2,3 --cap-s 90 --stepped-passes \
  --stop-after-s $((limit - 8 - SECONDS)) --device-name "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  --out "$G/h200_grid3.json" 2>&1 | grep -v "^Failed to import"
cp "$G"/h200_grid3.json "$G"/h200_grid3.jsonl "$OUT/"
