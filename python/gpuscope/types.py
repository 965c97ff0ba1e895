"""The snapshot's objects as typed dataclasses.

Each class has a field for every property its object has in
assets/snapshot.schema.json (tests/python/test_api.py checks both ways, so
they cannot drift). A figure gpuscope cannot read is None, never 0. Keys a
newer gpuscope adds land in `extra` rather than failing an older package.
Nested objects the API works with are classes; the rest stay plain dicts,
exactly as the JSON has them.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = [
    "Alert",
    "DeviceAllocator",
    "Gpu",
    "GpuAllocator",
    "GpuMemory",
    "MigDevice",
    "MigMemory",
    "Pick",
    "Process",
    "ProcessAllocator",
    "ProcessGpu",
    "Snapshot",
    "Utilization",
]


def _build(cls, data):
    """cls from one JSON object: nested classes by `_NESTED`, unknown keys kept."""
    if data is None:
        return None
    nested = getattr(cls, "_NESTED", {})
    known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    kwargs = {}
    for name in known:
        value = data.get(name)
        kind = nested.get(name)
        if kind is not None and value is not None:
            value = [_build(kind, v) for v in value] if isinstance(value, list) else _build(kind, value)
        kwargs[name] = value
    kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
    return cls(**kwargs)


@dataclass(frozen=True)
class GpuMemory:
    """Bytes, from NVML; `driver_reserved` is what the driver keeps back
    (not PyTorch's "reserved")."""

    total: Optional[int] = None
    used: Optional[int] = None
    free: Optional[int] = None
    driver_reserved: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Utilization:
    """Percent over NVML's last sample period."""

    gpu: Optional[int] = None
    memory: Optional[int] = None
    encoder: Optional[int] = None
    decoder: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuAllocator:
    """The allocator probes' totals on one GPU, bytes.

    cached = reserved - allocated: held by the processes' caching
    allocators, free inside them, reusable by those processes only."""

    probed_processes: int = 0
    allocated: Optional[int] = None
    reserved: Optional[int] = None
    cached: Optional[int] = None
    inactive_split: Optional[int] = None
    overhead: Optional[int] = None
    unprobed: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MigMemory:
    total: Optional[int] = None
    used: Optional[int] = None
    free: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MigDevice:
    index: int
    uuid: Optional[str] = None
    name: Optional[str] = None
    profile: Optional[str] = None
    gpu_instance_id: Optional[int] = None
    compute_instance_id: Optional[int] = None
    memory: Optional[MigMemory] = None
    activity: Optional[Dict[str, Any]] = None
    activity_unavailable: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    _NESTED = {"memory": MigMemory}


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: Optional[str] = None
    name: Optional[str] = None
    pci_bus_id: Optional[str] = None
    state: str = "ok"
    error: Optional[str] = None
    memory: GpuMemory = field(default_factory=GpuMemory)
    utilization: Utilization = field(default_factory=Utilization)
    temperature_c: Optional[int] = None
    fan_percent: Optional[int] = None
    power_draw_w: Optional[float] = None
    power_limit_w: Optional[float] = None
    clocks: Optional[Dict[str, Any]] = None
    pcie: Optional[Dict[str, Any]] = None
    performance_state: Optional[str] = None
    throttle_reasons: Optional[List[str]] = None
    mig_mode: Optional[Dict[str, Any]] = None
    mig_devices: List[MigDevice] = field(default_factory=list)
    allocator: Optional[GpuAllocator] = None
    serial: Optional[str] = None
    persistence_mode: Optional[bool] = None
    compute_mode: Optional[str] = None
    power_management_limit_w: Optional[float] = None
    max_clocks: Optional[Dict[str, Any]] = None
    ecc: Optional[Dict[str, Any]] = None
    bar1_memory: Optional[Dict[str, Any]] = None
    process_utilization: Optional[List[Dict[str, Any]]] = None
    nvlink: Optional[Dict[str, Any]] = None
    remapped_rows: Optional[Dict[str, Any]] = None
    accounting: Optional[Dict[str, Any]] = None
    activity: Optional[Dict[str, Any]] = None
    activity_unavailable: Optional[str] = None
    pcie_link: Optional[Dict[str, Any]] = None
    numa_node: Optional[int] = None
    driver_events: List[Dict[str, Any]] = field(default_factory=list)
    xid_counts: List[Dict[str, Any]] = field(default_factory=list)
    recovery_action: Optional[str] = None
    nvlink_errors: Optional[Dict[str, Any]] = None
    health: Optional[Dict[str, Any]] = None
    unified_memory: Optional[bool] = None
    energy_mj: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    _NESTED = {
        "memory": GpuMemory,
        "utilization": Utilization,
        "mig_devices": MigDevice,
        "allocator": GpuAllocator,
    }


@dataclass(frozen=True)
class ProcessGpu:
    """One GPU a process holds."""

    index: int
    type: str = "compute"
    used_memory: Optional[int] = None
    mig_device: Optional[int] = None
    mig_uuid: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceAllocator:
    """One device as one process's allocator sees it, bytes (PyTorch's
    `memory_stats()` names: allocated = `allocated_bytes.all.current`)."""

    gpu: Optional[int] = None
    ordinal: Optional[int] = None
    mig_device: Optional[int] = None
    mig_uuid: Optional[str] = None
    gpu_match: Optional[str] = None
    unmatched_reason: Optional[str] = None
    allocated: Optional[int] = None
    allocated_peak: Optional[int] = None
    reserved: Optional[int] = None
    reserved_peak: Optional[int] = None
    active: Optional[int] = None
    inactive_split: Optional[int] = None
    requested: Optional[int] = None
    cached: Optional[int] = None
    overhead: Optional[int] = None
    private_pools: Optional[int] = None
    releasable: Optional[int] = None
    segments: Optional[int] = None
    alloc_retries: Optional[int] = None
    ooms: Optional[int] = None
    fragmentation: Optional[float] = None
    largest_free_block: Optional[int] = None
    bytes_limit: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessAllocator:
    """What a process's allocator probe reports."""

    framework: Optional[str] = None
    framework_version: Optional[str] = None
    backend: Optional[str] = None
    alloc_conf: Optional[str] = None
    alloc_conf_var: Optional[str] = None
    alloc_conf_source: Optional[str] = None
    alloc_conf_env: Optional[Dict[str, Any]] = None
    expandable_segments: Optional[bool] = None
    cuda_visible_devices: Optional[str] = None
    cuda_device_order: Optional[str] = None
    oom_events: Optional[int] = None
    last_oom: List[Dict[str, Any]] = field(default_factory=list)
    job: Optional[str] = None
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    pinned_host: Optional[int] = None
    pinned_host_peak: Optional[int] = None
    state: Optional[str] = None
    age_ms: Optional[int] = None
    devices: List[DeviceAllocator] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    _NESTED = {"devices": DeviceAllocator}


@dataclass(frozen=True)
class Process:
    pid: int
    gpus: List[ProcessGpu] = field(default_factory=list)
    gpu_memory_total: Optional[int] = None
    name: Optional[str] = None
    user: Optional[str] = None
    command: Optional[str] = None
    start_time: Optional[str] = None
    start_time_unix_ms: Optional[int] = None
    parent_pid: Optional[int] = None
    parent_name: Optional[str] = None
    cpu_percent: Optional[float] = None
    host_memory: Optional[int] = None
    allocator: Optional[ProcessAllocator] = None
    input: Optional[Dict[str, Any]] = None
    environment: Optional[Dict[str, Any]] = None
    workload: Optional[Dict[str, Any]] = None
    other_namespace: bool = False
    host_input: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    _NESTED = {"gpus": ProcessGpu, "allocator": ProcessAllocator}


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: str
    gpu: Optional[int] = None
    pid: Optional[int] = None
    since: Optional[str] = None
    since_unix_ms: Optional[int] = None
    value: Optional[float] = None
    threshold: Optional[float] = None
    message: str = ""
    hint: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    """One tick of gpuscope: `gpuscope --json`, `/snapshot`, a line of `--watch`."""

    schema_version: int
    time: Optional[str] = None
    time_unix_ms: Optional[int] = None
    interval_ms: Optional[int] = None
    collection_ms: Optional[float] = None
    simulated: bool = False
    host: Optional[Dict[str, Any]] = None
    driver: Optional[Dict[str, Any]] = None
    gpus: List[Gpu] = field(default_factory=list)
    processes: List[Process] = field(default_factory=list)
    sources: Optional[Dict[str, Any]] = None
    alerts: List[Alert] = field(default_factory=list)
    events: List[Dict[str, Any]] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    _NESTED = {"gpus": Gpu, "processes": Process, "alerts": Alert}

    @classmethod
    def from_json(cls, data):
        """A Snapshot from the parsed JSON object."""
        return _build(cls, data)

    def process(self, pid):
        """The process with this PID, or None."""
        return next((p for p in self.processes if p.pid == pid), None)

    def figures(self, pid=None):
        """Flat {name: number} for a metrics logger: each GPU's memory and
        utilisation and its probes' totals, and, with `pid` (say
        os.getpid()), that process's allocator figures per GPU. A figure
        gpuscope could not read is left out, never logged as 0."""
        out = {}

        def put(key, value):
            if value is not None:
                out[key] = value

        for g in self.gpus:
            at = "gpu%d/" % g.index
            put(at + "memory_used_bytes", g.memory.used)
            put(at + "memory_free_bytes", g.memory.free)
            put(at + "utilization_percent", g.utilization.gpu)
            if g.allocator is not None:
                for name in ("allocated", "reserved", "cached", "inactive_split", "overhead"):
                    put(at + "%s_bytes" % name, getattr(g.allocator, name))
        proc = self.process(pid) if pid is not None else None
        if proc is not None and proc.allocator is not None:
            for d in proc.allocator.devices:
                if d.gpu is None:
                    continue
                at = "gpu%d/process/" % d.gpu
                for name in ("allocated", "reserved", "cached", "inactive_split", "allocated_peak"):
                    put(at + "%s_bytes" % name, getattr(d, name))
                put(at + "fragmentation", d.fragmentation)
                put(at + "alloc_retries", d.alloc_retries)
        return out


@dataclass(frozen=True)
class Pick:
    """One device `select` chose (`gpuscope select --format json`)."""

    index: int
    mig_device: Optional[int] = None
    uuid: Optional[str] = None
    name: Optional[str] = None
    memory_free: int = 0
    cached: Optional[int] = None
    releasable: Optional[int] = None
    counted_free: int = 0
    utilization: Optional[int] = None
    processes: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data):
        return _build(cls, data)
