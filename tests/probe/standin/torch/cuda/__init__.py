"""Stand-in torch.cuda: the calls the probe may make, answered from the script,
and the calls it must never make, which record a violation and raise."""

import copy

from .. import _standin

# Calls that initialise CUDA, synchronise, change allocator state, or act on
# "the current device" implicitly; the probe must make none of them.
FORBIDDEN = (
    "is_available",
    "init",
    "_lazy_init",
    "set_device",
    "current_device",
    "device",
    "synchronize",
    "mem_get_info",
    "empty_cache",
    "ipc_collect",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_accumulated_host_memory_stats",
    "_snapshot",
    "memory_summary",
    "list_gpu_processes",
    "set_per_process_memory_fraction",
    "current_stream",
    "stream",
)


def _forbidden(name):
    def call(*args, **kwargs):
        _standin.violation(name)

    call.__name__ = name
    return call


for _name in FORBIDDEN:
    globals()[_name] = _forbidden(_name)
del _name


def _standin_init():
    """What the trainer calls in place of its first CUDA operation: PyTorch's
    lazy initialisation, queued calls and bad-fork check included."""
    _standin.lazy_init()


def _standin_reset():
    _standin.reset()


def is_initialized():
    _standin.count("is_initialized")
    current = _standin.script()
    _standin.maybe_raise("is_initialized", current)
    return _standin.initialized(current)


def device_count():
    _standin.count("device_count")
    current = _standin.script()
    _standin.maybe_raise("device_count", current)
    return _standin.device_count(current)


def _explicit_index(name, device):
    # device=None means "the calling thread's current device" in torch: on the
    # probe's thread that is device 0 whatever the trainer uses.
    if not isinstance(device, int) or isinstance(device, bool):
        _standin.violation("%s(device=%r)" % (name, device))
    return device


def memory_stats_as_nested_dict(device=None):
    _standin.count("memory_stats_as_nested_dict")
    index = _explicit_index("memory_stats_as_nested_dict", device)
    current = _standin.script()
    if not _standin.initialized(current):
        return {}
    _standin.maybe_raise("memory_stats_as_nested_dict", current)
    if not 0 <= index < _standin.device_count(current):
        raise RuntimeError("Invalid device argument.")
    entry = _standin.devices_of(current).get(str(index))
    shape = _shape(current)
    if entry is None:
        return _standin.build_stats({}, **shape)
    if entry.get("raise"):
        raise RuntimeError(entry["raise"])
    if entry.get("empty"):
        return {}
    if "stats" in entry:
        return copy.deepcopy(entry["stats"])
    return _standin.build_stats(entry.get("alloc") or {}, **shape)


def _shape(current):
    backend = current.get("backend", "native") if _standin.has(current, "allocator_backend") else "native"
    return {
        "layout": _standin.layout(current),
        "backend": backend,
        "requested": _standin.has(current, "requested_bytes"),
    }


def memory_stats(device=None):
    _standin.count("memory_stats")
    index = _explicit_index("memory_stats", device)
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(prefix + "." + key if prefix else key, item)
        else:
            flat[prefix] = value

    walk("", memory_stats_as_nested_dict(index))
    return dict(sorted(flat.items()))


class _Uuid(object):
    def __init__(self, text):
        self._text = text

    def __str__(self):
        return self._text

    def __repr__(self):
        return "_CUuuid(%r)" % self._text


class _Properties(object):
    def __init__(self, index, entry, current):
        self.name = entry.get("name", "Stand-in GPU %d" % index)
        self.total_memory = int(entry.get("total_memory", 80 * 1024**3))
        self.major, self.minor = entry.get("capability", (9, 0))
        default_uuid = "5ea1c0de-0000-4000-8000-%012d" % index
        uuid = entry.get("uuid", default_uuid)
        if uuid is not None and _standin.has(current, "uuid"):
            self.uuid = _Uuid(uuid)
        if _standin.has(current, "pci"):
            domain, bus, device = entry.get("pci", [0, 0x10 + index, 0])
            self.pci_domain_id = int(domain)
            self.pci_bus_id = int(bus)
            self.pci_device_id = int(device)


def get_device_properties(device=None):
    _standin.count("get_device_properties")
    index = _explicit_index("get_device_properties", device)
    current = _standin.script()
    if not _standin.initialized(current):
        # Real torch would initialise CUDA here: the probe must not get here.
        _standin.violation("get_device_properties before CUDA init")
    _standin.maybe_raise("get_device_properties", current)
    if not 0 <= index < _standin.device_count(current):
        raise AssertionError("Invalid device id")
    return _Properties(index, _standin.devices_of(current).get(str(index)) or {}, current)


def _get_allocator_backend():
    _standin.count("get_allocator_backend")
    current = _standin.script()
    _standin.maybe_raise("get_allocator_backend", current)
    return current.get("backend", "native")


def _host_memory_stats():
    _standin.count("host_memory_stats")
    current = _standin.script()
    if not _standin.initialized(current):
        return {}
    _standin.maybe_raise("host_memory_stats", current)
    return copy.deepcopy(current.get("host") or {})


def memory_snapshot(*args, **kwargs):
    """torch.cuda.memory_snapshot(): the segments of every device, shaped as
    PyTorch's (see _standin.build_segments). PyTorch allows it at any time;
    the tests count the calls to hold the probe to taking it only at an OOM
    or when asked."""
    _standin.count("memory_snapshot")
    current = _standin.script()
    segments = []
    for key, entry in sorted(_standin.devices_of(current).items()):
        segments.extend(_standin.build_segments(int(key), (entry or {}).get("segments") or []))
    return segments


def _format_size(size):
    # c10/cuda/CUDACachingAllocator.cpp, format_size.
    if size <= 1024:
        return "%d bytes" % size
    for limit, unit, scale in ((1 << 20, "KiB", 1 << 10), (1 << 30, "MiB", 1 << 20)):
        if size <= limit:
            return "%.2f %s" % (size / float(scale), unit)
    return "%.2f GiB" % (size / float(1 << 30))


def _standin_oom(device, size):
    """What the allocator does when an allocation fails for good: the
    caching allocator calls the out-of-memory observers (lock released),
    then raises; cudaMallocAsync has none and raises at once. Each raises
    its own message (_oom_message)."""
    current = _standin.script()
    entry = _standin.devices_of(current).get(str(device)) or {}
    alloc = entry.get("alloc") or {}
    free = int(entry.get("device_free", 0))
    # CUDACachingAllocator.cpp: the observers get `set_fraction ?
    # allowed_memory_maximum : device_total`, then the free memory.
    limit = int(entry.get("total_memory", 80 * 1024**3))
    _standin.state["oom_in_progress"] = True
    try:
        for observer in list(_standin.oom_observers):
            observer(device, size, limit, free)
    finally:
        _standin.state["oom_in_progress"] = False
    message = _oom_message(current, device, size, entry, alloc, free)
    if _standin.has(current, "oom_error"):
        raise _OutOfMemoryError(message)
    raise RuntimeError(message)


def _oom_message(current, device, size, entry, alloc, free):
    total = int(entry.get("total_memory", 80 * 1024**3))
    allocated = int(alloc.get("allocated", 0))
    backend = current.get("backend", "native") if _standin.has(current, "allocator_backend") else "native"
    if backend == "cudaMallocAsync":
        # CUDAMallocAsyncAllocator.cpp, mallocAsync: "Currently allocated" is
        # its own count of live allocations, the limit without a memory
        # fraction is the largest size_t.
        return (
            "Allocation on device %d would exceed allowed memory. (out of memory)\n"
            "Currently allocated     : %s\n"
            "Requested               : %s\n"
            "Device limit            : %s\n"
            "Free (according to CUDA): %s\n"
            "PyTorch limit (set by user-supplied memory fraction)\n"
            "                        : %s"
            % (device, _format_size(allocated), _format_size(size), _format_size(total), _format_size(free),
               _format_size((1 << 64) - 1))
        )
    reserved = int(alloc.get("reserved", 0))
    if _standin.has(current, "nvml_oom_message"):
        # CUDACachingAllocator.cpp, malloc, from PR 99699 (2.1).
        return ("CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "
                "Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but "
                "unallocated." % (_format_size(size), device, _format_size(total), _format_size(free),
                                  _format_size(allocated), _format_size(max(reserved - allocated, 0))))
    return ("CUDA out of memory. Tried to allocate %s (GPU %d; %s total capacity; %s already allocated; %s free; "
            "%s reserved in total by PyTorch)" % (_format_size(size), device, _format_size(total),
                                                  _format_size(allocated), _format_size(free),
                                                  _format_size(reserved)))


def _lazy_call_impl(callable, **kwargs):
    # torch/cuda/__init__.py: run now when initialised, else queue for
    # _lazy_init (which runs the queue before it marks CUDA initialised).
    _standin.count("_lazy_call")
    if is_initialized():
        callable()
    else:
        _standin.queued_calls.append(callable)


def _private_pool_memory_reserved(device=None):
    _standin.count("private_pool_memory_reserved")
    index = _explicit_index("private_pool_memory_reserved", device)
    current = _standin.script()
    if not _standin.initialized(current):
        return 0
    entry = _standin.devices_of(current).get(str(index)) or {}
    return int(entry.get("private_pools", 0))


class _OutOfMemoryError(RuntimeError):
    pass


# torch.OutOfMemoryError (torch.cuda.OutOfMemoryError is the same class).
_OutOfMemoryError.__name__ = _OutOfMemoryError.__qualname__ = "OutOfMemoryError"
_OutOfMemoryError.__module__ = "torch"

_BY_FEATURE = {
    "get_allocator_backend": ("allocator_backend", _get_allocator_backend),
    "host_memory_stats": ("host_memory_stats", _host_memory_stats),
    "_lazy_call": ("lazy_call", _lazy_call_impl),
    "OutOfMemoryError": ("oom_error", _OutOfMemoryError),
    "private_pool_memory_reserved": ("private_pools", _private_pool_memory_reserved),
}


def __getattr__(name):
    # Functions that only exist in some torch releases come and go with the
    # script, so hasattr() tells the probe what a given release would.
    found = _BY_FEATURE.get(name)
    if found is not None and _standin.has(_standin.script(), found[0]):
        return found[1]
    raise AttributeError("module 'torch.cuda' has no attribute %r" % name)
