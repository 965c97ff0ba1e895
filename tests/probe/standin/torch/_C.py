"""Stand-in of torch._C: only the allocator-settings bindings the probe and
the tests touch, present in the releases that have them."""

from . import _standin


def _get_settings_impl():
    # c10::CachingAllocator::getAllocatorSettings: the last settings string
    # parsed (the environment's at initialisation, or a run-time one).
    _standin.count("_accelerator_getAllocatorSettings")
    return _standin.state["last_settings"]


def _set_settings_impl(env):
    _standin.count("_cuda_cudaCachingAllocator_set_allocator_settings")
    _standin.state["last_settings"] = str(env)


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


def __getattr__(name):
    current = _standin.script()
    if name == "_cuda_attach_out_of_memory_observer" and _standin.has(current, "oom_observer"):
        return _attach_oom_observer_impl
    if name == "_accelerator_getAllocatorSettings" and _standin.has(current, "settings_accessor"):
        return _get_settings_impl
    if name == "_cuda_cudaCachingAllocator_set_allocator_settings" and _standin.has(
        current, "set_allocator_settings"
    ):
        return _set_settings_impl
    raise AttributeError("module 'torch._C' has no attribute %r" % name)
