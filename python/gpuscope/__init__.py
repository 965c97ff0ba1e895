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
needs nothing but the standard library. Every failure is a
`gpuscope.Error` carrying the program's own message.
"""

import json
import os
import ssl
import subprocess
import sys
import sysconfig
import tempfile
import urllib.error
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


def _common(demo, gpus, extra=()):
    args = []
    if demo:
        args.append("--demo")
    if gpus is not None:
        args += ["--gpus", gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)]
    return args + list(extra)


def _said(stderr, status):
    """The program's own message, without its `gpuscope: ` prefix."""
    text = stderr.decode("utf-8", "replace").strip()
    lines = [line[len("gpuscope: "):] if line.startswith("gpuscope: ") else line for line in text.splitlines()]
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


def _parse(text, origin):
    try:
        return Snapshot.from_json(json.loads(text))
    except (ValueError, TypeError, AttributeError) as err:
        raise Error("%s is not a gpuscope snapshot: %s" % (origin, err)) from None


def _interval(interval):
    """A number of seconds, or a duration as gpuscope takes it ("500ms")."""
    if isinstance(interval, str):
        return interval
    ms = int(round(float(interval) * 1000))
    return "%dms" % ms


def snapshot(url=None, token_file=None, ca=None, activity=False, demo=False, gpus=None, timeout=30.0):
    """One snapshot.

    Without `url`: this machine's, from the bundled program's `--json`
    (`activity=True` adds the SM, tensor and DRAM activity counters, which
    cost the one-shot 0.1 s; `demo=True` simulated GPUs; `gpus` a list of
    indices or UUID prefixes). With `url` (http(s)://node:10983, or its
    /snapshot): a node's `gpuscope serve`, with its bearer token read from
    `token_file` and https:// verified against the CA certificates in `ca`
    (PEM), as `gpuscope fleet` takes them."""
    if url is not None:
        return _fetch(url, token_file, ca, timeout)
    args = ["--json"] + _common(demo, gpus, ["--activity"] if activity else [])
    done = _run(args, timeout)
    if done.returncode != 0:
        raise Error(_said(done.stderr, done.returncode), done.returncode)
    return _parse(done.stdout, "gpuscope --json's output")


def _fetch(url, token_file, ca, timeout):
    if "://" not in url:
        url = "http://" + url
    if not url.rstrip("/").endswith("/snapshot"):
        url = url.rstrip("/") + "/snapshot"
    headers = {"Accept": "application/json"}
    if token_file is not None:
        try:
            with open(token_file) as f:
                token = f.read().strip()
        except OSError as err:
            raise Error("reading the token file %s: %s" % (token_file, err.strerror or err)) from None
        if not token:
            raise Error("the token file %s is empty" % token_file)
        headers["Authorization"] = "Bearer " + token
    context = None
    if url.startswith("https://"):
        try:
            context = ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as err:
            raise Error("reading the CA certificates %s: %s" % (ca, err)) from None
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            body = response.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace").strip()
        raise Error("%s answered %d %s%s" % (url, err.code, err.reason, ": " + detail if detail else ""),
                    err.code) from None
    except urllib.error.URLError as err:
        raise Error("cannot reach %s: %s" % (url, err.reason)) from None
    except OSError as err:
        raise Error("reading %s: %s" % (url, err)) from None
    return _parse(body, url)


def watch(interval=1.0, count=None, demo=False, gpus=None):
    """Snapshots as they come, one per `interval` (seconds, or "500ms"),
    from `gpuscope --json --watch` (NDJSON); `count` stops after that many.
    Closing the generator (or leaving the loop that reads it) ends the
    program. A stream reads the activity counters by itself."""
    args = ["--json", "--watch", "--interval", _interval(interval)] + _common(demo, gpus)
    if count is not None:
        args += ["--count", str(int(count))]
    # stderr to a file: a pipe nobody reads could fill and stall the program.
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([_program()] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        except OSError as e:
            raise Error("cannot run gpuscope: %s" % (e.strerror or e)) from None
        try:
            for line in proc.stdout:
                if line.strip():
                    yield _parse(line, "a line of gpuscope --json --watch")
            status = proc.wait()
            if status != 0:
                err.seek(0)
                raise Error(_said(err.read(), status), status)
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

    min_free: bytes (int) or a size such as "20GiB"; max_util: percent;
    no_processes: only devices no process holds; count_cached_free: memory
    probed processes reserve but do not use (reserved - allocated) counts
    as free; mig: MIG devices instead of whole GPUs. Raises NotEnoughGpus
    (with the reason for each device left out) when fewer fit."""
    args = ["select", "--format", "json", "--count", str(int(count))]
    if min_free is not None:
        args += ["--min-free", str(min_free)]
    if max_util is not None:
        args += ["--max-util", str(int(max_util))]
    for flag, on in (("--no-processes", no_processes), ("--count-cached-free", count_cached_free), ("--mig", mig)):
        if on:
            args.append(flag)
    done = _run(args + _common(demo, gpus), timeout)
    if done.returncode == 1:
        raise NotEnoughGpus(_said(done.stderr, 1), 1)
    if done.returncode != 0:
        raise Error(_said(done.stderr, done.returncode), done.returncode)
    try:
        return Selection(Pick.from_json(p) for p in json.loads(done.stdout))
    except (ValueError, TypeError, AttributeError) as err:
        raise Error("gpuscope select's output is not what this package reads: %s" % err) from None
