# Sourced by .ci/run: times each `phase "name"` section and the whole run, counts the bytes the
# machine's disks wrote meanwhile, and records the lowest free disk space. Printed at each
# phase's end and as a table when the shell exits (pass or fail).
#
# Bytes written: field 7 of /sys/block/<disk>/stat is the sectors written since boot, in units
# of 512 bytes whatever the disk's sector size (Linux's Documentation/block/stat.rst). It counts
# every process, the daemonised wineserver included, which `time -v` does not. Only real disks
# are summed (those with a device/ link), so a partition or a device-mapper volume is not
# counted twice. Elsewhere (no /sys) the bytes read as 0.

_phase_sectors() {
  local total=0 disk fields
  for disk in /sys/block/*; do
    [[ -e $disk/device && -r $disk/stat ]] || continue
    read -r -a fields <"$disk/stat"
    total=$((total + ${fields[6]:-0}))
  done
  echo "$total"
}

_phase_free_kb() { df -Pk "${1:-.}" 2>/dev/null | awk 'NR == 2 { print $4 }'; }

_phase_names=()
_phase_seconds=()
_phase_bytes=()
_phase_name=""
_phase_run_start=$SECONDS
_phase_run_sectors=$(_phase_sectors)

# The lowest free space of the scratch folder's file system, sampled every 5 s in the background.
_phase_free_log=$(mktemp)
(
  while :; do
    _phase_free_kb "${TMPDIR:-/tmp}" >>"$_phase_free_log"
    sleep 5
  done
) </dev/null >/dev/null 2>&1 &
_phase_sampler=$!
_phase_free_start=$(_phase_free_kb "${TMPDIR:-/tmp}")

_phase_close() {
  [[ -n $_phase_name ]] || return 0
  local seconds=$((SECONDS - _phase_start))
  local bytes=$((($(_phase_sectors) - _phase_start_sectors) * 512))
  _phase_names+=("$_phase_name")
  _phase_seconds+=("$seconds")
  _phase_bytes+=("$bytes")
  printf -- '-- phase time: %s: %d:%02d, %s written\n' "$_phase_name" $((seconds / 60)) \
    $((seconds % 60)) "$(_phase_size "$bytes")"
  _phase_name=""
}

_phase_size() { awk -v b="$1" 'BEGIN { printf "%.2f GB", b / 1e9 }'; }

# Starts a section: closes the one before and prints its `== name` header.
phase() {
  _phase_close
  _phase_name=$1
  _phase_start=$SECONDS
  _phase_start_sectors=$(_phase_sectors)
  echo "== $1"
}

_phase_report() {
  local status=$?
  _phase_close
  kill "$_phase_sampler" 2>/dev/null
  local lowest
  lowest=$(sort -n "$_phase_free_log" | head -n 1)
  rm -f "$_phase_free_log"
  local total=$((SECONDS - _phase_run_start))
  local bytes=$((($(_phase_sectors) - _phase_run_sectors) * 512))
  echo "== phase times (exit status $status)"
  local i
  for i in "${!_phase_names[@]}"; do
    printf '%8d s  %10s  %s\n' "${_phase_seconds[$i]}" "$(_phase_size "${_phase_bytes[$i]}")" \
      "${_phase_names[$i]}"
  done
  printf '%8d s  %10s  %s\n' "$total" "$(_phase_size "$bytes")" "total"
  if [[ -n $lowest && -n $_phase_free_start ]]; then
    echo "free disk at ${TMPDIR:-/tmp}: $((_phase_free_start / 1048576)) GB at the start," \
      "lowest $((lowest / 1048576)) GB (a drop of $(((_phase_free_start - lowest) / 1048576)) GB)"
  fi
  return "$status"
}
trap _phase_report EXIT
