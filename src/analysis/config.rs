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

/// A setting the config file may not hold: the keys it is about (dotted,
/// `alerts.starved.max_utilization`, the first one set in the file is where
/// the error points) and what is wrong, naming the key as a user writes it
/// (`[alerts.starved] max_utilization = 500: must be a percentage from 0 to
/// 100`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub keys: Vec<String>,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `[alerts.starved] max_utilization` for `alerts.starved.max_utilization`.
fn as_written(key: &str) -> String {
    match key.rsplit_once('.') {
        Some((table, name)) => format!("[{table}] {name}"),
        None => key.to_string(),
    }
}

/// What a threshold counts and so the range it must fall in.
#[derive(Debug, Clone, Copy)]
enum Scale {
    /// 0 to 100.
    Percent,
    /// 0 to 1: a share of time, of memory, or a fit quality.
    Share,
}

fn check_number(table: &str, key: &str, value: f64, scale: Scale) -> Result<(), Refusal> {
    let (max, what) = match scale {
        Scale::Percent => (100.0, "a percentage from 0 to 100"),
        Scale::Share => (1.0, "a share from 0 to 1"),
    };
    // NaN fails the range check too: it is in no range.
    if (0.0..=max).contains(&value) {
        return Ok(());
    }
    let key = format!("{table}.{key}");
    Err(Refusal { message: format!("{} = {value}: must be {what}", as_written(&key)), keys: vec![key] })
}

/// `[table] need a (1) <= b (2)`: thresholds out of order, with their values.
fn check_order(table: &str, chain: &[(&str, f64)]) -> Result<(), Refusal> {
    if chain.windows(2).all(|w| w[0].1 <= w[1].1) {
        return Ok(());
    }
    let need: Vec<String> = chain.iter().map(|(k, v)| format!("{k} ({v})")).collect();
    Err(Refusal {
        keys: chain.iter().map(|(k, _)| format!("{table}.{k}")).collect(),
        message: format!("[{table}] need {}", need.join(" <= ")),
    })
}

fn check_span(key: &str, span: Duration, bounds: crate::util::bounds::Bounds) -> Result<(), Refusal> {
    bounds.check(span).map(drop).map_err(|e| Refusal {
        message: format!("{} = {:?}: {e}", as_written(key), humantime::format_duration(span).to_string()),
        keys: vec![key.to_string()],
    })
}

/// The most memory a size threshold may name: 16 TiB, beyond any GPU's, and
/// small enough that the rules' byte arithmetic cannot overflow.
pub const MAX_MIB: u64 = 16 << 20;

fn check_mib(key: &str, mib: u64) -> Result<(), Refusal> {
    if mib <= MAX_MIB {
        return Ok(());
    }
    Err(Refusal {
        message: format!("{} = {mib}: must be from 0 to {MAX_MIB} (MiB, 16 TiB)", as_written(key)),
        keys: vec![key.to_string()],
    })
}

impl HistoryConfig {
    pub fn validate(&self) -> Result<(), Refusal> {
        check_span("history.window", self.window, crate::util::bounds::HISTORY_WINDOW)
    }
}

impl AlertsConfig {
    /// Every threshold within its range (percentages 0 to 100, shares 0 to
    /// 1, never NaN), every span within `bounds::CONFIG_SPAN`, and the
    /// thresholds of each rule in an order it can raise and clear by.
    pub fn validate(&self) -> Result<(), Refusal> {
        use Scale::{Percent, Share};
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
        for (key, span) in spans {
            check_span(key, span, crate::util::bounds::CONFIG_SPAN)?;
        }
        let sizes = [
            ("alerts.fragmentation.min_reserved_mib", self.fragmentation.min_reserved_mib),
            ("alerts.fragmentation.min_inactive_split_mib", self.fragmentation.min_inactive_split_mib),
            ("alerts.leak.min_growth_mib", self.leak.min_growth_mib),
            ("alerts.starved.min_process_memory_mib", self.starved.min_process_memory_mib),
        ];
        for (key, mib) in sizes {
            check_mib(key, mib)?;
        }
        let (f, l, p, s, m, b, t) = (
            &self.fragmentation,
            &self.leak,
            &self.memory_pressure,
            &self.starved,
            &self.shm_full,
            &self.sm_idle,
            &self.tensor_idle,
        );
        let numbers = [
            ("alerts.fragmentation", "enter", f.enter, Share),
            ("alerts.fragmentation", "exit", f.exit, Share),
            ("alerts.leak", "min_r2", l.min_r2, Share),
            ("alerts.memory_pressure", "warn_free_percent", p.warn_free_percent, Percent),
            ("alerts.memory_pressure", "critical_free_percent", p.critical_free_percent, Percent),
            ("alerts.memory_pressure", "clear_free_percent", p.clear_free_percent, Percent),
            ("alerts.starved", "max_utilization", s.max_utilization, Percent),
            ("alerts.starved", "clear_utilization", s.clear_utilization, Percent),
            ("alerts.starved", "min_data_wait", s.min_data_wait, Share),
            ("alerts.starved", "clear_data_wait", s.clear_data_wait, Share),
            ("alerts.shm_full", "used_share", m.used_share, Share),
            ("alerts.shm_full", "clear_share", m.clear_share, Share),
            ("alerts.sm_idle", "min_utilization", b.min_utilization, Percent),
            ("alerts.sm_idle", "max_sm_active", b.max_sm_active, Percent),
            ("alerts.sm_idle", "clear_utilization", b.clear_utilization, Percent),
            ("alerts.sm_idle", "clear_sm_active", b.clear_sm_active, Percent),
            ("alerts.tensor_idle", "min_sm_active", t.min_sm_active, Percent),
            ("alerts.tensor_idle", "max_tensor_active", t.max_tensor_active, Percent),
            ("alerts.tensor_idle", "clear_sm_active", t.clear_sm_active, Percent),
            ("alerts.tensor_idle", "clear_tensor_active", t.clear_tensor_active, Percent),
        ];
        for (table, key, value, scale) in numbers {
            check_number(table, key, value, scale)?;
        }
        check_order("alerts.fragmentation", &[("exit", f.exit), ("enter", f.enter)])?;
        check_order(
            "alerts.memory_pressure",
            &[
                ("critical_free_percent", p.critical_free_percent),
                ("warn_free_percent", p.warn_free_percent),
                ("clear_free_percent", p.clear_free_percent),
            ],
        )?;
        check_order(
            "alerts.starved",
            &[("max_utilization", s.max_utilization), ("clear_utilization", s.clear_utilization)],
        )?;
        check_order("alerts.starved", &[("clear_data_wait", s.clear_data_wait), ("min_data_wait", s.min_data_wait)])?;
        check_order("alerts.shm_full", &[("clear_share", m.clear_share), ("used_share", m.used_share)])?;
        check_order(
            "alerts.sm_idle",
            &[("clear_utilization", b.clear_utilization), ("min_utilization", b.min_utilization)],
        )?;
        check_order("alerts.sm_idle", &[("max_sm_active", b.max_sm_active), ("clear_sm_active", b.clear_sm_active)])?;
        check_order(
            "alerts.tensor_idle",
            &[("clear_sm_active", t.clear_sm_active), ("min_sm_active", t.min_sm_active)],
        )?;
        check_order(
            "alerts.tensor_idle",
            &[("max_tensor_active", t.max_tensor_active), ("clear_tensor_active", t.clear_tensor_active)],
        )?;
        Ok(())
    }
}
