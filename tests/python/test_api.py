"""The `gpuscope` Python package (python/gpuscope) against the real program.

Run by tests/python_api.rs under `cargo test` (GPUSCOPE_BIN names the
build's program, PYTHONPATH its python/), and by packaging/check.py against
the wheel installed in a fresh virtual environment (neither set: the
package finds the program pip installed). Standard library only.
"""

import contextlib
import dataclasses
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
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


@contextlib.contextmanager
def no_program():
    """GPUSCOPE_BIN names nothing: a call that got as far as running the
    program would fail saying so."""
    old = os.environ.get(gpuscope.BIN_ENV)
    os.environ[gpuscope.BIN_ENV] = "/nonexistent/gpuscope"
    try:
        yield
    finally:
        if old is None:
            del os.environ[gpuscope.BIN_ENV]
        else:
            os.environ[gpuscope.BIN_ENV] = old


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
        with no_program(), self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot()
        self.assertIn("/nonexistent/gpuscope", str(caught.exception))


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
        self.assertTrue(caught.exception.message.endswith(
            "answered 401 Unauthorized: no Authorization header: send Authorization: Bearer <token>"),
            caught.exception.message)

    def test_with_a_wrong_one(self):
        wrong = os.path.join(self.tmp, "wrong")
        with open(wrong, "w") as f:
            f.write("guess\n")
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot(url="127.0.0.1:%d" % self.port, token_file=wrong)
        self.assertEqual(caught.exception.status, 401)
        said = "answered 401 Unauthorized: the bearer token was not accepted"
        self.assertTrue(caught.exception.message.endswith(said), caught.exception.message)


class Answers(http.server.BaseHTTPRequestHandler):
    """Answers /snapshot with the server's `body` (bytes), as a JSON endpoint that is not gpuscope's would."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args):
        pass


class NotASnapshot(unittest.TestCase):
    """url= that answers 200 with something else than a gpuscope snapshot."""

    def setUp(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answers)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "127.0.0.1:%d" % self.server.server_address[1]
        with open(SCHEMA) as f:
            self.required = json.load(f)["required"]

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, body):
        self.server.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot(url=self.url)
        self.assertIn("/snapshot did not answer with a gpuscope snapshot: ", caught.exception.message)
        return caught.exception.message

    def test_other_json_is_refused(self):
        self.assertIn("the JSON object has no \"schema_version\"", self.answer({}))
        self.assertIn("the JSON is null", self.answer(None))
        self.assertIn("the JSON is list", self.answer([]))
        self.assertIn("not JSON", self.answer(b"<html>hello</html>"))
        self.assertIn("not JSON", self.answer(b"[" * 100000))
        whole = dict.fromkeys(self.required, {})
        whole.update(schema_version=1, gpus=[], processes=[], alerts=[], events=[])
        self.assertIn('"gpus" is not a list of objects', self.answer(dict(whole, gpus=None)))
        self.assertIn('"alerts" is not a list of objects', self.answer(dict(whole, alerts=[1])))
        self.assertIn("a GPU without its index", self.answer(dict(whole, gpus=[{"index": 0}])))
        self.assertIn("a process without its pid", self.answer(dict(whole, processes=[{}])))

    def test_what_every_gpuscope_sends_is_taken(self):
        # The keys required since the first schema, and no more: an older serve still answers.
        self.server.body = gpuscope._run(["--json", "--demo"], 30).stdout
        full = gpuscope.snapshot(url=self.url)
        self.assertTrue(full.simulated and full.gpus)
        data = json.loads(self.server.body)
        self.server.body = json.dumps({k: data[k] for k in gpuscope._REQUIRED}).encode()
        self.assertEqual(gpuscope.snapshot(url=self.url).gpus, full.gpus)
        self.assertTrue(set(gpuscope._REQUIRED) <= set(self.required))


class Arguments(unittest.TestCase):
    """A bad argument is a gpuscope.Error naming it, raised before any program runs."""

    def test_bad_values_name_the_argument(self):
        calls = [
            ("max_util", lambda: gpuscope.select(max_util="abc")),
            ("max_util", lambda: gpuscope.select(max_util=95.5)),
            ("max_util", lambda: gpuscope.select(max_util=101)),
            ("max_util", lambda: gpuscope.select(max_util=True)),
            ("max_util", lambda: gpuscope.select(max_util=float("nan"))),
            ("count", lambda: gpuscope.select(count=0)),
            ("count", lambda: gpuscope.select(count="2")),
            ("min_free", lambda: gpuscope.select(min_free=-1)),
            ("min_free", lambda: gpuscope.select(min_free=1.5)),
            ("timeout", lambda: gpuscope.select(timeout=0)),
            ("count", lambda: gpuscope.watch(count="x")),
            ("count", lambda: gpuscope.watch(count=-1)),
            ("interval", lambda: gpuscope.watch(interval=-1)),
            ("interval", lambda: gpuscope.watch(interval=None)),
            ("timeout", lambda: gpuscope.snapshot(timeout="x")),
            ("gpus", lambda: gpuscope.snapshot(gpus=object())),
            ("gpus", lambda: gpuscope.snapshot(gpus=[-1])),
            ("gpus", lambda: gpuscope.snapshot(gpus=[0.5])),
            ("url", lambda: gpuscope.snapshot(url=5)),
            ("url", lambda: gpuscope.snapshot(url=" ")),
            ("token_file", lambda: gpuscope.snapshot(url="127.0.0.1:1", token_file=3)),
        ]
        with no_program():
            for name, call in calls:
                with self.subTest(argument=name), self.assertRaises(gpuscope.Error) as caught:
                    call()
                message = caught.exception.message
                self.assertTrue(message.startswith(name + " must be "), message)
                self.assertNotIsInstance(caught.exception, gpuscope.NotEnoughGpus)

    def test_bad_urls_say_why(self):
        cases = [
            ("127.0.0.1:abc", "url '127.0.0.1:abc' is not a URL gpuscope can ask: "),
            ("http://[::1", "url 'http://[::1' is not a URL gpuscope can ask: "),
            ("http://127.0.0.1:99999", "url 'http://127.0.0.1:99999' is not a URL gpuscope can ask: "),
            ("file:///etc/passwd", "url 'file:///etc/passwd': gpuscope serve answers http:// or https://"),
            ("http:///snapshot", "url 'http:///snapshot' names no host"),
        ]
        for url, said in cases:
            with self.subTest(url=url), self.assertRaises(gpuscope.Error) as caught:
                gpuscope.snapshot(url=url, timeout=5)
            self.assertTrue(caught.exception.message.startswith(said), caught.exception.message)
        with self.assertRaises(gpuscope.Error) as caught:
            gpuscope.snapshot(url="http://a b:1/", timeout=5)
        self.assertIn("http://a b:1/snapshot", caught.exception.message)

    def test_whole_floats_and_numbers_are_taken(self):
        self.assertEqual(gpuscope.select(max_util=10.0, demo=True).indices, [3])
        self.assertEqual(sorted(gpuscope.select(max_util=100, count=2.0, demo=True, gpus=(1, "3")).indices), [1, 3])
        self.assertEqual(len(gpuscope.snapshot(demo=True, gpus=0).gpus), 1)

    def test_the_programs_refusals_read_as_python(self):
        cases = [
            ("min_free", "invalid value 'lots' for min_free: \"lots\" is not a size",
             lambda: gpuscope.select(min_free="lots", demo=True)),
            ("min_free", "invalid value '-5' for min_free: ", lambda: gpuscope.select(min_free="-5", demo=True)),
            ("interval", "invalid value 'soon' for interval: ",
             lambda: list(gpuscope.watch(interval="soon", demo=True))),
            ("gpus", "gpus: empty GPU selector", lambda: gpuscope.snapshot(gpus="", demo=True)),
        ]
        for name, said, call in cases:
            with self.subTest(argument=name), self.assertRaises(gpuscope.Error) as caught:
                call()
            message = caught.exception.message
            self.assertTrue(message.startswith(said), message)
            self.assertEqual(caught.exception.status, 2)
            for cli in ("error:", "--help", "Usage", "--" + name.replace("_", "-")):
                self.assertNotIn(cli, message)

    def test_clap_s_tail_is_left_out(self):
        stderr = (b"error: unexpected argument '--max-util' found\n\n  tip: to pass '--max-util' as a value, "
                  b"use '-- --max-util'\n\nUsage: gpuscope select [OPTIONS]\n\nFor more information, try '--help'.\n")
        self.assertEqual(gpuscope._said(stderr, 2, {"--max-util": "max_util"}), "unexpected argument max_util found")
        self.assertEqual(gpuscope._said(b"gpuscope: --gpus: no GPU matches", 2), "gpus: no GPU matches")


class Select(unittest.TestCase):
    def test_picks_and_shortfalls(self):
        picked = gpuscope.select(count=2, min_free="20GiB", count_cached_free=True, demo=True)
        self.assertEqual(picked.indices, [1, 3])
        # Only what empty_cache() could return counts: not the inactive split.
        busy = picked[0]
        self.assertEqual(busy.counted_free, busy.memory_free + busy.releasable)
        self.assertLess(busy.releasable, busy.cached)
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
