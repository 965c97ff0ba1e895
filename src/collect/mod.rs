//! One collection tick: ask every source, join what they say into a
//! `Snapshot`, and let the analyzer add its alerts. Blocking; the poller
//! runs it off the async workers.

mod allocator;
mod device_match;
mod visible_devices;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::analysis::Analyzer;
use crate::model::{HostStatus, NvmlStatus, PidNamespace, Process, SCHEMA_VERSION, Snapshot, Sources, Timestamp};
use crate::probe::files::{ProbeReport, ProbeSample, ProbeSource};
use crate::sources::{Figures, GpuProcess, GpuSample, GpuSource, HostProcess, HostSample, HostSource, OnScreen};

pub struct Collector {
    pub gpu: Box<dyn GpuSource>,
    pub host: Box<dyn HostSource>,
    pub probes: Box<dyn ProbeSource>,
    /// Sees every snapshot once it is assembled, and adds the alerts.
    pub analyzer: Analyzer,
    pub interval: Duration,
    pub simulated: bool,
    /// Why simulated GPUs stand in for the driver (`--demo=auto`).
    pub fallback: Option<String>,
    /// What the output shows of the processes and the probes, and so
    /// reads besides the driver.
    pub reads: Reads,
}

/// What a collection reads besides the driver, by what its output shows,
/// as `sources::nvml::Wanted` says what it asks the driver. `--query-gpu`
/// shows neither: a GPU process's first sight costs several reads of
/// `/proc` (its `stat`, `status`, command line), and looking for its
/// probe file three more (`status`, `uid_map`, `environ`). On 8 GPUs x 64
/// processes that was 4 of the 7 ms of CPU such a one-shot spent beside
/// the driver's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reads {
    /// The processes' host figures (name, user, command line, CPU time,
    /// resident memory), and the driver's names for those the host
    /// cannot name. Without them a process is its PID and its GPUs.
    pub processes: bool,
    /// The probes' files: the allocators' figures, and the processes
    /// probed that are on no GPU.
    pub probes: bool,
    /// Whose CPU time and resident memory, of the processes read: the
    /// dashboard's poller sets it before each tick to what the table shows
    /// (`poller::PollerControl::set_figures`).
    pub figures: Figures,
    /// Of the readings the dashboard asks the driver for only while it
    /// shows them, those on screen: its poller sets it before each tick
    /// (`poller::PollerControl::set_on_screen`). `None`: what the GPU
    /// source was built to ask, and nothing more.
    pub on_screen: Option<OnScreen>,
}

impl Reads {
    pub const ALL: Self = Self { processes: true, probes: true, figures: Figures::All, on_screen: None };
    /// The GPUs' readings alone.
    pub const NONE: Self = Self { processes: false, probes: false, figures: Figures::All, on_screen: None };
    /// The processes, without the probes.
    pub const PROCESSES: Self = Self { processes: true, probes: false, figures: Figures::All, on_screen: None };
}

impl Collector {
    pub fn tick(&mut self) -> Snapshot {
        let mut snap = self.collect();
        self.analyzer.observe(&mut snap);
        snap
    }

    /// The snapshot before analysis: what the sources say, joined.
    pub fn collect(&mut self) -> Snapshot {
        let started = Instant::now();
        let time = Timestamp::now();
        if let Some(shown) = self.reads.on_screen {
            self.gpu.show(shown);
        }
        let mut gpu = self.gpu.sample();
        self.place_gpus(&mut gpu);
        let gpu_pids: Vec<u32> = gpu.processes.iter().map(|p| p.pid).collect();
        // Host PIDs are not looked up as local ones.
        let foreign = nvml_pids_are_foreign(self.host.pid_namespace(), self.simulated);
        let probes = match (self.reads.probes, foreign) {
            // Nothing read, so nothing to say of the directory.
            (false, _) => ProbeSample::default(),
            (true, true) => self.probes.sample(),
            (true, false) => self.probes.sample_with(&gpu_pids),
        };
        let mut pids = if foreign || !self.reads.processes { Vec::new() } else { gpu_pids };
        pids.extend(probes.reports.iter().filter(|r| r.alive).map(|r| r.file.pid));
        pids.sort_unstable();
        pids.dedup();
        // The workers each trainer's probe names are found even where they
        // are not its children by name (before PyTorch 2.5).
        let published: Vec<(u32, Vec<u32>)> = (probes.reports.iter().filter(|r| r.alive))
            .filter_map(|r| {
                let input = r.file.input.as_deref()?;
                let workers: Vec<u32> =
                    input.loaders.iter().flat_map(|l| l.worker_pids.iter().flatten().copied()).collect();
                (!workers.is_empty()).then_some((r.file.pid, workers))
            })
            .collect();
        self.host.publish_workers(&published);
        // The machine's own figures still: they cost two small reads.
        let host = self.host.sample(&pids, &self.reads.figures);
        if self.reads.processes {
            self.name_unnamed(&mut gpu, &host, foreign);
        }
        let mut snap = assemble(gpu, host, probes, time, self.interval, self.simulated);
        if self.reads.processes && !foreign {
            self.host.name_pods(&mut snap.processes, &snap.gpus);
        }
        snap.collection_ms = started.elapsed().as_secs_f64() * 1000.0;
        snap
    }

    /// Each GPU's NUMA node, which the host knows by its PCI bus id.
    fn place_gpus(&mut self, gpu: &mut GpuSample) {
        let bus_ids: Vec<Option<&str>> = gpu.gpus.iter().map(|g| g.pci_bus_id.as_deref()).collect();
        let nodes = self.host.gpu_numa_nodes(&bus_ids);
        for (g, node) in gpu.gpus.iter_mut().zip(nodes) {
            g.numa_node = node;
        }
    }

    /// The driver's names for the GPU processes the host cannot name;
    /// their calls are counted with the sample's.
    fn name_unnamed(&mut self, gpu: &mut GpuSample, host: &HostSample, foreign: bool) {
        let host_names = |pid: u32| host.processes.get(&pid).is_some_and(|h| h.name.is_some());
        let wanted: Vec<usize> = (gpu.processes.iter().enumerate())
            .filter(|(_, p)| p.driver_name.is_none() && (foreign || !host_names(p.pid)))
            .map(|(at, _)| at)
            .collect();
        if wanted.is_empty() {
            return;
        }
        let pids: Vec<u32> = wanted.iter().map(|&at| gpu.processes[at].pid).collect();
        let (names, calls) = self.gpu.process_names(&pids);
        for (at, name) in wanted.into_iter().zip(names) {
            gpu.processes[at].driver_name = name;
        }
        gpu.calls = gpu.calls.map(|made| made + calls);
    }
}

pub fn assemble(
    gpu: GpuSample,
    host: HostSample,
    probes: ProbeSample,
    time: Timestamp,
    interval: Duration,
    simulated: bool,
) -> Snapshot {
    let mut host_procs = host.processes;
    let mut gpus = gpu.gpus;
    let mut processes: Vec<Process> = gpu.processes.into_iter().map(Process::from).collect();
    if nvml_pids_are_foreign(host.pid_namespace, simulated) {
        join_across_namespaces(&mut processes, &mut gpus, &gpu.all_gpus, probes.reports);
    } else {
        allocator::join(&mut processes, &mut gpus, &gpu.all_gpus, probes.reports);
    }
    for p in processes.iter_mut().filter(|p| !p.other_namespace) {
        if let Some(h) = host_procs.take(&p.pid) {
            p.apply_host(h);
        }
    }
    for g in gpus.iter_mut() {
        share_host_memory(g, &host.host);
    }
    Snapshot {
        schema_version: SCHEMA_VERSION,
        time,
        interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        collection_ms: 0.0,
        simulated,
        host: host.host,
        driver: gpu.driver,
        gpus,
        processes,
        alerts: Vec::new(),
        events: Vec::new(),
        sources: Sources {
            nvml: NvmlStatus { calls: gpu.calls, ..gpu.status.into() },
            host: HostStatus { pid_namespace: host.pid_namespace, ..host.status.into() },
            probes: probes.status,
            driver_events: gpu.events,
        },
    }
}

/// A unified-memory GPU (GB10) has no framebuffer for NVML to count, so
/// its memory is the machine's: total and available as `/proc/meminfo`
/// says (`MemTotal`, `MemAvailable`), what NVIDIA's own patch to llama.cpp
/// reads on DGX Spark in place of `cudaMemGetInfo`
/// (`ggml_backend_cuda_get_available_uma_memory`, llama.cpp PR 17368).
/// Used is the rest, CPU and GPU together: the pool is one. A figure the
/// host could not read stays unknown.
fn share_host_memory(gpu: &mut crate::model::Gpu, host: &crate::model::Host) {
    if gpu.unified_memory != Some(true) || gpu.memory.total.is_some() {
        return;
    }
    gpu.memory.total = host.memory_total;
    gpu.memory.free = host.memory_available;
    gpu.memory.used = host.memory_total.zip(host.memory_available).map(|(t, a)| t.saturating_sub(a));
}

/// NVML reports host PIDs. gpuscope's own simulator runs in gpuscope's
/// process and reports this namespace's.
fn nvml_pids_are_foreign(ns: Option<PidNamespace>, simulated: bool) -> bool {
    ns == Some(PidNamespace::Container) && !simulated
}

/// In a PID namespace of its own, NVML's rows keep their host PIDs and
/// figures, marked as another namespace's; probes, which know their
/// process by its local PID, become rows of their own. Where a local PID
/// is also one of NVML's host PIDs the two rows could not be told apart,
/// so that probe is left out rather than shown under a stranger's PID.
fn join_across_namespaces(
    processes: &mut Vec<Process>,
    gpus: &mut [crate::model::Gpu],
    all_gpus: &[crate::sources::GpuIdentity],
    reports: Vec<ProbeReport>,
) {
    let host_pids: HashSet<u32> = processes.iter().map(|p| p.pid).collect();
    for p in processes.iter_mut() {
        p.other_namespace = true;
    }
    let local_reports = reports.into_iter().filter(|r| !host_pids.contains(&r.file.pid)).collect();
    let mut local = Vec::new();
    allocator::join(&mut local, gpus, all_gpus, local_reports);
    processes.extend(local);
    // Again with no reports: the order, and each GPU's totals over both.
    allocator::join(processes, gpus, all_gpus, Vec::new());
}

impl From<GpuProcess> for Process {
    fn from(p: GpuProcess) -> Self {
        // Summed without a list: this runs for every process on every tick.
        let total = p.gpus.iter().filter_map(|g| g.used_memory).fold(None, |sum, m| Some(sum.unwrap_or(0) + m));
        Self { gpu_memory_total: total, gpus: p.gpus, name: p.driver_name.map(Arc::from), ..Self::bare(p.pid) }
    }
}

impl Process {
    /// What the host knows wins over NVML's name, which is only the
    /// executable's.
    fn apply_host(&mut self, h: HostProcess) {
        self.name = h.name.or(self.name.take());
        self.user = h.user;
        self.command = h.command;
        self.start_time = h.start_time;
        self.parent_pid = h.parent_pid;
        self.parent_name = h.parent_name;
        self.cpu_percent = h.cpu_percent;
        self.host_memory = h.memory;
        self.workload = h.workload;
        self.host_input = h.input;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analyzer;
    use crate::analysis::config::{AlertsConfig, HistoryConfig};
    use crate::model::{Gpu, GpuState, ProcessGpu, ProcessType, SourceStatus, Workload, WorkloadKind};
    use crate::probe::files::ProbeFile;
    use crate::probe::files::fake::ScriptedProbes;
    use crate::sources::fake::{ScriptedGpu, ScriptedHost};

    const GIB: u64 = 1 << 30;

    fn gpu_sample(pids: &[u32]) -> GpuSample {
        let mut g = Gpu::blank(0, GpuState::Ok);
        g.uuid = Some("GPU-aaaa".into());
        let processes = pids
            .iter()
            .map(|&pid| GpuProcess {
                pid,
                gpus: vec![ProcessGpu {
                    index: 0,
                    kind: ProcessType::Compute,
                    used_memory: Some(3 * GIB),
                    mig_device: None,
                    mig_uuid: None,
                }],
                driver_name: Some("python3".into()),
            })
            .collect();
        GpuSample { gpus: vec![g], processes, status: SourceStatus::ok(), ..GpuSample::default() }
    }

    /// A local process that happens to have PID 42, and one with 7.
    fn host_sample(ns: Option<PidNamespace>) -> HostSample {
        let workload = Workload {
            kind: WorkloadKind::Docker,
            container_id: Some("a".repeat(64)),
            pod_uid: None,
            qos: None,
            slurm_job: None,
            slurm_step: None,
            slurm_uid: None,
            pod: crate::model::PodNames::default(),
        };
        let bash = HostProcess {
            name: Some("bash".into()),
            command: Some("bash".into()),
            user: Some("mallory".into()),
            workload: Some(Arc::new(workload)),
            ..HostProcess::default()
        };
        let trainer =
            HostProcess { name: Some("python3".into()), command: Some("python3 train.py".into()), ..bash.clone() };
        HostSample {
            processes: [(42, bash), (7, trainer)].into_iter().collect(),
            status: SourceStatus::ok(),
            pid_namespace: ns,
            ..HostSample::default()
        }
    }

    fn probe(pid: u32) -> ProbeReport {
        let mut v: serde_json::Value =
            serde_json::from_str(&crate::probe::files::sample_json_for_tests(pid, 1)).unwrap();
        v["devices"][0]["uuid"] = "GPU-aaaa".into();
        v["devices"][0]["reserved"] = (2 * GIB).into();
        ProbeReport { file: ProbeFile::parse(&v.to_string(), pid, 1).unwrap().into(), alive: true, age: Duration::ZERO }
    }

    fn probes(pids: &[u32]) -> ProbeSample {
        ProbeSample { reports: pids.iter().map(|&p| probe(p)).collect(), ..ProbeSample::default() }
    }

    fn at(snap: &Snapshot, pid: u32) -> &Process {
        snap.processes.iter().find(|p| p.pid == pid).unwrap()
    }

    #[test]
    fn in_the_host_namespace_the_host_and_its_workload_join_by_pid() {
        let host = host_sample(Some(PidNamespace::Host));
        let snap = assemble(gpu_sample(&[42]), host, probes(&[]), Timestamp::now(), Duration::from_secs(1), false);
        let p = at(&snap, 42);
        assert_eq!((p.user.as_deref(), p.other_namespace), (Some("mallory"), false));
        assert_eq!(p.workload.as_ref().map(|w| w.kind), Some(WorkloadKind::Docker));
        assert_eq!(snap.sources.host.pid_namespace, Some(PidNamespace::Host));
    }

    #[test]
    fn in_a_container_a_host_pid_never_takes_a_local_process_s_identity() {
        let host = host_sample(Some(PidNamespace::Container));
        // NVML's 42 is the host's 42; the probe's 42 is the local one.
        let snap = assemble(gpu_sample(&[42]), host, probes(&[42, 7]), Timestamp::now(), Duration::from_secs(1), false);
        assert_eq!(snap.sources.host.pid_namespace, Some(PidNamespace::Container));
        let nvml = at(&snap, 42);
        assert!(nvml.other_namespace);
        assert_eq!(nvml.name.as_deref(), Some("python3"), "NVML's own name, not the local bash");
        assert_eq!((nvml.user.as_ref(), nvml.command.as_ref(), nvml.workload.as_ref()), (None, None, None));
        assert_eq!(nvml.gpus[0].used_memory, Some(3 * GIB), "NVML's figure is kept");
        assert!(nvml.allocator.is_none(), "a probe with a colliding local PID is not joined");
        assert_eq!(snap.processes.iter().filter(|p| p.pid == 42).count(), 1, "no second row under the same PID");
        // A local probe without a collision is a row of its own, with what the host knows.
        let local = at(&snap, 7);
        assert!(!local.other_namespace && local.allocator.is_some());
        assert_eq!(local.command.as_deref(), Some("python3 train.py"));
        assert_eq!(snap.gpus[0].allocator.as_ref().map(|a| a.probed_processes), Some(1));
    }

    #[test]
    fn the_simulator_reports_this_namespace_s_pids() {
        let host = host_sample(Some(PidNamespace::Container));
        let snap = assemble(gpu_sample(&[42]), host, probes(&[]), Timestamp::now(), Duration::from_secs(1), true);
        assert!(!at(&snap, 42).other_namespace);
        assert_eq!(at(&snap, 42).user.as_deref(), Some("mallory"));
    }

    #[test]
    fn the_gpus_numa_nodes_and_the_processes_input_side_come_from_the_host() {
        let mut gpu = gpu_sample(&[42]);
        gpu.gpus[0].pci_bus_id = Some("00000000:1B:00.0".into());
        let mut host = host_sample(Some(PidNamespace::Host));
        let input = crate::model::HostInput { workers_omitted: 3, ..crate::model::HostInput::default() };
        let bash = HostProcess { input: Some(Box::new(input)), ..host.processes[&42].clone() };
        host.processes.insert(42, bash);
        let host = ScriptedHost::new([host]).with_gpu_numa_nodes([("00000000:1B:00.0".to_owned(), 1)]);
        let snap = scripted(ScriptedGpu::new([gpu]), host, ScriptedProbes::new([probes(&[])]), Reads::ALL).tick();
        assert_eq!(snap.gpus[0].numa_node, Some(1));
        assert_eq!(at(&snap, 42).host_input.as_ref().map(|i| i.workers_omitted), Some(3));
    }

    #[test]
    fn a_unified_gpu_s_memory_is_the_machine_s_and_a_discrete_one_keeps_its_own() {
        let mut gpu = gpu_sample(&[]);
        gpu.gpus[0].unified_memory = Some(true);
        let mut discrete = Gpu::blank(1, GpuState::Ok);
        discrete.unified_memory = Some(false);
        discrete.memory.total = Some(80 * GIB);
        gpu.gpus.push(discrete);
        let mut host = host_sample(Some(PidNamespace::Host));
        (host.host.memory_total, host.host.memory_available) = (Some(128 * GIB), Some(100 * GIB));
        let snap = assemble(gpu.clone(), host.clone(), probes(&[]), Timestamp::now(), Duration::from_secs(1), false);
        let m = &snap.gpus[0].memory;
        assert_eq!((m.total, m.used, m.free), (Some(128 * GIB), Some(28 * GIB), Some(100 * GIB)));
        assert_eq!(m.driver_reserved, None, "the driver keeps nothing back it says");
        assert_eq!((snap.gpus[1].memory.total, snap.gpus[1].memory.used), (Some(80 * GIB), None));
        // Where the host could not read its memory, the GPU's stays unknown, never 0.
        host.host.memory_available = None;
        let snap = assemble(gpu, host, probes(&[]), Timestamp::now(), Duration::from_secs(1), false);
        let m = &snap.gpus[0].memory;
        assert_eq!((m.total, m.used, m.free), (Some(128 * GIB), None, None));
    }

    /// A collector over scripted sources, at a 1 s interval.
    fn scripted(gpu: ScriptedGpu, host: ScriptedHost, probes: ScriptedProbes, reads: Reads) -> Collector {
        Collector {
            gpu: Box::new(gpu),
            host: Box::new(host),
            probes: Box::new(probes),
            analyzer: Analyzer::new(&HistoryConfig::default(), AlertsConfig::default()),
            interval: Duration::from_secs(1),
            simulated: false,
            fallback: None,
            reads,
        }
    }

    #[test]
    fn in_a_container_the_host_is_not_asked_about_host_pids() {
        let host = ScriptedHost::new([host_sample(Some(PidNamespace::Container))]);
        let asked = host.asked.clone();
        let snap =
            scripted(ScriptedGpu::new([gpu_sample(&[42, 43])]), host, ScriptedProbes::new([probes(&[7])]), Reads::ALL)
                .tick();
        assert_eq!(asked.lock().unwrap().as_slice(), [vec![7]]);
        assert_eq!(snap.processes.iter().filter(|p| p.other_namespace).count(), 2);
    }

    /// A collector over GPU processes 7, 42 and 43, none named by the
    /// driver's sample, with probe 7's file; what it asked each source.
    fn reading(reads: Reads) -> (Snapshot, Vec<Vec<u32>>, Vec<Vec<u32>>, u32) {
        let mut gpu = gpu_sample(&[7, 42, 43]);
        gpu.processes.iter_mut().for_each(|p| p.driver_name = None);
        let gpu = ScriptedGpu::new([gpu]).with_driver_names([(43, "nvml-43".to_owned())]);
        let host = ScriptedHost::new([host_sample(Some(PidNamespace::Host))]);
        let probes = ScriptedProbes::new([probes(&[7])]);
        let (names, hosted, sampled) = (gpu.asked_names.clone(), host.asked.clone(), probes.sampled.clone());
        let snap = scripted(gpu, host, probes, reads).tick();
        let (names, hosted, sampled) =
            (names.lock().unwrap().clone(), hosted.lock().unwrap().clone(), *sampled.lock().unwrap());
        (snap, names, hosted, sampled)
    }

    #[test]
    fn the_processes_and_the_probes_are_read_only_where_the_output_shows_them() {
        let (all, names, hosted, sampled) = reading(Reads::ALL);
        assert_eq!((names, hosted, sampled), (vec![vec![43]], vec![vec![7, 42, 43]], 1));
        assert_eq!(at(&all, 42).name.as_deref(), Some("bash"));
        assert!(at(&all, 7).allocator.is_some());

        // `--query-gpu`: the machine's figures, no process's, no probe's.
        let (none, names, hosted, sampled) = reading(Reads::NONE);
        assert_eq!((names, hosted, sampled), (Vec::<Vec<u32>>::new(), vec![vec![]], 0));
        assert_eq!(
            none.gpus,
            all.gpus
                .iter()
                .cloned()
                .map(|mut g| {
                    g.allocator = None;
                    g
                })
                .collect::<Vec<_>>(),
            "the GPUs' readings are the same, less the probes' sums"
        );
        assert_eq!(none.processes.iter().map(|p| p.pid).collect::<Vec<_>>(), [7, 42, 43]);
        assert!(none.processes.iter().all(|p| p.name.is_none() && p.user.is_none() && p.allocator.is_none()));
        assert_eq!(none.host, all.host);

        // `--query-compute-apps`: the processes, named, without the probes.
        let (apps, names, hosted, sampled) = reading(Reads::PROCESSES);
        assert_eq!((names, hosted, sampled), (vec![vec![43]], vec![vec![7, 42, 43]], 0));
        assert_eq!(at(&apps, 42).name.as_deref(), Some("bash"));
        assert_eq!(at(&apps, 43).name.as_deref(), Some("nvml-43"));
        assert!(at(&apps, 7).allocator.is_none());
    }

    /// GPU processes 42 (the host names it), 43 (gone from the host) and 7
    /// (seen, but without a name), none named by the driver's sample.
    fn naming(ns: PidNamespace) -> (Snapshot, Vec<Vec<u32>>) {
        let mut gpu = gpu_sample(&[7, 42, 43]);
        gpu.calls = Some(10);
        gpu.processes.iter_mut().for_each(|p| p.driver_name = None);
        let mut host = host_sample(Some(ns));
        let bash = host.processes.get(&42).cloned().unwrap();
        let trainer = HostProcess { name: None, ..host.processes.get(&7).cloned().unwrap() };
        host.processes = [(7, trainer), (42, bash)].into_iter().collect();
        let names = [(7, "trainer".to_owned()), (42, "nvml-42".to_owned()), (43, "nvml-43".to_owned())];
        let gpu = ScriptedGpu::new([gpu]).with_driver_names(names);
        let asked = gpu.asked_names.clone();
        let snap = scripted(gpu, ScriptedHost::new([host]), ScriptedProbes::new([probes(&[])]), Reads::ALL).tick();
        let asked = asked.lock().unwrap().clone();
        (snap, asked)
    }

    #[test]
    fn the_driver_is_asked_to_name_only_what_the_host_cannot() {
        let (snap, asked) = naming(PidNamespace::Host);
        assert_eq!(asked, [vec![7, 43]], "42 is named by the host");
        let names: Vec<_> = [7, 42, 43].iter().map(|&pid| at(&snap, pid).name.as_deref().map(str::to_owned)).collect();
        assert_eq!(names, [Some("trainer".into()), Some("bash".into()), Some("nvml-43".into())]);
        assert_eq!(snap.sources.nvml.calls, Some(12), "the names' calls are counted with the tick's");
    }

    #[test]
    fn in_another_namespace_every_process_is_named_by_the_driver() {
        let (snap, asked) = naming(PidNamespace::Container);
        assert_eq!(asked, [vec![7, 42, 43]], "the host's 42 is another process");
        assert_eq!(at(&snap, 42).name.as_deref(), Some("nvml-42"));
    }
}
