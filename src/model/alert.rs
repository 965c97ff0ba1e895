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
    /// Utilisation high while SM activity (GPM) is low: kernels too small
    /// to fill the GPU.
    SmIdle,
    /// SM activity high while the tensor cores (GPM) do nearly nothing.
    TensorIdle,
    /// A job's `/dev/shm` about to fill, or its DataLoader workers killed
    /// by a full one.
    ShmFull,
    /// The driver reported an Xid error on the GPU.
    Xid,
    /// The GPU's health verdict is warning or critical (board health).
    Health,
}

impl AlertKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [Self; 12] = [
        Self::Fragmentation,
        Self::AllocRetry,
        Self::Oom,
        Self::Leak,
        Self::MemoryPressure,
        Self::GpuLost,
        Self::Starved,
        Self::SmIdle,
        Self::TensorIdle,
        Self::ShmFull,
        Self::Xid,
        Self::Health,
    ];

    /// The name JSON, the config and `--fail-on` use (`alloc_retry`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Fragmentation => "fragmentation",
            Self::AllocRetry => "alloc_retry",
            Self::Oom => "oom",
            Self::Leak => "leak",
            Self::MemoryPressure => "memory_pressure",
            Self::GpuLost => "gpu_lost",
            Self::Starved => "starved",
            Self::SmIdle => "sm_idle",
            Self::TensorIdle => "tensor_idle",
            Self::ShmFull => "shm_full",
            Self::Xid => "xid",
            Self::Health => "health",
        }
    }
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

#[cfg(test)]
mod tests {
    use super::AlertKind;

    /// `name` is exhaustive, so a new kind must be named there; this
    /// checks it is also in `ALL`, that the names are serde's, and that
    /// the schema's two lists of kinds say the same.
    #[test]
    fn every_kind_is_listed_and_named_as_json_names_it() {
        let names: Vec<&str> = AlertKind::ALL.iter().map(|k| k.name()).collect();
        for k in AlertKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../assets/snapshot.schema.json")).unwrap();
        for def in ["alert", "alert_event"] {
            let listed = &schema["$defs"][def]["properties"]["kind"]["enum"];
            assert_eq!(*listed, serde_json::json!(names), "$defs.{def}.properties.kind");
        }
    }
}
