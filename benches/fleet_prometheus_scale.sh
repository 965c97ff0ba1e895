#!/bin/sh
# CPU seconds per minute and peak RSS of `gpuscope fleet --prometheus URL
# --json --watch` over N nodes held by a real Prometheus (Debian's
# `prometheus`, scraping every second), beside the direct mode over the same
# N in the same run (benches/fleet_scale.sh). One Python process (benches/nodes.py) answers
# /metrics on N loopback ports with one recorded `gpuscope --demo serve`
# body, so Prometheus holds N instances of an 8-GPU node.
# Usage: benches/fleet_prometheus_scale.sh BINARY SECONDS N...
set -eu
bin=$(realpath "$1"); secs=$2; shift 2
cd "$(dirname "$0")/.."
command -v prometheus >/dev/null || { echo "needs prometheus (apt-get install prometheus)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'kill $(cat "$dir"/*.pid 2>/dev/null) 2>/dev/null; sleep 0.5; rm -rf "$dir"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One node's /metrics, as its exporter serves it.
port=$(free_port)
"$bin" --demo serve --listen "127.0.0.1:$port" >/dev/null 2>&1 & echo $! > "$dir/serve.pid"
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/metrics" > "$dir/metrics.txt" 2>/dev/null && break; sleep 0.1; done
kill "$(cat "$dir/serve.pid")"; rm -f "$dir/serve.pid"

hz=$(getconf CLK_TCK)
measure() { # PID -> "cpu_s_per_min peak_rss_mib"
  sleep "$secs"
  ticks=$(awk '{print $14 + $15}' "/proc/$1/stat")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$1/status")
  kill "$1"
  awk -v t="$ticks" -v hz="$hz" -v s="$secs" -v m="$hwm" 'BEGIN { printf "%8.2f %9.1f", t / hz * 60 / s, m / 1024 }'
}
echo "nodes  prometheus: cpu_s/min rss_mib   direct: cpu_s/min rss_mib   (metrics body $(wc -c < "$dir/metrics.txt") bytes)"
for n in "$@"; do
  python3 benches/nodes.py "$dir/metrics.txt" "$n" "text/plain; version=0.0.4" --quoted > "$dir/targets.$n" & echo $! > "$dir/py.pid"
  while [ ! -s "$dir/targets.$n" ]; do sleep 0.1; done
  pport=$(free_port)
  printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpuscope\n    static_configs:\n      - targets: [%s]\n' \
    "$(cat "$dir/targets.$n")" > "$dir/prom.yml"
  prometheus --config.file="$dir/prom.yml" --storage.tsdb.path="$dir/tsdb.$n" \
    --web.listen-address="127.0.0.1:$pport" >/dev/null 2>&1 & echo $! > "$dir/prom.pid"
  sleep 8 # the first scrapes of every target
  "$bin" fleet --prometheus "http://127.0.0.1:$pport" --json --watch --interval 1s --timeout 5s >/dev/null & fpid=$!
  via_prom=$(measure $fpid)
  kill "$(cat "$dir/prom.pid")"; rm -f "$dir/prom.pid"
  kill "$(cat "$dir/py.pid")"; rm -f "$dir/py.pid"
  direct=$(sh benches/fleet_scale.sh "$bin" "$secs" "$n" | tail -n 1 | awk '{printf "%8.2f %9.1f", $2, $3}')
  printf '%5d  %s          %s\n' "$n" "$via_prom" "$direct"
done
