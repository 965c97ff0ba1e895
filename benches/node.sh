# Sourced by the whole-process benchmarks: a simulated node of 8 GPUs with
# 64 real `sleep` processes (8 per GPU) and the release build of gpuscope.
# GPUSCOPE_BENCH_PROCS (default 64) sets how many processes, spread over the
# GPUs, and GPUSCOPE_BENCH_GPUS (default 8) how many GPUs;
# GPUSCOPE_BENCH_PROBED (default 0) gives that many of them a probe file in
# $work/probes, rewritten once a second as a live probe would
# (the PyTorch fields of a rank on one GPU), so the scale target of 8 x 512
# with 128 probed can be measured. GPUSCOPE_BENCH_CHURN=N ends N of the
# unprobed processes every second and puts N new ones in their places
# (benches/churn.py), as data-loader workers come and go.
# `node_up [UTIL] [USED_MIB]` sets $bin, $work (holding libnvidia-ml.so.1
# and scenario.toml) and $pids, and exports the GPUSCOPE_* variables;
# UTIL and USED_MIB may be scenario values such as '{ min = 1, max = 9 }'.
# It first warns when other work keeps the CPUs busy (`warn_if_busy`).
# `node_down` removes it all.
node_up() {
  # GPUSCOPE_BENCH_BIN measures another build (say, the last release's).
  [ -n "${GPUSCOPE_BENCH_BIN:-}" ] || cargo build --release --quiet
  warn_if_busy
  local target=${CARGO_TARGET_DIR:-$PWD/target}
  bin=${GPUSCOPE_BENCH_BIN:-$target/release/gpuscope}
  local sim
  sim=$(ls -t "$target"/release/build/gpuscope-*/out/libgpuscope_nvml_sim.so | head -n 1)
  work=$(mktemp -d)
  pids=()
  panes=()
  local procs=${GPUSCOPE_BENCH_PROCS:-64} probed=${GPUSCOPE_BENCH_PROBED:-0} gpus=${GPUSCOPE_BENCH_GPUS:-8}
  # The node's processes start with gpuscope's environment, as a user's
  # training started from the same shell does: their probes would write
  # where gpuscope reads.
  export GPUSCOPE_SIM_SCENARIO="$work/scenario.toml" XDG_CONFIG_HOME="$work" GPUSCOPE_PROBE_DIR="$work/probes"
  # A day: long enough for the 24-hour memory run; node_down ends them.
  # Disowned: the shell would report each one churn.py ends ("Killed").
  for _ in $(seq "$procs"); do
    sleep 86400 &
    pids+=($!)
    disown $!
  done
  cp "$sim" "$work/libnvidia-ml.so.1"
  local util=${1:-90} used=${2:-8000}
  # The H100 SXM board an 8-GPU node carries has no fan of its own: on the
  # one measured (driver 580.159.04) NumFans was 0 and FanSpeed
  # NOT_SUPPORTED, so the node's boards say so too (`fans = 0`).
  for ((g = 0; g < gpus; g++)); do
    printf '[[gpu]]\nname = "NVIDIA H100 80GB HBM3"\nuuid = "GPU-%s"\nfans = 0\nutilization_gpu = %s\n' "$(bench_uuid "$g")" "$util"
    for ((i = g; i < procs; i += gpus)); do
      printf '[[gpu.process]]\npid = %s\nused_mib = %s\n' "${pids[$i]}" "$used"
    done
    # An H100 has the activity counters (GPM), which gpuscope reads each
    # tick; GPUSCOPE_BENCH_GPM=0 makes boards without them.
    if [ "${GPUSCOPE_BENCH_GPM:-1}" = 1 ]; then
      printf '[gpu.gpm]\nsm_util = { min = 40, max = 80, period_s = 11, shape = "sine" }\n'
      printf 'sm_occupancy = 30\nany_tensor_util = 35\nhmma_tensor_util = 35\ndram_bw_util = 25\n'
      printf 'pcie_tx_per_sec = 200\npcie_rx_per_sec = 900\nnvlink_total_tx_per_sec = 1000\nnvlink_total_rx_per_sec = 1000\n'
    fi
  done > "$work/scenario.toml"
  local churn=${GPUSCOPE_BENCH_CHURN:-0}
  if [ "$churn" -gt 0 ]; then
    python3 benches/churn.py "$work/scenario.toml" "$churn" "${pids[@]:$probed}" &
    # Those are churn.py's to end from now on: a PID it has ended may be
    # another process's by the time node_down runs.
    pids=("${pids[@]:0:$probed}" $!)
  fi
  if [ "$probed" -gt 0 ]; then
    # Each probed process names the GPU it runs on (the i-th is on GPU
    # i % gpus) by its UUID, as a real probe does.
    local ranks=()
    for ((i = 0; i < probed; i++)); do ranks+=("${pids[$i]}:$(bench_uuid $((i % gpus)))"); done
    python3 benches/probe_files.py "$work/probes" "${ranks[@]}" &
    pids+=($!)
  fi
}

# `node_up` with the GPUs every dashboard benchmark shows: utilisation a
# sine between 60 and 99 %, used memory a ramp, so each frame has figures
# that change, as a training job's do.
busy_node_up() {
  node_up '{ min = 60, max = 99, period_s = 11, shape = "sine" }' '{ min = 7000, max = 9000, period_s = 30, shape = "ramp" }'
}

# `needs TOOL...`: exits, naming the first missing, unless each is on PATH.
needs() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool" >&2; exit 1; }
  done
}

# GPU $1's UUID without NVML's "GPU-", as PyTorch gives it to the probe.
bench_uuid() { printf '00000000-5c0b-4e5a-9d1e-%012x' "$1"; }

# `pane_up NAME COMMAND`: COMMAND (one string, quoted for a shell) in a
# 200x60 tmux pane of its own, with the node's environment; sets $sock to
# the pane's tmux server (a socket in $work: tmux 3.3 leaves a server's
# socket behind when it is killed, and node_down removes $work) and $pid
# to what runs there, once the pane's shell has handed over to it (a
# sample of $pid before that would be the shell's). `panes_down` (or
# `node_down`) ends every pane started.
pane_up() {
  needs tmux
  local name=$1 command=$2
  sock="$work/tmux-$name"
  panes+=("$sock")
  rm -f "$work/pid-$name"
  cat > "$work/run-$name.sh" <<RUN
export GPUSCOPE_SIM_SCENARIO=$GPUSCOPE_SIM_SCENARIO XDG_CONFIG_HOME=$work GPUSCOPE_PROBE_DIR=$work/probes LANG=C.UTF-8
echo \$\$ > $work/pid-$name
exec $command
RUN
  tmux -S "$sock" -f /dev/null new-session -d -x 200 -y 60 "bash $work/run-$name.sh"
  for _ in $(seq 100); do [ -s "$work/pid-$name" ] && break; sleep 0.1; done
  pid=$(cat "$work/pid-$name")
  # The shell execs COMMAND, through env for a peer or a sped-up clock.
  for _ in $(seq 50); do
    case $(cat "/proc/$pid/comm" 2>/dev/null) in bash | env) sleep 0.1 ;; *) break ;; esac
  done
}

panes_down() {
  local s
  for s in "${panes[@]}"; do tmux -S "$s" kill-server 2>/dev/null || true; done
  panes=()
}

# `peer_command COMMAND...`: the command quoted for `pane_up`, loading the
# node's simulated driver as libnvidia-ml.so.1 (gpuscope is given it by
# --nvml-lib instead).
peer_command() { printf 'env LD_LIBRARY_PATH=%q %s' "$work" "$(printf '%q ' "$@")"; }

# `dashboard_up [PEER COMMAND]` runs the dashboard in a pane on the node
# (GPUSCOPE_BENCH_ARGS added to its flags), or the peer command in its
# place; sets $pid to what runs there. `node_down` ends it.
dashboard_up() {
  if [ $# -gt 0 ]; then
    pane_up dash "$(peer_command "$@")"
  else
    pane_up dash "$bin --nvml-lib $work/libnvidia-ml.so.1 ${GPUSCOPE_BENCH_ARGS:-}"
  fi
}

# `grind_up VALGRIND_FLAGS...`: dashboard_up with valgrind (its log in
# $work/valgrind.log) in front of the build measured, named in $measured.
# `grind_quit` quits the dashboard and waits for valgrind to write.
grind_up() {
  measured=$bin
  cat > "$work/grind.sh" <<GRIND
#!/bin/sh
exec valgrind $* --log-file=$work/valgrind.log $bin "\$@"
GRIND
  chmod +x "$work/grind.sh"
  bin=$work/grind.sh
  dashboard_up
}

grind_quit() {
  tmux -S "$sock" send-keys q
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  ! kill -0 "$pid" 2>/dev/null || { echo "$0: the dashboard did not quit" >&2; exit 1; }
}

# node_up with a real driver's per-call costs (the simulator's
# realistic_costs), torn down on exit: the one-shot benchmarks' node.
costed_node_up() {
  node_up
  trap node_down EXIT
  export GPUSCOPE_SIM_REALISTIC_COSTS=1 GPUSCOPE_PID_NAMESPACE=host
}

# Says so on stderr when something else keeps this machine's CPUs busy
# before a run starts: its figures would not be this machine's. A build
# beside a one-shot benchmark (2 CPUs) made `--json` 44 ms where the same
# binary took 32 ms alone, and the boot's first run 87 ms where it took
# 54. Over half a second, from /proc/stat's first line (user nice system
# idle iowait irq softirq steal ...); more than a quarter of a CPU busy
# is more than this machine does idle (a few percent).
warn_if_busy() {
  local a b
  a=$(cpu_jiffies)
  sleep 0.5
  b=$(cpu_jiffies)
  local busy=$((${b% *} - ${a% *})) total=$((${b#* } - ${a#* })) cpus
  cpus=$(nproc)
  # Hundredths of a CPU, busy on average over the half second.
  local used=$((total > 0 ? busy * cpus * 100 / total : 0))
  if [ "$used" -gt 25 ]; then
    printf '%s: warning: %d.%02d CPUs were busy before this run started; its figures will be noisy (see top)\n' \
      "$0" $((used / 100)) $((used % 100)) >&2
  fi
}

# "BUSY TOTAL": jiffies of all CPUs since boot, busy and in all.
cpu_jiffies() {
  local _cpu user nice system idle iowait irq softirq steal _rest
  read -r _cpu user nice system idle iowait irq softirq steal _rest < /proc/stat
  echo "$((user + nice + system + irq + softirq + steal)) $((user + nice + system + idle + iowait + irq + softirq + steal))"
}

node_down() {
  panes_down
  kill "${pids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
