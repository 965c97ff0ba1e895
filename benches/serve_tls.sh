#!/usr/bin/env bash
# A scrape's latency over TLS against plain HTTP, in one run: two
# `gpuscope --demo serve` (both with a token, one with TLS), 200 sequential
# scrapes of /metrics each on one keep-alive connection and on fresh
# connections (a curl each), median and p95 of curl's time_total.
# Usage: benches/serve_tls.sh [path/to/gpuscope] (default target/debug/gpuscope)
set -euo pipefail
bin=${1:-target/debug/gpuscope}
n=200
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
chmod 600 "$dir/key.pem"
head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >"$dir/token"
chmod 600 "$dir/token"
start() { # PORT ARGS...: serve on 127.0.0.1:PORT until the script ends
  local port=$1; shift
  "$bin" --demo serve --listen "127.0.0.1:$port" --token-file "$dir/token" "$@" 2>"$dir/log.$port" &
  pids+=($!)
}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
plain=$(port); start "$plain"
tls=$(port); start "$tls" --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem"
auth=(-H "Authorization: Bearer $(cat "$dir/token")" --cacert "$dir/cert.pem")
for url in "http://127.0.0.1:$plain/healthz" "https://localhost:$tls/healthz"; do
  for _ in $(seq 100); do curl -sf "${auth[@]}" -o /dev/null "$url" && break; sleep 0.1; done
done
stats() { sort -n | awk '{a[NR]=$1} END {printf "median %.2f ms  p95 %.2f ms  (n=%d)\n", a[int((NR+1)/2)]*1000, a[int(NR*0.95+0.5)]*1000, NR}'; }
for kind in plain tls; do
  if [ $kind = plain ]; then url="http://127.0.0.1:$plain/metrics"; else url="https://localhost:$tls/metrics"; fi
  args=(); for _ in $(seq $n); do args+=("$url" -o /dev/null); done
  printf '%-5s keep-alive: ' $kind
  curl -s "${auth[@]}" -w '%{time_total}\n' "${args[@]}" | stats
  printf '%-5s fresh:      ' $kind
  for _ in $(seq $n); do curl -s "${auth[@]}" -o /dev/null -w '%{time_total}\n' "$url"; done | stats
done
printf 'body: %s bytes\n' "$(curl -s "${auth[@]}" "$url" | wc -c)"
