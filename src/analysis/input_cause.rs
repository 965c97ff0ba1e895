//! Why a job waits for its data, from what its probe measured (the wait
//! share of each DataLoader, its settings, `/dev/shm`) and what the host
//! sees (its workers' CPU and state, where they run, its cgroup's quota).
//! The `starved` rule and `gpuscope doctor` both name the cause from here,
//! with the figures that show it and what to change.
//!
//! The causes are tried most specific first: a full `/dev/shm` kills the
//! workers whatever else is true, and `num_workers=0` makes every other
//! figure about workers moot.

use crate::model::{DataLoaderStats, Gpu, Process, Snapshot, TaskState};
use crate::util::units::bytes;

/// What a DataLoader's numbers point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `/dev/shm` (nearly) full: batches in flight live there.
    SharedMemory,
    /// `num_workers=0`: the training thread loads every batch itself.
    NoWorkers,
    /// The job's cgroup uses up its CPU quota and is held back.
    CpuQuota,
    /// Every worker busy near a full CPU: too few of them.
    WorkersCpuBound,
    /// Workers mostly waiting on disk.
    WorkersIoBound,
    /// Workers run on a NUMA node other than the GPU's.
    NumaFar,
    /// `pin_memory=False`: each batch is copied through pageable memory.
    PinMemoryOff,
    /// None of the above shows in the figures.
    Unknown,
}

/// A cause with its evidence and the change that addresses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    pub cause: Cause,
    pub evidence: String,
    pub fix: String,
}

/// Workers this busy (percent of one CPU) each are the bottleneck.
const BUSY_WORKER: f64 = 85.0;
/// What gives DataLoader workers room: Docker's and Kubernetes' default
/// `/dev/shm` is 64 MiB; an `emptyDir` in memory counts against the pod's
/// memory limit (its documentation on emptyDir).
pub const SHM_FIX: &str = "Give the container more shared memory: docker run --shm-size=8g (or --ipc=host); in \
                           Kubernetes mount an emptyDir with medium: Memory at /dev/shm (it counts against the \
                           pod's memory limit). Or lower num_workers × prefetch_factor.";

/// The process's loader that waits most, with its wait share (0 to 1).
pub fn slowest_loader(p: &Process) -> Option<(f64, &DataLoaderStats)> {
    let input = p.input.as_deref()?;
    input.loaders.iter().filter_map(|l| Some((l.wait_share?, l))).max_by(|a, b| a.0.total_cmp(&b.0))
}

/// Why `p` waits on `loader`. `gpu` is the GPU it waits to feed, for its
/// NUMA node; `shm_full` the share of `/dev/shm` that counts as full.
pub fn explain(snap: &Snapshot, p: &Process, loader: &DataLoaderStats, gpu: Option<&Gpu>, shm_full: f64) -> Explained {
    if let Some(e) = shared_memory(p, shm_full) {
        return e;
    }
    let workers = loader.settings.num_workers;
    if workers == Some(0) {
        let cores = cores_for(snap, p);
        return Explained {
            cause: Cause::NoWorkers,
            evidence: "num_workers=0: the training thread fetches, decodes and collates every batch itself".into(),
            fix: format!(
                "Set DataLoader(num_workers=N){}, with persistent_workers=True so they are not restarted each \
                 epoch.",
                cores
                    .map(|c| format!(" (this job may use {c} CPUs; 4-8 workers per GPU is a common start)"))
                    .unwrap_or_default()
            ),
        };
    }
    if let Some(e) = quota(p) {
        return e;
    }
    if let Some(e) = workers_bound(snap, p) {
        return e;
    }
    if let Some(e) = numa(snap, p, gpu) {
        return e;
    }
    if loader.settings.pin_memory == Some(false) {
        return Explained {
            cause: Cause::PinMemoryOff,
            evidence: format!(
                "pin_memory=False{}: each batch is staged through pageable memory before the copy to the GPU",
                loader.batch_bytes.map(|b| format!(" with batches of {}", bytes(b))).unwrap_or_default()
            ),
            fix: "Set DataLoader(pin_memory=True) and copy with .to(device, non_blocking=True).".into(),
        };
    }
    Explained {
        cause: Cause::Unknown,
        evidence: format!(
            "{} workers{}, and none of shared memory, CPU quota, worker CPU or disk explains it",
            workers.map_or_else(|| "?".into(), |w| w.to_string()),
            loader.batches_ready.map(|r| format!(", {r} batches ready")).unwrap_or_default()
        ),
        fix: "Profile the dataset's __getitem__ and the collate function (torch.profiler, py-spy on a worker); \
              raise prefetch_factor if the wait comes in bursts."
            .into(),
    }
}

/// `/dev/shm` at least `full` (a share) used, or with less free than the
/// loaders keep in flight at their peak: the job's own batches may be
/// part of what is used, but other ranks and jobs in the same container
/// share it too, and a peak that does not fit is a bus error.
pub fn shared_memory(p: &Process, full: f64) -> Option<Explained> {
    let shm = p.input.as_deref()?.shm.as_ref()?;
    let share = shm.used_share();
    let short = matches!((shm.need, shm.free), (Some(need), Some(free)) if need > free);
    if !(share.is_some_and(|s| s >= full) || short) {
        return None;
    }
    let of = |v: Option<u64>| v.map_or_else(|| "?".into(), bytes);
    let need = match shm.need {
        Some(n) if short => format!(", the loaders need about {} in flight: more than is free", bytes(n)),
        Some(n) => format!(", the loaders need about {} in flight", bytes(n)),
        None => String::new(),
    };
    Some(Explained {
        cause: Cause::SharedMemory,
        evidence: format!("/dev/shm {} of {} used ({} free){need}", of(shm.used), of(shm.total), of(shm.free)),
        fix: SHM_FIX.into(),
    })
}

/// The CPUs this job may use: its cgroup's quota, else the host's.
fn cores_for(snap: &Snapshot, p: &Process) -> Option<f64> {
    let quota = p.host_input.as_deref().and_then(|h| h.cgroup_cpu.as_ref()).and_then(|c| c.quota_cpus);
    quota.or_else(|| snap.host.cpu_count.map(f64::from))
}

/// The cgroup held back a share of its periods since the last tick.
fn quota(p: &Process) -> Option<Explained> {
    let cg = p.host_input.as_deref()?.cgroup_cpu.as_ref()?;
    let throttled = cg.throttled_periods_percent.filter(|t| *t >= 20.0)?;
    Some(Explained {
        cause: Cause::CpuQuota,
        evidence: format!(
            "the cgroup {} was throttled in {throttled:.0}% of its CPU periods{}",
            cg.path,
            cg.quota_cpus.map(|q| format!(" (quota {q:.1} CPUs)")).unwrap_or_default()
        ),
        fix: "Raise the job's CPU limit (Kubernetes resources.limits.cpu, Slurm --cpus-per-task, docker --cpus), \
              or use fewer workers so the trainer keeps its share."
            .into(),
    })
}

/// Every live worker near a full CPU, or most of them waiting on disk.
fn workers_bound(snap: &Snapshot, p: &Process) -> Option<Explained> {
    let host = p.host_input.as_deref()?;
    let live: Vec<_> = host.workers.iter().filter(|w| w.alive).collect();
    if live.is_empty() {
        return None;
    }
    let cpu: Vec<f64> = live.iter().filter_map(|w| w.figures.cpu_percent).collect();
    let io = live
        .iter()
        .filter(|w| {
            w.figures.state == Some(TaskState::DiskSleep) || w.figures.blkio_wait_percent.is_some_and(|b| b >= 30.0)
        })
        .count();
    if io * 2 > live.len() {
        return Some(Explained {
            cause: Cause::WorkersIoBound,
            evidence: format!("{io} of {} workers are waiting on disk", live.len()),
            fix: "The data comes off storage too slowly: copy it to local NVMe or RAM, cache decoded samples, read \
                  larger sequential chunks (WebDataset shards, a memory-mapped format)."
                .into(),
        });
    }
    if cpu.len() == live.len() && cpu.iter().all(|c| *c >= BUSY_WORKER) {
        let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
        let used = snap.host.cpu_percent.zip(snap.host.cpu_count).map(|(pct, n)| f64::from(n) * (1.0 - pct / 100.0));
        return Some(Explained {
            cause: Cause::WorkersCpuBound,
            evidence: format!(
                "all {} workers busy at {mean:.0}% of a CPU each{}",
                live.len(),
                used.map(|idle| format!("; about {idle:.0} of the host's CPUs are idle")).unwrap_or_default()
            ),
            fix: "Add workers (num_workers) while idle CPUs remain, or make each sample cheaper: decode on the GPU \
                  (DALI, torchvision.io.decode_jpeg on cuda), pre-process offline."
                .into(),
        });
    }
    None
}

/// Workers that last ran on a NUMA node other than the GPU's.
fn numa(snap: &Snapshot, p: &Process, gpu: Option<&Gpu>) -> Option<Explained> {
    let node = gpu?.numa_node?;
    // One-node hosts have nothing to get wrong.
    if snap.host.numa_nodes.as_ref().is_none_or(|n| n.len() < 2) {
        return None;
    }
    let host = p.host_input.as_deref()?;
    let nodes: Vec<u32> =
        host.workers.iter().filter(|w| w.alive).filter_map(|w| w.figures.placement.as_ref()?.last_node).collect();
    let far = nodes.iter().filter(|n| **n != node).count();
    if nodes.is_empty() || far * 2 <= nodes.len() {
        return None;
    }
    Some(Explained {
        cause: Cause::NumaFar,
        evidence: format!(
            "{far} of {} workers run on another NUMA node than GPU {} (node {node})",
            nodes.len(),
            gpu?.index
        ),
        fix: format!(
            "Pin the job to the GPU's node: numactl --cpunodebind={node} --membind={node} (or Slurm --cpu-bind, \
             Kubernetes' topology manager)."
        ),
    })
}
