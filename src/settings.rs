//! Flags over config over defaults: what this run will do.

use std::time::Duration;

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
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub interval: Duration,
    pub selectors: Vec<GpuSelector>,
    pub library: LibrarySpec,
    pub demo: Option<DemoMode>,
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
            // The interactive dashboard is its own piece of work; until it
            // lands, a terminal gets the same table a pipe does.
            (false, _, _) => Mode::Table,
        };
        Ok(Self { mode, interval, selectors, library, demo: cli.demo })
    }
}
