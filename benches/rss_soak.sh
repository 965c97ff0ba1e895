#!/usr/bin/env bash
# Whether the dashboard's memory stays bounded over a long run: the release
# build in a 200x60 tmux pane on the simulated node (8 GPUs x 64 processes,
# numbers changing every tick), its private anonymous memory (RssAnon in
# /proc/PID/status: heap, stacks, what the program itself owns) read every
# SAMPLE seconds for SECONDS, with the resident size (VmRSS) and the pages
# of mapped files (RssFile) beside it. RssAnon is the figure judged: the
# pages of the program's code and its libraries are the kernel's to share
# and drop, and count against no one. The kernel keeps no high-water mark
# of RssAnon, so the peak printed is the largest sampled: sample often
# (1 s) for a peak, seldom for a long run's shape. The history keeps
# bounded rings whatever the interval, so after the first window fills
# (ten minutes by default) the figure must stop rising: the summary
# compares the last sample with the one at a third of the run.
# GPUSCOPE_BENCH_ARGS sets the interval (say "--interval 10ms": 100 ticks a
# second, an hour of which is 4x the ticks of a day at 1 s); node.sh's
# GPUSCOPE_BENCH_PROCS / _PROBED size the node. After `--`, another monitor
# runs in gpuscope's place on a node of its own, as in tui_cpu.sh: two
# copies of this script started together compare the two over the same
# minutes (say, 11 minutes at 8 x 512 against nvtop).
# GPUSCOPE_BENCH_SPEEDUP=N (at most 100; needs a C compiler) runs
# gpuscope's wall clock N times as fast as the real one (fast_clock.c),
# and its interval at 1 s / N: every snapshot is a second after the one
# before on that clock, and what keeps time by it (the history, the rules,
# the charts) lives through N seconds each second, so that
# `GPUSCOPE_BENCH_SPEEDUP=100 rss_soak.sh 86400 1800` is a day at 1 s in
# 14.4 minutes. SECONDS and SAMPLE are then on that clock. What stays
# real: the monotonic clock and the waits on it, the kernel's pages, the
# allocator, the node's processes (GPUSCOPE_BENCH_CHURN's turnover is per
# real second), and the times gpuscope keeps on the monotonic clock (when
# to look at a process again).
# Run: bash benches/rss_soak.sh [SECONDS] [SAMPLE] [-- PEER COMMAND...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3600}
every=${2:-60}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
source benches/node.sh
speedup=${GPUSCOPE_BENCH_SPEEDUP:-1}
[[ "$speedup" =~ ^[0-9]+$ ]] && [ "$((10#$speedup))" -ge 1 ] && [ "$((10#$speedup))" -le 100 ] ||
  { echo "$0: GPUSCOPE_BENCH_SPEEDUP must be a whole number from 1 to 100 (the interval's floor is 10 ms), not \"$speedup\"" >&2; exit 1; }
speedup=$((10#$speedup))
if [ "$speedup" -ne 1 ]; then
  [ $# -eq 0 ] || { echo "$0: GPUSCOPE_BENCH_SPEEDUP speeds up gpuscope only" >&2; exit 1; }
  needs cc
fi
busy_node_up
trap node_down EXIT
if [ "$speedup" -ne 1 ]; then
  cc -O2 -shared -fPIC -o "$work/fast_clock.so" benches/fast_clock.c -ldl
  bin="env LD_PRELOAD=$work/fast_clock.so GPUSCOPE_FAST_CLOCK=$speedup $bin"
  GPUSCOPE_BENCH_ARGS="--interval $((1000 / speedup))ms ${GPUSCOPE_BENCH_ARGS:-}"
fi
dashboard_up "$@"
clock=
[ "$speedup" -eq 1 ] || clock=" on a clock ${speedup} times as fast (a tick a second on it)"
echo "${1:-gpuscope ${GPUSCOPE_BENCH_ARGS:-(1 s interval)}} for ${seconds}s, RssAnon every ${every}s$clock"
samples=()
most=0
start=$(date +%s%N)
while :; do
  [ -d "/proc/$pid" ] || { echo "rss_soak.sh: ${1:-gpuscope} exited" >&2; exit 1; }
  t=$((($(date +%s%N) - start) * speedup / 1000000000))
  # One read of status a sample, so that the figures are of one moment.
  line=$(awk -v t="$t" -v m="$most" '{ v[$1] = $2 } END { a = v["RssAnon:"]; p = m; if (a > p) p = a
    printf "%d %d %6ds  RssAnon %6.1f MiB (%d KiB; VmRSS %d, mapped files %d)  peak RssAnon %6.1f MiB (%d KiB)\n",
      a, p, t, a / 1024, a, v["VmRSS:"], v["RssFile:"], p / 1024, p }' "/proc/$pid/status")
  samples+=("${line%% *}")
  line=${line#* }
  most=${line%% *}
  echo "${line#* }"
  [ "$t" -ge "$seconds" ] && break
  sleep "$(awk -v e="$every" -v n="$speedup" 'BEGIN { print e / n }')"
done
n=${#samples[@]}
third=${samples[$((n / 3))]}
last=${samples[$((n - 1))]}
# $most holds the largest RssAnon read.
awk -v a="$third" -v b="$last" -v p="$most" 'BEGIN {
  printf "RssAnon at a third of the run %.1f MiB, at the end %.1f MiB (change %+d KiB); peak %.1f MiB\n", a / 1024, b / 1024, b - a, p / 1024 }'
