"""gpuscope's requests to a probe: PyTorch's own snapshot for its memory
viewer, taken by the probe in the training process, only when asked."""

import json
import os
import pickle

from helpers import InProcessCase, alloc

SEGMENTS = [{"pool": "large", "blocks": [["active_allocated", 4], ["inactive", 2]]}]


class MemvizTest(InProcessCase):
    def start(self, generation="2.5"):
        self.set_script({"generation": generation, "devices": {"0": {"alloc": alloc(), "segments": SEGMENTS}}})
        self.init_cuda()
        probe = self.new_probe(interval=60.0)
        probe.cycle()
        stem = probe.name[: -len(".json")]
        return probe, os.path.join(self.probe_dir, stem)

    def ask(self, base, **request):
        request.setdefault("kind", "memviz")
        with open(base + ".request", "w") as handle:
            json.dump(request, handle)

    def answer(self, base):
        with open(base + ".memviz.json") as handle:
            return json.load(handle)

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
