"""Script, state and violation log behind the stand-in torch.

The script is a JSON file named by STANDIN_TORCH_SCRIPT, read again on every
call, so a test (or gpuscope's end-to-end tests, from another process) can
change what the allocator reports while the probe runs: rewrite it with
write-aside-and-rename. A file caught half-written is answered from the last
good copy. Format (every key optional):

{
  "generation": "2.5",             # which release's API to model (see
                                   # GENERATIONS below); absent = the original
                                   # stand-in, shaped by the keys that follow
  "version": "2.5.1",              # torch.__version__, read once at import
  "initialized": "per_process",    # true | false | "per_process" (default):
                                   # per_process = true only after the process
                                   # called torch.cuda._standin_init()
  "model_bad_fork": true,          # like torch: a child forked after CUDA init
                                   # sees is_initialized() == False
  "device_count": 2,               # default: number of entries in "devices"
  "backend": "native",             # get_allocator_backend(); null = the
                                   # function does not exist (old torch);
                                   # "cudaMallocAsync" also shapes the stats
                                   # like that backend (only allocated, active,
                                   # reserved bytes filled, the rest zero)
  "lazy_call": true,               # false: torch.cuda._lazy_call is missing
                                   # (the probe must fall back to polling)
  "layout": "current",             # "legacy": no num_device_alloc/free and
                                   # no num_sync_all_streams (older torch)
  "host": {"allocated_bytes.current": 1, ...},
                                   # host_memory_stats() verbatim; absent =
                                   # the function does not exist (< 2.7)
  "raise": {"device_count": "message", ...},
                                   # that function raises RuntimeError(message)
  "devices": {
    "0": {
      "uuid": "5ea1c0de-...",      # str(props.uuid); null = no uuid attribute
      "pci": [0, 59, 0],           # pci_domain_id, pci_bus_id, pci_device_id
                                   # (generations with "pci" only)
      "private_pools": 123,        # private_pool_memory_reserved(i) (newest)
      "capability": [9, 0],        # props.major, props.minor
      "total_memory": 85899345920, # props.total_memory, and the capacity an
                                   # OOM message names (default 80 GiB)
      "device_free": 0,            # the device's free memory at an OOM
                                   # (torch.cuda._standin_oom)
      "segments": [...],           # memory_snapshot()'s segments
                                   # (build_segments below)
      "alloc": {"allocated": 1, "allocated_peak": 2, "reserved": 3, ...},
                                   # the probe's own field names; expanded into
                                   # the full nested layout of real torch,
                                   # zeros for what is not given
      "stats": {...},              # or: memory_stats_as_nested_dict verbatim
      "empty": true,               # or: answer {} (device not initialised)
      "raise": "message"           # or: raise RuntimeError(message)
    }
  },
  "cuda_version": "12.1",          # torch.version.cuda (null: a build without
  "hip_version": null,             # CUDA); torch.version.hip
  "cudnn_version": [9, 1, 0],      # torch._C._cudnn's run-time version (null:
                                   # no _cudnn); "cudnn_compiled" its compile-time
                                   # one; "cudnn_runtime_getter": false leaves out
                                   # getRuntimeVersion (getVersionInt only)
  "arch_flags": "sm_80 sm_90",     # torch._C._cuda_getArchFlags()
  "flags": {"allow_tf32_matmul": false, "allow_tf32_cudnn": true,
            "float32_matmul_precision": "highest", "benchmark": false,
            "deterministic": false, "fp32_precision": {"matmul": "ieee", ...}},
                                   # the process-wide numeric settings (torch/_C.py)
  "by_rank": {"1": {...}},         # merged over the top level when RANK=1
  "steps": [{"at_s": 2.0, ...}]    # merged over the top level once this many
                                   # seconds have passed since `import torch`
}

Devices below device_count but absent from "devices" answer all-zero stats,
as real torch does for a device this process never touched.

torch.utils.data (utils/data/dataloader.py) takes no script: its loaders
are set up by the test, with real worker processes and batches in
/dev/shm (STANDIN_TORCH_SHM_DIR to put them elsewhere).
"""

import json
import os
import re
import sys
import threading
import time

STAT_ARRAYS = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)

# probe field -> (stat array, metric)
FIELD_TO_STAT = {
    "allocated": ("allocated_bytes", "current"),
    "allocated_peak": ("allocated_bytes", "peak"),
    "reserved": ("reserved_bytes", "current"),
    "reserved_peak": ("reserved_bytes", "peak"),
    "active": ("active_bytes", "current"),
    "active_peak": ("active_bytes", "peak"),
    "inactive_split": ("inactive_split_bytes", "current"),
    "inactive_split_peak": ("inactive_split_bytes", "peak"),
    "requested": ("requested_bytes", "current"),
    "requested_peak": ("requested_bytes", "peak"),
    "segments": ("segment", "current"),
}

FIELD_TO_COUNTER = {
    "alloc_retries": "num_alloc_retries",
    "ooms": "num_ooms",
    "device_allocs": "num_device_alloc",
    "device_frees": "num_device_free",
}

# What each PyTorch release line offers, read from the releases' own sources
# and wheels: get_allocator_backend() from 2.0; the
# torch.cuda.OutOfMemoryError class from 1.13; device properties' .uuid
# from 2.1 (absent in 2.0.1, present in 2.5.1); requested_bytes and the
# num_device_alloc/num_device_free/num_sync_all_streams counters after 2.0;
# the native allocator's OOM message naming "GPU 0 has a total capacity of
# ... of which ... is free" from 2.1 (PR 99699), "(GPU 0; ... total
# capacity; ... free; ...)" before; torch.cuda.memory._set_allocator_settings
# (with _snapshot, _dump_snapshot, _record_memory_history) from 2.1;
# "allocator_settings" in _snapshot() from 2.3 (PR 119404) and
# torch._C._cuda_isHistoryEnabled (absent in 2.1.2's stubs, present in
# 2.5.1's) modelled from 2.5; host_memory_stats() from 2.7.
#
# Allocator settings, from the type stubs and libc10 of the 2.8.0 to 2.12.0
# wheels and c10/core/AllocatorConfig.cpp: up to 2.9
# _set_allocator_settings forwards to
# torch._C._cuda_cudaCachingAllocator_set_allocator_settings; 2.9's c10
# reads PYTORCH_ALLOC_CONF first, the deprecated PYTORCH_CUDA_ALLOC_CONF
# when it is unset, and brings torch._C._accelerator_getDeviceStats (absent
# in 2.8.0); from 2.10 that binding is gone for
# torch._C._accelerator_setAllocatorSettings, _set_allocator_settings
# forwards to it with a FutureWarning, and c10 reads PYTORCH_CUDA_ALLOC_CONF
# first again, then PYTORCH_ALLOC_CONF. No release up to 2.11 has a getter:
# a real 2.11.0 install lacks torch._C._accelerator_getAllocatorSettings;
# 2.12.0's stubs list it first, which is the first release with it as far as
# the wheels show (not seen running). The integer
# pci_domain_id/pci_bus_id/pci_device_id properties in 2.9 (earlier
# releases are not modelled with them; the probe detects them either way);
# private_pool_memory_reserved() only in the newest release (PR 178240).
# _lazy_call (the lazy-init queue) exists in every release modelled.
#
# The input pipeline (FACTS.md, read from the 1.12.1 to 2.15.0 wheels):
# DataLoader workers named pt_data_worker and the pin thread pt_data_pin
# from 2.5 (absent in 2.4.1); a worker reserves a batch's shared memory up
# front and fails with "unable to allocate shared memory(shm) ... No space
# left on device (28)" from PR 161910 (October 2025, about 2.10; modelled
# from 2.11), where older workers write into a sparse file and die of
# SIGBUS; torch.amp.GradScaler from 2.3 (modelled from 2.5; earlier only
# torch.cuda.amp's own). The fp32_precision settings
# are modelled from 2.9, the release aten/src/ATen/Context.cpp's
# deprecation warning names: there the legacy allow_tf32 and
# float32_matmul_precision getters raise once the program used both APIs
# (a real 2.15.0 does; a source snapshot also warns). Their getter's binding
# was renamed (_get_fp32_precision, then _get_fp32_precision_getter in a
# real 2.15.0): the newest generation has the later name.
_BASE = ("lazy_call",)
_2_0 = _BASE + ("allocator_backend", "oom_error", "oom_observer")
_2_1 = _2_0 + ("uuid", "set_allocator_settings", "legacy_settings_setter", "requested_bytes",
               "device_alloc_counters", "nvml_oom_message")
_2_5 = _2_1 + ("snapshot_settings", "history_query", "named_data_threads", "amp_grad_scaler")
_2_7 = _2_5 + ("host_memory_stats",)
_2_9 = _2_7 + ("accelerator_allocator", "reads_alloc_conf_first", "pci", "fp32_precision_api")
_2_11 = tuple(f for f in _2_9 if f not in ("legacy_settings_setter", "reads_alloc_conf_first")) + (
    "accelerator_settings_setter", "reads_alloc_conf_second", "shm_reserve")
GENERATIONS = {
    "1.12": {"version": "1.12.1", "features": _BASE},
    "2.0": {"version": "2.0.1", "features": _2_0},
    "2.1": {"version": "2.1.2", "features": _2_1},
    "2.5": {"version": "2.5.1", "features": _2_5},
    "2.7": {"version": "2.7.1", "features": _2_7},
    "2.9": {"version": "2.9.1", "features": _2_9},
    "2.11": {"version": "2.11.0", "features": _2_11},
    "newest": {"version": "2.13.0", "features": _2_11 + ("settings_getter", "private_pools", "fp32_precision_getter")},
}

IMPORTED_AT = time.monotonic()
state = {"initialized": False, "bad_fork": False, "last_settings": "", "expandable": False}
# torch.cuda's own queue: callables given to _lazy_call before CUDA is up.
queued_calls = []
# What torch._C._cuda_attach_out_of_memory_observer was given.
oom_observers = []
calls = {}
violations = []
# module name -> the names it offers only in some releases. What code under
# test assigns over one of them (the probe wraps the settings setters) is
# dropped by reset(), so the next script's release is modelled afresh: a
# real process never changes release under the probe.
GATED = {}
# module name -> {class name: [(feature or None, class), ...]}: the first
# whose feature the modelled release has (None: any) is the module's.
GATED_CLASSES = {}
_last_good = {}
_calls_lock = threading.Lock()


def reset():
    state["initialized"] = False
    state["bad_fork"] = False
    state["last_settings"] = ""
    state["expandable"] = False
    state["oom_in_progress"] = False
    state["history"] = False
    del queued_calls[:]
    del oom_observers[:]
    with _calls_lock:
        calls.clear()
    del violations[:]
    for module_name, names in GATED.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            module.__dict__.pop(name, None)


def count(name):
    with _calls_lock:
        calls[name] = calls.get(name, 0) + 1


def raw_script():
    path = os.environ.get("STANDIN_TORCH_SCRIPT")
    if not path:
        return {}
    try:
        with open(path, "r", encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict):
            raise ValueError("script is not an object")
        _last_good[path] = data
        return data
    except (OSError, ValueError):
        return _last_good.get(path, {})


def script():
    data = raw_script()
    merged = {k: v for k, v in data.items() if k not in ("by_rank", "steps")}
    rank = os.environ.get("RANK")
    by_rank = data.get("by_rank") or {}
    if rank is not None and isinstance(by_rank.get(rank), dict):
        merged.update(by_rank[rank])
    elapsed = time.monotonic() - IMPORTED_AT
    for step in data.get("steps") or []:
        if isinstance(step, dict) and float(step.get("at_s", 0)) <= elapsed:
            merged.update({k: v for k, v in step.items() if k != "at_s"})
    return merged


def maybe_raise(name, current):
    message = (current.get("raise") or {}).get(name)
    if message:
        raise RuntimeError(message)


def violation(name):
    line = "%s pid=%d thread=%s\n" % (name, os.getpid(), threading.current_thread().name)
    violations.append(line)
    path = os.environ.get("STANDIN_TORCH_VIOLATIONS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)
    raise AssertionError("forbidden call on the stand-in: " + name)


def initialized(current):
    if state["bad_fork"]:
        return False
    mode = current.get("initialized", "per_process")
    if mode is True or mode is False:
        return mode
    return state["initialized"]


def devices_of(current):
    devices = current.get("devices") or {}
    if isinstance(devices, list):
        devices = {str(i): d for i, d in enumerate(devices)}
    return devices


def generation(current):
    return GENERATIONS.get(str(current.get("generation")))


def has(current, feature):
    """Whether the modelled release offers `feature`; without a generation,
    the original stand-in's keys decide."""
    gen = generation(current)
    if gen is not None:
        if feature == "lazy_call" and current.get("lazy_call") is False:
            return False
        return feature in gen["features"]
    if feature == "allocator_backend":
        return current.get("backend", "native") is not None
    if feature == "host_memory_stats":
        return "host" in current
    if feature == "lazy_call":
        return current.get("lazy_call", True) is not False
    return feature in ("uuid", "oom_error", "set_allocator_settings", "legacy_settings_setter",
                       "requested_bytes", "device_alloc_counters", "oom_observer", "nvml_oom_message",
                       "snapshot_settings", "history_query", "named_data_threads", "amp_grad_scaler")


def gated_class(module_name, name):
    """A module's __getattr__ for classes only some releases have."""
    current = script()
    for feature, cls in GATED_CLASSES.get(module_name, {}).get(name, ()):
        if feature is None or has(current, feature):
            return cls
    raise AttributeError("module %r has no attribute %r" % (module_name, name))


def layout(current):
    gen = generation(current)
    if gen is None:
        return current.get("layout", "current")
    return "current" if "device_alloc_counters" in gen["features"] else "legacy"


def conf_vars(current):
    """The variables the modelled release reads its settings from, the first
    one set winning (see the feature table above)."""
    if has(current, "reads_alloc_conf_first"):
        return ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
    if has(current, "reads_alloc_conf_second"):
        return ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    return ("PYTORCH_CUDA_ALLOC_CONF",)


def env_settings(current):
    """The settings string the modelled release reads at initialisation."""
    for name in conf_vars(current):
        value = os.environ.get(name)
        if value is not None:
            return value
    return ""


def apply_settings(env, error):
    """c10's parseArgs, as far as the tests need it: the string becomes the
    last settings at once, then its keys apply in turn until one is refused
    (with `error`: RuntimeError from the old binding, ValueError from the
    pybind one of 2.10+, with ConfigTokenizer's words as a real 2.11.0 gives
    them). Only expandable_segments is modelled; other keys are taken as
    they come."""
    state["last_settings"] = env
    tokens = re.findall(r"[,:\[\]]|[^,:\[\]\s]+", env)
    for index, token in enumerate(tokens):
        if token != "expandable_segments":
            continue
        value = tokens[index + 2] if index + 2 < len(tokens) else ""
        if value not in ("True", "False"):
            if error is ValueError:
                raise error("Expected 'True' or 'False' at index %d in ConfigTokenizer but got '%s'"
                            % (index + 2, value))
            raise error("Expected a single True/False argument for expandable_segments")
        state["expandable"] = value == "True"


def lazy_init():
    """torch.cuda._lazy_init as PyTorch runs it: a bad fork raises; queued
    calls run while is_initialized() is still False; a failing call aborts
    initialisation with the error PyTorch wraps it in."""
    if state["initialized"] and not state["bad_fork"]:
        return
    if state["bad_fork"]:
        raise RuntimeError(
            "Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
            "multiprocessing, you must use the 'spawn' start method"
        )
    apply_settings(env_settings(script()), RuntimeError)
    for call in list(queued_calls):
        try:
            call()
        except Exception as exc:
            raise RuntimeError("CUDA call failed lazily at initialization with error: %s" % exc)
    state["initialized"] = True


def device_count(current):
    if "device_count" in current:
        return int(current["device_count"])
    indices = [int(k) for k in devices_of(current)]
    return max(indices) + 1 if indices else 0


def _stat(current=0, peak=None):
    peak = current if peak is None else max(peak, current)
    return {"current": current, "peak": peak, "allocated": peak, "freed": peak - current}


def build_stats(alloc, layout="current", backend="native", requested=True):
    """The nested dict real torch returns, filled from the probe's field names.

    With cudaMallocAsync PyTorch fills only allocated, active and reserved
    bytes (all.current / all.peak); every other key is present and zero."""
    if backend == "cudaMallocAsync":
        kept = ("allocated", "allocated_peak", "reserved", "reserved_peak", "active", "active_peak")
        alloc = {k: v for k, v in alloc.items() if k in kept}
    values = {}
    for field, (array, metric) in FIELD_TO_STAT.items():
        if field in alloc:
            values.setdefault(array, {})[metric] = int(alloc[field])
    result = {
        "num_alloc_retries": int(alloc.get("alloc_retries", 0)),
        "num_ooms": int(alloc.get("ooms", 0)),
        "max_split_size": -1,
    }
    if layout != "legacy":
        result["num_sync_all_streams"] = 0
        result["num_device_alloc"] = int(alloc.get("device_allocs", 0))
        result["num_device_free"] = int(alloc.get("device_frees", 0))
    for array in STAT_ARRAYS:
        if array == "requested_bytes" and not requested:
            continue
        given = values.get(array, {})
        total = _stat(given.get("current", 0), given.get("peak"))
        result[array] = {
            "all": total,
            "small_pool": _stat(),
            # The async backend keeps only the aggregate.
            "large_pool": _stat() if backend == "cudaMallocAsync" else dict(total),
        }
    result["oversize_allocations"] = _stat()
    result["oversize_segments"] = _stat()
    return result


MIB = 1 << 20


def build_segments(device, spec):
    """Segments as torch.cuda.memory_snapshot() returns them, from a
    script's list of {"pool": "large"|"small", "blocks": [[state, MiB], ...]}
    (state: active_allocated, active_pending_free or inactive). Each
    segment's blocks are contiguous from its address, as PyTorch splits
    them; sizes and counts follow c10/cuda/CUDACachingAllocator.cpp's
    snapshot (total_size, allocated_size, active_size, requested_size)."""
    segments = []
    address = 0x7F0000000000 + device * (1 << 36)
    for seg in spec:
        blocks = []
        cursor = address
        allocated = active = requested = 0
        for state_name, mib in seg.get("blocks", []):
            size = int(float(mib) * MIB)
            used = state_name != "inactive"
            req = size if used else 0
            blocks.append({"address": cursor, "size": size, "requested_size": req, "state": state_name})
            cursor += size
            if state_name == "active_allocated":
                allocated += size
            if used:
                active += size
                requested += req
        total = cursor - address
        segments.append({
            "device": device,
            "address": address,
            "total_size": total,
            "allocated_size": allocated,
            "active_size": active,
            "requested_size": requested,
            "stream": 0,
            "segment_type": seg.get("pool", "large"),
            "blocks": blocks,
        })
        address += max(total, 2 * MIB)
    return segments
