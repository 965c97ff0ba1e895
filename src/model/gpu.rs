use serde::{Deserialize, Serialize};

use super::{DriverEvent, GpuAllocator, Health, NvLinkErrors, RecoveryAction, XidCount};

/// One GPU as NVML reports it. Readings the device does not support, or that
/// failed, are `None` (`null` in JSON): never 0, which would be a lie.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// NVML's index, the same as `nvidia-smi` and `CUDA_VISIBLE_DEVICES`
    /// with the default PCI bus order.
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub state: GpuState,
    /// Why readings are missing, when it is not merely "not supported".
    pub error: Option<String>,
    pub memory: GpuMemory,
    pub utilization: Utilization,
    pub temperature_c: Option<u32>,
    pub fan_percent: Option<u32>,
    pub power_draw_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub clocks: Clocks,
    pub pcie: Pcie,
    /// "P0" (fastest) to "P15".
    pub performance_state: Option<String>,
    /// Why the clocks are held down, in NVML's terms (snake_case).
    pub throttle_reasons: Option<Vec<String>>,
    pub mig_mode: Option<MigMode>,
    /// With MIG on, the MIG devices (GPU instance + compute instance) NVML
    /// lists under this GPU, by MIG device index; empty otherwise.
    /// Absent in recordings made before gpuscope read MIG devices.
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
    /// Totals of the allocator probes on this GPU; `None` when no process
    /// on it has a probe.
    pub allocator: Option<GpuAllocator>,
    /// The board's serial number (none on GeForce boards).
    #[serde(default)]
    pub serial: Option<String>,
    /// Whether the driver stays loaded with no client (Linux only).
    #[serde(default)]
    pub persistence_mode: Option<bool>,
    #[serde(default)]
    pub compute_mode: Option<ComputeMode>,
    /// The limit software set (`nvidia-smi -pl`); `power_limit_w` is the
    /// one enforced, the lowest of every limiter.
    #[serde(default)]
    pub power_management_limit_w: Option<f64>,
    /// The highest clocks the GPU is designed to run at.
    #[serde(default)]
    pub max_clocks: MaxClocks,
    #[serde(default)]
    pub ecc: Ecc,
    /// The BAR1 aperture, through which the CPU and peers map device memory.
    #[serde(default)]
    pub bar1_memory: Bar1Memory,
    /// The NVLink links and their traffic; `None` on a board without
    /// NVLink (or a driver that does not say).
    #[serde(default)]
    pub nvlink: Option<NvLink>,
    /// Rows of device memory remapped to spares (Ampere and later).
    #[serde(default)]
    pub remapped_rows: RemappedRows,
    /// Per-process accounting (`nvidia-smi -am 1`); `None` where the board
    /// does not keep it.
    #[serde(default)]
    pub accounting: Option<Accounting>,
    /// NVML's newest utilisation sample of each process on this GPU (as
    /// nvitop's %SM and %GMBW show them); a process without one had none
    /// to report. `None` where the GPU does not sample processes. NVML
    /// documents these as unreliable with several processes on one GPU.
    #[serde(default)]
    pub process_utilization: Option<Vec<ProcessUtilization>>,
    /// How much of the GPU really works, from its activity counters (NVML
    /// GPM, Hopper and newer); `None` with the reason in
    /// `activity_unavailable`. Absent in recordings made before gpuscope
    /// read them.
    #[serde(default)]
    pub activity: Option<Activity>,
    #[serde(default)]
    pub activity_unavailable: Option<ActivityUnavailable>,
    /// The driver's events gpuscope heard on this GPU (Xid critical
    /// errors, ECC errors), oldest first, the newest `MAX_DRIVER_EVENTS`;
    /// empty where none came or gpuscope is not listening
    /// (`sources.driver_events` says which).
    #[serde(default)]
    pub driver_events: Vec<DriverEvent>,
    /// Xid events counted since gpuscope began listening, by Xid.
    #[serde(default)]
    pub xid_counts: Vec<XidCount>,
    /// The recovery action the driver recommends (R570 and later); `None`
    /// where the driver or board does not say.
    #[serde(default)]
    pub recovery_action: Option<RecoveryAction>,
    /// NVLink's error counters; `None` without NVLink, or where the
    /// driver keeps none.
    #[serde(default)]
    pub nvlink_errors: Option<NvLinkErrors>,
    /// OK / warning / critical, with the reasons; `None` where it was not
    /// judged (a recording made before gpuscope judged health).
    #[serde(default)]
    pub health: Option<Health>,
    /// The PCIe link's generation and width, and its replay counter.
    /// Absent in recordings made before gpuscope read them.
    #[serde(default)]
    pub pcie_link: PcieLink,
    /// The NUMA node the GPU's PCIe slot hangs off (sysfs `numa_node`):
    /// CPUs on another node reach it across the socket link. `None` where
    /// the platform does not say (one node, or firmware that leaves it
    /// out). Absent in recordings made before gpuscope read it.
    #[serde(default)]
    pub numa_node: Option<u32>,
    /// Whether the GPU's memory is the host's own (GB10 / DGX Spark):
    /// `Some(true)` where the driver answers NOT_SUPPORTED for the memory
    /// and says the GPU reaches host memory through ATS
    /// (`nvmlDeviceGetAddressingMode`). `memory` then holds the machine's
    /// memory as `/proc/meminfo` counts it, not a framebuffer's.
    /// `Some(false)` where the board reports a memory of its own; `None`
    /// where it was not told (a lost GPU, an older recording).
    #[serde(default)]
    pub unified_memory: Option<bool>,
    /// The energy the GPU has used since the driver was last loaded, in
    /// millijoules (`nvmlDeviceGetTotalEnergyConsumption`; nvml.h: Volta
    /// and newer). A counter: what a span of time cost is the difference
    /// of two readings. `None` where the board does not keep it. Absent in
    /// recordings made before gpuscope read it.
    #[serde(default)]
    pub energy_mj: Option<u64>,
}

/// The GPU's PCIe link. An idle link drops to a lower generation by design
/// (power saving); one below its maximum generation or width while the GPU
/// is busy is a fault (a card not fully seated, a riser, a bad slot), and
/// a growing replay counter means the link retries transfers it got wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    pub gen_current: Option<u32>,
    /// The highest generation this GPU and the slot it sits in can both
    /// run (nvml.h: a Gen4 GPU in a Gen3 slot says 3).
    pub gen_max: Option<u32>,
    /// Lanes now and at most (x16 on data-centre boards).
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
    /// Link-level retries since the driver loaded
    /// (`nvmlDeviceGetPcieReplayCounter`); `None` where the board keeps none.
    pub replay_counter: Option<u64>,
    /// How many more there are than at the last tick; `None` on the first
    /// tick, and after the counter went back (a driver reload).
    pub replays_since_last: Option<u64>,
}

/// How many of a GPU's driver events a snapshot keeps (`driver_events`).
pub const MAX_DRIVER_EVENTS: usize = 32;

/// The GPU's activity counters (NVML's GPM metrics) between two samples
/// `period_ms` apart. Percentages are of the period, 0 to 100: `sm_active`
/// is the share of time an average SM had a warp resident, where
/// `Utilization::gpu` counts any kernel on any SM as 100 %. A metric the
/// board does not report is `None`. Each field names the GPM metric id and
/// the dcgm-exporter field that reads the same counter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub period_ms: u64,
    /// 2, `DCGM_FI_PROF_SM_ACTIVE`.
    pub sm_active: Option<f64>,
    /// 3, `DCGM_FI_PROF_SM_OCCUPANCY`: resident warps of the maximum.
    pub sm_occupancy: Option<f64>,
    /// 5, `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`: any tensor pipe.
    pub tensor_active: Option<f64>,
    /// 7, `DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE`: half precision (fp16, bf16).
    pub tensor_hmma: Option<f64>,
    /// 9, `DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE`: integer.
    pub tensor_imma: Option<f64>,
    /// 6, `DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE`: double precision.
    pub tensor_dfma: Option<f64>,
    /// 10, `DCGM_FI_PROF_DRAM_ACTIVE`: device memory bandwidth in use.
    pub dram_active: Option<f64>,
    /// 11, `DCGM_FI_PROF_PIPE_FP64_ACTIVE`.
    pub fp64_active: Option<f64>,
    /// 12, `DCGM_FI_PROF_PIPE_FP32_ACTIVE`.
    pub fp32_active: Option<f64>,
    /// 13, `DCGM_FI_PROF_PIPE_FP16_ACTIVE`.
    pub fp16_active: Option<f64>,
    /// 20 / 21, `DCGM_FI_PROF_PCIE_TX_BYTES` / `_RX_BYTES`, bytes per second.
    pub pcie_tx_bytes_per_s: Option<u64>,
    pub pcie_rx_bytes_per_s: Option<u64>,
    /// 61 / 60, `DCGM_FI_PROF_NVLINK_TX_BYTES` / `_RX_BYTES`, bytes per second.
    pub nvlink_tx_bytes_per_s: Option<u64>,
    pub nvlink_rx_bytes_per_s: Option<u64>,
}

/// Why a GPU (or MIG instance) has no activity figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityUnavailable {
    /// The board or driver has no GPM: before Hopper, a vGPU slice, a
    /// driver before R520.
    NotSupported,
    /// The driver refused (seen in unprivileged containers after a while);
    /// asked again after a pause.
    NoPermission,
    /// Another error; asked again after a pause.
    Failed,
    /// The first sample is taken: figures come with the next, at least
    /// 100 ms later.
    FirstSample,
    /// A one-shot reading that did not wait for a second sample
    /// (`--activity` waits 0.1 s for one).
    NotRead,
    /// A reason this build does not know: a newer node's, read by `fleet`,
    /// whose snapshot must not fail to parse over it.
    #[serde(other)]
    Unknown,
}

impl ActivityUnavailable {
    /// The JSON word, for a label, without serializing.
    pub fn word(self) -> &'static str {
        match self {
            Self::NotSupported => "not_supported",
            Self::NoPermission => "no_permission",
            Self::Failed => "failed",
            Self::FirstSample => "first_sample",
            Self::NotRead => "not_read",
            Self::Unknown => "unknown",
        }
    }

    /// Words for a person, short enough for a detail line.
    pub fn describe(self) -> &'static str {
        match self {
            Self::NotSupported => "not supported (GPM needs a Hopper or newer GPU, driver R520+)",
            Self::NoPermission => "the driver refused (no permission); asking again later",
            Self::Failed => "the driver failed to read it; asking again later",
            Self::FirstSample => "needs a second sample (at least 0.1 s after the first)",
            Self::NotRead => "not read by a one-shot (--activity waits 0.1 s for it)",
            Self::Unknown => "unavailable, for a reason this gpuscope does not know",
        }
    }
}

/// One process's share of the GPU in NVML's last sample period, percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessUtilization {
    pub pid: u32,
    /// SM (compute and 3D) utilisation.
    pub sm: u32,
    /// Device memory bandwidth utilisation.
    pub memory: u32,
    pub encoder: u32,
    pub decoder: u32,
}

/// NVML's compute modes: who may create a context on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// Any number of contexts.
    Default,
    /// Deprecated by NVIDIA: one context, used by one thread at a time.
    ExclusiveThread,
    /// No contexts at all.
    Prohibited,
    /// One context, used by any number of threads.
    ExclusiveProcess,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaxClocks {
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub graphics_mhz: Option<u32>,
    pub video_mhz: Option<u32>,
}

/// ECC mode and error counts, totals over the whole chip; `null` where the
/// board has no ECC or has it off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ecc {
    pub mode_current: Option<bool>,
    /// The mode after the next reboot.
    pub mode_pending: Option<bool>,
    /// Since the driver was loaded.
    pub corrected_volatile: Option<u64>,
    pub uncorrected_volatile: Option<u64>,
    /// Over the board's lifetime.
    pub corrected_aggregate: Option<u64>,
    pub uncorrected_aggregate: Option<u64>,
    /// Pages of device memory waiting to be retired at the next reboot.
    pub retired_pages_pending: Option<bool>,
}

/// NVLink: each link's state, and the data payload over all links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    pub links: Vec<NvLinkState>,
    /// Bytes per second summed over the active links, from the
    /// cumulative counters between two ticks: `None` on the first tick,
    /// after a counter went backwards, or where the driver keeps none.
    pub tx_bytes_per_s: Option<u64>,
    pub rx_bytes_per_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkState {
    pub link: u32,
    pub active: bool,
}

/// nvmlDeviceGetRemappedRows: rows remapped after correctable and
/// uncorrectable errors, a remapping waiting for the next GPU reset, and
/// whether a remapping failed (the board should be replaced).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: Option<u32>,
    pub uncorrectable: Option<u32>,
    pub pending: Option<bool>,
    pub failure: Option<bool>,
}

/// The driver's per-process accounting: each process that ran on the GPU
/// while it was on, finished ones included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    pub enabled: bool,
    /// How many processes the driver's buffer holds before the oldest go.
    pub buffer_size: Option<u32>,
    /// The newest few (at most 32) of the buffer, in NVML's order.
    pub processes: Vec<AccountedProcess>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountedProcess {
    pub pid: u32,
    /// Percent of its lifetime with a kernel running / memory busy.
    pub gpu_utilization: Option<u32>,
    pub memory_utilization: Option<u32>,
    /// Its peak device memory, bytes.
    pub max_memory: Option<u64>,
    /// How long it ran (so far, while running), milliseconds.
    pub time_ms: u64,
    pub start_time_unix_us: u64,
    pub running: bool,
}

/// Bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar1Memory {
    pub total: Option<u64>,
    pub used: Option<u64>,
    pub free: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuState {
    Ok,
    /// Fallen off the bus (NVML_ERROR_GPU_IS_LOST): needs a reset or reboot.
    Lost,
    /// The device could not be queried for another reason; see `error`.
    Error,
}

/// Device memory in bytes. `driver_reserved` is what the driver keeps back
/// for itself (NVML's `nvmlMemory_v2_t.reserved`); it has nothing to do with
/// PyTorch's "reserved" memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemory {
    pub total: Option<u64>,
    pub used: Option<u64>,
    pub free: Option<u64>,
    pub driver_reserved: Option<u64>,
}

/// Percentages, 0 to 100, over NVML's last sample period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Utilization {
    pub gpu: Option<u32>,
    pub memory: Option<u32>,
    pub encoder: Option<u32>,
    pub decoder: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    #[serde(default)]
    pub graphics_mhz: Option<u32>,
    #[serde(default)]
    pub video_mhz: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcie {
    pub tx_bytes_per_s: Option<u64>,
    pub rx_bytes_per_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMode {
    pub current: bool,
    pub pending: bool,
}

/// One MIG device of a GPU: what NVML answers on its handle. NVML keeps
/// utilization, clocks, power and temperature for the parent GPU only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigDevice {
    /// The MIG device index within its parent GPU (NVML's
    /// `nvmlDeviceGetMigDeviceHandleByIndex`).
    pub index: u32,
    /// "MIG-…", as `CUDA_VISIBLE_DEVICES` and `nvidia-smi -L` give it.
    pub uuid: Option<String>,
    /// NVML's name, "<parent name> MIG <profile>".
    pub name: Option<String>,
    /// The MIG profile, "1g.10gb", taken from the name.
    pub profile: Option<String>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    pub memory: MigMemory,
    /// The activity of its GPU instance (`nvmlGpmMigSampleGet`), shared by
    /// the compute instances of one GPU instance.
    #[serde(default)]
    pub activity: Option<Activity>,
    #[serde(default)]
    pub activity_unavailable: Option<ActivityUnavailable>,
}

/// A MIG device's own slice of memory, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMemory {
    pub total: Option<u64>,
    pub used: Option<u64>,
    pub free: Option<u64>,
}

impl MigDevice {
    /// The profile from NVML's name: what follows its last " MIG ".
    pub fn profile_from_name(name: &str) -> Option<String> {
        let (_, profile) = name.rsplit_once(" MIG ")?;
        let profile = profile.trim();
        (!profile.is_empty()).then(|| profile.to_string())
    }
}

impl Gpu {
    /// An entry with identity only: the starting point for a device whose
    /// readings are still to be taken, or could not be.
    pub fn blank(index: u32, state: GpuState) -> Self {
        Self {
            index,
            uuid: None,
            name: None,
            pci_bus_id: None,
            state,
            error: None,
            memory: GpuMemory::default(),
            utilization: Utilization::default(),
            temperature_c: None,
            fan_percent: None,
            power_draw_w: None,
            power_limit_w: None,
            clocks: Clocks::default(),
            pcie: Pcie::default(),
            performance_state: None,
            throttle_reasons: None,
            mig_mode: None,
            mig_devices: Vec::new(),
            allocator: None,
            serial: None,
            persistence_mode: None,
            compute_mode: None,
            power_management_limit_w: None,
            max_clocks: MaxClocks::default(),
            ecc: Ecc::default(),
            bar1_memory: Bar1Memory::default(),
            nvlink: None,
            remapped_rows: RemappedRows::default(),
            accounting: None,
            process_utilization: None,
            activity: None,
            activity_unavailable: None,
            driver_events: Vec::new(),
            xid_counts: Vec::new(),
            recovery_action: None,
            nvlink_errors: None,
            health: None,
            pcie_link: PcieLink::default(),
            numa_node: None,
            unified_memory: None,
            energy_mj: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MigDevice;

    #[test]
    fn an_unknown_reason_from_a_newer_node_still_parses() {
        let why: super::ActivityUnavailable = serde_json::from_str("\"throttled_by_the_future\"").unwrap();
        assert_eq!(why, super::ActivityUnavailable::Unknown);
    }

    #[test]
    fn the_profile_is_read_from_the_mig_device_name() {
        let p = |n: &str| MigDevice::profile_from_name(n);
        assert_eq!(p("NVIDIA H100 80GB HBM3 MIG 1g.10gb").as_deref(), Some("1g.10gb"));
        assert_eq!(p("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb").as_deref(), Some("1c.3g.20gb"));
        assert_eq!(p("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(p("X MIG "), None);
    }
}
