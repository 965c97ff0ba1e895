#!/usr/bin/env python3
"""Probe files for benchmark processes, as live probes keep them: one per
PID in DIR (made 0700, as the probe makes it), written to a temporary name
and renamed over the old one once a second, each time with a new sequence
number and written time, until killed. A PID may carry the bare UUID of
the GPU its process runs on (PID:UUID), which the file then names its
device by, as PyTorch's device properties give it to a real probe.

    probe_files.py DIR PID[:UUID]...
"""

import json
import os
import sys
import time

G = 1 << 30


def start_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def body(pid, ticks, seq, uuid):
    device = {
        "index": 0, "uuid": uuid, "allocated": 20 * G, "allocated_peak": 24 * G, "reserved": 30 * G,
        "reserved_peak": 32 * G, "active": 20 * G, "active_peak": 24 * G, "inactive_split": 2 * G,
        "inactive_split_peak": 3 * G, "requested": 20 * G, "requested_peak": 24 * G, "segments": 400,
        "alloc_retries": 0, "ooms": 0, "device_allocs": 1500, "device_frees": 1100,
        "largest_free_block": None, "bytes_limit": None,
    }
    return json.dumps({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": ticks, "seq": seq,
        "written_unix_ms": int(time.time() * 1000), "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": "expandable_segments:False",
        "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments": False, "rank": 0, "local_rank": 0,
        "world_size": 1, "pinned_host": {"current": G, "peak": G}, "devices": [device],
    })


def main():
    directory = sys.argv[1]
    uuids = {}
    for arg in sys.argv[2:]:
        pid, _, uuid = arg.partition(":")
        uuids[int(pid)] = uuid or None
    pids = list(uuids)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ticks = {pid: start_ticks(pid) for pid in pids}
    seq = 0
    while True:
        seq += 1
        for pid in pids:
            name = os.path.join(directory, "%d-%d.json" % (pid, ticks[pid]))
            tmp = os.path.join(directory, ".%d-%d.%x.tmp" % (pid, ticks[pid], seq))
            with open(tmp, "w") as f:
                f.write(body(pid, ticks[pid], seq, uuids[pid]))
            os.rename(tmp, name)
        time.sleep(1.0)


if __name__ == "__main__":
    main()
