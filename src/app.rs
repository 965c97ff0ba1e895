//! Start-up, mode dispatch and exit codes.

use std::io;
use std::process::ExitCode;

use clap::Parser;

use crate::analysis::{self, Analyzer};
use crate::check;
use crate::cli::{Cli, Command, DemoMode, ProbeAction};
use crate::collect::Collector;
use crate::inject::{self, InjectError};
use crate::model::AlertKind;
use crate::poller::{self, SnapshotRx};
use crate::recording;
use crate::settings::{Mode, Settings, SettingsError};
use crate::sinks::{json, table};
use crate::sources::host::SysinfoHost;
use crate::sources::nvml::{InitError, LibrarySpec, NvmlSource};
use crate::sources::probe::{self, DemoProbes, FileProbes, ProbeSource};
use crate::tui;

/// Exit codes, documented in the README.
pub mod exit {
    pub const OK: u8 = 0;
    /// Something failed while running (an output error other than a closed pipe).
    pub const FAILURE: u8 = 1;
    /// Bad usage or config, or no usable NVML: nothing was collected.
    pub const USAGE: u8 = 2;
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Nvml(#[from] InitError),
    #[error("cannot read host metrics: {0}")]
    Host(sysinfo::Error),
    #[error("cannot start gpuscope's threads: {0}")]
    Runtime(io::Error),
    #[error("writing the output: {0}")]
    Output(io::Error),
    #[error(transparent)]
    Inject(#[from] InjectError),
    #[error(transparent)]
    Recording(#[from] recording::OpenError),
    #[error("recording to {path}: {source}")]
    Record { path: std::path::PathBuf, source: io::Error },
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
}

impl AppError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Settings(_) | Self::Nvml(_) => exit::USAGE,
            Self::Host(_) | Self::Runtime(_) | Self::Output(_) => exit::FAILURE,
            Self::Inject(e) => e.exit_code(),
            Self::Recording(_) => exit::USAGE,
            Self::Record { .. } => exit::FAILURE,
            Self::Serve(e) => e.exit_code(),
        }
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => watch(&cli).map(|()| exit::OK),
        Some(Command::Check { window, fail_on }) => check(&cli, *window, fail_on),
        Some(Command::Run { command }) => Err(AppError::Inject(inject::run(command))),
        Some(Command::Record { file, duration, force, append }) => {
            let existing = match (force, append) {
                (true, _) => recording::Existing::Replace,
                (_, true) => recording::Existing::Append,
                _ => recording::Existing::Refuse,
            };
            record(&cli, file, *duration, existing)
        }
        Some(Command::Replay { file, as_json }) => replay(&cli, file, *as_json),
        Some(Command::Serve { listen, max_connections, header_timeout }) => {
            let limits = crate::serve::Limits { max_connections: *max_connections, header_timeout: *header_timeout };
            serve(&cli, *listen, limits).map(|()| exit::OK)
        }
        Some(Command::Probe { action: ProbeAction::Path }) => inject::materialize(&inject::python_dir())
            .map(|p| println!("{}", p.display()))
            .map(|()| exit::OK)
            .map_err(AppError::Inject),
        Some(Command::Probe { action: ProbeAction::Install { python } }) => inject::install(python)
            .map(|p| {
                println!("installed {}", p.display());
                println!("start it in your training script with: import gpuscope_probe; gpuscope_probe.start()");
            })
            .map(|()| exit::OK)
            .map_err(AppError::Inject),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("gpuscope: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The snapshot modes: collect, then hand snapshots to the chosen sink.
fn watch(cli: &Cli) -> Result<(), AppError> {
    let settings = Settings::resolve(cli)?;
    let collector = collector(&settings, settings.mode == Mode::Tui)?;
    let (rx, control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
    let runtime = runtime()?;
    let result = runtime.block_on(async {
        match settings.mode {
            Mode::Json => emit(rx, Some(1), json::write_pretty).await,
            Mode::JsonStream { count } => emit(rx, count, json::write_line).await,
            Mode::Table => emit(rx, Some(1), table::write).await,
            Mode::Tui => tui::run(rx, control, tui::TuiOptions::from_env(&settings)).await.map_err(AppError::Output),
        }
    });
    // A driver call may still be in flight on the poller's thread: leaving
    // without joining it is what lets a hung driver not hang the exit.
    runtime.shutdown_background();
    let one_shot = matches!(settings.mode, Mode::Json | Mode::Table);
    analysis::finish_hooks(if one_shot { HOOKS_ONE_SHOT } else { HOOKS_AT_EXIT });
    result
}

/// How long a one-shot mode (`-1`, `--json`, `check`) waits for the alert
/// hooks its alerts started, and any other mode for those still running
/// when it ends; then they are killed with their process groups.
const HOOKS_ONE_SHOT: std::time::Duration = std::time::Duration::from_secs(10);
const HOOKS_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(1);

/// `gpuscope check`: the exit code says how bad the alerts are.
fn check(cli: &Cli, window: std::time::Duration, fail_on: &[AlertKind]) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    let collector = collector(&settings, false)?;
    let (rx, _control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
    let runtime = runtime()?;
    let last = runtime.block_on(async { check::watch_for(rx, window).await });
    runtime.shutdown_background();
    analysis::finish_hooks(HOOKS_ONE_SHOT);
    let Some(snap) = last else { return Ok(exit::FAILURE) };
    print!("{}", check::report(&snap, window));
    Ok(check::exit_code(&snap.alerts, fail_on))
}

/// `gpuscope serve`: the Prometheus exporter, until SIGINT or SIGTERM.
fn serve(cli: &Cli, listen: std::net::SocketAddr, limits: crate::serve::Limits) -> Result<(), AppError> {
    // Headless whatever stdout is: a missing driver stops the exporter at
    // start (exit 2) rather than leaving it up with nothing to export.
    let settings = Settings::resolve(cli)?;
    let collector = collector(&settings, false)?;
    let (rx, _control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
    let runtime = runtime()?;
    let served = runtime.block_on(async { crate::serve::run(listen, rx, settings.interval, limits).await });
    runtime.shutdown_background();
    analysis::finish_hooks(HOOKS_AT_EXIT);
    Ok(served?)
}

/// `gpuscope record FILE`: headless whatever stdout is.
fn record(
    cli: &Cli,
    path: &std::path::Path,
    duration: Option<std::time::Duration>,
    existing: recording::Existing,
) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    // Before collection: a refused file costs nothing.
    let target = recording::Target::open(path, existing)?;
    if let Some(note) = &target.note {
        eprintln!("gpuscope: {note}");
    }
    let collector = match collector(&settings, false) {
        Ok(c) => c,
        Err(e) => {
            target.discard_if_unused();
            return Err(e);
        }
    };
    let (rx, _control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
    let runtime = runtime()?;
    let written = runtime.block_on(async { recording::record(rx, target, duration).await });
    runtime.shutdown_background();
    analysis::finish_hooks(HOOKS_AT_EXIT);
    let written = written.map_err(|source| AppError::Record { path: path.to_path_buf(), source })?;
    eprintln!("gpuscope: recorded {written} snapshots to {}", path.display());
    Ok(exit::OK)
}

/// `gpuscope replay FILE [--json]`.
fn replay(cli: &Cli, path: &std::path::Path, as_json: bool) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    if as_json || settings.mode != Mode::Tui {
        let analyzer = Analyzer::for_replay(&settings.history, settings.alerts.clone());
        let mut out = io::stdout().lock();
        return match recording::print_json(path, analyzer, &mut out) {
            Ok(summary) => {
                eprintln!("gpuscope: {}: {} snapshots, {}", path.display(), summary.snapshots, summary.skipped);
                Ok(exit::OK)
            }
            Err(recording::StreamError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(exit::OK),
            Err(recording::StreamError::Output(e)) => Err(AppError::Output(e)),
            Err(recording::StreamError::Open(e)) => Err(e.into()),
        };
    }
    let rec = recording::Recording::open(path)?;
    if let Some(header) = &rec.header {
        recording::warn_if_newer(path, header);
    }
    eprintln!("gpuscope: {}: {} snapshots, {}", path.display(), rec.len(), rec.skipped);
    let runtime = runtime()?;
    let options = tui::TuiOptions::from_env(&settings);
    let result = runtime.block_on(tui::replay(rec, settings.history.clone(), settings.alerts.clone(), options));
    runtime.shutdown_background();
    result.map(|()| exit::OK).map_err(AppError::Output)
}

/// Drawing, serving scrapes and writing output; collection never runs here
/// (the poller has a thread of its own), so two workers are plenty.
fn runtime() -> Result<tokio::runtime::Runtime, AppError> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(AppError::Runtime)
}

/// Only the dashboard starts without NVML (`for_dashboard`): it opens at
/// once and loads NVML on its first tick, so a slow or missing driver shows
/// as the data's age or NVML's error (retried with backoff), never as a
/// blank terminal. Every headless command needs the driver up front, and a
/// missing one is exit 2, not an empty report.
fn collector(settings: &Settings, for_dashboard: bool) -> Result<Collector, AppError> {
    let unopened = || {
        let simulated = settings.library == LibrarySpec::Simulated;
        (NvmlSource::unopened(settings.library.clone(), settings.selectors.clone()), simulated)
    };
    let (gpu, simulated) = match (for_dashboard, settings.demo) {
        (true, Some(DemoMode::Auto)) => open_gpus(settings).unwrap_or_else(|_| unopened()),
        (true, _) => unopened(),
        (false, _) => open_gpus(settings)?,
    };
    Ok(Collector {
        gpu: Box::new(gpu),
        host: Box::new(SysinfoHost::new().map_err(AppError::Host)?),
        probes: probes(simulated),
        analyzer: Analyzer::new(&settings.history, settings.alerts.clone()),
        interval: settings.interval,
        simulated,
    })
}

/// The built-in demo gets scripted probes for its processes; anything else
/// reads the real probes' files.
fn probes(simulated: bool) -> Box<dyn ProbeSource> {
    if simulated && std::env::var_os(SIM_SCENARIO_ENV).is_none() {
        Box::new(DemoProbes::new())
    } else {
        Box::new(FileProbes::new(probe::default_dir()))
    }
}

/// Points the simulator at a scenario of the user's own (read by
/// `crates/nvml-sim`), whose processes the demo's scripted probes don't know.
const SIM_SCENARIO_ENV: &str = "GPUSCOPE_SIM_SCENARIO";

/// The real NVML, or the simulator for `--demo` (and for `--demo=auto`
/// when no driver can be loaded).
fn open_gpus(settings: &Settings) -> Result<(NvmlSource, bool), AppError> {
    let simulated = settings.library == LibrarySpec::Simulated;
    match NvmlSource::open(settings.library.clone(), settings.selectors.clone()) {
        Ok(source) => Ok((source, simulated)),
        Err(InitError::Library { lib, reason }) if settings.demo == Some(DemoMode::Auto) => {
            eprintln!("gpuscope: no NVIDIA driver found ({lib}: {reason}); showing simulated GPUs");
            Ok((NvmlSource::open(LibrarySpec::Simulated, settings.selectors.clone())?, true))
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes snapshots as they come until `count` are written or the
/// poller stops. A closed pipe (`gpuscope --json --watch | head -n 1`) is
/// a normal end, not an error.
async fn emit(
    mut rx: SnapshotRx,
    count: Option<u64>,
    write: fn(&crate::model::Snapshot, &mut io::StdoutLock<'static>) -> io::Result<()>,
) -> Result<(), AppError> {
    let mut written = 0u64;
    while count.is_none_or(|c| written < c) {
        if rx.changed().await.is_err() {
            break;
        }
        let Some(snap) = rx.borrow_and_update().clone() else { continue };
        let mut out = io::stdout().lock();
        match write(&snap, &mut out) {
            Ok(()) => written += 1,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(AppError::Output(e)),
        }
    }
    Ok(())
}
