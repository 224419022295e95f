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
