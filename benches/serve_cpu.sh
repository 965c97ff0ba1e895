#!/usr/bin/env bash
# What `gpuscope serve` costs: on the simulated NVML with 8 GPUs and 64 real
# processes, the release build serves for 60 s (default 1 s interval) while
# it is scraped once a second. Prints its CPU time over those 60 s (utime +
# stime from /proc/PID/stat), its peak RSS (VmHWM) and the scrape latency,
# then the same without scrapes: collection's share of the CPU.
# Target: at most 0.13 s of CPU over the 60 s.
# Run: bash benches/serve_cpu.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
source benches/node.sh
node_up
trap node_down EXIT
# Twice: scraped once a second, then not scraped at all, so the difference
# shows what the scrapes cost apart from collection.
measure() {
  "$bin" --nvml-lib "$work/libnvidia-ml.so.1" serve --listen 127.0.0.1:0 2> "$work/serve.log" &
  local server=$!
  pids+=("$server")
  python3 - "$server" "$work/serve.log" "$seconds" "$1" <<'PY'
import os, re, socket, statistics, sys, time

pid, log, seconds, scraping = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "scraped"
tick = os.sysconf("SC_CLK_TCK")

def cpu_seconds():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def peak_rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmHWM:")).split()[1])

def scrape(addr):
    t = time.perf_counter()
    with socket.create_connection(addr) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        data = b"".join(iter(lambda: s.recv(65536), b""))
    took = time.perf_counter() - t
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    return took, len(data)

deadline = time.time() + 30
while not (m := re.search(r"http://([\d.]+):(\d+)/", open(log).read())):
    assert time.time() < deadline, "gpuscope serve did not start: " + open(log).read()
    time.sleep(0.05)
addr = (m[1], int(m[2]))
while True:
    try:
        scrape(addr)
        break
    except AssertionError:
        time.sleep(0.1)
start_cpu, start = cpu_seconds(), time.perf_counter()
latencies, size = [], 0
for i in range(seconds if scraping else 0):
    time.sleep(max(0.0, start + i - time.perf_counter()))
    took, size = scrape(addr)
    latencies.append(took)
time.sleep(max(0.0, start + seconds - time.perf_counter()))
used = cpu_seconds() - start_cpu
if scraping:
    print(f"gpuscope serve, 8 GPUs x 64 processes, {seconds} s, {len(latencies)} scrapes of {size} bytes:")
    print(f"  CPU: {used:.2f} s over the {seconds} s ({cpu_seconds():.2f} s since start, start-up included)")
    print(f"  peak RSS (VmHWM): {peak_rss_kib() / 1024:.1f} MiB")
    print(f"  scrape latency: median {statistics.median(latencies) * 1000:.2f} ms, worst {max(latencies) * 1000:.2f} ms")
else:
    print(f"  the same {seconds} s without scrapes (collection alone): CPU {used:.2f} s, peak RSS {peak_rss_kib() / 1024:.1f} MiB")
PY
  kill "$server"
  wait "$server" || true
}
measure scraped
measure idle
