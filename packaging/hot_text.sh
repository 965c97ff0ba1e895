#!/usr/bin/env bash
# Regenerates packaging/hot_text.ld, the linker script that groups the code
# gpuscope runs (see packaging/hot_text.py for why). Profiles the release
# build under callgrind on the benchmarks' simulated node at the scale
# target's size (8 GPUs x 512 processes, 128 of them with probe files,
# benches/probe_files.py; GPUSCOPE_BENCH_PROCS / _PROBED change it): the
# dashboard in a 200x60 tmux pane for 40 s, then for 140 s with windows of
# seconds (what a dashboard otherwise runs only minutes in), a one-shot
# --json, and the exporter over a few scrapes: about seven minutes. Run it
# after large changes to the dashboard's or the exporter's code paths,
# then commit the script;
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
# Numbers that move, as the dashboard benchmarks' (benches/tui_cpu.sh) and
# a user's do: constant ones never run the code that aggregates differing
# samples (a bucket's column turned from one level into min/max/mean).
GPUSCOPE_BENCH_PROCS=${GPUSCOPE_BENCH_PROCS:-512} GPUSCOPE_BENCH_PROBED=${GPUSCOPE_BENCH_PROBED:-128} node_up \
  '{ min = 60, max = 99, period_s = 11, shape = "sine" }' '{ min = 7000, max = 9000, period_s = 30, shape = "ramp" }'
profiles=$(mktemp -d)
sock="$profiles/tmux"
server=
trap 'tmux -S "$sock" kill-server 2>/dev/null || true; [ -z "$server" ] || kill "$server" 2>/dev/null || true; node_down; rm -rf "$profiles"' EXIT
grind() {
  local mode=$1
  shift
  exec valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file="$profiles/callgrind.$mode.out" \
    --log-file="$profiles/$mode.log" "$bin" --nvml-lib "$work/libnvidia-ml.so.1" "$@"
}

# Each mode runs as `exec valgrind` in a subshell of its own, so a signal
# for the server reaches valgrind itself.
# `dashboard MODE SECONDS CONFIG_HOME`: the dashboard in a 200x60 tmux pane,
# quit with q after SECONDS so that callgrind writes its profile. Its
# start-up and first ticks are dumped apart (callgrind.MODE.out.1): what
# the dashboard runs on every tick after them comes first in the script,
# so that a tick's code shares as few pages as it can; start-up code, run
# once, follows.
dashboard() {
  local mode=$1 seconds=$2 config=$3
  cat > "$work/run.sh" <<RUN
export GPUSCOPE_SIM_SCENARIO=$GPUSCOPE_SIM_SCENARIO XDG_CONFIG_HOME=$config GPUSCOPE_PROBE_DIR=$work/probes LANG=C.UTF-8
$(declare -f grind)
bin=$bin work=$work profiles=$profiles
(grind $mode)
echo done > $work/$mode.done
RUN
  tmux -S "$sock" -f /dev/null new-session -d -x 200 -y 60 "bash $work/run.sh"
  sleep 12
  callgrind_control --dump >/dev/null 2>&1
  sleep "$seconds"
  tmux -S "$sock" send-keys q
  for _ in $(seq 300); do [ -e "$work/$mode.done" ] && break; sleep 0.2; done
  [ -e "$work/$mode.done" ] || { echo "hot_text.sh: the dashboard ($mode) did not quit" >&2; exit 1; }
}
dashboard dashboard 40 "$work"
# Code a dashboard first runs minutes in, which 40 seconds never reach: a
# GPU's 64 raw samples rolling into one-second buckets, those buckets
# wrapping after two minutes, the window's coarse buckets filling, alerts
# raised and cleared, the probe views' periodic retry. Left cold, each
# such function brings in the 64 KiB the kernel maps around it (the build
# before this profile held 264 KiB of cold code at the tenth minute at
# 8 x 512). Windows of seconds bring it within two and a half minutes;
# only what ran after start-up (the profile's last part) is taken.
mkdir -p "$work/late/gpuscope"
cat > "$work/late/gpuscope/config.toml" <<'CONFIG'
[history]
window = "40s"
[alerts.fragmentation]
window = "10s"
min_samples = 2
[alerts.leak]
window = "20s"
[alerts.starved]
window = "20s"
[alerts.memory_pressure]
duration = "5s"
CONFIG
dashboard dashboard-late 140 "$work/late"

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
  "$profiles/callgrind.dashboard-late.out" "$profiles/callgrind.dashboard-start.out" "$profiles/callgrind.json.out" "$profiles/callgrind.serve.out"
