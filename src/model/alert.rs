use serde::{Deserialize, Serialize};

use super::Timestamp;

/// An active alert, with what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub severity: Severity,
    pub gpu: Option<u32>,
    pub pid: Option<u32>,
    #[serde(flatten, with = "since")]
    pub since: Timestamp,
    /// The measured value that raised it, in the unit of `threshold`.
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    pub message: String,
    /// A concrete next step.
    pub hint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Fragmentation,
    AllocRetry,
    Oom,
    Leak,
    MemoryPressure,
    GpuLost,
    Starved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

/// An entry of the alert timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertEvent {
    #[serde(flatten)]
    pub time: Timestamp,
    pub change: Change,
    pub kind: AlertKind,
    pub severity: Severity,
    pub gpu: Option<u32>,
    pub pid: Option<u32>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Raised,
    /// Still active, at another severity.
    Changed,
    Cleared,
}

crate::model::timestamp_fields!(since, "since", "since_unix_ms");
