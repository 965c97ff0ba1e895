#!/usr/bin/env bash
# Whether the dashboard stays responsive over a slow SSH link (issue 17,
# target 6, "Wire"): a key must show on screen within one frame (100 ms)
# after its echo would. The link is made on loopback: a private sshd on
# 127.0.0.1 (temporary host key, client key and config) behind
# benches/delay_proxy.py, which holds every chunk DELAY_MS (default 100) in
# each direction, a 200 ms round trip, optionally behind a RATE_KBIT
# bottleneck (this kernel has no netem qdisc). `ssh -tt` through that link
# runs in a 200x50 tmux pane on the simulated node of benches/node.sh
# (8 GPUs, 64 real processes, figures that change every second), and
# benches/pane_latency.py times, every ~5 ms with capture-pane:
#  - echo: a letter typed into a remote raw-mode `cat` coming back;
#  - the release build of gpuscope: `?` until the help box shows, Esc until
#    it is gone, `s` until the table's title names the next sort column,
#    TRIALS (20) of each at random moments; median and max, and the same
#    minus the echo's median, against the 100 ms frame.
# Then, left alone for BYTES_SECONDS (60), the bytes ssh carries each way
# (counted in the proxy) per minute, and with a RATE_KBIT cap the longest
# wait in the bottleneck's queue and the queue left at the end (a queue that
# grows second after second is a link the dashboard overfills).
# sshd and ssh come from Debian's openssh-server / openssh-client (installed
# with apt-get when missing). sshd runs as root in a private mount namespace
# whose /run and login records (wtmp, lastlog, btmp) are files in the
# temporary directory, so nothing outside it is written.
# Run (as root): bash benches/ssh_latency.sh
#           RATE_KBIT=1000 bash benches/ssh_latency.sh
# GPUSCOPE_BENCH_BIN / GPUSCOPE_BENCH_ARGS as for the other scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
delay_ms=${DELAY_MS:-100}
rate_kbit=${RATE_KBIT:-0}
trials=${TRIALS:-20}
bytes_seconds=${BYTES_SECONDS:-60}
frame_ms=100 # src/tui/event_loop.rs: FRAME
[ "$(id -u)" = 0 ] || { echo "ssh_latency.sh: run as root (sshd, its mount namespace)" >&2; exit 1; }
for tool in tmux python3; do
  command -v $tool >/dev/null || { echo "ssh_latency.sh: needs $tool" >&2; exit 1; }
done
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
fi

source benches/node.sh
busy_node_up
tmp=$(mktemp -d)
sock="$tmp/tmux"
sshd_pid= proxy_pid= made_run_sshd=
cleanup() {
  tmux -S "$sock" kill-server 2>/dev/null || true
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
  [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null || true
  [ -n "$sshd_pid" ] && wait "$sshd_pid" 2>/dev/null || true
  [ -n "$made_run_sshd" ] && rmdir /run/sshd 2>/dev/null || true
  rm -rf "$tmp"
  node_down
}
# The whole run is bounded: each step has its own time limit, and a
# watchdog ends the script (and so runs the trap) should one hang anyway.
( sleep $((300 + 6 * trials + 2 * bytes_seconds)); echo "ssh_latency.sh: timed out" >&2; kill -TERM $$ ) &
watchdog=$!
trap 'kill $(pgrep -P $watchdog) $watchdog 2>/dev/null || true; cleanup' EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# sshd: its own keys and config, root by key only, no PAM. No
# UsePrivilegeSeparation: OpenSSH 7.5 and later always separate and only
# warn of the option; they want /run/sshd, which the namespace provides.
ssh-keygen -q -t ed25519 -N '' -C gpuscope-bench-host -f "$tmp/host_key"
ssh-keygen -q -t ed25519 -N '' -C gpuscope-bench-client -f "$tmp/client_key"
cp "$tmp/client_key.pub" "$tmp/authorized_keys"
sshd_port=$(free_port)
cat > "$tmp/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $sshd_port
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitUserEnvironment no
ClientAliveInterval 0
CONF
mkdir -m 755 "$tmp/run" "$tmp/run/sshd"
for f in wtmp lastlog btmp; do : > "$tmp/$f"; done
# mount -n: libmount would otherwise keep its table in the real /run/mount.
# shellcheck disable=SC2016
inside='mount -n --bind "$1/run" /run
for f in wtmp lastlog btmp; do [ -f /var/log/$f ] && mount -n --bind "$1/$f" /var/log/$f; done
exec /usr/sbin/sshd -D -e -f "$1/sshd_config"'
if unshare -m --propagation private true 2>/dev/null; then
  unshare -m --propagation private sh -c "$inside" sh "$tmp" 2>"$tmp/sshd.log" &
else
  echo "ssh_latency.sh: no mount namespace: sshd records logins in the system's wtmp/lastlog" >&2
  if [ ! -d /run/sshd ]; then mkdir -m 755 /run/sshd; made_run_sshd=1; fi
  /usr/sbin/sshd -D -e -f "$tmp/sshd_config" 2>"$tmp/sshd.log" &
fi
sshd_pid=$!
for _ in $(seq 100); do grep -qs "Server listening" "$tmp/sshd.log" && break; sleep 0.05; done
grep -q "Server listening" "$tmp/sshd.log" || { echo "ssh_latency.sh: sshd did not start:" >&2; cat "$tmp/sshd.log" >&2; exit 1; }

# The slow link.
python3 benches/delay_proxy.py --upstream "127.0.0.1:$sshd_port" --port-file "$tmp/proxy_port" \
  --stats "$tmp/proxy.json" --delay-ms "$delay_ms" --rate-kbit "$rate_kbit" &
proxy_pid=$!
for _ in $(seq 100); do [ -s "$tmp/proxy_port" ] && [ -s "$tmp/proxy.json" ] && break; sleep 0.05; done
port=$(cat "$tmp/proxy_port")
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$tmp/host_key.pub")" > "$tmp/known_hosts"
ssh_cmd="ssh -F /dev/null -tt -e none -p $port -i $tmp/client_key -o IdentitiesOnly=yes -o BatchMode=yes \
-o UserKnownHostsFile=$tmp/known_hosts -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes \
-o UpdateHostKeys=no -o ControlMaster=no -o ControlPath=none -o LogLevel=ERROR root@127.0.0.1"
proxy_stat() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))' "$tmp/proxy.json" "$1"; }

# One tmux server for the run (it outlives its sessions), a 200x50 window per
# session. No client changes that size: pane_latency.py's control-mode client
# sets none, and it checks the size. (`window-size manual` would be surer, but
# tmux 3.3 dies on the next new-session with it set.)
echo 'set -s exit-empty off' > "$tmp/tmux.conf"
session() { # NAME REMOTE-COMMAND: a 200x50 pane running ssh through the link
  tmux -S "$sock" -f "$tmp/tmux.conf" new-session -d -s "$1" -x 200 -y 50 "$ssh_cmd $(printf '%q' "$2"); sleep 600"
}
cap=$([ "$rate_kbit" = 0 ] && echo "no cap" || echo "$rate_kbit kbit/s")
echo "link: ${delay_ms} ms each way ($((2 * delay_ms)) ms round trip), $cap; loopback sshd $(/usr/sbin/sshd -V 2>&1 | cut -d, -f1)"

# (a) echo: a raw-mode cat on the far side sends each letter back.
session echo 'stty raw -echo; printf READY; exec cat'
python3 benches/pane_latency.py "$sock" echo echo --trials "$trials" --json "$tmp/echo.json"
echo_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["echo"]["median_ms"])' "$tmp/echo.json")
tmux -S "$sock" kill-session -t echo

# (b) the dashboard through the same link.
remote="cd / && exec env GPUSCOPE_SIM_SCENARIO=$GPUSCOPE_SIM_SCENARIO XDG_CONFIG_HOME=$XDG_CONFIG_HOME \
GPUSCOPE_PROBE_DIR=$GPUSCOPE_PROBE_DIR LANG=C.UTF-8 $bin --nvml-lib $work/libnvidia-ml.so.1 ${GPUSCOPE_BENCH_ARGS:-}"
session dash "$remote"
# The queue is watched from when the first screen has been painted.
for _ in $(seq 300); do tmux -S "$sock" capture-pane -p -t dash | grep -q " Processes " && break; sleep 0.1; done
sleep 2
kill -USR1 "$proxy_pid"
python3 benches/pane_latency.py "$sock" dash dashboard --trials "$trials" --echo-ms "$echo_ms" --frame-ms "$frame_ms" \
  --json "$tmp/dash.json"
python3 - "$tmp/dash.json" "$echo_ms" "$frame_ms" <<'PY'
import json, sys
d, echo, frame = json.load(open(sys.argv[1])), float(sys.argv[2]), float(sys.argv[3])
over = [x - echo for x in d["all_keys"]["all_ms"]]
late = sum(x > frame + 5 for x in over)  # 5 ms: a change is seen up to one poll late
print(f"target (a key on screen within one {frame:.0f} ms frame of its echo, give or take the 5 ms poll):",
      f"met (worst +{max(over):.1f} ms)" if late == 0 else f"missed by {late} of {len(over)} keys (worst +{max(over):.1f} ms)")
PY
[ "$rate_kbit" = 0 ] || echo "  bottleneck queue during the keys: longest wait $(proxy_stat 'round(queue_max_ms["s2c"], 1)') ms"

# (c) left alone: what the link carries, and whether a queue builds up.
sleep 2
kill -USR1 "$proxy_pid"
sleep 0.3
s0=$(proxy_stat 'bytes["s2c"]') c0=$(proxy_stat 'bytes["c2s"]')
sleep "$bytes_seconds"
s1=$(proxy_stat 'bytes["s2c"]') c1=$(proxy_stat 'bytes["c2s"]')
echo "left alone ${bytes_seconds}s: server->client $(((s1 - s0) * 60 / bytes_seconds)) bytes/min" \
  "($(((s1 - s0) * 8 / bytes_seconds / 1000)) kbit/s), client->server $(((c1 - c0) * 60 / bytes_seconds)) bytes/min"
if [ "$rate_kbit" != 0 ]; then
  echo "  bottleneck queue: longest wait $(proxy_stat 'round(queue_max_ms["s2c"], 1)') ms, at the end $(proxy_stat 'round(queue_now_ms["s2c"], 1)') ms"
fi
tmux -S "$sock" has-session -t dash 2>/dev/null && tmux -S "$sock" capture-pane -p -t dash | grep -q "Processes" ||
  { echo "ssh_latency.sh: the dashboard is no longer on screen" >&2; exit 1; }
