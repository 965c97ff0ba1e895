#!/usr/bin/env bash
# What the dashboard costs left alone: the release build in a 200x60 tmux
# pane on the simulated NVML with 8 GPUs and 64 real processes (8 per GPU),
# default 1 s interval, for 60 s. Prints its CPU time over those seconds
# (utime + stime from /proc/PID/stat), its peak RSS (VmHWM), and the bytes it
# wrote to the terminal (what an SSH link carries), counted by tmux's
# pipe-pane. Targets: at most 0.1 s of CPU and 10 MiB.
# After `--`, another monitor runs in gpuscope's place, loading the same
# simulated driver as libnvidia-ml.so.1, so peers (gpustat, nvitop) can be
# measured on the same machine (see README, Benchmarks, on virtual
# machines).
# GPUSCOPE_BENCH_ARGS adds flags to gpuscope's command line (say
# "--interval 10ms"); node.sh's GPUSCOPE_BENCH_PROCS / _PROBED size the node;
# GPUSCOPE_BENCH_WARMUP (seconds, default 5) is how long it runs before.
# Run: bash benches/tui_cpu.sh [SECONDS] [-- PEER COMMAND...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
[ "${1:-}" = "--" ] && shift
peer=
[ $# -gt 0 ] && peer=$(printf '%q ' "$@")
source benches/node.sh
busy_node_up
trap node_down EXIT
dashboard_up "$@"
# Start-up and the first snapshots; GPUSCOPE_BENCH_WARMUP=70 measures once
# the rules' one-minute windows are full (the fragmentation rule reads its
# window each tick), rather than the first minute.
sleep "${GPUSCOPE_BENCH_WARMUP:-5}"
tmux -S "$sock" pipe-pane -o "cat > $work/tty.bytes"
# Nanoseconds on a CPU, summed over the threads (schedstat): /proc/PID/stat
# counts in clock ticks of 10 ms, too coarse for a tenth of a second a minute.
# A thread that ends in between is lost; the dashboard's threads live as long
# as it does.
on_cpu() { cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{ ns += $1 } END { printf "%d", ns }'; }
t0=$(on_cpu)
sleep "$seconds"
t1=$(on_cpu)
bytes=$(stat -c %s "$work/tty.bytes")
echo "${peer:-gpuscope }over ${seconds}s: CPU $(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e9 }') s," \
  "peak RSS $(awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$pid/status"), ${bytes} bytes to the terminal"
