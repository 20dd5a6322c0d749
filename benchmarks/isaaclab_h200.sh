#!/usr/bin/env bash
# Isaac Lab 3.0 (kit-less, Newton MJWarp) on one H200, in device calls made back to back (the machine keeps /tmp and
# its Warp kernel cache ~30 s after a call). The payload (Isaac Lab bundle of ../shared/isaaclab/build-h200-bundle.sh,
# the wheels sweep needs that the machine lacks, the stand-in asset root of tests/isaaclab_standin.py) travels as four
# parts of 56 MiB in .h200p1 .. .h200p4, one per call; benchmarks/RESULTS.md section 6 has the exact calls.
#
#   bash benchmarks/isaaclab_h200.sh copy .h200pN   calls 1-3: keep a part in /tmp/parts
#   bash benchmarks/isaaclab_h200.sh prepare         call 4: unpack, install, then a calibration trial (cold Warp
#                                                   cache; 4096 x 24, every flag) whose curve tells the target
#   bash benchmarks/isaaclab_h200.sh sweep TARGET   call 5: the sweep to held-out success TARGET
#   bash benchmarks/isaaclab_h200.sh train          call 6: the sweep's override line in Isaac Lab's own trainer
# Everything prints to stdout; what comes back is under $OUT.
set -uo pipefail
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
export PYTHONUNBUFFERED=1 GIT_PYTHON_REFRESH=quiet XLA_PYTHON_CLIENT_PREALLOCATE=false RAY_USAGE_STATS_ENABLED=0
export PYTHONPATH=/tmp/site:$PWD
PAY=/tmp/h200pay
ASSETS=$PAY/assets
TASK=Isaac-Velocity-Flat-AnymalD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# Shared by the calibration trial and the sweep: 5 s episodes (250 control steps), so that a held-out pass of the
# whole scene costs ~250 steps instead of 1000; success = survived the 5 s and tracked within Isaac Lab's thresholds.
TASK_OPTS=("backend_options.asset_root=$ASSETS" "backend_options.env.episode_length_s=5.0")

case "${1:-}" in
copy)
  mkdir -p /tmp/parts && cp "$2"/* /tmp/parts/ && ls -la /tmp/parts
  ;;
prepare)
  cp .h200p4/* /tmp/parts/
  (cd /tmp/parts && sha256sum -c h200pay.SUMS) || { echo "parts missing or damaged: resend all four"; exit 3; }
  rm -rf "$PAY" /tmp/site && mkdir -p /tmp/site
  cat /tmp/parts/h200pay.tar.part.* | tar -x -C /tmp || exit 4
  (cd "$PAY" && sha256sum -c SHA256SUMS >/dev/null && cd whl && sha256sum -c ../WHEELSUMS >/dev/null) || exit 5
  cat "$PAY"/isaac.tar.xz.part.* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')" || exit 6
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$PAY"/whl/*.whl || exit 7
  echo "=== unpacked and installed at $(el)s"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, warp, isaaclab, ray, optuna; print('torch', torch.__version__, 'warp', warp.__version__)"
  rm -rf /tmp/calib
  echo "=== calibration trial (cold Warp kernel cache) at $(el)s"
  timeout 420 python3 -m sweep.trial backend=isaaclab profile=$TASK num_envs=4096 num_steps_per_env=24 \
    eval_every_steps=720 target=0.99 cap_s=300 flags.fused_optimizer=true flags.deferred_episode_stats=true \
    flags.fast_finite_check=true flags.lazy_loss_readout=true flags.cuda_graph_update=true "${TASK_OPTS[@]}" \
    price.gpu=h200 run_id=calibration out=/tmp/calib 2>&1 | tee "$OUT/calibration.log"
  echo "=== calibration rc=$? at $(el)s"
  cp /tmp/calib/ledger.jsonl "$OUT/calibration_ledger.jsonl"
  ;;
sweep)
  target=${2:?usage: $0 sweep TARGET (a held-out success the calibration reached in about 2 minutes of training)}
  rm -rf /tmp/reports
  echo "=== sweep, target $target, at $(el)s"
  timeout 575 python3 -m sweep.run space=anymal_d_flat "${TASK_OPTS[@]}" target.success="$target" \
    target.eval_every_steps=720 'knobs.num_envs=[2048,4096,8192]' budget.usd=0.65 budget.trial_usd=0.2 \
    budget.max_trials=10 run_id=isaaclab_h200 out=/tmp/reports 2>&1 | tee "$OUT/sweep.log"
  echo "=== sweep rc=$? at $(el)s"
  tar -czf "$OUT/isaaclab_h200.tar.gz" -C /tmp/reports --exclude='checkpoint.pt' isaaclab_h200
  ;;
train)
  run=/tmp/reports/isaaclab_h200
  line=$(python3 -c "import yaml; print(yaml.safe_load(open('$run/recommended.yaml'))['isaaclab']['override'])") ||
    { echo "no recommended.yaml in $run: no trial reached the target"; exit 3; }
  echo "=== Isaac Lab's trainer with the exported override line at $(el)s: $line"
  mkdir -p /tmp/train && cd /tmp/train
  # shellcheck disable=SC2086  # the override line is a list of words
  ISAACSIM_ASSET_ROOT=$ASSETS timeout 120 python3 -m isaaclab train --rl_library rsl_rl --task $TASK \
    --max_iterations 3 $line > "$OUT/isaaclab_train.log" 2>&1
  echo "=== trainer rc=$? at $(el)s"
  grep -E "Learning iteration|Steps per second|Environment seed" "$OUT/isaaclab_train.log" | head -12
  params=$(ls -d /tmp/train/logs/rsl_rl/*/*/params 2>/dev/null | head -1)
  [ -n "$params" ] && cp "$params/env.yaml" "$OUT/train_env.yaml" && cp "$params/agent.yaml" "$OUT/train_agent.yaml"
  ls -la "$OUT"
  ;;
*)
  echo "usage: $0 copy DIR | prepare | sweep TARGET | train"; exit 2
  ;;
esac
