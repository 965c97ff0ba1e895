//! One collection tick: ask every source, join what they say into a
//! `Snapshot`, and let the analyzer add its alerts. Blocking; the poller
//! runs it off the async workers.

mod allocator;
mod device_match;
mod visible_devices;

use std::time::{Duration, Instant};

use crate::analysis::Analyzer;
use crate::model::{Process, SCHEMA_VERSION, Snapshot, Sources, Timestamp};
use crate::sources::probe::{ProbeSample, ProbeSource};
use crate::sources::{GpuProcess, GpuSample, GpuSource, HostProcess, HostSample, HostSource};

pub struct Collector {
    pub gpu: Box<dyn GpuSource>,
    pub host: Box<dyn HostSource>,
    pub probes: Box<dyn ProbeSource>,
    /// Sees every snapshot once it is assembled, and adds the alerts.
    pub analyzer: Analyzer,
    pub interval: Duration,
    pub simulated: bool,
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
        let gpu = self.gpu.sample();
        let gpu_pids: Vec<u32> = gpu.processes.iter().map(|p| p.pid).collect();
        let probes = self.probes.sample_with(&gpu_pids);
        let mut pids = gpu_pids;
        pids.extend(probes.reports.iter().filter(|r| r.alive).map(|r| r.file.pid));
        pids.sort_unstable();
        pids.dedup();
        let host = self.host.sample(&pids);
        let mut snap = assemble(gpu, host, probes, time, self.interval, self.simulated);
        snap.collection_ms = started.elapsed().as_secs_f64() * 1000.0;
        snap
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
    allocator::join(&mut processes, &mut gpus, &gpu.all_gpus, probes.reports);
    for p in &mut processes {
        if let Some(h) = host_procs.remove(&p.pid) {
            p.apply_host(h);
        }
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
        sources: Sources { nvml: gpu.status, host: host.status, probes: probes.status },
    }
}

impl From<GpuProcess> for Process {
    fn from(p: GpuProcess) -> Self {
        let known: Vec<u64> = p.gpus.iter().filter_map(|g| g.used_memory).collect();
        Self {
            pid: p.pid,
            gpu_memory_total: (!known.is_empty()).then(|| known.iter().sum()),
            gpus: p.gpus,
            name: p.driver_name,
            user: None,
            command: None,
            start_time: None,
            parent_pid: None,
            cpu_percent: None,
            host_memory: None,
            allocator: None,
        }
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
        self.cpu_percent = h.cpu_percent;
        self.host_memory = h.memory;
    }
}
