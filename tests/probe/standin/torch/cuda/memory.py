"""Stand-in of torch.cuda.memory: the run-time settings call NeMo and vLLM
make (torch.cuda.memory._set_allocator_settings, from 2.1), and the
snapshot and history calls of the same releases."""

import warnings

from .. import _C
from .. import _standin


def _set_allocator_settings_impl(env):
    # torch/cuda/memory.py: a thin wrapper that looks its binding up by name
    # on each call. From 2.10 the binding is the accelerator one and the
    # wrapper is @deprecated (typing_extensions: a FutureWarning pointing at
    # the caller, on every call).
    if _standin.has(_standin.script(), "accelerator_settings_setter"):
        warnings.warn(
            "torch.cuda._set_allocator_settings is deprecated. Use torch._C._accelerator_setAllocatorSettings instead.",
            FutureWarning,
            stacklevel=2,
        )
        return _C._accelerator_setAllocatorSettings(env)
    return _C._cuda_cudaCachingAllocator_set_allocator_settings(env)


def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=None, device=None):
    # torch/cuda/memory.py (2.1+): enabled None stops recording.
    _standin.count("_record_memory_history")
    if enabled not in (None, "state", "all"):
        raise ValueError("enabled must be None, 'state' or 'all'")
    _standin.state["history"] = enabled is not None


def _snapshot_impl(device=None):
    """torch.cuda.memory._snapshot(): every device's segments, the trace
    ring, and from 2.3 the allocator's settings (torch/csrc/cuda/Module.cpp:
    "PYTORCH_CUDA_ALLOC_CONF" is the last string parsed, whatever its
    source). The cudaMallocAsync backend refuses (CUDAMallocAsyncAllocator.cpp).
    Counted, so the tests can hold the probe to taking it at most once."""
    _standin.count("_snapshot")
    current = _standin.script()
    if current.get("backend") == "cudaMallocAsync":
        raise RuntimeError(
            "Calling snapshot with backend:cudaMallocAsync is not meaningful. (For backend:native, snapshot returns "
            "a detailed summary of all blocks tracked by the allocator, but the cudaMallocAsync backend does not "
            "track individual blocks.)"
        )
    segments = []
    for key, entry in sorted(_standin.devices_of(current).items()):
        segments.extend(_standin.build_segments(int(key), (entry or {}).get("segments") or []))
    traces = [[{"action": "alloc", "addr": 0, "size": 512, "stream": 0}]] if _standin.state.get("history") else [[]]
    taken = {"segments": segments, "device_traces": traces}
    if _standin.has(current, "snapshot_settings"):
        taken["allocator_settings"] = {
            "PYTORCH_CUDA_ALLOC_CONF": _standin.state["last_settings"],
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": _standin.state["expandable"],
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
        }
    return taken


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
    "_snapshot": _snapshot_impl,
    "_dump_snapshot": _dump_snapshot_impl,
}
_standin.GATED[__name__] = tuple(_BY_FEATURE)


def __getattr__(name):
    if name in _BY_FEATURE and _standin.has(_standin.script(), "set_allocator_settings"):
        # Same releases (2.1+) as the run-time settings call.
        return _BY_FEATURE[name]
    raise AttributeError("module 'torch.cuda.memory' has no attribute %r" % name)
