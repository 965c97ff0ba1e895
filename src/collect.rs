//! One collection tick: ask every source, join what they say into a
//! `Snapshot`. Blocking; the poller runs it off the async workers.

use std::time::{Duration, Instant};

use crate::model::{Process, SCHEMA_VERSION, Snapshot, Sources, Timestamp};
use crate::sources::{GpuSample, GpuSource, HostSample, HostSource};

pub struct Collector {
    pub gpu: Box<dyn GpuSource>,
    pub host: Box<dyn HostSource>,
    pub interval: Duration,
    pub simulated: bool,
}

impl Collector {
    pub fn tick(&mut self) -> Snapshot {
        let started = Instant::now();
        let time = Timestamp::now();
        let gpu = self.gpu.sample();
        let pids: Vec<u32> = gpu.processes.iter().map(|p| p.pid).collect();
        let host = self.host.sample(&pids);
        let mut snap = assemble(gpu, host, time, self.interval, self.simulated);
        snap.collection_ms = started.elapsed().as_secs_f64() * 1000.0;
        snap
    }
}

pub fn assemble(gpu: GpuSample, host: HostSample, time: Timestamp, interval: Duration, simulated: bool) -> Snapshot {
    let mut host_procs = host.processes;
    let processes = gpu
        .processes
        .into_iter()
        .map(|p| {
            let h = host_procs.remove(&p.pid).unwrap_or_default();
            let known: Vec<u64> = p.gpus.iter().filter_map(|g| g.used_memory).collect();
            Process {
                pid: p.pid,
                gpu_memory_total: (!known.is_empty()).then(|| known.iter().sum()),
                gpus: p.gpus,
                name: h.name.or(p.driver_name),
                user: h.user,
                command: h.command,
                start_time: h.start_time,
                parent_pid: h.parent_pid,
                cpu_percent: h.cpu_percent,
                host_memory: h.memory,
                allocator: None,
            }
        })
        .collect();
    Snapshot {
        schema_version: SCHEMA_VERSION,
        time,
        interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        collection_ms: 0.0,
        simulated,
        host: host.host,
        driver: gpu.driver,
        gpus: gpu.gpus,
        processes,
        alerts: Vec::new(),
        sources: Sources { nvml: gpu.status, host: host.status },
    }
}
