"""A pretend training process for gpuscope's probe tests (Python and Rust).

It imports the stand-in torch next to this file, marks CUDA initialised in
its own process, then idles until killed; what its "allocator" reports comes
from the script named by STANDIN_TORCH_SCRIPT (format: torch/_standin.py).

    python3 run_trainer.py [flags]

    --probe             import gpuscope_probe (from --probe-path) and call
                        start(); without it the probe must come from
                        gpuscope's sitecustomize on PYTHONPATH
    --probe-path DIR    where gpuscope_probe.py is (default: <repo>/assets)
    --interval S        interval passed to start() (default: the probe's own)
    --script PATH       sets STANDIN_TORCH_SCRIPT for this process and children
    --no-init           never mark CUDA initialised
    --init-delay S      mark CUDA initialised after S seconds (default 0)
    --fork              os.fork() a child, like a DataLoader worker: it calls
                        start() again when --probe is given, then idles until
                        the parent is gone (it must never publish when the
                        parent had initialised CUDA)
    --fork-init         with --fork: the child initialises CUDA itself, like a
                        rank started by a forking launcher (it publishes when
                        the parent had not initialised CUDA: use --no-init)
    --spawn-rank1       start a multiprocessing 'spawn' child with RANK=1 that
                        imports the stand-in, marks CUDA initialised, calls
                        start() when --probe is given (else relies on
                        sitecustomize), and idles until the parent is gone
    --mp-rank1 METHOD   the same with another start method: spawn, fork or
                        forkserver (fork needs --no-init, as with real CUDA)
    --set-allocator-settings S
                        after initialising CUDA, call
                        torch.cuda.memory._set_allocator_settings(S), as NeMo
                        and vLLM do (where the modelled release has it)
    --oom-after S       S seconds after initialising CUDA, let a
                        torch.cuda.OutOfMemoryError escape from a worker
                        thread (the process lives on)
    --oom-caught MIB    after initialising CUDA, an allocation of MIB on device 0
                        fails for good (the allocator's observers fire, then
                        the OutOfMemoryError), and the training code catches it
    --exec-from FILE    in the main thread, between steps, run the script whose
                        path appears in FILE (what sys.remote_exec does at a
                        safe point in Python 3.14, which these machines lack)
    --loader JSON       train from a stand-in DataLoader instead of idling:
                        {"num_workers": 2, "fetch_s": 0.02, "burn_s": 0,
                        "item_bytes": 65536, "batch_size": 2, "step_s": 0.012,
                        "pin_memory": false, "prefetch_factor": 2,
                        "persistent_workers": false, "epoch_batches": 500}:
                        each item waits fetch_s and burns burn_s of CPU in a
                        worker, each step sleeps step_s (the GPU's work)
    --loop-report PATH  with --loader: the loop's own measurement, rewritten
                        every half second: {"wait_share", "batches_per_s",
                        "window_s", "batches"} over the last 30 s, epoch
                        starts apart (as the probe counts them)
    --seconds S         exit normally after S seconds (default: run until
                        SIGTERM or SIGINT, which also exit normally, so the
                        probe's atexit cleanup runs; SIGKILL leaves the file)
    --pids-file PATH    append one JSON line per process once it is ready:
                        {"role": "main"|"fork"|"spawn"|"worker", "pid": N,
                        "rank": R} (a DataLoader's workers once started)

Children also exit when their parent disappears, so a killed test leaves no
stragglers.
"""

import argparse
import json
import os
import signal
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROBE_PATH = os.path.normpath(os.path.join(HERE, "..", "..", "..", "assets"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description="pretend trainer for gpuscope probe tests")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--probe-path", default=DEFAULT_PROBE_PATH)
    parser.add_argument("--interval", type=float, default=None)
    parser.add_argument("--script", default=None)
    parser.add_argument("--no-init", action="store_true")
    parser.add_argument("--init-delay", type=float, default=0.0)
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("--fork-init", action="store_true")
    parser.add_argument("--spawn-rank1", action="store_true")
    parser.add_argument("--mp-rank1", choices=("spawn", "fork", "forkserver"), default=None)
    parser.add_argument("--set-allocator-settings", default=None)
    parser.add_argument("--oom-after", type=float, default=None)
    parser.add_argument("--oom-caught", type=float, default=None)
    parser.add_argument("--exec-from", default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--pids-file", default=None)
    parser.add_argument("--loader", type=json.loads, default=None)
    parser.add_argument("--loop-report", default=None)
    return parser.parse_args(argv)


def report(pids_file, role, pid=None):
    if pids_file:
        line = json.dumps({"role": role, "pid": pid or os.getpid(), "rank": os.environ.get("RANK")})
        with open(pids_file, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def start_probe(args):
    if not args.probe:
        return
    if args.probe_path not in sys.path:
        sys.path.insert(0, args.probe_path)
    import gpuscope_probe

    gpuscope_probe.start(args.interval)


def idle_while_parent(parent_pid):
    # A forkserver child's parent is the fork server, not the trainer: ask
    # whether the trainer itself is still there.
    while _alive(parent_pid):
        time.sleep(0.05)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def exit_normally(signum, frame):
    sys.exit(0)


def spawn_child(args, parent_pid):
    # Runs in the child multiprocessing started: a fresh interpreter (spawn),
    # a fork of the fork server (forkserver) or of this process (fork).
    signal.signal(signal.SIGTERM, exit_normally)
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    start_probe(args)
    import torch

    torch.cuda._standin_init()
    report(args.pids_file, "spawn")
    idle_while_parent(parent_pid)


def fork_child(args, parent_pid):
    try:
        if args.probe:
            import gpuscope_probe

            gpuscope_probe.start(args.interval)
        if args.fork_init:
            import torch

            torch.cuda._standin_init()
        report(args.pids_file, "fork")
        idle_while_parent(parent_pid)
    finally:
        if not args.fork_init:
            # Like multiprocessing's fork workers: no atexit handlers of the parent.
            os._exit(0)
    # A rank leaves like any Python program, atexit handlers and all.
    sys.exit(0)


def raise_oom_in_a_thread(torch, delay):
    import threading

    def step():
        time.sleep(delay)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    threading.Thread(target=step, name="oom-step", daemon=True).start()


def exec_requested(trigger):
    try:
        with open(trigger, "r", encoding="utf-8") as handle:
            script = handle.read().strip()
    except OSError:
        return
    os.unlink(trigger)
    with open(script, "r", encoding="utf-8") as handle:
        code = compile(handle.read(), script, "exec")
    exec(code, {"__name__": "__remote_exec__"})


class LoopClock(object):
    """The loop's own view of its waits, kept as the probe keeps it: over
    the last 30 s, each epoch's first batch apart."""

    WINDOW_S = 30.0

    def __init__(self, path):
        self.path = path
        self.events = []  # (end, seconds in next(), first of its epoch)
        self.began = time.monotonic()
        self.batches = 0
        self.written = 0.0

    def note(self, start, end, first):
        self.events.append((end, end - start, first))
        self.batches += 1
        now = time.monotonic()
        while self.events and self.events[0][0] < now - self.WINDOW_S:
            del self.events[0]
        if self.path and now - self.written >= 0.5:
            self.written = now
            self.write(now)

    def write(self, now):
        span = min(now - self.began, self.WINDOW_S)
        steady = span - sum(w for _, w, first in self.events if first)
        waited = sum(w for _, w, first in self.events if not first)
        doc = {"wait_share": waited / steady if steady > 0 else None,
               "batches_per_s": len(self.events) / span if span > 0 else None,
               "window_s": span, "batches": self.batches}
        temp = self.path + ".tmp"
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        os.replace(temp, self.path)


def train(torch, args, deadline):
    """Epochs over a stand-in DataLoader, each step a sleep (a training
    thread waiting on its GPU)."""
    from torch.utils.data import DataLoader, StandinDataset

    spec = dict(args.loader)
    dataset = StandinDataset(length=spec.get("epoch_batches", 500) * spec.get("batch_size", 2),
                             item_bytes=spec.get("item_bytes", 65536), fetch_s=spec.get("fetch_s", 0.0),
                             burn_s=spec.get("burn_s", 0.0))
    workers = spec.get("num_workers", 0)
    loader = DataLoader(dataset, batch_size=spec.get("batch_size", 2), num_workers=workers,
                        pin_memory=spec.get("pin_memory", False),
                        prefetch_factor=spec.get("prefetch_factor", 2 if workers else None),
                        persistent_workers=spec.get("persistent_workers", False))
    clock = LoopClock(args.loop_report)
    reported = set()
    step_s = spec.get("step_s", 0.01)
    while deadline is None or time.monotonic() < deadline:
        it = iter(loader)
        first = True
        while deadline is None or time.monotonic() < deadline:
            start = time.monotonic()
            try:
                batch = next(it)
            except StopIteration:
                break
            clock.note(start, time.monotonic(), first)
            first = False
            for worker in getattr(it, "_workers", ()):
                if worker.pid not in reported:
                    reported.add(worker.pid)
                    report(args.pids_file, "worker", worker.pid)
            del batch
            time.sleep(step_s)
        del it


def main(argv=None):
    args = parse_args(argv)
    if args.script:
        os.environ["STANDIN_TORCH_SCRIPT"] = os.path.abspath(args.script)
    signal.signal(signal.SIGTERM, exit_normally)
    signal.signal(signal.SIGINT, exit_normally)

    start_probe(args)
    import torch

    if not args.no_init:
        if args.init_delay > 0:
            time.sleep(args.init_delay)
        torch.cuda._standin_init()
    if args.set_allocator_settings is not None:
        torch.cuda.memory._set_allocator_settings(args.set_allocator_settings)
    if args.oom_after is not None:
        raise_oom_in_a_thread(torch, args.oom_after)
    if args.oom_caught is not None:
        time.sleep(0.3)  # the probe's first sample attaches the observer
        try:
            torch.cuda._standin_oom(0, int(args.oom_caught * (1 << 20)))
        except RuntimeError:
            pass

    children = []
    spawned = None
    if args.fork:
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() with threads running (the probe's
            # here; a real CUDA process has driver threads anyway).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            fork_child(args, os.getppid())
        children.append(pid)
    method = args.mp_rank1 or ("spawn" if args.spawn_rank1 else None)
    if method:
        import multiprocessing

        context = multiprocessing.get_context(method)
        saved = os.environ.get("RANK")
        os.environ["RANK"] = "1"
        try:
            spawned = context.Process(target=spawn_child, args=(args, os.getpid()), daemon=True)
            spawned.start()
        finally:
            if saved is None:
                del os.environ["RANK"]
            else:
                os.environ["RANK"] = saved

    report(args.pids_file, "main")
    try:
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        if args.loader is not None:
            train(torch, args, deadline)
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.05)
            if args.exec_from:
                exec_requested(args.exec_from)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
        if spawned is not None:
            spawned.terminate()
            spawned.join(5)


if __name__ == "__main__":
    main()
