//! Flags over config over defaults: what this run will do.

use std::io::IsTerminal;
use std::time::Duration;

use crate::analysis::config::{AlertsConfig, HistoryConfig};
use crate::cli::{Cli, DemoMode};
use crate::config::{Config, ConfigError, MIN_INTERVAL};
use crate::model::{GpuSelector, SelectError, parse_selectors};
use crate::sources::nvml::{DEFAULT_LIBRARY, LibrarySpec};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// One pretty-printed JSON snapshot.
    Json,
    /// NDJSON until killed or `count` lines.
    JsonStream { count: Option<u64> },
    /// One plain-text table.
    Table,
    /// The interactive dashboard.
    Tui,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub interval: Duration,
    /// How long a headless mode waits for a driver that does not answer.
    pub timeout: Duration,
    pub selectors: Vec<GpuSelector>,
    pub library: LibrarySpec,
    pub demo: Option<DemoMode>,
    /// How the dashboard draws and what it may do: `--no-color`,
    /// `--ascii`, `--read-only`.
    pub dashboard: DashboardFlags,
    pub history: HistoryConfig,
    pub alerts: AlertsConfig,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DashboardFlags {
    pub no_color: bool,
    pub ascii: bool,
    pub read_only: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--gpus: {0}")]
    Gpus(#[from] SelectError),
    #[error("--interval {0:?} is shorter than the minimum of {MIN_INTERVAL:?}")]
    Interval(Duration),
}

impl Settings {
    pub fn resolve(cli: &Cli) -> Result<Self, SettingsError> {
        let config = Config::load(cli.config.as_deref())?;
        let interval = cli.interval.unwrap_or(config.interval);
        if interval < MIN_INTERVAL {
            return Err(SettingsError::Interval(interval));
        }
        let selectors = match &cli.gpus {
            Some(spec) => parse_selectors(spec)?,
            None if config.gpus.is_empty() => Vec::new(),
            None => parse_selectors(&config.gpus.join(","))?,
        };
        let library = match (cli.demo, cli.nvml_lib.as_ref().or(config.nvml_lib.as_ref())) {
            (Some(DemoMode::Always), _) => LibrarySpec::Simulated,
            (_, Some(path)) => LibrarySpec::Path(path.clone().into_os_string()),
            (_, None) => LibrarySpec::Path(DEFAULT_LIBRARY.into()),
        };
        let mode = match (cli.json, cli.watch, cli.once) {
            (true, true, _) => Mode::JsonStream { count: cli.count },
            (true, false, _) => Mode::Json,
            (false, _, false) if std::io::stdout().is_terminal() => Mode::Tui,
            (false, _, _) => Mode::Table,
        };
        let dashboard = DashboardFlags { no_color: cli.no_color, ascii: cli.ascii, read_only: cli.read_only };
        Ok(Self {
            mode,
            interval,
            timeout: cli.timeout,
            selectors,
            library,
            demo: cli.demo,
            dashboard,
            history: config.history,
            alerts: config.alerts,
        })
    }
}
