# Sourced by the memory-cgroup tests (run_*in_memory_limited_cgroup.sh, run_*_in_cgroup.sh):
# a writable cgroup v1 memory controller or SKIP (exit 77), fresh child cgroups with a limit
# that are removed on exit (with the files and processes registered), running a command
# inside one, and reading its counters. Needs `set -euo pipefail` in the caller.
#
#   cgroup_require_v1                  sets CGROUP_PARENT (the caller's own memory cgroup)
#   cg=$(cgroup_create NAME LIMIT_MB)  a fresh child cgroup (removed on exit)
#   cgroup_run CG CMD...               runs CMD inside CG (exec: its status is CMD's)
#   cgroup_start_server CG LOG CMD...  starts the server CMD (`spillway serve ... --port 0
#                                      --log-format json`) inside CG in the background, its
#                                      stderr to LOG, and waits until it listens and answers
#                                      /health (FAIL, exit 1, when it exits first or never
#                                      listens); sets CGROUP_SERVER_PID (the server process
#                                      itself, killed on exit) and CGROUP_SERVER_PORT
#   cgroup_oom_kills CG                OOM kills in CG so far
#   cgroup_peak_mb CG                  peak usage (memory.max_usage_in_bytes), MiB
#   cgroup_stat CG FIELD               a memory.stat field, bytes (0 when absent)
#   cgroup_evict_file PATH             drops PATH from the page cache (written back first)
#   cgroup_cleanup_file PATH           removed on exit
#   cgroup_cleanup_pid PID             killed (TERM, then KILL) on exit, before the rmdir
#   cgroup_make_520mb_model SPILLWAY PATH
#                                      the ~520 MB F16 demo model (~2x a 256 MiB limit) at
#                                      PATH, removed on exit

CGROUP_PARENT=
_cgroup_dirs=()
_cgroup_files=()
_cgroup_pids=()

_cgroup_cleanup() {
  local pid dir
  for pid in "${_cgroup_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${_cgroup_pids[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # Whatever still runs inside a test's cgroup (e.g. the server of `cgroup_run ... &`, where
  # $! is the backgrounded subshell, not the server) would keep the cgroup from being removed.
  for dir in "${_cgroup_dirs[@]}"; do
    [ -f "$dir/cgroup.procs" ] || continue
    for pid in $(cat "$dir/cgroup.procs"); do kill "$pid" 2>/dev/null || true; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$dir/cgroup.procs" ] || break; sleep 0.5; done
    for pid in $(cat "$dir/cgroup.procs"); do kill -9 "$pid" 2>/dev/null || true; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$dir/cgroup.procs" ] || break; sleep 0.2; done
  done
  # rmdir fails (EBUSY) while a killed task is still exiting: retry for up to 2 s.
  for dir in "${_cgroup_dirs[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -d "$dir" ] || break
      rmdir "$dir" 2>/dev/null && break
      sleep 0.2
    done
  done
  rm -f "${_cgroup_files[@]}"
}
trap _cgroup_cleanup EXIT

cgroup_require_v1() {
  local own
  own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  CGROUP_PARENT=/sys/fs/cgroup/memory${own}
  if [ -z "$own" ] || [ ! -w "$CGROUP_PARENT" ] || ! mkdir -p "$CGROUP_PARENT/.spillway-probe-$$" 2>/dev/null; then
    echo "SKIP: no writable cgroup v1 memory controller here (${CGROUP_PARENT})"
    exit 77
  fi
  rmdir "$CGROUP_PARENT/.spillway-probe-$$"
  # ASan's quarantine would hold up to 256 MB of freed memory: keep it small in here.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16:malloc_context_size=5"
}

cgroup_create() {
  local dir=$CGROUP_PARENT/spillway-$1-$$
  mkdir "$dir"
  echo $(( $2 * 1048576 )) > "$dir/memory.limit_in_bytes"
  echo "$dir"
}

# Registers a cgroup made by cgroup_create in a command substitution (a subshell cannot
# add to the caller's cleanup list).
cgroup_cleanup_dir() { _cgroup_dirs+=("$1"); }
cgroup_cleanup_file() { _cgroup_files+=("$1"); }
cgroup_cleanup_pid() { _cgroup_pids+=("$1"); }

cgroup_run() {
  local cg=$1
  shift
  bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@"
}

cgroup_start_server() {
  local cg=$1 log=$2
  shift 2
  # Not `cgroup_run ... &`: a backgrounded function is a subshell, and $! would be that shell,
  # not the server (a TERM to it leaves the server running).
  bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@" 2>"$log" >/dev/null &
  CGROUP_SERVER_PID=$!
  cgroup_cleanup_pid "$CGROUP_SERVER_PID"
  CGROUP_SERVER_PORT=
  for _ in $(seq 1 600); do
    CGROUP_SERVER_PORT=$(grep -o '"message":"listening".*"port":[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' | head -1 || true)
    [ -n "$CGROUP_SERVER_PORT" ] && curl -sf "http://127.0.0.1:$CGROUP_SERVER_PORT/health" >/dev/null && break
    kill -0 "$CGROUP_SERVER_PID" 2>/dev/null || { echo "FAIL: the server exited"; tail -20 "$log"; exit 1; }
    sleep 0.5
  done
  [ -n "$CGROUP_SERVER_PORT" ] || { echo "FAIL: the server never listened"; tail -20 "$log"; exit 1; }
}

cgroup_oom_kills() {
  awk '/^oom_kill / {print $2}' "$1/memory.oom_control" 2>/dev/null || echo 0
}

cgroup_peak_mb() { echo $(( $(cat "$1/memory.max_usage_in_bytes") / 1048576 )); }

cgroup_stat() {
  awk -v k="$2" '$1 == k {print $2; found = 1} END {if (!found) print 0}' "$1/memory.stat"
}

cgroup_evict_file() {
  sync "$1"
  dd if="$1" iflag=nocache count=0 status=none
}

# ~520 MB of F16 weights: 20 layers of ~24 MB, embeddings and output ~16 MB.
cgroup_make_520mb_model() {
  cgroup_cleanup_file "$2"
  "$1" make-demo-model --out "$2" --layers 20 --dim 1024 --ff 2816 --heads 16 \
    --kv-heads 8 --vocab 4096 --context 512 >/dev/null
}
