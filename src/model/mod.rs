//! The one model every sink reads: a `Snapshot` per collection tick.

mod alert;
mod allocator;
mod gpu;
mod host;
mod process;
mod select;
mod snapshot;
mod time;

pub use alert::{Alert, AlertEvent, AlertKind, Change, Severity};
pub use allocator::{AllocConfEnv, DeviceAllocator, GpuAllocator, GpuMatch, ProbeState, ProcessAllocator};
pub use gpu::{
    Bar1Memory, Clocks, ComputeMode, Ecc, Gpu, GpuMemory, GpuState, MaxClocks, MigMode, Pcie, ProcessUtilization,
    Utilization,
};
pub use host::Host;
pub use process::{Process, ProcessGpu, ProcessType};
pub use select::{DeviceIds, GpuSelector, PciAddress, SelectError, parse_selectors, select_gpus};
pub use snapshot::{Driver, ProbeStatus, SCHEMA_VERSION, Snapshot, SourceStatus, Sources};
pub use time::Timestamp;
pub(crate) use time::timestamp_fields;
