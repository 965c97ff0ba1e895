"""Real-GPU check of gpuscope's JAX allocator figures. Not part of CI.

Needs an NVIDIA GPU, JAX with CUDA and a gpuscope binary. A JAX job started
through `gpuscope run` walks through phases (one array; a second, larger
one; the first deleted) and after each compares what `gpuscope --json`
shows for the job with what the job reads from `Device.memory_stats()`:
bytes in use, the pool, the limit and the largest free block must be equal
(the job is idle while gpuscope looks), the job's device must be matched to
its GPU, and what XLA does not keep (PyTorch's split and retry counters)
must be null, never 0.

Configurations: `preallocate` (JAX's default: XLA takes 75% of the GPU at
start) and `on-demand` (XLA_PYTHON_CLIENT_PREALLOCATE=false).

Usage: python3 tests/gpu/real_jax_check.py [path/to/gpuscope] [--config preallocate,on-demand]
"""

import json
import os
import subprocess
import sys
import time

import checks

MIB = 1 << 20

CONFIGS = {
    "preallocate": {},
    "on-demand": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
}
PHASES = ("one-array", "two-arrays", "first-deleted")
COMPARED = (
    ("allocated", "bytes_in_use"),
    ("reserved", "pool_bytes"),
    ("bytes_limit", "bytes_limit"),
    ("largest_free_block", "largest_free_block_bytes"),
)


def job(workdir):
    import jax
    import jax.numpy as jnp

    device = jax.local_devices()[0]

    def phase(name):
        mine = {"phase": name, "jax": jax.__version__, "stats": device.memory_stats()}
        with open(os.path.join(workdir, "phase.json.tmp"), "w") as f:
            json.dump(mine, f)
        os.replace(os.path.join(workdir, "phase.json.tmp"), os.path.join(workdir, "phase.json"))
        while not os.path.exists(os.path.join(workdir, "go-" + name)):
            time.sleep(0.05)

    first = jnp.ones((256 * MIB // 4,), dtype=jnp.float32).block_until_ready()
    phase("one-array")
    second = jnp.ones((1024 * MIB // 4,), dtype=jnp.float32).block_until_ready()
    phase("two-arrays")
    first.delete()
    phase("first-deleted")
    del second


def run_config(args, config):
    print("\n######## JAX, configuration %s" % config)
    child, workdir, env = checks.start_job(args, __file__, CONFIGS, config)
    failures = 0
    try:
        for name in PHASES:
            mine = wait_phase(workdir, child, name)
            if mine is None:
                print("  the job stopped before phase %s" % name)
                return failures + 1
            time.sleep(1.5)
            out = subprocess.run([args.gpuscope, "--json"], capture_output=True, text=True, env=env, check=True).stdout
            failures += report(name, mine, json.loads(out), child.pid)
            open(os.path.join(workdir, "go-" + name), "w").close()
    finally:
        child.terminate()
        child.wait(30)
    return failures


def wait_phase(workdir, child, name):
    deadline = time.time() + 120
    while time.time() < deadline and child.poll() is None:
        try:
            with open(os.path.join(workdir, "phase.json")) as f:
                mine = json.load(f)
            if mine["phase"] == name:
                return mine
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return None


def report(name, mine, snap, pid):
    print("\n== %s (jax %s)" % (name, mine["jax"]))
    print("  job's memory_stats: %s" % json.dumps(mine["stats"]))
    proc = next((p for p in snap["processes"] if p["pid"] == pid), None)
    alloc = (proc or {}).get("allocator")
    if alloc is None:
        print("  gpuscope shows no allocator data for the job: %s" % json.dumps(proc))
        return 1
    dev = alloc["devices"][0]
    failures = 0
    matched = dev["gpu"] is not None
    failures += 0 if matched else 1
    print("  framework %s, backend %s; matched to GPU %s by %s%s" % (
        alloc.get("framework"), alloc.get("backend"), dev["gpu"], dev.get("gpu_match"),
        "" if matched else " (%s) NOT MATCHED" % dev.get("unmatched_reason")))
    for ours, theirs in COMPARED:
        want = mine["stats"].get(theirs)
        ok = dev.get(ours) == want
        failures += 0 if ok else 1
        print("  %-20s %16s %16s %s" % (ours, want, dev.get(ours), "ok" if ok else "MISMATCH"))
    for key in ("inactive_split", "alloc_retries", "ooms", "segments"):
        ok = dev.get(key) is None
        failures += 0 if ok else 1
        print("  %-20s %16s %16s %s" % (key, "not kept", dev.get(key), "ok" if ok else "SHOULD BE null"))
    print("  NVML used %s, overhead %s, fragmentation %s, state %s" % (
        next((g["used_memory"] for g in proc["gpus"] if g["index"] == dev["gpu"]), None),
        dev.get("overhead"), dev.get("fragmentation"), alloc.get("state")))
    return failures


if __name__ == "__main__":
    sys.exit(checks.main(CONFIGS, run_config, lambda args: job(args.job)))
