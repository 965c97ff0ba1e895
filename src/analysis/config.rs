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
}

impl Default for StarvedConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_utilization: 30.0,
            clear_utilization: 40.0,
            window: Duration::from_secs(120),
            min_process_memory_mib: 1024,
        }
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
        if !(0.0..=1.0).contains(&self.leak.min_r2) {
            return Err("alerts.leak: min_r2 must be between 0 and 1".into());
        }
        Ok(())
    }
}
