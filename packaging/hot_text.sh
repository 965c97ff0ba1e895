#!/usr/bin/env bash
# Regenerates packaging/hot_text.ld, the linker script that groups the code
# gpuscope runs (see packaging/hot_text.py for why). Profiles the release
# build under callgrind on the benchmarks' simulated node at the scale
# target's size (8 GPUs x 512 processes, 128 of them with probe files,
# benches/probe_files.py; GPUSCOPE_BENCH_PROCS / _PROBED change it): the
# dashboard in a 200x60 tmux pane for 40 s, a one-shot --json, and the
# exporter over a few scrapes. Run it after large changes to the
# dashboard's or the exporter's code paths, then commit the script;
# functions it does not name still work, they only sit apart. The large
# node runs what a small one does and what only size brings (a sort's
# merging passes, a table's growth), and probed processes make reading and
# joining allocator figures the hot code it is on a node that runs PyTorch.
# Needs valgrind, tmux, python3 and binutils' nm. Run: bash packaging/hot_text.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in valgrind tmux python3 nm; do
  command -v "$tool" >/dev/null || { echo "hot_text.sh: needs $tool" >&2; exit 1; }
done
# Profiled without the script it regenerates: valgrind names the program's
# functions only within its `.text` section, so code already grouped into
# `.text.hot` would go unnamed (callgrind's object "???"). The next plain
# `cargo build --release` links the new script in.
GPUSCOPE_HOT_TEXT=0 cargo build --release --quiet
# The build just made, wherever cargo puts it (CARGO_TARGET_DIR).
export GPUSCOPE_BENCH_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/gpuscope
source benches/node.sh
GPUSCOPE_BENCH_PROCS=${GPUSCOPE_BENCH_PROCS:-512} GPUSCOPE_BENCH_PROBED=${GPUSCOPE_BENCH_PROBED:-128} node_up
profiles=$(mktemp -d)
sock="gpuscope-hot-$$"
server=
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; [ -z "$server" ] || kill "$server" 2>/dev/null || true; node_down; rm -rf "$profiles"' EXIT
grind() {
  local mode=$1
  shift
  exec valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file="$profiles/callgrind.$mode.out" \
    --log-file="$profiles/$mode.log" "$bin" --nvml-lib "$work/libnvidia-ml.so.1" "$@"
}

# Each mode runs as `exec valgrind` in a subshell of its own, so a signal
# for the server reaches valgrind itself.
# The dashboard, quit with q so that callgrind writes its profile.
cat > "$work/run.sh" <<RUN
export GPUSCOPE_SIM_SCENARIO=$GPUSCOPE_SIM_SCENARIO XDG_CONFIG_HOME=$work GPUSCOPE_PROBE_DIR=$work/probes LANG=C.UTF-8
$(declare -f grind)
bin=$bin work=$work profiles=$profiles
(grind dashboard)
echo done > $work/dashboard.done
RUN
tmux -L "$sock" -f /dev/null new-session -d -x 200 -y 60 "bash $work/run.sh"
# Start-up and the first ticks, dumped apart (callgrind.dashboard.out.1):
# what the dashboard runs on every tick after them comes first in the
# script, so that a tick's code shares as few pages as it can; start-up
# code, run once, follows.
sleep 12
callgrind_control --dump >/dev/null 2>&1
sleep 40
tmux -L "$sock" send-keys q
for _ in $(seq 300); do [ -e "$work/dashboard.done" ] && break; sleep 0.2; done
[ -e "$work/dashboard.done" ] || { echo "hot_text.sh: the dashboard did not quit" >&2; exit 1; }

(grind json --json > /dev/null)

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(grind serve serve --listen "127.0.0.1:$port") &
server=$!
# Five scrapes a second apart, once it answers (slowly: under valgrind).
python3 - "$port" <<'SCRAPE'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(120):
    try:
        urllib.request.urlopen(url + "/healthz", timeout=5)
        break
    except OSError:
        time.sleep(0.5)
for _ in range(5):
    urllib.request.urlopen(url + "/metrics", timeout=60).read()
    time.sleep(1)
SCRAPE
kill -TERM "$server"
wait "$server" || true
server=

mv "$profiles/callgrind.dashboard.out" "$profiles/callgrind.dashboard-ticks.out"
mv "$profiles/callgrind.dashboard.out.1" "$profiles/callgrind.dashboard-start.out"
python3 packaging/hot_text.py packaging/hot_text.ld "$bin" "$profiles/callgrind.dashboard-ticks.out" \
  "$profiles/callgrind.dashboard-start.out" "$profiles/callgrind.json.out" "$profiles/callgrind.serve.out"
