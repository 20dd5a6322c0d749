# Sourced by the GPU scripts whose work outlives a device call (confirm_h200.sh, held_out_h200.sh): a command started
# in its own process session runs on after the call returns, until the machine goes back, and the next call waits.

# detached_start PIDFILE LOG CMD...: start CMD in a new session, its output in LOG; the session's shell writes its pid
# to PIDFILE, then becomes CMD (the pid detached_follow watches).
detached_start() {
  local pid=$1 log=$2
  shift 2
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pid" "$@" > "$log" 2>&1 < /dev/null &
  sleep 1
  echo "detached: pid $(cat "$pid"), log $log"
}

# detached_follow PIDFILE WAIT_S: wait until the command ends or WAIT_S seconds pass; say "ended" or "running".
detached_follow() {
  local end=$((SECONDS + $2))
  while kill -0 "$(cat "$1")" 2> /dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
  if kill -0 "$(cat "$1")" 2> /dev/null; then echo "running"; else echo "ended"; fi
}
