#!/bin/bash
# A full sweep with its confirmation phase on one GPU (GPU defaults of space=locomotion), in one or two device
# calls of at most 10 minutes each (benchmarks/RESULTS.md, section 8). Run on the device machine after the
# wheels of ../shared/tools/device-wheels.sh are installed, from the project root:
#   bash benchmarks/confirm_h200.sh start <timeout_s> key=value...   # first call: a new study
#   bash benchmarks/confirm_h200.sh resume <timeout_s> [key=value...] # next call (within 30 s): continue it
# The run folder lives in /tmp/reports/$RUN_ID (default h200_confirmed) between calls; each call copies what it has
# to $OUT: its console log and run.tgz (the run folder without checkpoints).
set -u
OUT=${OUT:-/tmp/out}
R=/tmp/reports
RUN_ID=${RUN_ID:-h200_confirmed}
RUN=$R/$RUN_ID
what=$1; limit=$2; shift 2
nvidia-smi -L
if [ "$what" = start ]; then
  timeout -s INT "$limit" python -m sweep.run space=locomotion out=$R run_id=$RUN_ID "$@" 2>&1 \
    | grep -v "^Failed to import" | tee -a "$OUT/sweep.log"
else
  timeout -s INT "$limit" python -m sweep.run resume=$RUN "$@" 2>&1 | grep -v "^Failed to import" \
    | tee -a "$OUT/sweep.log"
fi
# The run folder but its checkpoints, as one file (a call returns at most 8 files), beside the console log.
tar -czf "$OUT/run.tgz" --exclude=trials -C "$R" "$RUN_ID"
ls -la "$OUT"; tar -tzf "$OUT/run.tgz"
