"""JAX: silent until its backends exist, then Device.memory_stats() mapped."""

from helpers import DEVICE_KEYS, KEYS, InProcessCase, published, write_json


class JaxTest(InProcessCase):
    def setUp(self):
        super().setUp()
        # torch is loaded in this process but never initialised here, so the
        # probe has only JAX to report on.
        import jax

        self.jax = jax
        jax._standin_reset()
        self.addCleanup(jax._standin_reset)
        write_json(self.jax_script_path, {
            "backends": ["cuda", "cpu"],
            "devices": [
                {"id": 0, "platform": "gpu", "local_hardware_id": 0, "stats": {
                    "bytes_in_use": 100, "peak_bytes_in_use": 200, "bytes_limit": 1000,
                    "largest_free_block_bytes": 600, "pool_bytes": 800,
                    "peak_pool_bytes": 900, "num_allocs": 5,
                }},
                {"id": 1, "platform": "gpu", "local_hardware_id": 3,
                 "stats": {"bytes_in_use": 7}},
                {"id": 2, "platform": "gpu", "local_hardware_id": 4, "stats": None},
                {"id": 9, "platform": "cpu", "stats": {"bytes_in_use": 1}},
            ],
        })

    def test_nothing_before_backends_are_initialised(self):
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (False, False, False))
        self.assertEqual(published(self.probe_dir), {})

    def test_fields_mapped_once_initialised(self):
        self.jax._standin_init_backends()
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (True, False, False))
        doc = self.only_document()
        self.assertEqual(list(doc), KEYS)
        self.assertEqual(
            [doc[k] for k in ("framework", "framework_version", "backend", "alloc_conf",
                              "alloc_conf_var", "expandable_segments", "pinned_host")],
            ["jax", self.jax.__version__, "jax", None, None, False, None],
        )
        first, second = doc["devices"]
        self.assertEqual(list(first), DEVICE_KEYS)
        expected = dict.fromkeys(DEVICE_KEYS)
        expected.update(index=0, allocated=100, allocated_peak=200, reserved=800,
                        reserved_peak=900, largest_free_block=600, bytes_limit=1000)
        self.assertEqual(first, expected)
        expected = dict.fromkeys(DEVICE_KEYS)
        expected.update(index=3, allocated=7)
        self.assertEqual(second, expected)

    def test_memory_stats_failure_counted(self):
        write_json(self.jax_script_path, {
            "backends": ["cuda"],
            "devices": [
                {"id": 0, "platform": "gpu", "raise": "XlaRuntimeError"},
                {"id": 1, "platform": "gpu", "stats": {"bytes_in_use": 1}},
            ],
        })
        self.jax._standin_init_backends()
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (True, False, False))
        doc = self.only_document()
        self.assertEqual(doc["errors"], 1)
        self.assertEqual([d["index"] for d in doc["devices"]], [1])

    def test_cpu_only_backends_publish_nothing(self):
        write_json(self.jax_script_path, {
            "backends": ["cpu"],
            "devices": [{"id": 0, "platform": "cpu", "stats": {"bytes_in_use": 1}}],
        })
        self.jax._standin_init_backends()
        self.assertEqual(self.new_probe().cycle(), (False, False, False))

    def test_torch_wins_when_both_are_initialised(self):
        self.jax._standin_init_backends()
        self.init_cuda()
        probe = self.new_probe()
        probe.cycle()
        self.assertEqual(self.only_document()["framework"], "torch")
