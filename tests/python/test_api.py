"""The `gpuscope` Python package (python/gpuscope) against the real program.

Run by tests/python_api.rs under `cargo test` (GPUSCOPE_BIN names the
build's program, PYTHONPATH its python/), and by packaging/check.py against
the wheel installed in a fresh virtual environment (neither set: the
package finds the program pip installed). Standard library only.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import gpuscope
from gpuscope import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = os.path.join(ROOT, "assets", "snapshot.schema.json")


def fields(cls):
    return {f.name for f in dataclasses.fields(cls)} - {"extra"}


def props(obj):
    obj = obj.get("items", obj)
    return set(obj["properties"])


class TypesFollowTheSchema(unittest.TestCase):
    """Every property of each object in the schema is a field, and every field a property."""

    @classmethod
    def setUpClass(cls):
        with open(SCHEMA) as f:
            cls.schema = json.load(f)

    def test_every_property_is_typed(self):
        d = self.schema["$defs"]
        pairs = [
            (types.Snapshot, self.schema),
            (types.Gpu, d["gpu"]),
            (types.GpuMemory, d["gpu"]["properties"]["memory"]),
            (types.Utilization, d["gpu"]["properties"]["utilization"]),
            (types.MigDevice, d["gpu"]["properties"]["mig_devices"]),
            (types.MigMemory, d["gpu"]["properties"]["mig_devices"]["items"]["properties"]["memory"]),
            (types.GpuAllocator, d["gpu_allocator"]),
            (types.Process, d["process"]),
            (types.ProcessGpu, d["process"]["properties"]["gpus"]),
            (types.ProcessAllocator, d["process_allocator"]),
            (types.DeviceAllocator, d["process_allocator"]["properties"]["devices"]),
            (types.Alert, d["alert"]),
        ]
        for cls, obj in pairs:
            with self.subTest(cls=cls.__name__):
                self.assertEqual(fields(cls), props(obj), "%s and the schema differ" % cls.__name__)


def gpuscope_bin():
    return gpuscope.find_gpuscope_bin()


class Snapshots(unittest.TestCase):
    def test_a_real_demo_snapshot_parses(self):
        snap = gpuscope.snapshot(demo=True)
        self.assertTrue(snap.simulated)
        self.assertIsInstance(snap.gpus[0], gpuscope.Gpu)
        self.assertIsInstance(snap.gpus[0].memory, gpuscope.GpuMemory)
        self.assertIsInstance(snap.gpus[0].allocator, gpuscope.GpuAllocator)
        trainer = next(p for p in snap.processes if p.allocator is not None)
        self.assertIsInstance(trainer.allocator.devices[0], gpuscope.DeviceAllocator)
        self.assertIsInstance(trainer.gpus[0], gpuscope.ProcessGpu)
        self.assertTrue(all(isinstance(a, gpuscope.Alert) for a in snap.alerts))
        self.assertIn("gpu_lost", [a.kind for a in snap.alerts])
        # The demo's lost GPU: unknown figures are None, never 0.
        lost = next(g for g in snap.gpus if g.state == "lost")
        self.assertIsNone(lost.memory.free)
        # Nothing the program wrote fell outside the types.
        for obj in [snap, *snap.gpus, *snap.processes, *snap.alerts]:
            self.assertEqual(obj.extra, {}, type(obj).__name__)
        # What a logger gets: the probe's figures for the process asked about.
        figures = snap.figures(pid=trainer.pid)
        gpu = trainer.allocator.devices[0].gpu
        self.assertEqual(figures["gpu%d/process/allocated_bytes" % gpu], trainer.allocator.devices[0].allocated)
        self.assertNotIn("gpu%d/memory_free_bytes" % lost.index, figures)

    def test_activity_is_asked_for(self):
        snap = gpuscope.snapshot(demo=True, activity=True, gpus=[0])
        self.assertEqual([g.index for g in snap.gpus], [0])
        self.assertIsNotNone(snap.gpus[0].activity)

    def test_errors_are_the_programs_message(self):
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot(demo=True, gpus=[99])
        self.assertIn('no GPU matches "99"', caught.exception.message)
        self.assertEqual(caught.exception.status, 2)
        self.assertFalse(caught.exception.message.startswith("gpuscope:"))

    def test_a_missing_program_is_an_error_too(self):
        old = os.environ.get(gpuscope.BIN_ENV)
        os.environ[gpuscope.BIN_ENV] = "/nonexistent/gpuscope"
        try:
            with self.assertRaises(gpuscope.Error) as caught:
                gpuscope.snapshot()
            self.assertIn("/nonexistent/gpuscope", str(caught.exception))
        finally:
            if old is None:
                del os.environ[gpuscope.BIN_ENV]
            else:
                os.environ[gpuscope.BIN_ENV] = old


class Watch(unittest.TestCase):
    def test_yields_snapshots_and_ends_the_program_when_closed(self):
        stream = gpuscope.watch(interval=0.05, demo=True)
        times = [next(stream).time_unix_ms for _ in range(3)]
        self.assertEqual(times, sorted(set(times)))
        frame = stream.gi_frame
        proc = frame.f_locals["proc"]
        stream.close()
        self.assertIsNotNone(proc.poll(), "closing the generator ends gpuscope")

    def test_count_and_errors(self):
        self.assertEqual(len(list(gpuscope.watch(interval="20ms", count=2, demo=True))), 2)
        with self.assertRaises(gpuscope.Error) as caught:
            list(gpuscope.watch(interval=0.001, demo=True))
        self.assertIn("10ms", caught.exception.message)


class Serve(unittest.TestCase):
    """snapshot(url=...) against a real `gpuscope serve --demo` with a token."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.token = os.path.join(self.tmp, "token")
        with open(self.token, "w") as f:
            f.write("s3cret\n")
        os.chmod(self.token, 0o600)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [gpuscope_bin(), "serve", "--demo", "--listen", "127.0.0.1:%d" % self.port, "--token-file", self.token],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.fail("gpuscope serve did not start")

    def tearDown(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp)

    def test_with_the_token(self):
        snap = gpuscope.snapshot(url="127.0.0.1:%d" % self.port, token_file=self.token)
        self.assertTrue(snap.simulated)
        self.assertGreater(len(snap.gpus), 0)

    def test_without_it(self):
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot(url="http://127.0.0.1:%d/snapshot" % self.port)
        self.assertEqual(caught.exception.status, 401)


class Select(unittest.TestCase):
    def test_picks_and_shortfalls(self):
        picked = gpuscope.select(count=2, min_free="20GiB", count_cached_free=True, demo=True)
        self.assertEqual(picked.indices, [1, 3])
        self.assertEqual(picked.cuda_visible_devices, ",".join(p.uuid for p in picked))
        self.assertTrue(all(p.uuid.startswith("GPU-") for p in picked))
        idle = gpuscope.select(max_util=10, no_processes=True, demo=True)
        self.assertEqual(idle.indices, [3])
        with self.assertRaises(gpuscope.NotEnoughGpus) as caught:
            gpuscope.select(count=3, min_free=20 << 30, demo=True)
        self.assertIn("1 GPU fits, 3 asked", caught.exception.message)
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.select(min_free="lots", demo=True)
        self.assertNotIsInstance(caught.exception, gpuscope.NotEnoughGpus)
        self.assertIn('"lots" is not a size', caught.exception.message)


class Examples(unittest.TestCase):
    """Each example logs real figures in --dry-run, without its framework."""

    def test_each_example_dry_runs(self):
        examples = os.path.join(ROOT, "examples", "python")
        names = sorted(n for n in os.listdir(examples) if n.endswith(".py"))
        self.assertEqual(len(names), 4, names)
        for name in names:
            with self.subTest(example=name):
                out = subprocess.run([sys.executable, os.path.join(examples, name), "--dry-run"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr.decode())
                logged = [json.loads(line) for line in out.stdout.decode().splitlines() if line.startswith("{")]
                self.assertGreater(len(logged), 0, out.stdout.decode())
                keys = set().union(*logged)
                self.assertTrue(any(k.endswith("allocated_bytes") for k in keys), keys)
                self.assertTrue(any(k.endswith("memory_used_bytes") for k in keys), keys)


if __name__ == "__main__":
    unittest.main()
