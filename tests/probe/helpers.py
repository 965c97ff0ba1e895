"""Shared fixtures for the probe tests: paths, the stand-in torch loaded in
this process, scripts, probe directories, and child processes."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
ASSETS = os.path.join(REPO, "assets")
PROBE_FILE = os.path.join(ASSETS, "gpuscope_probe.py")
STANDIN = os.path.join(HERE, "standin")
TRAINER = os.path.join(STANDIN, "run_trainer.py")

# The stand-in shadows any real torch/jax, and assets/ stays off sys.path so
# its sitecustomize.py is only ever run by the tests that mean to.
if STANDIN not in sys.path:
    sys.path.insert(0, STANDIN)
sys.dont_write_bytecode = True


def load_probe():
    module = sys.modules.get("gpuscope_probe")
    if module is None:
        spec = importlib.util.spec_from_file_location("gpuscope_probe", PROBE_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules["gpuscope_probe"] = module
        spec.loader.exec_module(module)
    return module


gp = load_probe()

KEYS = [
    "format",
    "version",
    "pid",
    "start_ticks",
    "pid_ns",
    "seq",
    "written_unix_ms",
    "interval_s",
    "errors",
    "framework",
    "framework_version",
    "backend",
    "alloc_conf",
    "alloc_conf_source",
    "alloc_conf_var",
    "alloc_conf_env",
    "expandable_segments",
    "cuda_visible_devices",
    "cuda_device_order",
    "oom_events",
    "last_oom",
    "job",
    "rank",
    "local_rank",
    "world_size",
    "pinned_host",
    "devices",
    "input",
    "environment",
]

DEVICE_KEYS = [
    "index",
    "uuid",
    "pci_bus_id",
    "allocated",
    "allocated_peak",
    "reserved",
    "reserved_peak",
    "active",
    "active_peak",
    "inactive_split",
    "inactive_split_peak",
    "requested",
    "requested_peak",
    "segments",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
    "private_pools_reserved",
    "largest_free_block",
    "bytes_limit",
]

# Variables a probe test controls; the surrounding environment must not leak in.
CONTROLLED_ENV = (
    "GPUSCOPE_PROBE",
    "GPUSCOPE_PROBE_DIR",
    "GPUSCOPE_PROBE_INTERVAL",
    "XDG_RUNTIME_DIR",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "STANDIN_TORCH_SCRIPT",
    "STANDIN_TORCH_VIOLATIONS",
    "STANDIN_JAX_SCRIPT",
    "PYTHONPATH",
)


def write_json(path, value):
    """Write aside and rename, as a reader running concurrently requires."""
    temp = path + ".new"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(temp, path)


def wait_for(predicate, timeout=5.0, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def published(directory):
    """{file name: parsed document} for every published (non-hidden) file."""
    found = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name), "r", encoding="utf-8") as handle:
                found[name] = json.load(handle)
        except (OSError, ValueError):
            continue
    return found


def alloc(**values):
    base = {
        "allocated": 1000,
        "allocated_peak": 1500,
        "reserved": 4000,
        "reserved_peak": 5000,
        "active": 1100,
        "active_peak": 1600,
        "inactive_split": 300,
        "inactive_split_peak": 400,
        "requested": 990,
        "requested_peak": 1490,
        "segments": 3,
        "alloc_retries": 0,
        "ooms": 0,
        "device_allocs": 7,
        "device_frees": 4,
    }
    base.update(values)
    return base


class ScratchMixin(object):
    """A private probe directory, script and violation log per test."""

    def make_scratch(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuscope-probe-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.probe_dir = os.path.join(self.tmp, "probes")
        self.script_path = os.path.join(self.tmp, "script.json")
        self.violations_path = os.path.join(self.tmp, "violations.log")
        self.jax_script_path = os.path.join(self.tmp, "jax.json")

    def set_script(self, value):
        write_json(self.script_path, value)

    def violations(self):
        try:
            with open(self.violations_path, "r", encoding="utf-8") as handle:
                return handle.read().splitlines()
        except OSError:
            return []


class InProcessCase(ScratchMixin, unittest.TestCase):
    """Runs the probe inside the test process against the stand-in torch."""

    def setUp(self):
        self.make_scratch()
        saved = {name: os.environ.get(name) for name in CONTROLLED_ENV}

        def restore():
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

        self.addCleanup(restore)
        for name in CONTROLLED_ENV:
            os.environ.pop(name, None)
        os.environ["GPUSCOPE_PROBE_DIR"] = self.probe_dir
        os.environ["STANDIN_TORCH_SCRIPT"] = self.script_path
        os.environ["STANDIN_TORCH_VIOLATIONS"] = self.violations_path
        os.environ["STANDIN_JAX_SCRIPT"] = self.jax_script_path
        import torch

        self.torch = torch
        torch.cuda._standin_reset()
        # What the probe learnt of run-time allocator settings belongs to
        # one process; here every test is a fresh one.
        self.reset_runtime_settings()
        self.addCleanup(self.reset_runtime_settings)
        self.set_script({"devices": {"0": {"alloc": alloc()}}})
        self.addCleanup(self.assert_no_violations)

    def reset_runtime_settings(self):
        gp._runtime_settings = (None, None)
        gp._settings_unseen = False

    def assert_no_violations(self):
        self.assertEqual(self.violations(), [], "the probe made a forbidden call")

    def new_probe(self, interval=1.0):
        probe = gp._Probe(interval)
        self.addCleanup(probe.close)
        return probe

    def init_cuda(self):
        self.torch.cuda._standin_init()

    def only_document(self):
        docs = published(self.probe_dir)
        self.assertEqual(len(docs), 1, sorted(docs))
        return next(iter(docs.values()))


def child_env(pythonpath=(), **extra):
    """Environment for a child Python: the surrounding probe settings removed."""
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED_ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    for key, value in extra.items():
        if value is not None:
            env[key] = str(value)
    return env


def run_python(code, env, timeout=20):
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
    )


def read_pids(path):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except OSError:
        return []
