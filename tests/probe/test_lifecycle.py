"""When the probe samples: no thread until CUDA (or a JAX GPU backend) is up,
started from PyTorch's lazy-init queue where it has one, polling only where
no hook exists; and OutOfMemoryErrors that escape are counted and published
at once. Each case runs in a fresh interpreter: what is imported when is the
point."""

import json
import os
import sys
import textwrap
import unittest

from helpers import ASSETS, STANDIN, ScratchMixin, alloc, child_env, published, run_python, write_json

PRELUDE = textwrap.dedent(
    """
    import json, os, sys, threading, time
    def probe_threads():
        return sum(1 for t in threading.enumerate() if t.name == "gpuscope-probe")
    def wait_for(predicate, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.02)
        return predicate()
    def files():
        d = os.environ["GPUSCOPE_PROBE_DIR"]
        return sorted(n for n in os.listdir(d) if n.endswith(".json")) if os.path.isdir(d) else []
    out = {}
    """
)


class LifecycleCase(ScratchMixin, unittest.TestCase):
    def setUp(self):
        self.make_scratch()
        self.set_script({"devices": {"0": {"alloc": alloc()}}})

    def run_case(self, body, shim=True, interval="0.1", **env):
        pythonpath = (ASSETS, STANDIN) if shim else (STANDIN, ASSETS)
        environment = child_env(
            pythonpath,
            GPUSCOPE_PROBE_DIR=self.probe_dir,
            GPUSCOPE_PROBE_INTERVAL=interval,
            STANDIN_TORCH_SCRIPT=self.script_path,
            STANDIN_TORCH_VIOLATIONS=self.violations_path,
            STANDIN_JAX_SCRIPT=self.jax_script_path,
            **env
        )
        code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
        result = run_python(code, environment)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.violations(), [])
        return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


class NoThreadWithoutCudaTest(LifecycleCase):
    def test_plain_script_forks_with_one_thread_and_no_warning(self):
        # Python 3.12+ warns on os.fork() with more than one thread; the
        # shim must leave a script that never touches a GPU single-threaded.
        state, err = self.run_case(
            """
            import warnings
            warnings.simplefilter("error")
            out["threads_before_fork"] = threading.active_count()
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            out["armed"] = sys.modules["gpuscope_probe"]._armed
            """,
            PYTHONWARNINGS="error::DeprecationWarning",
        )
        self.assertEqual(err, "")
        self.assertEqual(state, {"threads_before_fork": 1, "armed": True})

    def test_torch_imported_but_cuda_never_initialised(self):
        state, _ = self.run_case(
            """
            import torch
            time.sleep(0.3)
            out["threads"] = probe_threads()
            out["queued"] = len(torch._standin.queued_calls)
            out["files"] = files()
            """
        )
        self.assertEqual(state, {"threads": 0, "queued": 1, "files": []})


class LazyInitHookTest(LifecycleCase):
    def test_sampling_starts_from_pytorchs_lazy_init_queue(self):
        state, _ = self.run_case(
            """
            import torch
            out["before"] = probe_threads()
            torch.cuda._standin_init()
            out["after"] = probe_threads()
            out["published"] = wait_for(lambda: files() == ["%d-" % os.getpid()] or bool(files()))
            out["lazy_calls"] = torch._standin.calls.get("_lazy_call")
            """
        )
        self.assertEqual(state, {"before": 0, "after": 1, "published": True, "lazy_calls": 1})

    def test_start_after_cuda_is_initialised_samples_at_once(self):
        # `import gpuscope_probe; start()` late in a program that already
        # runs on the GPU: _lazy_call runs the callable at once.
        state, _ = self.run_case(
            """
            import torch
            torch.cuda._standin_init()
            import gpuscope_probe
            out["started"] = gpuscope_probe.start(0.1)
            out["published"] = wait_for(lambda: bool(files()))
            """,
            shim=False,
        )
        self.assertEqual(state, {"started": True, "published": True})

    def test_without_the_lazy_init_queue_a_thread_waits(self):
        self.set_script({"lazy_call": False, "devices": {"0": {"alloc": alloc()}}})
        state, _ = self.run_case(
            """
            import torch
            out["threads_at_import"] = probe_threads()
            time.sleep(0.2)
            out["files_before_init"] = files()
            torch.cuda._standin_init()
            out["published"] = wait_for(lambda: bool(files()))
            """
        )
        self.assertEqual(state, {"threads_at_import": 1, "files_before_init": [], "published": True})

    def test_jax_import_starts_the_waiting_thread(self):
        write_json(self.jax_script_path, {"backends": ["cuda"], "devices": [
            {"id": 0, "platform": "gpu", "local_hardware_id": 0,
             "stats": {"bytes_in_use": 1, "pool_bytes": 2, "largest_free_block_bytes": 1}}]})
        state, _ = self.run_case(
            """
            out["before"] = probe_threads()
            import jax
            out["after_import"] = probe_threads()
            jax._standin_init_backends()
            out["published"] = wait_for(lambda: bool(files()))
            """
        )
        self.assertEqual(state, {"before": 0, "after_import": 1, "published": True})

    def test_stop_disarms_before_cuda_comes_up(self):
        state, _ = self.run_case(
            """
            import gpuscope_probe, torch
            gpuscope_probe.stop()
            torch.cuda._standin_init()
            time.sleep(0.3)
            out["threads"] = probe_threads()
            out["files"] = files()
            """
        )
        self.assertEqual(state, {"threads": 0, "files": []})

    def test_loader_is_restored_after_the_import(self):
        state, _ = self.run_case(
            """
            import torch, torch.cuda
            out["loader"] = type(torch.cuda.__loader__).__name__
            out["spec_loader"] = type(torch.cuda.__spec__.loader).__name__
            """
        )
        self.assertEqual(state, {"loader": "SourceFileLoader", "spec_loader": "SourceFileLoader"})


class OomEventsTest(LifecycleCase):
    def test_uncaught_oom_in_a_thread_is_counted_and_published_at_once(self):
        self.set_script({"backend": "cudaMallocAsync", "devices": {"0": {"alloc": alloc()}}})
        state, err = self.run_case(
            """
            import torch
            torch.cuda._standin_init()
            wait_for(lambda: bool(files()))
            def step():
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            t = threading.Thread(target=step); t.start(); t.join()
            path = os.path.join(os.environ["GPUSCOPE_PROBE_DIR"], files()[0])
            with open(path) as handle:
                doc = json.load(handle)
            out["oom_events"] = doc["oom_events"]
            out["ooms"] = doc["devices"][0]["ooms"]
            """,
            interval="60",
        )
        # Published without waiting a 60 s interval; the backend's own
        # counter stays unknown.
        self.assertEqual(state, {"oom_events": 1, "ooms": None})
        self.assertIn("OutOfMemoryError", err)  # the previous hook still ran

    def test_oom_that_ends_the_program_leaves_its_file(self):
        self.set_script({"generation": "1.12", "devices": {"0": {"alloc": alloc()}}})
        environment = child_env(
            (ASSETS, STANDIN),
            GPUSCOPE_PROBE_DIR=self.probe_dir,
            GPUSCOPE_PROBE_INTERVAL="0.1",
            STANDIN_TORCH_SCRIPT=self.script_path,
        )
        code = PRELUDE + textwrap.dedent(
            """
            import torch
            torch.cuda._standin_init()
            wait_for(lambda: bool(files()))
            # PyTorch 1.12 has no OutOfMemoryError class: a RuntimeError.
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")
            """
        )
        result = run_python(code, environment)
        self.assertEqual(result.returncode, 1)
        docs = list(published(self.probe_dir).values())
        self.assertEqual(len(docs), 1, result.stderr)
        self.assertEqual(docs[0]["oom_events"], 1)

    def test_other_exceptions_are_not_counted(self):
        state, _ = self.run_case(
            """
            import torch
            torch.cuda._standin_init()
            wait_for(lambda: bool(files()))
            t = threading.Thread(target=lambda: 1 / 0); t.start(); t.join()
            time.sleep(0.3)
            path = os.path.join(os.environ["GPUSCOPE_PROBE_DIR"], files()[0])
            with open(path) as handle:
                out["oom_events"] = json.load(handle)["oom_events"]
            """
        )
        self.assertEqual(state, {"oom_events": 0})


if __name__ == "__main__":
    sys.exit(unittest.main())
