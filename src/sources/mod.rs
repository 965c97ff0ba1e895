//! Every input gpuscope reads, each behind a trait so that tests can script
//! it. Implementations block (NVML calls, /proc reads); the poller runs them
//! off the async workers.

pub mod cgroup_cpu;
pub mod demo_host;
pub mod fake;
pub mod host;
pub mod input;
pub mod liveness;
mod machine;
pub mod numa;
pub mod nvml;
pub mod pidns;
pub mod pods;
pub mod procstat;
mod sanitize;
pub mod users;
pub mod workload;

use std::sync::Arc;

use crate::model::{
    Driver, Gpu, Host, HostInput, MigDevice, PidNamespace, ProcessGpu, SourceStatus, Timestamp, Workload,
};

pub use sanitize::{
    NAME_MAX_CHARS, SHOWN_FOR_INVISIBLE, bounded, is_invisible, sanitize_command, sanitize_shared, visible,
};

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
#[derive(Debug, Clone, Default, PartialEq)]
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
    pub all_gpus: Arc<[GpuIdentity]>,
    pub processes: Vec<GpuProcess>,
    pub status: SourceStatus,
    /// NVML calls this sample made; `None` where the source does not count.
    pub calls: Option<u64>,
    /// Whether the driver's events are heard (`sources.driver_events`);
    /// `None` where the source does not listen.
    pub events: Option<crate::model::EventsStatus>,
}

pub trait GpuSource: Send {
    fn sample(&mut self) -> GpuSample;

    /// The driver's names for processes `sample` left unnamed, in the
    /// order of `pids`, and the driver calls that took. The collector asks
    /// only for the processes the host cannot name (another PID namespace,
    /// or already gone from `/proc`): the host's name wins where it has
    /// one, and the driver's costs a call a process. None by default.
    fn process_names(&mut self, pids: &[u32]) -> (Vec<Option<String>>, u64) {
        (vec![None; pids.len()], 0)
    }

    /// The readings asked only while shown that are on screen now, for
    /// the samples from the next on: the dashboard's poller says it before
    /// every tick. They come on top of what the source asks anyway.
    /// Ignored by default.
    fn show(&mut self, _shown: OnScreen) {}
}

/// The readings the dashboard asks the driver for only while it shows
/// them (`tui::steer`): the current clocks (four calls a GPU a tick) and
/// the PCIe rates (two field-value calls), which its GPU lines have room
/// for only on a wide terminal, and its detail view shows on the board
/// line. Every other output asks for what it always shows
/// (`nvml::Wanted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnScreen {
    pub clocks: bool,
    pub pcie: bool,
}

impl OnScreen {
    pub const NONE: Self = Self { clocks: false, pcie: false };

    /// What either shows.
    pub const fn or(self, other: Self) -> Self {
        Self { clocks: self.clocks || other.clocks, pcie: self.pcie || other.pcie }
    }
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
    /// Its input side as the host sees it (`input.rs`); read, as the
    /// figures are, only where `Figures` wants them.
    pub input: Option<Box<HostInput>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSample {
    pub host: Host,
    /// Only the processes asked for that the host could see.
    pub processes: HostProcesses,
    pub status: SourceStatus,
    /// `None` where it could not be told.
    pub pid_namespace: Option<PidNamespace>,
}

/// A sample's processes by PID, in a vector sorted by PID. Made afresh
/// every tick for every GPU process: a hash table sized for 512 processes
/// keeps room for as many again (148 KiB where the entries take 74 KiB),
/// and the PIDs asked for arrive sorted, so a sorted vector is built by
/// pushing and read by binary search.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostProcesses(Vec<(u32, HostProcess)>);

impl HostProcesses {
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    fn find(&self, pid: u32) -> Result<usize, usize> {
        self.0.binary_search_by_key(&pid, |(p, _)| *p)
    }

    pub fn get(&self, pid: &u32) -> Option<&HostProcess> {
        self.find(*pid).ok().and_then(|i| self.0.get(i)).map(|(_, p)| p)
    }

    pub fn contains_key(&self, pid: &u32) -> bool {
        self.find(*pid).is_ok()
    }

    /// Adds or replaces the process of `pid`: at the end, without a search,
    /// where PIDs come in order.
    pub fn insert(&mut self, pid: u32, process: HostProcess) {
        if self.0.last().is_none_or(|(last, _)| *last < pid) {
            self.0.push((pid, process));
            return;
        }
        match self.find(pid) {
            Ok(i) => self.0[i].1 = process,
            Err(i) => self.0.insert(i, (pid, process)),
        }
    }

    /// What is known of `pid`, taken out and left empty: a join reads each
    /// process once, and removing from the middle would move the rest.
    pub fn take(&mut self, pid: &u32) -> Option<HostProcess> {
        let i = self.find(*pid).ok()?;
        self.0.get_mut(i).map(|(_, p)| std::mem::take(p))
    }

    /// Keeps the processes whose PID `keep` says.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.0.retain(|(pid, _)| keep(*pid));
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut HostProcess)> {
        self.0.iter_mut().map(|(pid, p)| (*pid, p))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&u32> for HostProcesses {
    type Output = HostProcess;

    fn index(&self, pid: &u32) -> &HostProcess {
        self.get(pid).unwrap_or_else(|| panic!("no host process {pid}"))
    }
}

impl FromIterator<(u32, HostProcess)> for HostProcesses {
    fn from_iter<I: IntoIterator<Item = (u32, HostProcess)>>(iter: I) -> Self {
        let mut all = Self::default();
        for (pid, process) in iter {
            all.insert(pid, process);
        }
        all
    }
}

/// Whose changing figures, CPU time and resident memory, a sample reads.
/// The rest of what a process shows (name, owner, command line, parent) is
/// read at first sight whatever this says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Figures {
    #[default]
    All,
    /// These PIDs' alone, sorted; the others' are `None` in the sample. The
    /// dashboard's: the rows on screen and a page either side of them
    /// (`tui::steer` says why).
    Of(Arc<[u32]>),
}

impl Figures {
    pub fn wants(&self, pid: u32) -> bool {
        match self {
            Self::All => true,
            Self::Of(pids) => pids.binary_search(&pid).is_ok(),
        }
    }
}

pub trait HostSource: Send {
    /// Samples the machine and the given PIDs (the GPU processes, sorted),
    /// with the CPU time and resident memory of those `figures` wants.
    fn sample(&mut self, pids: &[u32], figures: &Figures) -> HostSample;

    /// Whether PIDs NVML reports are this namespace's: asked before each
    /// sample, so that host PIDs are never looked up as local ones.
    fn pid_namespace(&self) -> Option<PidNamespace> {
        None
    }

    /// The DataLoader workers each trainer's probe published, for the
    /// samples from now on: per trainer (by its PID as the sample is asked
    /// it), its workers' PIDs as the trainer's own PID namespace numbers
    /// them, mapped here through `NSpid` where that namespace is not this
    /// one. Replaces what was published before. Ignored by default.
    fn publish_workers(&mut self, _published: &[(u32, Vec<u32>)]) {}

    /// The NUMA node of each GPU, by its PCI bus id as NVML spells it, in
    /// order; `None` where the host cannot tell. None by default.
    fn gpu_numa_nodes(&mut self, bus_ids: &[Option<&str>]) -> Vec<Option<u32>> {
        vec![None; bus_ids.len()]
    }

    /// Names the Kubernetes pods of the processes in one (`pods.rs`):
    /// their workloads gain the pod's name, namespace and container name
    /// where a source says. Nothing by default.
    fn name_pods(&mut self, _processes: &mut [crate::model::Process], _gpus: &[Gpu]) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> HostProcess {
        HostProcess { name: Some(name.into()), ..HostProcess::default() }
    }

    #[test]
    fn host_processes_keep_pid_order_whatever_order_they_come_in() {
        let mut all: HostProcesses =
            [(7, named("a")), (3, named("b")), (9, named("c")), (3, named("d"))].into_iter().collect();
        assert_eq!(all.0.iter().map(|(pid, _)| *pid).collect::<Vec<_>>(), [3, 7, 9]);
        assert_eq!(all[&3].name.as_deref(), Some("d"), "a PID given twice keeps the later");
        assert!(all.contains_key(&9) && !all.contains_key(&8) && all.get(&1).is_none());
        assert_eq!(all.take(&7).and_then(|p| p.name).as_deref(), Some("a"));
        assert_eq!(all.take(&7), Some(HostProcess::default()), "taken once, empty after");
        assert_eq!((all.take(&8), all.len()), (None, 3));
    }
}
