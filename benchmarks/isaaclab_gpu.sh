#!/usr/bin/env bash
# Isaac Lab 3.0 (kit-less, Newton MJWarp) on one GPU, in device calls made back to back (the machine keeps /tmp ~30 s
# after a call). The payload is ../shared/isaaclab/build-h200-bundle.sh's three parts with the real Go2 root added
# (benchmarks/README.md says how), one part per call; the last call also carries the tree before trials trained with the
# task's agent config (bench_old: git archive 220363e sweep).
#
#   bash benchmarks/isaaclab_gpu.sh copy DIR        calls 1-2: keep a part in /tmp/parts
#   bash benchmarks/isaaclab_gpu.sh chunk DIR       or: keep DIR/chunk.* (one tar of the parts and the wheels, split in
#                                                   56 MiB pieces; the last piece's folder holds CHUNKS, their sums)
#   bash benchmarks/isaaclab_gpu.sh wheels DIR      (the sweep job) keep a folder of device-wheels.sh in /tmp/whl
#   bash benchmarks/isaaclab_gpu.sh start DIR       call 3: the last part, unpack, then run JOBS detached
#   bash benchmarks/isaaclab_gpu.sh follow SECONDS  later calls: wait for the jobs, copy their output to $OUT
#
# JOBS (default: calibrate old pair), in order, on Isaac Lab's own Go2 task at its defaults (4096 envs x 24 steps,
# the task's agent config, no task setting changed):
#   calibrate  held-out success against env steps with this code (benchmarks/isaaclab_fidelity.py curve, new)
#   old        the same config with the code in bench_old (its own agent config, the panel in the training scene)
#   pair       a short sweep trial and its exported line in Isaac Lab's trainer: both saved agent/env configs
#   sweep      python -m sweep.run space=go2_flat into $W/reports/$RUN_ID, resumed (resume=<folder>) where a run folder
#              was carried in DIR/run.tgz (a lease is shorter than the sweep); needs ray and optuna: the folders of
#              ../shared/tools/device-wheels.sh, sent with `wheels`, are installed into /tmp/site2 (after the Isaac
#              Lab site on the path, so Isaac Lab's own pins win)
#   replay     the finished sweep's exported line in Isaac Lab's trainer, its final checkpoint scored on the held-out
#              panel (benchmarks/isaaclab_fidelity.py replay), on training seed REPLAY_SEED (default: the
#              recommendation's first confirmation seed), into $W/trainer_replay_<seed>
#
#   bash benchmarks/isaaclab_gpu.sh stop SECONDS    Ctrl-C to the sweep's driver, wait for it to close its ledger
set -uo pipefail
export PYTHONUNBUFFERED=1 GIT_PYTHON_REFRESH=quiet XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH=/tmp/site:/tmp/site2:$PWD
OUT=${OUT:-/tmp/out}
W=/tmp/isaac_gpu
ASSETS=/tmp/site/asset_root
TASK=${TASK:-Isaac-Velocity-Flat-UnitreeGo2}
JOBS=${JOBS-calibrate old pair}  # JOBS= (empty): unpack only
CALIBRATE_STEPS=${CALIBRATE_STEPS:-40000000}
OLD_STEPS=${OLD_STEPS:-15000000}
RUN_ID=${RUN_ID:-go2_h100}
REPLAY_SEED=${REPLAY_SEED:-}
mkdir -p "$OUT" "$W"

run_jobs() {
  local common=(--task "$TASK" --asset-root "$ASSETS" --num-envs 4096 --horizon 24 --eval-episodes 256
    --eval-every-steps 1200 --task-env '{}')
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  for job in $JOBS; do
    echo "=== $job at $(date -u +%T)"
    case $job in
      calibrate) python3 benchmarks/isaaclab_fidelity.py curve --behaviour new "${common[@]}" \
                   --env-steps "$CALIBRATE_STEPS" --out "$W/calibrate.json" ;;
      old) python3 benchmarks/isaaclab_fidelity.py curve --behaviour old --old-tree "$W/bench_old" "${common[@]}" \
             --env-steps "$OLD_STEPS" --out "$W/old.json" ;;
      pair) python3 benchmarks/isaaclab_fidelity.py pair --task "$TASK" --asset-root "$ASSETS" --num-envs 4096 \
              --horizon 24 --task-env '{}' --cap-s 60 --max-iterations 2 --out "$W/isaaclab_fidelity" ;;
      sweep) args=(space=go2_flat backend_options.asset_root="$ASSETS" run_id="$RUN_ID" out="$W/reports")
             [ -f "$W/reports/$RUN_ID/study.db" ] && args=(resume="$W/reports/$RUN_ID")
             python3 -m sweep.run "${args[@]}" & echo $! > "$W/driver"; wait $! ;;
      replay) python3 benchmarks/isaaclab_fidelity.py replay --run "$W/reports/$RUN_ID" --asset-root "$ASSETS" \
                ${REPLAY_SEED:+--seed "$REPLAY_SEED"} --out "$W/trainer_replay_${REPLAY_SEED:-first}" ;;
    esac
    echo "=== $job rc=$? at $(date -u +%T)"
  done
}

case "${1:-}" in
  copy)
    mkdir -p /tmp/parts && cp "$2"/isaac.tar.xz.part.* /tmp/parts/ && ls -la /tmp/parts ;;
  wheels)
    mkdir -p /tmp/whl && cp "$2"/*.whl* /tmp/whl/ && ls /tmp/whl | wc -l ;;
  chunk)
    mkdir -p /tmp/pl && cp "$2"/chunk.* /tmp/pl/ && ls -la /tmp/pl ;;
  start)
    mkdir -p /tmp/parts /tmp/whl
    if [ -f "$2/CHUNKS" ]; then  # one tar of the parts and the wheels, split over the calls
      cp "$2"/chunk.* "$2"/CHUNKS /tmp/pl/
      (cd /tmp/pl && sha256sum -c --quiet CHUNKS) || { echo "chunks missing or damaged: resend all"; exit 3; }
      cat /tmp/pl/chunk.* | tar -x -C /tmp/parts && mv /tmp/parts/*.whl /tmp/whl/ 2> /dev/null
    else
      cp "$2"/isaac.tar.xz.part.* "$2"/SHA256SUMS /tmp/parts/
    fi
    (cd /tmp/parts && sha256sum -c SHA256SUMS) || { echo "parts missing or damaged: resend all three"; exit 3; }
    rm -rf /tmp/site && mkdir -p /tmp/site
    cat /tmp/parts/isaac.tar.xz.part.* |
      python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')" ||
      exit 4
    [ -d "$2/bench_old" ] && rm -rf "$W/bench_old" && cp -r "$2/bench_old" "$W/bench_old"
    [ -f "$2/run.tgz" ] && mkdir -p "$W/reports" && tar -xzf "$2/run.tgz" -C "$W/reports"
    if ls /tmp/whl/*.whl* > /dev/null 2>&1; then
      (cd /tmp/whl && for p in *.part.000; do [ -f "$p" ] && cat "${p%.part.000}".part.* > "${p%.part.000}"; done)
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site2 /tmp/whl/*.whl || exit 7
    fi
    python3 -c "import torch, warp, isaaclab; print('torch', torch.__version__, 'warp', warp.__version__)" || exit 5
    ls "$ASSETS/Isaac/IsaacLab/Robots/Unitree/Go2/go2.usd" || exit 6
    export -f run_jobs; export TASK JOBS CALIBRATE_STEPS OLD_STEPS ASSETS W RUN_ID REPLAY_SEED
    setsid bash -c 'echo $$ > "$0"; run_jobs' "$W/pid" > "$W/log" 2>&1 < /dev/null &
    sleep 2; echo "detached: pid $(cat "$W/pid")" ;;
  follow)
    end=$((SECONDS + ${2:-540}))
    while kill -0 "$(cat "$W/pid")" 2> /dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
    if kill -0 "$(cat "$W/pid")" 2> /dev/null; then echo "running"; else echo "ended"; fi ;;
  stop)
    kill -INT "$(cat "$W/driver")" 2> /dev/null
    end=$((SECONDS + ${2:-120}))
    while kill -0 "$(cat "$W/pid")" 2> /dev/null && [ $SECONDS -lt $end ]; do sleep 2; done ;;
  *)
    echo "usage: $0 copy DIR | chunk DIR | wheels DIR | start DIR | follow SECONDS | stop SECONDS" >&2; exit 2 ;;
esac
# What the jobs have written so far: the console log, the curves, the agent/env config pair (one file: a call returns
# at most 8).
cp "$W/log" "$OUT/isaaclab_gpu.log" 2> /dev/null
for f in calibrate old; do [ -f "$W/$f.json" ] && cp "$W/$f.json" "$OUT/"; done
[ -d "$W/isaaclab_fidelity" ] && tar -czf "$OUT/isaaclab_fidelity.tgz" -C "$W" isaaclab_fidelity
ls -d "$W"/trainer_replay_* > /dev/null 2>&1 && tar -czf "$OUT/trainer_replay.tgz" -C "$W" $(cd "$W" && ls -d trainer_replay_*)
[ -d "$W/reports/$RUN_ID" ] && tar -czf "$OUT/run.tgz" --exclude="*.pt" -C "$W/reports" "$RUN_ID"  # no checkpoints
tail -n 40 "$OUT/isaaclab_gpu.log" 2> /dev/null
true
