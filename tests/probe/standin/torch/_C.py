"""Stand-in of torch._C: only the bindings the probe and the tests touch,
present in the releases that have them (see the feature table in
_standin.py)."""

from . import _standin


def _get_settings_impl():
    # c10::CachingAllocator::getAllocatorSettings: the last settings string
    # parsed (the environment's at initialisation, or a run-time one).
    _standin.count("_accelerator_getAllocatorSettings")
    return _standin.state["last_settings"]


def _legacy_set_settings_impl(env):
    # torch/csrc/cuda/Module.cpp (2.1-2.9): a TORCH_CHECK failure is a
    # RuntimeError.
    _standin.count("_cuda_cudaCachingAllocator_set_allocator_settings")
    _standin.apply_settings(str(env), RuntimeError)


def _accelerator_set_settings_impl(env):
    # torch/csrc/DeviceAccelerator.cpp (2.10+): pybind, TORCH_CHECK_VALUE
    # failures are ValueErrors.
    _standin.count("_accelerator_setAllocatorSettings")
    if not isinstance(env, str):
        raise TypeError("_accelerator_setAllocatorSettings(): incompatible function arguments")
    _standin.apply_settings(env, ValueError)


def _accelerator_get_device_stats_impl(device_index):
    # torch/csrc/DeviceAccelerator.cpp (2.9+): the device allocator's
    # counters, the same nested dict torch.cuda's memory stats give.
    from . import cuda

    return cuda.memory_stats_as_nested_dict(device_index)


def _is_history_enabled_impl():
    # torch/csrc/cuda/Module.cpp: whether _record_memory_history is on.
    _standin.count("_cuda_isHistoryEnabled")
    return bool(_standin.state.get("history"))


def _attach_oom_observer_impl(observer):
    # torch/csrc/cuda/Module.cpp: kept for the process's life; the
    # cudaMallocAsync backend refuses (CUDAMallocAsyncAllocator.cpp).
    _standin.count("_cuda_attach_out_of_memory_observer")
    current = _standin.script()
    if current.get("backend") == "cudaMallocAsync":
        raise RuntimeError(
            "cudaMallocAsync does not yet support attachOutOfMemoryObserver. If you need it, please file an issue "
            "describing your use case."
        )
    _standin.oom_observers.append(observer)


# name -> (the feature of the releases that have it, the stand-in)
_BY_FEATURE = {
    "_cuda_attach_out_of_memory_observer": ("oom_observer", _attach_oom_observer_impl),
    "_accelerator_getAllocatorSettings": ("settings_getter", _get_settings_impl),
    "_accelerator_setAllocatorSettings": ("accelerator_settings_setter", _accelerator_set_settings_impl),
    "_cuda_cudaCachingAllocator_set_allocator_settings": ("legacy_settings_setter", _legacy_set_settings_impl),
    "_accelerator_getDeviceStats": ("accelerator_allocator", _accelerator_get_device_stats_impl),
    "_cuda_isHistoryEnabled": ("history_query", _is_history_enabled_impl),
}
_standin.GATED[__name__] = tuple(_BY_FEATURE)


def __getattr__(name):
    found = _BY_FEATURE.get(name)
    if found is not None and _standin.has(_standin.script(), found[0]):
        return found[1]
    raise AttributeError("module 'torch._C' has no attribute %r" % name)
