#!/usr/bin/env bash
# The dashboard's heap allocations, counted by valgrind's DHAT on the
# simulated node (benches/node.sh; its GPUSCOPE_BENCH_PROCS / _PROBED size
# it) over the whole of a run of SECONDS (default 60) after a 5-second
# start: blocks and KiB allocated per tick by the sampling thread (stacks
# through `poller::spawn`) and by the drawing thread (through `tui::`),
# and the sampling thread's busiest sites. Start-up is counted too,
# spread over the ticks: at 60 s, about 20 of the sampling thread's blocks
# a tick are its first sight of each process.
# Why: each block a tick is made and freed with the heap's cache lines cold
# (a tick comes a second after the last), so the count tells two builds
# apart where CPU time on a shared VM varies by half from run to run.
# Needs valgrind, tmux and python3. Run: bash benches/tui_allocations.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
source benches/node.sh
needs valgrind tmux python3
busy_node_up
trap node_down EXIT
grind_up --tool=dhat --dhat-out-file="$work/dhat.json"
sleep $((5 + seconds))
grind_quit
echo "$measured over $((5 + seconds)) s, start-up included:"
python3 - "$work/dhat.json" $((5 + seconds)) <<'PY'
import json, sys

dhat = json.load(open(sys.argv[1]))
ticks = float(sys.argv[2])
frames = dhat["ftbl"]
threads = {"sampling": [0, 0], "drawing": [0, 0], "other": [0, 0]}
sites = {}
for pp in dhat["pps"]:
    stack = [frames[i] for i in pp["fs"]]
    whole = " ".join(stack)
    thread = "sampling" if "poller::spawn" in whole else "drawing" if "tui::" in whole else "other"
    threads[thread][0] += pp["tbk"]
    threads[thread][1] += pp["tb"]
    if thread == "sampling":
        # The first frame of gpuscope's own (or the driver's) code.
        own = next((f.split(": ", 1)[-1].split(" (in ")[0] for f in stack
                    if ("gpuscope" in f or "nvml" in f) and "alloc::" not in f.split(": ", 1)[-1][:12]), "?")
        site = sites.setdefault(own[:100], [0, 0])
        site[0] += pp["tbk"]
        site[1] += pp["tb"]
for name, (blocks, size) in threads.items():
    print(f"  {name:9} thread: {blocks / ticks:6.0f} blocks a tick, {size / ticks / 1024:6.1f} KiB a tick")
print("  the sampling thread's busiest sites, blocks and bytes a tick:")
for own, (blocks, size) in sorted(sites.items(), key=lambda s: -s[1][0])[:8]:
    print(f"    {blocks / ticks:6.1f} {size / ticks:8.0f}  {own}")
PY
