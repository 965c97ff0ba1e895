//! The one model every sink reads: a `Snapshot` per collection tick.

mod alert;
mod allocator;
mod gpu;
mod health;
mod host;
mod host_input;
mod input;
mod process;
mod select;
mod snapshot;
mod time;
mod workload;

pub use alert::{Alert, AlertEvent, AlertKind, Change, Severity};
pub use allocator::{
    AllocConfEnv, DeviceAllocator, GpuAllocator, GpuMatch, OomPool, OomPostMortem, OomSegment, ProbeState,
    ProcessAllocator,
};
pub use gpu::{
    AccountedProcess, Accounting, Activity, ActivityUnavailable, Bar1Memory, Clocks, ComputeMode, Ecc, Gpu, GpuMemory,
    GpuState, MAX_DRIVER_EVENTS, MaxClocks, MigDevice, MigMemory, MigMode, NvLink, NvLinkState, Pcie, PcieLink,
    ProcessUtilization, RemappedRows, Utilization,
};
pub use health::{
    DriverEvent, DriverEventKind, EventsStatus, Health, HealthCode, HealthReason, HealthVerdict, MAX_XID_COUNTS,
    NvLinkErrors, RecoveryAction, XidAction, XidCount,
};
pub use host::{Host, NumaNode};
pub use host_input::{
    CgroupCpu, DataWorker, HostInput, MAX_WORKERS, PinThread, Placement, TaskFigures, TaskState, WorkerSource,
};
pub use input::{
    Autocast, DataLoaderStats, DeviceArch, FrameworkEnvironment, GradScalerUse, InputPipeline, LoaderFailure,
    LoaderFailureKind, LoaderSettings, SharedMemory,
};
pub use process::{Process, ProcessGpu, ProcessType};
pub use select::{DeviceIds, GpuSelector, PciAddress, SelectError, parse_selectors, select_gpus, select_migs};
pub use snapshot::{Driver, HostStatus, NvmlStatus, ProbeStatus, SCHEMA_VERSION, Snapshot, SourceStatus, Sources};
pub use time::Timestamp;
pub(crate) use time::timestamp_fields;
pub use workload::{PidNamespace, PodNames, PodQos, PodSource, SHORT_ID, Workload, WorkloadKind};
