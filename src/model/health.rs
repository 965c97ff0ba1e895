//! Board health: the driver's events (Xid critical errors, ECC errors)
//! gpuscope heard, the readings that say a board is failing, and the
//! verdict judged from them (`analysis/health.rs`).

use serde::{Deserialize, Serialize};

use super::{Severity, Timestamp};

/// One event the driver delivered through NVML's event set
/// (`nvmlEventSetWait_v2`), as gpuscope heard it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverEvent {
    /// When gpuscope heard it: NVML stamps no time of its own.
    #[serde(flatten)]
    pub time: Timestamp,
    pub kind: DriverEventKind,
    /// The Xid of an `xid` event (nvml.h: `eventData`; 999 is the
    /// driver's "unknown Xid").
    pub xid: Option<u32>,
    /// NVIDIA's name for the Xid (`ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`),
    /// where gpuscope's copy of NVIDIA's Xid catalogue has it.
    pub mnemonic: Option<String>,
    /// What it means, in a few words; `None` for an Xid the catalogue
    /// gpuscope carries does not list.
    pub meaning: Option<String>,
    /// What it calls for (the catalogue's immediate action).
    pub action: Option<XidAction>,
    pub severity: Severity,
    /// On a MIG GPU, the GPU and compute instance the driver attributed it
    /// to; `None` for the whole device.
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverEventKind {
    /// `nvmlEventTypeXidCriticalError`.
    Xid,
    /// `nvmlEventTypeSingleBitEccError`: corrected.
    EccSingleBit,
    /// `nvmlEventTypeDoubleBitEccError`: uncorrected.
    EccDoubleBit,
    /// A kind this build does not know: a newer node's, read by `fleet`.
    #[serde(other)]
    Unknown,
}

/// What an Xid calls for: the "Resolution Bucket (Immediate Action)" of
/// NVIDIA's Xid catalogue, in gpuscope's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// IGNORE: nothing to do; the driver recovered.
    None,
    /// RESTART_APP: the application that faulted has to be restarted.
    RestartApp,
    /// RESET_GPU.
    ResetGpu,
    /// RESTART_BM: reboot the node.
    RebootNode,
    /// CHECK_MECHANICALS: power supply, cabling, cooling.
    CheckHardware,
    /// UPDATE_SWFW: driver or firmware.
    UpdateSoftware,
    /// RESTART_VM.
    RestartVm,
    /// WORKFLOW_*: NVIDIA's workflow for this Xid decides (most end in a
    /// GPU reset).
    FollowWorkflow,
    /// CONTACT_SUPPORT.
    ContactSupport,
    /// An Xid the catalogue gpuscope carries does not list, or a newer
    /// node's word.
    #[serde(other)]
    Unknown,
}

impl XidAction {
    /// What to do, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Self::None => "nothing: the driver recovered",
            Self::RestartApp => "restart the application",
            Self::ResetGpu => "drain the GPU's jobs and reset it (nvidia-smi -r)",
            Self::RebootNode => "drain the node and reboot it",
            Self::CheckHardware => "check the power supply, cabling and cooling",
            Self::UpdateSoftware => "update the driver or firmware",
            Self::RestartVm => "restart the virtual machine",
            Self::FollowWorkflow => "follow NVIDIA's workflow for this Xid (most end in a GPU reset)",
            Self::ContactSupport => "contact NVIDIA support",
            Self::Unknown => "look it up in NVIDIA's Xid catalogue",
        }
    }
}

/// Xid events heard since gpuscope began listening, by Xid. A GPU keeps
/// at most `MAX_XID_COUNTS` Xids apart; later ones are counted under
/// `xid: null`, so the exporter's labels stay few.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidCount {
    pub xid: Option<u32>,
    pub count: u64,
}

/// How many different Xids a GPU counts apart (`XidCount`).
pub const MAX_XID_COUNTS: usize = 16;

/// The recovery action the driver recommends (nvml.h,
/// `nvmlDeviceGpuRecoveryAction_t`, read as the field value
/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`; R570 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    None,
    GpuReset,
    NodeReboot,
    DrainP2p,
    DrainAndReset,
    RecoverImexDomain,
    /// A value this build does not know (a newer driver's).
    #[serde(other)]
    Unknown,
}

impl RecoveryAction {
    /// nvml.h's `NVML_GPU_RECOVERY_ACTION_*` values.
    pub fn from_code(code: u64) -> Self {
        match code {
            0 => Self::None,
            1 => Self::GpuReset,
            2 => Self::NodeReboot,
            3 => Self::DrainP2p,
            4 => Self::DrainAndReset,
            5 => Self::RecoverImexDomain,
            _ => Self::Unknown,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::GpuReset => "reset the GPU",
            Self::NodeReboot => "reboot the node",
            Self::DrainP2p => "drain peer-to-peer (NVLink) traffic",
            Self::DrainAndReset => "drain peer-to-peer traffic and reset the GPU",
            Self::RecoverImexDomain => "recover the IMEX domain",
            Self::Unknown => "an action this gpuscope does not know",
        }
    }
}

/// NVLink's error counters summed over every lane (nvml.h,
/// `NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`), cumulative; `None` where
/// the driver keeps none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkErrors {
    /// Flow-control CRC errors.
    pub crc_flit: Option<u64>,
    /// Data CRC errors.
    pub crc_data: Option<u64>,
    pub replay: Option<u64>,
    pub recovery: Option<u64>,
}

/// A GPU's health, judged from what NVML reports (`analysis/health.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub verdict: HealthVerdict,
    /// Why, most severe first; empty when `ok`.
    pub reasons: Vec<HealthReason>,
    /// What could not be judged on this GPU (its board or driver does
    /// not report it, or the output did not read it): an `ok` says
    /// nothing of these.
    #[serde(default)]
    pub unchecked: Vec<HealthCode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthVerdict {
    Ok,
    Warning,
    Critical,
}

impl HealthVerdict {
    /// 0 / 1 / 2, as the exporter's gauge and `check --health`'s exit.
    pub fn level(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Warning => 1,
            Self::Critical => 2,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::Critical => "critical",
        }
    }
}

impl From<Severity> for HealthVerdict {
    fn from(s: Severity) -> Self {
        match s {
            Severity::Info => Self::Ok,
            Severity::Warning => Self::Warning,
            Severity::Critical => Self::Critical,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReason {
    pub code: HealthCode,
    pub severity: Severity,
    /// What is wrong and what to do, in one line.
    pub message: String,
}

/// Each thing the verdict judges, by the name JSON and the exporter's
/// `reason` label use: a fixed set, so the label stays bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthCode {
    /// Fallen off the bus (NVML_ERROR_GPU_IS_LOST).
    GpuLost,
    /// A row remapping failed: the board should be replaced.
    RowRemapFailed,
    /// A remapping waits for the next GPU reset.
    RowRemapPending,
    /// Uncorrectable (double-bit) ECC errors since the driver loaded.
    EccUncorrected,
    /// Pages waiting to be retired at the next reboot.
    RetiredPagesPending,
    /// The driver recommends a recovery action.
    RecoveryAction,
    /// A critical Xid within the window.
    Xid,
    /// Hardware slowdown (clock event reason `hw_slowdown`) other than
    /// the two below.
    HwSlowdown,
    HwThermalSlowdown,
    HwPowerBrake,
    /// NVLink CRC, replay or recovery errors growing.
    NvlinkErrors,
    /// The PCIe replay counter growing (link errors).
    PcieReplays,
    /// Whether gpuscope hears the driver's events on this GPU.
    DriverEvents,
    /// A code this build does not know: a newer node's.
    #[serde(other)]
    Unknown,
}

impl HealthCode {
    /// Every code, in the order the docs list them.
    pub const ALL: [Self; 13] = [
        Self::GpuLost,
        Self::RowRemapFailed,
        Self::RowRemapPending,
        Self::EccUncorrected,
        Self::RetiredPagesPending,
        Self::RecoveryAction,
        Self::Xid,
        Self::HwSlowdown,
        Self::HwThermalSlowdown,
        Self::HwPowerBrake,
        Self::NvlinkErrors,
        Self::PcieReplays,
        Self::DriverEvents,
    ];

    /// The JSON word, for a label, without serializing.
    pub fn word(self) -> &'static str {
        match self {
            Self::GpuLost => "gpu_lost",
            Self::RowRemapFailed => "row_remap_failed",
            Self::RowRemapPending => "row_remap_pending",
            Self::EccUncorrected => "ecc_uncorrected",
            Self::RetiredPagesPending => "retired_pages_pending",
            Self::RecoveryAction => "recovery_action",
            Self::Xid => "xid",
            Self::HwSlowdown => "hw_slowdown",
            Self::HwThermalSlowdown => "hw_thermal_slowdown",
            Self::HwPowerBrake => "hw_power_brake",
            Self::NvlinkErrors => "nvlink_errors",
            Self::PcieReplays => "pcie_replays",
            Self::DriverEvents => "driver_events",
            Self::Unknown => "unknown",
        }
    }
}

impl Health {
    /// The worst of `reasons`, which are sorted most severe first.
    pub fn from_reasons(mut reasons: Vec<HealthReason>, unchecked: Vec<HealthCode>) -> Self {
        Self::sort_reasons(&mut reasons);
        let verdict = reasons.first().map_or(HealthVerdict::Ok, |r| r.severity.into());
        Self { verdict, reasons, unchecked }
    }

    /// Most severe first, then by code: the order every view lists them in.
    pub fn sort_reasons(reasons: &mut [HealthReason]) {
        reasons.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.code.cmp(&b.code)));
    }
}

/// Whether gpuscope hears the driver's events, and why not where it does
/// not: said once, in every snapshot, rather than retried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsStatus {
    /// Registered on at least one watched GPU.
    pub listening: bool,
    /// Why not on any GPU, or on which GPUs not; `None` where it listens
    /// on every watched GPU.
    pub unavailable: Option<String>,
    /// The watched GPUs it does not listen on, by UUID (index where the
    /// UUID could not be read).
    #[serde(default)]
    pub not_on: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_reason_decides_and_comes_first() {
        let reason = |code, severity| HealthReason { code, severity, message: String::new() };
        let h = Health::from_reasons(
            vec![
                reason(HealthCode::HwPowerBrake, Severity::Warning),
                reason(HealthCode::RowRemapFailed, Severity::Critical),
            ],
            Vec::new(),
        );
        assert_eq!(h.verdict, HealthVerdict::Critical);
        assert_eq!(h.reasons[0].code, HealthCode::RowRemapFailed);
        assert_eq!(Health::from_reasons(Vec::new(), Vec::new()).verdict, HealthVerdict::Ok);
    }

    #[test]
    fn codes_are_named_as_json_names_them_and_unknown_words_still_parse() {
        for code in HealthCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.word());
        }
        let code: HealthCode = serde_json::from_str("\"cosmic_rays\"").unwrap();
        assert_eq!(code, HealthCode::Unknown);
        let action: XidAction = serde_json::from_str("\"pray\"").unwrap();
        assert_eq!(action, XidAction::Unknown);
        assert_eq!(RecoveryAction::from_code(4), RecoveryAction::DrainAndReset);
        assert_eq!(RecoveryAction::from_code(77), RecoveryAction::Unknown);
    }
}
