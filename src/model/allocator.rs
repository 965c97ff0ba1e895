use serde::{Deserialize, Serialize};

/// What the allocator probe inside a process says, joined with NVML. Sizes
/// in bytes; `None` where the framework or backend does not report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessAllocator {
    /// "torch" or "jax".
    pub framework: String,
    pub framework_version: Option<String>,
    /// PyTorch's allocator backend ("native", "cudaMallocAsync"), or "jax".
    pub backend: Option<String>,
    /// `PYTORCH_CUDA_ALLOC_CONF` (or `PYTORCH_ALLOC_CONF`) as the process saw it.
    pub alloc_conf: Option<String>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceAllocator {
    /// NVML's index of the GPU (matched by UUID), `None` when the probe's
    /// device could not be matched to a GPU gpuscope watches.
    pub gpu: Option<u32>,
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
    pub segments: Option<u64>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    /// inactive_split / reserved (JAX: 1 − largest free block / free
    /// limit); `None` where the backend makes it meaningless.
    pub fragmentation: Option<f64>,
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
