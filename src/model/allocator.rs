use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What the allocator probe inside a process says, joined with NVML. Sizes
/// in bytes; `None` where the framework or backend does not report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessAllocator {
    /// "torch" or "jax".
    pub framework: Arc<str>,
    pub framework_version: Option<Arc<str>>,
    /// PyTorch's allocator backend ("native", "cudaMallocAsync"), or "jax".
    pub backend: Option<Arc<str>>,
    /// The allocator settings in effect: the last string set while the
    /// process ran, where the probe knows it, else the variable's value.
    pub alloc_conf: Option<Arc<str>>,
    /// The variable the running version reads first, the one to set:
    /// `PYTORCH_ALLOC_CONF` on 2.9, `PYTORCH_CUDA_ALLOC_CONF` before and
    /// from 2.10.
    pub alloc_conf_var: Option<Arc<str>>,
    /// Where `alloc_conf` came from: "runtime" (the setters the probe
    /// wraps, PyTorch's getter from 2.12, or one snapshot for a probe
    /// started late) or "environment".
    pub alloc_conf_source: Option<Arc<str>>,
    /// Both variables' raw values, as the process has them.
    pub alloc_conf_env: Option<AllocConfEnv>,
    /// Expandable segments in effect; `None` where it does not apply (JAX)
    /// or the probe does not say.
    pub expandable_segments: Option<bool>,
    /// `CUDA_VISIBLE_DEVICES` as the process has it (`None`: unset or not
    /// reported).
    pub cuda_visible_devices: Option<Arc<str>>,
    /// `CUDA_DEVICE_ORDER` likewise.
    pub cuda_device_order: Option<Arc<str>>,
    /// Out-of-memory errors the probe saw raised in the process; counts
    /// where the backend's own `ooms` does not (cudaMallocAsync).
    pub oom_events: Option<u64>,
    /// Post-mortems of out-of-memory failures, oldest first (a few at
    /// most): what the allocator looked like at that moment.
    #[serde(default)]
    pub last_oom: Vec<OomPostMortem>,
    /// Which distributed job the ranks share: torchrun's run id, else the
    /// rendezvous address and port.
    #[serde(default)]
    pub job: Option<Arc<str>>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// Pinned (page-locked) host memory held by PyTorch's host allocator.
    pub pinned_host: Option<u64>,
    pub pinned_host_peak: Option<u64>,
    pub state: ProbeState,
    /// Milliseconds since the probe last wrote.
    pub age_ms: u64,
    pub devices: Vec<DeviceAllocator>,
}

impl ProcessAllocator {
    /// The variable to name in a hint: the one this process's PyTorch
    /// reads first, or the name every version still reads when unknown.
    pub fn conf_var(&self) -> &str {
        self.alloc_conf_var.as_deref().unwrap_or("PYTORCH_CUDA_ALLOC_CONF")
    }
}

/// The raw values of the two variables PyTorch reads its allocator
/// settings from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocConfEnv {
    pub pytorch_alloc_conf: Option<Arc<str>>,
    pub pytorch_cuda_alloc_conf: Option<Arc<str>>,
}

/// How a framework's device was matched to NVML's GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuMatch {
    Uuid,
    PciBusId,
    /// The device's CUDA ordinal through `CUDA_VISIBLE_DEVICES`.
    CudaVisibleDevices,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeState {
    /// Written within the last two probe intervals.
    Fresh,
    /// The process is alive but its probe has gone quiet.
    Stale,
    /// The process has exited; the figures are its last words.
    Gone,
}

/// One device as one process's allocator sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceAllocator {
    /// NVML's index of the GPU, `None` when the probe's device could not be
    /// matched to a GPU gpuscope watches (`unmatched_reason` says why).
    pub gpu: Option<u32>,
    /// When the device is a MIG device of GPU `gpu`: its MIG device index
    /// (`gpus[].mig_devices[].index`) and UUID. Absent in recordings made
    /// before gpuscope read MIG devices.
    #[serde(default)]
    pub mig_device: Option<u32>,
    #[serde(default)]
    pub mig_uuid: Option<String>,
    /// The framework's own index of the device (CUDA's ordinal among the
    /// visible devices).
    pub ordinal: Option<u32>,
    /// How `gpu` was found; `None` when it was not.
    pub gpu_match: Option<GpuMatch>,
    pub unmatched_reason: Option<String>,
    /// Tensors' bytes (`allocated_bytes.all.current`).
    pub allocated: Option<u64>,
    pub allocated_peak: Option<u64>,
    /// What the caching allocator holds from the driver (`reserved_bytes`).
    pub reserved: Option<u64>,
    pub reserved_peak: Option<u64>,
    pub active: Option<u64>,
    /// Free bytes trapped inside partly used segments: `empty_cache()`
    /// cannot return them.
    pub inactive_split: Option<u64>,
    pub requested: Option<u64>,
    /// reserved − allocated: free inside the allocator, reusable by this
    /// process only.
    pub cached: Option<u64>,
    /// NVML's figure for the process − reserved: CUDA context, cuBLAS and
    /// cuDNN workspaces, NCCL buffers, other libraries.
    pub overhead: Option<u64>,
    /// Bytes reserved by private pools (CUDA graphs), where reported.
    pub private_pools: Option<u64>,
    /// What `torch.cuda.empty_cache()` could hand back: cached − inactive
    /// split − private pools.
    pub releasable: Option<u64>,
    pub segments: Option<u64>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    /// inactive_split / reserved (JAX: XLA's own, 1 − largest free block /
    /// free bytes of the pool); `None` where the backend makes it
    /// meaningless.
    pub fragmentation: Option<f64>,
    /// JAX: the largest free block in XLA's pool.
    pub largest_free_block: Option<u64>,
    /// JAX: the most XLA's allocator may take.
    pub bytes_limit: Option<u64>,
}

/// A GPU's totals over the processes whose probes report on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuAllocator {
    pub probed_processes: u32,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub cached: Option<u64>,
    pub inactive_split: Option<u64>,
    /// Overhead of the probed processes (NVML's figure − reserved).
    pub overhead: Option<u64>,
    /// What NVML attributes to processes without a probe.
    pub unprobed: Option<u64>,
}

/// What the allocator looked like when an allocation failed for good:
/// from PyTorch's out-of-memory observer (the counters and a summary of
/// the segments at that moment), or from the OutOfMemoryError that escaped
/// where no observer exists (cudaMallocAsync, PyTorch before 2.0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomPostMortem {
    /// "observer" or "exception".
    pub source: String,
    pub time_unix_ms: u64,
    /// The framework's device ordinal.
    pub device: Option<u32>,
    /// NVML's index of that device's GPU, once gpuscope has matched it.
    #[serde(default)]
    pub gpu: Option<u32>,
    /// Bytes the failed allocation asked for.
    pub requested: Option<u64>,
    /// What the observer was told: the most the allocator may hold on
    /// the device (the memory fraction's limit where one is set, else the
    /// device's total: CUDACachingAllocator.cpp passes `set_fraction ?
    /// allowed_memory_maximum : device_total`), and the device's free
    /// memory as the driver saw it. Probes before this name called the
    /// first `device_allocated`, which it never was.
    #[serde(alias = "device_allocated")]
    pub device_limit: Option<u64>,
    pub device_free: Option<u64>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub inactive_split: Option<u64>,
    /// Per pool ("large", "small"); `None` without a segment summary.
    pub pools: Option<Vec<OomPool>>,
    /// The largest segments, largest first.
    pub segments: Option<Vec<OomSegment>>,
    /// The probe stopped walking blocks at its bound (50,000): the pools
    /// cover only the segments before that.
    #[serde(default)]
    pub truncated: bool,
    /// The one-line reading of the above, gpuscope's.
    #[serde(default)]
    pub verdict: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomPool {
    pub pool: String,
    pub segments: u64,
    pub total: u64,
    pub allocated: u64,
    pub free: u64,
    pub largest_free_block: u64,
    /// Free bytes in blocks smaller than the request: free, yet of no use.
    pub free_below_request: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomSegment {
    pub pool: String,
    pub total: u64,
    pub allocated: u64,
    pub free: u64,
    /// Live blocks share the segment: its free bytes are trapped (inactive
    /// split); a segment that is all free is cache `empty_cache()` returns.
    pub split: bool,
    pub largest_free_block: u64,
}

impl OomPostMortem {
    /// The largest free block of the allocator on that device, where the
    /// segments were seen.
    pub fn largest_free_block(&self) -> Option<u64> {
        self.pools.as_ref()?.iter().map(|p| p.largest_free_block).max()
    }

    /// Why the allocation failed, in one line: free memory scattered in
    /// pieces too small for the request (fragmentation), or none left.
    pub fn read(&self) -> String {
        use crate::util::units::bytes;
        let on = match (self.gpu, self.device) {
            (Some(g), _) => format!(" on GPU {g}"),
            (None, Some(d)) => format!(" on cuda:{d}"),
            (None, None) => String::new(),
        };
        let need = self.requested.map_or_else(|| "an allocation".to_string(), bytes);
        let device = self.device_free.map_or_else(|| "n/a".to_string(), bytes);
        let (Some(pools), Some(requested)) = (self.pools.as_deref(), self.requested) else {
            let why = if self.source == "exception" {
                "the allocator gave no segment detail; only the OutOfMemoryError was seen"
            } else {
                "no segment detail"
            };
            return format!("needed {need}{on}: out of memory ({why})");
        };
        let free: u64 = pools.iter().map(|p| p.free).sum();
        let largest = self.largest_free_block().unwrap_or(0);
        if free >= requested && largest < requested {
            format!(
                "needed {need}{on}; {} free in the allocator but the largest free block is {} (fragmentation)",
                bytes(free),
                bytes(largest)
            )
        } else {
            format!("needed {need}{on}; {} free in the allocator, {device} on the device (out of memory)", bytes(free))
        }
    }
}
