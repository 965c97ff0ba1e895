"""The input pipeline: how long the training thread waits for its
DataLoaders (against a measurement taken in the loop itself), the loaders'
settings and workers, /dev/shm, and what is kept when workers die."""

import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from helpers import ASSETS, STANDIN, InProcessCase, alloc, child_env, gp, run_python, wait_for

MIB = 1 << 20


def reset_input_state():
    gp._iterators.clear()
    gp._iterator_refs.clear()
    gp._loaders.clear()
    gp._loader_serial = 0
    del gp._loader_failures[:]
    gp._last_loader_failure = (None, None, 0.0)
    gp._last_failure_publish = -1e18
    gp._autocast[:] = [0, None, None, None]
    gp._grad_scalers.clear()


class InputCase(InProcessCase):
    """A probe in this process, armed (the wrapper measures only then), its
    loaders' state fresh for each test."""

    def setUp(self):
        super().setUp()
        saved = (gp._armed, gp._probe)
        self.addCleanup(lambda: setattr(gp, "_armed", saved[0]) or setattr(gp, "_probe", saved[1]))
        reset_input_state()
        self.addCleanup(reset_input_state)
        gp._armed = True
        self.shm = tempfile.mkdtemp(prefix="gpuscope-shm-")
        self.addCleanup(shutil.rmtree, self.shm, True)
        os.environ["STANDIN_TORCH_SHM_DIR"] = self.shm
        self.addCleanup(os.environ.pop, "STANDIN_TORCH_SHM_DIR", None)

    def start(self, script=None):
        self.set_script(script or {"devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        probe = self.new_probe(interval=60.0)
        gp._probe = probe
        probe.cycle()  # wraps the classes the stand-in torch loaded
        return probe

    def loader(self, **kwargs):
        from torch.utils.data import DataLoader, StandinDataset

        dataset = StandinDataset(**{k: kwargs.pop(k) for k in list(kwargs)
                                    if k in ("length", "item_bytes", "fetch_s", "burn_s", "fail_at")})
        return DataLoader(dataset, **kwargs)

    def input_doc(self, probe):
        probe.cycle()
        return self.only_document()["input"]

    def loader_doc(self, probe):
        loaders = self.input_doc(probe)["loaders"]
        self.assertEqual(len(loaders), 1, loaders)
        return loaders[0]


class WaitShareTest(InputCase):
    def measure(self, probe, it, seconds, step_s):
        """The loop's own measurement between two probe samples: the share
        of wall time spent in next()."""
        next(it)  # the epoch's first batch: kept apart by both
        probe.cycle()
        began = time.monotonic()
        waited = 0.0
        batches = 0
        while time.monotonic() - began < seconds:
            before = time.monotonic()
            batch = next(it)
            waited += time.monotonic() - before
            batches += 1
            del batch
            time.sleep(step_s)  # the step: the training thread waits on the GPU
        probe.cycle()
        span = time.monotonic() - began
        return waited / span, batches / span

    def check(self, **settings):
        probe = self.start()
        loader = self.loader(length=100000, batch_size=2, **settings)
        it = iter(loader)
        share, rate = self.measure(probe, it, 2.5, 0.012)
        doc = self.loader_doc(probe)
        self.assertIsNotNone(doc["wait_share"], doc)
        self.assertAlmostEqual(doc["wait_share"], share, delta=0.03)
        self.assertAlmostEqual(doc["batches_per_s"], rate, delta=rate * 0.1)
        self.assertGreater(share, 0.2, "the loader is slow enough to matter")
        self.assertEqual(doc["epochs"], 1)
        return doc, it

    def test_single_process_wait_matches_the_loop(self):
        doc, _ = self.check(fetch_s=0.005)
        self.assertEqual((doc["num_workers"], doc["workers"], doc["worker_pids"]), (0, None, None))
        self.assertEqual(doc["iterator"], "_SingleProcessDataLoaderIter")
        self.assertEqual(doc["shm_need"], 0, "without workers nothing goes through /dev/shm")

    def test_worker_processes_wait_matches_the_loop(self):
        # Two workers at 2 x 20 ms a batch: one batch every 20 ms against a
        # 12 ms step, so the loop waits about 40 % of the time.
        doc, it = self.check(fetch_s=0.02, num_workers=2)
        self.assertEqual(doc["worker_pids"], [w.pid for w in it._workers])
        self.assertEqual(doc["iterator"], "_MultiProcessingDataLoaderIter")

    def test_epoch_starts_are_kept_apart(self):
        probe = self.start()
        loader = self.loader(length=8, batch_size=2, fetch_s=0.01)
        for _ in range(3):
            for _ in loader:
                pass
        doc = self.loader_doc(probe)
        # Three epochs of one loader: one record, not three.
        self.assertEqual((doc["batches"], doc["epochs"], doc["id"]), (12, 3, 1))
        self.assertGreaterEqual(doc["first_batch_wait_s"], 0.02)
        self.assertFalse(doc["live"], "the last epoch's iterator is gone")

    def test_a_wait_in_progress_counts(self):
        probe = self.start()
        loader = self.loader(length=100, batch_size=1, fetch_s=1.5)
        it = iter(loader)
        next(it)
        import threading

        thread = threading.Thread(target=next, args=(it,))
        thread.start()
        time.sleep(1.2)
        try:
            doc = self.loader_doc(probe)
        finally:
            thread.join()
        self.assertGreater(doc["waiting_s"], 1.0)

    def test_iterators_made_before_the_probe_hooked_are_measured(self):
        code = textwrap.dedent("""
            import json, sys, time
            sys.path.insert(0, %r)
            sys.path.insert(0, %r)
            import torch
            torch.cuda._standin_init()
            from torch.utils.data import DataLoader, StandinDataset
            it = iter(DataLoader(StandinDataset(fetch_s=0.002), batch_size=2))
            next(it)
            import gpuscope_probe as gp
            gp.start(60.0)
            hooked_at_start = gp._is_hooked(sys.modules["torch.utils.data.dataloader"], "_BaseDataLoaderIter",
                                            "__next__")
            probe = gp._Probe(60.0)
            gp._probe = probe
            probe.cycle()
            for _ in range(20):
                next(it)
            probe.cycle()
            doc = gp._input_doc(time.monotonic())
            print(json.dumps({"hooked_at_start": hooked_at_start, "batches": doc["loaders"][0]["batches"]}))
            gp.stop()
        """) % (ASSETS, STANDIN)
        out = run_python(code, child_env(GPUSCOPE_PROBE_DIR=self.probe_dir, STANDIN_TORCH_SCRIPT=self.script_path,
                                         STANDIN_TORCH_VIOLATIONS=self.violations_path))
        self.assertEqual(out.returncode, 0, out.stderr)
        result = json.loads(out.stdout)
        # start() after torch's import wraps at once; the iterator made
        # before is followed from its next batch on.
        self.assertEqual(result, {"hooked_at_start": True, "batches": 20})


class SettingsTest(InputCase):
    def test_settings_workers_and_shared_memory(self):
        probe = self.start({"generation": "2.5", "devices": {"0": {"alloc": alloc()}}})
        loader = self.loader(length=1000, item_bytes=64 * 1024, batch_size=4, num_workers=3, pin_memory=True,
                             prefetch_factor=3, persistent_workers=True)
        it = iter(loader)
        batch = next(it)
        del batch
        time.sleep(0.3)  # the workers fill the queue
        doc = self.loader_doc(probe)
        self.assertEqual(
            {k: doc[k] for k in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "workers",
                                 "pin_memory_thread", "dataset", "consumer_thread", "live")},
            {"num_workers": 3, "pin_memory": True, "prefetch_factor": 3, "persistent_workers": True, "workers": 3,
             "pin_memory_thread": True, "dataset": "StandinDataset", "consumer_thread": "MainThread",
             "live": True})
        self.assertEqual(doc["worker_pids"], [w.pid for w in it._workers])
        self.assertGreaterEqual(doc["batches_ready"], 1)
        self.assertEqual(doc["batch_bytes"], 4 * 64 * 1024)
        # FACTS: about batch bytes x (prefetch_factor x num_workers + 2).
        self.assertEqual(doc["shm_need"], 4 * 64 * 1024 * (3 * 3 + 2))
        # From 2.5 the workers and the pin thread carry PyTorch's names.
        for pid in doc["worker_pids"]:
            self.assertTrue(wait_for(lambda: _comm("/proc/%d/comm" % pid) == "pt_data_worker", 3))
        native = it._pin_memory_thread.native_id
        self.assertEqual(_comm("/proc/self/task/%d/comm" % native), "pt_data_pin")

        shm = self.input_doc(probe)["shm"]
        info = os.statvfs("/dev/shm")
        self.assertEqual(shm["total"], info.f_blocks * info.f_frsize)
        self.assertAlmostEqual(shm["free"], info.f_bavail * info.f_frsize, delta=64 * MIB)
        self.assertEqual(shm["need"], doc["shm_need"])
        self.assertEqual(shm["sharing_strategy"], "file_descriptor")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.assertEqual(shm["open_files_limit"], soft if soft != resource.RLIM_INFINITY else None)
        self.torch.multiprocessing.set_sharing_strategy("file_system")
        self.addCleanup(self.torch.multiprocessing.set_sharing_strategy, "file_descriptor")
        self.assertEqual(self.input_doc(probe)["shm"]["sharing_strategy"], "file_system")

    def test_before_2_5_nothing_is_named(self):
        probe = self.start({"generation": "2.1", "devices": {"0": {"alloc": alloc()}}})
        it = iter(self.loader(length=100, batch_size=2, num_workers=1))
        next(it)
        (pid,) = self.loader_doc(probe)["worker_pids"]
        self.assertNotEqual(_comm("/proc/%d/comm" % pid), "pt_data_worker")

    def test_batches_in_flight_occupy_shared_memory_until_dropped(self):
        self.start()
        it = iter(self.loader(length=100, item_bytes=MIB, batch_size=1, num_workers=2, prefetch_factor=2))
        batch = next(it)
        self.assertTrue(wait_for(lambda: len(os.listdir(self.shm)) >= 4, 3), os.listdir(self.shm))
        self.assertTrue(os.path.exists(batch.shm_path))
        path = batch.shm_path
        del batch
        self.assertFalse(os.path.exists(path))
        # The rest, queued or received out of order, go with the iterator.
        del it
        self.assertTrue(wait_for(lambda: not os.listdir(self.shm), 3), os.listdir(self.shm))

    def test_the_probe_never_calls_is_alive_on_a_worker(self):
        probe = self.start()
        it = iter(self.loader(length=100, batch_size=1, num_workers=2))
        next(it)
        os.kill(it._workers[0].pid, signal.SIGKILL)
        time.sleep(0.2)
        for _ in range(3):
            self.input_doc(probe)
        # The trap works: the same call from the probe's file is caught.
        code = compile("worker.is_alive()", os.path.join(ASSETS, "gpuscope_probe.py"), "eval")
        with self.assertRaises(AssertionError):
            eval(code, {"worker": it._workers[0]})
        self.assertEqual(len(self.violations()), 1)
        os.remove(self.violations_path)
        # The dead worker was never reaped by the probe: PyTorch's own check
        # still finds it and says how it died.
        with self.assertRaises(RuntimeError) as raised:
            for _ in range(100):
                next(it)
        self.assertIn("is killed by signal: Killed", str(raised.exception))


class BoundsTest(InputCase):
    def test_batch_bytes_walk_is_bounded(self):
        Tensor = self.torch.Tensor
        self.assertEqual(gp._batch_bytes({"x": Tensor(100), "y": [Tensor(10), (Tensor(1), "label")]}), 111)
        self.assertEqual(gp._batch_bytes(Tensor(5)), 5)
        self.assertIsNone(gp._batch_bytes(["no tensors", 3]))
        self.assertIsNone(gp._batch_bytes([Tensor(1)] * (gp._MAX_BATCH_NODES + 1)), "too many to walk")
        deep = Tensor(7)
        for _ in range(gp._MAX_BATCH_DEPTH):
            deep = [deep]
        self.assertEqual(gp._batch_bytes(deep), 7)
        self.assertIsNone(gp._batch_bytes([deep]), "deeper than the bound: not seen")

        class Hostile(Tensor):
            @property
            def nbytes(self):
                raise RuntimeError("nested tensors have no nbytes")

            def numel(self):
                raise RuntimeError("nor numel")

        self.assertIsNone(gp._batch_bytes([Tensor(1), Hostile(3)]))
        cycle = []
        cycle.append(cycle)
        self.assertIsNone(gp._batch_bytes(cycle))

    def test_hostile_iterator_attributes_are_bounded(self):
        probe = self.start()
        from torch.utils.data import dataloader

        class Worker(object):
            def __init__(self, pid):
                self._pid = pid

            @property
            def pid(self):
                if self._pid == 13:
                    raise ValueError("process object is closed")
                return self._pid

        class Queue(object):
            def qsize(self):
                raise NotImplementedError  # macOS's multiprocessing queue

        class Odd(dataloader._BaseDataLoaderIter):
            def __init__(self):
                self._num_yielded = 0
                self._num_workers = -3
                self._pin_memory = "yes"
                self._persistent_workers = None
                self._prefetch_factor = 2 ** 70
                self._workers = [Worker(pid) for pid in range(10, 10010)]
                self._data_queue = Queue()
                self._dataset = type("D" * 5000 + "\x1b[2J", (), {})()

            def _next_data(self):
                return 1

        it = Odd()
        next(it)
        doc = self.loader_doc(probe)
        self.assertEqual(doc["workers"], 10000)
        self.assertEqual(len(doc["worker_pids"]), gp._MAX_WORKER_PIDS - 1, "the closed one left out")
        self.assertNotIn(13, doc["worker_pids"])
        self.assertEqual((doc["num_workers"], doc["pin_memory"], doc["persistent_workers"], doc["prefetch_factor"]),
                         (None, None, None, None))
        self.assertIsNone(doc["batches_ready"])
        self.assertEqual(len(doc["dataset"]), gp._MAX_LABEL)
        self.assertIsNone(doc["shm_need"], "unknown settings: no estimate")
        self.assertLess(len(json.dumps(self.only_document())), gp._MAX_FILE_BYTES)

    def test_loaders_past_the_bounds(self):
        probe = self.start()
        loaders = [self.loader(length=10, batch_size=1) for _ in range(gp._MAX_TRACKED_LOADERS + 3)]
        iterators = [iter(loader) for loader in loaders]
        for it in iterators:
            next(it)
        doc = self.input_doc(probe)
        self.assertEqual(len(doc["loaders"]), gp._MAX_LOADERS)
        self.assertEqual(doc["loaders_left_out"], gp._MAX_TRACKED_LOADERS - gp._MAX_LOADERS)
        self.assertEqual(sum(1 for v in gp._iterators.values() if v is False), 3, "followed no further")
        del iterators, it
        self.assertEqual(gp._iterators, {}, "entries leave with their iterators")


class FailureTest(InputCase):
    def next_error(self, it):
        with self.assertRaises(Exception) as raised:
            for _ in range(100):
                next(it)
        return raised.exception

    def test_a_worker_killed_by_a_bus_error_is_kept_like_an_oom(self):
        probe = self.start()
        it = iter(self.loader(length=100, item_bytes=1024, batch_size=2, num_workers=2, pin_memory=True))
        next(it)
        before = self.only_document()["seq"]
        pid = it._workers[1].pid
        os.kill(pid, signal.SIGBUS)
        exc = self.next_error(it)
        # Unchanged: PyTorch's own message and type reach the program.
        self.assertIs(type(exc), RuntimeError)
        self.assertTrue(str(exc).startswith("DataLoader worker (pid %d) is killed by signal: Bus error." % pid))
        doc = self.only_document()
        self.assertGreater(doc["seq"], before, "published at once")
        (failure,) = doc["input"]["failures"]
        self.assertEqual({k: failure[k] for k in ("kind", "exception", "loader", "worker_pid", "num_workers",
                                                  "pin_memory", "prefetch_factor", "persistent_workers",
                                                  "batch_bytes", "sharing_strategy")},
                         {"kind": "bus_error", "exception": "RuntimeError", "loader": 1, "worker_pid": pid,
                          "num_workers": 2, "pin_memory": True, "prefetch_factor": 2, "persistent_workers": False,
                          "batch_bytes": 2048, "sharing_strategy": "file_descriptor"})
        self.assertEqual(failure["message"], str(exc))
        self.assertEqual(failure["shm_total"], os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize)
        self.assertTrue(probe.keep_at_exit, "the file outlives the process, as an OOM's does")
        # The exception hook sees the same exception: not a second failure.
        gp._note_exception(exc)
        self.assertEqual(len(gp._loader_failures), 1)

    def test_a_worker_exception_is_re_raised_unchanged_and_kept(self):
        probe = self.start()
        it = iter(self.loader(length=100, batch_size=2, num_workers=1, fail_at=5))
        exc = self.next_error(it)
        self.assertIs(type(exc), KeyError)
        self.assertIn("Caught KeyError in DataLoader worker process 0", str(exc))
        (failure,) = self.only_document()["input"]["failures"]
        self.assertEqual((failure["kind"], failure["exception"]), ("worker_exception", "KeyError"))
        self.assertFalse(probe.keep_at_exit, "a program may catch this one and go on")

    def test_the_death_seen_by_an_exception_hook_finds_its_loader(self):
        probe = self.start()
        it = iter(self.loader(length=100, batch_size=2, num_workers=2))
        next(it)
        self.input_doc(probe)  # the settings, with the worker pids
        pid = it._workers[0].pid
        # PyTorch's SIGCHLD handler raises in the main thread wherever it is.
        exc = RuntimeError("DataLoader worker (pid %d) is killed by signal: Bus error. It is possible that "
                           "dataloader's workers are out of shared memory. Please try to raise your shared "
                           "memory limit." % pid)
        gp._note_exception(exc)
        (failure,) = self.only_document()["input"]["failures"]
        self.assertEqual((failure["kind"], failure["loader"], failure["worker_pid"], failure["num_workers"]),
                         ("bus_error", 1, pid, 2))
        # Other exceptions that reach a hook are none of the loader's.
        gp._note_exception(ValueError("bad learning rate"))
        self.assertEqual(len(gp._loader_failures), 1)

    def test_failure_kinds_and_long_messages(self):
        kinds = {
            "Caught RuntimeError in DataLoader worker process 3.\nOriginal Traceback (most recent call last):\n"
            "  ...\nRuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_3>: No space left "
            "on device (28)": "shm_exhausted",
            "DataLoader worker (pid 17) is killed by signal: Killed. ": "worker_killed",
            "DataLoader worker (pid(s) 17, 18) exited unexpectedly": "worker_exited",
            "Too many open files. Communication with the workers is no longer possible.": "too_many_open_files",
            "received 0 items of ancdata": "too_many_open_files",
            "DataLoader timed out after 5 seconds": "timeout",
            "CUDA error: an illegal memory access": None,
        }
        for message, kind in kinds.items():
            self.assertEqual(gp._failure_kind(message), kind, message)
        long = "Caught OSError in DataLoader worker process 0.\n" + "x" * 5000 + "\nOSError: the real cause"
        bounded = gp._bounded_message(long)
        self.assertLessEqual(len(bounded), gp._MAX_MESSAGE)
        self.assertTrue(bounded.startswith("Caught OSError") and bounded.endswith("the real cause"))


class ShmExhaustionTest(InputCase):
    """A trainer in a mount namespace of its own whose /dev/shm is a 4 MiB
    tmpfs: batches of 1 MiB, 2 workers x prefetch 2 (need about 6 MiB)."""

    CODE = textwrap.dedent("""
        import json, os, sys
        sys.path.insert(0, %r)
        sys.path.insert(0, %r)
        import gpuscope_probe as gp
        gp.start(60.0)
        import torch
        torch.cuda._standin_init()
        probe = gp._Probe(60.0)
        gp._probe = probe
        probe.cycle()
        from torch.utils.data import DataLoader, StandinDataset
        it = iter(DataLoader(StandinDataset(item_bytes=1 << 20, fetch_s=0.01), batch_size=1, num_workers=2))
        batches = []
        try:
            for _ in range(50):
                batches.append(next(it))  # held, as a slow consumer would
            print(json.dumps({"error": None}))
        except Exception as exc:
            failure = gp._loader_failures[-1]
            print(json.dumps({"error": str(exc), "type": type(exc).__name__, "failure": failure,
                              "loader": gp._input_doc(__import__("time").monotonic())["loaders"][0]}))
        os._exit(0)
    """) % (ASSETS, STANDIN)

    def run_in_small_shm(self, generation):
        if shutil.which("unshare") is None:
            self.skipTest("needs unshare(1) for a private /dev/shm")
        self.set_script({"generation": generation, "devices": {"0": {"alloc": alloc()}}})
        shell = "mount -t tmpfs -o size=4m tmpfs /dev/shm && exec %s -c \"$0\"" % sys.executable
        env = child_env(GPUSCOPE_PROBE_DIR=self.probe_dir, STANDIN_TORCH_SCRIPT=self.script_path,
                        STANDIN_TORCH_VIOLATIONS=self.violations_path)
        env.pop("STANDIN_TORCH_SHM_DIR", None)  # the real /dev/shm, in its namespace
        try:
            out = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", shell, self.CODE],
                                 env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                 timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("the trainer hung")
        if out.returncode != 0 and "mount" in out.stderr:
            self.skipTest("no user namespaces here: " + out.stderr.strip())
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_a_full_shm_kills_a_worker_with_sigbus_before_2_10(self):
        result = self.run_in_small_shm("2.5")
        self.assertIn("is killed by signal: Bus error", result["error"])
        failure = result["failure"]
        self.assertEqual((failure["kind"], failure["shm_total"]), ("bus_error", 4 * MIB))
        self.assertLess(failure["shm_free"], MIB, "the last view shows it full")
        self.assertEqual(result["loader"]["shm_need"], MIB * (2 * 2 + 2))

    def test_a_full_shm_fails_the_reservation_from_2_10(self):
        result = self.run_in_small_shm("2.11")
        self.assertIn("unable to allocate shared memory(shm)", result["error"])
        self.assertIn("No space left on device (28)", result["error"])
        self.assertEqual((result["failure"]["kind"], result["type"]), ("shm_exhausted", "RuntimeError"))
        # The view is taken when the error reaches the training thread; by
        # then the failed worker's siblings may have released a batch or
        # two (seen: 1.95 MiB free of 4 on a loaded machine), but not all.
        self.assertLess(result["failure"]["shm_free"], 3 * MIB)


class EnvironmentTest(InputCase):
    def environment(self, script):
        script.setdefault("devices", {"0": {"alloc": alloc()}})
        probe = self.start(script)
        return self.only_document()["environment"], probe

    def test_versions_flags_and_arch_before_the_fp32_precision_settings(self):
        env, _ = self.environment({
            "generation": "2.5", "cuda_version": "12.4", "cudnn_version": [8, 9, 2],
            "arch_flags": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
            "flags": {"allow_tf32_matmul": True, "allow_tf32_cudnn": False, "float32_matmul_precision": "high",
                      "benchmark": True},
            "devices": {"0": {"alloc": alloc(), "capability": [8, 6]}, "1": {"alloc": alloc(), "capability": [10, 0]}},
        })
        self.assertEqual(
            {k: env[k] for k in ("torch_version", "cuda_version", "hip_version", "cudnn_version",
                                 "cudnn_compiled_version", "matmul_tf32", "cudnn_tf32", "float32_matmul_precision",
                                 "fp32_precision_matmul", "cudnn_benchmark", "cudnn_deterministic")},
            {"torch_version": "2.5.1", "cuda_version": "12.4", "hip_version": None, "cudnn_version": "8.9.2",
             "cudnn_compiled_version": "8.9.2", "matmul_tf32": True, "cudnn_tf32": False,
             "float32_matmul_precision": "high", "fp32_precision_matmul": None, "cudnn_benchmark": True,
             "cudnn_deterministic": False})
        # torch's own rule (_check_cubins): sm_86 runs on sm_80 code; a
        # Blackwell (10.0) has nothing built for it.
        self.assertEqual(env["devices"], [{"index": 0, "capability": "8.6", "arch_supported": True},
                                          {"index": 1, "capability": "10.0", "arch_supported": False}])

    def test_the_fp32_precision_settings_are_read_without_the_deprecated_getters(self):
        env, _ = self.environment({"generation": "2.11", "cudnn_version": [9, 8, 0], "cudnn_runtime_getter": False,
                                   "flags": {"fp32_precision": {"matmul": "tf32", "conv": "ieee"}}})
        self.assertEqual((env["fp32_precision_matmul"], env["fp32_precision_conv"]), ("tf32", "ieee"))
        self.assertEqual((env["matmul_tf32"], env["cudnn_tf32"], env["float32_matmul_precision"]),
                         (True, False, None))
        self.assertEqual(env["cudnn_version"], "9.8.0", "from cudnnGetVersion's integer")
        # The stand-in records a violation for any call of the legacy
        # getters in this release (checked at cleanup).

    def test_an_unset_fp32_precision_defers_as_pytorch_resolves_it(self):
        # The newest binding's name; "none" out of the box for matmul, as a
        # real 2.15.0 answers: the default, IEEE, no TF32.
        env, _ = self.environment({"generation": "newest"})
        self.assertEqual((env["fp32_precision_matmul"], env["matmul_tf32"]), ("ieee", False))
        self.assertEqual((env["fp32_precision_conv"], env["cudnn_tf32"]), ("tf32", True))
        env, _ = self.environment({"generation": "newest", "flags": {"fp32_precision": {"all": "tf32"}}})
        self.assertEqual((env["fp32_precision_matmul"], env["matmul_tf32"]), ("tf32", True), "from cuda's all")

    def test_without_cudnn_or_cuda(self):
        env, _ = self.environment({"cudnn_version": None, "cuda_version": None, "hip_version": "6.2",
                                   "arch_flags": None})
        self.assertEqual((env["cudnn_version"], env["cuda_version"], env["hip_version"], env["arch_flags"]),
                         (None, None, "6.2", None))
        self.assertEqual(env["devices"][0]["arch_supported"], None)

    def test_autocast_and_grad_scalers(self):
        _, probe = self.environment({"generation": "2.5"})
        torch = self.torch
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pass
        with torch.cuda.amp.autocast():  # a subclass: goes through the same __enter__
            pass
        with torch.autocast("cuda", enabled=False):
            pass
        scalers = [torch.amp.grad_scaler.GradScaler(), torch.cuda.amp.grad_scaler.GradScaler(enabled=False)]
        probe.cycle()
        env = self.only_document()["environment"]
        autocast = env["autocast"]
        self.assertEqual((autocast["hooked"], autocast["entries"], autocast["device_type"], autocast["dtype"]),
                         (True, 2, "cuda", "torch.float16"))
        self.assertLess(autocast["last_s_ago"], 5)
        # Wrapped late (by a tick, not at import): scalers made before would
        # be missed, but these came after.
        self.assertEqual(env["grad_scaler"], {"count": 2, "enabled": True})
        del scalers
        probe.cycle()
        self.assertEqual(self.only_document()["environment"]["grad_scaler"], {"count": None, "enabled": None},
                         "none seen, and the wrapper came late: no figure")

    def test_flags_are_read_at_most_every_ten_seconds(self):
        _, probe = self.environment({"flags": {"benchmark": False}})
        self.set_script({"devices": {"0": {"alloc": alloc()}}, "flags": {"benchmark": True}})
        probe.cycle()
        self.assertFalse(self.only_document()["environment"]["cudnn_benchmark"])
        probe._torch.environment.due = 0.0
        probe.cycle()
        self.assertTrue(self.only_document()["environment"]["cudnn_benchmark"])


class ImportOrderTest(InputCase):
    def test_the_classes_are_wrapped_as_torch_loads_them(self):
        # `gpuscope run`: start() before the program imports torch. The
        # import watcher wraps each class as its module loads, before the
        # program can make a GradScaler, so none seen is a count of 0.
        code = textwrap.dedent("""
            import json, sys
            sys.path.insert(0, %r)
            sys.path.insert(0, %r)
            import gpuscope_probe as gp
            gp.start()
            import torch
            hooked = {name: gp._is_hooked(sys.modules[module], cls, attr) for name, module, cls, attr in (
                ("loader", "torch.utils.data.dataloader", "_BaseDataLoaderIter", "__next__"),
                ("autocast", "torch.amp.autocast_mode", "autocast", "__enter__"),
                ("scaler", "torch.amp.grad_scaler", "GradScaler", "__init__"))}
            print(json.dumps({"hooked": hooked, "threads": [t.name for t in __import__("threading").enumerate()],
                              "scalers": gp._grad_scaler_doc()}))
        """) % (ASSETS, STANDIN)
        out = run_python(code, child_env(GPUSCOPE_PROBE_DIR=self.probe_dir, STANDIN_TORCH_SCRIPT=self.script_path,
                                         STANDIN_TORCH_VIOLATIONS=self.violations_path))
        self.assertEqual(out.returncode, 0, out.stderr)
        result = json.loads(out.stdout)
        self.assertEqual(result["hooked"], {"loader": True, "autocast": True, "scaler": True})
        self.assertEqual(result["scalers"], {"count": 0, "enabled": None})
        self.assertEqual(result["threads"], ["MainThread"], "no thread before CUDA is initialised")


class NoTorchImportTest(unittest.TestCase):
    def test_the_input_parts_import_nothing(self):
        code = textwrap.dedent("""
            import json, sys, time
            sys.path.insert(0, %r)
            import gpuscope_probe as gp
            gp.start()
            gp._hook_torch_classes(early=False)
            doc = gp._input_doc(time.monotonic())
            print(json.dumps({"leaked": [m for m in ("torch", "jax", "numpy") if m in sys.modules],
                              "hooked": doc["hooked"], "loaders": doc["loaders"]}))
        """) % ASSETS
        out = run_python(code, child_env())
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), {"leaked": [], "hooked": False, "loaders": []})


def _comm(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


if __name__ == "__main__":
    unittest.main()
