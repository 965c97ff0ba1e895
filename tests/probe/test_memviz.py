"""gpuscope's requests to a probe: PyTorch's own snapshot for its memory
viewer, taken by the probe in the training process, only when asked."""

import json
import os
import pickle

from helpers import InProcessCase, alloc, gp

SEGMENTS = [{"pool": "large", "blocks": [["active_allocated", 4], ["inactive", 2]]}]


class RequestCase(InProcessCase):
    """A probe sampling a scripted PyTorch, and requests left beside its file."""

    KIND = None

    def start(self, generation="2.5", segments=None, backend=None):
        script = {"generation": generation, "devices": {"0": {"alloc": alloc(), "segments": segments or SEGMENTS}}}
        if backend is not None:
            script["backend"] = backend
        self.set_script(script)
        self.init_cuda()
        probe = self.new_probe(interval=60.0)
        probe.cycle()
        stem = probe.name[: -len(".json")]
        return probe, os.path.join(self.probe_dir, stem)

    def ask(self, base, **request):
        request.setdefault("kind", self.KIND)
        with open(base + ".request", "w") as handle:
            json.dump(request, handle)

    def answer(self, base):
        with open("%s.%s.json" % (base, self.KIND)) as handle:
            return json.load(handle)


class MemvizTest(RequestCase):
    KIND = "memviz"

    def test_a_request_gets_pytorchs_snapshot_at_once(self):
        probe, base = self.start()
        self.ask(base, id="r1")
        probe._requests.poll(1000.0)
        answer = self.answer(base)
        self.assertEqual((answer["id"], answer["state"], answer["error"]), ("r1", "done", None))
        with open(os.path.join(self.probe_dir, answer["file"]), "rb") as handle:
            snapshot = pickle.load(handle)
        self.assertEqual(snapshot["segments"][0]["total_size"], 6 << 20)
        self.assertFalse(os.path.exists(base + ".request"), "a request is consumed")

    def test_history_is_recorded_for_the_time_asked_then_dumped_and_stopped(self):
        probe, base = self.start()
        self.ask(base, id="h", history_s=5)
        probe._requests.poll(1000.0)
        self.assertEqual(self.answer(base)["state"], "recording")
        self.assertTrue(self.torch._standin.state.get("history"))
        probe._requests.poll(1003.0)
        self.assertEqual(self.answer(base)["state"], "recording", "not before its time")
        probe._requests.poll(1005.5)
        answer = self.answer(base)
        self.assertEqual(answer["state"], "done")
        self.assertFalse(self.torch._standin.state.get("history"), "recording stopped again")
        with open(os.path.join(self.probe_dir, answer["file"]), "rb") as handle:
            self.assertTrue(pickle.load(handle)["device_traces"][0], "the timeline is in it")

    def test_a_release_without_dump_snapshot_says_so(self):
        probe, base = self.start("2.0")
        self.ask(base, id="old")
        probe._requests.poll(1000.0)
        answer = self.answer(base)
        self.assertEqual(answer["state"], "error")
        self.assertIn("_dump_snapshot", answer["error"])

    def test_links_and_garbage_are_not_requests(self):
        probe, base = self.start()
        target = os.path.join(self.tmp, "elsewhere.json")
        with open(target, "w") as handle:
            json.dump({"kind": "memviz", "id": "x"}, handle)
        os.symlink(target, base + ".request")
        probe._requests.poll(1000.0)
        self.assertFalse(os.path.exists(base + ".memviz.json"))
        os.unlink(base + ".request")
        with open(base + ".request", "w") as handle:
            handle.write("not json")
        probe._requests.poll(1002.0)
        self.assertFalse(os.path.exists(base + ".memviz.json"))

    def test_requests_are_read_at_most_once_a_second(self):
        probe, base = self.start()
        probe._requests.poll(1000.0)
        self.ask(base, id="soon")
        probe._requests.poll(1000.5)
        self.assertFalse(os.path.exists(base + ".memviz.json"))
        probe._requests.poll(1001.1)
        self.assertEqual(self.answer(base)["id"], "soon")

    def test_another_users_request_is_ignored(self):
        if os.getuid() != 0:
            self.skipTest("needs root to make a file of another user")
        probe, base = self.start()
        self.ask(base, id="foreign")
        os.chown(base + ".request", 65534, 65534)
        probe._requests.poll(1000.0)
        self.assertFalse(os.path.exists(base + ".memviz.json"))
        self.assertTrue(os.path.exists(base + ".request"), "not ours to remove")

    def test_nothing_is_dumped_unasked(self):
        probe, _ = self.start()
        for t in range(10):
            probe._requests.poll(1000.0 + t)
        self.assertIsNone(self.torch._standin.calls.get("_dump_snapshot"))


SPLIT = [
    {"pool": "large", "blocks": [["active_allocated", 4], ["inactive", 2], ["active_pending_free", 1], ["inactive", 3]]},
    {"pool": "large", "blocks": [["inactive", 20]]},
    {"pool": "small", "blocks": [["active_allocated", 0.5], ["inactive", 1.5]]},
]
MIB = 1 << 20


class SegmentsTest(RequestCase):
    """The live segment map: taken only when gpuscope's dashboard asks."""

    KIND = "segments"

    def start(self, generation="2.5", segments=SPLIT, backend=None):
        return RequestCase.start(self, generation, segments, backend)

    def test_the_map_classifies_every_block_and_sums_each_pool(self):
        probe, base = self.start()
        self.ask(base, id="s1", device=0)
        probe._requests.poll(1000.0)
        answer = self.answer(base)
        self.assertEqual((answer["format"], answer["id"], answer["state"]), ("gpuscope-segments", "s1", "done"))
        large, small = answer["pools"]
        self.assertEqual((large["pool"], large["segments"], large["total"]), ("large", 2, 30 * MIB))
        self.assertEqual(large["allocated"], 4 * MIB, "pending-free blocks are not allocated_size")
        self.assertEqual(large["inactive_split"], 5 * MIB)
        self.assertEqual(large["largest_free_block"], 20 * MIB)
        self.assertEqual((small["pool"], small["inactive_split"]), ("small", int(1.5 * MIB)))
        first = answer["segments"][0]
        self.assertEqual(first["runs"], [["a", 4 * MIB], ["s", 2 * MIB], ["p", 1 * MIB], ["s", 3 * MIB]])
        self.assertEqual(answer["segments"][1]["runs"], [["f", 20 * MIB]], "a wholly free segment is cache")
        self.assertLess(answer["segments"][0]["address"], answer["segments"][1]["address"])
        self.assertFalse(answer["truncated"])

    def test_runs_are_bounded_and_say_what_was_merged(self):
        many = [{"pool": "large", "blocks": [["active_allocated", 1], ["inactive", 1]] * 100}]
        probe, base = self.start(segments=many)
        self.ask(base, id="b", device=0)
        probe._requests.poll(1000.0)
        runs = self.answer(base)["segments"][0]["runs"]
        self.assertEqual(len(runs), 64)
        self.assertEqual(runs[-1][0], "m")
        self.assertEqual(sum(size for _, size in runs), 200 * MIB, "no byte is lost")

    def test_the_walk_is_bounded_and_says_so(self):
        probe, base = self.start()
        saved = gp._MAX_MAP_BLOCKS
        gp._MAX_MAP_BLOCKS = 4  # the first segment only
        self.addCleanup(setattr, gp, "_MAX_MAP_BLOCKS", saved)
        self.ask(base, id="bounded", device=0)
        probe._requests.poll(1000.0)
        answer = self.answer(base)
        self.assertIs(answer["truncated"], True)
        self.assertEqual(len(answer["segments"]), 1)

    def test_cuda_malloc_async_has_no_segments_to_show(self):
        probe, base = self.start(backend="cudaMallocAsync")
        self.ask(base, id="async", device=0)
        probe._requests.poll(1000.0)
        answer = self.answer(base)
        self.assertEqual(answer["state"], "error")
        self.assertIn("cudaMallocAsync", answer["error"])

    def test_no_snapshot_is_taken_unasked_and_one_per_request(self):
        probe, base = self.start()
        for t in range(5):
            probe._requests.poll(1000.0 + t)
        self.assertIsNone(self.torch._standin.calls.get("memory_snapshot"))
        self.ask(base, id="once", device=0)
        probe._requests.poll(1010.0)
        probe._requests.poll(1011.0)
        self.assertEqual(self.torch._standin.calls.get("memory_snapshot"), 1)

    def test_an_unknown_kind_is_not_a_request(self):
        probe, base = self.start()
        self.ask(base, id="x", kind="shell")
        probe._requests.poll(1000.0)
        self.assertFalse(os.path.exists(base + ".segments.json"))
        self.assertFalse(os.path.exists(base + ".memviz.json"))
