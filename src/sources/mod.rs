//! Every input gpuscope reads, each behind a trait so that tests can script
//! it. Implementations block (NVML calls, /proc reads); the poller runs them
//! off the async workers.

pub mod demo_host;
pub mod fake;
pub mod host;
mod machine;
pub mod nvml;
pub mod pidns;
pub mod probe;
pub mod procstat;
mod sanitize;
pub mod users;
pub mod workload;

use crate::hashing::IntMap;
use std::sync::Arc;

use crate::model::{Driver, Gpu, Host, MigDevice, PidNamespace, ProcessGpu, SourceStatus, Timestamp, Workload};

pub use sanitize::{SHOWN_FOR_INVISIBLE, is_invisible, sanitize_command, visible};

/// One GPU process as the driver sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProcess {
    pub pid: u32,
    pub gpus: Vec<ProcessGpu>,
    /// NVML's name for the process: the only one available when it lives in
    /// another PID namespace.
    pub driver_name: Option<String>,
}

/// A GPU as NVML enumerates it, watched or not: what a framework's device
/// is matched against (CUDA sees every GPU, `--gpus` or not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuIdentity {
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    /// Its MIG devices, where gpuscope reads them (MIG on, GPU watched):
    /// a framework's device may be one of them.
    pub mig_devices: Vec<MigDevice>,
}

impl GpuIdentity {
    pub fn of(g: &Gpu) -> Self {
        Self {
            index: g.index,
            uuid: g.uuid.clone(),
            name: g.name.clone(),
            pci_bus_id: g.pci_bus_id.clone(),
            mig_devices: g.mig_devices.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuSample {
    pub driver: Driver,
    pub gpus: Vec<Gpu>,
    /// Every GPU NVML enumerates, in its order; empty where the source
    /// does not know more than `gpus` (then `gpus` stands for it).
    pub all_gpus: Vec<GpuIdentity>,
    pub processes: Vec<GpuProcess>,
    pub status: SourceStatus,
    /// NVML calls this sample made; `None` where the source does not count.
    pub calls: Option<u64>,
}

pub trait GpuSource: Send {
    fn sample(&mut self) -> GpuSample;
}

/// What the host knows of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostProcess {
    /// Shared with every tick's copy: these do not change while the
    /// process lives.
    pub name: Option<Arc<str>>,
    pub user: Option<Arc<str>>,
    pub command: Option<Arc<str>>,
    pub start_time: Option<Timestamp>,
    pub parent_pid: Option<u32>,
    /// The parent's name, read when the parent changes: a launcher such as
    /// torchrun above its ranks, named without a `/proc` read on the UI task.
    pub parent_name: Option<Arc<str>>,
    pub cpu_percent: Option<f64>,
    pub memory: Option<u64>,
    /// The container, pod or Slurm job, from `/proc/PID/cgroup` at first sight.
    pub workload: Option<Arc<Workload>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSample {
    pub host: Host,
    /// Only the processes asked for that the host could see.
    pub processes: IntMap<u32, HostProcess>,
    pub status: SourceStatus,
    /// `None` where it could not be told.
    pub pid_namespace: Option<PidNamespace>,
}

pub trait HostSource: Send {
    /// Samples the machine and the given PIDs (the GPU processes).
    fn sample(&mut self, pids: &[u32]) -> HostSample;

    /// Whether PIDs NVML reports are this namespace's: asked before each
    /// sample, so that host PIDs are never looked up as local ones.
    fn pid_namespace(&self) -> Option<PidNamespace> {
        None
    }
}
