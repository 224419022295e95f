# Sourced by the acceptance scripts: record how busy the host was.
# CPU time the hypervisor gave to other guests (the "steal" column of
# /proc/stat, in ticks of 1/100 s), so that a noisy run says so.
steal() { awk '/^cpu /{print $9}' /proc/stat; }
host_start() { HOST_STEAL0=$(steal); HOST_T0=$(date +%s); }
# host_end OUT: write OUT/host.json and print a summary line.
host_end() {
  local s1 t1
  s1=$(steal); t1=$(date +%s)
  printf '{"seconds": %d, "steal_ticks": %d, "cpus": %d}\n' $((t1 - HOST_T0)) $((s1 - HOST_STEAL0)) "$(nproc)" > "$1/host.json"
  echo "host: $((s1 - HOST_STEAL0)) ticks of CPU steal over $((t1 - HOST_T0)) s on $(nproc) CPUs"
}
# durable_write_floor QUILL DIR PREFIX: the floor of a durable commit on this
# host (bench/oltp-floor.py): one 4 KiB block rewritten and made durable
# 3,000 times with each sync method, direct and buffered, in DIR (emptied
# before and after), written to PREFIX.json and PREFIX.txt.
durable_write_floor() {
  rm -rf "$2"
  "$1" bench fsync --dir "$2" --preparations rewrite --methods rwf_dsync,fdatasync \
    --buffered --iterations 3000 --rounds 1 --json "$3.json" > "$3.txt"
  rm -rf "$2"
}
# busy_loops_start [CPU ...]: one shell busy loop at nice 19 pinned to each
# CPU given (default: every CPU). It yields to any runnable thread at nice 0
# but keeps its CPU from going idle, so from halting
# (bench/results/oltp-20261203-halt/). busy_loops_stop ends them all.
BUSY_PIDS=()
busy_loops_start() {
  local cpus=("$@") c
  [ ${#cpus[@]} -gt 0 ] || mapfile -t cpus < <(seq 0 $(($(nproc) - 1)))
  for c in "${cpus[@]}"; do
    taskset -c "$c" nice -n 19 bash -c 'while :; do :; done' &
    BUSY_PIDS+=($!)
  done
  sleep 0.5
}
busy_loops_stop() {
  if [ ${#BUSY_PIDS[@]} -gt 0 ]; then
    kill "${BUSY_PIDS[@]}" 2> /dev/null || true
    wait "${BUSY_PIDS[@]}" 2> /dev/null || true
  fi
  BUSY_PIDS=()
}
