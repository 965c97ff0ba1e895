#!/usr/bin/env bash
# One-shot wall time and NVML calls with what a real driver's calls cost
# (the simulator's realistic_costs): this build's `--json`, another build's
# (BEFORE_BIN, say main's release binary) and `nvitop -1` (NVITOP, the path
# of an nvitop installed in a venv; it loads libnvidia-ml.so.1 from
# LD_LIBRARY_PATH), interleaved run by run on the same 8-GPU x 64-process
# node, then each one's calls into the library by the simulator's call_log.
# This build is timed twice: as it runs once the boot's first run has kept
# the boards' maximum clocks (`after`), and as that first run (`first`,
# each run given an empty runtime directory of its own); the other build
# too (`before`, `before_first`).
# GPUSCOPE_BENCH_PROCS and GPUSCOPE_BENCH_GPUS size the node (node.sh;
# default 64 and 8).
# Run: BEFORE_BIN=... NVITOP=... RUNS=15 bash benches/driver_time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/node.sh
costed_node_up
mkdir -p $work/lib && ln -s $work/libnvidia-ml.so.1 $work/lib/libnvidia-ml.so.1
python3 - "$work" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time
work = sys.argv[1]
procs = int(os.environ.get("GPUSCOPE_BENCH_PROCS", "64"))
gpus = int(os.environ.get("GPUSCOPE_BENCH_GPUS", "8"))
lib = f"{work}/libnvidia-ml.so.1"
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(dir=work)
cmds = {"after": [os.environ.get("GPUSCOPE_BENCH_BIN", "target/release/gpuscope"), "--nvml-lib", lib, "--json"]}
cmds["first"] = cmds["after"]
if os.environ.get("BEFORE_BIN"):
    cmds["before"] = [os.environ["BEFORE_BIN"], "--nvml-lib", lib, "--json"]
    cmds["before_first"] = cmds["before"]
if os.environ.get("NVITOP"):
    cmds["nvitop"] = [os.environ["NVITOP"], "-1"]
env = dict(os.environ, LD_LIBRARY_PATH=f"{work}/lib")
def env_of(name):
    """`first` and `before_first` run as the boot's first: nothing kept yet."""
    return dict(env, XDG_RUNTIME_DIR=tempfile.mkdtemp(dir=work)) if name.endswith("first") else env
for name, cmd in cmds.items():
    r = subprocess.run(cmd, env=env_of(name), capture_output=True, text=True)
    assert r.returncode == 0, (name, r.stderr[-2000:])
    if name != "nvitop":
        s = json.loads(r.stdout); assert len(s["gpus"]) == gpus and len(s["processes"]) == procs, len(s["processes"])
        print(name, "calls in the tick:", s["sources"]["nvml"].get("calls"))
    else:
        print("nvitop output lines:", len(r.stdout.splitlines()))
runs = {n: [] for n in cmds}
for _ in range(int(os.environ.get("RUNS", "15"))):
    for name, cmd in cmds.items():
        run_env = env_of(name)
        t = time.perf_counter(); subprocess.run(cmd, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True); runs[name].append(time.perf_counter() - t)
med = {n: statistics.median(v) * 1000 for n, v in runs.items()}
for n, v in runs.items():
    print(f"{n}: median {med[n]:.1f} ms, min {min(v)*1000:.1f}, max {max(v)*1000:.1f} over {len(v)} runs")
for other in ("first", "before", "nvitop"):
    if other in med:
        print(f"ratio of medians, {other}/after: {med[other] / med['after']:.2f}")
if "before_first" in med:
    print(f"ratio of medians, first/before_first: {med['first'] / med['before_first']:.2f}")
# Library calls per run, by the simulator's own log.
scen = open(f"{work}/scenario.toml").read()
for name, cmd in cmds.items():
    log = f"{work}/{name}.calls"
    open(f"{work}/scenario.toml", "w").write(f"call_log = {json.dumps(log)}\n" + scen)
    subprocess.run(cmd, env=env_of(name), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    lines = open(log).read().split()
    from collections import Counter
    c = Counter(lines)
    print(f"{name}: {len(lines)} calls into the library; MaxClockInfo {c['nvmlDeviceGetMaxClockInfo']}, PcieThroughput {c['nvmlDeviceGetPcieThroughput']}, FieldValues {c['nvmlDeviceGetFieldValues']}; top: {c.most_common(4)}")
open(f"{work}/scenario.toml", "w").write(scen)
PY
