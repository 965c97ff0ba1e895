#!/usr/bin/env bash
# Wall time of a whole `gpuscope --json` process on the simulated NVML with
# 8 GPUs and 64 real processes. Uses hyperfine (Debian package) when present.
# Run: bash benches/json_wall.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/gpuscope
sim=$(ls -t target/release/build/gpuscope-*/out/libgpuscope_nvml_sim.so | head -n 1)
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 64); do sleep 600 & pids+=($!); done
cp "$sim" "$work/libnvidia-ml.so.1"
for g in $(seq 0 7); do
  printf '[[gpu]]\nname = "NVIDIA H100 80GB HBM3"\nutilization_gpu = 90\n'
  for ((i = g; i < 64; i += 8)); do printf '[[gpu.process]]\npid = %s\nused_mib = 8000\n' "${pids[$i]}"; done
done > "$work/scenario.toml"
export GPUSCOPE_SIM_SCENARIO="$work/scenario.toml" XDG_CONFIG_HOME="$work"
cmd="$bin --nvml-lib $work/libnvidia-ml.so.1 --json"
$cmd | python3 -c 'import json,sys; s=json.load(sys.stdin); assert len(s["gpus"])==8 and len(s["processes"])==64, "scenario not loaded"'
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
