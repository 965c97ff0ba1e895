//! What the probe inside a PyTorch process says about the job's input
//! pipeline (how long it waits for its DataLoaders, their settings,
//! `/dev/shm`) and the environment it runs in (versions, arch flags, TF32,
//! autocast). The probe's file carries the same shape; `probe::files`
//! checks and bounds it.

use serde::{Deserialize, Serialize};

/// The DataLoaders a process iterates and the shared memory their workers
/// hand batches through. `None` on the process where no probe reports it
/// (JAX, a probe older than these figures).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InputPipeline {
    /// The probe wraps `_BaseDataLoaderIter.__next__`: `torch.utils.data`
    /// is loaded in the process. False: no loader can be seen (yet).
    pub hooked: bool,
    /// The recent window the loaders' rates and shares cover, seconds
    /// (30 for the probe).
    pub window_s: Option<f64>,
    /// Live loaders first, then those with a batch in the window; at most
    /// 8.
    pub loaders: Vec<DataLoaderStats>,
    /// Loaders the probe follows but left out of `loaders`.
    pub loaders_left_out: u32,
    pub shm: Option<SharedMemory>,
    /// DataLoader failures, oldest first (4 at most): the process's last
    /// view when its workers died, kept like an OOM post-mortem.
    pub failures: Vec<LoaderFailure>,
}

impl InputPipeline {
    /// The largest wait share of the process's loaders, where any says.
    pub fn wait_share(&self) -> Option<f64> {
        self.loaders.iter().filter_map(|l| l.wait_share).reduce(f64::max)
    }
}

/// One DataLoader, followed across its iterators (a new one each epoch
/// unless `persistent_workers`). Rates and shares are over the last
/// `window_s` seconds; `None` until a window of a second or more exists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataLoaderStats {
    /// The probe's number for the loader, stable for its life.
    pub id: u32,
    /// An iterator of it is alive (an epoch in progress, or persistent
    /// workers); false: between epochs, its figures fading out of the
    /// window.
    pub live: bool,
    /// The thread that calls `__next__` (the training thread, or a
    /// prefetcher's): the wait is that thread's.
    pub consumer_thread: Option<String>,
    /// Batches taken since the probe saw the loader.
    pub batches: u64,
    /// Epochs begun since then (first batches seen).
    pub epochs: u64,
    /// The span the figures below cover, seconds.
    pub window_s: Option<f64>,
    pub batches_per_s: Option<f64>,
    /// Share of wall time (0 to 1) the consuming thread spent inside
    /// `__next__`, each epoch's first batch apart (neither its wait nor its
    /// time counts): the share of each step that waits for data.
    pub wait_share: Option<f64>,
    /// Mean seconds each batch waited, first batches apart.
    pub wait_per_batch_s: Option<f64>,
    /// How long the thread has been inside `__next__` right now; 0 when it
    /// is not.
    pub waiting_s: Option<f64>,
    /// The latest epoch's first batch: its wait includes starting the
    /// workers.
    pub first_batch_wait_s: Option<f64>,
    /// The iterator's class (`_MultiProcessingDataLoaderIter`, ...).
    pub iterator: Option<String>,
    /// The dataset's class.
    pub dataset: Option<String>,
    #[serde(flatten)]
    pub settings: LoaderSettings,
    /// Worker processes the iterator holds (may exceed `worker_pids`).
    pub workers: Option<u32>,
    /// Their PIDs as the process sees them (its PID namespace), 64 at
    /// most; `None` without workers.
    pub worker_pids: Option<Vec<u32>>,
    /// A pin-memory thread runs (PyTorch starts one with workers and
    /// `pin_memory`); `None` without workers.
    pub pin_memory_thread: Option<bool>,
    /// Batches ready for the next `__next__` (the data queue's size).
    pub batches_ready: Option<u64>,
    /// Bytes of tensors in a recent batch (sampled every few seconds).
    pub batch_bytes: Option<u64>,
    /// Bytes of `/dev/shm` the loader needs in flight: batch bytes ×
    /// (prefetch_factor × num_workers + 2); 0 without workers or live
    /// iterator.
    pub shm_need: Option<u64>,
}

/// How a DataLoader is set up, as its iterator says (`None`: the iterator
/// does not have the attribute).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoaderSettings {
    pub num_workers: Option<u32>,
    pub pin_memory: Option<bool>,
    /// `None` without workers, where it does not apply.
    pub prefetch_factor: Option<u32>,
    pub persistent_workers: Option<bool>,
}

/// The process's own `/dev/shm` (inside its container), and what bears on
/// it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedMemory {
    pub path: Option<String>,
    /// Bytes, from the process's own `statvfs`.
    pub total: Option<u64>,
    pub free: Option<u64>,
    /// total − free, gpuscope's.
    pub used: Option<u64>,
    /// What the live loaders need in flight, summed; `None` where one of
    /// them cannot say.
    pub need: Option<u64>,
    /// `torch.multiprocessing.get_sharing_strategy()`: "file_descriptor"
    /// (Linux's default: each batch in flight holds a descriptor) or
    /// "file_system".
    pub sharing_strategy: Option<String>,
    /// `RLIMIT_NOFILE`, soft and hard; `None` where unlimited.
    pub open_files_limit: Option<u64>,
    pub open_files_limit_hard: Option<u64>,
}

impl SharedMemory {
    /// used / total, 0 to 1.
    pub fn used_share(&self) -> Option<f64> {
        match (self.used, self.total) {
            (Some(used), Some(total)) if total > 0 => Some(used as f64 / total as f64),
            _ => None,
        }
    }
}

/// What a DataLoader failure's message says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoaderFailureKind {
    /// A worker could not reserve a batch's shared memory ("unable to
    /// allocate shared memory(shm) ... No space left on device (28)",
    /// PyTorch with PR 161910, about 2.10+).
    ShmExhausted,
    /// A worker died of SIGBUS: before 2.10, what a full `/dev/shm` does.
    BusError,
    /// A worker killed by another signal (the OOM killer's SIGKILL, ...).
    WorkerKilled,
    /// "DataLoader worker (pid(s) N) exited unexpectedly".
    WorkerExited,
    /// The descriptor limit, with the `file_descriptor` sharing strategy.
    TooManyOpenFiles,
    /// An exception a worker raised, re-raised in the trainer.
    WorkerException,
    /// "DataLoader timed out after N seconds".
    Timeout,
    /// Anything else `__next__` raised (a kind a newer probe names, too).
    #[serde(other)]
    Other,
}

impl LoaderFailureKind {
    /// The JSON word, for a label, without serializing.
    pub fn word(self) -> &'static str {
        match self {
            Self::ShmExhausted => "shm_exhausted",
            Self::BusError => "bus_error",
            Self::WorkerKilled => "worker_killed",
            Self::WorkerExited => "worker_exited",
            Self::TooManyOpenFiles => "too_many_open_files",
            Self::WorkerException => "worker_exception",
            Self::Timeout => "timeout",
            Self::Other => "other",
        }
    }

    /// The kinds that end the workers because of shared memory.
    pub fn is_shm(self) -> bool {
        matches!(self, Self::ShmExhausted | Self::BusError)
    }
}

/// A DataLoader failure, as the process saw it: the message, how full
/// `/dev/shm` was at that moment, and the loader's settings. (A missing
/// `Option` field reads as `None`: serde's own rule.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderFailure {
    pub time_unix_ms: u64,
    pub kind: LoaderFailureKind,
    /// The exception's class.
    pub exception: Option<String>,
    /// PyTorch's message, on one line; its start and end where long.
    pub message: Option<String>,
    /// `DataLoaderStats::id` of the loader, where known.
    pub loader: Option<u32>,
    /// The worker the message names.
    pub worker_pid: Option<u32>,
    /// `/dev/shm` at that moment.
    pub shm_total: Option<u64>,
    pub shm_free: Option<u64>,
    pub sharing_strategy: Option<String>,
    pub batch_bytes: Option<u64>,
    /// The loader's settings then.
    #[serde(flatten)]
    pub settings: LoaderSettings,
}

/// The numeric environment a PyTorch job runs in, read by its probe at
/// most every 10 s. `None` fields: the release has no such getter, or the
/// build lacks the library.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameworkEnvironment {
    pub torch_version: Option<String>,
    /// `torch.version.cuda`: the CUDA the wheel was built with.
    pub cuda_version: Option<String>,
    pub hip_version: Option<String>,
    /// cuDNN as loaded at run time, and as the wheel was compiled against
    /// (a different major version is what makes
    /// `torch.backends.cudnn.version()` raise).
    pub cudnn_version: Option<String>,
    pub cudnn_compiled_version: Option<String>,
    /// `torch._C._cuda_getArchFlags()`: the `sm_XY` the wheel has code for.
    pub arch_flags: Option<String>,
    /// The fp32_precision settings ("ieee", "tf32"), where the release has
    /// them (2.9+).
    pub fp32_precision_matmul: Option<String>,
    pub fp32_precision_conv: Option<String>,
    /// TF32 allowed for cuBLAS matmuls, for cuDNN convolutions.
    pub matmul_tf32: Option<bool>,
    pub cudnn_tf32: Option<bool>,
    /// `torch.get_float32_matmul_precision()` ("highest", "high",
    /// "medium"); `None` where the fp32_precision settings replace it.
    pub float32_matmul_precision: Option<String>,
    pub cudnn_benchmark: Option<bool>,
    pub cudnn_deterministic: Option<bool>,
    /// The devices the process uses, by the framework's ordinal.
    pub devices: Vec<DeviceArch>,
    pub autocast: Option<Autocast>,
    pub grad_scaler: Option<GradScalerUse>,
}

/// A device's compute capability against the wheel's arch flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceArch {
    /// The framework's ordinal (`allocator.devices[].ordinal` places it on
    /// a GPU).
    #[serde(alias = "index")]
    pub ordinal: u32,
    /// "9.0".
    pub capability: Option<String>,
    /// The wheel has code for it, by PyTorch's own rule (`_check_cubins`:
    /// some `sm_XY` with the device's major version); false: kernels fail
    /// with "no kernel image is available".
    pub arch_supported: Option<bool>,
}

/// Autocast as the probe counted it (whether it is on is per thread, so
/// only its entries say it is in use).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Autocast {
    /// The probe counts entries (it wrapped `autocast.__enter__`).
    pub hooked: bool,
    /// Enabled regions entered since the probe wrapped it.
    pub entries: u64,
    /// Seconds since the last entry, at the probe's last write.
    pub last_s_ago: Option<f64>,
    /// The last entry's device type ("cuda") and dtype ("torch.bfloat16").
    pub device_type: Option<String>,
    pub dtype: Option<String>,
}

/// GradScalers alive in the process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GradScalerUse {
    /// `None` where the probe came after the program could have made one.
    pub count: Option<u32>,
    /// One of them is enabled.
    pub enabled: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::LoaderFailureKind::*;

    #[test]
    fn the_kind_label_is_the_json_word() {
        let all =
            [ShmExhausted, BusError, WorkerKilled, WorkerExited, TooManyOpenFiles, WorkerException, Timeout, Other];
        for kind in all {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.word(), "{kind:?}");
        }
    }
}
