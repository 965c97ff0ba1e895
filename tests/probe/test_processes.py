"""Process boundaries: fork children, spawn children, and the sitecustomize shim."""

import json
import os
import subprocess
import sys
import textwrap
import time
import unittest

from helpers import (
    ASSETS,
    STANDIN,
    TRAINER,
    ScratchMixin,
    alloc,
    child_env,
    published,
    read_pids,
    run_python,
    wait_for,
)


class TrainerCase(ScratchMixin, unittest.TestCase):
    def setUp(self):
        self.make_scratch()
        self.pids_file = os.path.join(self.tmp, "pids.jsonl")

    def launch(self, flags, pythonpath=(STANDIN,), **env):
        environment = child_env(
            pythonpath,
            GPUSCOPE_PROBE_DIR=self.probe_dir,
            STANDIN_TORCH_SCRIPT=self.script_path,
            STANDIN_TORCH_VIOLATIONS=self.violations_path,
            **env
        )
        process = subprocess.Popen(
            [sys.executable, TRAINER, "--pids-file", self.pids_file] + list(flags),
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        self.addCleanup(process.communicate)
        self.addCleanup(lambda: process.poll() is None and process.terminate())
        return process

    def roles(self, *wanted):
        def ready():
            found = {entry["role"]: entry for entry in read_pids(self.pids_file)}
            return found if all(role in found for role in wanted) else None

        found = wait_for(ready, 10)
        self.assertTrue(found, "trainer processes did not come up")
        return found

    def by_pid(self):
        return {doc["pid"]: doc for doc in published(self.probe_dir).values()}

    def stop(self, process):
        process.terminate()
        out, err = process.communicate(timeout=10)
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(err, "")
        self.assertEqual(self.violations(), [])
        self.assertEqual(os.listdir(self.probe_dir), [])


class ForkTest(TrainerCase):
    def test_dataloader_style_child_of_a_cuda_process_stays_silent(self):
        # The parent initialised CUDA before forking: PyTorch marks the child
        # a bad fork (is_initialized() False, initialising raises), so even
        # a start() in the child never makes it publish.
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        process = self.launch(["--probe", "--interval", "0.1", "--fork"])
        roles = self.roles("main", "fork")
        self.assertTrue(wait_for(lambda: roles["main"]["pid"] in self.by_pid(), 5))
        time.sleep(0.5)  # five intervals
        self.assertEqual(list(self.by_pid()), [roles["main"]["pid"]])
        os.kill(roles["fork"]["pid"], 0)  # the child was alive all along
        self.stop(process)

    def test_rank_forked_before_cuda_publishes_once_it_initialises(self):
        # A launcher that forks its ranks before any CUDA use: the child
        # initialises CUDA itself and is a rank like any other.
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        process = self.launch(["--probe", "--interval", "0.1", "--no-init", "--fork", "--fork-init"])
        roles = self.roles("main", "fork")
        child = roles["fork"]["pid"]
        self.assertTrue(wait_for(lambda: child in self.by_pid(), 5))
        self.assertEqual(list(self.by_pid()), [child])
        self.stop(process)

    def check_mp_rank(self, method, flags, pythonpath=(STANDIN,), **env):
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        process = self.launch(flags + ["--mp-rank1", method], pythonpath=pythonpath, **env)
        roles = self.roles("main", "spawn")
        child = roles["spawn"]["pid"]
        self.assertTrue(wait_for(lambda: child in self.by_pid(), 10), method)
        self.assertEqual(self.by_pid()[child]["rank"], 1)
        return process

    def test_multiprocessing_fork_rank_publishes(self):
        process = self.check_mp_rank("fork", ["--probe", "--interval", "0.1", "--no-init"])
        self.stop(process)

    def test_multiprocessing_forkserver_rank_publishes(self):
        process = self.check_mp_rank("forkserver", ["--probe", "--interval", "0.1"])
        self.stop(process)

    def test_forkserver_rank_through_sitecustomize(self):
        process = self.check_mp_rank(
            "forkserver", [], pythonpath=(ASSETS, STANDIN), GPUSCOPE_PROBE_INTERVAL="0.1"
        )
        self.stop(process)


class SpawnTest(TrainerCase):
    script = {
        "devices": {"0": {"alloc": alloc(allocated=100)}},
        "by_rank": {"1": {"devices": {"1": {"alloc": alloc(allocated=111)}}}},
    }

    def check_two_ranks(self, process):
        roles = self.roles("main", "spawn")
        main_pid, child_pid = roles["main"]["pid"], roles["spawn"]["pid"]

        # The launcher sets RANK in its own environment for the moment the
        # child starts (as launchers built on multiprocessing do): a sample
        # the parent's probe takes then carries it, the next one must not.
        def settled():
            docs = self.by_pid()
            return {main_pid, child_pid} <= set(docs) and docs[main_pid]["rank"] is None

        self.assertTrue(wait_for(settled, 10))
        docs = self.by_pid()
        self.assertEqual(set(docs), {main_pid, child_pid})
        self.assertIsNone(docs[main_pid]["rank"])
        self.assertEqual(docs[child_pid]["rank"], 1)
        self.assertEqual([(d["index"], d["allocated"]) for d in docs[main_pid]["devices"]],
                         [(0, 100)])
        self.assertEqual([(d["index"], d["allocated"]) for d in docs[child_pid]["devices"]],
                         [(1, 111)])
        self.stop(process)

    def test_spawn_child_publishes_its_own_file_with_rank_1(self):
        self.set_script(self.script)
        process = self.launch(["--probe", "--interval", "0.1", "--spawn-rank1"])
        self.check_two_ranks(process)

    def test_gpuscope_run_path_through_sitecustomize(self):
        # What `gpuscope run` does: no code change, the shim on PYTHONPATH,
        # inherited by the spawn child.
        self.set_script(self.script)
        process = self.launch(
            ["--spawn-rank1"], pythonpath=(ASSETS, STANDIN), GPUSCOPE_PROBE_INTERVAL="0.1"
        )
        self.check_two_ranks(process)

    def test_no_file_until_cuda_is_initialised(self):
        self.set_script(self.script)
        process = self.launch(["--probe", "--interval", "0.1", "--init-delay", "0.6"])
        time.sleep(0.4)
        self.assertEqual(self.by_pid(), {})
        self.assertTrue(wait_for(lambda: process.pid in self.by_pid(), 5))
        self.stop(process)


SHOW_STATE = textwrap.dedent(
    """
    import json, os, sys, threading
    module = sys.modules.get("sitecustomize")
    print(json.dumps({
        "sitecustomize": getattr(module, "__file__", None),
        "probe_loaded": "gpuscope_probe" in sys.modules,
        "probe_armed": bool(getattr(sys.modules.get("gpuscope_probe"), "_armed", False)),
        "probe_thread": any(t.name == "gpuscope-probe" for t in threading.enumerate()),
        "threads": threading.active_count(),
        "marker": os.environ.get("CHAINED_MARKER"),
        "path": sys.path,
    }))
    """
)


class SitecustomizeTest(ScratchMixin, unittest.TestCase):
    def setUp(self):
        self.make_scratch()
        self.other = os.path.join(self.tmp, "other")
        os.mkdir(self.other)

    def write_other(self, body):
        with open(os.path.join(self.other, "sitecustomize.py"), "w") as handle:
            handle.write(textwrap.dedent(body))

    def run_with_shim(self, pythonpath, **env):
        result = run_python(
            SHOW_STATE, child_env(pythonpath, GPUSCOPE_PROBE_DIR=self.probe_dir, **env)
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout), result.stderr

    def test_chains_to_the_sitecustomize_it_shadows(self):
        marker = os.path.join(self.tmp, "marker")
        self.write_other(
            """
            import os, sys
            os.environ["CHAINED_MARKER"] = "ran"
            with open(%r, "a") as handle:
                handle.write("x")
            sys.path.append("/nonexistent/added-by-chained")
            """ % marker
        )
        state, err = self.run_with_shim([ASSETS, self.other, STANDIN])
        self.assertEqual(err, "")
        self.assertEqual(state["sitecustomize"], os.path.join(self.other, "sitecustomize.py"))
        self.assertEqual(state["marker"], "ran")
        with open(marker) as handle:
            self.assertEqual(handle.read(), "x")  # exactly once
        self.assertTrue(state["probe_loaded"])
        self.assert_armed_without_thread(state)
        # sys.path as the program would have had it, plus the chained edit.
        self.assertIn("/nonexistent/added-by-chained", state["path"])
        self.assertEqual(state["path"][1:3], [ASSETS, self.other])

    def assert_armed_without_thread(self, state):
        # Armed, but a process that never imports torch or jax gets no
        # thread (Python 3.12+ would warn at every os.fork() otherwise).
        self.assertTrue(state["probe_armed"])
        self.assertFalse(state["probe_thread"])
        self.assertEqual(state["threads"], 1)

    def test_alone_it_stays_registered_and_quiet(self):
        state, err = self.run_with_shim([ASSETS, STANDIN])
        self.assertEqual(err, "")
        self.assertEqual(state["sitecustomize"], os.path.join(ASSETS, "sitecustomize.py"))
        self.assert_armed_without_thread(state)

    def test_error_in_chained_sitecustomize_is_reported_like_site_does(self):
        self.write_other(
            """
            raise ValueError("boom")
            """
        )
        state, err = self.run_with_shim([ASSETS, self.other])
        self.assertEqual(err, "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                              "ValueError: boom\n")
        self.assert_armed_without_thread(state)
        self.assertEqual(state["sitecustomize"], os.path.join(ASSETS, "sitecustomize.py"))

    def test_missing_import_inside_chained_sitecustomize_is_reported(self):
        self.write_other("import module_that_does_not_exist_anywhere\n")
        state, err = self.run_with_shim([ASSETS, self.other])
        self.assertIn("Error in sitecustomize; set PYTHONVERBOSE for traceback:", err)
        self.assertIn("ModuleNotFoundError", err)
        self.assert_armed_without_thread(state)

    def test_probe_disabled_by_environment(self):
        state, err = self.run_with_shim([ASSETS], GPUSCOPE_PROBE="0")
        self.assertEqual(err, "")
        self.assertFalse(state["probe_armed"])
        self.assertFalse(state["probe_thread"])

    def test_broken_probe_never_stops_the_program(self):
        broken = os.path.join(self.tmp, "broken")
        os.mkdir(broken)
        with open(os.path.join(ASSETS, "sitecustomize.py")) as src:
            shim = src.read()
        with open(os.path.join(broken, "sitecustomize.py"), "w") as dst:
            dst.write(shim)
        with open(os.path.join(broken, "gpuscope_probe.py"), "w") as dst:
            dst.write("raise RuntimeError('probe exploded')\n")
        state, err = self.run_with_shim([broken])
        self.assertEqual(err, "")
        self.assertFalse(state["probe_thread"])


if __name__ == "__main__":
    unittest.main()
