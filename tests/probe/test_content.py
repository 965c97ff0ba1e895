"""What the probe publishes: keys, values, nulls, parsing of the environment."""

import json
import os
import time

from helpers import DEVICE_KEYS, KEYS, InProcessCase, alloc, gp, published


class DocumentTest(InProcessCase):
    def full_script(self, **top):
        script = {
            "backend": "native",
            "host": {
                "allocated_bytes.current": 2048,
                "allocated_bytes.peak": 4096,
                "active_bytes.current": 1024,
            },
            "devices": {
                "0": {"uuid": "5ea1c0de-1111-4000-8000-000000000000", "alloc": alloc()},
                "1": {
                    "uuid": "GPU-5ea1c0de-2222-4000-8000-000000000000",
                    "alloc": alloc(allocated=7, reserved=70, alloc_retries=2, ooms=1),
                },
            },
        }
        script.update(top)
        return script

    def test_exact_keys_and_values_from_the_script(self):
        self.set_script(self.full_script())
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True,max_split_size_mb:128"
        os.environ["RANK"] = "3"
        os.environ["LOCAL_RANK"] = "1"
        os.environ["WORLD_SIZE"] = "8"
        self.init_cuda()
        probe = self.new_probe(interval=2.5)
        before = int(time.time() * 1000)
        self.assertEqual(probe.cycle(), (True, False, False))

        names = os.listdir(self.probe_dir)
        self.assertEqual(names, ["%d-%d.json" % (os.getpid(), gp._read_start_ticks())])
        doc = self.only_document()
        self.assertEqual(list(doc), KEYS)
        self.assertEqual(doc["format"], "gpuscope-probe")
        self.assertEqual(doc["version"], 1)
        self.assertEqual(doc["pid"], os.getpid())
        self.assertEqual(doc["start_ticks"], gp._read_start_ticks())
        self.assertEqual(doc["pid_ns"], os.readlink("/proc/self/ns/pid"))
        self.assertEqual(doc["seq"], 1)
        self.assertGreaterEqual(doc["written_unix_ms"], before)
        self.assertLessEqual(doc["written_unix_ms"], int(time.time() * 1000))
        self.assertEqual(doc["interval_s"], 2.5)
        self.assertEqual(doc["errors"], 0)
        self.assertEqual(doc["framework"], "torch")
        self.assertEqual(doc["framework_version"], self.torch.__version__)
        self.assertEqual(doc["backend"], "native")
        self.assertEqual(doc["alloc_conf"], "expandable_segments:True,max_split_size_mb:128")
        self.assertEqual(doc["alloc_conf_var"], "PYTORCH_CUDA_ALLOC_CONF")
        self.assertEqual(doc["alloc_conf_source"], "environment")
        self.assertEqual(doc["alloc_conf_env"], {
            "PYTORCH_ALLOC_CONF": None,
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128",
        })
        self.assertIs(doc["expandable_segments"], True)
        self.assertEqual((doc["cuda_visible_devices"], doc["cuda_device_order"]), (None, None))
        self.assertEqual(doc["oom_events"], 0)
        self.assertEqual((doc["rank"], doc["local_rank"], doc["world_size"]), (3, 1, 8))
        self.assertEqual(doc["pinned_host"], {"current": 2048, "peak": 4096})

        self.assertEqual([d["index"] for d in doc["devices"]], [0, 1])
        for device in doc["devices"]:
            self.assertEqual(list(device), DEVICE_KEYS)
        first, second = doc["devices"]
        # PyTorch's str(props.uuid) is bare; it is published as given.
        expected = dict(alloc(), index=0, uuid="5ea1c0de-1111-4000-8000-000000000000")
        expected.update(pci_bus_id=None, private_pools_reserved=None, largest_free_block=None, bytes_limit=None)
        self.assertEqual(first, expected)
        self.assertEqual(second["uuid"], "GPU-5ea1c0de-2222-4000-8000-000000000000")
        self.assertEqual((second["allocated"], second["reserved"]), (7, 70))
        self.assertEqual((second["alloc_retries"], second["ooms"]), (2, 1))

        self.assertEqual(probe.cycle(), (True, False, False))
        self.assertEqual(self.only_document()["seq"], 2)

    def test_file_is_compact_utf8_json(self):
        self.init_cuda()
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True\udcff"
        self.new_probe().cycle()
        with open(os.path.join(self.probe_dir, os.listdir(self.probe_dir)[0]), "rb") as handle:
            raw = handle.read()
        raw.decode("ascii")
        doc = json.loads(raw)
        self.assertEqual(doc["alloc_conf"], "expandable_segments:True\ufffd")

    def test_absent_or_malformed_counters_are_null_not_zero(self):
        stats = {
            "allocated_bytes": {"all": {"current": 11, "peak": 12}},
            "reserved_bytes": {"all": {"current": 21}},
            "active_bytes": {"large_pool": {"current": 5, "peak": 6}},
            "inactive_split_bytes": "garbage",
            "segment": {"all": {"current": True}},
            "num_alloc_retries": "3",
            "num_ooms": -1,
        }
        self.set_script({"devices": {"0": {"stats": stats}}})
        self.init_cuda()
        self.new_probe().cycle()
        device = self.only_document()["devices"][0]
        self.assertEqual((device["allocated"], device["allocated_peak"]), (11, 12))
        self.assertEqual((device["reserved"], device["reserved_peak"]), (21, None))
        for key in DEVICE_KEYS[DEVICE_KEYS.index("active"):]:
            self.assertIsNone(device[key], key)

    def test_older_torch_without_device_alloc_counters(self):
        self.set_script({"layout": "legacy", "devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        self.new_probe().cycle()
        device = self.only_document()["devices"][0]
        self.assertIsNone(device["device_allocs"])
        self.assertIsNone(device["device_frees"])
        self.assertEqual(device["alloc_retries"], 0)

    def test_backend_cuda_malloc_async_counters_not_kept_are_null(self):
        self.set_script({"backend": "cudaMallocAsync", "devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        probe = self.new_probe()
        probe.cycle()
        doc = self.only_document()
        self.assertEqual(doc["backend"], "cudaMallocAsync")
        device = doc["devices"][0]
        # What that backend fills is real...
        for key, value in (("allocated", 1000), ("allocated_peak", 1500), ("reserved", 4000),
                           ("reserved_peak", 5000), ("active", 1100), ("active_peak", 1600)):
            self.assertEqual(device[key], value, key)
        # ...and the zeros PyTorch reports for the rest are unknowns.
        for key in gp._NOT_KEPT_BY_ASYNC:
            self.assertIsNone(device[key], key)
        # Retries are not kept by that backend: no point re-reading them.
        self.assertIsNone(probe._torch.watch)

    def test_backend_is_native_when_torch_lacks_the_call(self):
        # Before 2.0 there was no get_allocator_backend(): the native caching
        # allocator was the only one.
        self.set_script({"backend": None, "devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        self.new_probe().cycle()
        doc = self.only_document()
        self.assertEqual(doc["backend"], "native")
        self.assertEqual(doc["errors"], 0)

    def conf_cases(self, generation, cases):
        self.set_script({"generation": generation, "devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        probe = self.new_probe()
        for env, conf, var, expandable in cases:
            for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
                os.environ.pop(name, None)
            os.environ.update(env)
            probe.cycle()
            doc = self.only_document()
            self.assertEqual(
                (doc["alloc_conf"], doc["alloc_conf_var"], doc["expandable_segments"]),
                (conf, var, expandable),
                (generation, env),
            )
            self.assertEqual(doc["alloc_conf_env"], {
                "PYTORCH_ALLOC_CONF": env.get("PYTORCH_ALLOC_CONF"),
                "PYTORCH_CUDA_ALLOC_CONF": env.get("PYTORCH_CUDA_ALLOC_CONF"),
            })

    def test_alloc_conf_variables_before_2_9(self):
        # Only PYTORCH_CUDA_ALLOC_CONF is read; PYTORCH_ALLOC_CONF is ignored.
        self.conf_cases("2.5", [
            ({}, None, "PYTORCH_CUDA_ALLOC_CONF", False),
            ({"PYTORCH_ALLOC_CONF": "expandable_segments:True"}, None, "PYTORCH_CUDA_ALLOC_CONF", False),
            ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
              "PYTORCH_ALLOC_CONF": "expandable_segments:False"},
             "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF", True),
        ])

    def test_alloc_conf_variables_of_2_9(self):
        # PYTORCH_ALLOC_CONF first; the deprecated name only when it is unset.
        self.conf_cases("2.9", [
            ({}, None, "PYTORCH_ALLOC_CONF", False),
            ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
             "expandable_segments:True", "PYTORCH_ALLOC_CONF", True),
            ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
              "PYTORCH_ALLOC_CONF": "max_split_size_mb:64"},
             "max_split_size_mb:64", "PYTORCH_ALLOC_CONF", False),
        ])

    def test_alloc_conf_variables_from_2_10(self):
        # c10 reads PYTORCH_CUDA_ALLOC_CONF first again, then
        # PYTORCH_ALLOC_CONF (c10/core/AllocatorConfig.cpp, "keep the
        # parsing order and logic stable"); neither is deprecated.
        for generation in ("2.11", "newest"):
            self.torch.cuda._standin_reset()
            for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
                os.environ.pop(name, None)
            self.conf_cases(generation, [
                ({}, None, "PYTORCH_CUDA_ALLOC_CONF", False),
                ({"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
                 "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF", True),
                ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64",
                  "PYTORCH_ALLOC_CONF": "expandable_segments:True"},
                 "max_split_size_mb:64", "PYTORCH_CUDA_ALLOC_CONF", False),
            ])

    def test_expandable_segments_parsing(self):
        parse = gp._expandable_segments
        self.assertTrue(parse("expandable_segments:True", False))
        self.assertTrue(parse(" max_split_size_mb : 128 , expandable_segments : True ", False))
        self.assertTrue(parse("roundup_power2_divisions:[256:1,512:2,>:4],expandable_segments:True", False))
        self.assertFalse(parse("expandable_segments:False", True))
        self.assertFalse(parse("expandable_segments:True,expandable_segments:False", False))
        # PyTorch's ConfigTokenizer takes exactly "True"/"False" and exact
        # keys; anything else is an error there, so it never took effect.
        self.assertFalse(parse("expandable_segments:true", False))
        self.assertFalse(parse("EXPANDABLE_SEGMENTS:True", False))
        self.assertFalse(parse("expandable_segments", False))
        # A string that does not name the key leaves the setting alone.
        self.assertTrue(parse("garbage_collection_threshold:0.6", True))
        self.assertFalse(parse("", False))
        self.assertFalse(parse(None, False))

    def test_the_job_key_comes_from_the_launcher(self):
        self.init_cuda()
        probe = self.new_probe()
        cases = [
            ({}, None),
            ({"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29500"}, "10.0.0.7:29500"),
            ({"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "not a port"}, None),
            ({"TORCHELASTIC_RUN_ID": "job-42", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "torchelastic:job-42"),
            ({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "h:1"),
        ]
        for env, job in cases:
            for name in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"):
                os.environ.pop(name, None)
            os.environ.update(env)
            probe.cycle()
            self.assertEqual(self.only_document()["job"], job, env)

    def test_rank_variables(self):
        self.init_cuda()
        probe = self.new_probe()
        cases = [
            ({"RANK": "0", "LOCAL_RANK": " 7 ", "WORLD_SIZE": "64"}, (0, 7, 64)),
            ({"RANK": "abc", "LOCAL_RANK": "1.5", "WORLD_SIZE": ""}, (None, None, None)),
            ({"RANK": "1_000", "LOCAL_RANK": "\u0661", "WORLD_SIZE": "99999999999"},
             (None, None, None)),
            ({"RANK": "-1", "LOCAL_RANK": "+2", "WORLD_SIZE": "0x10"}, (None, None, None)),
            ({}, (None, None, None)),
        ]
        for env, expected in cases:
            for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
                os.environ.pop(name, None)
            os.environ.update(env)
            probe.cycle()
            doc = self.only_document()
            self.assertEqual((doc["rank"], doc["local_rank"], doc["world_size"]), expected, env)

    def test_nothing_published_before_cuda_is_initialised(self):
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (False, False, False))
        self.assertFalse(os.path.exists(self.probe_dir))
        self.assertEqual(self.torch._standin.calls.get("memory_stats_as_nested_dict"), None)
        self.init_cuda()
        self.assertEqual(probe.cycle(), (True, False, False))
        self.assertEqual(len(published(self.probe_dir)), 1)

    def test_untouched_and_uninitialised_devices_are_skipped(self):
        self.set_script({
            "device_count": 4,
            "devices": {"0": {"empty": True}, "2": {"alloc": alloc()}},
        })
        self.init_cuda()
        self.new_probe().cycle()
        self.assertEqual([d["index"] for d in self.only_document()["devices"]], [2])

    def test_no_device_with_stats_writes_nothing(self):
        self.set_script({"device_count": 2, "devices": {"0": {"empty": True}}})
        self.init_cuda()
        probe = self.new_probe()
        self.assertEqual(probe.cycle(), (False, False, False))
        self.assertEqual(published(self.probe_dir), {})

    def test_uuid_as_given_cached_and_failure_tolerated(self):
        self.set_script({
            "devices": {
                "0": {"uuid": "abc", "alloc": alloc()},
                "1": {"uuid": "MIG-def", "alloc": alloc()},
                "2": {"uuid": None, "alloc": alloc()},
            }
        })
        self.init_cuda()
        probe = self.new_probe()
        for _ in range(3):
            probe.cycle()
        doc = self.only_document()
        # PyTorch gives a bare UUID, also for a MIG instance: whether it is
        # NVML's GPU- or MIG- UUID is gpuscope's to find out.
        self.assertEqual([d["uuid"] for d in doc["devices"]], ["abc", "MIG-def", None])
        self.assertEqual(self.torch._standin.calls["get_device_properties"], 3)

    def test_uuid_failure_counted_once(self):
        self.set_script({"raise": {"get_device_properties": "boom"},
                         "devices": {"0": {"alloc": alloc()}}})
        self.init_cuda()
        probe = self.new_probe()
        probe.cycle()
        probe.cycle()
        doc = self.only_document()
        self.assertIsNone(doc["devices"][0]["uuid"])
        self.assertEqual(doc["errors"], 1)

    def test_pinned_host_layouts(self):
        self.init_cuda()
        probe = self.new_probe()
        cases = [
            (None, None),
            ({}, None),
            ({"allocated_bytes.current": 10, "allocated_bytes.peak": 20,
              "reserved_bytes.current": 30, "reserved_bytes.peak": 40,
              "segment.current": 2, "num_host_alloc": 5},
             {"current": 30, "peak": 40}),
            ({"allocations.current": 3, "allocated_bytes.current": 50,
              "allocated_bytes.peak": 60, "active_bytes.current": 5},
             {"current": 50, "peak": 60}),
            ({"allocated_bytes": {"current": 1, "peak": 2}}, {"current": 1, "peak": 2}),
            ({"pinned.reserved_bytes.all.current": 8}, {"current": 8, "peak": None}),
            ({"host_alloc_time.total": 5}, None),
        ]
        for host, expected in cases:
            script = {"devices": {"0": {"alloc": alloc()}}}
            if host is not None:
                script["host"] = host
            self.set_script(script)
            probe.cycle()
            self.assertEqual(self.only_document()["pinned_host"], expected, host)

    def test_torch_still_importing_is_left_alone(self):
        self.init_cuda()
        spec = self.torch.__spec__
        spec._initializing = True
        try:
            probe = self.new_probe()
            self.assertEqual(probe.cycle(), (False, False, False))
            self.assertNotIn("is_initialized", self.torch._standin.calls)
        finally:
            spec._initializing = False

    def test_many_devices_stay_within_the_file_limit(self):
        devices = {str(i): {"alloc": alloc(reserved=10**15 + i)} for i in range(200)}
        self.set_script({"devices": devices})
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "x" * 100000
        self.init_cuda()
        self.new_probe().cycle()
        name = os.listdir(self.probe_dir)[0]
        self.assertLess(os.path.getsize(os.path.join(self.probe_dir, name)), 64 * 1024)
        doc = self.only_document()
        self.assertEqual(len(doc["devices"]), 64)
        self.assertEqual(len(doc["alloc_conf"]), 1024)


class ConfigurationTest(InProcessCase):
    def test_interval_resolution(self):
        resolve = gp._resolve_interval
        self.assertEqual(resolve(None), 1.0)
        self.assertEqual(resolve(2), 2.0)
        self.assertEqual(resolve(0.01), 0.1)
        self.assertEqual(resolve(1e9), 60.0)
        self.assertEqual(resolve(float("nan")), 1.0)
        self.assertEqual(resolve(float("inf")), 60.0)
        os.environ["GPUSCOPE_PROBE_INTERVAL"] = "0.5"
        self.assertEqual(resolve(None), 0.5)
        self.assertEqual(resolve(3), 3.0)
        os.environ["GPUSCOPE_PROBE_INTERVAL"] = "soon"
        self.assertEqual(resolve(None), 1.0)
        os.environ["GPUSCOPE_PROBE_INTERVAL"] = "0"
        self.assertEqual(resolve(None), 0.1)

    def test_start_ticks_is_field_22_of_proc_stat(self):
        if not os.path.exists("/proc/self/stat"):
            self.skipTest("no /proc")
        with open("/proc/%d/stat" % os.getpid(), "rb") as handle:
            data = handle.read()
        fields = data[data.rindex(b")") + 2:].split(b" ")
        self.assertEqual(gp._read_start_ticks(), int(fields[22 - 3]))
