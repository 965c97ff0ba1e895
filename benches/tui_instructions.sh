#!/usr/bin/env bash
# The dashboard's own instructions over SECONDS (default 30) of steady
# state, counted by callgrind on the simulated node (benches/node.sh; its
# GPUSCOPE_BENCH_PROCS / _PROBED size it): start-up and the first ticks
# are dumped apart after 15 s, then what follows is counted until the
# dashboard quits. Unlike CPU time on a shared VM, the count comes out
# nearly the same run after run, so two builds (GPUSCOPE_BENCH_BIN) can be
# told apart by a few per cent. It counts user space only (gpuscope and the
# simulated driver, under valgrind's clock): the kernel's side of the
# system calls is benches/syscalls.sh's to count.
# Needs valgrind (callgrind_control) and tmux. Run: bash benches/tui_instructions.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
source benches/node.sh
needs valgrind callgrind_control tmux
busy_node_up
trap node_down EXIT
grind_up --tool=callgrind --dump-instr=no --callgrind-out-file="$work/callgrind.out"
sleep 15
callgrind_control --dump >/dev/null 2>&1
sleep "$seconds"
grind_quit
# The dump at exit holds what ran after the one at 15 s.
total=$(awk '/^(summary|totals):/ { print $2; exit }' "$work/callgrind.out")
echo "$measured over ${seconds}s after start-up: $total instructions ($(awk -v t="$total" -v s="$seconds" 'BEGIN { printf "%.1f", t / s / 1e6 }') million a second)"
