//! The scenario file exactly as written; defaults live here so that a
//! one-line `[[gpu]]` already describes a plausible idle GPU.

use serde::Deserialize;

use crate::value::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ScenarioSpec {
    pub driver_version: String,
    pub cuda_driver_version: i32,
    pub nvml_version: Option<String>,
    pub call_delay_ms: u64,
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
    Clocks,
    Pcie,
    Pstate,
    Throttle,
    Mig,
    Processes,
    ProcessUtilization,
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
    pub fan_percent: Value,
    pub power_draw_w: Value,
    pub power_limit_w: f64,
    pub sm_clock_mhz: Value,
    pub mem_clock_mhz: Value,
    pub pcie_tx_kib_s: Value,
    pub pcie_rx_kib_s: Value,
    pub pstate: u32,
    pub throttle_reasons: u64,
    pub mig_current: bool,
    pub mig_pending: bool,
    /// This GPU's calls made this many seconds after init or later never
    /// return (the count and the handles still do).
    pub hang_after_s: Option<f64>,
    pub process: Vec<ProcessSpec>,
    /// MIG devices (GPU instance + compute instance), in MIG device index
    /// order; only with `mig_current`.
    pub mig: Vec<MigSpec>,
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
            fan_percent: Value::Const(30.0),
            power_draw_w: Value::Const(70.0),
            power_limit_w: 700.0,
            sm_clock_mhz: Value::Const(1980.0),
            mem_clock_mhz: Value::Const(2619.0),
            pcie_tx_kib_s: Value::Const(0.0),
            pcie_rx_kib_s: Value::Const(0.0),
            pstate: 0,
            throttle_reasons: 0,
            mig_current: false,
            mig_pending: false,
            hang_after_s: None,
            process: Vec::new(),
            mig: Vec::new(),
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
    pub pid: u32,
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
