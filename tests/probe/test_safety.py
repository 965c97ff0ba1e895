"""The probe never disturbs the program it runs in."""

import os
import textwrap
import threading
import time
import unittest

from helpers import (
    ASSETS,
    STANDIN,
    InProcessCase,
    ScratchMixin,
    alloc,
    child_env,
    gp,
    published,
    run_python,
    wait_for,
)


def probe_threads():
    return [t for t in threading.enumerate() if t.name == "gpuscope-probe" and t.is_alive()]


class ForbiddenCallsTest(InProcessCase):
    def test_the_stand_in_catches_forbidden_calls(self):
        # The detector itself works, from any thread.
        with self.assertRaises(AssertionError):
            self.torch.cuda.empty_cache()
        errors = []

        def other_thread():
            try:
                self.torch.cuda.memory_stats_as_nested_dict()
            except AssertionError as exc:
                errors.append(exc)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        self.assertEqual(len(errors), 1)
        lines = self.violations()
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].startswith("empty_cache pid=%d" % os.getpid()))
        os.remove(self.violations_path)

    def test_probe_thread_makes_no_forbidden_call(self):
        self.set_script({
            "backend": "native",
            "host": {"allocated_bytes.current": 1, "allocated_bytes.peak": 2},
            "device_count": 3,
            "devices": {"0": {"alloc": alloc()}, "1": {"empty": True}, "2": {"alloc": alloc()}},
        })
        probe = self.new_probe(interval=0.1)
        probe.launch()
        time.sleep(0.2)
        self.init_cuda()
        self.assertTrue(wait_for(lambda: published(self.probe_dir), 3))
        self.set_script({
            "backend": "native",
            "device_count": 3,
            "devices": {"0": {"alloc": alloc(alloc_retries=1)}, "2": {"alloc": alloc(ooms=2)}},
        })
        wait_for(lambda: self.only_document()["devices"][0]["alloc_retries"] == 1, 3)
        time.sleep(0.3)
        probe.close()
        probe.join(2)
        self.assertEqual(probe.errors, 0)
        calls = self.torch._standin.calls
        self.assertGreater(calls["memory_stats_as_nested_dict"], 3)
        self.assertEqual(calls["get_device_properties"], 2)


class ErrorTest(InProcessCase):
    def test_failing_calls_are_counted_never_raised(self):
        self.init_cuda()
        probe = self.new_probe()
        for name in ("is_initialized", "device_count", "memory_stats_as_nested_dict"):
            self.set_script({"raise": {name: "CUDA error: boom"},
                             "devices": {"0": {"alloc": alloc()}}})
            before = probe.errors
            self.assertEqual(probe.cycle(), (False, False, True), name)
            self.assertEqual(probe.errors, before + 1, name)
        self.assertEqual(published(self.probe_dir), {})

        # Recovered: the file carries the failures counted so far.
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        self.assertEqual(probe.cycle(), (True, False, False))
        self.assertEqual(self.only_document()["errors"], 3)

    def test_partial_failures_still_publish(self):
        self.set_script({
            "raise": {"host_memory_stats": "boom", "get_allocator_backend": "boom"},
            "host": {"allocated_bytes.current": 1},
            "device_count": 2,
            "devices": {"0": {"raise": "device 0 unhappy"}, "1": {"alloc": alloc()}},
        })
        self.init_cuda()
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (True, False, False))
        doc = self.only_document()
        self.assertEqual([d["index"] for d in doc["devices"]], [1])
        self.assertIsNone(doc["pinned_host"])
        self.assertIsNone(doc["backend"])
        self.assertEqual(doc["errors"], 3)
        # Calls that keep failing are given up, the rest goes on.
        for _ in range(5):
            probe.cycle()
        self.assertEqual(self.only_document()["errors"], 3 + 5 + 2 + 2)

    def test_thread_survives_errors_and_the_program_never_sees_them(self):
        self.set_script({"raise": {"device_count": "boom"}})
        self.init_cuda()
        probe = self.new_probe(interval=0.1)
        probe.launch()
        self.assertTrue(wait_for(lambda: probe.errors >= 3, 3))
        self.assertTrue(probe.running())
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        self.assertTrue(wait_for(lambda: published(self.probe_dir), 3))
        self.assertGreaterEqual(self.only_document()["errors"], 3)

    def test_thread_gives_up_after_consecutive_failures(self):
        self.set_script({"raise": {"device_count": "boom"}})
        self.init_cuda()
        saved = gp._MAX_CONSECUTIVE_FAILURES
        gp._MAX_CONSECUTIVE_FAILURES = 4
        self.addCleanup(setattr, gp, "_MAX_CONSECUTIVE_FAILURES", saved)
        probe = self.new_probe(interval=0.1)
        probe.launch()
        self.assertTrue(wait_for(lambda: not probe._thread.is_alive(), 3))
        self.assertEqual(probe.errors, 4)
        self.assertFalse(probe.running())

    def test_giving_up_removes_a_stale_file(self):
        self.init_cuda()
        saved = gp._MAX_CONSECUTIVE_FAILURES
        gp._MAX_CONSECUTIVE_FAILURES = 3
        self.addCleanup(setattr, gp, "_MAX_CONSECUTIVE_FAILURES", saved)
        probe = self.new_probe(interval=0.1)
        probe.launch()
        self.assertTrue(wait_for(lambda: published(self.probe_dir), 3))
        self.set_script({"raise": {"memory_stats_as_nested_dict": "boom"},
                         "devices": {"0": {"alloc": alloc()}}})
        self.assertTrue(wait_for(lambda: not probe._thread.is_alive(), 3))
        self.assertEqual(os.listdir(self.probe_dir), [])


class LifecycleTest(InProcessCase):
    def setUp(self):
        super().setUp()
        self.addCleanup(gp.stop)

    def test_start_is_idempotent_and_stop_removes_the_file(self):
        self.init_cuda()
        self.assertTrue(gp.start(0.1))
        self.assertTrue(gp.start(0.1))
        self.assertTrue(gp.start())
        self.assertEqual(len(probe_threads()), 1)
        self.assertTrue(wait_for(lambda: published(self.probe_dir), 3))
        gp.stop()
        self.assertEqual(os.listdir(self.probe_dir), [])
        self.assertTrue(wait_for(lambda: not probe_threads(), 2))
        time.sleep(0.25)
        self.assertEqual(os.listdir(self.probe_dir), [])
        # Startable again after stop().
        self.assertTrue(gp.start(0.1))
        self.assertTrue(wait_for(lambda: published(self.probe_dir), 3))
        gp.stop()
        gp.stop()
        self.assertEqual(os.listdir(self.probe_dir), [])

    def test_disabled_by_environment(self):
        for value in ("0", "off", "false"):
            os.environ["GPUSCOPE_PROBE"] = value
            self.assertFalse(gp.start(0.1))
            self.assertEqual(probe_threads(), [])

    def test_start_returns_at_once(self):
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        began = time.monotonic()
        gp.start(60)
        self.assertLess(time.monotonic() - began, 0.5)


class OutsideTheProcessTest(ScratchMixin, unittest.TestCase):
    def setUp(self):
        self.make_scratch()

    def test_without_torch_nothing_is_published_and_nothing_imported(self):
        code = textwrap.dedent(
            """
            import sys, time
            sys.path.insert(0, %r)
            import gpuscope_probe
            assert gpuscope_probe.start(0.1)
            time.sleep(0.5)
            leaked = [m for m in ("torch", "jax", "numpy") if m in sys.modules]
            print("leaked", leaked)
            """ % ASSETS
        )
        env = child_env([STANDIN], GPUSCOPE_PROBE_DIR=self.probe_dir)
        result = run_python(code, env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "leaked []")
        self.assertEqual(result.stderr, "")
        self.assertEqual(published(self.probe_dir), {})

    def test_interpreter_exit_is_quiet_and_removes_the_file(self):
        code = textwrap.dedent(
            """
            import os, sys, time
            sys.path.insert(0, %r)
            import gpuscope_probe, torch
            torch.cuda._standin_init()
            gpuscope_probe.start(0.1)
            directory = os.environ["GPUSCOPE_PROBE_DIR"]
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                names = os.listdir(directory) if os.path.isdir(directory) else []
                if any(n.endswith(".json") for n in names):
                    break
                time.sleep(0.01)
            print([n for n in os.listdir(directory) if n.endswith(".json")])
            time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.13)
            """ % ASSETS
        )
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        env = child_env(
            [STANDIN], GPUSCOPE_PROBE_DIR=self.probe_dir, STANDIN_TORCH_SCRIPT=self.script_path
        )
        for _ in range(4):
            result = run_python(code, env)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stderr, "")
            self.assertIn(".json", result.stdout)
            self.assertEqual(os.listdir(self.probe_dir), [])


if __name__ == "__main__":
    unittest.main()
