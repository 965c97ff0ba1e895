"""Real-GPU check of gpuscope's out-of-memory post-mortem. Not part of CI.

Needs an NVIDIA GPU, PyTorch with CUDA and a gpuscope binary. A job started
through `gpuscope run` holds a known tensor, then a thread of it asks for far more than the
GPU has and dies of the error, which it leaves uncaught (the main thread
stays alive to be looked at). gpuscope's
`--json` must then carry the failure in the job's `allocator.last_oom`:

- `native` (the caching allocator): PyTorch's out-of-memory observer fires
  before the error is raised, so the record's source is `observer`, its
  `device` is the job's device, `requested` is exactly the size asked for
  (a multiple of 2 MiB, which the allocator does not round further),
  `allocated` equals what the job held, and `device_limit` is the GPU's
  total (no memory fraction is set);
- `async` (`backend:cudaMallocAsync`): that backend takes no observer, so
  the record comes from the escaping exception's message: source
  `exception`, `requested` parsed from "Requested : N GiB", which PyTorch
  prints with two decimals, so it must lie within 1% of the size.

In both, `device_free` must lie within 5% of what `torch.cuda.mem_get_info`
gives once the error has passed.

In both, `oom_events` counts the one failure and an `oom` alert names the
job's PID.

Usage: python3 tests/gpu/real_oom_check.py [path/to/gpuscope] [--config native,async]
"""

import json
import os
import subprocess
import sys
import threading
import time

import checks

GIB = 1 << 30
MIB = 1 << 20
HELD = 256 * MIB
ASK = 4096 * GIB

CONFIGS = {
    "native": {},
    "async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
}


def job(workdir):
    """The PyTorch side: hold a tensor, fail a huge allocation, report, wait."""
    import torch

    keep = torch.empty(HELD, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    def fail():
        # Left uncaught, in a thread of its own: it reaches
        # threading.excepthook as a crashing worker's would, and the main
        # thread stays alive to be looked at.
        torch.empty(ASK, dtype=torch.uint8, device="cuda")

    worker = threading.Thread(target=fail)
    worker.start()
    worker.join()
    s = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    mine = {
        "free": free,
        "total": total,
        "allocated": s["allocated_bytes.all.current"],
        "backend": torch.cuda.get_allocator_backend(),
        "torch": torch.__version__,
        "held": keep.numel(),
    }
    with open(os.path.join(workdir, "state.json.tmp"), "w") as f:
        json.dump(mine, f)
    os.replace(os.path.join(workdir, "state.json.tmp"), os.path.join(workdir, "state.json"))
    while not os.path.exists(os.path.join(workdir, "go")):
        time.sleep(0.05)


def run_config(args, config):
    print("\n######## OOM, configuration %s" % config)
    child, workdir, env = checks.start_job(args, __file__, CONFIGS, config)
    try:
        state = wait_state(workdir, child)
        if state is None:
            print("  the job stopped before it reported")
            return 1
        time.sleep(1.5)
        out = subprocess.run([args.gpuscope, "--json"], capture_output=True, text=True, env=env, check=True).stdout
        return report(json.loads(out), child.pid, state)
    finally:
        open(os.path.join(workdir, "go"), "w").close()
        child.terminate()
        child.wait(30)


def wait_state(workdir, child):
    deadline = time.time() + 120
    path = os.path.join(workdir, "state.json")
    while time.time() < deadline and child.poll() is None:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def report(snap, pid, state):
    print("  torch %s, backend %s" % (state["torch"], state["backend"]))
    proc = next((p for p in snap["processes"] if p["pid"] == pid), None)
    alloc = (proc or {}).get("allocator")
    if alloc is None:
        print("  gpuscope shows no allocator data for the job: %s" % json.dumps(proc))
        return 1
    failures = 0
    records = alloc.get("last_oom") or []
    print("  oom_events %s, %d record(s)" % (alloc.get("oom_events"), len(records)))
    print("  records: %s" % json.dumps(records)[:1500])
    if not records:
        return 1
    last = records[-1]
    want_source = "observer" if state["backend"] == "native" else "exception"
    failures += check("source", last["source"], want_source, last["source"] == want_source)
    failures += check("device", last["device"], 0, last["device"] == 0)
    if want_source == "observer":
        failures += check("requested", last["requested"], ASK, last["requested"] == ASK)
        failures += check("allocated", last["allocated"], state["allocated"], last["allocated"] == state["allocated"])
        failures += check("device_limit", last["device_limit"], state["total"], last["device_limit"] == state["total"])
    else:
        close = last["requested"] is not None and abs(last["requested"] - ASK) <= ASK // 100
        failures += check("requested", last["requested"], ASK, close)
    free_close = last["device_free"] is not None and abs(last["device_free"] - state["free"]) <= state["free"] // 20
    failures += check("device_free", last["device_free"], state["free"], free_close)
    failures += check("oom_events", alloc.get("oom_events"), ">= 1", (alloc.get("oom_events") or 0) >= 1)
    alerts = [a for a in snap.get("alerts", []) if a["kind"] == "oom" and a["pid"] == pid]
    failures += check("oom alert", len(alerts), ">= 1", len(alerts) >= 1)
    for a in alerts:
        print("    alert: %s | %s" % (a["message"], a["hint"]))
    return failures


def check(name, seen, want, ok):
    print("  %-12s %22s  want %-22s %s" % (name, seen, want, "ok" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(checks.main(CONFIGS, run_config, lambda args: job(args.job)))
