#!/bin/bash
# The held-out recordings still missing from benchmarks/data/h200_grid3.json (benchmarks/README.md, "Held-out
# recordings"), recorded on one NVIDIA H200 (the table's GPU: merge refuses another) over device calls of at most 10
# minutes. On the device machine, from the project root, once the recording wheels are in /tmp/site:
#   bash benchmarks/held_out_h200.sh detach <seconds>   # copies the tree to /tmp/held_out and starts the recorder there
#   bash benchmarks/held_out_h200.sh follow <wait_s>    # each next call (within 30 s): waits for it
# The recorder runs in its own process session, outlives the call that started it, starts no trial that could end
# past <seconds>, and resumes from its .jsonl (the committed one, as the first call brings it), so a later session
# goes on where this one stopped. Every call copies the recording (.json, .jsonl) and the console log to $OUT; here,
# copy them over benchmarks/data/ (the .jsonl only grows) and merge (the README's command). SEEDS (default 4,5,6):
# the held-out training seeds to record, e.g. SEEDS=7,8,9 for a truth of six seeds a config once 4-6 are in.
set -u
. "$(dirname "$0")/detached.sh"
OUT=${OUT:-/tmp/out}
W=/tmp/held_out
NAME=h200_grid3_held_out
LOG=$W/$NAME.log
PID=$W/$NAME.pid
what=$1; limit=$2
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $gpu"
case "$what" in
  detach)
    case "$gpu" in *H200*) ;; *) echo "not an H200: the table's recordings are an H200's; nothing started" >&2; exit 3 ;; esac
    rm -rf "$W" && mkdir -p "$W" && cp -r . "$W/tree"
    cd "$W/tree" || exit 1
    detached_start "$PID" "$LOG" env GIT_PYTHON_REFRESH=quiet PYTHONPATH=/tmp/site:$PWD \
      XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 \
      python benchmarks/record_trials.py grid --configs 4096x24:stock --top 16 --from benchmarks/data/h200_grid3.json \
      --held-out --seeds "${SEEDS:-4,5,6}" --cap-s 90 --stepped-passes --stop-after-s "$limit" \
      --out "benchmarks/data/$NAME.json" ;;
  follow)
    detached_follow "$PID" "$limit" ;;
  *)
    echo "usage: held_out_h200.sh detach|follow <seconds>" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
cp "$W/tree/benchmarks/data/$NAME".json* "$OUT/" 2> /dev/null
grep -v "^Failed to import" "$LOG" > "$OUT/$NAME.log" 2> /dev/null
tail -n 20 "$OUT/$NAME.log"
ls -la "$OUT"
