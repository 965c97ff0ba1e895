"""The probe's input-pipeline hooks against a real PyTorch, on the CPU (the
PyPI wheel runs without a GPU). Not part of the suite: run it by hand with
an interpreter that has torch installed,

    python3 -m venv /tmp/t && /tmp/t/bin/pip install torch
    /tmp/t/bin/python tests/probe/real_torch.py

and it prints what it checked as JSON, exiting 1 when a check fails.
Without CUDA the probe's thread never starts, so this drives its input
part directly: the wrapper on the real _BaseDataLoaderIter.__next__, the
tick's reading of the real iterators, the environment reader, and a
worker killed by SIGBUS.

Last run, 2026-12-05, torch 2.15.0+cu132 from PyPI on a 2-core VM without a
GPU, Python 3.11.7: the wait share 0.4615 against the loop's own 0.462
without workers, 0.3465 against 0.347 with two; worker PIDs as the
iterator has them, their comm pt_data_worker; a worker killed by SIGBUS
surfaced once as "killed by signal: Bus error" and three times as "exited
unexpectedly" (PyTorch's own is_alive() check won), both kept; the
environment read without a warning (matmul fp32_precision "none",
resolved to "ieee"); the wrapper added about 0.4 us to a 5.9 us __next__.
"""

import json
import multiprocessing.process
import os
import signal
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "assets"))

import torch  # noqa: E402  (the real one: this file is not run with the stand-in on the path)
import gpuscope_probe as gp  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

PROBE_FILE = os.path.abspath(gp.__file__)
probe_calls = []


def trap(name):
    original = getattr(multiprocessing.process.BaseProcess, name)

    def method(self, *args, **kwargs):
        if os.path.abspath(sys._getframe(1).f_code.co_filename) == PROBE_FILE:
            probe_calls.append(name)
        return original(self, *args, **kwargs)

    setattr(multiprocessing.process.BaseProcess, name, method)


for _name in ("is_alive", "join", "terminate", "kill", "close"):
    trap(_name)


class Slow(Dataset):
    """Items that take `fetch_s` (a disk), each 64 KiB of float32."""

    def __init__(self, fetch_s, length=100000):
        self.fetch_s = fetch_s
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        time.sleep(self.fetch_s)
        return torch.zeros(16384)


def wait_share(loader, seconds, step_s):
    """The loop's own measurement between two probe samples, and the
    probe's over the same span."""
    it = iter(loader)
    next(it)
    gp._input_doc(time.monotonic())
    began = time.monotonic()
    waited = 0.0
    while time.monotonic() - began < seconds:
        before = time.monotonic()
        batch = next(it)
        waited += time.monotonic() - before
        del batch
        time.sleep(step_s)
    doc = gp._input_doc(time.monotonic())
    span = time.monotonic() - began
    return it, waited / span, doc["loaders"][0]


def wrapper_cost(batches=20000, rounds=7):
    """Nanoseconds the wrapper adds to a real __next__ (record_function and
    all) over an in-memory dataset without workers: the median of rounds."""
    import statistics

    base = sys.modules["torch.utils.data.dataloader"]._BaseDataLoaderIter
    wrapped = base.__dict__["__next__"]
    original = wrapped._gpuscope_original
    loader = DataLoader(list(range(10 ** 7)), batch_size=None)
    it = iter(loader)
    next(it)
    added = []
    for _ in range(rounds):
        times = []
        for call in (original, wrapped):
            start = time.perf_counter_ns()
            for _ in range(batches):
                call(it)
            times.append(time.perf_counter_ns() - start)
        added.append((times[1] - times[0]) / batches)
    return {"added": round(statistics.median(added)), "unwrapped": round(times[0] / batches)}


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip()
    except OSError:
        return None


def main():
    results = {"torch": torch.__version__, "python": sys.version.split()[0], "checks": {}}
    checks = results["checks"]
    gp._armed = True
    gp._hook_torch_classes(early=False)
    checks["wrapped"] = gp._is_hooked(sys.modules["torch.utils.data.dataloader"], "_BaseDataLoaderIter", "__next__")

    for workers in (0, 2):
        fetch = 0.004 if workers == 0 else 0.015
        loader = DataLoader(Slow(fetch), batch_size=4, num_workers=workers)
        it, loop, doc = wait_share(loader, 4.0, 0.02)
        entry = {"loop": round(loop, 4), "probe": doc["wait_share"], "batches_per_s": doc["batches_per_s"],
                 "ok": doc["wait_share"] is not None and abs(doc["wait_share"] - loop) <= 0.03}
        if workers:
            pids = [w.pid for w in it._workers]
            entry["worker_pids_match"] = doc["worker_pids"] == pids
            entry["worker_comm"] = sorted({comm(pid) for pid in pids})
            entry["settings"] = {k: doc[k] for k in ("num_workers", "prefetch_factor", "persistent_workers",
                                                      "pin_memory", "pin_memory_thread", "batches_ready")}
            entry["batch_bytes"] = doc["batch_bytes"]
            entry["ok"] = entry["ok"] and entry["worker_pids_match"] and doc["batch_bytes"] == 4 * 65536
            os.kill(pids[0], signal.SIGBUS)
            try:
                for _ in range(1000):
                    next(it)
                entry["bus_error"] = "no error"
            except RuntimeError as exc:
                failure = gp._loader_failures[-1] if gp._loader_failures else {}
                entry["bus_error"] = {"message": str(exc)[:120], "kind": failure.get("kind"),
                                      "worker_pid": failure.get("worker_pid") == pids[0]}
                # PyTorch's SIGCHLD handler says "killed by signal: Bus
                # error"; where its own is_alive() check after a 5 s wait
                # (MP_STATUS_CHECK_INTERVAL) gets there first, the worker
                # "exited unexpectedly".
                entry["ok"] = entry["ok"] and failure.get("kind") in ("bus_error", "worker_exited")
        checks["wait_share_%d_workers" % workers] = entry
        del it

    checks["wrapper_ns_per_batch"] = wrapper_cost()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gp._EnvironmentReader().read(torch, {}, time.monotonic())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pass
    scaler = torch.amp.GradScaler("cpu") if hasattr(torch.amp, "GradScaler") else None
    env_now = gp._EnvironmentReader().read(torch, {}, time.monotonic())
    checks["environment"] = {k: env[k] for k in ("torch_version", "cuda_version", "cudnn_version",
                                                  "fp32_precision_matmul", "fp32_precision_conv", "matmul_tf32",
                                                  "cudnn_tf32", "float32_matmul_precision", "cudnn_benchmark")}
    checks["autocast"] = env_now["autocast"]
    checks["grad_scaler"] = env_now["grad_scaler"]
    checks["warnings_while_reading"] = [str(w.message)[:120] for w in caught]
    checks["probe_called_process_methods"] = probe_calls
    del scaler

    ok = (checks["wrapped"] and checks["wait_share_0_workers"]["ok"] and checks["wait_share_2_workers"]["ok"]
          and not probe_calls and env_now["autocast"]["entries"] >= 1)
    results["ok"] = bool(ok)
    print(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
