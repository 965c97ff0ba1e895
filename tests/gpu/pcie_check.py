"""Real-GPU check of gpuscope's PCIe rates. Not part of CI.

Needs an NVIDIA GPU, PyTorch with CUDA and a gpuscope binary. A thread
copies a pinned 1 GiB buffer to the GPU without pause (then, in a second
phase, from the GPU back to the host) and counts what it moved; meanwhile
`gpuscope --json --loop-ms 500 --count 5` streams snapshots. From the
second snapshot on, the GPU's `rx_bytes_per_s` (host to GPU; `tx` in the
second phase) is compared with the rate the copy itself achieved.
A real driver's PCIe byte counters are 32 bits and wrap several times a
second at these rates, so gpuscope reads them over a 20 ms window, as
NVML's own sampling does. The counter itself is exact: read back to back
on an H100 (driver 580.159.04) under a 59 GB/s copy, it advanced every
0.11 ms by 6.3 MB. The copy is not steady, though: single 1 GiB copies
took 19.5 ms at the median and up to 40 ms, so a 20 ms window inside a
slow copy reads down to half the phase's average (seen: 25-30 GB/s in
gpuscope's windows and 38 GB/s in pynvml's, for a 54 GB/s average). So
each snapshot must lie within the range of rates the single copies of
its phase ran at (with a 20% margin either side), where a wrap taken
wrongly would be off by 2^32 bytes in 20 ms, 215 GB/s; and the
snapshots' median within 25% of the phase's average.

Usage: python3 tests/gpu/pcie_check.py [path/to/gpuscope]
"""

import json
import subprocess
import sys
import threading
import time

GIB = 1 << 30


def main():
    import torch

    gpuscope = sys.argv[1] if len(sys.argv) > 1 else "target/release/gpuscope"
    host = torch.empty(GIB, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(GIB, dtype=torch.uint8, device="cuda")
    failures = 0
    for direction, key in (("host to GPU", "rx_bytes_per_s"), ("GPU to host", "tx_bytes_per_s")):
        failures += phase(torch, gpuscope, host, dev, direction, key)
    print("FAILED: %d check(s)" % failures if failures else "all checks passed")
    return 1 if failures else 0


def phase(torch, gpuscope, host, dev, direction, key):
    stop = threading.Event()
    moved = [0]
    seconds = []

    def copy():
        while not stop.is_set():
            t = time.perf_counter()
            if direction == "host to GPU":
                dev.copy_(host, non_blocking=True)
            else:
                host.copy_(dev, non_blocking=True)
            torch.cuda.synchronize()
            moved[0] += host.numel()
            seconds.append(time.perf_counter() - t)

    worker = threading.Thread(target=copy)
    worker.start()
    time.sleep(0.5)
    start, before = time.perf_counter(), moved[0]
    # The warm-up's copies (the first is slow) are not the phase's.
    seconds.clear()
    out = subprocess.run([gpuscope, "--json", "--loop-ms", "500", "--count", "5"],
                         capture_output=True, text=True, check=True).stdout
    achieved = (moved[0] - before) / (time.perf_counter() - start)
    stop.set()
    worker.join()
    slowest, fastest = host.numel() / max(seconds), host.numel() / min(seconds)
    rates = [json.loads(line)["gpus"][0]["pcie"] for line in out.splitlines() if line.strip()]
    print("\n== %s: the copy moved %.1f GB/s (single copies %.1f to %.1f GB/s)" % (
        direction, achieved / 1e9, slowest / 1e9, fastest / 1e9))
    failures = 0
    for i, pcie in enumerate(rates):
        seen = pcie[key]
        if i == 0:
            ok = seen is None
            verdict = "ok (no interval yet)" if ok else "SHOULD BE null"
        else:
            ok = seen is not None and 0.8 * slowest <= seen <= 1.2 * fastest
            verdict = "ok" if ok else "OUT OF RANGE"
        failures += 0 if ok else 1
        shown = "null" if seen is None else "%.1f GB/s" % (seen / 1e9)
        other = pcie["tx_bytes_per_s" if key == "rx_bytes_per_s" else "rx_bytes_per_s"]
        print("  snapshot %d: %s %s (other direction %s) %s" % (
            i, key, shown, "null" if other is None else "%.2f GB/s" % (other / 1e9), verdict))
    later = sorted(p[key] for p in rates[1:] if p[key] is not None)
    median = later[len(later) // 2] if later else None
    ok = median is not None and abs(median - achieved) <= 0.25 * achieved
    failures += 0 if ok else 1
    print("  median %s: %s" % ("null" if median is None else "%.1f GB/s" % (median / 1e9), "ok" if ok else "MISMATCH"))
    return failures


if __name__ == "__main__":
    sys.exit(main())
