use serde::{Deserialize, Serialize};

use super::{Alert, AlertEvent, EventsStatus, Gpu, Host, PidNamespace, Process, Timestamp};

/// Bumped whenever a field is renamed, removed or changes meaning; adding a
/// field is not a break. `assets/snapshot.schema.json` pins the current shape.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub schema_version: u32,
    #[serde(flatten)]
    pub time: Timestamp,
    /// The interval the poller was asked for, so a reader of a recording
    /// knows how far apart the samples were meant to be.
    pub interval_ms: u64,
    /// How long this tick's collection took, driver calls included.
    pub collection_ms: f64,
    /// True when the GPUs come from gpuscope's simulated NVML (`--demo`).
    pub simulated: bool,
    pub host: Host,
    pub driver: Driver,
    pub gpus: Vec<Gpu>,
    pub processes: Vec<Process>,
    /// Active alerts, most severe first.
    pub alerts: Vec<Alert>,
    /// Alerts raised, changed or cleared at this tick: the timeline, one
    /// tick at a time.
    #[serde(default)]
    pub events: Vec<AlertEvent>,
    pub sources: Sources,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Driver {
    pub driver_version: Option<String>,
    /// "major.minor" of the CUDA version the driver supports.
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
    /// The NVML library that was loaded (or that gpuscope tried to load).
    pub library: Option<String>,
}

/// Health of each source: a failing source is reported here while the
/// others keep filling the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sources {
    pub nvml: NvmlStatus,
    pub host: HostStatus,
    pub probes: ProbeStatus,
    /// Whether the driver's events (Xid, ECC) are heard, and why not;
    /// `None` where nothing listened (a one-shot, a recording made before
    /// gpuscope listened).
    #[serde(default)]
    pub driver_events: Option<EventsStatus>,
}

/// The NVML source's health, and what it cost the driver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlStatus {
    pub ok: bool,
    pub error: Option<String>,
    /// NVML calls this snapshot's collection made (a count-then-fill list
    /// counted once); `null` where unknown (a recording from before, a
    /// source that is not NVML).
    #[serde(default)]
    pub calls: Option<u64>,
}

impl From<SourceStatus> for NvmlStatus {
    fn from(s: SourceStatus) -> Self {
        Self { ok: s.ok, error: s.error, calls: None }
    }
}

/// The host source's health, and whether NVML's PIDs are ours.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    pub ok: bool,
    pub error: Option<String>,
    /// `container` when gpuscope runs in a PID namespace other than the
    /// host's: NVML's PIDs then name no local process. `null` when unknown.
    #[serde(default)]
    pub pid_namespace: Option<PidNamespace>,
}

impl From<SourceStatus> for HostStatus {
    fn from(s: SourceStatus) -> Self {
        Self { ok: s.ok, error: s.error, pid_namespace: None }
    }
}

impl Snapshot {
    /// A simulated snapshot of these GPUs and processes, taken at
    /// `unix_s`, with nothing else known: for tests of what reads one.
    pub fn of(unix_s: u64, gpus: Vec<Gpu>, processes: Vec<Process>) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            time: Timestamp::from_system(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_s)),
            interval_ms: 1_000,
            collection_ms: 0.0,
            simulated: true,
            host: Host::default(),
            driver: Driver::default(),
            gpus,
            processes,
            alerts: Vec::new(),
            events: Vec::new(),
            sources: Sources::default(),
        }
    }
}

/// The allocator probes' directory and what reading it found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeStatus {
    pub ok: bool,
    pub error: Option<String>,
    pub directory: Option<String>,
    /// Probe files present this tick.
    pub files: u32,
    /// Files refused since gpuscope started (garbage, truncated, too big,
    /// not this user's, a link): each counted once.
    pub skipped: u64,
    /// Which file was refused last, and why.
    pub last_skipped: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    pub ok: bool,
    pub error: Option<String>,
}

impl SourceStatus {
    pub fn ok() -> Self {
        Self { ok: true, error: None }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self { ok: false, error: Some(error.into()) }
    }
}
