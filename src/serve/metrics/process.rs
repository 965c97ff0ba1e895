//! Per-process families (labels `pid`, `user`, `command`, and where the
//! process is in one, its workload: `container`, `pod`, `namespace`,
//! `slurm_job`, named as dcgm-exporter names them), and the allocator
//! probe's figures per process and GPU (plus `gpu`, `rank`, and the job
//! the ranks share: `job_id`, the probe's job key, and `world_size`, so
//! that a Prometheus can group a job's ranks across hosts; `job` and
//! `instance` are Prometheus's own). An empty label is left out, as
//! Prometheus treats it.
//! A series for a process on a MIG device also carries that device's
//! labels (`GPU_I_ID`, `GPU_I_PROFILE`, `GPU_CI_ID`, `mig_uuid`; see
//! `mig.rs`). The input pipeline's families are in `input.rs`.

use super::mig::MigLabels;
use super::{counter, gauge};
use crate::model::{DeviceAllocator, Process, ProcessUtilization, Snapshot};
use crate::serve::encode::{Def, Encoder, Value};
use crate::serve::labels;

pub static GPU_MEMORY: Def =
    gauge("gpuscope_process_gpu_memory_bytes", Some("bytes"), "Device memory NVML attributes to the process.");
pub static CPU: Def = gauge(
    "gpuscope_process_cpu_usage_ratio",
    Some("ratio"),
    "CPU time per second of wall time: 1 is one core busy, more with threads.",
);
pub static HOST_MEMORY: Def =
    gauge("gpuscope_process_host_memory_bytes", Some("bytes"), "Resident host memory of the process.");

pub static SM_UTIL: Def = gauge(
    "gpuscope_process_sm_utilization_ratio",
    Some("ratio"),
    "Share of NVML's last sample period in which a kernel of the process ran, 0 to 1: per-process utilisation, \
     not SM activity (NVML: unreliable with several processes on a GPU).",
);
pub static MEMORY_UTIL: Def = gauge(
    "gpuscope_process_memory_utilization_ratio",
    Some("ratio"),
    "The process's share of device memory bandwidth in NVML's last sample, 0 to 1.",
);
pub static ENCODER_UTIL: Def =
    gauge("gpuscope_process_encoder_utilization_ratio", Some("ratio"), "The process's video encoder share, 0 to 1.");
pub static DECODER_UTIL: Def =
    gauge("gpuscope_process_decoder_utilization_ratio", Some("ratio"), "The process's video decoder share, 0 to 1.");

pub static ALLOCATED: Def =
    gauge("gpuscope_allocator_allocated_bytes", Some("bytes"), "Bytes in live tensors (allocated_bytes.all.current).");
pub static RESERVED: Def = gauge(
    "gpuscope_allocator_reserved_bytes",
    Some("bytes"),
    "Bytes the caching allocator holds from the driver (reserved_bytes.all.current).",
);
pub static CACHED: Def = gauge(
    "gpuscope_allocator_cached_bytes",
    Some("bytes"),
    "Reserved minus allocated: free inside the allocator, reusable by this process only.",
);
pub static INACTIVE_SPLIT: Def = gauge(
    "gpuscope_allocator_inactive_split_bytes",
    Some("bytes"),
    "Free bytes trapped in partly used segments; empty_cache() cannot return them.",
);
pub static OVERHEAD: Def = gauge(
    "gpuscope_allocator_overhead_bytes",
    Some("bytes"),
    "NVML's figure minus reserved: CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers.",
);
pub static ALLOCATED_PEAK: Def = gauge(
    "gpuscope_allocator_peak_allocated_bytes",
    Some("bytes"),
    "Most bytes in live tensors since the process started or last reset its peaks (allocated_bytes.all.peak).",
);
pub static RESERVED_PEAK: Def = gauge(
    "gpuscope_allocator_peak_reserved_bytes",
    Some("bytes"),
    "Most bytes the caching allocator held from the driver (reserved_bytes.all.peak).",
);
pub static PINNED_HOST: Def = gauge(
    "gpuscope_process_pinned_host_bytes",
    Some("bytes"),
    "Page-locked host memory PyTorch's host allocator holds (torch.cuda.host_memory_stats).",
);
pub static FRAGMENTATION: Def = gauge(
    "gpuscope_allocator_fragmentation_ratio",
    Some("ratio"),
    "Inactive split over reserved, 0 to 1; absent where the backend makes it meaningless.",
);
pub static RETRIES: Def = counter(
    "gpuscope_allocator_alloc_retries",
    None,
    "cudaMalloc failures the allocator answered by flushing its cache and retrying.",
);
pub static OOMS: Def = counter("gpuscope_allocator_ooms", None, "Out-of-memory errors the allocator raised.");
pub static LARGEST_FREE_BLOCK: Def = gauge(
    "gpuscope_allocator_largest_free_block_bytes",
    Some("bytes"),
    "The allocator's largest free block: JAX's, or PyTorch's at its latest out-of-memory failure.",
);

pub static ALL: &[&Def] = &[
    &GPU_MEMORY,
    &CPU,
    &HOST_MEMORY,
    &SM_UTIL,
    &MEMORY_UTIL,
    &ENCODER_UTIL,
    &DECODER_UTIL,
    &ALLOCATED,
    &RESERVED,
    &CACHED,
    &INACTIVE_SPLIT,
    &OVERHEAD,
    &ALLOCATED_PEAK,
    &RESERVED_PEAK,
    &PINNED_HOST,
    &FRAGMENTATION,
    &RETRIES,
    &OOMS,
    &LARGEST_FREE_BLOCK,
];

type AllocReading = fn(&DeviceAllocator) -> Option<Value>;

fn v<T: Into<Value>>(x: Option<T>) -> Option<Value> {
    x.map(Into::into)
}

static ALLOCATOR: [(&Def, AllocReading); 11] = [
    (&ALLOCATED, |d| v(d.allocated)),
    (&RESERVED, |d| v(d.reserved)),
    (&CACHED, |d| v(d.cached)),
    (&INACTIVE_SPLIT, |d| v(d.inactive_split)),
    (&OVERHEAD, |d| v(d.overhead)),
    (&ALLOCATED_PEAK, |d| v(d.allocated_peak)),
    (&RESERVED_PEAK, |d| v(d.reserved_peak)),
    (&FRAGMENTATION, |d| v(d.fragmentation)),
    (&RETRIES, |d| v(d.alloc_retries)),
    (&OOMS, |d| v(d.ooms)),
    (&LARGEST_FREE_BLOCK, |d| v(d.largest_free_block)),
];

/// The labels one process's series share.
pub(super) struct Who<'a> {
    pub(super) process: &'a Process,
    pid: String,
    user: std::borrow::Cow<'a, str>,
    command: String,
    slurm_job: String,
    rank: String,
    job_id: String,
    world_size: String,
}

/// Labels before `rank`: the per-process families stop there; the
/// allocator's go on with `rank`, `job_id`, `world_size`.
const BEFORE_RANK: usize = 8;

impl Who<'_> {
    fn labels<'s>(&'s self, gpu: &'s str) -> [(&'static str, &'s str); BEFORE_RANK + 3] {
        let w = self.process.workload.as_ref();
        // As dcgm-exporter names them: the pod's and container's names and
        // the namespace where the kubelet or the container's own files
        // gave them (`sources::pods`, each name checked and bounded); else
        // the pod's UID and the runtime's container id, as before, and no
        // namespace. One value per process either way: no more series.
        let container = w.and_then(|w| w.pod.container_name.as_deref().or(w.container_id.as_deref())).unwrap_or("");
        let pod = w.and_then(|w| w.pod.pod_name.as_deref().or(w.pod_uid.as_deref())).unwrap_or("");
        let namespace = w.and_then(|w| w.pod.pod_namespace.as_deref()).unwrap_or("");
        [
            ("gpu", gpu),
            ("pid", &self.pid),
            ("user", &self.user),
            ("command", &self.command),
            ("container", container),
            ("pod", pod),
            ("namespace", namespace),
            ("slurm_job", &self.slurm_job),
            ("rank", &self.rank),
            ("job_id", &self.job_id),
            ("world_size", &self.world_size),
        ]
    }

    /// Every label but `gpu`: for what belongs to the process as a whole
    /// and to its job (the input pipeline's figures).
    pub(super) fn process_labels(&self) -> [(&'static str, &str); BEFORE_RANK + 2] {
        let [_, rest @ ..] = self.labels("");
        rest
    }
}

pub fn write(enc: &mut Encoder, snap: &Snapshot) {
    let who: Vec<Who> = snap
        .processes
        .iter()
        .map(|p| Who {
            process: p,
            pid: p.pid.to_string(),
            user: labels::value(p.user.as_deref().unwrap_or("")),
            command: labels::command(p),
            slurm_job: p.workload.as_ref().and_then(|w| w.slurm_job).map(|j| j.to_string()).unwrap_or_default(),
            rank: p.allocator.as_ref().and_then(|a| a.rank).map(|r| r.to_string()).unwrap_or_default(),
            job_id: labels::value(p.allocator.as_ref().and_then(|a| a.job.as_deref()).unwrap_or_default()).into_owned(),
            world_size: p.allocator.as_ref().and_then(|a| a.world_size).map(|n| n.to_string()).unwrap_or_default(),
        })
        .collect();
    let mut f = enc.family(&GPU_MEMORY);
    for w in &who {
        for g in &w.process.gpus {
            let (gpu, mig) = (g.index.to_string(), MigLabels::find(snap, g.index, g.mig_device));
            let mut labels = w.labels(&gpu)[..BEFORE_RANK].to_vec();
            labels.extend(mig.iter().flat_map(MigLabels::instance));
            f.sample(&labels, g.used_memory);
        }
    }
    let mut f = enc.family(&CPU);
    for w in &who {
        f.sample(&w.labels("")[1..BEFORE_RANK], w.process.cpu_percent.map(|c| c / 100.0));
    }
    let mut f = enc.family(&HOST_MEMORY);
    for w in &who {
        f.sample(&w.labels("")[1..BEFORE_RANK], w.process.host_memory);
    }
    type UtilReading = fn(&ProcessUtilization) -> u32;
    let shares: [(&Def, UtilReading); 4] = [
        (&SM_UTIL, |u| u.sm),
        (&MEMORY_UTIL, |u| u.memory),
        (&ENCODER_UTIL, |u| u.encoder),
        (&DECODER_UTIL, |u| u.decoder),
    ];
    for (def, read) in shares {
        let mut f = enc.family(def);
        for gpu in &snap.gpus {
            let index = gpu.index.to_string();
            for u in gpu.process_utilization.iter().flatten() {
                let Some(w) = who.iter().find(|w| w.process.pid == u.pid) else { continue };
                f.sample(&w.labels(&index)[..4], Some(f64::from(read(u)) / 100.0));
            }
        }
    }
    let mut f = enc.family(&PINNED_HOST);
    for w in &who {
        let pinned = w.process.allocator.as_ref().and_then(|a| a.pinned_host);
        if pinned.is_some() {
            let all = w.labels("");
            // `pid`, `user`, `command`, then the job's: no GPU, no workload.
            let labels: Vec<(&str, &str)> = all[1..4].iter().chain(&all[BEFORE_RANK..]).copied().collect();
            f.sample(&labels, pinned);
        }
    }
    // A device the probe saw but gpuscope could not match to a GPU has no
    // `gpu` label to tell it apart from another such device: left out.
    let devices: Vec<(&Who, String, Option<MigLabels>, &DeviceAllocator)> = who
        .iter()
        .flat_map(|w| w.process.allocator.iter().flat_map(|a| &a.devices).map(move |d| (w, d)))
        .filter_map(|(w, d)| Some((w, d.gpu?.to_string(), MigLabels::find(snap, d.gpu?, d.mig_device), d)))
        .collect();
    for (def, read) in &ALLOCATOR {
        let mut f = enc.family(def);
        for (w, gpu, mig, d) in &devices {
            let mut labels = w.labels(gpu).to_vec();
            labels.extend(mig.iter().flat_map(MigLabels::instance));
            f.sample(&labels, read(d));
        }
    }
    super::input::write(enc, &who);
}
