#!/usr/bin/env bash
# The system calls of the dashboard left alone, per tick: the release build
# in a 200x60 tmux pane on the simulated node (node.sh; say
# GPUSCOPE_BENCH_PROCS=512 GPUSCOPE_BENCH_PROBED=128 for the scale target),
# counted by `strace -c -f` attached for SECONDS once the first 10 s are
# past, at the default 1 s interval. Unlike CPU time on a shared virtual
# machine, the count is the same from run to run, so two builds compare
# within a run each (GPUSCOPE_BENCH_BIN=path for the other build).
# After `--`, a peer in gpuscope's place, as in tui_cpu.sh.
# Run: bash benches/syscalls.sh [SECONDS] [-- PEER COMMAND...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
[ "${1:-}" = "--" ] && shift
source benches/node.sh
needs strace
node_up
trap node_down EXIT
dashboard_up "$@"
sleep 10
out="$work/strace.txt"
# strace -c reports on detach; timeout's signal is that detach.
timeout -s INT "$seconds" strace -c -f -p "$pid" -o "$out" || true
for _ in $(seq 50); do [ -s "$out" ] && break; sleep 0.1; done
echo "${1:-gpuscope} over ${seconds}s of 1 s ticks, system calls per tick:"
# strace -c columns: % time, seconds, usecs/call, calls, [errors], syscall.
awk -v t="$seconds" '/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ { if ($4 / t >= 1 || $NF == "total") printf "  %-16s %.0f\n", $NF, $4 / t }' "$out"
