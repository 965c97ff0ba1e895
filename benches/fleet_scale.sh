#!/bin/sh
# CPU seconds per minute and peak RSS of `gpuscope fleet --json --watch`
# over N simulated nodes: one Python process (benches/nodes.py) answers
# /snapshot on N loopback ports with one recorded demo snapshot.
# Usage: benches/fleet_scale.sh BINARY SECONDS N...
set -eu
bin=$(realpath "$1"); secs=$2; shift 2
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'kill $(cat "$dir"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$dir"' EXIT
"$bin" --demo --json > "$dir/snapshot.json"
hz=$(getconf CLK_TCK)
echo "nodes cpu_s_per_min peak_rss_mib snapshot_bytes=$(wc -c < "$dir/snapshot.json")"
for n in "$@"; do
  python3 benches/nodes.py "$dir/snapshot.json" "$n" application/json > "$dir/hosts.$n" & echo $! > "$dir/py.$n.pid"
  while [ ! -s "$dir/hosts.$n" ]; do sleep 0.1; done
  "$bin" fleet "$(cat "$dir/hosts.$n")" --json --watch --interval 1s --timeout 5s > /dev/null & pid=$!
  echo $pid > "$dir/fleet.$n.pid"
  sleep "$secs"
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill $pid; kill "$(cat "$dir/py.$n.pid")"; rm -f "$dir/fleet.$n.pid" "$dir/py.$n.pid"
  awk -v t="$ticks" -v hz="$hz" -v s="$secs" -v m="$hwm" -v n="$n" \
    'BEGIN { printf "%5d %15.2f %12.1f\n", n, t / hz * 60 / s, m / 1024 }'
done
