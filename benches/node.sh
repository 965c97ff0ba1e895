# Sourced by the whole-process benchmarks: a simulated node of 8 GPUs with
# 64 real `sleep` processes (8 per GPU) and the release build of gpuscope.
# GPUSCOPE_BENCH_PROCS (default 64) sets how many processes, spread over the
# GPUs; GPUSCOPE_BENCH_PROBED (default 0) gives that many of them a probe
# file in $work/probes, rewritten once a second as a live probe would
# (the PyTorch fields of a rank on one GPU), so the scale target of 8 x 512
# with 128 probed can be measured.
# `node_up [UTIL] [USED_MIB]` sets $bin, $work (holding libnvidia-ml.so.1
# and scenario.toml) and $pids, and exports the GPUSCOPE_* variables;
# UTIL and USED_MIB may be scenario values such as '{ min = 1, max = 9 }'.
# `node_down` removes it all.
node_up() {
  # GPUSCOPE_BENCH_BIN measures another build (say, the last release's).
  [ -n "${GPUSCOPE_BENCH_BIN:-}" ] || cargo build --release --quiet
  bin=${GPUSCOPE_BENCH_BIN:-$PWD/target/release/gpuscope}
  local sim
  sim=$(ls -t target/release/build/gpuscope-*/out/libgpuscope_nvml_sim.so | head -n 1)
  work=$(mktemp -d)
  pids=()
  local procs=${GPUSCOPE_BENCH_PROCS:-64} probed=${GPUSCOPE_BENCH_PROBED:-0}
  # A day: long enough for the 24-hour memory run; node_down ends them.
  for _ in $(seq "$procs"); do sleep 86400 & pids+=($!); done
  cp "$sim" "$work/libnvidia-ml.so.1"
  local util=${1:-90} used=${2:-8000}
  for g in $(seq 0 7); do
    printf '[[gpu]]\nname = "NVIDIA H100 80GB HBM3"\nutilization_gpu = %s\n' "$util"
    for ((i = g; i < procs; i += 8)); do
      printf '[[gpu.process]]\npid = %s\nused_mib = %s\n' "${pids[$i]}" "$used"
    done
  done > "$work/scenario.toml"
  export GPUSCOPE_SIM_SCENARIO="$work/scenario.toml" XDG_CONFIG_HOME="$work" GPUSCOPE_PROBE_DIR="$work/probes"
  if [ "$probed" -gt 0 ]; then
    python3 benches/probe_files.py "$work/probes" "${pids[@]:0:$probed}" &
    pids+=($!)
  fi
}

node_down() {
  kill "${pids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
