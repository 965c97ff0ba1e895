//! The scenario file exactly as written; defaults live here so that a
//! one-line `[[gpu]]` already describes a plausible idle GPU.

use std::collections::BTreeMap;
use std::ffi::c_uint;

use serde::Deserialize;

use crate::value::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ScenarioSpec {
    pub driver_version: String,
    pub cuda_driver_version: i32,
    pub nvml_version: Option<String>,
    pub call_delay_ms: u64,
    /// Each call costs what it does on a real driver (see `cost.rs`).
    pub realistic_costs: bool,
    /// A file the library appends each call's function name to.
    pub call_log: Option<String>,
    pub init_error: Option<InitError>,
    pub missing_functions: Vec<String>,
    /// `nvmlInit` never returns: a driver hung at start.
    pub hang_init: bool,
    /// Every call but init and shutdown made this many seconds after init
    /// or later never returns: a driver that hangs while in use.
    pub hang_after_s: Option<f64>,
    pub gpu: Vec<GpuSpec>,
    /// GPUs coming and going: from `at_s` on, the devices listed are the
    /// `[[gpu]]` tables at these positions, in this order.
    pub topology: Vec<TopologyStep>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TopologyStep {
    pub at_s: f64,
    pub gpus: Vec<usize>,
}

impl Default for ScenarioSpec {
    fn default() -> Self {
        Self {
            driver_version: "560.35.03".into(),
            cuda_driver_version: 12060,
            nvml_version: None,
            call_delay_ms: 0,
            realistic_costs: false,
            call_log: None,
            init_error: None,
            missing_functions: Vec::new(),
            hang_init: false,
            hang_after_s: None,
            gpu: Vec::new(),
            topology: Vec::new(),
        }
    }
}

/// The ways a real `nvmlInit` fails on machines that are not set up right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum InitError {
    DriverNotLoaded,
    NoPermission,
    Unknown,
    LibRmVersionMismatch,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum GpuState {
    #[default]
    Ok,
    /// Fallen off the bus: still enumerated, but every query fails.
    Lost,
}

/// Groups of NVML queries that a scenario can declare unsupported, named by
/// what they read rather than by function so one entry covers all variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reading {
    Memory,
    Utilization,
    Encoder,
    Decoder,
    Temperature,
    Fan,
    Power,
    PowerLimit,
    /// `nvmlDeviceGetTotalEnergyConsumption`: nvml.h says "Volta or
    /// newer", so a scenario's older board lists it here.
    Energy,
    Clocks,
    Pcie,
    /// The cumulative PCIe byte counters among the field values
    /// (`NVML_FI_DEV_PCIE_COUNT_TX_BYTES` / `_RX_BYTES`), which boards and
    /// drivers before them lack; also off where `pcie` is.
    PcieCounters,
    /// `nvmlDeviceGetPcieReplayCounter`; also off where `pcie` is.
    PcieReplay,
    Pstate,
    Throttle,
    Mig,
    Processes,
    ProcessUtilization,
    Serial,
    PersistenceMode,
    ComputeMode,
    MaxClocks,
    Ecc,
    RetiredPages,
    Bar1,
    Nvlink,
    /// NVLink's counters summed over all links (`scopeId` UINT_MAX), for
    /// a driver that answers only link by link; also off where `nvlink` is.
    NvlinkSum,
    RemappedRows,
    Accounting,
    /// Driver events (`nvmlDeviceGetSupportedEventTypes` answers an empty
    /// mask, `nvmlDeviceRegisterEvents` NOT_SUPPORTED): a virtualised GPU
    /// that does not pass them on.
    Events,
    /// The driver's recommended recovery action among the field values
    /// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`), which drivers before R570
    /// lack whatever the scenario says here.
    RecoveryAction,
}

/// NVML's compute modes (`nvmlComputeMode_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ComputeMode {
    #[default]
    Default,
    ExclusiveThread,
    Prohibited,
    ExclusiveProcess,
}

impl ComputeMode {
    pub(crate) fn code(self) -> u32 {
        match self {
            Self::Default => 0,
            Self::ExclusiveThread => 1,
            Self::Prohibited => 2,
            Self::ExclusiveProcess => 3,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct GpuSpec {
    pub name: String,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub state: GpuState,
    pub unsupported: Vec<Reading>,
    pub memory_total_mib: u64,
    pub memory_reserved_mib: u64,
    pub memory_used_mib: Option<Value>,
    pub utilization_gpu: Value,
    pub utilization_memory: Value,
    pub encoder: Value,
    pub decoder: Value,
    pub temperature_c: Value,
    /// How many fans the board reports (NumFans); 0 for boards cooled by
    /// the chassis, as data-centre SXM boards are.
    pub fans: c_uint,
    pub fan_percent: Value,
    pub power_draw_w: Value,
    pub power_limit_w: f64,
    /// The energy counter at init, in millijoules: nvml.h counts "since
    /// the driver was last reloaded", which is before any client's init.
    /// From init on it grows by the power draw's integral.
    pub energy_at_init_mj: u64,
    pub sm_clock_mhz: Value,
    pub mem_clock_mhz: Value,
    pub pcie_tx_kib_s: Value,
    pub pcie_rx_kib_s: Value,
    pub pstate: u32,
    pub throttle_reasons: u64,
    pub mig_current: bool,
    pub mig_pending: bool,
    /// The board's serial number; boards without one (GeForce) leave it out.
    pub serial: Option<String>,
    /// The board's firmware (VBIOS) version, as `nvidia-smi -q` shows it.
    pub vbios_version: String,
    pub persistence_mode: bool,
    pub compute_mode: ComputeMode,
    /// The graphics clock where it differs from the SM clock.
    pub graphics_clock_mhz: Option<Value>,
    /// The video clock; without it, the SM clock at an H100's ratio.
    pub video_clock_mhz: Option<Value>,
    pub max_sm_clock_mhz: f64,
    pub max_mem_clock_mhz: f64,
    pub max_video_clock_mhz: f64,
    /// PCIe link generation and width, now and at most (nvidia-smi's
    /// `pcie.link.gen.*` and `pcie.link.width.*`).
    pub pcie_link_gen_current: u32,
    pub pcie_link_gen_max: u32,
    pub pcie_link_width_current: u32,
    pub pcie_link_width_max: u32,
    /// The PCIe replay counter at init, and how many replays a second it
    /// grows by from then (its integral, whole replays).
    pub pcie_replay_counter: u32,
    pub pcie_replays_per_s: Value,
    /// The temperatures at which the board slows down and shuts down.
    pub temperature_slowdown_c: u32,
    pub temperature_shutdown_c: u32,
    pub ecc_enabled: bool,
    /// The ECC mode after the next reboot; the current one without it.
    pub ecc_pending: Option<bool>,
    pub ecc_corrected_volatile: u64,
    pub ecc_corrected_aggregate: u64,
    pub ecc_uncorrected_volatile: u64,
    pub ecc_uncorrected_aggregate: u64,
    pub retired_pages_pending: bool,
    pub bar1_total_mib: u64,
    pub bar1_used_mib: u64,
    /// NVLink links in link order; none: a board without NVLink.
    pub nvlink: Vec<NvLinkSpec>,
    pub remapped_rows: RemappedRowsSpec,
    pub accounting: AccountingSpec,
    /// This GPU's calls made this many seconds after init or later never
    /// return (the count and the handles still do).
    pub hang_after_s: Option<f64>,
    pub process: Vec<ProcessSpec>,
    /// MIG devices (GPU instance + compute instance), in MIG device index
    /// order; only with `mig_current`.
    pub mig: Vec<MigSpec>,
    /// GPM metrics by name (see `gpm::scriptable`): present, the board
    /// has GPM (Hopper or newer) and reports these; absent, it has none.
    pub gpm: Option<BTreeMap<String, Value>>,
    /// From this many seconds after init, taking a GPM sample answers
    /// NO_PERMISSION, as seen in unprivileged containers (DCGM issue 214).
    pub gpm_no_permission_after_s: Option<f64>,
    /// nvmlDeviceGetProcessUtilization's samples all read 0, as on
    /// Blackwell with driver 580 (HAMi issue 2015); the newer
    /// nvmlDeviceGetProcessesUtilizationInfo still reads the processes.
    pub process_utilization_reads_zero: bool,
    /// Driver events (Xid critical errors, ECC errors) that happen this
    /// many seconds after init, delivered to event sets registered for
    /// them before then (`[[gpu.event]]`).
    pub event: Vec<EventSpec>,
    /// The driver's recommended recovery action (nvml.h,
    /// `nvmlDeviceGpuRecoveryAction_t`) from `recovery_action_from_s`
    /// seconds after init on; `none` before.
    pub recovery_action: RecoveryAction,
    pub recovery_action_from_s: f64,
    /// NVLink's error counters summed over all lanes (nvml.h's
    /// `NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`): each grows at this many
    /// errors a second from init; only on boards with NVLink.
    pub nvlink_errors_per_s: NvLinkErrorRates,
    /// A board that shares the host's memory (GB10, DGX Spark): the memory
    /// info answers NOT_SUPPORTED, there being no framebuffer of its own,
    /// and `nvmlDeviceGetAddressingMode` says ATS.
    pub unified_memory: bool,
}

/// One scripted driver event (nvml.h, `nvmlEventData_t`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventSpec {
    /// Seconds after init.
    pub at_s: f64,
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The Xid (`eventData`) of an `xid` event; nvml.h: "999 for unknown
    /// Xid error".
    #[serde(default)]
    pub xid: Option<u64>,
    /// The GPU and compute instance an Xid is attributed to on a MIG GPU;
    /// without them, 0xFFFFFFFF, as nvml.h says for the whole device.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

/// The event types a scenario can script, by nvml.h's `nvmlEventType*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventKind {
    /// `nvmlEventTypeXidCriticalError`.
    Xid,
    /// `nvmlEventTypeSingleBitEccError`.
    EccSingleBit,
    /// `nvmlEventTypeDoubleBitEccError`.
    EccDoubleBit,
    /// `nvmlEventTypePState`.
    Pstate,
}

/// nvml.h's `nvmlDeviceGpuRecoveryAction_t`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RecoveryAction {
    #[default]
    None,
    GpuReset,
    NodeReboot,
    DrainP2p,
    DrainAndReset,
    RecoverImexDomain,
}

impl RecoveryAction {
    /// NVML_GPU_RECOVERY_ACTION_NONE = 0 ... _RECOVER_IMEX_DOMAIN = 5.
    pub(crate) fn code(self) -> u32 {
        match self {
            Self::None => 0,
            Self::GpuReset => 1,
            Self::NodeReboot => 2,
            Self::DrainP2p => 3,
            Self::DrainAndReset => 4,
            Self::RecoverImexDomain => 5,
        }
    }
}

/// Errors a second, summed over every lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct NvLinkErrorRates {
    pub crc_flit: f64,
    pub crc_data: f64,
    pub replay: f64,
    pub recovery: f64,
}

/// One NVLink link: up or down, and its data rates (constant) in KiB/s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct NvLinkSpec {
    pub active: bool,
    pub tx_kib_s: f64,
    pub rx_kib_s: f64,
}

/// nvmlDeviceGetRemappedRows's answer (Ampere and later; older boards
/// list `remapped_rows` under `unsupported`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RemappedRowsSpec {
    pub correctable: u32,
    pub uncorrectable: u32,
    pub pending: bool,
    pub failure: bool,
}

/// Per-process accounting: off by default, as on a real board until
/// `nvidia-smi -am 1`; the driver's default buffer holds 4000 processes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AccountingSpec {
    pub enabled: bool,
    pub buffer_size: u32,
    pub process: Vec<AccountedSpec>,
}

impl Default for AccountingSpec {
    fn default() -> Self {
        Self { enabled: false, buffer_size: 4000, process: Vec::new() }
    }
}

/// One process in the accounting buffer (finished ones stay there).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AccountedSpec {
    pub pid: u32,
    pub gpu_util: u32,
    pub mem_util: u32,
    pub max_memory_mib: f64,
    pub time_ms: u64,
    pub start_time_us: u64,
    pub running: bool,
}

/// One MIG device: what NVML answers on its handle.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MigSpec {
    /// The profile as NVML names it after the parent's name ("1g.10gb").
    pub profile: String,
    pub memory_total_mib: u64,
    /// Default: what the processes on it account for.
    #[serde(default)]
    pub memory_used_mib: Option<Value>,
    pub gpu_instance_id: u32,
    #[serde(default)]
    pub compute_instance_id: u32,
    /// "MIG-<uuid>"; default derived from the GPU's position and the slot.
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub process: Vec<ProcessSpec>,
    /// GPM metrics of this device's GPU instance, as the GPU's `gpm`.
    #[serde(default)]
    pub gpm: Option<BTreeMap<String, Value>>,
}

impl Default for GpuSpec {
    fn default() -> Self {
        Self {
            name: "NVIDIA Simulated GPU".into(),
            uuid: None,
            pci_bus_id: None,
            state: GpuState::Ok,
            unsupported: Vec::new(),
            memory_total_mib: 81559,
            memory_reserved_mib: 0,
            memory_used_mib: None,
            utilization_gpu: Value::Const(0.0),
            utilization_memory: Value::Const(0.0),
            encoder: Value::Const(0.0),
            decoder: Value::Const(0.0),
            temperature_c: Value::Const(35.0),
            fans: 1,
            fan_percent: Value::Const(30.0),
            power_draw_w: Value::Const(70.0),
            power_limit_w: 700.0,
            energy_at_init_mj: 0,
            sm_clock_mhz: Value::Const(1980.0),
            mem_clock_mhz: Value::Const(2619.0),
            pcie_tx_kib_s: Value::Const(0.0),
            pcie_rx_kib_s: Value::Const(0.0),
            pstate: 0,
            throttle_reasons: 0,
            mig_current: false,
            mig_pending: false,
            serial: None,
            vbios_version: "96.00.74.00.01".into(),
            persistence_mode: true,
            compute_mode: ComputeMode::Default,
            graphics_clock_mhz: None,
            video_clock_mhz: None,
            max_sm_clock_mhz: 1980.0,
            max_mem_clock_mhz: 2619.0,
            max_video_clock_mhz: 1755.0,
            pcie_link_gen_current: 5,
            pcie_link_gen_max: 5,
            pcie_link_width_current: 16,
            pcie_link_width_max: 16,
            pcie_replay_counter: 0,
            pcie_replays_per_s: Value::Const(0.0),
            temperature_slowdown_c: 87,
            temperature_shutdown_c: 92,
            ecc_enabled: true,
            ecc_pending: None,
            ecc_corrected_volatile: 0,
            ecc_corrected_aggregate: 0,
            ecc_uncorrected_volatile: 0,
            ecc_uncorrected_aggregate: 0,
            retired_pages_pending: false,
            bar1_total_mib: 131_072,
            bar1_used_mib: 1,
            nvlink: Vec::new(),
            remapped_rows: RemappedRowsSpec::default(),
            accounting: AccountingSpec::default(),
            hang_after_s: None,
            process: Vec::new(),
            mig: Vec::new(),
            gpm: None,
            gpm_no_permission_after_s: None,
            process_utilization_reads_zero: false,
            event: Vec::new(),
            recovery_action: RecoveryAction::None,
            recovery_action_from_s: 0.0,
            nvlink_errors_per_s: NvLinkErrorRates::default(),
            unified_memory: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProcessKind {
    #[default]
    Compute,
    Graphics,
    Both,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProcessSpec {
    /// The process's PID; 0 with `pid_file`.
    #[serde(default)]
    pub pid: u32,
    /// A file that holds the PID, read at each call; the process is not
    /// listed while it holds none: for a process whose PID a test learns
    /// only once it runs (the job `gpuscope run` starts).
    #[serde(default)]
    pub pid_file: Option<std::path::PathBuf>,
    #[serde(default, rename = "type")]
    pub kind: ProcessKind,
    /// Absent means the driver cannot attribute memory to this process.
    #[serde(default)]
    pub used_mib: Option<Value>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "zero")]
    pub sm_util: Value,
    #[serde(default = "zero")]
    pub mem_util: Value,
    #[serde(default = "zero")]
    pub enc_util: Value,
    #[serde(default = "zero")]
    pub dec_util: Value,
    /// JPEG and optical-flow engines: only the newer per-process call
    /// (nvmlDeviceGetProcessesUtilizationInfo) reports them.
    #[serde(default = "zero")]
    pub jpg_util: Value,
    #[serde(default = "zero")]
    pub ofa_util: Value,
}

impl ProcessSpec {
    /// The PID now: the scenario's, or what `pid_file` holds.
    pub(crate) fn pid_now(&self) -> Option<u32> {
        match &self.pid_file {
            None => Some(self.pid),
            Some(path) => std::fs::read_to_string(path).ok()?.trim().parse().ok().filter(|&p| p != 0),
        }
    }
}

fn zero() -> Value {
    Value::Const(0.0)
}

impl ProcessKind {
    pub(crate) fn is_compute(self) -> bool {
        matches!(self, ProcessKind::Compute | ProcessKind::Both)
    }

    pub(crate) fn is_graphics(self) -> bool {
        matches!(self, ProcessKind::Graphics | ProcessKind::Both)
    }
}
