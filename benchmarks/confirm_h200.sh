#!/bin/bash
# A full sweep with its confirmation phase on one GPU (GPU defaults of space=locomotion), in device calls of at most
# 10 minutes each (docs/benchmarks.md, the recommendation against the baseline). Run on the device machine after the wheels of
# ../shared/tools/device-wheels.sh are installed, from the project root:
#   bash benchmarks/confirm_h200.sh start <timeout_s> key=value...   # first call: a new study
#   bash benchmarks/confirm_h200.sh resume <timeout_s> [key=value...] # next call (within 30 s): continue it
# or, as one unbroken sweep (no resume, no second start-up) over as many calls as it takes:
#   bash benchmarks/confirm_h200.sh detach <timeout_s> key=value...  # starts it in its own session, returns
#   bash benchmarks/confirm_h200.sh follow <wait_s>                   # each next call (within 30 s): waits for it
# A detached sweep outlives the call that started it (a new process session runs on until the machine goes back);
# `follow` returns when it has ended or after <wait_s>, and says which ("ended" or "running"). Where the device runs
# commands as an ordinary user rather than root, it ends such a process with the call too: use start and resume.
# The run folder lives in /tmp/reports/$RUN_ID (default h200_confirmed) between calls; each call copies what it has
# to $OUT: its console log and run.tgz (the run folder without checkpoints).
set -u
. "$(dirname "$0")/detached.sh"
OUT=${OUT:-/tmp/out}
R=/tmp/reports
RUN_ID=${RUN_ID:-h200_confirmed}
RUN=$R/$RUN_ID
LOG=$R/$RUN_ID.log
PID=$R/$RUN_ID.pid
what=$1; limit=$2; shift 2
nvidia-smi -L
mkdir -p "$R"
case "$what" in
  start)
    timeout -s INT "$limit" python -m sweep.run space=locomotion out=$R run_id=$RUN_ID "$@" 2>&1 \
      | grep -v "^Failed to import" | tee -a "$OUT/sweep.log" ;;
  resume)
    timeout -s INT "$limit" python -m sweep.run resume=$RUN "$@" 2>&1 | grep -v "^Failed to import" \
      | tee -a "$OUT/sweep.log" ;;
  detach)
    detached_start "$PID" "$LOG" timeout -s INT "$limit" \
      python -m sweep.run space=locomotion out=$R run_id=$RUN_ID "$@" ;;
  follow)
    detached_follow "$PID" "$limit"
    grep -v "^Failed to import" "$LOG" > "$OUT/sweep.log"
    tail -n 30 "$OUT/sweep.log" ;;
  *)
    echo "usage: confirm_h200.sh start|resume|detach|follow <seconds> [key=value...]" >&2; exit 2 ;;
esac
# The run folder but its checkpoints, as one file (a call returns at most 8 files), beside the console log.
if [ -d "$RUN" ]; then
  tar -czf "$OUT/run.tgz" --exclude=trials -C "$R" "$RUN_ID"
  ls -la "$OUT"; tar -tzf "$OUT/run.tgz"
fi
