"""The compatibility matrix: one stand-in per PyTorch API generation, each
offering only what that release line has, and what the probe publishes on
each. Every call the probe makes is feature-detected; none may fail."""

import os
import subprocess
import sys
import warnings

from helpers import (
    ASSETS,
    STANDIN,
    TRAINER,
    InProcessCase,
    alloc,
    child_env,
    gp,
    published,
    wait_for,
)

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
            # From 2.10 c10 reads the CUDA name first again.
            "2.11": ("native", UUID, "00000000:3b:00.0", 990, 7, 4096, None, "PYTORCH_CUDA_ALLOC_CONF"),
            "newest": ("native", UUID, "00000000:3b:00.0", 990, 7, 4096, 512, "PYTORCH_CUDA_ALLOC_CONF"),
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
        for generation in ("2.0", "2.1", "2.5", "2.7", "2.9", "2.11", "newest"):
            with self.subTest(generation=generation):
                self.torch.cuda._standin_reset()
                doc = self.publish(generation, backend="cudaMallocAsync")
                device = doc["devices"][0]
                self.assertEqual(doc["backend"], "cudaMallocAsync")
                self.assertEqual((device["allocated"], device["reserved"]), (1000, 4000))
                for key in gp._NOT_KEPT_BY_ASYNC:
                    self.assertIsNone(device[key], key)

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
        # The settings bindings, by release: a real 2.11.0 has the
        # accelerator setter and no getter.
        bindings = ("_cuda_cudaCachingAllocator_set_allocator_settings", "_accelerator_setAllocatorSettings",
                    "_accelerator_getAllocatorSettings", "_accelerator_getDeviceStats", "_cuda_isHistoryEnabled")
        present = {
            "2.1": (True, False, False, False, False),
            "2.5": (True, False, False, False, True),
            "2.9": (True, False, False, True, True),
            "2.11": (False, True, False, True, True),
            "newest": (False, True, True, True, True),
        }
        for generation, want in present.items():
            self.set_script(script(generation))
            self.assertEqual(tuple(hasattr(self.torch._C, name) for name in bindings), want, generation)
        self.set_script(script("2.11"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        self.assertEqual([w.category for w in caught], [FutureWarning])
        self.assertIn("torch._C._accelerator_setAllocatorSettings instead", str(caught[0].message))
        self.assertEqual(self.torch._standin.calls.get("_accelerator_setAllocatorSettings"), 1)
        self.set_script(script("2.0"))
        self.init_cuda()
        props = cuda.get_device_properties(0)
        self.assertFalse(hasattr(props, "uuid"))
        self.assertFalse(hasattr(props, "pci_bus_id"))


# The two ways a program changes allocator settings on 2.10+: the binding,
# and the deprecated torch.cuda.memory call that forwards to it.
SETTERS = {
    "torch._C._accelerator_setAllocatorSettings": lambda torch, text: torch._C._accelerator_setAllocatorSettings(text),
    "torch.cuda.memory._set_allocator_settings": lambda torch, text: torch.cuda.memory._set_allocator_settings(text),
}


def quietly(call, *args):
    # torch.cuda.memory._set_allocator_settings warns from 2.10 on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return call(*args)


class RuntimeSettingsTest(InProcessCase):
    """Allocator settings changed while the program runs. No release up to
    2.11 offers a getter for them, so the probe wraps the setters: at
    torch.cuda's import under `gpuscope run` (early), or at a start() in a
    running program (late), which then reads one snapshot for what was set
    before."""

    def arm(self, generation, early=True, **top):
        self.set_script(script(generation, **top))
        self.init_cuda()
        gp._watch_settings(self.torch, early)
        return self.new_probe()

    def document(self, probe):
        self.assertEqual(probe.cycle()[0], True)
        doc = self.only_document()
        self.assertEqual(doc["errors"], 0)
        return doc

    def settings(self, doc):
        return doc["alloc_conf"], doc["alloc_conf_source"], doc["expandable_segments"]

    def fresh(self):
        self.torch.cuda._standin_reset()
        self.reset_runtime_settings()
        for name in os.listdir(self.probe_dir) if os.path.isdir(self.probe_dir) else []:
            os.unlink(os.path.join(self.probe_dir, name))

    def test_2_11_settings_set_at_run_time_through_either_setter_are_seen(self):
        # What the real check found on torch 2.11.0: expandable segments set
        # at run time were reported as false, with a fragmentation figure.
        os.environ["PYTORCH_ALLOC_CONF"] = "max_split_size_mb:256"
        for name, setter in SETTERS.items():
            with self.subTest(setter=name):
                self.fresh()
                probe = self.arm("2.11")
                doc = self.document(probe)
                self.assertEqual(self.settings(doc), ("max_split_size_mb:256", "environment", False))
                quietly(setter, self.torch, "expandable_segments:True")
                doc = self.document(probe)
                self.assertEqual(self.settings(doc), ("expandable_segments:True", "runtime", True))
                # Native with expandable segments: gpuscope leaves the job's
                # fragmentation null (src/collect/allocator.rs, counting()),
                # inactive split being no measure of it there.
                self.assertEqual((doc["backend"], doc["devices"][0]["inactive_split"]), ("native", 300))
                self.assertIsNone(self.torch._standin.calls.get("_snapshot"), "an early probe needs no snapshot")

    def test_a_refused_string_reaches_the_caller_unchanged_and_is_not_noted(self):
        probe = self.arm("2.11")
        self.document(probe)
        for name, setter in SETTERS.items():
            with self.subTest(setter=name):
                with self.assertRaises(ValueError) as raised:
                    quietly(setter, self.torch, "expandable_segments:Yes")
                # As a real torch 2.11.0 words it.
                self.assertEqual(str(raised.exception),
                                 "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'Yes'")
                self.assertEqual(self.settings(self.document(probe)), (None, None, False))

    def test_a_later_string_changes_only_the_keys_it_names(self):
        # c10's parseArgs keeps expandable_segments unless a string names it.
        probe = self.arm("2.11")
        setter = self.torch._C._accelerator_setAllocatorSettings
        setter("expandable_segments:True")
        setter("garbage_collection_threshold:0.6")
        self.assertEqual(self.settings(self.document(probe)), ("garbage_collection_threshold:0.6", "runtime", True))
        setter("expandable_segments:False")
        self.assertEqual(self.settings(self.document(probe)), ("expandable_segments:False", "runtime", False))

    def test_releases_before_2_10_through_their_own_binding(self):
        for generation in ("2.5", "2.9"):
            with self.subTest(generation=generation):
                self.fresh()
                os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
                probe = self.arm(generation)
                self.assertEqual(self.settings(self.document(probe)),
                                 ("expandable_segments:True", "environment", True))
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # no deprecation before 2.10
                    self.torch.cuda.memory._set_allocator_settings("expandable_segments:False")
                self.assertEqual(self.settings(self.document(probe)),
                                 ("expandable_segments:False", "runtime", False))

    def test_the_getter_of_newer_releases_shows_a_change_no_wrapper_saw(self):
        os.environ["PYTORCH_ALLOC_CONF"] = "max_split_size_mb:256"
        self.set_script(script("newest"))
        self.init_cuda()
        quietly(self.torch.cuda.memory._set_allocator_settings, "expandable_segments:True")
        probe = self.new_probe()
        self.assertEqual(self.settings(self.document(probe)), ("expandable_segments:True", "runtime", True))
        # The getter returns only the last string; the wrapped setters keep
        # what earlier strings set.
        gp._watch_settings(self.torch, early=False)
        self.torch._C._accelerator_setAllocatorSettings("garbage_collection_threshold:0.6")
        self.assertEqual(self.settings(self.document(probe)), ("garbage_collection_threshold:0.6", "runtime", True))
        self.assertIsNone(self.torch._standin.calls.get("_snapshot"), "the getter needs no snapshot")

    def test_a_late_probe_reads_what_was_set_before_from_one_snapshot(self):
        self.set_script(script("2.11"))
        self.init_cuda()
        # The program changed the settings before start() wrapped anything.
        quietly(self.torch.cuda.memory._set_allocator_settings, "expandable_segments:True")
        gp._watch_settings(self.torch, early=False)
        probe = self.new_probe()
        self.assertEqual(self.settings(self.document(probe)), ("expandable_segments:True", "runtime", True))
        self.document(probe)
        self.torch._C._accelerator_setAllocatorSettings("expandable_segments:False")
        self.assertEqual(self.settings(self.document(probe)), ("expandable_segments:False", "runtime", False))
        self.assertEqual(self.torch._standin.calls.get("_snapshot"), 1, "once in the process's life")

    def test_the_late_snapshot_waits_while_it_would_be_long_or_history_is_recorded(self):
        many = gp._MAX_SETTINGS_SNAPSHOT_BLOCKS + 1
        probe = self.arm("2.11", early=False, devices={"0": {"alloc": alloc(segments=many)}})
        self.document(probe)
        self.assertIsNone(self.torch._standin.calls.get("_snapshot"))
        self.set_script(script("2.11"))
        self.torch.cuda.memory._record_memory_history(enabled="all")
        self.document(probe)
        self.assertIsNone(self.torch._standin.calls.get("_snapshot"))
        self.torch.cuda.memory._record_memory_history(enabled=None)
        self.document(probe)
        self.document(probe)
        self.assertEqual(self.torch._standin.calls.get("_snapshot"), 1)

    def test_no_late_snapshot_where_it_cannot_help_or_be_bounded(self):
        cases = (
            ("newest", "native"),  # the getter answers
            ("2.11", "cudaMallocAsync"),  # refuses snapshots, has no segments
            ("2.1", "native"),  # cannot say whether history is recorded
        )
        for generation, backend in cases:
            with self.subTest(generation=generation, backend=backend):
                self.fresh()
                probe = self.arm(generation, early=False, backend=backend)
                self.document(probe)
                self.document(probe)
                self.assertIsNone(self.torch._standin.calls.get("_snapshot"))
                self.assertIs(gp._settings_unseen, False)

    def test_each_setter_is_wrapped_once_and_keeps_its_name(self):
        self.arm("2.11")
        wrapped = self.torch._C._accelerator_setAllocatorSettings
        gp._watch_settings(self.torch, early=False)
        self.assertIs(self.torch._C._accelerator_setAllocatorSettings, wrapped)
        self.assertEqual(wrapped.__name__, "_accelerator_set_settings_impl")
        self.assertIs(gp._settings_unseen, False, "nothing was wrapped late")


class RuntimeSettingsProcessTest(InProcessCase):
    def test_gpuscope_run_sees_a_2_11_run_time_setting(self):
        # The probe as users get it: sitecustomize on PYTHONPATH, the
        # program calling torch.cuda.memory._set_allocator_settings as NeMo
        # and vLLM do.
        self.set_script(script("2.11"))
        env = child_env(
            (ASSETS, STANDIN),
            GPUSCOPE_PROBE_DIR=self.probe_dir,
            GPUSCOPE_PROBE_INTERVAL="0.1",
            STANDIN_TORCH_SCRIPT=self.script_path,
            STANDIN_TORCH_VIOLATIONS=self.violations_path,
        )
        process = subprocess.Popen(
            [sys.executable, TRAINER, "--set-allocator-settings", "expandable_segments:True"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        )
        self.addCleanup(process.communicate)
        self.addCleanup(lambda: process.poll() is None and process.terminate())

        def runtime():
            docs = [d for d in published(self.probe_dir).values() if d["alloc_conf_source"] == "runtime"]
            return docs[0] if docs else None

        doc = wait_for(runtime, 10)
        self.assertTrue(doc, published(self.probe_dir))
        self.assertEqual((doc["alloc_conf"], doc["expandable_segments"]), ("expandable_segments:True", True))
        process.terminate()
        _, err = process.communicate(timeout=10)
        # The program's own deprecation warning, as real 2.11 prints it.
        self.assertIn("FutureWarning: torch.cuda._set_allocator_settings is deprecated", err)
