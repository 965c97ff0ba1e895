"""A stand-in for jax, for gpuscope's allocator-probe tests.

Like real JAX, importing it loads jax._src.xla_bridge with an empty
`_backends` dict; backends come up only when the program first asks for
devices (here: jax._standin_init_backends()). Asking for devices before that
is what the probe must never do (real JAX would preallocate most of the GPU),
so it records a violation (file named by STANDIN_TORCH_VIOLATIONS) and raises.

Script: JSON file named by STANDIN_JAX_SCRIPT, read on every call:
{
  "version": "0.4.35",
  "backends": ["cuda"],            # platform names _standin_init_backends() creates
  "devices": [
    {"id": 0, "platform": "gpu", "local_hardware_id": 0,
     "stats": {"bytes_in_use": 1, "peak_bytes_in_use": 2, "bytes_limit": 3,
               "largest_free_block_bytes": 4, "pool_bytes": 5},  # null = None
     "raise": "message"}           # memory_stats() raises RuntimeError
  ]
}
"""

import json
import os
import threading

from jax._src import xla_bridge as _xla_bridge


def _script():
    path = os.environ.get("STANDIN_JAX_SCRIPT")
    if not path:
        return {}
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


__version__ = str(_script().get("version", "0.4.35"))


def _violation(name):
    line = "jax.%s pid=%d thread=%s\n" % (name, os.getpid(), threading.current_thread().name)
    path = os.environ.get("STANDIN_TORCH_VIOLATIONS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
    raise AssertionError("forbidden call on the stand-in: jax." + name)


class _Device(object):
    def __init__(self, entry):
        self.id = int(entry.get("id", 0))
        self.platform = entry.get("platform", "gpu")
        self.local_hardware_id = entry.get("local_hardware_id", self.id)
        self._entry = entry

    def memory_stats(self):
        if self._entry.get("raise"):
            raise RuntimeError(self._entry["raise"])
        stats = self._entry.get("stats")
        return dict(stats) if stats is not None else None


class _Client(object):
    def __init__(self, platform):
        self.platform = platform


def _standin_init_backends():
    for name in _script().get("backends", ["cuda"]):
        _xla_bridge._backends[name] = _Client(name)


def _standin_reset():
    _xla_bridge._backends.clear()


def _devices(backend):
    if not _xla_bridge._backends:
        _violation("devices() before the backends were initialised")
    found = [_Device(entry) for entry in _script().get("devices", [])]
    if backend is not None:
        wanted = "gpu" if backend in ("cuda", "rocm", "gpu") else backend
        found = [d for d in found if d.platform == wanted]
    return found


def devices(backend=None):
    return _devices(backend)


def local_devices(process_index=None, backend=None, host_id=None):
    return _devices(backend)
