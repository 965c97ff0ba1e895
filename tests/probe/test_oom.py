"""The moment of an OOM: PyTorch's out-of-memory observer gives the probe
the counters and the segments as they are when the allocation fails, and
the probe publishes the post-mortem at once; without an observer
(cudaMallocAsync, old releases) the OutOfMemoryError that escapes is the
post-mortem."""

import threading
import time

from helpers import InProcessCase, alloc, gp

MIB = 1 << 20
GIB = 1 << 30

REAL_2_11_ASYNC_OOM = (
    "Allocation on device 0 would exceed allowed memory. (out of memory)\n"
    "Currently allocated     : 256.00 MiB\n"
    "Requested               : 4096.00 GiB\n"
    "Device limit            : 79.18 GiB\n"
    "Free (according to CUDA): 78.35 GiB\n"
    "PyTorch limit (set by user-supplied memory fraction)\n"
    "                        : 17179869184.00 GiB"
)

# Three 1.3 GiB segments, each split by live tensors: 2100 MiB free in
# the allocator, no free block above 400 MiB.
FRAGMENTED = [{"pool": "large", "blocks": [["active_allocated", 512], ["inactive", 300],
                                           ["active_allocated", 100], ["inactive", 400]]}] * 3 + [
    {"pool": "small", "blocks": [["active_allocated", 1], ["inactive", 1]]}]


class ObserverTest(InProcessCase):
    def setUp(self):
        super().setUp()
        gp._oom_records[:] = []
        gp._oom_events = 0
        self.addCleanup(gp._oom_records.clear)
        saved = (gp._armed, gp._probe)
        self.addCleanup(lambda: setattr(gp, "_armed", saved[0]) or setattr(gp, "_probe", saved[1]))

    def start(self, script):
        self.set_script(script)
        self.init_cuda()
        probe = self.new_probe(interval=60.0)
        gp._armed = True
        gp._probe = probe
        probe.cycle()  # attaches the observer, publishes the first file
        return probe

    def oom(self, device, size):
        try:
            self.torch.cuda._standin_oom(device, size)
        except RuntimeError as exc:  # OutOfMemoryError is one
            return exc
        self.fail("no OutOfMemoryError")

    def test_post_mortem_of_a_fragmented_pool_is_published_at_once(self):
        self.start({"generation": "2.5", "devices": {"0": {
            "alloc": alloc(allocated=1836 * MIB, reserved=3936 * MIB, inactive_split=2100 * MIB),
            "device_free": 300 * MIB, "segments": FRAGMENTED}}})
        before = self.only_document()["seq"]
        exc = self.oom(0, 2 * GIB)
        self.assertEqual(type(exc).__name__, "OutOfMemoryError")
        doc = self.only_document()
        self.assertEqual(doc["seq"], before + 1, "published from the observer, not at the next interval")
        (record,) = doc["last_oom"]
        self.assertEqual(record["source"], "observer")
        self.assertEqual((record["device"], record["requested"], record["device_free"]), (0, 2 * GIB, 300 * MIB))
        self.assertEqual((record["allocated"], record["reserved"]), (1836 * MIB, 3936 * MIB))
        large, small = record["pools"]
        self.assertEqual(large, {"pool": "large", "segments": 3, "total": 3 * 1312 * MIB, "allocated": 3 * 612 * MIB,
                                 "free": 2100 * MIB, "largest_free_block": 400 * MIB,
                                 "free_below_request": 2100 * MIB})
        self.assertEqual((small["pool"], small["segments"], small["free"]), ("small", 1, MIB))
        self.assertEqual(len(record["segments"]), 4)
        self.assertEqual(record["segments"][0], {"pool": "large", "total": 1312 * MIB, "allocated": 612 * MIB,
                                                 "free": 700 * MIB, "split": True,
                                                 "largest_free_block": 400 * MIB})
        self.assertEqual(self.torch._standin.calls.get("memory_snapshot"), 1)

    def test_repeated_firings_are_kept_in_order_and_bounded(self):
        self.start({"generation": "2.5", "devices": {"0": {"alloc": alloc(), "segments": FRAGMENTED}}})
        # cuDNN retries a failed workspace with smaller ones.
        for mib in range(20, 8, -1):
            self.oom(0, mib * MIB)
        records = self.only_document()["last_oom"]
        self.assertEqual(len(records), gp._MAX_OOM_RECORDS)
        self.assertEqual([r["requested"] // MIB for r in records], list(range(16, 8, -1)))

    def test_without_an_observer_the_escaping_error_is_the_post_mortem(self):
        # cudaMallocAsync refuses observers; its error names device, size
        # and the device's free memory.
        probe = self.start({"generation": "2.7", "backend": "cudaMallocAsync",
                            "devices": {"0": {"alloc": alloc()}, "1": {"alloc": alloc(), "device_free": 0}}})
        self.assertIs(probe._torch.oom_observer, False)
        exc = self.oom(1, 3 * GIB // 2)
        gp._note_exception(exc)  # what the thread/sys exception hooks do
        (record,) = self.only_document()["last_oom"]
        self.assertEqual((record["source"], record["device"], record["requested"]), ("exception", 1, 3 * GIB // 2))
        self.assertEqual((record["device_free"], record["allocated"]), (0, 1000))
        self.assertIsNone(record["pools"])
        self.assertEqual(self.only_document()["oom_events"], 1)

    def test_cuda_malloc_async_message_as_torch_2_11_raises_it(self):
        # Byte for byte what a real torch 2.11.0 raised on an H100 with
        # PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, asked for 4 TiB.
        probe = self.start({"generation": "2.11", "backend": "cudaMallocAsync", "devices": {"0": {
            "alloc": alloc(allocated=256 * MIB), "total_memory": int(79.18 * GIB),
            "device_free": int(78.35 * GIB)}}})
        self.assertIs(probe._torch.oom_observer, False)
        exc = self.oom(0, 4096 * GIB)
        self.assertEqual(type(exc).__name__, "OutOfMemoryError")
        self.assertEqual(str(exc), REAL_2_11_ASYNC_OOM)
        gp._note_exception(exc)
        (record,) = self.only_document()["last_oom"]
        self.assertEqual((record["source"], record["device"], record["requested"]), ("exception", 0, 4096 * GIB))
        # Printed with two decimals: within half a hundredth of the unit.
        self.assertLessEqual(abs(record["device_free"] - 78.35 * GIB), GIB / 200)
        self.assertEqual(record["allocated"], 256 * MIB)
        self.assertIsNone(record["device_limit"], "only the observer is told it")

    def test_the_message_fills_allocated_where_the_counters_cannot_be_read(self):
        self.start({"generation": "2.11", "backend": "cudaMallocAsync",
                    "devices": {"0": {"alloc": alloc(allocated=3 * GIB + 123)}}})
        exc = self.oom(0, GIB)
        self.set_script({"generation": "2.11", "backend": "cudaMallocAsync",
                         "raise": {"memory_stats_as_nested_dict": "device busy"},
                         "devices": {"0": {"alloc": alloc(allocated=3 * GIB + 123)}}})
        record = gp._exception_record(exc, time.time())
        self.assertEqual((record["device"], record["requested"], record["allocated"]), (0, GIB, 3 * GIB))
        self.assertIsNone(record["reserved"])

    def test_native_messages_of_each_form_give_the_free_memory(self):
        # 2.1+ "GPU 0 has a total capacity of ... of which ... is free";
        # before (2.0, 1.12) "(GPU 0; ... total capacity; ... free; ...)".
        for generation in ("2.0", "2.9"):
            with self.subTest(generation=generation):
                gp._oom_records[:] = []
                self.torch.cuda._standin_reset()
                self.start({"generation": generation, "devices": {"2": {
                    "alloc": alloc(), "device_free": 300 * MIB}}})
                exc = self.oom(2, 20 * MIB)
                record = gp._exception_record(exc, time.time())
                self.assertEqual((record["device"], record["requested"], record["device_free"]),
                                 (2, 20 * MIB, 300 * MIB))

    def test_an_error_after_the_observer_is_the_same_failure(self):
        self.start({"generation": "2.5", "devices": {"0": {"alloc": alloc(), "segments": FRAGMENTED}}})
        exc = self.oom(0, GIB)
        gp._note_exception(exc)
        records = self.only_document()["last_oom"]
        self.assertEqual([r["source"] for r in records], ["observer"])

    def test_release_1_12_has_no_observer_and_a_runtime_error(self):
        probe = self.start({"generation": "1.12", "devices": {"0": {"alloc": alloc()}}})
        self.assertIs(probe._torch.oom_observer, False)
        exc = self.oom(0, 20 * MIB)
        self.assertIs(type(exc), RuntimeError)
        gp._note_exception(exc)
        (record,) = self.only_document()["last_oom"]
        self.assertEqual((record["device"], record["requested"]), (0, 20 * MIB))

    def test_the_walk_over_blocks_is_bounded_and_says_so(self):
        self.start({"generation": "2.5", "devices": {"0": {"alloc": alloc(), "segments": FRAGMENTED}}})
        saved = gp._MAX_OOM_BLOCKS
        gp._MAX_OOM_BLOCKS = 6  # one segment and a half
        self.addCleanup(setattr, gp, "_MAX_OOM_BLOCKS", saved)
        self.oom(0, GIB)
        (record,) = self.only_document()["last_oom"]
        self.assertIs(record["truncated"], True)
        self.assertEqual(sum(p["segments"] for p in record["pools"]), 1)

    def test_the_observer_in_another_thread_publishes_too(self):
        self.start({"generation": "2.9", "devices": {"0": {"alloc": alloc(), "segments": FRAGMENTED}}})
        errors = []
        worker = threading.Thread(target=lambda: errors.append(self.oom(0, GIB)))
        worker.start()
        worker.join()
        self.assertEqual(len(self.only_document()["last_oom"]), 1)
        self.assertEqual(len(errors), 1)


class NeverOnATimerTest(InProcessCase):
    def test_no_snapshot_without_an_oom(self):
        self.set_script({"generation": "2.5", "devices": {"0": {"alloc": alloc(), "segments": FRAGMENTED}}})
        self.init_cuda()
        probe = self.new_probe(interval=0.1)
        probe.launch()
        time.sleep(0.5)
        probe.close()
        probe.join(2)
        self.assertIsNone(self.torch._standin.calls.get("memory_snapshot"))
