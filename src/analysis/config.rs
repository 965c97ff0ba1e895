//! Alert thresholds. By default fragmentation is judged
//! on processes big enough for it to matter (reserved ≥ 2 GiB, inactive
//! split ≥ 512 MiB) by the median over a minute, with hysteresis between
//! 0.30 and 0.20; any rise of the allocator's retry counter is critical.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// How far back the charts reach and trend rules can look; the history
    /// keeps a fixed number of buckets across it, so memory does not grow
    /// with it.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self { window: Duration::from_secs(600) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// A command (argv, no shell) run for each raised alert, with the alert
    /// as JSON on its standard input. Empty: none.
    pub exec: Vec<String>,
    /// At most one run of `exec` per alert key within this time.
    #[serde(with = "humantime_serde")]
    pub exec_min_interval: Duration,
    pub fragmentation: FragmentationConfig,
    pub alloc_retry: EventConfig,
    pub oom: EventConfig,
    pub leak: LeakConfig,
    pub memory_pressure: PressureConfig,
    pub gpu_lost: Toggle,
    pub starved: StarvedConfig,
    pub sm_idle: SmIdleConfig,
    pub tensor_idle: TensorIdleConfig,
    pub shm_full: ShmFullConfig,
    pub xid: XidConfig,
    pub health: HealthConfig,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        Self {
            exec: Vec::new(),
            exec_min_interval: Duration::from_secs(60),
            fragmentation: FragmentationConfig::default(),
            alloc_retry: EventConfig::default(),
            oom: EventConfig::default(),
            leak: LeakConfig::default(),
            memory_pressure: PressureConfig::default(),
            gpu_lost: Toggle::default(),
            starved: StarvedConfig::default(),
            sm_idle: SmIdleConfig::default(),
            tensor_idle: TensorIdleConfig::default(),
            shm_full: ShmFullConfig::default(),
            xid: XidConfig::default(),
            health: HealthConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FragmentationConfig {
    pub enabled: bool,
    pub min_reserved_mib: u64,
    pub min_inactive_split_mib: u64,
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    pub min_samples: usize,
    pub enter: f64,
    pub exit: f64,
}

impl Default for FragmentationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_reserved_mib: 2048,
            min_inactive_split_mib: 512,
            window: Duration::from_secs(60),
            min_samples: 10,
            enter: 0.30,
            exit: 0.20,
        }
    }
}

/// Counter-rise alerts (allocation retries, OOMs) stay up this long after
/// the last rise, so a one-tick event is not missed by a glance away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
}

impl Default for EventConfig {
    fn default() -> Self {
        Self { enabled: true, hold: Duration::from_secs(300) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeakConfig {
    pub enabled: bool,
    /// The growth must hold over at least this long.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// ...and add up to at least this much over the window.
    pub min_growth_mib: u64,
    /// Fit quality (R²) of the line through the per-step minima.
    pub min_r2: f64,
}

impl Default for LeakConfig {
    fn default() -> Self {
        Self { enabled: true, window: Duration::from_secs(300), min_growth_mib: 256, min_r2: 0.8 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PressureConfig {
    pub enabled: bool,
    pub warn_free_percent: f64,
    pub critical_free_percent: f64,
    /// Free memory must climb back above this to clear.
    pub clear_free_percent: f64,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
}

impl Default for PressureConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            warn_free_percent: 5.0,
            critical_free_percent: 2.0,
            clear_free_percent: 6.0,
            duration: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Toggle {
    pub enabled: bool,
}

impl Default for Toggle {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// A probed job's `/dev/shm`, where its DataLoader workers hand batches
/// over: a warning at `used_share` full (0 to 1), or when what the loaders
/// keep in flight exceeds what is free; critical once workers died of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShmFullConfig {
    pub enabled: bool,
    pub used_share: f64,
    /// Cleared under this.
    pub clear_share: f64,
}

impl Default for ShmFullConfig {
    fn default() -> Self {
        Self { enabled: true, used_share: 0.90, clear_share: 0.80 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StarvedConfig {
    pub enabled: bool,
    pub max_utilization: f64,
    pub clear_utilization: f64,
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// A probed process must hold at least this much on the GPU.
    pub min_process_memory_mib: u64,
    /// Where the probe measures the DataLoader wait: raised at this share
    /// of the training thread's time (0 to 1) or more, cleared under
    /// `clear_data_wait`; the utilisation figures above are then unused.
    pub min_data_wait: f64,
    pub clear_data_wait: f64,
}

impl Default for StarvedConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_utilization: 30.0,
            clear_utilization: 40.0,
            window: Duration::from_secs(120),
            min_process_memory_mib: 1024,
            min_data_wait: 0.20,
            clear_data_wait: 0.10,
        }
    }
}

/// NVML's utilisation is the share of time some kernel ran, however few
/// SMs it kept busy; SM activity (GPM) is the share of SMs at work. Both
/// averaged over `window`: high utilisation with low SM activity means
/// kernels too small to fill the GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmIdleConfig {
    pub enabled: bool,
    /// Raised at this utilisation (percent) or more...
    pub min_utilization: f64,
    /// ...with SM activity (percent) under this.
    pub max_sm_active: f64,
    /// Clears once utilisation falls under this, or...
    pub clear_utilization: f64,
    /// ...SM activity climbs to this.
    pub clear_sm_active: f64,
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for SmIdleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_utilization: 80.0,
            max_sm_active: 25.0,
            clear_utilization: 70.0,
            clear_sm_active: 35.0,
            window: Duration::from_secs(120),
        }
    }
}

/// SMs busy while the tensor cores (GPM) are idle, averaged over `window`:
/// matrix maths running in plain FP32. Judged only on boards that report
/// tensor activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TensorIdleConfig {
    pub enabled: bool,
    /// Raised at this SM activity (percent) or more...
    pub min_sm_active: f64,
    /// ...with tensor activity (percent) under this.
    pub max_tensor_active: f64,
    /// Clears once SM activity falls under this, or...
    pub clear_sm_active: f64,
    /// ...tensor activity climbs to this.
    pub clear_tensor_active: f64,
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for TensorIdleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            min_sm_active: 50.0,
            max_tensor_active: 1.0,
            clear_sm_active: 40.0,
            clear_tensor_active: 5.0,
            window: Duration::from_secs(300),
        }
    }
}

/// Xid events (the driver's critical errors): the alert stays up for
/// `window` after the last one, and a critical Xid within it makes the
/// GPU's health critical.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XidConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for XidConfig {
    fn default() -> Self {
        Self { enabled: true, window: Duration::from_secs(3600) }
    }
}

/// The health alert: raised while a GPU's health verdict is warning or
/// critical for a reason other than an Xid or a lost GPU (those have
/// alerts of their own). An error counter that grew (NVLink, PCIe
/// replays) counts against the verdict for `hold` after it last grew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self { enabled: true, hold: Duration::from_secs(300) }
    }
}

impl AlertsConfig {
    /// Thresholds that contradict each other are refused at load time.
    pub fn validate(&self) -> Result<(), String> {
        let spans = [
            ("alerts.exec_min_interval", self.exec_min_interval),
            ("alerts.fragmentation.window", self.fragmentation.window),
            ("alerts.alloc_retry.hold", self.alloc_retry.hold),
            ("alerts.oom.hold", self.oom.hold),
            ("alerts.leak.window", self.leak.window),
            ("alerts.memory_pressure.duration", self.memory_pressure.duration),
            ("alerts.starved.window", self.starved.window),
            ("alerts.sm_idle.window", self.sm_idle.window),
            ("alerts.tensor_idle.window", self.tensor_idle.window),
            ("alerts.xid.window", self.xid.window),
            ("alerts.health.hold", self.health.hold),
        ];
        for (name, span) in spans {
            crate::util::bounds::CONFIG_SPAN.check(span).map_err(|e| format!("{name} {e}"))?;
        }
        let f = &self.fragmentation;
        if !(0.0..=1.0).contains(&f.enter) || !(0.0..=1.0).contains(&f.exit) || f.exit > f.enter {
            return Err(format!("alerts.fragmentation: need 0 <= exit ({}) <= enter ({}) <= 1", f.exit, f.enter));
        }
        let p = &self.memory_pressure;
        if !(p.critical_free_percent <= p.warn_free_percent && p.warn_free_percent <= p.clear_free_percent) {
            return Err("alerts.memory_pressure: need critical <= warn <= clear".into());
        }
        let s = &self.starved;
        if s.max_utilization > s.clear_utilization {
            return Err("alerts.starved: need max_utilization <= clear_utilization".into());
        }
        if !(0.0..=1.0).contains(&s.clear_data_wait) || !(s.clear_data_wait..=1.0).contains(&s.min_data_wait) {
            return Err("alerts.starved: need 0 <= clear_data_wait <= min_data_wait <= 1".into());
        }
        let m = &self.shm_full;
        if !(0.0..=1.0).contains(&m.clear_share) || !(m.clear_share..=1.0).contains(&m.used_share) {
            return Err("alerts.shm_full: need 0 <= clear_share <= used_share <= 1".into());
        }
        let b = &self.sm_idle;
        if b.clear_utilization > b.min_utilization || b.max_sm_active > b.clear_sm_active {
            return Err("alerts.sm_idle: need clear_utilization <= min_utilization and \
                        max_sm_active <= clear_sm_active"
                .into());
        }
        let t = &self.tensor_idle;
        if t.clear_sm_active > t.min_sm_active || t.max_tensor_active > t.clear_tensor_active {
            return Err("alerts.tensor_idle: need clear_sm_active <= min_sm_active and \
                        max_tensor_active <= clear_tensor_active"
                .into());
        }
        if !(0.0..=1.0).contains(&self.leak.min_r2) {
            return Err("alerts.leak: min_r2 must be between 0 and 1".into());
        }
        Ok(())
    }
}
