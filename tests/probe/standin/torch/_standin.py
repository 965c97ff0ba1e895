"""Script, state and violation log behind the stand-in torch.

The script is a JSON file named by STANDIN_TORCH_SCRIPT, read again on every
call, so a test (or gpuscope's end-to-end tests, from another process) can
change what the allocator reports while the probe runs: rewrite it with
write-aside-and-rename. A file caught half-written is answered from the last
good copy. Format (every key optional):

{
  "version": "2.5.1",              # torch.__version__, read once at import
  "initialized": "per_process",    # true | false | "per_process" (default):
                                   # per_process = true only after the process
                                   # called torch.cuda._standin_init()
  "model_bad_fork": true,          # like torch: a child forked after CUDA init
                                   # sees is_initialized() == False
  "device_count": 2,               # default: number of entries in "devices"
  "backend": "native",             # get_allocator_backend(); null = the
                                   # function does not exist (old torch)
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
      "alloc": {"allocated": 1, "allocated_peak": 2, "reserved": 3, ...},
                                   # the probe's own field names; expanded into
                                   # the full nested layout of real torch,
                                   # zeros for what is not given
      "stats": {...},              # or: memory_stats_as_nested_dict verbatim
      "empty": true,               # or: answer {} (device not initialised)
      "raise": "message"           # or: raise RuntimeError(message)
    }
  },
  "by_rank": {"1": {...}},         # merged over the top level when RANK=1
  "steps": [{"at_s": 2.0, ...}]    # merged over the top level once this many
                                   # seconds have passed since `import torch`
}

Devices below device_count but absent from "devices" answer all-zero stats,
as real torch does for a device this process never touched.
"""

import json
import os
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

IMPORTED_AT = time.monotonic()
state = {"initialized": False, "bad_fork": False}
calls = {}
violations = []
_last_good = {}
_calls_lock = threading.Lock()


def reset():
    state["initialized"] = False
    state["bad_fork"] = False
    with _calls_lock:
        calls.clear()
    del violations[:]


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


def device_count(current):
    if "device_count" in current:
        return int(current["device_count"])
    indices = [int(k) for k in devices_of(current)]
    return max(indices) + 1 if indices else 0


def _stat(current=0, peak=None):
    peak = current if peak is None else max(peak, current)
    return {"current": current, "peak": peak, "allocated": peak, "freed": peak - current}


def build_stats(alloc, layout="current"):
    """The nested dict real torch returns, filled from the probe's field names."""
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
        given = values.get(array, {})
        total = _stat(given.get("current", 0), given.get("peak"))
        result[array] = {
            "all": total,
            "small_pool": _stat(),
            "large_pool": dict(total),
        }
    result["oversize_allocations"] = _stat()
    result["oversize_segments"] = _stat()
    return result
