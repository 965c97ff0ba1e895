#!/usr/bin/env bash
# Wall time of a whole `gpuscope --json` process on the simulated NVML with
# 8 GPUs and 64 real processes. Uses hyperfine (Debian package) when present.
# Run: bash benches/json_wall.sh
# With what a real driver's calls cost (nvmlDeviceGetPcieThroughput blocks
# 20 ms): GPUSCOPE_SIM_REALISTIC_COSTS=1 bash benches/json_wall.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/node.sh
node_up
trap node_down EXIT
cmd="$bin --nvml-lib $work/libnvidia-ml.so.1 --json"
$cmd | python3 -c 'import json,sys; s=json.load(sys.stdin); assert len(s["gpus"])==8 and len(s["processes"])==64, "scenario not loaded"; print("NVML calls in the tick:", s["sources"]["nvml"].get("calls"))'
if command -v hyperfine >/dev/null; then
  hyperfine --warmup 5 --runs 50 -N "$cmd"
else
  python3 - "$cmd" <<'PY'
import statistics, subprocess, sys, time
cmd = sys.argv[1].split()
runs = []
for _ in range(50):
    t = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True); runs.append(time.perf_counter() - t)
print(f"gpuscope --json: median {statistics.median(runs)*1000:.1f} ms, min {min(runs)*1000:.1f} ms, max {max(runs)*1000:.1f} ms over {len(runs)} runs")
PY
fi
