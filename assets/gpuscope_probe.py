"""gpuscope allocator probe: publishes the caching allocator's counters of the
process it runs in, for gpuscope to join with NVML's per-process figures.

    import gpuscope_probe
    gpuscope_probe.start()      # idempotent, returns at once, one daemon thread
    gpuscope_probe.stop()       # stops it and removes the published file

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
               /proc/self/stat (0 off Linux); written to
               .<pid>-<start_ticks>.<hex>.tmp (O_EXCL|O_NOFOLLOW, 0600) and
               renamed over it, so a reader never sees a partial file.
    content    one JSON object, format "gpuscope-probe", version 1; every
               counter the framework does not report is null, never 0.

What it touches (never anything that initialises CUDA, synchronises, or
changes allocator state): it never imports torch or jax; it acts only once
`torch.cuda.is_initialized()` is true (or JAX's backends exist), and then
calls only memory_stats_as_nested_dict(i) with an explicit index,
device_count(), get_allocator_backend(), get_device_properties(i) (once per
device), host_memory_stats(), and for JAX local_devices()/memory_stats().
No exception ever reaches the host program.
"""

import atexit
import json
import os
import re
import stat
import sys
import threading
import time

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
_MAX_CONSECUTIVE_FAILURES = 50
# Bounds keep every file far below the 64 KiB the reader accepts.
_MAX_DEVICES = 64
_MAX_TEXT = 1024
_MAX_FILE_BYTES = 60 * 1024
# A call that keeps failing is given up rather than counted every cycle.
_CALL_FAILURE_BUDGET = 3

_ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
_GPU_PLATFORMS = ("gpu", "cuda", "rocm")
_DISABLED_VALUES = ("0", "false", "no", "off")

_SURROGATES = re.compile("[\ud800-\udfff]")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_lock = threading.Lock()
_probe = None
_in_forked_child = False
_atexit_registered = False


# ---------------------------------------------------------------- public API


def start(interval=None):
    """Starts the probe thread unless it already runs; never raises.

    Returns True when a probe thread is running after the call.
    """
    global _probe
    try:
        if _in_forked_child or _disabled():
            return False
        with _lock:
            current = _probe
            if current is not None and current.running():
                return True
            probe = _Probe(_resolve_interval(interval))
            probe.launch()
            _probe = probe
            _register_atexit()
        return True
    except Exception:
        return False


def stop():
    """Stops the probe thread and removes its file; never raises."""
    global _probe
    try:
        if _in_forked_child:
            return
        with _lock:
            probe, _probe = _probe, None
        if probe is not None:
            probe.close(remove=True)
            probe.join(1.0)
    except Exception:
        pass


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


def _alloc_conf():
    for var in _ALLOC_CONF_VARS:
        raw = os.environ.get(var)
        if raw is not None and raw.strip():
            return _text(raw), var
    return None, None


def _expandable_segments(conf):
    """Mirrors PyTorch's tokenizer: whitespace ignored, last setting wins."""
    if not conf:
        return False
    enabled = False
    for item in "".join(conf.split()).split(","):
        key, sep, value = item.partition(":")
        if sep and key.lower() == "expandable_segments":
            enabled = value.lower() == "true"
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


class _TorchReader(object):
    def __init__(self):
        self.uuids = {}
        self.backend = None
        self.backend_failures = 0
        self.host_failures = 0
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
        count = _count(cuda.device_count()) or 0
        devices = []
        for index in range(min(count, _MAX_DEVICES)):
            try:
                stats = cuda.memory_stats_as_nested_dict(index)
            except Exception:
                probe.errors += 1
                continue
            if not isinstance(stats, dict) or not stats or not _device_in_use(stats):
                continue
            devices.append(self._device(cuda, index, stats, probe))
        if not devices:
            self.watch = None
            return None
        backend = self._backend(cuda, probe)
        conf, conf_var = _alloc_conf()
        if backend == "cudaMallocAsync":
            self.watch = None
        else:
            self.watch = (cuda, [device["index"] for device in devices])
        return {
            "framework": "torch",
            "framework_version": _text(getattr(torch, "__version__", None)),
            "backend": backend,
            "alloc_conf": conf,
            "alloc_conf_var": conf_var,
            "expandable_segments": _expandable_segments(conf),
            "pinned_host": self._pinned_host(cuda, probe),
            "devices": devices,
        }

    def _device(self, cuda, index, stats, probe):
        return {
            "index": index,
            "uuid": self._uuid(cuda, index, probe),
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
            "largest_free_block": None,
            "bytes_limit": None,
        }

    def _uuid(self, cuda, index, probe):
        if index in self.uuids:
            return self.uuids[index]
        value = None
        try:
            raw = getattr(cuda.get_device_properties(index), "uuid", None)
            text = _text(raw)
            if text:
                text = text.strip()
                value = text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text
        except Exception:
            probe.errors += 1
        # Cached even when it failed: the properties never change, and a
        # call that failed once is not worth an error every cycle.
        self.uuids[index] = value
        return value

    def _backend(self, cuda, probe):
        if self.backend is None and self.backend_failures < _CALL_FAILURE_BUDGET:
            getter = getattr(cuda, "get_allocator_backend", None)
            if getter is not None:
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
            "alloc_conf_var": None,
            "expandable_segments": False,
            "pinned_host": None,
            "devices": devices,
        }


def _jax_device(index, stats):
    return {
        "index": index,
        "uuid": None,
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


# --------------------------------------------------------------------- probe


class _Probe(object):
    def __init__(self, interval):
        self.interval = interval
        self.pid = os.getpid()
        self.start_ticks = _read_start_ticks()
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
                "seq": self.seq + 1,
                "written_unix_ms": int(time.time() * 1000),
                "interval_s": self.interval,
                "errors": self.errors,
                "framework": body["framework"],
                "framework_version": body["framework_version"],
                "backend": body["backend"],
                "alloc_conf": body["alloc_conf"],
                "alloc_conf_var": body["alloc_conf_var"],
                "expandable_segments": body["expandable_segments"],
                "rank": _env_int("RANK"),
                "local_rank": _env_int("LOCAL_RANK"),
                "world_size": _env_int("WORLD_SIZE"),
                "pinned_host": body["pinned_host"],
                "devices": body["devices"],
            }
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
            elif self._torch.events_rose(self._last_events):
                force = True
                continue
            delay = due - monotonic()
            if peek and self._torch.watch is not None:
                delay = min(delay, _PEEK_GAP)
            if delay > 0:
                stop_event.wait(delay)


# ------------------------------------------------------- process boundaries


def _after_fork_in_child():
    # DataLoader workers and other forked children share the parent's CUDA
    # state but are not the process gpuscope joins with: they stay silent.
    # Locks are replaced in case the fork caught another thread holding one.
    global _in_forked_child, _probe, _lock
    _in_forked_child = True
    _probe = None
    _lock = threading.Lock()


def _at_exit():
    try:
        probe = _probe
        if probe is not None and probe.pid == os.getpid():
            probe.close(remove=True)
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
