"""Where and how the file is written: directory rules, atomicity, cleanup."""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import unittest
from unittest import mock

from helpers import (
    STANDIN,
    TRAINER,
    InProcessCase,
    ScratchMixin,
    alloc,
    child_env,
    gp,
    published,
    read_pids,
    wait_for,
)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class DirectoryTest(InProcessCase):
    def setUp(self):
        super().setUp()
        self.init_cuda()

    def assert_refused(self, probe, where):
        self.assertEqual(probe.cycle(), (False, False, True))
        self.assertEqual(published(where), {})
        self.assertGreaterEqual(probe.errors, 1)

    def test_missing_directories_are_created_private(self):
        nested = os.path.join(self.tmp, "a", "b", "probes")
        os.environ["GPUSCOPE_PROBE_DIR"] = nested
        old_umask = os.umask(0)
        try:
            probe = self.new_probe()
            self.assertEqual(probe.cycle(), (True, False, False))
        finally:
            os.umask(old_umask)
        for path in (os.path.join(self.tmp, "a"), os.path.join(self.tmp, "a", "b"), nested):
            self.assertEqual(mode_of(path), 0o700, path)
        name = "%d-%d.json" % (os.getpid(), gp._read_start_ticks())
        self.assertEqual(os.listdir(nested), [name])
        self.assertEqual(mode_of(os.path.join(nested, name)), 0o600)

    def test_symlinked_directory_is_refused(self):
        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o700)
        os.symlink(real, self.probe_dir)
        self.assert_refused(self.new_probe(), real)

    def test_group_or_world_accessible_directory_is_refused(self):
        for mode in (0o770, 0o705, 0o750):
            os.makedirs(self.probe_dir, exist_ok=True)
            os.chmod(self.probe_dir, mode)
            self.assert_refused(self.new_probe(), self.probe_dir)

    def test_open_parent_of_the_directory_is_refused(self):
        # Whoever may write the parent may swap the directory for their own.
        parent = os.path.join(self.tmp, "shared")
        os.makedirs(os.path.join(parent, "probes"), 0o700)
        os.chmod(parent, 0o755)
        os.environ["GPUSCOPE_PROBE_DIR"] = os.path.join(parent, "probes")
        self.assert_refused(self.new_probe(), os.path.join(parent, "probes"))

    def test_directory_of_another_user_is_refused(self):
        os.mkdir(self.probe_dir, 0o700)
        with mock.patch.object(gp.os, "getuid", return_value=os.getuid() + 1):
            self.assert_refused(self.new_probe(), self.probe_dir)

    def test_file_in_place_of_the_directory_is_refused(self):
        with open(self.probe_dir, "w") as handle:
            handle.write("{}")
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (False, False, True))

    def test_xdg_runtime_dir_layout_and_its_parent_checked(self):
        xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(xdg, 0o700)
        del os.environ["GPUSCOPE_PROBE_DIR"]
        os.environ["XDG_RUNTIME_DIR"] = xdg
        base = os.path.join(xdg, "gpuscope")
        probes = os.path.join(base, "probes")
        self.assertEqual(gp._directory_plan(), (probes, (base, probes)))
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (True, False, False))
        self.assertEqual(len(published(probes)), 1)
        self.assertEqual((mode_of(base), mode_of(probes)), (0o700, 0o700))
        probe.close()

        os.chmod(base, 0o750)
        self.assert_refused(self.new_probe(), probes)
        os.chmod(base, 0o700)

        # A gpuscope directory that is a symlink, even to a good directory.
        os.rename(base, os.path.join(xdg, "elsewhere"))
        os.symlink(os.path.join(xdg, "elsewhere"), base)
        self.assert_refused(self.new_probe(), probes)

    def test_default_directory_without_xdg(self):
        del os.environ["GPUSCOPE_PROBE_DIR"]
        uid = os.getuid()
        base = "/tmp/gpuscope-%d" % uid
        expected = (base + "/probes", (base, base + "/probes"))
        self.assertEqual(gp._directory_plan(), expected)
        os.environ["XDG_RUNTIME_DIR"] = "relative/dir"
        self.assertEqual(gp._directory_plan(), expected)
        os.environ["XDG_RUNTIME_DIR"] = os.path.join(self.tmp, "missing")
        self.assertEqual(gp._directory_plan(), expected)
        # XDG_RUNTIME_DIR owned by someone else: not ours to write in.
        os.environ["XDG_RUNTIME_DIR"] = self.tmp
        with mock.patch.object(gp.os, "getuid", return_value=uid + 1):
            base = "/tmp/gpuscope-%d" % (uid + 1)
            self.assertEqual(gp._directory_plan(), (base + "/probes", (base, base + "/probes")))

    def test_moving_directory_leaves_no_old_file(self):
        probe = self.new_probe()
        probe.cycle()
        other = os.path.join(self.tmp, "other")
        os.environ["GPUSCOPE_PROBE_DIR"] = other
        probe.cycle()
        self.assertEqual(os.listdir(self.probe_dir), [])
        self.assertEqual(len(published(other)), 1)
        probe.close()
        self.assertEqual(os.listdir(other), [])


class AtomicityTest(InProcessCase):
    def test_readers_never_see_a_partial_file(self):
        self.init_cuda()
        probe = self.new_probe()
        probe.cycle()
        path = os.path.join(self.probe_dir, os.listdir(self.probe_dir)[0])
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                # Documents of varying length, so a torn write would show.
                devices = {str(d): {"alloc": alloc(allocated=i * 10**d)} for d in range(1 + i % 8)}
                self.set_script({"devices": devices})
                probe.cycle()

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            seqs = []
            for _ in range(1000):
                with open(path, "rb") as handle:
                    doc = json.loads(handle.read().decode("utf-8"))
                seqs.append(doc["seq"])
        finally:
            stop.set()
            thread.join()
        self.assertGreater(seqs[-1], seqs[0])
        self.assertEqual(sorted(os.listdir(self.probe_dir)), [os.path.basename(path)])
        self.assertEqual(probe.errors, 0)

    def test_failed_write_leaves_no_temporary_file(self):
        self.init_cuda()
        probe = self.new_probe()
        with mock.patch.object(gp.os, "replace", side_effect=OSError("disk on fire")):
            self.assertEqual(probe.cycle(), (False, False, True))
        self.assertEqual(os.listdir(self.probe_dir), [])

    def test_close_removes_the_file_and_stops_writes(self):
        self.init_cuda()
        probe = self.new_probe()
        probe.cycle()
        probe.close()
        self.assertEqual(os.listdir(self.probe_dir), [])
        self.assertEqual(probe.cycle(), (False, False, False))
        self.assertEqual(os.listdir(self.probe_dir), [])


class ProcessExitTest(ScratchMixin, unittest.TestCase):
    def setUp(self):
        self.make_scratch()
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        self.pids_file = os.path.join(self.tmp, "pids.jsonl")

    def launch(self, *flags):
        env = child_env(
            [STANDIN],
            GPUSCOPE_PROBE_DIR=self.probe_dir,
            STANDIN_TORCH_SCRIPT=self.script_path,
            STANDIN_TORCH_VIOLATIONS=self.violations_path,
        )
        process = subprocess.Popen(
            [sys.executable, TRAINER, "--probe", "--interval", "0.1",
             "--pids-file", self.pids_file] + list(flags),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process

    def wait_published(self, pid):
        prefix = "%d-" % pid
        return wait_for(
            lambda: [n for n in published(self.probe_dir) if n.startswith(prefix)], 5
        )

    def test_file_removed_at_normal_exit(self):
        process = self.launch("--seconds", "1.0")
        self.assertTrue(wait_for(lambda: read_pids(self.pids_file), 5))
        self.assertTrue(self.wait_published(process.pid))
        out, err = process.communicate(timeout=10)
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(err, "")
        self.assertEqual(os.listdir(self.probe_dir), [])
        self.assertEqual(self.violations(), [])

    def test_file_removed_on_sigterm(self):
        process = self.launch()
        self.assertTrue(self.wait_published(process.pid))
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(os.listdir(self.probe_dir), [])

    def test_sigkill_leaves_the_file_for_the_reader_to_judge(self):
        # Nothing can run on SIGKILL: gpuscope's reader drops files whose pid
        # and start_ticks no longer match a live process.
        process = self.launch()
        names = self.wait_published(process.pid)
        self.assertTrue(names)
        process.kill()
        process.communicate(timeout=10)
        leftover = published(self.probe_dir)
        self.assertEqual(list(leftover), names)
        self.assertEqual(leftover[names[0]]["pid"], process.pid)
