#!/usr/bin/env python3
"""Processes that come and go on the benchmark node, as restarted ranks
and short jobs do: every second the N longest-lived of the given PIDs end
and N new processes take their places in the simulated driver's scenario
(written to a temporary name and renamed over it, so the driver never
reads half a file), until killed; then every process of the set still
running ends too. The given PIDs are this script's to end: nothing else
may signal them once it runs.

    churn.py SCENARIO N PID...
"""

import os
import re
import signal
import subprocess
import sys
import time


def replace_pids(scenario, swaps):
    with open(scenario) as f:
        text = f.read()
    for old, new in swaps:
        text, n = re.subn(r"^pid = %d$" % old, "pid = %d" % new, text, flags=re.M)
        assert n == 1, (old, n)
    tmp = scenario + ".churn"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, scenario)


def main():
    scenario, n, pids = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
    started = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(1)
            old, pids = pids[:n], pids[n:]
            new = []
            for _ in old:
                child = subprocess.Popen(["sleep", "86400"])
                started[child.pid] = child
                new.append(child.pid)
            replace_pids(scenario, zip(old, new))
            for pid in old:
                os.kill(pid, signal.SIGKILL)
                child = started.pop(pid, None)
                if child is not None:
                    child.wait()
            pids += new
    finally:
        for pid in pids:
            child = started.pop(pid, None)
            if child is not None:
                child.kill()
            else:
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
