//! What the host itself sees of a GPU process's input side, with no probe
//! in the job: its DataLoader workers and pin-memory thread, where it and
//! they run and may run (CPUs, NUMA nodes), and its cgroup's CPU quota and
//! throttling. The `starved` rule reads these to name why a GPU waits for
//! its data; every figure is `None` where it could not be read.

use serde::{Deserialize, Serialize};

/// At most this many workers are listed per trainer; the rest are counted
/// in `HostInput::workers_omitted`. PyTorch users rarely go past 32.
pub const MAX_WORKERS: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInput {
    /// Its DataLoader worker processes, by PID: children named
    /// `pt_data_worker` (PyTorch 2.5 and later name them so), those of a
    /// forkserver child (Python 3.14's default start method), and the PIDs
    /// its probe published. Workers that ended lately stay a while with
    /// `alive: false`.
    pub workers: Vec<DataWorker>,
    /// Workers found beyond `MAX_WORKERS`, not listed.
    pub workers_omitted: u32,
    /// Its pin-memory threads (`pt_data_pin`, PyTorch 2.5 and later), one
    /// per loader iterating with `pin_memory=True` and workers.
    pub pin_threads: Vec<PinThread>,
    /// Where its own main thread (the training loop's, usually) runs and
    /// may run.
    pub placement: Option<Placement>,
    /// Its cgroup's CPU bandwidth limit and throttling; `None` where the
    /// cgroup cannot be read (no cgroup file system, or outside this
    /// cgroup namespace).
    pub cgroup_cpu: Option<CgroupCpu>,
}

/// One DataLoader worker process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataWorker {
    /// As this host's `/proc` numbers it.
    pub pid: u32,
    /// Its PID in the trainer's own PID namespace, where that is not this
    /// one's (a container seen from the host): what the probe calls it.
    pub ns_pid: Option<u32>,
    /// How it was found.
    pub found_by: WorkerSource,
    /// False once it has exited (a zombie, or gone).
    pub alive: bool,
    #[serde(flatten)]
    pub figures: TaskFigures,
    /// The signal that ended it (7 is SIGBUS, what a full `/dev/shm`
    /// does), read while it waits to be reaped; `None` when it was not
    /// killed by a signal, or that could not be seen.
    pub exit_signal: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerSource {
    /// A child (or a forkserver's child) named `pt_data_worker`.
    Name,
    /// The trainer's probe listed it.
    Probe,
    /// Both.
    NameAndProbe,
}

/// A pin-memory thread of the trainer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinThread {
    pub tid: u32,
    #[serde(flatten)]
    pub figures: TaskFigures,
}

/// A process or thread of the input pipeline as the scheduler sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskFigures {
    /// As `/proc/PID/stat` said at this tick; `None` once gone.
    pub state: Option<TaskState>,
    /// Percent of one CPU since the last tick, as `top` shows it; `None`
    /// on its first tick.
    pub cpu_percent: Option<f64>,
    /// Percent of the last interval spent waiting for block I/O (the
    /// kernel's delay accounting, `delayacct_blkio_ticks`); `None` where
    /// the kernel does not count it (`kernel.task_delayacct` off).
    pub blkio_wait_percent: Option<f64>,
    pub placement: Option<Placement>,
}

/// The scheduler's state letter (proc_pid_stat(5), field 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// `R`: running or waiting for a CPU.
    Running,
    /// `S`: waiting for an event (a queue, a lock, a timer).
    Sleeping,
    /// `D`: waiting uninterruptibly, usually for disk I/O.
    DiskSleep,
    /// `T` or `t`: stopped by a signal or a tracer.
    Stopped,
    /// `Z`: exited, not yet reaped by its parent.
    Zombie,
    /// `I`, `X`, `P`, `W`, `K` and anything newer.
    Other,
}

impl TaskState {
    pub fn from_letter(letter: u8) -> Self {
        match letter {
            b'R' => Self::Running,
            b'S' => Self::Sleeping,
            b'D' => Self::DiskSleep,
            b'T' | b't' => Self::Stopped,
            b'Z' => Self::Zombie,
            _ => Self::Other,
        }
    }
}

/// Where a task runs and may run, with the NUMA nodes of those CPUs
/// (`Host::numa_nodes` lists each node's CPUs), so that a rule can say
/// "the workers run on node 1, the GPU sits on node 0".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// `Cpus_allowed_list` of `/proc/PID/status`, as the kernel writes
    /// it ("0-31,64-95"): its affinity mask within its cpuset.
    pub cpus_allowed: Option<String>,
    /// The nodes holding any of those CPUs, ascending.
    pub nodes_allowed: Option<Vec<u32>>,
    /// The CPU it last ran on (proc_pid_stat(5), field 39).
    pub last_cpu: Option<u32>,
    pub last_node: Option<u32>,
}

/// A cgroup's CPU bandwidth limit (CFS quota) and how often it bit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupCpu {
    /// The cgroup whose limit binds: the process's own, or the ancestor
    /// (a pod's, a job's) with the smallest quota; its own where none has
    /// one. As `/proc/PID/cgroup` names it, from this cgroup namespace.
    pub path: String,
    /// 1 or 2.
    pub version: u8,
    /// The quota in CPUs (quota / period); `None`: no quota.
    pub quota_cpus: Option<f64>,
    /// The enforcement periods that have elapsed and those in which the
    /// cgroup was throttled, and the time its tasks were held back, in
    /// microseconds: the kernel's totals.
    pub periods: Option<u64>,
    pub throttled_periods: Option<u64>,
    pub throttled_usec: Option<u64>,
    /// Since the last tick: the percent of elapsed periods that were
    /// throttled (`None` where no period elapsed), and the seconds of
    /// CPU time held back per second, summed over its CPUs.
    pub throttled_periods_percent: Option<f64>,
    pub throttled_seconds_per_s: Option<f64>,
}
