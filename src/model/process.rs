use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{FrameworkEnvironment, HostInput, InputPipeline, ProcessAllocator, Timestamp, Workload};

/// A process that holds at least one GPU, joined with what the host knows
/// of it. Host fields are `None` when the process is not visible from here
/// (another PID namespace, or already gone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub gpus: Vec<ProcessGpu>,
    /// Sum of the known per-GPU figures; `None` when NVML could give none.
    pub gpu_memory_total: Option<u64>,
    /// The lifelong texts are shared (`Arc`): each tick's snapshot names
    /// hundreds of processes, and a count raised is no allocation.
    pub name: Option<Arc<str>>,
    pub user: Option<Arc<str>>,
    /// The command line, with control characters and escape sequences
    /// removed so that it cannot repaint the user's terminal.
    pub command: Option<Arc<str>>,
    #[serde(flatten, with = "start_time")]
    pub start_time: Option<Timestamp>,
    pub parent_pid: Option<u32>,
    /// The parent's name (`/proc/PPID/comm`): what the dashboard's tree
    /// shows for a launcher that holds no GPU itself. Absent in recordings
    /// made before gpuscope read it.
    #[serde(default)]
    pub parent_name: Option<Arc<str>>,
    /// Percent of one CPU core, as `top` shows it (above 100 with threads).
    pub cpu_percent: Option<f64>,
    /// Resident host memory in bytes.
    pub host_memory: Option<u64>,
    /// The allocator probe's figures; `None` when the process has no probe.
    /// Boxed: most processes have none, and held inline the figures were
    /// 400 of every process's 592 bytes (a snapshot of 512 processes kept
    /// 200 KiB less; two or three snapshots live at once).
    pub allocator: Option<Box<ProcessAllocator>>,
    /// What the probe says of the job's input pipeline (DataLoaders,
    /// `/dev/shm`, failures); `None` without a PyTorch probe that reports
    /// it. Shared with the probe file it came from, unchanged between the
    /// probe's writes. Absent in recordings made before gpuscope read it.
    #[serde(default)]
    pub input: Option<Arc<InputPipeline>>,
    /// The framework's numeric environment (versions, arch flags, TF32,
    /// autocast), likewise.
    #[serde(default)]
    pub environment: Option<Arc<FrameworkEnvironment>>,
    /// The container, pod or Slurm job; `None` when in none (or unseen).
    #[serde(default)]
    pub workload: Option<Arc<Workload>>,
    /// True when NVML's PID is the host's and gpuscope runs in another PID
    /// namespace: nothing local is known of the process.
    #[serde(default)]
    pub other_namespace: bool,
    /// What the host sees of its input side without a probe: DataLoader
    /// workers, pin-memory threads, CPU placement, cgroup throttling.
    /// `None` where not read (its figures not wanted, another PID
    /// namespace). Boxed, as `allocator`. Absent in recordings made
    /// before gpuscope read it.
    #[serde(default)]
    pub host_input: Option<Box<HostInput>>,
}

impl Process {
    /// A PID and nothing known about it yet.
    pub fn bare(pid: u32) -> Self {
        Self {
            pid,
            gpus: Vec::new(),
            gpu_memory_total: None,
            name: None,
            user: None,
            command: None,
            start_time: None,
            parent_pid: None,
            parent_name: None,
            cpu_percent: None,
            host_memory: None,
            allocator: None,
            input: None,
            environment: None,
            workload: None,
            other_namespace: false,
            host_input: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessGpu {
    pub index: u32,
    #[serde(rename = "type")]
    pub kind: ProcessType,
    /// Bytes NVML says the process holds on this GPU; `None` where NVML
    /// cannot say (no privileges, some containers, Windows WDDM).
    pub used_memory: Option<u64>,
    /// The MIG device of GPU `index` the process runs on (its index
    /// within the GPU, as in `gpus[].mig_devices[]`); `None` without MIG.
    /// Absent in recordings made before gpuscope read MIG devices.
    #[serde(default)]
    pub mig_device: Option<u32>,
    #[serde(default)]
    pub mig_uuid: Option<String>,
}

impl ProcessGpu {
    /// A compute process on whole GPU `index`, its memory unknown.
    pub fn compute(index: u32) -> Self {
        Self { index, kind: ProcessType::Compute, used_memory: None, mig_device: None, mig_uuid: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessType {
    Compute,
    Graphics,
    /// Listed by NVML as both compute and graphics.
    ComputeGraphics,
}

impl ProcessType {
    pub fn merge(self, other: Self) -> Self {
        if self == other { self } else { Self::ComputeGraphics }
    }

    pub fn short(self) -> &'static str {
        match self {
            Self::Compute => "C",
            Self::Graphics => "G",
            Self::ComputeGraphics => "C+G",
        }
    }
}

crate::model::timestamp_fields!(optional start_time, "start_time", "start_time_unix_ms");
