#!/usr/bin/env bash
# Whole-process wall time of the nvidia-smi query mode,
# `gpuscope --query-gpu=index,memory.used --format=csv,noheader`, beside
# `gpuscope --json`, on the simulated node (8 GPUs, 64 real processes):
# median of 50 runs each, interleaved, timed with time.perf_counter
# around each subprocess. Run: bash benches/query_wall.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/node.sh
node_up
trap node_down EXIT
lib="$work/libnvidia-ml.so.1"
rows=$("$bin" --nvml-lib "$lib" --query-gpu=index,memory.used --format=csv,noheader | wc -l)
[ "$rows" -eq 8 ] || { echo "scenario not loaded: $rows rows" >&2; exit 1; }
python3 - "$bin" "$lib" <<'PY'
import statistics, subprocess, sys, time
bin, lib = sys.argv[1], sys.argv[2]
cmds = {
    "--query-gpu=index,memory.used --format=csv,noheader": [bin, "--nvml-lib", lib, "--query-gpu=index,memory.used", "--format=csv,noheader"],
    "--json": [bin, "--nvml-lib", lib, "--json"],
}
runs = {name: [] for name in cmds}
for _ in range(5):
    for cmd in cmds.values():
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
for _ in range(50):
    for name, cmd in cmds.items():
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        runs[name].append(time.perf_counter() - t)
for name, r in runs.items():
    ms = sorted(x * 1000 for x in r)
    print(f"gpuscope {name}: median {statistics.median(ms):.1f} ms, min {ms[0]:.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} runs")
PY
