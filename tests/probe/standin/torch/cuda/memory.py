"""Stand-in of torch.cuda.memory: the run-time settings call NeMo and vLLM
make (torch.cuda.memory._set_allocator_settings, from 2.1)."""

from .. import _C
from .. import _standin


def _set_allocator_settings_impl(env):
    # torch/cuda/memory.py: a thin wrapper over the C++ binding.
    return _C._cuda_cudaCachingAllocator_set_allocator_settings(env)


def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=None, device=None):
    # torch/cuda/memory.py (2.1+): enabled None stops recording.
    _standin.count("_record_memory_history")
    if enabled not in (None, "state", "all"):
        raise ValueError("enabled must be None, 'state' or 'all'")
    _standin.state["history"] = enabled is not None


def _dump_snapshot_impl(filename="dump_snapshot.pickle"):
    # torch/cuda/memory.py: pickle.dump(_snapshot(), open(filename, "wb")).
    import pickle

    _standin.count("_dump_snapshot")
    current = _standin.script()
    segments = []
    for key, entry in sorted(_standin.devices_of(current).items()):
        segments.extend(_standin.build_segments(int(key), (entry or {}).get("segments") or []))
    traces = [[{"action": "alloc", "addr": 0, "size": 512, "stream": 0}]] if _standin.state.get("history") else [[]]
    with open(filename, "wb") as handle:
        pickle.dump({"segments": segments, "device_traces": traces}, handle)


_BY_FEATURE = {
    "_set_allocator_settings": _set_allocator_settings_impl,
    "_record_memory_history": _record_memory_history_impl,
    "_dump_snapshot": _dump_snapshot_impl,
}


def __getattr__(name):
    if name in _BY_FEATURE and _standin.has(_standin.script(), "set_allocator_settings"):
        # Same releases (2.1+) as the run-time settings call.
        return _BY_FEATURE[name]
    raise AttributeError("module 'torch.cuda.memory' has no attribute %r" % name)
