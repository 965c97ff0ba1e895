#!/usr/bin/env bash
# What `gpuscope serve` costs beside another exporter on the same node, in
# the same run: all-smi's Prometheus exporter (`all-smi api`). On the
# simulated NVML with 8 GPUs and 64 real processes (benches/node.sh), the
# two run in turn, gpuscope then all-smi, PAIRS times (default 2), each for
# SECONDS (default 60) while scraped once a second over 127.0.0.1. Each gets
# the same work: a 1 s collection interval (gpuscope's default; all-smi
# `--interval 1`) and the per-process series (gpuscope's default; all-smi
# `--processes`). Prints for each run its CPU over the window (nanoseconds
# on a CPU summed over its threads from /proc/PID/task/*/schedstat, plus the
# children it waited for, such as the commands all-smi starts), its peak RSS
# (VmHWM), the bytes of one /metrics body and the GPUs and PIDs found in
# it (all-smi's process series cover every process on the host, those
# without GPU memory at 0), then gpuscope/all-smi per pair.
# Target: gpuscope at most 0.5x all-smi's CPU, and at most 8 MiB.
#
# all-smi comes from ALLSMI (default: `all-smi` on PATH, else
# /opt/all-smi/bin/all-smi). 0.22.0 builds with Rust 1.95 (later releases
# want a newer one) given protoc and libdrm (Debian: protobuf-compiler,
# libdrm-dev): cargo install --locked all-smi@0.22.0 --root /opt/all-smi
# It loads the simulated driver as libnvidia-ml.so.1 through
# LD_LIBRARY_PATH, but looks for NVIDIA GPUs first with `lspci` and then
# `nvidia-smi -L`: a stand-in `nvidia-smi` in the node's temporary folder,
# on all-smi's PATH only, lists the 8 simulated GPUs for `-L` and fails
# otherwise (all-smi falls back to it only if NVML fails); its calls are
# counted and printed. all-smi's HOME and XDG folders are the node's
# temporary folder too (it keeps an energy log under ~/.cache).
# all-smi listens on 0.0.0.0 and cannot be told otherwise, so the whole
# run happens in a new network namespace (`unshare --net`, or with
# `--map-root-user` when not root) whose only interface is loopback.
# SERVE_PEER_HOST_NET=1 runs in the host's namespace instead, all-smi's
# port then open on every interface for the run.
# GPUSCOPE_BENCH_BIN measures another build of gpuscope; see node.sh for
# GPUSCOPE_BENCH_PROCS / _PROBED.
# Run: bash benches/serve_peer.sh [SECONDS] [PAIRS]
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$self")/.."
seconds=${1:-60}
pairs=${2:-2}
allsmi=${ALLSMI:-$(command -v all-smi || echo /opt/all-smi/bin/all-smi)}
[ -x "$allsmi" ] || { echo "serve_peer.sh: no all-smi at $allsmi (set ALLSMI)" >&2; exit 1; }

if [ -z "${SERVE_PEER_HOST_NET:-}" ] && [ -z "${SERVE_PEER_IN_NETNS:-}" ]; then
  if [ "$(id -u)" = 0 ]; then netns=(unshare --net); else netns=(unshare --map-root-user --net); fi
  if ! "${netns[@]}" true 2>/dev/null; then
    echo "serve_peer.sh: cannot make a network namespace (${netns[*]});" \
      "SERVE_PEER_HOST_NET=1 runs without one, all-smi then listening on 0.0.0.0" >&2
    exit 1
  fi
  ALLSMI=$allsmi SERVE_PEER_IN_NETNS=1 exec "${netns[@]}" bash "$self" "$seconds" "$pairs"
fi
if [ -n "${SERVE_PEER_IN_NETNS:-}" ]; then
  # A new namespace's loopback starts down: bring it up (SIOCGIFFLAGS,
  # SIOCSIFFLAGS with IFF_UP), without needing iproute2.
  python3 - <<'PY'
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
PY
fi

source benches/node.sh
node_up
server=
stop_server() {
  [ -n "$server" ] || return 0
  kill -TERM "$server" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
}
trap 'stop_server; node_down' EXIT

# The stand-in nvidia-smi: `-L` names the scenario's GPUs, anything else fails.
mkdir -p "$work/bin" "$work/home"
gpus=$(grep -c '^\[\[gpu\]\]' "$work/scenario.toml")
cat > "$work/bin/nvidia-smi" <<SMI
#!/bin/sh
echo "\$*" >> "$work/nvidia-smi.calls"
[ "\${1:-}" = -L ] || { echo "stand-in nvidia-smi: only -L" >&2; exit 1; }
for i in \$(seq 0 $((gpus - 1))); do
  echo "GPU \$i: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000\$i)"
done
SMI
chmod +x "$work/bin/nvidia-smi"

# One run: start the exporter, wait until its /metrics shows every GPU,
# then scrape it once a second for $seconds and append one result line.
measure() {
  local name=$1 port addr=log
  case $name in
    gpuscope)
      "$bin" --nvml-lib "$work/libnvidia-ml.so.1" serve --listen 127.0.0.1:0 > "$work/$name.log" 2>&1 &
      server=$!
      ;;
    all-smi)
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      env PATH="$work/bin:$PATH" LD_LIBRARY_PATH="$work" HOME="$work/home" XDG_CACHE_HOME="$work/home" \
        XDG_DATA_HOME="$work/home" XDG_STATE_HOME="$work/home" \
        "$allsmi" api --port "$port" --interval 1 --processes > "$work/$name.log" 2>&1 &
      server=$!
      addr=127.0.0.1:$port
      ;;
  esac
  python3 - "$name" "$server" "$work/$name.log" "$addr" "$seconds" "$gpus" "$work/results" <<'PY'
import http.client, os, re, statistics, sys, time

name, pid, log, where, seconds, gpus, results = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], *map(int, sys.argv[5:7]), sys.argv[7]
tick = os.sysconf("SC_CLK_TCK")
last = {}  # thread id -> its last on-CPU nanoseconds, so a thread that ends is not lost whole

def threads():
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                last[tid] = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return sum(last.values())

def children():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / tick

def status(key):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith(key + ":")).split()[1])

def scrape(addr):
    t = time.perf_counter()
    c = http.client.HTTPConnection(*addr, timeout=10)
    try:
        c.request("GET", "/metrics", headers={"Connection": "close"})
        r = c.getresponse()
        body = r.read()
    finally:
        c.close()
    return r.status, body, time.perf_counter() - t

# GPUs: gpuscope's `gpu` label, all-smi's `gpu_index`. PIDs: those with GPU
# memory in use (all-smi's --processes lists every process on the host).
def seen(body):
    text = body.decode()
    gpus = set(re.findall(r'[{,]\s*(?:gpu|gpu_index)="(\d+)"', text))
    using = re.findall(r'(?m)^\w*process_(?:gpu_memory|memory_used)_bytes\{[^}]*\bpid="(\d+)"[^}]*\}\s+(\S+)', text)
    return len(gpus), len({pid for pid, value in using if float(value) > 0}), len(set(re.findall(r'[{,]\s*pid="(\d+)"', text)))

deadline = time.time() + 60
# gpuscope says where it listens on stderr (port 0: the kernel picks one).
addr = None if where == "log" else (where.split(":")[0], int(where.split(":")[1]))
while True:
    assert os.path.exists(f"/proc/{pid}/stat") and time.time() < deadline, f"{name} did not start: " + open(log).read()[-2000:]
    if addr is None:
        if m := re.search(r"http://([\d.]+):(\d+)/", open(log).read()):
            addr = (m[1], int(m[2]))
    if addr is not None:
        try:
            code, body, _ = scrape(addr)
            if code == 200 and seen(body)[0] == gpus:
                break
        except (OSError, http.client.HTTPException):
            pass
    time.sleep(0.2)

start_ns, start_children, start = threads(), children(), time.perf_counter()
latencies, sizes, found = [], [], (0, 0, 0)
for i in range(seconds):
    time.sleep(max(0.0, start + i - time.perf_counter()))
    code, body, took = scrape(addr)
    assert code == 200, (code, body[:200])
    latencies.append(took)
    sizes.append(len(body))
    found = seen(body)
    threads()
time.sleep(max(0.0, start + seconds - time.perf_counter()))
cpu = (threads() - start_ns) / 1e9 + children() - start_children
child = children() - start_children
with open(results, "a") as f:
    print(name, f"{cpu:.3f}", f"{child:.2f}", status("VmHWM"), status("VmRSS"), sizes[-1], *found,
          f"{statistics.median(latencies) * 1000:.2f}", f"{max(latencies) * 1000:.2f}", status("Threads"), file=f)
PY
  stop_server
}

: > "$work/results"
for _ in $(seq "$pairs"); do
  measure gpuscope
  measure all-smi
done

allsmi_version=$("$allsmi" --version 2>/dev/null | head -n 1 || true)
python3 - "$work/results" "$seconds" "${GPUSCOPE_BENCH_PROCS:-64}" "$allsmi_version" "$work/nvidia-smi.calls" <<'PY'
import os, sys

results, seconds, procs, version, calls = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = [line.split() for line in open(results)]
n_calls = sum(1 for _ in open(calls)) if os.path.exists(calls) else 0
print(f"gpuscope serve against {version or 'all-smi'} api, 8 GPUs x {procs} processes, "
      f"{seconds} s each, scraped once a second over 127.0.0.1, in turn:")
for name, cpu, child, hwm, rss, size, gpus, using, pids, median, worst, threads in runs:
    print(f"  {name:8} CPU {float(cpu):.3f} s (children {child} s), peak RSS {int(hwm) / 1024:.1f} MiB"
          f" (RSS at end {int(rss) / 1024:.1f} MiB), /metrics {size} bytes, {gpus} GPUs, {using} PIDs using them ({pids} PIDs in all),"
          f" scrape median {median} ms worst {worst} ms, {threads} threads")
print(f"  the stand-in nvidia-smi was run {n_calls} times")
met = True
for i in range(0, len(runs) - 1, 2):
    a, b = runs[i], runs[i + 1]
    cpu, rss = float(a[1]) / float(b[1]), int(a[3]) / int(b[3])
    ok = cpu <= 0.5 and int(a[3]) <= 8 * 1024
    met &= ok
    print(f"  pair {i // 2 + 1}: gpuscope/all-smi CPU {cpu:.2f}x, peak RSS {rss:.2f}x, /metrics bytes "
          f"{int(a[5]) / int(b[5]):.2f}x: {'within' if ok else 'outside'} the target")
print(f"target (CPU <= 0.5x all-smi's, peak RSS <= 8 MiB): {'met' if met else 'missed'}")
PY
