"""Real-GPU acceptance check of gpuscope's allocator figures. Not part of CI.

Needs an NVIDIA GPU, PyTorch with CUDA, and a gpuscope binary (a release
build: `cargo build --release`). It starts a PyTorch job through
`gpuscope run` (so the probe arrives the way users get it), walks the job
through phases with a known memory pattern, and after each phase compares
what `gpuscope --json` reports for the job with what the job reads from
`torch.cuda.memory_stats()` itself:

- allocated, reserved and inactive split must be equal (the job is idle
  while gpuscope looks, and the probe has had time to write);
- NVML's figure for the process minus reserved (gpuscope's `overhead`) must
  look like a CUDA context: between 100 MiB and 2 GiB.

Phases: a first tensor; interleaved large and small tensors with every
other large one freed (split blocks appear); `empty_cache()`; one large
allocation after that.

The job runs once per allocator configuration:

- `native`: the caching allocator, fixed segments: every counter compared;
- `async`: `PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`: allocated and
  reserved compared; what that backend reports as zero (inactive split,
  retries, OOMs, segments) must be `null` in gpuscope, and fragmentation
  `null`;
- `expandable`: `expandable_segments:True` from the environment: the backend
  native, `expandable_segments` true, fragmentation `null`;
- `runtime-expandable`: the same set at run time with
  `torch.cuda.memory._set_allocator_settings` (skipped where the release has
  no such call): source `runtime`, `expandable_segments` true, fragmentation
  `null`. No release up to 2.11 can report the settings in effect (2.11.0
  has no `torch._C._accelerator_getAllocatorSettings`): the probe sees the
  call through the setter bindings it wraps when torch is imported.

Every configuration also checks that the job's device was matched to its
GPU (`gpu` not null, `gpu_match` named).

Usage: python3 tests/gpu/real_torch_check.py [path/to/gpuscope] [--device N]
       [--config native,async,expandable,runtime-expandable]
Exit status 0 when every check passes.
"""

import json
import os
import subprocess
import sys
import time

import checks

MIB = 1 << 20
PROBE_INTERVAL = "0.2"


CONFIGS = {
    "native": {},
    "async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
    "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "runtime-expandable": {},
}


def job(workdir, device, config):
    """The PyTorch side, run under `gpuscope run`."""
    import torch

    if config == "runtime-expandable":
        setter = getattr(getattr(torch.cuda, "memory", None), "_set_allocator_settings", None)
        if setter is None:
            with open(os.path.join(workdir, "skipped"), "w") as f:
                f.write("torch %s has no _set_allocator_settings" % torch.__version__)
            return
        setter("expandable_segments:True")
    torch.cuda.set_device(device)
    keep = []

    def phase(name):
        torch.cuda.synchronize()
        s = torch.cuda.memory_stats(device)
        mine = {
            "phase": name,
            "allocated": s["allocated_bytes.all.current"],
            "reserved": s["reserved_bytes.all.current"],
            "inactive_split": s["inactive_split_bytes.all.current"],
            "backend": torch.cuda.get_allocator_backend(),
            "config": config,
            "torch": torch.__version__,
        }
        with open(os.path.join(workdir, "phase.json.tmp"), "w") as f:
            json.dump(mine, f)
        os.replace(os.path.join(workdir, "phase.json.tmp"), os.path.join(workdir, "phase.json"))
        go = os.path.join(workdir, "go-" + name)
        while not os.path.exists(go):
            time.sleep(0.05)

    keep.append(torch.empty(64 * MIB, dtype=torch.uint8, device="cuda"))
    phase("first-tensor")
    big = []
    for i in range(16):
        big.append(torch.empty(96 * MIB + i * MIB, dtype=torch.uint8, device="cuda"))
        keep.append(torch.empty(3 * MIB + 512 * 1024, dtype=torch.uint8, device="cuda"))
    del big[::2]
    phase("interleaved-then-freed")
    torch.cuda.empty_cache()
    phase("after-empty-cache")
    keep.append(torch.empty(1024 * MIB, dtype=torch.uint8, device="cuda"))
    phase("large-allocation")


def gpuscope_view(gpuscope, pid, env):
    out = subprocess.run([gpuscope, "--json"], capture_output=True, text=True, env=env, check=True).stdout
    snap = json.loads(out)
    proc = next((p for p in snap["processes"] if p["pid"] == pid), None)
    return snap, proc


def run_config(args, config):
    print("\n######## configuration %s" % config)
    child, workdir, env = checks.start_job(
        args, __file__, CONFIGS, config, ["--device", str(args.device), "--config", config]
    )
    failures = 0
    try:
        for name in ("first-tensor", "interleaved-then-freed", "after-empty-cache", "large-allocation"):
            path = os.path.join(workdir, "phase.json")
            deadline = time.time() + 120
            while True:
                try:
                    with open(path) as f:
                        mine = json.load(f)
                    if mine["phase"] == name:
                        break
                except (OSError, ValueError):
                    pass
                if os.path.exists(os.path.join(workdir, "skipped")):
                    with open(os.path.join(workdir, "skipped")) as f:
                        print("  skipped: %s" % f.read())
                    return 0
                if child.poll() is not None or time.time() > deadline:
                    print("the job stopped before phase %s" % name)
                    return 1
                time.sleep(0.05)
            time.sleep(5 * float(PROBE_INTERVAL) + 0.5)
            snap, proc = gpuscope_view(args.gpuscope, child.pid, env)
            failures += report(name, mine, snap, proc)
            open(os.path.join(workdir, "go-" + name), "w").close()
    finally:
        child.terminate()
        child.wait(30)
    return failures


def report(name, mine, snap, proc):
    print("\n== %s (torch %s, backend %s, config %s)" % (name, mine["torch"], mine["backend"], mine["config"]))
    if proc is None or proc.get("allocator") is None:
        print("  gpuscope shows no allocator data for the job: %s" % json.dumps(proc))
        return 1
    alloc = proc["allocator"]
    dev = next((d for d in alloc["devices"] if d["gpu"] is not None), alloc["devices"][0])
    nvml = next((g["used_memory"] for g in proc["gpus"] if g["index"] == dev["gpu"]), None)
    failures = 0
    matched = dev["gpu"] is not None
    failures += 0 if matched else 1
    print("  matched to GPU %s by %s%s" % (dev["gpu"], dev.get("gpu_match"),
                                          "" if matched else " (%s) NOT MATCHED" % dev.get("unmatched_reason")))
    print("  %-16s %16s %16s" % ("", "job's own", "gpuscope"))
    counted = ["allocated", "reserved"]
    if mine["backend"] == "native" and mine["config"] == "native":
        counted.append("inactive_split")
    for key in counted:
        ok = mine[key] == dev[key]
        failures += 0 if ok else 1
        print("  %-16s %16d %16s %s" % (key, mine[key], dev[key], "ok" if ok else "MISMATCH"))
    if mine["backend"] == "cudaMallocAsync":
        # PyTorch reports these as 0 there: gpuscope must say unknown.
        for key in ("inactive_split", "alloc_retries", "ooms", "segments"):
            ok = dev.get(key) is None
            failures += 0 if ok else 1
            print("  %-16s %16s %16s %s" % (key, "not kept", dev.get(key), "ok" if ok else "SHOULD BE null"))
    if mine["config"] != "native" or mine["backend"] != "native":
        ok = dev["fragmentation"] is None
        failures += 0 if ok else 1
        print("  fragmentation %s: %s" % (dev["fragmentation"], "ok (not meaningful here)" if ok else "SHOULD BE null"))
    if mine["config"] in ("expandable", "runtime-expandable"):
        seen = alloc.get("expandable_segments")
        source = alloc.get("alloc_conf_source")
        print("  expandable_segments %s (source %s)" % (seen, source))
        if mine["config"] == "expandable" and seen is not True:
            failures += 1
            print("  expandable_segments from the environment NOT SEEN")
        if mine["config"] == "runtime-expandable" and (seen is not True or source != "runtime"):
            failures += 1
            print("  expandable_segments set at run time NOT SEEN")
    overhead = dev["overhead"]
    print("  NVML used %s, reserved %s, overhead %s (%s MiB)" % (nvml, dev["reserved"], overhead, None if overhead is None else overhead // MIB))
    sane = overhead is not None and 100 * MIB <= overhead <= 2048 * MIB
    failures += 0 if sane else 1
    print("  overhead looks like a CUDA context: %s" % ("ok" if sane else "NO"))
    print("  fragmentation %s, state %s, age %s ms" % (dev["fragmentation"], alloc["state"], alloc["age_ms"]))
    return failures


if __name__ == "__main__":
    sys.exit(checks.main(CONFIGS, run_config, lambda args: job(args.job, args.device, args.config),
                         lambda ap: ap.add_argument("--device", type=int, default=0)))
