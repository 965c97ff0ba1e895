#!/usr/bin/env bash
# Every real-GPU check in one run, for a machine with an NVIDIA GPU, PyTorch
# and JAX (not part of CI). Writes one log and a few artefacts to OUTDIR:
#   log.txt          every check's output, in order
#   snapshot.json    `gpuscope --json` while a probed PyTorch job runs
#   real.ndjson.zst  a recording of the whole run (replay it anywhere)
#   metrics.txt      one scrape of `gpuscope serve`
#   tui.raw          what the dashboard wrote to a 200x50 terminal in 3 s
# Usage: bash tests/gpu/run_all.sh [path/to/gpuscope] [OUTDIR]
# nvitop's one-shot is timed too where NVITOP_PYTHONPATH names a folder
# holding nvitop (it needs nvidia-ml-py and psutil beside it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
G=$(realpath "${1:-target/release/gpuscope}")
OUTDIR=${2:-${OUT:-/tmp/gpuscope-gpu}}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/log.txt
export PYTHONUNBUFFERED=1
: > "$LOG"

step() {
	local limit=$1; shift
	echo "################ $* (limit ${limit}s)" >> "$LOG"
	local t0=$SECONDS
	timeout -k 5 "$limit" bash -c '"$@"' _ "$@" >> "$LOG" 2>&1
	echo "################ rc=$? in $((SECONDS - t0)) s" >> "$LOG"
}

one_shots() {
	python3 - "$@" <<'EOF'
import statistics, subprocess, sys, time
runs = 10
for cmd in sys.argv[1:]:
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ms.append((time.perf_counter() - t) * 1e3)
    err = p.stderr.decode(errors="replace").strip().splitlines()[-1:] if p.returncode else ""
    print("%-70s median %7.1f ms  min %7.1f  max %7.1f  rc %d %s" % (cmd[:70], statistics.median(ms), min(ms), max(ms), p.returncode, err))
EOF
}

# The boards' maximum clocks kept by one run (sources/nvml/boards.rs) are
# what the driver says: a second run in the same runtime directory reads
# them from the file and must show the same.
boards_check() {
	python3 - "$G" <<'EOF'
import json, os, subprocess, sys, tempfile
g = sys.argv[1]
env = dict(os.environ, XDG_RUNTIME_DIR=tempfile.mkdtemp())
docs = [json.loads(subprocess.run([g, "--json"], env=env, capture_output=True, check=True).stdout) for _ in range(2)]
asked, kept = ([gpu["max_clocks"] for gpu in d["gpus"]] for d in docs)
print("boards file:\n" + open(os.path.join(env["XDG_RUNTIME_DIR"], "gpuscope", "boards")).read())
print("max clocks asked of the driver:", asked)
print("max clocks kept:               ", kept)
print("boards check:", "same" if asked == kept else "DIFFERENT")
sys.exit(0 if asked == kept else 1)
EOF
}

dashboard() {
	python3 - "$G" "$OUTDIR/tui.raw" <<'EOF'
import fcntl, os, pty, select, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"
    os.execv(sys.argv[1], [sys.argv[1]])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
out = bytearray()
end = time.time() + 3
sent = False
while True:
    if time.time() > end and not sent:
        os.write(fd, b"q")
        sent = True
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if sent and time.time() > end + 5:
        break
_, status = os.waitpid(pid, 0)
open(sys.argv[2], "wb").write(out)
print("dashboard wrote %d bytes in 3 s, exit status %d" % (len(out), os.waitstatus_to_exitcode(status)))
EOF
}

scrape() {
	"$G" serve --listen 127.0.0.1:10983 &
	local pid=$!
	sleep 4
	python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:10983/metrics").read().decode())' > "$OUTDIR/metrics.txt"
	echo "metrics: $(wc -l < "$OUTDIR/metrics.txt") lines; calls per tick:"
	grep -E '^gpuscope_collect_nvml_calls|^gpuscope_.*(duration|seconds)' "$OUTDIR/metrics.txt" | head -20
	kill "$pid"; wait "$pid"
}

probed_snapshot() {
	GPUSCOPE_PROBE_INTERVAL=0.2 "$G" run -- python3 -c "import torch,time; x=torch.empty(3<<30,dtype=torch.uint8,device='cuda'); y=torch.randn(8192,8192,device='cuda'); [y@y for _ in range(50)]; torch.cuda.synchronize(); time.sleep(30)" &
	local pid=$!
	sleep 12
	"$G" --json > "$OUTDIR/snapshot.json"
	echo "snapshot: $(wc -c < "$OUTDIR/snapshot.json") bytes"
	"$G" -1
	"$G" check --for 2s
	local rc=$?
	echo "check exit $rc"
	# The job was killed on purpose: the step's status is the check's.
	kill "$pid"; wait "$pid"
	return "$rc"
}

export G OUTDIR here
export -f one_shots boards_check dashboard scrape probed_snapshot

{
	date -u; uname -a; nvidia-smi; "$G" --version
	python3 -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'
} >> "$LOG" 2>&1

"$G" record --interval 500ms --duration 400s "$OUTDIR/real.ndjson.zst" >> "$LOG" 2>&1 &
recorder=$!

step 60 python3 "$here/nvml_costs.py"
nvitop=""
if [ -n "${NVITOP_PYTHONPATH:-}" ]; then
	nvitop="PYTHONPATH=$NVITOP_PYTHONPATH python3 -m nvitop -1"
fi
step 30 boards_check
# The boot's first run is timed too: an empty runtime directory each run.
step 120 one_shots "$G --json" "XDG_RUNTIME_DIR=\$(mktemp -d) $G --json" "$G -1" "$G --query-gpu=index,memory.used,utilization.gpu --format=csv" \
	"nvidia-smi" "nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv" ${nvitop:+"$nvitop"}
step 60 probed_snapshot
step 60 python3 "$here/pcie_check.py" "$G"
step 180 python3 "$here/real_torch_check.py" "$G"
step 80 python3 "$here/real_oom_check.py" "$G"
step 80 python3 "$here/real_jax_check.py" "$G"
step 20 scrape
step 20 dashboard
step 90 python3 "$here/smi_compare.py" "$G"
step 90 python3 "$here/gpm_check.py" "$G"

kill -INT "$recorder"; wait "$recorder"
ls -la "$OUTDIR" >> "$LOG"
grep -E '^################|checks passed|FAILED|differ$' "$LOG"
