//! The exported NVML entry points, grouped by what they report.
//!
//! Every function follows NVML's C contract: pointer arguments are null or
//! valid for the access NVML documents, and device handles come from this
//! library (they are never dereferenced, so any value is safe to pass).

// The names are NVML's ABI, so they cannot follow Rust conventions, and
// their safety contract is NVML's documentation rather than a doc section
// per function.
#![allow(non_snake_case, clippy::missing_safety_doc)]

mod accounting;
mod activity;
mod clocks;
mod events;
mod fields;
mod gpm;
mod handles;
mod identity;
mod init;
mod links;
mod memory;
mod mig;
mod out;
mod pcie;
mod power;
mod process_util;
mod processes;
mod settings;
mod sim;
mod system;
mod thermal;

pub use accounting::*;
pub use activity::*;
pub use clocks::*;
pub use events::*;
pub use fields::*;
pub use gpm::*;
pub use handles::*;
pub use identity::*;
pub use init::*;
pub use links::*;
pub use memory::*;
pub use mig::*;
pub use pcie::*;
pub use power::*;
pub use process_util::*;
pub use processes::*;
pub use settings::*;
pub use sim::*;
pub use system::*;
pub use thermal::*;

/// Every NVML symbol this library exports; `missing_functions` in a
/// scenario is checked against it so a typo cannot silently hide nothing.
pub const EXPORTED: &[&str] = &[
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetProcessName",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetAddressingMode",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetNumFans",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetProcessesUtilizationInfo",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetAccountingMode",
    "nvmlDeviceGetAccountingBufferSize",
    "nvmlDeviceGetAccountingPids",
    "nvmlDeviceGetAccountingStats",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMigSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlEventSetCreate",
    "nvmlEventSetFree",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
];
