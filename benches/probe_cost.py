"""What one sample of the allocator probe costs inside a training process.

The probe's thread holds the GIL while it turns the allocator's counters
into a document (it lets go only inside the file write's system calls), so
the time it spends is time the training loop's Python could not run.

Two figures, median over many samples, per number of devices (and with
four live DataLoaders):
- collect: reading and converting the counters (all under the GIL);
- sample: collect + writing the file atomically (what each interval costs).

And what the probe adds to each batch the training loop takes from a
DataLoader: the wrapper of _BaseDataLoaderIter.__next__, timed against the
same iterator unwrapped. The iterator is shaped as PyTorch's
(torch/utils/data/dataloader.py: __next__ calls _next_data() and counts
_num_yielded) with a _next_data that returns at once, so the difference is
the wrapper's own cost, not a loader's.

The torch here is a minimal module whose memory_stats_as_nested_dict
returns a realistic nested dict built once (the layout the stand-in in
tests/probe/standin produces, which follows PyTorch's), so the figures are
the probe's own work, not a stand-in's script parsing. Real torch builds
that dict in C++ on each call; its cost comes on top.

Run: python3 benches/probe_cost.py
"""

import json
import os
import statistics
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "assets"))
sys.path.insert(0, os.path.join(ROOT, "tests", "probe", "standin"))

GIB = 1 << 30


def nested_stats(standin, devices):
    """The stand-in's full nested layout for `devices` busy devices."""
    script = {
        "backend": "native",
        "devices": {
            str(i): {
                "uuid": "5ea1c0de-0000-4000-8000-%012d" % i,
                "alloc": {"allocated": 20 * GIB, "reserved": 30 * GIB, "inactive_split": 2 * GIB, "segments": 400},
            }
            for i in range(devices)
        },
    }
    path = os.path.join(tempfile.mkdtemp(), "script.json")
    with open(path, "w") as f:
        json.dump(script, f)
    os.environ["STANDIN_TORCH_SCRIPT"] = path
    standin.cuda._standin_init()
    return [standin.cuda.memory_stats_as_nested_dict(i) for i in range(devices)]


def fake_torch(stats):
    torch = types.ModuleType("torch")
    torch.__version__ = "2.5.1"
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: len(stats),
        memory_stats_as_nested_dict=lambda i: stats[i],
        get_allocator_backend=lambda: "native",
        get_device_properties=lambda i: types.SimpleNamespace(uuid="5ea1c0de-0000-4000-8000-%012d" % i),
        host_memory_stats=lambda: {"allocated_bytes.all.current": GIB, "allocated_bytes.all.peak": GIB},
    )
    torch.cuda = cuda
    return torch


def measure(standin, devices, rounds=2000, loaders=0):
    stats = nested_stats(standin, devices)
    # Only the minimal torch stays loaded: the stand-in's own modules answer
    # from a script file, which real torch's never do.
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]
    sys.modules["torch"] = fake_torch(stats)
    live = []
    if loaders:
        module = bare_dataloader_module()
        sys.modules[module.__name__] = module
        gpuscope_probe_module()._armed = True
        live = [module._SingleProcessDataLoaderIter() for _ in range(loaders)]
    os.environ["GPUSCOPE_PROBE_DIR"] = os.path.join(tempfile.mkdtemp(), "gpuscope", "probes")
    import gpuscope_probe

    probe = gpuscope_probe._Probe(1.0)
    probe.cycle()  # warm: the directory, the uuid cache; wraps the loader
    for it in live:
        next(it)
    collect, sample = [], []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        probe._collect()
        collect.append(time.perf_counter_ns() - t)
        t = time.perf_counter_ns()
        probe.cycle()
        sample.append(time.perf_counter_ns() - t)
    for it in live:
        next(it)
    probe.close()
    sys.modules.pop("torch.utils.data.dataloader", None)
    return statistics.median(collect) / 1000, statistics.median(sample) / 1000


def gpuscope_probe_module():
    import gpuscope_probe

    return gpuscope_probe


def bare_dataloader_module():
    """A torch.utils.data.dataloader with PyTorch's __next__ and nothing
    behind it: a batch is ready at once."""
    module = types.ModuleType("torch.utils.data.dataloader")

    class _BaseDataLoaderIter(object):
        def __init__(self):
            self._num_yielded = 0
            self._index_sampler = object()

        def _next_data(self):
            return self._batch

        def __next__(self):
            data = self._next_data()
            self._num_yielded += 1
            return data

    class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
        _batch = ([1, 2], {"label": 3})

    module._BaseDataLoaderIter = _BaseDataLoaderIter
    module._SingleProcessDataLoaderIter = _SingleProcessDataLoaderIter
    return module


def per_batch(batches=200000, rounds=15):
    """Nanoseconds the wrapper adds to one __next__: the median over rounds
    of (wrapped - unwrapped) time for `batches` calls."""
    import gpuscope_probe

    module = bare_dataloader_module()
    sys.modules[module.__name__] = module
    bare = module._SingleProcessDataLoaderIter()
    gpuscope_probe._armed = True
    gpuscope_probe._hook_torch_classes(early=True)
    wrapped = module._SingleProcessDataLoaderIter()
    original = module._BaseDataLoaderIter.__dict__["__next__"]._gpuscope_original

    def run_bare(it, n):
        call = original
        start = time.perf_counter_ns()
        for _ in range(n):
            call(it)
        return time.perf_counter_ns() - start

    def run_wrapped(it, n):
        call = type(it).__next__
        start = time.perf_counter_ns()
        for _ in range(n):
            call(it)
        return time.perf_counter_ns() - start

    run_wrapped(wrapped, 1000)  # adopts the iterator
    added = []
    for _ in range(rounds):
        base = run_bare(bare, batches)
        added.append((run_wrapped(wrapped, batches) - base) / batches)
    del sys.modules[module.__name__]
    return statistics.median(added), min(added)


def main():
    import torch as standin  # the stand-in, kept only to build layouts

    print("python %s" % sys.version.split()[0])
    for devices in (1, 8):
        collect, sample = measure(standin, devices)
        print("%d device(s): collect %.0f us (GIL held), sample with file write %.0f us" % (devices, collect, sample))
    collect, sample = measure(standin, 1, loaders=4)
    print("1 device, 4 DataLoaders: collect %.0f us (GIL held), sample with file write %.0f us" % (collect, sample))
    median, best = per_batch()
    print("DataLoader __next__ wrapper: %.0f ns added per batch (median of 15 rounds; best %.0f ns)" % (median, best))


if __name__ == "__main__":
    main()
