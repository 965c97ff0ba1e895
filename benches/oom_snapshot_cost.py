"""What a segment walk costs the probed process, for 100, 1,000 and 10,000
blocks (and past the bound): the OOM post-mortem's segment summary (one
walk over torch.cuda.memory_snapshot()'s blocks, in the thread that hit the
OOM, inside PyTorch's out-of-memory observer), and the live segment map the
dashboard asks for while it is open (on the probe's own thread, at most
once a second), JSON encoding of the answer included.

The snapshot itself is built once beforehand, in PyTorch's shape (the
stand-in's builder), so the figures are the probe's own work; real PyTorch
builds that list in C++ on each call and its cost comes on top. Only an
OOM or an explicit request ever pays this: never a timer.

Run: python3 benches/oom_snapshot_cost.py
"""

import os
import statistics
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "assets"))
sys.path.insert(0, os.path.join(ROOT, "tests", "probe", "standin"))

import gpuscope_probe as gp  # noqa: E402
from torch import _standin  # noqa: E402


def snapshot_with(blocks):
    # Segments of 8 blocks, alternating live and free: every one split.
    per_segment = 8
    spec = [{"pool": "large", "blocks": [["active_allocated" if i % 2 == 0 else "inactive", 2]
                                         for i in range(per_segment)]}] * (blocks // per_segment)
    return _standin.build_segments(0, spec)


def main():
    print("python %s" % sys.version.split()[0])
    for blocks in (100, 1000, 10000, 50000, 200000):
        segments = snapshot_with(blocks)
        fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(memory_snapshot=lambda s=segments: s))
        sys.modules["torch"] = fake_torch
        for name, work in (("post-mortem", lambda: gp._segment_summary(0, 64 << 20)),
                           ("live map", lambda: gp.json.dumps(gp._segment_map(0)))):
            times = []
            for _ in range(30):
                started = time.perf_counter()
                work()
                times.append(time.perf_counter() - started)
            print("%-11s %6d blocks (%5d segments): median %.2f ms, max %.2f ms" % (
                name, blocks, len(segments), statistics.median(times) * 1000, max(times) * 1000))


if __name__ == "__main__":
    main()
