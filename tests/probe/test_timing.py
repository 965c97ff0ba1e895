"""Sampling cadence: the interval, and the burst after retries or OOMs rise."""

import time

from helpers import InProcessCase, alloc, published, wait_for


class BurstTest(InProcessCase):
    def seq(self):
        docs = published(self.probe_dir)
        return next(iter(docs.values()))["seq"] if docs else 0

    def start_probe(self, interval):
        self.init_cuda()
        probe = self.new_probe(interval=interval)
        probe.launch()
        self.assertTrue(wait_for(lambda: self.seq() >= 1, 3))
        return probe

    def rise_is_published_fast(self, **counters):
        self.start_probe(interval=5.0)
        time.sleep(0.3)
        self.assertEqual(self.seq(), 1)
        self.set_script({"devices": {"0": {"alloc": alloc(**counters)}}})
        changed = time.monotonic()
        key, value = next(iter(counters.items()))

        def seen():
            docs = published(self.probe_dir)
            return docs and next(iter(docs.values()))["devices"][0][key] == value

        self.assertTrue(wait_for(seen, 3, 0.005))
        # Peeks run every 0.2 s; the slack is for a loaded machine, still far
        # below the 5 s interval.
        self.assertLess(time.monotonic() - changed, 1.5)
        # The burst: further samples at 0.2 s although the interval is 5 s...
        risen_at = self.seq()
        self.assertTrue(wait_for(lambda: self.seq() >= risen_at + 2, 2.0, 0.01))
        # ...five of them, then back to the interval.
        self.assertTrue(wait_for(lambda: self.seq() >= risen_at + 5, 3.0, 0.01))
        settled = self.seq()
        time.sleep(0.6)
        self.assertEqual(self.seq(), settled)
        self.assertEqual(settled, risen_at + 5)

    def test_retry_rise_is_published_within_a_fraction_of_a_second(self):
        self.rise_is_published_fast(alloc_retries=1)

    def test_oom_rise_is_published_within_a_fraction_of_a_second(self):
        self.rise_is_published_fast(ooms=3)

    def test_other_changes_wait_for_the_interval(self):
        self.start_probe(interval=5.0)
        self.set_script({"devices": {"0": {"alloc": alloc(allocated=123456)}}})
        time.sleep(0.7)
        self.assertEqual(self.seq(), 1)

    def test_interval_is_kept(self):
        self.start_probe(interval=0.1)
        began = time.monotonic()
        first = self.seq()
        time.sleep(0.75)
        writes = self.seq() - first
        elapsed = time.monotonic() - began
        self.assertGreaterEqual(writes, int(elapsed / 0.1) // 2)
        self.assertLessEqual(writes, int(elapsed / 0.1) + 1)
