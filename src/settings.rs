//! Flags over config over defaults: what this run will do.

use std::io::IsTerminal;
use std::time::Duration;

use crate::analysis::config::{AlertsConfig, HistoryConfig};
use crate::cli::{Cli, DemoMode};
use crate::config::{Config, ConfigError};
use crate::model::{GpuSelector, SelectError, parse_selectors};
use crate::query::{self, Query, QueryError, Target};
use crate::sources::nvml::{DEFAULT_LIBRARY, LibrarySpec};
use crate::util::bounds;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// One pretty-printed JSON snapshot.
    Json,
    /// NDJSON until killed or `count` lines.
    JsonStream { count: Option<u64> },
    /// One plain-text table.
    Table,
    /// `-1 -l SEC`: a table per interval until killed or `count` tables.
    TableStream { count: Option<u64> },
    /// nvidia-smi's CSV (`Settings::query`): one block, or with `-l` one
    /// per interval until killed or `count` blocks.
    Query { looping: bool, count: Option<u64> },
    /// The interactive dashboard.
    Tui,
}

impl Mode {
    /// Whether the run ends with its first snapshot: `--json`, `-1`, a
    /// query without `-l`, or a stream of `--count 1`.
    pub fn one_shot(&self) -> bool {
        matches!(
            self,
            Self::Json
                | Self::Table
                | Self::Query { looping: false, .. }
                | Self::JsonStream { count: Some(1) }
                | Self::TableStream { count: Some(1) }
                | Self::Query { count: Some(1), .. }
        )
    }
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
    /// `-u` / `-p`: the dashboard shows only these users' / PIDs' processes.
    pub only: ProcessFilter,
    pub history: HistoryConfig,
    pub alerts: AlertsConfig,
    /// What `Mode::Query` prints.
    pub query: Option<Query>,
    /// A one-shot waits for the activity counters' second sample.
    pub activity: bool,
}

/// Empty lists filter nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessFilter {
    pub users: Vec<String>,
    pub pids: Vec<u32>,
}

impl ProcessFilter {
    pub fn keeps(&self, user: Option<&str>, pid: u32) -> bool {
        (self.users.is_empty() || user.is_some_and(|u| self.users.iter().any(|w| w == u)))
            && (self.pids.is_empty() || self.pids.contains(&pid))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DashboardFlags {
    pub no_color: bool,
    pub ascii: bool,
    pub read_only: bool,
    pub no_mouse: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--gpus: {0}")]
    Gpus(#[from] SelectError),
    #[error("-i/--id: {0}")]
    Id(SelectError),
    #[error("--interval {0:?} is shorter than the minimum of {min:?}", min = bounds::INTERVAL.min)]
    Interval(Duration),
    #[error("{0}")]
    Query(#[from] QueryError),
}

impl Settings {
    pub fn resolve(cli: &Cli) -> Result<Self, SettingsError> {
        let config = Config::load(cli.config.as_deref())?;
        // nvidia-smi's -l / -lms set the interval and mean "keep going".
        let looping = cli.loop_s.or(cli.loop_ms);
        let interval = looping.or(cli.interval).unwrap_or(config.interval);
        if interval < bounds::INTERVAL.min {
            return Err(SettingsError::Interval(interval));
        }
        let selectors = match (&cli.gpus, &cli.id) {
            (Some(spec), _) => parse_selectors(spec)?,
            (None, Some(spec)) => parse_selectors(spec).map_err(SettingsError::Id)?,
            (None, None) if config.gpus.is_empty() => Vec::new(),
            (None, None) => parse_selectors(&config.gpus.join(","))?,
        };
        let library = match (cli.demo, cli.nvml_lib.as_ref().or(config.nvml_lib.as_ref())) {
            (Some(DemoMode::Always), _) => LibrarySpec::Simulated,
            (_, Some(path)) => LibrarySpec::Path(path.clone().into_os_string()),
            (_, None) => LibrarySpec::Path(DEFAULT_LIBRARY.into()),
        };
        let query = query_of(cli)?;
        let stream = cli.watch || looping.is_some();
        let mode = match (cli.json, stream, cli.once) {
            _ if query.is_some() => Mode::Query { looping: looping.is_some(), count: cli.count },
            (true, true, _) => Mode::JsonStream { count: cli.count },
            (true, false, _) => Mode::Json,
            // nvidia-smi -l: the table again and again, wherever it goes.
            (false, true, _) => Mode::TableStream { count: cli.count },
            (false, _, false) if std::io::stdout().is_terminal() => Mode::Tui,
            (false, _, _) => Mode::Table,
        };
        let dashboard = DashboardFlags {
            no_color: cli.no_color,
            ascii: cli.ascii,
            read_only: cli.read_only,
            no_mouse: cli.no_mouse,
        };
        Ok(Self {
            mode,
            interval,
            timeout: cli.timeout,
            selectors,
            library,
            demo: cli.demo,
            dashboard,
            only: ProcessFilter { users: cli.users.clone(), pids: cli.pids.clone() },
            history: config.history,
            alerts: config.alerts,
            query,
            activity: cli.activity,
        })
    }
}

fn query_of(cli: &Cli) -> Result<Option<Query>, QueryError> {
    let (target, fields) = match (&cli.query_gpu, &cli.query_compute_apps) {
        (Some(f), _) => (Target::Gpu, f),
        (None, Some(f)) => (Target::ComputeApps, f),
        (None, None) => return Ok(None),
    };
    let format = query::parse_format(cli.format.as_deref().unwrap_or("csv"))?;
    Query::parse(target, fields, format).map(Some)
}
