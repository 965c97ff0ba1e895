#!/usr/bin/env bash
# What each one-shot mode costs with a real driver's per-call costs (the
# simulator's realistic_costs) on the 8-GPU x 64-process node: `-1`, a
# `--query-gpu` of three fields and `--json`, each as the boot's first run
# (an empty runtime directory of its own, so the boards' maximum clocks are
# not kept yet) and as a later one, this build against another (OLD),
# interleaved run by run: wall time and the process's CPU time, medians.
# Then `-1 -l 1` and the query with `-l 1` left running for SECS seconds
# each: their CPU time. Each output asks the driver only for what it shows
# (src/sources/nvml/wanted.rs), so the modes differ where JSON does not.
# Run: OLD=path/to/other/gpuscope [RUNS=15] [SECS=20] bash benches/one_shots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/node.sh
costed_node_up
python3 - "$work" "$bin" <<'PY'
import os, resource, statistics, subprocess, sys, tempfile, time
work, new = sys.argv[1], sys.argv[2]
lib = f"{work}/libnvidia-ml.so.1"
bins = {"old": os.environ["OLD"], "new": new}
kept = {b: tempfile.mkdtemp(dir=work) for b in bins}
modes = {
    "-1": ["-1"],
    "query": ["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"],
    "json": ["--json"],
}

def children_cpu():
    """CPU seconds used by the children waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def run(path, args, runtime_dir):
    """Wall and CPU time of one run, in ms."""
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime_dir)
    before = children_cpu()
    start = time.perf_counter()
    subprocess.run([path, "--nvml-lib", lib, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - start) * 1000
    return wall, (children_cpu() - before) * 1000

# Once each, so that the kept runs find the maximum clocks kept.
for b, path in bins.items():
    for args in modes.values():
        run(path, args, kept[b])
runs = {}
for _ in range(int(os.environ.get("RUNS", "15"))):
    for m, args in modes.items():
        for first in (True, False):
            for b, path in bins.items():
                runtime_dir = tempfile.mkdtemp(dir=work) if first else kept[b]
                runs.setdefault((m, first, b), []).append(run(path, args, runtime_dir))
for m in modes:
    for first in (True, False):
        wall = {b: [r[0] for r in runs[(m, first, b)]] for b in bins}
        cpu = {b: statistics.median(r[1] for r in runs[(m, first, b)]) for b in bins}
        med = {b: statistics.median(wall[b]) for b in bins}
        print(f"{m:6s} {'first' if first else 'later'}: wall old {med['old']:.1f} ms ({min(wall['old']):.1f}-{max(wall['old']):.1f}), "
              f"new {med['new']:.1f} ({min(wall['new']):.1f}-{max(wall['new']):.1f}), new/old {med['new'] / med['old']:.2f}; "
              f"CPU old {cpu['old']:.1f} ms, new {cpu['new']:.1f}")
secs = int(os.environ.get("SECS", "20"))
for m, args in [("-1 -l 1", ["-1", "-l", "1"]), ("query -l 1", modes["query"] + ["-l", "1"])]:
    for b, path in bins.items():
        env = dict(os.environ, XDG_RUNTIME_DIR=kept[b])
        before = children_cpu()
        p = subprocess.Popen([path, "--nvml-lib", lib, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(secs)
        p.terminate()
        p.wait()
        print(f"{m} {b}: {children_cpu() - before:.3f} s CPU over {secs} s")
PY
