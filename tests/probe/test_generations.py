"""The compatibility matrix: one stand-in per PyTorch API generation, each
offering only what that release line has, and what the probe publishes on
each. Every call the probe makes is feature-detected; none may fail."""

import os

from helpers import InProcessCase, alloc, gp

UUID = "5ea1c0de-0000-4000-8000-00000000000a"


def script(generation, **top):
    value = {
        "generation": generation,
        "host": {"reserved_bytes": {"current": 4096, "peak": 8192}},
        "devices": {"0": {"uuid": UUID, "pci": [0, 0x3B, 0], "private_pools": 512, "alloc": alloc()}},
    }
    value.update(top)
    return value


class GenerationMatrixTest(InProcessCase):
    def publish(self, generation, **top):
        self.set_script(script(generation, **top))
        self.init_cuda()
        probe = self.new_probe()
        self.assertEqual(probe.cycle()[0], True, generation)
        doc = self.only_document()
        # Nothing the release lacks was called, nothing failed.
        self.assertEqual(doc["errors"], 0, generation)
        return doc

    def test_each_generation_publishes_what_it_has(self):
        # generation -> (backend, uuid, pci, requested, device_allocs, pinned, private pools, variable)
        expected = {
            "1.12": ("native", None, None, None, None, None, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "2.0": ("native", None, None, None, None, None, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "2.1": ("native", UUID, None, 990, 7, None, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "2.5": ("native", UUID, None, 990, 7, None, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "2.7": ("native", UUID, None, 990, 7, 4096, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "2.9": ("native", UUID, "00000000:3b:00.0", 990, 7, 4096, None, "PYTORCH_ALLOC_CONF"),
            "newest": ("native", UUID, "00000000:3b:00.0", 990, 7, 4096, 512, "PYTORCH_ALLOC_CONF"),
        }
        for generation, want in expected.items():
            with self.subTest(generation=generation):
                self.torch.cuda._standin_reset()
                for name in os.listdir(self.probe_dir) if os.path.isdir(self.probe_dir) else []:
                    os.unlink(os.path.join(self.probe_dir, name))
                doc = self.publish(generation)
                device = doc["devices"][0]
                pinned = doc["pinned_host"]["current"] if doc["pinned_host"] else None
                got = (doc["backend"], device["uuid"], device["pci_bus_id"], device["requested"],
                       device["device_allocs"], pinned, device["private_pools_reserved"],
                       doc["alloc_conf_var"])
                self.assertEqual(got, want)
                self.assertEqual(doc["framework_version"], self.torch._standin.GENERATIONS[generation]["version"])
                # Fragmentation's inputs are there on every generation.
                self.assertEqual((device["inactive_split"], device["reserved"]), (300, 4000))

    def test_cuda_malloc_async_on_every_generation_that_has_it(self):
        for generation in ("2.0", "2.1", "2.5", "2.7", "2.9", "newest"):
            with self.subTest(generation=generation):
                self.torch.cuda._standin_reset()
                doc = self.publish(generation, backend="cudaMallocAsync")
                device = doc["devices"][0]
                self.assertEqual(doc["backend"], "cudaMallocAsync")
                self.assertEqual((device["allocated"], device["reserved"]), (1000, 4000))
                for key in gp._NOT_KEPT_BY_ASYNC:
                    self.assertIsNone(device[key], key)

    def test_runtime_settings_seen_only_where_pytorch_exposes_them(self):
        os.environ["PYTORCH_ALLOC_CONF"] = "max_split_size_mb:256"
        # 2.9+: the accessor shows what _set_allocator_settings changed.
        doc = self.publish("2.9")
        self.assertEqual((doc["alloc_conf"], doc["alloc_conf_source"]), ("max_split_size_mb:256", "environment"))
        self.assertIs(doc["expandable_segments"], False)
        self.torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        gp._Probe(1.0).cycle()
        doc = self.only_document()
        self.assertEqual((doc["alloc_conf"], doc["alloc_conf_source"]), ("expandable_segments:True", "runtime"))
        self.assertIs(doc["expandable_segments"], True)

    def test_runtime_settings_before_2_9_fall_back_to_the_environment(self):
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        doc = self.publish("2.5")
        self.torch.cuda.memory._set_allocator_settings("expandable_segments:False")
        gp._Probe(1.0).cycle()
        doc = self.only_document()
        # No accessor: what the environment says, and the source says so.
        self.assertEqual((doc["alloc_conf"], doc["alloc_conf_source"]), ("expandable_segments:True", "environment"))
        self.assertIs(doc["expandable_segments"], True)

    def test_the_stand_ins_lack_what_their_release_lacks(self):
        cuda = self.torch.cuda
        absent = {
            "1.12": ["get_allocator_backend", "OutOfMemoryError", "host_memory_stats"],
            "2.0": ["host_memory_stats", "private_pool_memory_reserved"],
            "2.5": ["host_memory_stats"],
            "2.9": ["private_pool_memory_reserved"],
        }
        for generation, names in absent.items():
            self.set_script(script(generation))
            for name in names:
                self.assertFalse(hasattr(cuda, name), (generation, name))
            self.assertTrue(hasattr(cuda, "_lazy_call"), generation)
        self.set_script(script("2.0"))
        self.assertFalse(hasattr(self.torch.cuda.memory, "_set_allocator_settings"))
        self.assertFalse(hasattr(self.torch._C, "_accelerator_getAllocatorSettings"))
        self.init_cuda()
        props = cuda.get_device_properties(0)
        self.assertFalse(hasattr(props, "uuid"))
        self.assertFalse(hasattr(props, "pci_bus_id"))
