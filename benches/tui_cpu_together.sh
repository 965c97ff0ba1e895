#!/usr/bin/env bash
# What tui_cpu.sh measures, for several dashboards running at the same
# time on one simulated node, each in a 200x60 tmux pane of its own:
# gpuscope's release build (or GPUSCOPE_BENCH_BIN), the build named by
# GPUSCOPE_BENCH_OTHER if set, and the peer command after `--` if given
# (say, nvtop). Each round starts them afresh, in an order that alternates
# between rounds, waits GPUSCOPE_BENCH_WARMUP seconds (default 8), and
# prints each one's CPU time over SECONDS (schedstat, summed over its
# threads) and its peak RSS.
#
# Why: on a shared VM the CPU time of one dashboard for a minute varied by
# a factor of two from one run to the next (nvtop 0.19-0.48 s within ten
# minutes on 2026-11-30), as what else runs on the host evicts their caches
# between ticks. Runs in turn meet different weather; runs side by side
# meet the same, so each round's ratio says more than any run alone. Each
# dashboard takes about half a per cent of a CPU, so on two CPUs they
# rarely wait for one another.
# Run: bash benches/tui_cpu_together.sh [SECONDS] [ROUNDS] [-- PEER COMMAND...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
rounds=3
[ $# -gt 0 ] && [ "$1" != "--" ] && { seconds=$1; shift; }
[ $# -gt 0 ] && [ "$1" != "--" ] && { rounds=$1; shift; }
[ "${1:-}" = "--" ] && shift
source benches/node.sh
needs tmux
busy_node_up
names=(gpuscope)
declare -A cmd=([gpuscope]="$bin --nvml-lib $work/libnvidia-ml.so.1 ${GPUSCOPE_BENCH_ARGS:-}")
if [ -n "${GPUSCOPE_BENCH_OTHER:-}" ]; then
  names+=(other)
  cmd[other]="$GPUSCOPE_BENCH_OTHER --nvml-lib $work/libnvidia-ml.so.1 ${GPUSCOPE_BENCH_ARGS:-}"
fi
if [ $# -gt 0 ]; then
  names+=(peer)
  cmd[peer]="$(peer_command "$@")"
fi
trap node_down EXIT
on_cpu() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ ns += $1 } END { printf "%d", ns }'; }
for r in $(seq "$rounds"); do
  order=("${names[@]}")
  if [ $((r % 2)) = 0 ]; then
    order=()
    for ((i = ${#names[@]} - 1; i >= 0; i--)); do order+=("${names[$i]}"); done
  fi
  declare -A pid_of=() t0=()
  for name in "${order[@]}"; do
    pane_up "$name" "${cmd[$name]}"
    pid_of[$name]=$pid
    sleep 0.3
  done
  sleep "${GPUSCOPE_BENCH_WARMUP:-8}"
  for name in "${names[@]}"; do
    t0[$name]=$(on_cpu "${pid_of[$name]}")
  done
  sleep "$seconds"
  line="round $r over ${seconds}s:"
  for name in "${names[@]}"; do
    t1=$(on_cpu "${pid_of[$name]}")
    rss=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/${pid_of[$name]}/status")
    line+=" $name CPU $(awk -v d=$((t1 - t0[$name])) 'BEGIN { printf "%.3f", d / 1e9 }') s, peak RSS $rss MiB;"
  done
  echo "$line"
  panes_down
  sleep 1
done
