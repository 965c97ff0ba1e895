"""gpuscope allocator probe: publishes the caching allocator's counters of the
process it runs in, for gpuscope to join with NVML's per-process figures.

    import gpuscope_probe
    gpuscope_probe.start()      # idempotent, returns at once, starts no thread
    gpuscope_probe.stop()       # stops sampling and removes the published file

start() only arms the probe. A thread samples once CUDA is initialised in
this process: PyTorch runs the callable the probe queues with
torch.cuda._lazy_call right after its lazy CUDA initialisation, and an import
watcher (a meta path finder that finds nothing itself) queues it when
torch.cuda is imported after start(). Where no such queue exists (JAX, a torch
without _lazy_call) a thread waits for the GPU backend once the framework is
imported. A process that never imports torch or jax never gets a thread.

`gpuscope run -- CMD` injects it through a sitecustomize shim, so training code
needs no change. Standard library only, Python 3.8+.

Environment:
    GPUSCOPE_PROBE=0           disables the probe entirely
    GPUSCOPE_PROBE_INTERVAL    seconds between samples (default 1, clamped to 0.1..60)
    GPUSCOPE_PROBE_DIR         directory to publish in (default below)

Transport (gpuscope's reader implements exactly this):
    directory  $GPUSCOPE_PROBE_DIR, else $XDG_RUNTIME_DIR/gpuscope/probes when
               XDG_RUNTIME_DIR is a directory owned by the user, else
               /tmp/gpuscope-<uid>/probes. Missing parts are created 0700.
               Before each write the probes directory and its parent (the
               gpuscope/gpuscope-<uid> directory for the defaults) must each
               be a real directory (no symlink), owned by the user, with
               mode & 0o077 == 0; otherwise nothing is written.
    file       <pid>-<start_ticks>.json, start_ticks = field 22 of
               /proc/self/stat (0 off Linux); the content's pid_ns is the
               readlink of /proc/self/ns/pid; written to
               .<pid>-<start_ticks>.<hex>.tmp (O_EXCL|O_NOFOLLOW, 0600) and
               renamed over it, so a reader never sees a partial file.
    content    one JSON object, format "gpuscope-probe", version 1; every
               counter the framework does not report is null, never 0.

What it touches (never anything that initialises CUDA, synchronises, or
changes allocator state): it never imports torch or jax; it samples only once
`torch.cuda.is_initialized()` is true (or JAX's backends exist), and then
calls only memory_stats_as_nested_dict(i) with an explicit index,
device_count(), get_allocator_backend(), get_device_properties(i) (once per
device, for its uuid and PCI fields), host_memory_stats(),
private_pool_memory_reserved(i) and torch._C._accelerator_getAllocatorSettings()
where the release has them, and for JAX local_devices()/memory_stats(). Every
call is feature-detected, never chosen by version number. It wraps
sys.excepthook and threading.excepthook (calling the previous hooks) to count
OutOfMemoryErrors that escape, and the bindings that change allocator
settings at run time (torch._C._accelerator_setAllocatorSettings,
torch._C._cuda_cudaCachingAllocator_set_allocator_settings: each calls the
original first and only notes the string it applied), queues one callable
with torch.cuda._lazy_call, and attaches one out-of-memory observer
(torch._C._cuda_attach_out_of_memory_observer, PyTorch 2.0+). It calls
torch.cuda.memory_snapshot() only when that observer fires (the segment
summary of the post-mortem) or when gpuscope asks through a request file
(the dashboard's live segment map, at most once a second, only while it is
open), torch.cuda.memory._dump_snapshot only when asked (gpuscope memviz),
and torch.cuda.memory._snapshot() at most once in the process's life, for
the settings in effect, only where start() came after torch was imported
and the release has no settings getter (see _read_settings_once).

For the input pipeline it wraps, at class level and only in modules torch
has loaded, torch.utils.data.dataloader._BaseDataLoaderIter.__next__ (two
clock reads and a few counters per batch; whatever it raises passes
unchanged, a DataLoader failure noted on the way), autocast.__enter__ (a
count) and the GradScalers' __init__ (a weak set). On its own tick it reads
the live iterators' attributes (never is_alive() or exitcode of a worker:
those reap a dead one), os.statvfs("/dev/shm"), the open-file limit,
torch.multiprocessing.get_sharing_strategy(), and at most every 10 s
torch.version, torch._C._cudnn's version getters, _cuda_getArchFlags() and
the raw flag getters of torch._C (the fp32_precision ones where the release
has them, else allow_tf32 and float32_matmul_precision; never
torch.backends.cudnn.version(), which can raise).
No exception ever reaches the host program.
"""

import atexit
import functools
import json
import os
import re
import stat
import sys
import threading
import time
import weakref
from collections.abc import Mapping

try:
    import resource
except ImportError:  # not on Windows
    resource = None

__all__ = ["start", "stop"]

FORMAT_NAME = "gpuscope-probe"
FORMAT_VERSION = 1

_DEFAULT_INTERVAL = 1.0
_MIN_INTERVAL = 0.1
_MAX_INTERVAL = 60.0
# After num_alloc_retries or num_ooms rises, a few quick samples let gpuscope
# follow the pressure episode instead of waiting a whole interval each time.
_BURST_GAP = 0.2
_BURST_CYCLES = 5
# Between full samples the retry/OOM counters are re-read this often, so a
# rise is published within a fraction of a second even with a long interval.
_PEEK_GAP = 0.2
# After a start from PyTorch's lazy-init queue, CUDA is looked for this
# often, for this long, so the first file follows initialisation closely.
_QUICK_START_GAP = 0.05
_QUICK_START_S = 5.0
_MAX_CONSECUTIVE_FAILURES = 50
# Bounds keep every file far below the 64 KiB the reader accepts.
_MAX_DEVICES = 64
_MAX_TEXT = 1024
_MAX_FILE_BYTES = 60 * 1024
# A call that keeps failing is given up rather than counted every cycle.
_CALL_FAILURE_BUDGET = 3

_ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
_GPU_PLATFORMS = ("gpu", "cuda", "rocm")
_DISABLED_VALUES = ("0", "false", "no", "off")

_SURROGATES = re.compile("[\ud800-\udfff]")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_lock = threading.Lock()
_probe = None
# Armed by start(): sampling begins once CUDA (or a JAX GPU backend) is up in
# this process. Until then no thread exists (see _arm_frameworks).
_armed = False
_interval = None
_atexit_registered = False
_hooks_installed = False
# (pid, id(torch.cuda)) for which a lazy-init callable is queued already.
_cuda_hooked = None
# OutOfMemoryErrors this process let escape to an exception hook.
_oom_events = 0
# Post-mortems of out-of-memory failures, oldest first, bounded.
_oom_records = []
_MAX_OOM_RECORDS = 8
_MAX_OOM_SEGMENTS = 16
# The summary walks every block in the failing thread, about 0.4-0.8 us a
# block (benches/oom_snapshot_cost.py): past this many, the rest is left
# out and the record says so, so the pause stays around 40 ms at most.
_MAX_OOM_BLOCKS = 50000
# An OutOfMemoryError within this long of an observer's record is the same
# failure seen twice, not a second one.
_OOM_SAME_FAILURE_S = 2.0
# Allocator settings changed at run time, as the wrapped setters saw them
# applied: (the last string, expandable_segments as the strings so far left
# it, None where none named it). One tuple, replaced whole, so a reader on
# another thread never sees half an update. A forked child keeps it: it
# inherits the parent's allocator configuration too.
_runtime_settings = (None, None)
# True when the setters were wrapped only after the program could already
# have called them (start() after torch's import): what was set before is
# then unseen until one snapshot is read (_read_settings_once).
_settings_unseen = False
# That snapshot builds a dict per block under the allocator's lock. Measured
# on an H100 host with torch 2.11.0: 1.2 ms for 2,000 blocks, 4.8 ms for
# 10,000, 12 ms for 20,000, 42 ms for 50,000. It waits while the counters
# allow more blocks than this (_blocks_bound, which counts up to twice the
# live ones), so the one pause stays under about 30 ms.
_MAX_SETTINGS_SNAPSHOT_BLOCKS = 40000


# ---------------------------------------------------------------- public API


def start(interval=None):
    """Arms the probe; never raises, returns at once.

    No thread is started here: sampling begins once CUDA is initialised in
    this process (through PyTorch's lazy-init queue where it has one), or,
    for JAX and for a torch without that queue, a thread waits for the GPU
    backend once the framework is imported. Returns True when armed.
    """
    global _armed, _interval
    try:
        if _disabled():
            return False
        with _lock:
            _interval = _resolve_interval(interval)
            _armed = True
            _register_atexit()
            _install_import_watcher()
            _install_exception_hooks()
        _arm_frameworks()
        return True
    except Exception:
        return False


def stop():
    """Stops the probe thread, removes its file and disarms; never raises."""
    global _probe, _armed
    try:
        with _lock:
            _armed = False
            probe, _probe = _probe, None
        if probe is not None:
            probe.close(remove=True)
            probe.join(1.0)
    except Exception:
        pass


def _launch(quick_start):
    """Starts the sampling thread unless one runs; a no-op when disarmed."""
    global _probe
    with _lock:
        if not _armed or _disabled():
            return False
        current = _probe
        if current is not None and current.running():
            return True
        probe = _Probe(_interval or _DEFAULT_INTERVAL, quick_start=quick_start)
        probe.launch()
        _probe = probe
        _register_mp_finalizer()
        return True


def _register_mp_finalizer():
    """multiprocessing's fork and forkserver children leave through
    os._exit, past atexit; their own exit function runs its finalizers
    (multiprocessing/util.py, _exit_function), so the file is removed there."""
    util = sys.modules.get("multiprocessing.util")
    finalize = getattr(util, "Finalize", None)
    if finalize is None:
        return
    try:
        finalize(None, _at_exit, exitpriority=0)
    except Exception:
        pass


# ------------------------------------------------------------ when to start


def _on_cuda_initialised():
    """Queued with torch.cuda._lazy_call: PyTorch runs it inside its lazy
    CUDA initialisation (torch/cuda/__init__.py, _lazy_init), just before it
    marks CUDA initialised; an exception here would become the program's
    DeferredCudaCallError, so nothing may escape."""
    try:
        _launch(quick_start=True)
    except BaseException:
        pass


def _arm_torch(cuda, early):
    """Queues the start of sampling behind CUDA's initialisation, once per
    process and module; falls back to a waiting thread without the queue.
    `early`: torch.cuda has just been imported, so no program code has run
    since and the settings setters wrapped now have missed nothing."""
    global _cuda_hooked
    _watch_settings(sys.modules.get("torch"), early)
    key = (os.getpid(), id(cuda))
    if _cuda_hooked == key:
        return
    lazy_call = getattr(cuda, "_lazy_call", None)
    if lazy_call is None:
        _launch(quick_start=False)
        return
    _cuda_hooked = key
    # Runs the callable at once when CUDA is already initialised.
    lazy_call(_on_cuda_initialised)


def _arm_frameworks():
    """Arms for whichever framework is imported already (start() may come
    after the framework's import); the import watcher covers later imports."""
    modules = sys.modules
    torch = modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is not None and not _mid_import(cuda):
        _arm_torch(cuda, early=False)
    _hook_torch_classes(early=False)
    jax = modules.get("jax")
    if jax is not None and not _mid_import(jax):
        # JAX offers no hook for its backends coming up: a thread waits.
        _launch(quick_start=False)


def _on_module_loaded(name, module):
    try:
        if not _armed:
            return
        if name == "torch.cuda":
            _arm_torch(module, early=True)
        elif name == "jax":
            _launch(quick_start=False)
        else:
            _hook_torch_classes(early=True, loaded=name)
    except Exception:
        pass


class _NotifyingLoader(object):
    """Runs the real loader, then tells the probe the module is ready.

    Only lives while the module executes: afterwards the module's __loader__
    and __spec__.loader are the real loader again."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        finally:
            _restore_loader(module, self, self._loader)
        _on_module_loaded(self._name, module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _restore_loader(module, wrapper, loader):
    try:
        if getattr(module, "__loader__", None) is wrapper:
            module.__loader__ = loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is wrapper:
            spec.loader = loader
    except Exception:
        pass


class _ImportWatcher(object):
    """A meta path finder that finds nothing itself: it asks the finders
    after it for torch.cuda and jax and wraps their loader, so the probe
    learns of the import without a thread (Python has no post-import hook).
    Also the modules whose classes the probe wraps (_HOOKED_MODULES), so a
    GradScaler made right after its import is seen. Every other name costs
    one tuple lookup."""

    def __init__(self):
        self._local = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _WATCHED_MODULES or getattr(self._local, "busy", False):
            return None
        self._local.busy = True
        try:
            spec = _find_with_others(self, fullname, path, target)
        except Exception:
            return None
        finally:
            self._local.busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        spec.loader = _NotifyingLoader(loader, fullname)
        return spec

    # Python < 3.4 style finders are never asked for a module by 3.8+.
    def invalidate_caches(self):
        pass


def _find_with_others(watcher, fullname, path, target):
    for finder in list(sys.meta_path):
        if finder is watcher or isinstance(finder, _ImportWatcher):
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _install_import_watcher():
    for finder in sys.meta_path:
        if isinstance(finder, _ImportWatcher) or type(finder).__name__ == "_ImportWatcher":
            return
    sys.meta_path.insert(0, _ImportWatcher())


# ------------------------------------------------------------ OOM exceptions


def _is_cuda_oom(exc):
    """torch.cuda.OutOfMemoryError (PyTorch 1.13+), or the RuntimeError
    "CUDA out of memory. ..." that older releases raise."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    oom_type = getattr(cuda, "OutOfMemoryError", None) if cuda is not None else None
    if isinstance(oom_type, type) and isinstance(exc, oom_type):
        return True
    if type(exc) is RuntimeError:
        try:
            return str(exc).startswith("CUDA out of memory")
        except Exception:
            return False
    return False


def _note_exception(exc):
    """Counts an OutOfMemoryError that reached an exception hook and
    publishes at once: the process may be about to exit, and with
    cudaMallocAsync PyTorch keeps no OOM counter at all. Where no observer
    recorded this failure, its post-mortem is what the message says."""
    global _oom_events
    try:
        if not _is_cuda_oom(exc):
            # A DataLoader worker's death is raised by PyTorch's SIGCHLD
            # handler wherever the main thread is, not always inside
            # __next__: known messages are kept from here too.
            _note_loader_failure(exc)
            return
        _oom_events += 1
        now = time.time()
        if not any(r["source"] == "observer" and now - r["time_unix_ms"] / 1000.0 < _OOM_SAME_FAILURE_S
                   for r in _oom_records):
            _keep_oom_record(_exception_record(exc, now))
        _publish_now()
    except BaseException:
        pass


def _publish_now():
    probe = _probe
    if probe is not None and probe.pid == os.getpid():
        probe.keep_at_exit = True
        probe.cycle()


def _keep_oom_record(record):
    _oom_records.append(record)
    del _oom_records[:-_MAX_OOM_RECORDS]


# PyTorch's format_size (c10/cuda/CUDACachingAllocator.cpp) prints "N
# bytes" up to 1 KiB, else N.NN KiB, MiB or GiB: two decimals, so a size
# read back from a message is within half a hundredth of its unit.
_SIZE = r"([0-9]+(?:\.[0-9]+)?) (bytes|KiB|MiB|GiB|TiB)"
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
# The native allocator's message (CUDACachingAllocator.cpp, malloc): from
# 2.1 "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total
# capacity of 79.19 GiB of which 300.00 MiB is free. ... Of the allocated
# memory 1.50 GiB is allocated by PyTorch, ..."; before (PR 99699) "...
# Tried to allocate 2.00 GiB (GPU 0; 79.19 GiB total capacity; 1.50 GiB
# already allocated; 300.00 MiB free; ...)". Free is cudaMemGetInfo's.
_NATIVE_OOM = (
    ("device", re.compile(r"GPU (\d+)")),
    ("requested", re.compile(r"Tried to allocate " + _SIZE)),
    ("device_free", re.compile(r"of which " + _SIZE + r" is free")),
    ("device_free", re.compile(r"; " + _SIZE + r" free;")),
    ("allocated", re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")),
    ("allocated", re.compile(_SIZE + r" already allocated")),
)
# cudaMallocAsync's (CUDAMallocAsyncAllocator.cpp, mallocAsync), a figure a
# line: "Allocation on device 0 would exceed allowed memory. (out of
# memory)", "Currently allocated     : 256.00 MiB" (PyTorch's live
# allocations on the device), "Requested               : 4096.00 GiB",
# "Device limit            : 79.18 GiB", "Free (according to CUDA): 78.35
# GiB" (cudaMemGetInfo's), then the limit a memory fraction sets.
_ASYNC_OOM = (
    ("device", re.compile(r"Allocation on device (\d+) would exceed allowed memory")),
    ("allocated", re.compile(r"Currently allocated\s*: " + _SIZE)),
    ("requested", re.compile(r"Requested\s*: " + _SIZE)),
    ("device_free", re.compile(r"Free \(according to CUDA\)\s*: " + _SIZE)),
)


def _oom_message_figures(text):
    """{field: value} for what an out-of-memory message states, in the
    post-mortem's field names; sizes in bytes, rounded as the message is."""
    patterns = _ASYNC_OOM if _ASYNC_OOM[0][1].search(text) else _NATIVE_OOM
    found = {}
    for field, pattern in patterns:
        match = None if field in found else pattern.search(text)
        if match is None:
            continue
        if field == "device":
            found[field] = int(match.group(1))
        else:
            found[field] = int(round(float(match.group(1)) * _UNITS[match.group(2)]))
    return found


def _exception_record(exc, now):
    """What PyTorch's own message says (device, requested size, the device's
    free memory), and the counters as they are now; the message's allocated
    figure only where the counters cannot be read (it is the same count, at
    the moment of failure, rounded)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    found = _oom_message_figures(text)
    device = found.get("device")
    record = _oom_record("exception", now, device, found.get("requested"), None, found.get("device_free"))
    if device is not None:
        _add_counters(record, device)
    if record["allocated"] is None:
        record["allocated"] = found.get("allocated")
    return record


def _oom_record(source, now, device, requested, device_limit, device_free):
    return {
        "source": source,
        "time_unix_ms": int(now * 1000),
        "device": device,
        "requested": requested,
        "device_limit": device_limit,
        "device_free": device_free,
        "allocated": None,
        "reserved": None,
        "inactive_split": None,
        "pools": None,
        "segments": None,
        "truncated": False,
    }


def _torch_cuda():
    torch = sys.modules.get("torch")
    return getattr(torch, "cuda", None) if torch is not None else None


def _add_counters(record, device):
    cuda = _torch_cuda()
    try:
        stats = cuda.memory_stats_as_nested_dict(device)
    except Exception:
        return
    if isinstance(stats, dict):
        record["allocated"] = _stat(stats, "allocated_bytes", "current")
        record["reserved"] = _stat(stats, "reserved_bytes", "current")
        record["inactive_split"] = _stat(stats, "inactive_split_bytes", "current")


def _on_out_of_memory(device, alloc, device_limit, device_free):
    """PyTorch's out-of-memory observer (torch._C._cuda_attach_out_of_memory_observer,
    called by the caching allocator with its lock released, before it
    raises): the counters and the segments at the moment of failure. It may
    fire several times for one failure (cuDNN retrying with a smaller
    workspace); each is kept, in order, bounded. Its third argument is the
    most the allocator may hold on the device, not an allocated figure:
    CUDACachingAllocator.cpp passes `set_fraction ? allowed_memory_maximum
    : device_total` (a real H100 gave its 79.18 GiB)."""
    try:
        if not _armed:
            return
        record = _oom_record("observer", time.time(), _count(device), _count(alloc),
                             _count(device_limit), _count(device_free))
        if record["device"] is not None:
            _add_counters(record, record["device"])
            summary = _segment_summary(record["device"], record["requested"])
            record["pools"], record["segments"], record["truncated"] = summary
        _keep_oom_record(record)
        _publish_now()
    except BaseException:
        pass


def _device_segments(device, bound=None):
    """The segments of `device` from torch.cuda.memory_snapshot(), at most
    _MAX_OOM_BLOCKS blocks' worth, and whether some were left out; None
    when it cannot be taken. Only at the moment of failure or when gpuscope
    asks, never on a timer: it walks every block under the allocator's
    lock."""
    cuda = _torch_cuda()
    try:
        segments = cuda.memory_snapshot()
    except Exception:
        return None, False
    bound = _MAX_OOM_BLOCKS if bound is None else bound
    mine = []
    walked = 0
    for seg in segments if isinstance(segments, list) else []:
        if not isinstance(seg, dict) or seg.get("device") != device:
            continue
        blocks = seg.get("blocks")
        walked += len(blocks) if isinstance(blocks, list) else 0
        if walked > bound:
            return mine, True
        mine.append(seg)
    return mine, False


def _segment_summary(device, requested):
    """Per pool and per segment, at the moment of failure."""
    segments, truncated = _device_segments(device)
    if segments is None:
        return None, None, False
    pools = {}
    rows = []
    for seg in segments:
        row = _segment_row(seg, requested)
        rows.append(row)
        pool = pools.setdefault(row["pool"], {
            "pool": row["pool"], "segments": 0, "total": 0, "allocated": 0, "free": 0,
            "largest_free_block": 0, "free_below_request": 0 if requested is not None else None,
        })
        pool["segments"] += 1
        for key in ("total", "allocated", "free"):
            pool[key] += row[key]
        pool["largest_free_block"] = max(pool["largest_free_block"], row["largest_free_block"])
        if requested is not None:
            pool["free_below_request"] += row.pop("free_below_request")
        else:
            row.pop("free_below_request")
    rows.sort(key=lambda r: r["total"], reverse=True)
    return [pools[name] for name in sorted(pools)], rows[:_MAX_OOM_SEGMENTS], truncated


# Block classes in the live map. PyTorch's snapshot states
# (c10/cuda/CUDACachingAllocator.cpp, snapshot(); torch/cuda/memory.py):
# "active_allocated" holds a tensor; "active_pending_free" was freed by the
# program but waits on recorded stream events, so it cannot be reused yet;
# "inactive" is free. An inactive block in a segment split into several
# blocks is what the allocator counts as inactive_split (Block::is_split());
# a segment that is one inactive block is cache empty_cache() could return.
_RUN_CLASS = {"active_allocated": "a", "active_pending_free": "p"}
_MAX_MAP_SEGMENTS = 512
# The live map runs once a second while the dashboard shows it, on the
# probe's thread but holding the GIL: about 1.6 us a block
# (benches/oom_snapshot_cost.py), so about 30 ms at this bound.
_MAX_MAP_BLOCKS = 20000
_MAX_MAP_RUNS = 64


def _segment_map(device):
    """The live map gpuscope's dashboard draws: every segment of `device`
    (address order within each pool) as runs of block classes, bounded."""
    segments, truncated = _device_segments(device, _MAX_MAP_BLOCKS)
    if segments is None:
        return None
    pools = {}
    rows = []
    for seg in segments:
        row = _segment_row(seg, None)
        row.pop("free_below_request")
        row["address"] = _count(seg.get("address"))
        row["runs"], row["inactive_split"] = _block_runs(seg, row["split"])
        rows.append(row)
        pool = pools.setdefault(row["pool"], {
            "pool": row["pool"], "segments": 0, "total": 0, "allocated": 0, "inactive_split": 0,
            "free": 0, "largest_free_block": 0,
        })
        pool["segments"] += 1
        for key in ("total", "allocated", "inactive_split", "free"):
            pool[key] += row[key]
        pool["largest_free_block"] = max(pool["largest_free_block"], row["largest_free_block"])
    left_out = max(len(rows) - _MAX_MAP_SEGMENTS, 0)
    if left_out:
        rows.sort(key=lambda r: r["total"], reverse=True)
        rows = rows[:_MAX_MAP_SEGMENTS]
    rows.sort(key=lambda r: (r["pool"], r["address"] or 0))
    return {"pools": [pools[name] for name in sorted(pools)], "segments": rows,
            "truncated": truncated, "segments_left_out": left_out}


def _block_runs(seg, split):
    """Adjacent blocks of one class merged into [class, bytes] runs; past
    _MAX_MAP_RUNS the rest is one "m" (mixed) run. Also the segment's
    inactive-split bytes."""
    runs = []
    inactive_split = 0
    blocks = seg.get("blocks")
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        size = _count(block.get("size")) or 0
        cls = _RUN_CLASS.get(block.get("state"), "s" if split else "f")
        if cls == "s":
            inactive_split += size
        if runs and (runs[-1][0] == cls or len(runs) == _MAX_MAP_RUNS):
            runs[-1][1] += size
            if runs[-1][0] != cls:
                runs[-1][0] = "m"
        else:
            runs.append([cls, size])
    return runs, inactive_split


def _segment_row(seg, requested):
    free = largest = below = 0
    blocks = seg.get("blocks")
    blocks = blocks if isinstance(blocks, list) else []
    for block in blocks:
        if not isinstance(block, dict) or block.get("state") != "inactive":
            continue
        size = _count(block.get("size")) or 0
        free += size
        largest = max(largest, size)
        if requested is not None and size < requested:
            below += size
    return {
        "pool": "small" if seg.get("segment_type") == "small" else "large",
        "total": _count(seg.get("total_size")) or 0,
        "allocated": _count(seg.get("allocated_size")) or 0,
        "free": free,
        # Free bytes in a segment that also holds live blocks are trapped
        # (inactive split); a wholly free segment is cache empty_cache()
        # could return.
        "split": len(blocks) > 1,
        "largest_free_block": largest,
        "free_below_request": below,
    }


def _install_exception_hooks():
    """Wraps sys.excepthook and threading.excepthook, calling the previous
    hook every time; installed once per interpreter."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        _note_exception(exc)
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    previous_thread_hook = getattr(threading, "excepthook", None)
    if previous_thread_hook is not None:

        def thread_excepthook(args):
            _note_exception(getattr(args, "exc_value", None))
            previous_thread_hook(args)

        threading.excepthook = thread_excepthook


# ------------------------------------------------------------- configuration


def _disabled():
    return os.environ.get("GPUSCOPE_PROBE", "").strip().lower() in _DISABLED_VALUES


def _resolve_interval(interval):
    value = interval
    if value is None:
        value = os.environ.get("GPUSCOPE_PROBE_INTERVAL")
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        return _DEFAULT_INTERVAL
    if value != value:  # NaN
        return _DEFAULT_INTERVAL
    return min(max(value, _MIN_INTERVAL), _MAX_INTERVAL)


def _text(value):
    """A JSON-safe, bounded string, or None.

    Environment values may carry surrogate escapes of undecodable bytes; a
    strict JSON reader rejects lone surrogates, so they become U+FFFD.
    """
    if value is None:
        return None
    try:
        text = str(value)
    except Exception:
        return None
    return _SURROGATES.sub("\ufffd", text[:_MAX_TEXT])


def _count(value):
    """A non-negative integer counter, or None when absent or malformed."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = value.__index__()  # ints and integer scalars, never floats
    except Exception:
        return None
    if number < 0 or number >= 1 << 63:
        return None
    return number


def _env_int(name):
    raw = os.environ.get(name)
    if raw is None:
        return None
    raw = raw.strip()
    # int() would also take signs, "1_000" and non-ASCII digits; ranks and
    # sizes are small non-negative decimals, and the reader takes them as u32.
    if not raw or len(raw) > 9 or not all("0" <= c <= "9" for c in raw):
        return None
    return int(raw)


def _env_raw(name):
    value = os.environ.get(name)
    return None if value is None else _text(value)


def _job_key():
    """Which distributed job the process belongs to, as its launcher set
    it: torchrun's TORCHELASTIC_RUN_ID, else the rendezvous MASTER_ADDR and
    MASTER_PORT every rank of one job shares; None outside such a job."""
    run_id = _env_raw("TORCHELASTIC_RUN_ID")
    if run_id and run_id.strip() and run_id.strip() != "none":
        return _text("torchelastic:" + run_id.strip())
    addr, port = _env_raw("MASTER_ADDR"), _env_int("MASTER_PORT")
    if addr and addr.strip() and port is not None:
        return _text("%s:%d" % (addr.strip(), port))
    return None


def _alloc_settings(torch):
    """The allocator settings in effect, as the running PyTorch resolves them.

    The environment's, read the way this release's c10 reads it
    (_conf_order), unless a change made at run time is known: a string
    applied through a setter the probe wrapped (_watch_settings), what
    torch._C._accelerator_getAllocatorSettings() returns where the release
    has that getter, or the one snapshot a probe that came late reads
    (_read_settings_once). A run-time string changes only the keys it names.

    The getter came later than the setters: a real 2.11.0 install has none
    (nor do the type stubs of the 2.9.1, 2.10.0 and 2.11.0 wheels; 2.12.0's
    list it first). 2.10 and 2.11 have the setter
    torch._C._accelerator_setAllocatorSettings alone, 2.1 to 2.9
    torch._C._cuda_cudaCachingAllocator_set_allocator_settings; without the
    getter, the wrapped setters are what shows a run-time change.
    """
    c = getattr(torch, "_C", None)
    env, order, from_env = _env_settings(c)
    conf, expandable = _runtime_view(c, from_env)
    if expandable is None:
        expandable = _expandable_segments(from_env, False)
    if conf:
        source = "runtime"
    else:
        conf = from_env if from_env else None
        source = "environment" if conf is not None else None
    return {
        "alloc_conf": conf,
        "alloc_conf_source": source,
        "alloc_conf_var": order[0],
        "alloc_conf_env": env,
        "expandable_segments": expandable,
    }


_CUDA_CONF_ONLY = ("PYTORCH_CUDA_ALLOC_CONF",)
_ALLOC_CONF_FIRST = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
_CUDA_CONF_FIRST = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _conf_order(c):
    """The variables this release reads its settings from, the first one set
    winning; the first is the one a hint names. No binding says it; the
    releases' c10 does: up to 2.8 PYTORCH_CUDA_ALLOC_CONF alone; 2.9's
    AcceleratorAllocatorConfig PYTORCH_ALLOC_CONF first, then the CUDA name
    with a deprecation warning; from 2.10 the CUDA name first again, then
    PYTORCH_ALLOC_CONF, no warning ("keep the parsing order and logic
    stable", c10/core/AllocatorConfig.cpp, AcceleratorAllocatorConfig::
    instance). Bindings that came with each change tell them apart (type
    stubs of the 2.8.0 to 2.12.0 wheels): _accelerator_setAllocatorSettings
    from 2.10, _accelerator_getDeviceStats from 2.9."""
    if getattr(c, "_accelerator_setAllocatorSettings", None) is not None:
        return _CUDA_CONF_FIRST
    if getattr(c, "_accelerator_getDeviceStats", None) is not None:
        return _ALLOC_CONF_FIRST
    return _CUDA_CONF_ONLY


def _env_settings(c):
    """(both variables as the process has them, the order this release
    reads them in, the value it takes from them)."""
    env = {var: _env_raw(var) for var in _ALLOC_CONF_VARS}
    order = _conf_order(c)
    # c10::utils::get_env: a variable set to "" is set, and ends the search.
    taken = next((env[var] for var in order if env[var] is not None), None)
    return env, order, taken


def _runtime_view(c, from_env):
    """(the run-time settings string, expandable_segments as run-time
    strings left it), each None where no run-time change is known."""
    getter = getattr(c, "_accelerator_getAllocatorSettings", None)
    if getter is not None:
        _learn_from_getter(getter, from_env)
    return _runtime_settings


def _learn_from_getter(getter, from_env):
    """The getter returns the environment's string until something changes
    it. A string no wrapper noted (set before start(), or from C++) is noted
    as a wrapper would have, so later strings build on it."""
    try:
        last = _text(getter())
    except Exception:
        return
    conf = _runtime_settings[0]
    if last and last != conf and not (conf is None and last == from_env):
        _note_runtime_settings(last)


# The bindings that change allocator settings at run time. PyTorch's
# torch.cuda.memory._set_allocator_settings looks its binding up by name on
# every call (torch/cuda/memory.py, in every wheel from 2.1 to 2.12), so a
# wrapped binding sees those calls too.
_SETTINGS_SETTERS = (
    "_accelerator_setAllocatorSettings",  # 2.10+, torch/csrc/DeviceAccelerator.cpp
    "_cuda_cudaCachingAllocator_set_allocator_settings",  # 2.1-2.9, torch/csrc/cuda/Module.cpp
)


def _watch_settings(torch, early):
    """Wraps each settings setter the release has, once per interpreter.
    A wrapper stays after stop(): it only notes what was applied, and
    unwrapping could undo someone else's later wrapper."""
    global _settings_unseen
    try:
        c = getattr(torch, "_C", None)
        wrapped = False
        for name in _SETTINGS_SETTERS:
            original = getattr(c, name, None)
            if original is None or hasattr(original, "_gpuscope_original"):
                continue
            setattr(c, name, _noting_setter(original))
            wrapped = True
        if wrapped and not early:
            _settings_unseen = True
    except Exception:
        pass


def _noting_setter(original):
    """Calls the original first: its errors reach the caller unchanged, and
    a string it refused is not noted (PyTorch may still have applied the
    keys before the one it refused; c10's parseArgs stops there)."""

    @functools.wraps(original)
    def setter(*args, **kwargs):
        result = original(*args, **kwargs)
        _note_runtime_settings(args[0] if args else kwargs.get("env"))
        return result

    setter._gpuscope_original = original
    return setter


def _note_runtime_settings(env):
    # c10's parseArgs resets max_split_size, roundup_power2_divisions and
    # garbage_collection_threshold on every call, but expandable_segments
    # only when the string names it (c10/core/AllocatorConfig.cpp).
    global _runtime_settings
    try:
        text = _text(env)
        if text is None:
            return
        named = _expandable_segments(text, None)
        expandable = _runtime_settings[1]
        _runtime_settings = (text, expandable if named is None else named)
    except Exception:
        pass


def _read_settings_once(torch, cuda, backend, blocks):
    """For a probe that came late (start() in a running program) on a
    release without the getter: the settings in effect, from one
    torch.cuda.memory._snapshot(), whose "allocator_settings" (PyTorch 2.3+,
    PR 119404) hold the last string parsed and expandable_segments as in
    effect. Once per process, on the probe's thread. Not under
    cudaMallocAsync (it refuses snapshots, and has no segments to expand);
    not while allocation history is recorded (the snapshot would copy the
    whole trace ring, and add an entry to it), nor where that cannot be
    asked (_cuda_isHistoryEnabled: not in 2.1, there by 2.5); and only while
    the counters bound the blocks to walk by _MAX_SETTINGS_SNAPSHOT_BLOCKS.
    Until then it waits for a later sample; a failure gives up."""
    global _settings_unseen
    try:
        c = getattr(torch, "_C", None)
        history = getattr(c, "_cuda_isHistoryEnabled", None)
        snapshot = getattr(getattr(cuda, "memory", None), "_snapshot", None)
        if (getattr(c, "_accelerator_getAllocatorSettings", None) is not None
                or backend == "cudaMallocAsync" or history is None or snapshot is None):
            _settings_unseen = False
            return True
        if blocks > _MAX_SETTINGS_SNAPSHOT_BLOCKS or history():
            return True
        _settings_unseen = False
        taken = snapshot()
        settings = taken.get("allocator_settings") if isinstance(taken, dict) else None
        if isinstance(settings, dict):
            _seed_runtime_settings(settings, _env_settings(c)[2])
        return True
    except Exception:
        _settings_unseen = False
        return False


def _seed_runtime_settings(settings, from_env):
    """Fills from the snapshot's settings what no wrapped setter has noted:
    its "PYTORCH_CUDA_ALLOC_CONF" is the last string parsed, whichever
    variable or call it came from (torch/csrc/cuda/Module.cpp)."""
    global _runtime_settings
    conf, expandable = _runtime_settings
    last = _text(settings.get("PYTORCH_CUDA_ALLOC_CONF"))
    flag = settings.get("expandable_segments")
    if conf is None and last and last != from_env:
        conf = last
    if expandable is None and isinstance(flag, bool):
        expandable = flag
    _runtime_settings = (conf, expandable)


def _blocks_bound(stats):
    """At most how many blocks a snapshot walks for this device: free blocks
    never lie side by side (PyTorch merges them), so a segment holds at most
    one more free block than active ones."""
    active = _stat(stats, "active", "current") or 0
    segments = _stat(stats, "segment", "current") or 0
    return 2 * active + segments


def _expandable_segments(conf, default):
    """Mirrors PyTorch's tokenizer: whitespace ignored, the last setting
    wins, and only "True" / "False" are accepted values (ConfigTokenizer)."""
    enabled = default
    if not conf:
        return enabled
    for item in "".join(conf.split()).split(","):
        key, sep, value = item.partition(":")
        if sep and key == "expandable_segments" and value in ("True", "False"):
            enabled = value == "True"
    return enabled


def _read_start_ticks():
    if not sys.platform.startswith("linux"):
        return 0
    try:
        with open("/proc/self/stat", "rb") as handle:
            data = handle.read()
        # comm (field 2) may hold spaces and parentheses; fields after the
        # last ')' start at field 3, so starttime (22) is the 20th of them.
        return int(data[data.rindex(b")") + 1:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _read_pid_namespace():
    """`pid:[inode]` of this process's PID namespace: with it, a gpuscope in
    the same namespace can prove the process gone after it ended unseen
    (a kill -9 while no gpuscope watched) and remove the file."""
    try:
        return _text(os.readlink("/proc/self/ns/pid"))
    except (OSError, AttributeError):
        return None


def _mid_import(module):
    """True while a module's own import is still running in some thread."""
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


# ----------------------------------------------------------------- transport


class _UnsafeDirectory(Exception):
    pass


def _directory_plan():
    """Returns (probes directory, directories whose safety is checked)."""
    uid = os.getuid()
    override = os.environ.get("GPUSCOPE_PROBE_DIR")
    if override:
        path = os.path.abspath(override)
        parent = os.path.dirname(path)
        # Whoever can write the parent can swap the directory itself.
        return path, ((parent, path) if parent != path else (path,))
    base = None
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        try:
            info = os.stat(xdg)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
                base = os.path.join(xdg, "gpuscope")
        except OSError:
            pass
    if base is None:
        base = os.path.join("/tmp", "gpuscope-%d" % uid)
    probes = os.path.join(base, "probes")
    return probes, (base, probes)


def _mkdir_private(path):
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    # The umask may have taken bits away; only a directory made here is ours
    # to fix, anything that already existed is judged by _check_private.
    os.chmod(path, 0o700)


def _check_private(path, uid):
    info = os.lstat(path)
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != uid
        or info.st_mode & 0o077
    ):
        raise _UnsafeDirectory(path)


def _prepare_directory(plan):
    target, checked = plan
    uid = os.getuid()
    missing = []
    parent = os.path.dirname(checked[0])
    while parent and not os.path.lexists(parent):
        missing.append(parent)
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    for path in reversed(missing):
        _mkdir_private(path)
    # Top-down, so nothing is created beneath a directory that failed.
    for path in checked:
        _mkdir_private(path)
        _check_private(path, uid)
    return target


def _write_atomic(directory, name, payload):
    stem = name[: -len(".json")] if name.endswith(".json") else name
    temp = os.path.join(directory, ".%s.%s.tmp" % (stem, os.urandom(8).hex()))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(temp, flags, 0o600)
    try:
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)
        os.replace(temp, os.path.join(directory, name))
    except BaseException:
        _unlink(temp)
        raise


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# ------------------------------------------------------------------- readers


def _stat(stats, name, metric):
    """stats[name]["all"][metric] of memory_stats_as_nested_dict, or None."""
    entry = stats.get(name)
    if isinstance(entry, dict):
        entry = entry.get("all")
    if isinstance(entry, dict):
        return _count(entry.get(metric))
    return None


def _device_in_use(stats):
    # With CUDA initialised, PyTorch answers for every visible device, with
    # zeros where this process never allocated; such devices are not its own.
    for name in ("reserved_bytes", "allocated_bytes"):
        for metric in ("peak", "current"):
            value = _stat(stats, name, metric)
            if value is None or value > 0:
                return True
    return bool(_count(stats.get("num_device_alloc")))


def _flatten(prefix, value, out, depth=0):
    if isinstance(value, dict):
        if depth > 4:
            return
        for key, item in value.items():
            name = "%s.%s" % (prefix, key) if prefix else str(key)
            _flatten(name, item, out, depth + 1)
    else:
        out[prefix] = value


def _pinned_from(stats):
    """Pinned host memory held by the process from host_memory_stats().

    Key names changed across releases: up to about 2.9 "reserved_bytes" is
    what the pinned allocator holds and "allocated_bytes" what is in use;
    later "allocated_bytes" is what it holds. Held memory is the figure that
    competes for host RAM, so reserved_bytes is preferred when present.
    """
    if not isinstance(stats, dict) or not stats:
        return None
    flat = {}
    _flatten("", stats, flat)
    for family in ("reserved_bytes", "allocated_bytes"):
        current = _find_metric(flat, family, "current")
        if current is not None:
            return {"current": current, "peak": _find_metric(flat, family, "peak")}
    return None


def _find_metric(flat, family, metric):
    for key in ("%s.%s" % (family, metric), "%s.all.%s" % (family, metric)):
        if key in flat:
            return _count(flat[key])
    for key in sorted(flat):
        parts = key.split(".")
        if parts[-1] == metric and any(family in part for part in parts[:-1]):
            return _count(flat[key])
    return None


# memory_stats keys PyTorch's cudaMallocAsync backend does not keep: its
# docstring (torch/cuda/memory.py, memory_stats) calls them "not meaningful,
# and always reported as zero" (CUDAMallocAsyncAllocator.cpp fills only
# allocated, active and reserved bytes), so they are unknown, not 0.
_NOT_KEPT_BY_ASYNC = (
    "inactive_split",
    "inactive_split_peak",
    "requested",
    "requested_peak",
    "segments",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
)


class _TorchReader(object):
    def __init__(self):
        # index -> (uuid, pci_bus_id): device properties never change.
        self.identities = {}
        self.backend = None
        self.backend_failures = 0
        self.host_failures = 0
        self.private_failures = 0
        # index -> (major, minor) compute capability, from the same
        # properties as the identity.
        self.capabilities = {}
        self.environment = _EnvironmentReader()
        # None until tried once; then whether PyTorch took the observer.
        self.oom_observer = None
        # (torch.cuda, device indices) for cheap retry/OOM checks between
        # samples; None where those counters are not kept (cudaMallocAsync).
        self.watch = None

    def sample(self, torch, probe):
        cuda = getattr(torch, "cuda", None)
        if cuda is None or _mid_import(cuda):
            return None
        is_initialized = getattr(cuda, "is_initialized", None)
        if is_initialized is None or not is_initialized():
            return None
        backend = self._backend(cuda, probe)
        self._attach_oom_observer(torch)
        count = _count(cuda.device_count()) or 0
        devices = []
        blocks = 0
        for index in range(min(count, _MAX_DEVICES)):
            try:
                stats = cuda.memory_stats_as_nested_dict(index)
            except Exception:
                probe.errors += 1
                continue
            if not isinstance(stats, dict) or not stats or not _device_in_use(stats):
                continue
            blocks += _blocks_bound(stats)
            devices.append(self._device(cuda, index, stats, backend, probe))
        if not devices:
            self.watch = None
            return None
        if backend == "cudaMallocAsync":
            self.watch = None
        else:
            self.watch = (cuda, [device["index"] for device in devices])
        body = {
            "framework": "torch",
            "framework_version": _text(getattr(torch, "__version__", None)),
            "backend": backend,
            "pinned_host": self._pinned_host(cuda, probe),
            "oom_events": _oom_events,
            "last_oom": list(_oom_records),
            "devices": devices,
        }
        if _settings_unseen and not _read_settings_once(torch, cuda, backend, blocks):
            probe.errors += 1
        body.update(_alloc_settings(torch))
        now = time.monotonic()
        try:
            body["input"] = _input_doc(now)
        except Exception:
            probe.errors += 1
            body["input"] = None
        body["environment"] = self.environment.read(torch, self.capabilities, now)
        return body

    def _device(self, cuda, index, stats, backend, probe):
        uuid, pci_bus_id = self._identity(cuda, index, probe)
        device = {
            "index": index,
            "uuid": uuid,
            "pci_bus_id": pci_bus_id,
            "allocated": _stat(stats, "allocated_bytes", "current"),
            "allocated_peak": _stat(stats, "allocated_bytes", "peak"),
            "reserved": _stat(stats, "reserved_bytes", "current"),
            "reserved_peak": _stat(stats, "reserved_bytes", "peak"),
            "active": _stat(stats, "active_bytes", "current"),
            "active_peak": _stat(stats, "active_bytes", "peak"),
            "inactive_split": _stat(stats, "inactive_split_bytes", "current"),
            "inactive_split_peak": _stat(stats, "inactive_split_bytes", "peak"),
            "requested": _stat(stats, "requested_bytes", "current"),
            "requested_peak": _stat(stats, "requested_bytes", "peak"),
            "segments": _stat(stats, "segment", "current"),
            "alloc_retries": _count(stats.get("num_alloc_retries")),
            "ooms": _count(stats.get("num_ooms")),
            "device_allocs": _count(stats.get("num_device_alloc")),
            "device_frees": _count(stats.get("num_device_free")),
            "private_pools_reserved": self._private_pools(cuda, index, probe),
            "largest_free_block": None,
            "bytes_limit": None,
        }
        if backend == "cudaMallocAsync":
            for key in _NOT_KEPT_BY_ASYNC:
                device[key] = None
        return device

    def _attach_oom_observer(self, torch):
        """Once CUDA is up; feature-detected (PyTorch 2.0+). The
        cudaMallocAsync backend refuses observers: then OutOfMemoryErrors
        that escape are all there is."""
        if self.oom_observer is not None:
            return
        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        self.oom_observer = False
        if attach is None:
            return
        try:
            attach(_on_out_of_memory)
            self.oom_observer = True
        except Exception:
            pass

    def _identity(self, cuda, index, probe):
        if index in self.identities:
            return self.identities[index]
        uuid = pci_bus_id = None
        try:
            props = cuda.get_device_properties(index)
            # str(props.uuid) is a bare UUID (PyTorch's _CUuuid); for a MIG
            # instance it is the instance's own UUID, so the prefix is left
            # to gpuscope, which knows whether NVML calls it GPU- or MIG-.
            text = _text(getattr(props, "uuid", None))
            uuid = text.strip() if text and text.strip() else None
            pci_bus_id = _pci_bus_id(props)
            major, minor = _count(getattr(props, "major", None)), _count(getattr(props, "minor", None))
            if major is not None and minor is not None:
                self.capabilities[index] = (major, minor)
        except Exception:
            probe.errors += 1
        # Cached even when it failed: the properties never change, and a
        # call that failed once is not worth an error every cycle.
        self.identities[index] = (uuid, pci_bus_id)
        return uuid, pci_bus_id

    def _private_pools(self, cuda, index, probe):
        """Bytes private pools (CUDA graphs) hold, where the release reports
        it (torch.cuda.private_pool_memory_reserved, newest PyTorch)."""
        getter = getattr(cuda, "private_pool_memory_reserved", None)
        if getter is None or self.private_failures >= _CALL_FAILURE_BUDGET:
            return None
        try:
            return _count(getter(index))
        except Exception:
            self.private_failures += 1
            probe.errors += 1
            return None

    def _backend(self, cuda, probe):
        if self.backend is None and self.backend_failures < _CALL_FAILURE_BUDGET:
            getter = getattr(cuda, "get_allocator_backend", None)
            if getter is None:
                # Before PyTorch 2.0 the native caching allocator was the
                # only one, and get_allocator_backend() did not exist.
                self.backend = "native"
                return self.backend
            try:
                name = getter()
            except Exception:
                self.backend_failures += 1
                probe.errors += 1
                name = None
            if isinstance(name, str) and name:
                self.backend = _text(name)
        return self.backend

    def _pinned_host(self, cuda, probe):
        if self.host_failures >= _CALL_FAILURE_BUDGET:
            return None
        getter = getattr(cuda, "host_memory_stats", None)
        if getter is None:
            return None
        try:
            return _pinned_from(getter())
        except Exception:
            self.host_failures += 1
            probe.errors += 1
            return None

    def events_rose(self, last_events):
        """Re-reads only the retry/OOM counters; True when one rose."""
        watch = self.watch
        if watch is None or not last_events:
            return False
        cuda, indices = watch
        try:
            if not cuda.is_initialized():
                return False
            for index in indices:
                stats = cuda.memory_stats_as_nested_dict(index)
                if not isinstance(stats, dict):
                    continue
                now = (_count(stats.get("num_alloc_retries")), _count(stats.get("num_ooms")))
                if _pair_rose(last_events.get(index), now):
                    return True
        except Exception:
            # The full sample that follows will count the failure.
            return False
        return False


def _pci_bus_id(props):
    """NVML's busId form, "%08x:%02x:%02x.0", from the integer PCI fields
    recent PyTorch releases put in the device properties; None without them."""
    parts = []
    for name in ("pci_domain_id", "pci_bus_id", "pci_device_id"):
        value = _count(getattr(props, name, None))
        if value is None:
            return None
        parts.append(value)
    domain, bus, device = parts
    if domain > 0xFFFFFFFF or bus > 0xFF or device > 0xFF:
        return None
    return "%08x:%02x:%02x.0" % (domain, bus, device)


class _JaxReader(object):
    def sample(self, jax, bridge, probe):
        # jax.devices() on a process whose backends are not up yet would
        # create them, and with them XLA's preallocation of most of the GPU.
        if bridge is None or _mid_import(bridge):
            return None
        backends = getattr(bridge, "_backends", None)
        if not isinstance(backends, dict) or not backends:
            return None
        names = [name for name in list(backends) if name in _GPU_PLATFORMS]
        if not names:
            return None
        local_devices = getattr(jax, "local_devices", None)
        if local_devices is None:
            return None
        devices = []
        seen = set()
        for name in names:
            try:
                found = list(local_devices(backend=name))
            except Exception:
                probe.errors += 1
                continue
            for device in found:
                if len(devices) >= _MAX_DEVICES:
                    break
                if getattr(device, "platform", None) not in _GPU_PLATFORMS:
                    continue
                index = _count(getattr(device, "local_hardware_id", None))
                if index is None:
                    index = _count(getattr(device, "id", None))
                if index is None or index in seen:
                    continue
                try:
                    stats = device.memory_stats()
                except Exception:
                    probe.errors += 1
                    continue
                if not isinstance(stats, dict) or not stats:
                    continue
                seen.add(index)
                devices.append(_jax_device(index, stats))
        if not devices:
            return None
        return {
            "framework": "jax",
            "framework_version": _text(getattr(jax, "__version__", None)),
            "backend": "jax",
            "alloc_conf": None,
            "alloc_conf_source": None,
            "alloc_conf_var": None,
            "alloc_conf_env": None,
            "expandable_segments": False,
            "pinned_host": None,
            "oom_events": None,
            "last_oom": None,
            "devices": devices,
            "input": None,
            "environment": None,
        }


def _jax_device(index, stats):
    return {
        "index": index,
        "uuid": None,
        "pci_bus_id": None,
        "allocated": _count(stats.get("bytes_in_use")),
        "allocated_peak": _count(stats.get("peak_bytes_in_use")),
        "reserved": _count(stats.get("pool_bytes")),
        "reserved_peak": _count(stats.get("peak_pool_bytes")),
        "active": None,
        "active_peak": None,
        "inactive_split": None,
        "inactive_split_peak": None,
        "requested": None,
        "requested_peak": None,
        "segments": None,
        "alloc_retries": None,
        "ooms": None,
        "device_allocs": None,
        "device_frees": None,
        "private_pools_reserved": None,
        "largest_free_block": _count(stats.get("largest_free_block_bytes")),
        "bytes_limit": _count(stats.get("bytes_limit")),
    }


def _events_of(devices):
    return {
        device["index"]: (device["alloc_retries"], device["ooms"]) for device in devices
    }


def _pair_rose(before, now):
    if before is None:
        return False
    for old, new in zip(before, now):
        if old is not None and new is not None and new > old:
            return True
    return False


# ------------------------------------------------------------ input pipeline
#
# How long the training thread waits for its DataLoaders, what the loaders
# are set to, /dev/shm, and the job's numeric environment. The DataLoader
# part is a class-level wrapper of _BaseDataLoaderIter.__next__, the only
# __next__ in torch/utils/data/dataloader.py from 1.12 to today: both
# iterator classes inherit it, torchdata's StatefulDataLoader iterator calls
# it through super(), and iterators made before the wrapper still go
# through it. It runs in the training thread and only adds to counters; the
# probe's thread turns them into figures on its own tick.

# Bounds on what one file says: far above what a training job runs.
_MAX_LOADERS = 8
_MAX_TRACKED_LOADERS = 32
_MAX_WORKER_PIDS = 64
_MAX_LOADER_FAILURES = 4
_MAX_LABEL = 128
_MAX_MESSAGE = _MAX_TEXT
# The figures cover this recent window; the tick's samples are kept at
# least _INPUT_SAMPLE_GAP_S apart, so the ring stays short at any interval.
_INPUT_WINDOW_S = 30.0
_INPUT_SAMPLE_GAP_S = 0.5
# A shorter window says nothing yet.
_MIN_WINDOW_S = 1.0
# The batch is only in the training thread's hands, so its bytes are summed
# there, at most this often per loader, over a bounded walk: a few
# microseconds every few seconds, nothing per batch.
_BATCH_BYTES_EVERY_S = 5.0
_MAX_BATCH_NODES = 256
_MAX_BATCH_DEPTH = 4
# Flags a program may change while it runs, re-read this often.
_ENVIRONMENT_EVERY_S = 10.0
# A second failure with the same message this soon is the same failure,
# seen again by an exception hook after the wrapper let it through.
_SAME_FAILURE_S = _OOM_SAME_FAILURE_S
# Tests point this at a small tmpfs of their own.
_SHM_PATH = "/dev/shm"

# The classes wrapped, by module: (module, class, attribute, wrapper maker).
_DATALOADER_MODULE = "torch.utils.data.dataloader"
_AUTOCAST_MODULE = "torch.amp.autocast_mode"
# torch.amp.GradScaler from 2.3; before, torch.cuda.amp's own class (which
# from 2.3 subclasses torch.amp's and calls its __init__: a scaler seen by
# both wrappers is one entry of the weak set).
_SCALER_MODULES = ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler")
_HOOKED_MODULES = (_DATALOADER_MODULE, _AUTOCAST_MODULE) + _SCALER_MODULES
_WATCHED_MODULES = ("torch.cuda", "jax") + _HOOKED_MODULES

# id(iterator) -> its _Loader, or False for an iterator not followed (past
# the bound); entries leave with the iterator (a weak reference's callback).
_iterators = {}
# loader key (see _loader_key) -> _Loader.
_loaders = {}
_loader_serial = 0
# Loader failures, oldest first, bounded; and the last one's (exception,
# message, monotonic time), to tell a repeat from a new failure.
_loader_failures = []
_last_loader_failure = (None, None, 0.0)
# When a failure was last published at once, from the training thread: a
# program that catches its loader's errors and goes on pays that at most
# this often.
_last_failure_publish = -1e18
_FAILURE_PUBLISH_GAP_S = 1.0
# [entries, monotonic time of the last, device type, dtype object].
_autocast = [0, None, None, None]
_grad_scalers = weakref.WeakSet()
# Whether the GradScaler classes were wrapped as their module loaded (else
# scalers made before the probe came are not seen).
_scalers_seen_from_import = False


class _Loader(object):
    """One DataLoader, followed across its iterators (a new one each epoch
    unless persistent_workers). The wrapped __next__ adds to the counters in
    the training thread; the probe's thread reads them (each a single
    attribute, so a read never sees half an update)."""

    __slots__ = ("number", "sampler", "iterator", "thread", "batches", "wait_s", "epochs", "epoch_wait_s",
                 "last_epoch_wait_s", "inside_since", "bytes_due", "batch_bytes", "samples", "settings",
                 "last_active")

    def __init__(self, number, sampler):
        self.number = number
        self.sampler = sampler
        self.iterator = None
        self.thread = None
        self.batches = 0
        # Seconds inside __next__, apart from each epoch's first batch
        # (which includes starting the workers): that is epoch_wait_s.
        self.wait_s = 0.0
        self.epochs = 0
        self.epoch_wait_s = 0.0
        self.last_epoch_wait_s = None
        # monotonic() when the current __next__ began, 0.0 outside one.
        self.inside_since = 0.0
        self.bytes_due = 0.0
        self.batch_bytes = None
        # (monotonic, batches, wait_s, epoch_wait_s), oldest first.
        self.samples = []
        self.settings = None
        self.last_active = None


def _loader_key(iterator):
    """The DataLoader an iterator belongs to, by the index sampler every
    iterator copies from it (torch/utils/data/dataloader.py,
    _BaseDataLoaderIter.__init__: self._index_sampler =
    loader._index_sampler, made once per DataLoader), without holding it:
    (key, a weak reference to the sampler or None)."""
    sampler = getattr(iterator, "_index_sampler", None)
    if sampler is None:
        return ("iterator", id(iterator)), None
    try:
        return ("sampler", id(sampler)), weakref.ref(sampler)
    except TypeError:
        return ("sampler", id(sampler)), None


def _adopt_iterator(iterator):
    """An iterator's first __next__: its loader's record, or False when it
    is not followed. Never raises."""
    global _loader_serial
    try:
        key, sampler_ref = _loader_key(iterator)
        loader = _loaders.get(key)
        if loader is not None and loader.sampler is not None and sampler_ref is not None \
                and loader.sampler() is not sampler_ref():
            loader = None  # a new DataLoader where a dead one's sampler was
        if loader is None:
            if len(_loaders) >= _MAX_TRACKED_LOADERS:
                _forget_idle_loaders(time.monotonic())
            if len(_loaders) >= _MAX_TRACKED_LOADERS:
                loader = False
            else:
                _loader_serial += 1
                loader = _Loader(_loader_serial, sampler_ref)
                _loaders[key] = loader
        ident = id(iterator)
        ref = weakref.ref(iterator, functools.partial(_forget_iterator, ident))
        if loader is not False:
            loader.iterator = ref
            loader.thread = _label(threading.current_thread().name)
        # The weak reference lives as long as the entry, so its callback
        # removes the entry before the id can name another object.
        _iterators[ident] = loader
        _iterator_refs[ident] = ref
        return loader
    except Exception:
        return False


# id(iterator) -> the weak reference whose callback removes its entries.
_iterator_refs = {}


def _forget_iterator(ident, ref):
    try:
        _iterators.pop(ident, None)
        _iterator_refs.pop(ident, None)
    except Exception:
        pass


def _forget_idle_loaders(now):
    """Drops loaders with no live iterator and no batch in the window."""
    for key, loader in list(_loaders.items()):
        iterator = loader.iterator() if loader.iterator is not None else None
        last = loader.last_active if loader.last_active is not None else -1e18
        if iterator is None and now - last > _INPUT_WINDOW_S:
            _loaders.pop(key, None)


def _loader_next(original):
    """The wrapper of _BaseDataLoaderIter.__next__. Its own cost is two
    clock reads and a few attribute updates (benches/probe_cost.py); the
    batch's bytes are summed at most every _BATCH_BYTES_EVERY_S. Whatever
    __next__ raises reaches the caller unchanged."""
    monotonic = time.monotonic
    iterators = _iterators

    @functools.wraps(original)
    def __next__(self):
        loader = iterators.get(id(self))
        if loader is None:
            loader = _adopt_iterator(self)
        if loader is False or not _armed:
            return original(self)
        # 0 on an epoch's first batch (torch increments it after
        # _next_data returns): that wait includes starting the workers.
        try:
            first = self._num_yielded == 0
        except AttributeError:
            first = False
        start = monotonic()
        loader.inside_since = start
        try:
            batch = original(self)
        except BaseException as exc:
            loader.inside_since = 0.0
            took = monotonic() - start
            if first:
                loader.epoch_wait_s += took
            else:
                loader.wait_s += took
            if isinstance(exc, Exception) and not isinstance(exc, StopIteration):
                _note_loader_failure(exc, loader, self)
            raise
        end = monotonic()
        loader.inside_since = 0.0
        loader.batches += 1
        if first:
            loader.epochs += 1
            loader.epoch_wait_s += end - start
            loader.last_epoch_wait_s = end - start
        else:
            loader.wait_s += end - start
        if end >= loader.bytes_due:
            loader.bytes_due = end + _BATCH_BYTES_EVERY_S
            loader.batch_bytes = _batch_bytes(batch)
        return batch

    __next__._gpuscope_original = original
    return __next__


def _batch_bytes(batch):
    """Bytes of the tensors in a batch (lists, tuples, dicts, mappings,
    nested at most _MAX_BATCH_DEPTH deep); None when there are none, or more
    than _MAX_BATCH_NODES items to walk. Tensor.nbytes (numel x element
    size) reads sizes only: no copy, no synchronisation."""
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
    if not isinstance(tensor_type, type):
        return None
    total = 0
    found = False
    stack = [(batch, 0)]
    walked = 0
    try:
        while stack:
            item, depth = stack.pop()
            walked += 1
            if walked > _MAX_BATCH_NODES:
                return None
            if isinstance(item, tensor_type):
                size = _count(getattr(item, "nbytes", None))
                if size is None:
                    size = _count(item.numel() * item.element_size())
                if size is None:
                    return None
                total += size
                found = True
            elif depth < _MAX_BATCH_DEPTH:
                if isinstance(item, (list, tuple)):
                    stack.extend((child, depth + 1) for child in item[:_MAX_BATCH_NODES])
                elif isinstance(item, (dict, Mapping)):
                    stack.extend((child, depth + 1) for child in list(item.values())[:_MAX_BATCH_NODES])
    except Exception:
        return None
    return total if found else None


def _flag(value):
    return value if isinstance(value, bool) else None


def _label(value):
    text = _text(value)
    return None if text is None else text[:_MAX_LABEL]


def _type_name(value):
    return None if value is None else _label(type(value).__name__)


def _loader_settings(iterator):
    """What the iterator says of its loader (attributes of
    torch/utils/data/dataloader.py's iterators in every release since 1.12:
    _num_workers, _pin_memory, _persistent_workers on both; _prefetch_factor,
    _workers, _pin_memory_thread (only when pinning) and _data_queue on the
    multi-process one). A worker's pid is read from its Popen; never
    is_alive() or exitcode: both wait on a dead worker, which reaps it, and
    PyTorch's SIGCHLD handler then loses its "killed by signal" diagnosis."""
    workers = getattr(iterator, "_workers", None)
    multiprocess = isinstance(workers, list)
    pids = None
    if multiprocess:
        pids = []
        for worker in workers[:_MAX_WORKER_PIDS]:
            try:
                pid = _count(worker.pid)
            except Exception:
                pid = None
            if pid is not None:
                pids.append(pid)
    ready = None
    if multiprocess:
        # A queue.Queue while pinning (its lock, briefly), else the
        # multiprocessing queue the workers fill (a semaphore's value).
        qsize = getattr(getattr(iterator, "_data_queue", None), "qsize", None)
        try:
            ready = _count(qsize()) if qsize is not None else None
        except Exception:
            ready = None
    return {
        "iterator": _type_name(iterator),
        "dataset": _type_name(getattr(iterator, "_dataset", None)),
        "num_workers": _count(getattr(iterator, "_num_workers", None)),
        "pin_memory": _flag(getattr(iterator, "_pin_memory", None)),
        "prefetch_factor": _count(getattr(iterator, "_prefetch_factor", None)) if multiprocess else None,
        "persistent_workers": _flag(getattr(iterator, "_persistent_workers", None)),
        "workers": len(workers) if multiprocess else None,
        "worker_pids": pids,
        "pin_memory_thread": (getattr(iterator, "_pin_memory_thread", None) is not None) if multiprocess else None,
        "batches_ready": ready,
    }


def _shm_need(settings, batch_bytes):
    """What a loader keeps in /dev/shm: a worker collates its batch straight
    into shared memory (torch/utils/data/_utils/collate.py), and at most
    prefetch_factor x num_workers batches are outstanding, plus about two
    being handed over; none without workers."""
    if settings is None or settings["num_workers"] is None:
        return None
    if settings["num_workers"] == 0:
        return 0
    if batch_bytes is None or settings["prefetch_factor"] is None:
        return None
    return batch_bytes * (settings["prefetch_factor"] * settings["num_workers"] + 2)


def _loader_point(loader, iterator, now):
    """(now, batches, wait_s, epoch_wait_s), a __next__ in progress
    counted up to now."""
    wait, epoch_wait = loader.wait_s, loader.epoch_wait_s
    inside = loader.inside_since
    if inside:
        extra = max(now - inside, 0.0)
        if iterator is not None and getattr(iterator, "_num_yielded", None) == 0:
            epoch_wait += extra
        else:
            wait += extra
    return (now, loader.batches, wait, epoch_wait)


def _remember(loader, point):
    samples = loader.samples
    if samples and samples[-1][1] != point[1]:
        loader.last_active = point[0]
    elif not samples:
        loader.last_active = point[0] if point[1] else None
    if samples and point[0] - samples[-1][0] < _INPUT_SAMPLE_GAP_S and len(samples) > 1:
        samples[-1] = point
    else:
        samples.append(point)
    # The newest sample at or before the window's start stays, as its base.
    cutoff = point[0] - _INPUT_WINDOW_S
    while len(samples) > 2 and samples[1][0] <= cutoff:
        del samples[0]


def _window_figures(loader):
    samples = loader.samples
    old, new = samples[0], samples[-1]
    span = new[0] - old[0]
    if span < _MIN_WINDOW_S:
        return {"window_s": None, "batches_per_s": None, "wait_share": None, "wait_per_batch_s": None}
    batches = new[1] - old[1]
    wait = new[2] - old[2]
    # Epoch starts are apart: neither their wait nor their time counts.
    steady = span - (new[3] - old[3])
    share = None
    if steady >= _MIN_WINDOW_S:
        share = min(max(wait / steady, 0.0), 1.0)
    return {
        "window_s": round(span, 3),
        "batches_per_s": round(batches / span, 3),
        "wait_share": None if share is None else round(share, 4),
        "wait_per_batch_s": round(wait / batches, 6) if batches else None,
    }


def _loader_doc(loader, iterator, now):
    settings = loader.settings
    doc = {"id": loader.number, "live": iterator is not None, "consumer_thread": loader.thread,
           "batches": loader.batches, "epochs": loader.epochs}
    doc.update(_window_figures(loader))
    inside = loader.inside_since
    doc["waiting_s"] = round(max(now - inside, 0.0), 3) if inside and iterator is not None else 0.0
    doc["first_batch_wait_s"] = None if loader.last_epoch_wait_s is None else round(loader.last_epoch_wait_s, 6)
    for key in ("iterator", "dataset", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                "workers", "worker_pids", "pin_memory_thread", "batches_ready"):
        doc[key] = settings.get(key) if settings is not None else None
    doc["batch_bytes"] = loader.batch_bytes
    doc["shm_need"] = _shm_need(settings, loader.batch_bytes) if iterator is not None else 0
    return doc


def _input_doc(now):
    """The "input" part of the file: live loaders (those with a batch in the
    window first), /dev/shm and the failures kept."""
    _hook_torch_classes(early=False)
    rows = []
    for key, loader in list(_loaders.items()):
        iterator = loader.iterator() if loader.iterator is not None else None
        if iterator is not None:
            try:
                loader.settings = _loader_settings(iterator)
            except Exception:
                pass
        _remember(loader, _loader_point(loader, iterator, now))
        if iterator is None and (loader.last_active is None or now - loader.last_active > _INPUT_WINDOW_S):
            _loaders.pop(key, None)
            continue
        rows.append((iterator is not None, loader.last_active or 0.0, loader, iterator))
    rows.sort(key=lambda row: (row[0], row[1]), reverse=True)
    docs = [_loader_doc(loader, iterator, now) for _, _, loader, iterator in rows[:_MAX_LOADERS]]
    needs = [doc["shm_need"] for doc in docs]
    return {
        "hooked": _is_hooked(sys.modules.get(_DATALOADER_MODULE), "_BaseDataLoaderIter", "__next__"),
        "window_s": _INPUT_WINDOW_S,
        "loaders": docs,
        "loaders_left_out": max(len(rows) - _MAX_LOADERS, 0),
        "shm": _shm_doc(None if any(n is None for n in needs) else sum(needs)),
        "failures": list(_loader_failures),
    }


def _shm_view():
    """(total, free) bytes of this process's own /dev/shm, or (None, None):
    statvfs needs no privilege and sees the container's own mount."""
    try:
        info = os.statvfs(_SHM_PATH)
    except (OSError, AttributeError):
        return None, None
    unit = info.f_frsize or info.f_bsize
    return _count(info.f_blocks * unit), _count(info.f_bavail * unit)


def _shm_doc(need):
    total, free = _shm_view()
    limits = None
    if resource is not None:
        try:
            limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (OSError, ValueError, AttributeError):
            limits = None
    return {
        "path": _SHM_PATH,
        "total": total,
        "free": free,
        "need": need,
        "sharing_strategy": _sharing_strategy(),
        # With the file_descriptor strategy each batch in flight holds
        # descriptors; RLIM_INFINITY (-1) reads as no figure.
        "open_files_limit": _count(limits[0]) if limits else None,
        "open_files_limit_hard": _count(limits[1]) if limits else None,
    }


def _sharing_strategy():
    """torch.multiprocessing.get_sharing_strategy() (a module global read
    in Python), only where torch has loaded that module."""
    getter = getattr(sys.modules.get("torch.multiprocessing"), "get_sharing_strategy", None)
    if getter is None:
        return None
    try:
        return _label(getter())
    except Exception:
        return None


# What a DataLoader failure's message says it was (checked in this order):
# PR 161910's reservation failing ("unable to allocate shared memory(shm)
# for file </torch_...>: No space left on device (28)", inside "Caught
# RuntimeError in DataLoader worker process N"); the SIGCHLD handler's
# "DataLoader worker (pid N) is killed by signal: Bus error. It is possible
# that dataloader's workers are out of shared memory." (torch/csrc/
# DataLoader.cpp) and other signals; _try_get_data's "DataLoader worker
# (pid(s) N) exited unexpectedly" and "Too many open files. Communication
# with the workers is no longer possible." (torch/utils/data/dataloader.py);
# "received 0 items of ancdata" (the file_descriptor strategy past the
# descriptor limit); an exception re-raised from a worker; a timeout.
_FAILURE_KINDS = (
    ("shm_exhausted", re.compile(r"unable to allocate shared memory|No space left on device.*shm|shm.*No space left")),
    ("bus_error", re.compile(r"killed by signal: Bus error")),
    ("worker_killed", re.compile(r"DataLoader worker \(pid \d+\) is killed by signal")),
    ("worker_exited", re.compile(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly")),
    ("too_many_open_files", re.compile(r"Too many open files|received 0 items of ancdata")),
    ("worker_exception", re.compile(r"in DataLoader worker process \d+")),
    ("timeout", re.compile(r"DataLoader timed out after")),
)
_WORKER_PID = re.compile(r"DataLoader worker \(pid(?:\(s\))? (\d+)")
# The kinds that end the workers: the file is kept after exit, as an OOM's.
_FATAL_KINDS = ("shm_exhausted", "bus_error", "worker_killed", "worker_exited", "too_many_open_files")


def _failure_kind(text):
    for kind, pattern in _FAILURE_KINDS:
        if pattern.search(text):
            return kind
    return None


def _bounded_message(text):
    """The message, or its start and its end where it is long: a worker's
    re-raised error puts the first line first and the real error last."""
    if len(text) <= _MAX_MESSAGE:
        return _text(text)
    half = _MAX_MESSAGE // 2 - 2
    return _text(text[:half] + " \u2026 " + text[-half:])


def _note_loader_failure(exc, loader=None, iterator=None):
    """A DataLoader failure's post-mortem, kept like an OOM's: the message,
    how full /dev/shm was, and the loader's settings. From the wrapped
    __next__ (loader known) or an exception hook (the loader found by the
    worker's pid where the message names one). Never raises."""
    global _last_loader_failure, _last_failure_publish
    try:
        try:
            text = str(exc)
        except Exception:
            text = ""
        kind = _failure_kind(text)
        if loader is None and kind is None:
            return
        now = time.monotonic()
        last_ref, last_text, last_at = _last_loader_failure
        if (last_ref is not None and last_ref() is exc) or (text == last_text and now - last_at < _SAME_FAILURE_S):
            return
        try:
            ref = weakref.ref(exc)
        except TypeError:
            ref = None
        _last_loader_failure = (ref, text, now)
        match = _WORKER_PID.search(text)
        worker_pid = int(match.group(1)) if match else None
        if loader is None and worker_pid is not None:
            loader = _loader_of_worker(worker_pid)
        settings = None
        if iterator is not None:
            try:
                settings = _loader_settings(iterator)
            except Exception:
                settings = None
        if settings is None and loader is not None:
            settings = loader.settings
        total, free = _shm_view()
        record = {
            "time_unix_ms": int(time.time() * 1000),
            "kind": kind or "other",
            "exception": _type_name(exc),
            "message": _bounded_message(text),
            "loader": loader.number if loader is not None else None,
            "worker_pid": worker_pid,
            "shm_total": total,
            "shm_free": free,
            "sharing_strategy": _sharing_strategy(),
            "batch_bytes": loader.batch_bytes if loader is not None else None,
        }
        for key in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers"):
            record[key] = settings.get(key) if settings is not None else None
        _loader_failures.append(record)
        del _loader_failures[:-_MAX_LOADER_FAILURES]
        probe = _probe
        if probe is not None and probe.pid == os.getpid():
            if kind in _FATAL_KINDS:
                probe.keep_at_exit = True
            if kind in _FATAL_KINDS or now - _last_failure_publish >= _FAILURE_PUBLISH_GAP_S:
                _last_failure_publish = now
                probe.cycle()
    except BaseException:
        pass


def _loader_of_worker(pid):
    for loader in list(_loaders.values()):
        settings = loader.settings
        if settings is not None and pid in (settings.get("worker_pids") or ()):
            return loader
    return None


def _is_hooked(module, class_name, attribute):
    cls = getattr(module, class_name, None) if module is not None else None
    found = getattr(cls, "__dict__", {}).get(attribute) if isinstance(cls, type) else None
    return found is not None and hasattr(found, "_gpuscope_original")


def _wrap_method(module, class_name, attribute, make):
    """Replaces cls.attribute by make(original), once per class; False
    where the class or its method is missing."""
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        return False
    original = cls.__dict__.get(attribute)
    if original is None:
        return False
    if hasattr(original, "_gpuscope_original"):
        return True
    setattr(cls, attribute, make(original))
    return True


def _hook_torch_classes(early, loaded=None):
    """Wraps what the probe measures with, in the modules torch has loaded
    (never imported here): the DataLoader iterator's __next__, autocast's
    __enter__, the GradScalers' __init__. `early`: called as module
    `loaded` finished executing (importlib still marks it initialising
    until the import returns), so nothing of it has been used yet.
    Wrappers stay after stop(): unwrapping could undo someone else's later
    wrapper."""
    global _scalers_seen_from_import
    modules = sys.modules

    def ready(name):
        module = modules.get(name)
        return module if module is not None and (name == loaded or not _mid_import(module)) else None

    try:
        data = ready(_DATALOADER_MODULE)
        if data is not None:
            _wrap_method(data, "_BaseDataLoaderIter", "__next__", _loader_next)
        autocast = ready(_AUTOCAST_MODULE)
        if autocast is not None:
            _wrap_method(autocast, "autocast", "__enter__", _counting_enter)
        for name in _SCALER_MODULES:
            scaler = ready(name)
            if scaler is None or _is_hooked(scaler, "GradScaler", "__init__"):
                continue
            if _wrap_method(scaler, "GradScaler", "__init__", _noting_init) and early:
                _scalers_seen_from_import = True
    except Exception:
        pass


def _counting_enter(original):
    """autocast.__enter__ (torch/amp/autocast_mode.py): counted after the
    original ran, so its errors reach the caller unchanged. Whether autocast
    is on is per thread (torch.is_autocast_enabled()), so the probe's own
    thread could not ask; entries, and when the last was, say it is in use.
    __exit__ is left alone: nothing shown needs how long a region lasts."""
    monotonic = time.monotonic

    @functools.wraps(original)
    def __enter__(self):
        result = original(self)
        try:
            if getattr(self, "_enabled", True):
                state = _autocast
                state[0] += 1
                state[1] = monotonic()
                state[2] = getattr(self, "device", None)
                state[3] = getattr(self, "fast_dtype", None)
        except Exception:
            pass
        return result

    __enter__._gpuscope_original = original
    return __enter__


def _noting_init(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            _grad_scalers.add(self)
        except Exception:
            pass

    __init__._gpuscope_original = original
    return __init__


def _version_text(value):
    """A version as "9.1.0": from a (major, minor, patch) tuple, or from
    cuDNN's integer, CUDNN_VERSION in cudnn_version.h: major x 1000 + minor
    x 100 + patch up to 8.x, major x 10000 + minor x 100 + patch from 9.0."""
    if isinstance(value, tuple) and value and all(_count(v) is not None for v in value):
        return ".".join(str(v) for v in value[:4])
    number = _count(value)
    if number is None:
        return None
    if number >= 90000:
        return "%d.%d.%d" % (number // 10000, number // 100 % 100, number % 100)
    return "%d.%d.%d" % (number // 1000, number // 100 % 10, number % 100)


def _arch_supported(arch_flags, capability):
    """Whether the wheel has code for the device, by torch's own rule
    (torch/cuda/__init__.py, _check_cubins): some sm_XY it was built for has
    XY // 10 equal to the device's major capability; None where it does not
    apply (no sm_ flags, a ROCm build)."""
    if not arch_flags or capability is None:
        return None
    built = []
    for flag in arch_flags.split():
        if flag.startswith("sm_"):
            digits = re.match(r"\d+", flag[3:])
            if digits:
                built.append(int(digits.group(0)))
    if not built:
        return None
    return any(sm // 10 == capability[0] for sm in built)


# The fp32_precision settings' getter: torch._C._get_fp32_precision_getter
# in a real 2.15.0, _get_fp32_precision in a source snapshot before it
# (torch/backends/cuda/__init__.py, cuBLASModule.__getattr__).
_FP32_PRECISION_GETTERS = ("_get_fp32_precision_getter", "_get_fp32_precision")


def _fp32_precision(getter, op):
    """The setting in effect for a CUDA op, resolved as
    aten/src/ATen/Context.cpp's float32Precision does: "none" defers to
    the backend's "all", then to "generic"'s; "none" all the way is
    PyTorch's default, IEEE fp32 (a real 2.15.0 answers "none" for cuda
    matmul out of the box, "tf32" for conv)."""
    for backend, key in (("cuda", op), ("cuda", "all"), ("generic", "all")):
        try:
            value = getter(backend, key)
        except Exception:
            return None
        if not isinstance(value, str):
            return None
        if value != "none":
            return _label(value)
    return "ieee"


def _call(owner, name, *args):
    """owner.name(*args), or None where it is missing or raises."""
    function = getattr(owner, name, None) if owner is not None else None
    if function is None:
        return None
    try:
        return function(*args)
    except Exception:
        return None


class _EnvironmentReader(object):
    """Versions, arch flags and the numeric settings a job runs with, read
    at most every _ENVIRONMENT_EVERY_S, only through raw getters that read
    a flag: torch.backends.cudnn.version() is not one (it checks the
    runtime against the compiled version and can raise), nor from the
    release with the fp32_precision settings on are the allow_tf32 and
    float32_matmul_precision getters (aten/src/ATen/Context.cpp:
    allowTF32CuBLAS, allowTF32CuDNN and float32MatmulPrecision raise where
    the program used both APIs, as a real 2.15.0 does, and a source
    snapshot has them warn once in the program's name)."""

    def __init__(self):
        self.due = 0.0
        self.last = None
        self.static = None

    def read(self, torch, capabilities, now):
        if self.last is None or now >= self.due:
            self.due = now + _ENVIRONMENT_EVERY_S
            try:
                self.last = self._read(torch, capabilities)
            except Exception:
                self.last = None
        if self.last is None:
            return None
        # The probe's own counters: current on every tick.
        doc = dict(self.last)
        doc["autocast"] = _autocast_doc(now)
        doc["grad_scaler"] = _grad_scaler_doc()
        return doc

    def _static(self, torch):
        # Fixed for the process's life: read once.
        if self.static is None:
            c = getattr(torch, "_C", None)
            version = sys.modules.get("torch.version")
            cudnn = getattr(c, "_cudnn", None)
            runtime = _call(cudnn, "getRuntimeVersion")
            if runtime is None:
                runtime = _call(cudnn, "getVersionInt")
            arch = _call(c, "_cuda_getArchFlags")
            self.static = {
                "torch_version": _label(getattr(torch, "__version__", None)),
                "cuda_version": _label(getattr(version, "cuda", None)),
                "hip_version": _label(getattr(version, "hip", None)),
                "cudnn_version": _version_text(runtime),
                "cudnn_compiled_version": _version_text(_call(cudnn, "getCompileVersion")),
                "arch_flags": _text(arch)[:512] if isinstance(arch, str) else None,
            }
        return dict(self.static)

    def _read(self, torch, capabilities):
        doc = self._static(torch)
        c = getattr(torch, "_C", None)
        getter = next((getattr(c, name) for name in _FP32_PRECISION_GETTERS if hasattr(c, name)), None)
        new_api = getter is not None
        matmul = _fp32_precision(getter, "matmul") if new_api else None
        conv = _fp32_precision(getter, "conv") if new_api else None
        doc.update({
            "fp32_precision_matmul": matmul,
            "fp32_precision_conv": conv,
            "matmul_tf32": (matmul == "tf32" if matmul else None) if new_api
            else _flag(_call(c, "_get_cublas_allow_tf32")),
            "cudnn_tf32": (conv == "tf32" if conv else None) if new_api
            else _flag(_call(c, "_get_cudnn_allow_tf32")),
            "float32_matmul_precision": None if new_api else _label(_call(c, "_get_float32_matmul_precision")),
            "cudnn_benchmark": _flag(_call(c, "_get_cudnn_benchmark")),
            "cudnn_deterministic": _flag(_call(c, "_get_cudnn_deterministic")),
        })
        doc["devices"] = [
            {"index": index,
             "capability": "%d.%d" % capability if capability else None,
             "arch_supported": _arch_supported(doc["arch_flags"], capability)}
            for index, capability in sorted(capabilities.items())[:_MAX_DEVICES]
        ]
        return doc


def _autocast_doc(now):
    entries, last, device, dtype = _autocast
    return {
        "hooked": _is_hooked(sys.modules.get(_AUTOCAST_MODULE), "autocast", "__enter__"),
        "entries": entries,
        "last_s_ago": None if last is None else round(max(now - last, 0.0), 3),
        "device_type": _label(device),
        "dtype": _label(dtype),
    }


def _grad_scaler_doc():
    scalers = list(_grad_scalers)
    hooked = any(_is_hooked(sys.modules.get(name), "GradScaler", "__init__") for name in _SCALER_MODULES)
    return {
        # Where the class was wrapped late, scalers made before are not
        # seen: none seen is then no figure.
        "count": len(scalers) if hooked and (scalers or _scalers_seen_from_import) else None,
        "enabled": any(getattr(s, "_enabled", False) is True for s in scalers) if scalers else None,
    }


# --------------------------------------------------------------------- probe


class _Probe(object):
    def __init__(self, interval, quick_start=False):
        self.interval = interval
        # Launched from PyTorch's lazy-init queue, CUDA is marked initialised
        # only after the queue has run: look again soon, for a little while.
        self.quick_until = time.monotonic() + _QUICK_START_S if quick_start else 0.0
        # Set when an OutOfMemoryError escaped: the file is the post-mortem.
        self.keep_at_exit = False
        self.pid = os.getpid()
        self.start_ticks = _read_start_ticks()
        self.pid_ns = _read_pid_namespace()
        self.name = "%d-%d.json" % (self.pid, self.start_ticks)
        self.errors = 0
        self.seq = 0
        self._stop_event = threading.Event()
        self._write_lock = threading.Lock()
        self._closed = False
        self._written_path = None
        self._thread = None
        self._torch = _TorchReader()
        self._jax = _JaxReader()
        self._requests = _Requests(self)
        self._last_events = {}

    # -- lifecycle

    def launch(self):
        thread = threading.Thread(target=self._run, name="gpuscope-probe", daemon=True)
        self._thread = thread
        thread.start()

    def running(self):
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._closed

    def join(self, timeout):
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self, remove=True):
        self._stop_event.set()
        # Taken so that a write in flight cannot recreate the file just
        # removed; bounded so exit never hangs on a stuck writer.
        acquired = self._write_lock.acquire(True, 2.0)
        try:
            self._closed = True
            path, self._written_path = self._written_path, None
            if remove and path is not None and os.getpid() == self.pid:
                _unlink(path)
        finally:
            if acquired:
                self._write_lock.release()

    # -- one sample

    def cycle(self):
        """Samples once and publishes; returns (wrote, rose, failed)."""
        errors_before = self.errors
        try:
            body = self._collect()
        except Exception:
            self.errors += 1
            body = None
        if body is None:
            return False, False, self.errors > errors_before
        events = _events_of(body["devices"])
        last = self._last_events
        rose = any(_pair_rose(last.get(index), pair) for index, pair in events.items())
        try:
            wrote = self._publish(body)
        except Exception:
            self.errors += 1
            return False, rose, True
        if wrote:
            self._last_events = events
        return wrote, rose, False

    def _collect(self):
        modules = sys.modules
        torch = modules.get("torch")
        if torch is not None and not _mid_import(torch):
            body = self._torch.sample(torch, self)
            if body is not None:
                return body
        jax = modules.get("jax")
        if jax is not None and not _mid_import(jax):
            return self._jax.sample(jax, modules.get("jax._src.xla_bridge"), self)
        return None

    def _publish(self, body):
        plan = _directory_plan()
        with self._write_lock:
            if self._closed:
                return False
            directory = _prepare_directory(plan)
            doc = {
                "format": FORMAT_NAME,
                "version": FORMAT_VERSION,
                "pid": self.pid,
                "start_ticks": self.start_ticks,
                "pid_ns": self.pid_ns,
                "seq": self.seq + 1,
                "written_unix_ms": int(time.time() * 1000),
                "interval_s": self.interval,
                "errors": self.errors,
                "framework": body["framework"],
                "framework_version": body["framework_version"],
                "backend": body["backend"],
                "alloc_conf": body["alloc_conf"],
                "alloc_conf_source": body["alloc_conf_source"],
                "alloc_conf_var": body["alloc_conf_var"],
                "alloc_conf_env": body["alloc_conf_env"],
                "expandable_segments": body["expandable_segments"],
                "cuda_visible_devices": _env_raw("CUDA_VISIBLE_DEVICES"),
                "cuda_device_order": _env_raw("CUDA_DEVICE_ORDER"),
                "oom_events": body["oom_events"],
                "last_oom": body["last_oom"],
                "job": _job_key(),
                "rank": _env_int("RANK"),
                "local_rank": _env_int("LOCAL_RANK"),
                "world_size": _env_int("WORLD_SIZE"),
                "pinned_host": body["pinned_host"],
                "devices": body["devices"],
                "input": body.get("input"),
                "environment": body.get("environment"),
            }
            payload = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("ascii")
            if len(payload) > _MAX_FILE_BYTES and (doc["input"] or doc["environment"]):
                # Only with the most devices and post-mortems at once: the
                # allocator's figures come first.
                doc["input"] = doc["environment"] = None
                payload = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("ascii")
            if len(payload) > _MAX_FILE_BYTES:
                raise ValueError("probe document too large")
            _write_atomic(directory, self.name, payload)
            self.seq += 1
            path = os.path.join(directory, self.name)
            previous, self._written_path = self._written_path, path
            if previous is not None and previous != path:
                _unlink(previous)
            return True

    # -- the thread

    def _run(self):
        try:
            self._loop()
        except BaseException:
            # Nothing may reach the host program, not even during interpreter
            # teardown when module globals are already gone.
            pass

    def _loop(self):
        monotonic = time.monotonic
        stop_event = self._stop_event
        interval = self.interval
        burst_gap = min(interval, _BURST_GAP)
        peek = interval > _PEEK_GAP
        max_failures = _MAX_CONSECUTIVE_FAILURES
        failures = 0
        burst = 0
        due = monotonic()
        force = True
        while not stop_event.is_set():
            now = monotonic()
            if force or now >= due:
                force = False
                wrote, rose, failed = self.cycle()
                failures = failures + 1 if failed else 0
                if failures >= max_failures:
                    self.close(remove=True)
                    return
                if rose:
                    burst = _BURST_CYCLES
                elif burst:
                    burst -= 1
                due = now + (burst_gap if burst else interval)
                if not wrote and now < self.quick_until and self.seq == 0:
                    due = now + min(interval, _QUICK_START_GAP)
            elif self._torch.events_rose(self._last_events):
                force = True
                continue
            self._requests.poll(monotonic())
            delay = due - monotonic()
            if peek and self._torch.watch is not None:
                delay = min(delay, _PEEK_GAP)
            if delay > 0:
                stop_event.wait(delay)


# ------------------------------------------------------------------ requests

# At most one request read a second, whatever gpuscope writes.
_REQUEST_GAP = 1.0
_MAX_REQUEST_BYTES = 4096
_MAX_HISTORY_S = 600.0
_HISTORY_ENTRIES = 100000
# "memviz": PyTorch's own snapshot for its memory viewer; "segments": the
# live segment map the dashboard draws while it is open.
_REQUEST_KINDS = ("memviz", "segments")


class _Requests(object):
    """What gpuscope asks of this process's probe: `<pid>-<ticks>.request`
    beside the published file, in the same private directory (so nobody
    else can write it; it must be a regular file of this user's, or it is
    ignored). The answer is `<pid>-<ticks>.memviz.json`, and the snapshot
    PyTorch's memory viewer opens, `<pid>-<ticks>.memviz.pickle`, both in
    that directory. Nothing is taken unless asked."""

    def __init__(self, probe):
        self.probe = probe
        self.checked = 0.0
        self.history_until = None
        self.history_id = None

    def _base(self):
        path = self.probe._written_path
        if path is None:
            return None, None
        directory, name = os.path.split(path)
        return directory, name[: -len(".json")]

    def poll(self, now):
        try:
            if self.history_until is not None and now >= self.history_until:
                self.history_until = None
                self._dump(self.history_id, stop_history=True)
            if now - self.checked < _REQUEST_GAP:
                return
            self.checked = now
            request = self._take()
            if request is not None:
                self._serve(request, now)
        except Exception:
            self.probe.errors += 1

    def _take(self):
        directory, stem = self._base()
        if directory is None:
            return None
        path = os.path.join(directory, stem + ".request")
        try:
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > _MAX_REQUEST_BYTES:
                return None
            raw = os.read(fd, _MAX_REQUEST_BYTES + 1)
        finally:
            os.close(fd)
        # Consumed; only a request of this user's is removed.
        _unlink(path)
        try:
            request = json.loads(raw.decode("utf-8"))
        except ValueError:
            return None
        return request if isinstance(request, dict) and request.get("kind") in _REQUEST_KINDS else None

    def _serve(self, request, now):
        ident = _text(request.get("id"))
        if request.get("kind") == "segments":
            self._serve_segments(ident, request)
            return
        memory = getattr(_torch_cuda(), "memory", None)
        if getattr(memory, "_dump_snapshot", None) is None:
            self._answer(ident, "error", error="this PyTorch has no torch.cuda.memory._dump_snapshot (2.1+)")
            return
        history = request.get("history_s")
        if history is None:
            self._dump(ident, stop_history=False)
            return
        try:
            seconds = min(max(float(history), 0.0), _MAX_HISTORY_S)
        except (TypeError, ValueError):
            self._answer(ident, "error", error="history_s is not a number of seconds")
            return
        if not _record_history(memory, True):
            self._answer(ident, "error", error="this PyTorch cannot record allocation history")
            return
        self.history_until = now + seconds
        self.history_id = ident
        self._answer(ident, "recording", until_unix_ms=int((time.time() + seconds) * 1000))

    def _serve_segments(self, ident, request):
        directory, stem = self._base()
        if directory is None:
            return
        device = _count(request.get("device"))
        doc = {"format": "gpuscope-segments", "version": 1, "id": ident, "state": "done",
               "error": None, "device": device, "taken_unix_ms": int(time.time() * 1000)}
        if self.probe._torch.backend == "cudaMallocAsync":
            doc.update(state="error", error="cudaMallocAsync keeps no segments of its own to show")
        else:
            segment_map = _segment_map(device) if device is not None else None
            if segment_map is None:
                doc.update(state="error", error="torch.cuda.memory_snapshot() failed or the device is not known")
            else:
                doc.update(segment_map)
        payload = json.dumps(doc, separators=(",", ":")).encode("ascii")
        _write_atomic(directory, stem + ".segments.json", payload)

    def _dump(self, ident, stop_history):
        directory, stem = self._base()
        memory = getattr(_torch_cuda(), "memory", None)
        if directory is None or memory is None:
            return
        final = stem + ".memviz.pickle"
        temp = os.path.join(directory, ".%s.memviz.%s.tmp" % (stem, os.urandom(8).hex()))
        try:
            memory._dump_snapshot(temp)
            os.replace(temp, os.path.join(directory, final))
        except Exception as exc:
            _unlink(temp)
            self._answer(ident, "error", error=_text("_dump_snapshot failed: %s" % exc))
            return
        finally:
            if stop_history:
                _record_history(memory, False)
        self._answer(ident, "done", file=final)

    def _answer(self, ident, state, error=None, file=None, until_unix_ms=None):
        directory, stem = self._base()
        if directory is None:
            return
        doc = {"format": "gpuscope-memviz", "version": 1, "id": ident, "state": state,
               "file": file, "error": error, "until_unix_ms": until_unix_ms}
        payload = json.dumps(doc, separators=(",", ":")).encode("ascii")
        _write_atomic(directory, stem + ".memviz.json", payload)


def _record_history(memory, on):
    """torch.cuda.memory._record_memory_history: 2.1+ takes
    enabled="all"/None and max_entries; 2.0 took a bool."""
    record = getattr(memory, "_record_memory_history", None)
    if record is None:
        return False
    try:
        if on:
            record(enabled="all", max_entries=_HISTORY_ENTRIES)
        else:
            record(enabled=None)
        return True
    except TypeError:
        record(on)
        return True
    except Exception:
        return False


# ------------------------------------------------------- process boundaries


def _after_fork_in_child():
    # The parent's thread did not survive the fork and its file is not this
    # process's. The child stays armed: a rank forked before CUDA was
    # initialised (multiprocessing fork/forkserver, some launchers) starts
    # sampling when it initialises CUDA itself, through the lazy-init queue
    # it inherited or the import watcher. A DataLoader worker forked from a
    # CUDA process never can (PyTorch marks it a bad fork: is_initialized()
    # stays False and initialising raises), so it stays silent. Locks are
    # replaced in case the fork caught another thread holding one.
    global _probe, _lock, _oom_events, _oom_records, _loader_failures
    _probe = None
    _lock = threading.Lock()
    _oom_events = 0
    _oom_records = []
    # The parent's loaders and failures are the parent's; a worker forked
    # from it runs none of their iterators.
    _iterators.clear()
    _iterator_refs.clear()
    _loaders.clear()
    _loader_failures = []


def _at_exit():
    try:
        probe = _probe
        if probe is not None and probe.pid == os.getpid():
            probe.close(remove=not probe.keep_at_exit)
    except BaseException:
        pass


def _register_atexit():
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_at_exit)
        _atexit_registered = True


if hasattr(os, "register_at_fork"):
    try:
        os.register_at_fork(after_in_child=_after_fork_in_child)
    except Exception:
        pass
