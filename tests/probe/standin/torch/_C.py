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


# The process-wide numeric settings (aten/src/ATen/Context.cpp), from the
# script's "flags" (keys below; defaults are PyTorch's own).
_FLAG_DEFAULTS = {
    "allow_tf32_matmul": False,
    "allow_tf32_cudnn": True,
    "float32_matmul_precision": "highest",
    # As a real 2.15.0 answers out of the box: "none" defers to "all",
    # then to the generic backend's.
    "fp32_precision": {"matmul": "none", "conv": "tf32", "rnn": "tf32", "all": "none", "generic": "none"},
    "benchmark": False,
    "deterministic": False,
}


def _flag(name):
    flags = _standin.script().get("flags") or {}
    return flags.get(name, _FLAG_DEFAULTS[name])


def _legacy_getter(name, key):
    def getter():
        # From the release with the fp32_precision settings, Context.cpp's
        # allowTF32CuBLAS, allowTF32CuDNN and float32MatmulPrecision raise
        # where the program used both APIs (a real 2.15.0 does; a source
        # snapshot also warns once, in the caller's name): the probe must
        # not call them there.
        if _standin.has(_standin.script(), "fp32_precision_api"):
            _standin.violation(name + " (deprecated: warns in the program's name)")
        _standin.count(name)
        return _flag(key)

    getter.__name__ = name
    return getter


_get_cublas_allow_tf32 = _legacy_getter("_get_cublas_allow_tf32", "allow_tf32_matmul")
_get_cudnn_allow_tf32 = _legacy_getter("_get_cudnn_allow_tf32", "allow_tf32_cudnn")
_get_float32_matmul_precision = _legacy_getter("_get_float32_matmul_precision", "float32_matmul_precision")


def _get_cudnn_benchmark():
    return bool(_flag("benchmark"))


def _get_cudnn_deterministic():
    return bool(_flag("deterministic"))


def _get_fp32_precision_impl(backend, op):
    # The setting as stored (Context's fp32_precision map), unresolved.
    settings = dict(_FLAG_DEFAULTS["fp32_precision"], **(_flag("fp32_precision") or {}))
    if backend == "generic" and op == "all":
        return settings["generic"]
    if backend != "cuda" or op not in ("matmul", "conv", "rnn", "all"):
        raise RuntimeError("Invalid backend: %s or operator: %s" % (backend, op))
    return settings[op]


def _cuda_getArchFlags():
    # The compute capabilities the wheel carries code for (a compile-time
    # string; None for a build without CUDA).
    return _standin.script().get("arch_flags", "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90")


class _Cudnn(object):
    """torch._C._cudnn (torch/csrc/cuda/shared/cudnn.cpp): the library's
    version as linked at run time and as compiled against, from the
    script's "cudnn_version" / "cudnn_compiled" ([major, minor, patch])."""

    def _runtime(self):
        return tuple(_standin.script().get("cudnn_version") or (9, 1, 0))

    def getVersionInt(self):
        # cudnnGetVersion(): CUDNN_VERSION's encoding (cudnn_version.h).
        major, minor, patch = self._runtime()
        return major * (10000 if major >= 9 else 1000) + minor * 100 + patch

    def getCompileVersion(self):
        current = _standin.script()
        return tuple(current.get("cudnn_compiled") or current.get("cudnn_version") or (9, 1, 0))

    def __getattr__(self, name):
        if name == "getRuntimeVersion" and _standin.script().get("cudnn_runtime_getter", True):
            return self._runtime
        raise AttributeError(name)


_cudnn_module = _Cudnn()


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
    current = _standin.script()
    if name == "_cudnn" and current.get("cudnn_version", True) is not None:
        # Absent from a build without cuDNN.
        return _cudnn_module
    # The fp32_precision getter's binding: _get_fp32_precision in a source
    # snapshot (modelled for 2.9 and 2.11), _get_fp32_precision_getter in a
    # real 2.15.0 (modelled for the newest).
    if _standin.has(current, "fp32_precision_api"):
        renamed = _standin.has(current, "fp32_precision_getter")
        if name == ("_get_fp32_precision_getter" if renamed else "_get_fp32_precision"):
            return _get_fp32_precision_impl
    found = _BY_FEATURE.get(name)
    if found is not None and _standin.has(_standin.script(), found[0]):
        return found[1]
    raise AttributeError("module 'torch._C' has no attribute %r" % name)
