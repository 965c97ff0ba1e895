#!/usr/bin/env bash
# Whether the dashboard's memory stays bounded over a long run: the release
# build in a 200x60 tmux pane on the simulated node (8 GPUs x 64 processes,
# numbers changing every tick), its resident memory (VmRSS) and peak
# (VmHWM) read every SAMPLE seconds for SECONDS. The history keeps bounded
# rings whatever the interval, so after the first window fills (ten
# minutes by default) the figure must stop rising: the summary compares the
# last sample with the one at a third of the run.
# GPUSCOPE_BENCH_ARGS sets the interval (say "--interval 10ms": 100 ticks a
# second, an hour of which is 4x the ticks of a day at 1 s).
# Run: bash benches/rss_soak.sh [SECONDS] [SAMPLE]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3600}
every=${2:-60}
source benches/node.sh
node_up '{ min = 60, max = 99, period_s = 11, shape = "sine" }' '{ min = 7000, max = 9000, period_s = 30, shape = "ramp" }'
trap node_down EXIT
dashboard_up
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
echo "gpuscope ${GPUSCOPE_BENCH_ARGS:-(1 s interval)} for ${seconds}s, RSS every ${every}s"
samples=()
start=$(date +%s)
while :; do
  [ -d "/proc/$pid" ] || { echo "rss_soak.sh: gpuscope exited" >&2; exit 1; }
  t=$(($(date +%s) - start))
  rss=$(kib VmRSS)
  samples+=("$rss")
  awk -v t="$t" -v r="$rss" -v p="$(kib VmHWM)" 'BEGIN { printf "%6ds  RSS %6.1f MiB  peak %6.1f MiB\n", t, r / 1024, p / 1024 }'
  [ "$t" -ge "$seconds" ] && break
  sleep "$every"
done
n=${#samples[@]}
third=${samples[$((n / 3))]}
last=${samples[$((n - 1))]}
awk -v a="$third" -v b="$last" -v p="$(kib VmHWM)" 'BEGIN {
  printf "RSS at a third of the run %.1f MiB, at the end %.1f MiB (change %+d KiB); peak %.1f MiB\n", a / 1024, b / 1024, b - a, p / 1024 }'
