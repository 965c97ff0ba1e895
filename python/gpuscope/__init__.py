"""gpuscope from Python: snapshots, a stream of them, and a free-GPU picker.

    import gpuscope
    snap = gpuscope.snapshot()                    # this machine, now
    print(snap.gpus[0].memory.free, snap.figures(pid=os.getpid()))
    for snap in gpuscope.watch(interval=5): ...   # one every 5 s
    os.environ["CUDA_VISIBLE_DEVICES"] = gpuscope.select(count=2, min_free="20GiB").cuda_visible_devices

The wheel carries the compiled `gpuscope` program as a script (pip puts it
in the environment's bin/) and the allocator probe as the module
`gpuscope_probe`; this package runs that program (`--json`, `--json
--watch`, `select`) or reads a node's `gpuscope serve` over HTTP, so it
needs nothing but the standard library. Every failure, a bad argument
included, is a `gpuscope.Error` naming the problem: the program's own
message, or the argument (`max_util`, `url`, ...) and what it takes.
"""

import http.client
import json
import math
import numbers
import os
import re
import ssl
import subprocess
import sys
import sysconfig
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from gpuscope.types import (
    Alert,
    DeviceAllocator,
    Gpu,
    GpuAllocator,
    GpuMemory,
    MigDevice,
    MigMemory,
    Pick,
    Process,
    ProcessAllocator,
    ProcessGpu,
    Snapshot,
    Utilization,
)

__all__ = [
    "Alert",
    "DeviceAllocator",
    "Error",
    "Gpu",
    "GpuAllocator",
    "GpuMemory",
    "MigDevice",
    "MigMemory",
    "NotEnoughGpus",
    "Pick",
    "Process",
    "ProcessAllocator",
    "ProcessGpu",
    "Selection",
    "Snapshot",
    "Utilization",
    "find_gpuscope_bin",
    "select",
    "snapshot",
    "watch",
]

# Where a checkout or a test names the program to run instead of the
# wheel's own.
BIN_ENV = "GPUSCOPE_BIN"


def _candidates():
    name = "gpuscope" + (sysconfig.get_config_var("EXE") or "")
    # The scheme pip installed into: the environment's own, a user install,
    # or a `pip install --target DIR` layout (DIR/bin beside the package).
    schemes = [sysconfig.get_default_scheme()] if hasattr(sysconfig, "get_default_scheme") else []
    schemes.append("posix_user" if os.name == "posix" else "nt_user")
    for scheme in schemes:
        try:
            yield os.path.join(sysconfig.get_path("scripts", scheme), name)
        except KeyError:
            continue
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    yield os.path.join(here, "bin", name)
    yield os.path.join(os.path.dirname(sys.executable), name)


def find_gpuscope_bin():
    """The path of the gpuscope program this wheel installed ($GPUSCOPE_BIN first)."""
    override = os.environ.get(BIN_ENV)
    if override:
        return override
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("the gpuscope program is not where pip installs it; reinstall the wheel")


class Error(Exception):
    """gpuscope failed: `message` is what it said, `status` its exit status
    (None where it did not run or the failure was not its own)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = status


class NotEnoughGpus(Error):
    """`select` found fewer devices than asked for; the message says why
    each other device does not fit."""


def _program():
    try:
        return find_gpuscope_bin()
    except FileNotFoundError as err:
        raise Error(str(err)) from None


# Argument checks: each bad value is a gpuscope.Error naming the Python
# argument and what it takes, before any program runs.


def _whole(name, value, low, high, unit, also=""):
    """`value` as an int from low to high (None: no limit): an int, or a
    float with nothing after the point (gpuscope's flags take whole
    numbers; 95.5 is refused rather than cut to 95)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if isinstance(value, numbers.Integral) or (math.isfinite(value) and float(value).is_integer()):
            number = int(value)
            if low <= number and (high is None or number <= high):
                return number
    span = "%d or more" % low if high is None else "from %d to %d" % (low, high)
    raise Error("%s must be a whole number of %s, %s%s, not %r" % (name, unit, span, also, value))


def _seconds(name, value):
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    raise Error("%s must be a number of seconds above 0, not %r" % (name, value))


def _path(name, value):
    if value is None:
        return None
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.fspath(value)
    raise Error("%s must be a path, not %r" % (name, value))


def _gpus(gpus):
    """--gpus's value: "0,2", 0, or a list of indices and UUID prefixes."""
    if gpus is None or isinstance(gpus, str):
        return gpus
    items = [gpus] if isinstance(gpus, numbers.Integral) else gpus
    try:
        items = list(items)
    except TypeError:
        items = None
    if items is None or isinstance(gpus, bytes) or not all(
            (isinstance(g, numbers.Integral) and not isinstance(g, bool) and g >= 0) or isinstance(g, str)
            for g in items):
        raise Error("gpus must be a list of indices and UUID prefixes (or a string \"0,2\"), not %r" % (gpus,))
    return ",".join(str(g) for g in items)


def _interval(interval):
    """A number of seconds, or a duration as gpuscope takes it ("500ms")."""
    if isinstance(interval, str):
        return interval
    if isinstance(interval, numbers.Real) and not isinstance(interval, bool) and math.isfinite(interval) \
            and interval > 0:
        return "%dms" % int(round(float(interval) * 1000))
    raise Error("interval must be a number of seconds above 0 or a duration such as \"500ms\", not %r" % (interval,))


def _min_free(value):
    if isinstance(value, str):
        return value
    return str(_whole("min_free", value, 0, None, "bytes", ', or a size such as "20GiB"'))


def _common(demo, gpus, extra=()):
    args = []
    if demo:
        args.append("--demo")
    gpus = _gpus(gpus)
    if gpus is not None:
        args.append("--gpus=" + gpus)
    return args + list(extra)


# clap's way of naming a flag in its errors: '--max-util <PERCENT>'.
_CLAP_FLAG = re.compile(r"'(--[a-z][a-z-]*)(?: <[A-Z_]+>)?'")


def _said(stderr, status, names=None):
    """The program's own message, without its `gpuscope: ` prefix; for an
    argument the command line refused (clap's `error: ...`), the first
    paragraph without `error: ` and the tip, usage and `--help` lines
    after it, which mean nothing from Python, and each flag named as the
    Python argument (`names`: flag -> argument) that set it."""
    names = dict(names or {}, **{"--gpus": "gpus"})
    text = stderr.decode("utf-8", "replace").strip()
    if text.startswith("error: "):
        text = text.split("\n\n")[0][len("error: "):]
        text = _CLAP_FLAG.sub(lambda m: names.get(m.group(1), m.group(0)), text)
    lines = []
    for line in text.splitlines():
        if line.startswith("gpuscope: "):
            line = line[len("gpuscope: "):]
        flag, colon, rest = line.partition(": ")
        if colon and flag in names:
            line = names[flag] + ": " + rest
        lines.append(line)
    return "\n".join(lines) or "gpuscope exited with status %d" % status


def _run(args, timeout):
    cmd = [_program()] + args
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except OSError as err:
        raise Error("cannot run %s: %s" % (cmd[0], err.strerror or err)) from None
    except subprocess.TimeoutExpired:
        raise Error("gpuscope did not finish within %s s" % timeout) from None
    return done


# What every gpuscope's snapshot has had since the first schema
# (assets/snapshot.schema.json's "required" then), and the types of those
# the package reads. Newer keys are checked only where present.
_REQUIRED = ("schema_version", "time", "time_unix_ms", "interval_ms", "collection_ms", "simulated", "host",
             "driver", "gpus", "processes", "sources")
_LISTS = ("gpus", "processes", "alerts", "events")


def _not_a_snapshot(data):
    """Why `data` (parsed JSON) is not a gpuscope snapshot, or None."""
    if not isinstance(data, dict):
        return "the JSON is %s, not an object" % ("null" if data is None else type(data).__name__)
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        return "the JSON object has no %s" % ", ".join('"%s"' % k for k in missing)
    if isinstance(data["schema_version"], bool) or not isinstance(data["schema_version"], int):
        return '"schema_version" is not a number'
    for key in _LISTS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            return '"%s" is not a list of objects' % key
    for gpu in data["gpus"]:
        if not isinstance(gpu.get("index"), int) or not all(isinstance(gpu.get(k), dict)
                                                             for k in ("memory", "utilization")):
            return "a GPU without its index, memory or utilization"
    if not all(isinstance(p.get("pid"), int) for p in data["processes"]):
        return "a process without its pid"
    return None


def _parse(text, origin):
    """A Snapshot from JSON text; `origin` completes "... did not answer
    with a gpuscope snapshot" in the error."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise Error("%s did not answer with a gpuscope snapshot: not JSON (%s)" % (origin, err)) from None
    why = _not_a_snapshot(data)
    if why is None:
        try:
            return Snapshot.from_json(data)
        except (ValueError, TypeError, AttributeError) as err:
            why = str(err)
    raise Error("%s did not answer with a gpuscope snapshot: %s" % (origin, why))


def snapshot(url=None, token_file=None, ca=None, activity=False, demo=False, gpus=None, timeout=30.0):
    """One snapshot.

    Without `url`: this machine's, from the bundled program's `--json`
    (`activity=True` adds the SM, tensor and DRAM activity counters, which
    cost the one-shot 0.1 s; `demo=True` simulated GPUs; `gpus` a list of
    indices or UUID prefixes). With `url` (http(s)://node:10983, or its
    /snapshot): a node's `gpuscope serve`, with its bearer token read from
    `token_file` and https:// verified against the CA certificates in `ca`
    (PEM), as `gpuscope fleet` takes them. `timeout`: seconds above 0.

    Raises gpuscope.Error for a bad argument (naming it), a program or a
    node that fails (with its message, `status` its exit or HTTP status),
    and an answer that is not a gpuscope snapshot."""
    timeout = _seconds("timeout", timeout)
    if url is not None:
        return _fetch(url, _path("token_file", token_file), _path("ca", ca), timeout)
    args = ["--json"] + _common(demo, gpus, ["--activity"] if activity else [])
    done = _run(args, timeout)
    if done.returncode != 0:
        raise Error(_said(done.stderr, done.returncode), done.returncode)
    return _parse(done.stdout, "gpuscope --json")


def _snapshot_url(url):
    """`url` as the /snapshot URL to ask, or an Error saying what is wrong with it."""
    if not isinstance(url, str) or not url.strip():
        raise Error("url must be a node's address, HOST:PORT or http(s)://HOST:PORT, not %r" % (url,))
    given = url = url.strip()
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # reading the port checks it
    except ValueError as err:
        raise Error("url %r is not a URL gpuscope can ask: %s" % (given, err)) from None
    if parts.scheme not in ("http", "https"):
        raise Error("url %r: gpuscope serve answers http:// or https://, not %s://" % (given, parts.scheme))
    if not parts.hostname:
        raise Error("url %r names no host" % given)
    path = parts.path.rstrip("/")
    if not path.endswith("/snapshot"):
        path += "/snapshot"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _fetch(url, token_file, ca, timeout):
    url = _snapshot_url(url)
    headers = {"Accept": "application/json"}
    if token_file is not None:
        try:
            with open(token_file) as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError) as err:
            why = getattr(err, "strerror", None) or err
            raise Error("reading the token file %s: %s" % (token_file, why)) from None
        if not token:
            raise Error("the token file %s is empty" % token_file)
        headers["Authorization"] = "Bearer " + token
    context = None
    if url.startswith("https://"):
        try:
            context = ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as err:
            raise Error("reading the CA certificates %s: %s" % (ca, err)) from None
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            body = response.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace").strip()
        # serve's bodies start with their status ("401: ..."): said once.
        detail = detail[len("%d: " % err.code):] if detail.startswith("%d: " % err.code) else detail
        raise Error("%s answered %d %s%s" % (url, err.code, err.reason, ": " + detail if detail else ""),
                    err.code) from None
    except urllib.error.URLError as err:
        raise Error("cannot reach %s: %s" % (url, err.reason)) from None
    except ValueError as err:
        # What urlsplit lets through and http.client refuses (a control
        # character, a token a header cannot carry).
        raise Error("asking %s: %s" % (url, err)) from None
    except (OSError, http.client.HTTPException) as err:
        raise Error("reading %s: %s" % (url, err or type(err).__name__)) from None
    return _parse(body, url)


def watch(interval=1.0, count=None, demo=False, gpus=None):
    """Snapshots as they come, one per `interval` (seconds above 0, or a
    duration such as "500ms"; 10ms at least), from `gpuscope --json
    --watch` (NDJSON); `count` (a whole number, 0 or more) stops after that
    many. Closing the generator (or leaving the loop that reads it) ends
    the program. A stream reads the activity counters by itself.

    A bad argument raises gpuscope.Error (naming it) here, before the
    program starts; the program's own failure, when the loop reaches it."""
    args = ["--json", "--watch", "--interval=" + _interval(interval)] + _common(demo, gpus)
    if count is not None:
        args.append("--count=%d" % _whole("count", count, 0, None, "snapshots"))
    return _stream(args)


def _stream(args):
    # stderr to a file: a pipe nobody reads could fill and stall the program.
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([_program()] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        except OSError as e:
            raise Error("cannot run gpuscope: %s" % (e.strerror or e)) from None
        try:
            for line in proc.stdout:
                if line.strip():
                    yield _parse(line, "gpuscope --json --watch")
            status = proc.wait()
            if status != 0:
                err.seek(0)
                raise Error(_said(err.read(), status, {"--interval": "interval", "--count": "count"}), status)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.stdout.close()


class Selection(list):
    """The devices `select` chose (a list of Pick, in the order CUDA will
    number them), with the value to put in CUDA_VISIBLE_DEVICES."""

    @property
    def cuda_visible_devices(self):
        """UUIDs (GPU-... or MIG-...): right whatever CUDA_DEVICE_ORDER says."""
        return ",".join(p.uuid if p.uuid else str(p.index) for p in self)

    @property
    def indices(self):
        """NVML's indices (PCI bus order; CUDA's own only with CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
        return [p.index for p in self]


def select(count=1, min_free=None, max_util=None, no_processes=False, count_cached_free=False, mig=False,
           demo=False, gpus=None, timeout=30.0):
    """The `count` freest devices that fit, from `gpuscope select`.

    count: 1 to 1024; min_free: bytes (int) or a size such as "20GiB";
    max_util: percent, a whole number from 0 to 100 (NVML reports whole
    percent; 95.5 is refused, not rounded); no_processes: only devices no
    process holds; count_cached_free: what probed processes' allocators
    could hand back with empty_cache() (their cache less the inactive
    split, which it cannot free) counts as free; mig: MIG devices
    instead of whole GPUs. Raises NotEnoughGpus (with the reason for each
    device left out) when fewer fit, and gpuscope.Error naming the
    argument for a bad one."""
    args = ["select", "--format", "json", "--count=%d" % _whole("count", count, 1, 1024, "devices")]
    if min_free is not None:
        args.append("--min-free=" + _min_free(min_free))
    if max_util is not None:
        args.append("--max-util=%d" % _whole("max_util", max_util, 0, 100, "percent"))
    for flag, on in (("--no-processes", no_processes), ("--count-cached-free", count_cached_free), ("--mig", mig)):
        if on:
            args.append(flag)
    done = _run(args + _common(demo, gpus), _seconds("timeout", timeout))
    if done.returncode == 1:
        raise NotEnoughGpus(_said(done.stderr, 1), 1)
    if done.returncode != 0:
        names = {"--count": "count", "--min-free": "min_free", "--max-util": "max_util"}
        raise Error(_said(done.stderr, done.returncode, names), done.returncode)
    try:
        return Selection(Pick.from_json(p) for p in json.loads(done.stdout))
    except (ValueError, TypeError, AttributeError) as err:
        raise Error("gpuscope select's output is not what this package reads: %s" % err) from None
