//! Start-up and mode dispatch; the exit statuses are `crate::exit`'s.

use std::io::{self, IsTerminal};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;

use crate::analysis::{self, Analyzer};
use crate::check;
use crate::cli::{Cli, Command, DemoMode, ProbeAction};
use crate::collect::{Collector, Reads};
use crate::exit;
use crate::output::stdout::{self, Delivered};
use crate::output::{json, table};
use crate::poller::{self, SnapshotRx};
use crate::probe::files::{DemoProbes, FileProbes, ProbeSource, default_dir};
use crate::probe::inject::{self, InjectError};
use crate::query::{self, QueryError};
use crate::recording;
use crate::settings::{Mode, Settings, SettingsError};
use crate::sources::host::ProcHost;
use crate::sources::nvml::{Calls, InitError, LibrarySpec, NvmlSource, Wanted};
use crate::tui;
use crate::util::bounds;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Nvml(#[from] InitError),
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
    #[error("{0}")]
    DriverSilent(Silence),
    #[error("collection stopped unexpectedly (see the message above)")]
    PollerStopped,
    #[error(transparent)]
    Memviz(#[from] crate::probe::memviz::MemvizError),
    #[error(transparent)]
    Attach(#[from] crate::probe::attach::AttachError),
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    /// `run --report FILE` where FILE cannot be written: said before the job starts.
    #[error("{0}")]
    ReportPath(String),
}

/// A driver that did not answer: for how long, and in which call.
#[derive(Debug, Clone)]
pub struct Silence {
    waited: Duration,
    call: Option<String>,
}

impl Silence {
    fn new(since: Instant, calls: &Calls) -> Self {
        Self { waited: since.elapsed(), call: calls.current().map(|c| c.to_string()) }
    }
}

impl std::fmt::Display for Silence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Whole seconds (or milliseconds under one): the nanoseconds of a
        // measured wait are noise.
        let waited = Duration::from_millis(if self.waited < Duration::from_secs(1) {
            bounds::millis(self.waited)
        } else {
            bounds::millis(self.waited).saturating_add(500) / 1000 * 1000
        });
        write!(f, "the NVML driver did not answer for {}", humantime::format_duration(waited))?;
        match &self.call {
            Some(call) => write!(f, " (stuck in {call}); giving up"),
            None => f.write_str("; giving up"),
        }
    }
}

impl AppError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Settings(_) | Self::Nvml(_) => exit::USAGE,
            Self::Runtime(_) | Self::Output(_) => exit::FAILURE,
            Self::Inject(e) => e.exit_code(),
            Self::Recording(_) => exit::USAGE,
            Self::Record { .. } => exit::FAILURE,
            Self::Serve(e) => e.exit_code(),
            Self::DriverSilent(_) => exit::DRIVER_SILENT,
            Self::PollerStopped => exit::FAILURE,
            Self::Memviz(e) if e.refused() => exit::USAGE,
            Self::Memviz(_) => exit::FAILURE,
            Self::Attach(e) if e.refused() => exit::USAGE,
            Self::Attach(_) => exit::FAILURE,
            Self::Fleet(e) => e.exit_code(),
            Self::ReportPath(_) => exit::USAGE,
        }
    }
}

pub fn main() -> ExitCode {
    // Before any thread starts (see there).
    crate::sources::procstat::reserve_descriptors();
    let cli = match Cli::try_parse_from(crate::cli::nvidia_smi_spellings(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(clap_exit(&e)),
    };
    // `watch` knows only once it has its settings whether it makes one
    // snapshot; every subcommand makes many, or none.
    if cli.command.is_some() {
        one_malloc_arena();
    }
    let result = match &cli.command {
        None if cli.help_query_gpu => print(&query::help_gpu()),
        None if cli.help_query_compute_apps => print(&query::help_compute_apps()),
        None => watch(&cli).map(|()| exit::OK),
        Some(Command::Check { window, fail_on, health, npd }) => {
            let judge = match (health, npd) {
                (false, _) => check::Judge::Alerts(fail_on),
                (true, false) => check::Judge::Health,
                (true, true) => check::Judge::HealthNpd,
            };
            check(&cli, *window, &judge)
        }
        Some(Command::Doctor { pids, json }) => doctor(&cli, pids, *json),
        Some(Command::Select(args)) => select(&cli, args),
        Some(Command::Run { command, report, no_report }) => match no_report {
            true => inject::command(command).map_err(AppError::Inject).and_then(|cmd| Err(inject::exec(cmd).into())),
            false => run_job(&cli, command, report.as_deref()),
        },
        Some(Command::Attach { pid, script_only }) => attach(*pid, *script_only),
        Some(Command::Memviz { pid, output, history }) => {
            crate::probe::memviz::run(*pid, output.as_deref(), *history).map_err(AppError::Memviz).and_then(|path| {
                print(&format!(
                    "{}\nopen it in PyTorch's memory viewer: https://pytorch.org/memory_viz\n",
                    path.display()
                ))
            })
        }
        Some(Command::Record { file, duration, force, append }) => {
            let existing = match (force, append) {
                (true, _) => recording::Existing::Replace,
                (_, true) => recording::Existing::Append,
                _ => recording::Existing::Refuse,
            };
            record(&cli, file, *duration, existing)
        }
        Some(Command::Replay { file, as_json }) => replay(&cli, file, *as_json),
        Some(Command::Completions { shell }) => print(&crate::docs::completions(*shell)),
        Some(Command::Man) => crate::docs::man_page().map_err(AppError::Output).and_then(|page| print(&page)),
        Some(Command::Serve {
            listen,
            max_connections,
            header_timeout,
            tls_cert,
            tls_key,
            token_file,
            token_healthz,
            no_processes,
            web,
        }) => {
            let limits = crate::serve::Limits { max_connections: *max_connections, header_timeout: *header_timeout };
            let options = crate::serve::Options {
                listen: *listen,
                limits,
                tls: tls_cert.clone().zip(tls_key.clone()),
                token_file: token_file.clone(),
                token_healthz: *token_healthz,
                no_processes: *no_processes,
                web: *web,
            };
            serve(&cli, options).map(|()| exit::OK)
        }
        Some(Command::Fleet(args)) => fleet(&cli, args),
        Some(Command::Probe { action: ProbeAction::Path }) => {
            inject::probe_path().map_err(AppError::Inject).and_then(|p| print(&format!("{}\n", p.display())))
        }
        Some(Command::Probe { action: ProbeAction::Install { target: Some(dir), .. } }) => {
            inject::install_into(dir).map_err(AppError::Inject).and_then(|p| {
                print(&format!(
                    "installed {} and {}\nput {} on PYTHONPATH (in an image: ENV PYTHONPATH={}) and every Python \
                     there starts the probe by itself\n",
                    p.display(),
                    dir.join("sitecustomize.py").display(),
                    dir.display(),
                    dir.display()
                ))
            })
        }
        Some(Command::Probe { action: ProbeAction::Install { python, target: None } }) => {
            inject::install(python).map_err(AppError::Inject).and_then(|p| {
                print(&format!(
                    "installed {}\nstart it in your training script with: \
                     import gpuscope_probe; gpuscope_probe.start()\n",
                    p.display()
                ))
            })
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(AppError::Settings(SettingsError::Query(e @ QueryError::UnknownField(_)))) => {
            // Where and how nvidia-smi says it, for scripts that look.
            let _ = print(&format!("{e}\n\n"));
            crate::output::stderr::say!(
                "gpuscope: --help-query-gpu and --help-query-compute-apps list the fields gpuscope answers"
            );
            ExitCode::from(exit::USAGE)
        }
        Err(e) => {
            crate::output::stderr::say!("gpuscope: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `gpuscope fleet`: no NVML here; the nodes' exporters (or a Prometheus)
/// are the source, read on the same kind of runtime as the other modes.
fn fleet(cli: &Cli, args: &crate::cli::FleetArgs) -> Result<u8, AppError> {
    use crate::fleet::{self, Headless};
    let settings = Settings::resolve(cli)?;
    let (interval, timeout) = (settings.interval, settings.timeout);
    let mode = match (args.json, args.watch, args.once) {
        (true, true, _) => Some(Headless::JsonStream { count: args.count }),
        (true, false, _) => Some(Headless::Json),
        (false, _, true) => Some(Headless::Table),
        _ if !io::stdout().is_terminal() => Some(Headless::Table),
        _ => None,
    };
    let runtime = runtime()?;
    let result = runtime.block_on(async {
        let rx = fleet::start(args, interval, timeout)?;
        match mode {
            Some(mode) => fleet::headless(rx, mode, interval, timeout).await,
            None => fleet::view::run(rx, tui::TuiOptions::from_env(&settings))
                .await
                .map(|()| crate::exit::OK)
                .map_err(fleet::FleetError::Output),
        }
    });
    runtime.shutdown_background();
    Ok(result?)
}

/// `gpuscope attach PID`.
fn attach(pid: u32, script_only: bool) -> Result<u8, AppError> {
    use crate::probe::attach;
    let target = attach::inspect(std::path::Path::new("/proc"), pid)?;
    // A script for an interpreter that cannot run it would only mislead:
    // the same refusal, and exit status, as `attach` itself.
    attach::supported(&target)?;
    if script_only {
        let script = attach::prepare(&target)?.keep();
        return print(&format!("{}\n", script.display()));
    }
    attach::start(target.pid)?;
    print(&format!(
        "the probe is started in process {pid} at its next safe point; its figures appear once it uses CUDA\n"
    ))
}

/// Text on stdout; a closed pipe is a normal end.
fn print(text: &str) -> Result<u8, AppError> {
    stdout::print(text).map(|_| exit::OK).map_err(AppError::Output)
}

/// `--help` and `--version` go through the same writer as everything else
/// (clap's own ignores a failed write); usage errors go to stderr, exit 2.
fn clap_exit(e: &clap::Error) -> u8 {
    use clap::error::ErrorKind;
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        if let Some(hint) = foreign_hint(e) {
            crate::output::stderr::say!("\n  hint: {hint}");
        }
        return exit::USAGE;
    }
    let text = e.render();
    let text = if io::stdout().is_terminal() { text.ansi().to_string() } else { text.to_string() };
    match print(&text) {
        Ok(code) => code,
        Err(err) => {
            crate::output::stderr::say!("gpuscope: {err}");
            err.exit_code()
        }
    }
}

/// A flag from nvidia-smi, nvitop or gpustat that gpuscope spells otherwise.
fn foreign_hint(e: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(arg) => crate::cli::foreign_flag_hint(arg),
        _ => None,
    }
}

/// The snapshot modes: collect, then hand snapshots to the chosen sink.
fn watch(cli: &Cli) -> Result<(), AppError> {
    let settings = Settings::resolve(cli)?;
    if !settings.mode.one_shot() {
        one_malloc_arena();
    }
    if settings.mode == Mode::Tui {
        let collector = collector(&settings, Feeds::Dashboard, &Calls::default())?;
        // In the header, where the dashboard's user sees it (a line on
        // stderr would only show after quitting).
        // The charts draw from the analyzer's history: one copy, and every
        // tick in it, not only those the dashboard happened to draw.
        let options = tui::TuiOptions {
            notice: collector.fallback.clone(),
            history: Some(collector.analyzer.history()),
            ..tui::TuiOptions::from_env(&settings)
        };
        let (rx, control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
        let runtime = runtime()?;
        let result = runtime.block_on(tui::run(rx, control, options));
        runtime.shutdown_background();
        return result.map_err(AppError::Output);
    }
    let started = Instant::now();
    let feeds = Feeds::Headless { wanted: wanted_by(&settings), once: settings.mode.one_shot() };
    let headless = Headless::start(&settings, bounds::later(started, settings.timeout), feeds)?;
    // One-shots: the whole run within the timeout. A stream: each line
    // within an interval and the timeout of the one before.
    let patience = settings.interval.saturating_add(settings.timeout);
    let first = Wait { since: started, deadline: bounds::later(started, settings.timeout) };
    let hooks = if settings.mode.one_shot() { HOOKS_ONE_SHOT } else { HOOKS_AT_EXIT };
    headless.finish(hooks, |rx, calls| async move {
        let calls = &calls;
        match settings.mode {
            Mode::Json => emit(rx, Some(1), json::write_pretty, first, patience, calls).await,
            Mode::JsonStream { count } => emit(rx, count, json::write_line, first, patience, calls).await,
            Mode::TableStream { count } => emit(rx, count, table::write, first, patience, calls).await,
            Mode::Query { looping, count } => {
                let Some(query) = settings.query.clone() else { return Err(AppError::PollerStopped) };
                let count = if looping { count } else { Some(1) };
                emit(rx, count, query_writer(query), first, patience, calls).await
            }
            Mode::Table | Mode::Tui => emit(rx, Some(1), table::write, first, patience, calls).await,
        }
    })
}

/// How long a one-shot mode (`-1`, `--json`, `check`) waits for the alert
/// hooks its alerts started, and any other mode for those still running
/// when it ends; then they are killed with their process groups.
const HOOKS_ONE_SHOT: Duration = Duration::from_secs(10);
const HOOKS_AT_EXIT: Duration = Duration::from_secs(1);

/// `gpuscope check`: the exit code says how bad the alerts are, and a
/// driver that stops answering is the worst of all.
/// How often `run` samples its job: modest, as the probe's own figures
/// come about once a second, unless `--interval` says otherwise.
const RUN_INTERVAL: Duration = Duration::from_secs(2);
/// How long the report waits for the last sample after the job ended (a
/// hung driver must not hold the job's exit).
const RUN_LAST_SAMPLE: Duration = Duration::from_secs(5);

/// `gpuscope run`: the job as gpuscope's child (`supervise`), sampled on a
/// thread of its own once it has started, so that nothing delays its
/// start; at its end the report, and the job's own status.
fn run_job(cli: &Cli, command: &[std::ffi::OsString], report: Option<&std::path::Path>) -> Result<u8, AppError> {
    use crate::probe::inject::supervise;
    use crate::run_report::{Gathered, ReportExit};
    let mut settings = Settings::resolve(cli)?;
    settings.interval = cli.interval.unwrap_or(RUN_INTERVAL);
    let interval = settings.interval;
    // A report that cannot be written must be said before a long job,
    // not after it.
    if let Some(path) = report {
        check_writable(path).map_err(|e| AppError::ReportPath(format!("--report {}: {e}", path.display())))?;
    }
    let mut cmd = inject::command(command)?;
    let started = Instant::now();
    let job = supervise::spawn(&mut cmd).map_err(|e| AppError::Inject(inject::start_failed(&cmd, e)))?;
    let gathered = Arc::new(std::sync::Mutex::new(Gathered::default()));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (done, last) = std::sync::mpsc::channel::<()>();
    let (root, shared) = (job.pid(), Arc::clone(&gathered));
    let sampler = std::thread::Builder::new().name("gpuscope-run-sampler".into()).spawn(move || {
        sample_job(&settings, root, &shared, &stopped);
        let _ = done.send(());
    });
    let ended = job.wait().map_err(|e| AppError::Inject(inject::start_failed(&cmd, e)))?;
    let duration = started.elapsed();
    let _ = stop.send(());
    if sampler.is_ok() {
        let _ = last.recv_timeout(RUN_LAST_SAMPLE);
    }
    let (code, signal) = match ended {
        supervise::Ended::Exited(c) => (Some(c), None),
        supervise::Ended::Signalled(s) => (None, Some(s)),
    };
    let exit = ReportExit { status: ended.exit_status(), code, signal };
    let words = command.iter().map(|w| w.to_string_lossy().into_owned()).collect();
    let interval = interval.as_secs_f64();
    let done = gathered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).finish(
        words,
        exit,
        duration.as_secs_f64(),
        interval,
    );
    crate::output::stderr::write(format_args!("{}", done.text()));
    if let Some(path) = report {
        let written = serde_json::to_vec_pretty(&done).map_err(|e| e.to_string()).and_then(|mut json| {
            json.push(b'\n');
            let mut file =
                crate::util::own_files::open_ours(path, std::fs::OpenOptions::new().write(true).create(true))?;
            file.set_len(0).and_then(|()| io::Write::write_all(&mut file, &json)).map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            crate::output::stderr::say!("gpuscope: cannot write the report to {}: {e}", path.display());
        }
    }
    Ok(exit.status)
}

/// Whether `path` can take the report: its folder exists and lets us
/// create a file, or a regular file of this user's is there and may be
/// written (what `own_files::open_ours` will accept at the end: never a
/// link). Nothing is created or truncated here: a job that fails to start
/// leaves no file.
fn check_writable(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    let access = |p: &std::path::Path, mode| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)?;
        // SAFETY: a valid NUL-terminated path; access(2) only reads it.
        if unsafe { libc::access(c.as_ptr(), mode) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Err("is a directory".into()),
        Ok(m) if m.file_type().is_symlink() => {
            Err("is a symbolic link, and gpuscope does not write through links".into())
        }
        Ok(m) if !m.is_file() => Err("is not a regular file (a FIFO, a device or a socket)".into()),
        Ok(m) if std::os::unix::fs::MetadataExt::uid(&m) != crate::util::current_uid() => {
            Err(format!("belongs to uid {}, not to this user", std::os::unix::fs::MetadataExt::uid(&m)))
        }
        Ok(_) => access(path, libc::W_OK).map_err(|e| format!("cannot write it: {e}")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => access(dir, libc::W_OK | libc::X_OK)
                    .map_err(|e| format!("cannot create it in {}: {e}", dir.display())),
                Ok(_) => Err(format!("{} is not a directory", dir.display())),
                Err(e) => Err(format!("no folder {}: {e}", dir.display())),
            }
        }
        Err(e) => Err(format!("cannot reach it: {e}")),
    }
}

/// Samples the job every interval until `stop`, then once more: the
/// energy counters as it ended.
fn sample_job(
    settings: &Settings,
    root: u32,
    gathered: &std::sync::Mutex<crate::run_report::Gathered>,
    stop: &std::sync::mpsc::Receiver<()>,
) {
    let lock = || gathered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // What the report shows: energy, activity, and per-process samples to
    // share a GPU the job did not have to itself.
    let wanted = Wanted { energy: true, activity: true, process_samples: true, ..Wanted::NONE };
    let mut collector = match collector(settings, Feeds::Headless { wanted, once: false }, &Calls::default()) {
        Ok(c) => c,
        Err(e) => return lock().unavailable(e.to_string()),
    };
    let proc_root = std::path::Path::new("/proc");
    loop {
        let snap = collector.tick();
        let ours = crate::run_report::members(&snap, root, proc_root);
        lock().observe(&snap, &ours);
        match stop.recv_timeout(settings.interval) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
    }
    let snap = collector.tick();
    let ours = crate::run_report::members(&snap, root, proc_root);
    lock().observe(&snap, &ours);
}

fn check(cli: &Cli, window: Option<Duration>, judge: &check::Judge<'_>) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    // A health check judges the first snapshot (its slow readings taken):
    // it must fit a Slurm prolog and node-problem-detector's 5 s default.
    let window = window.unwrap_or(if judge.health() { Duration::ZERO } else { check::WINDOW });
    // Its report is the alerts, whose rules read what every output gets.
    // A check of one snapshot ends before any driver event could come:
    // it starts no listener (nor leaves one half-loaded at exit).
    let wanted = Wanted { events: !window.is_zero(), ..Wanted::ALERTS };
    let seen = match watch_window(&settings, window, wanted)? {
        Ok(seen) => seen,
        Err(silent) => return Ok(silent),
    };
    let Some(snap) = &seen.last else { return Err(AppError::PollerStopped) };
    let (text, code) = match judge {
        check::Judge::Alerts(fail_on) => (check::report(&seen, window, None), check::exit_code(&snap.alerts, fail_on)),
        check::Judge::Health => check::health_report(snap),
        check::Judge::HealthNpd => check::npd_report(snap),
    };
    print(&text)?;
    Ok(code)
}

/// `check`'s and `doctor`'s watch: snapshots from now for `window`, then
/// up to `--timeout` for a late one. Older than an interval at the
/// window's end, the newest snapshot is late: the next is waited for (a
/// slow tick only costs that wait), and the driver is called silent only
/// when none has come by the deadline; then `Err` holds the exit status
/// `check_silent` gave, its report printed.
fn watch_window(settings: &Settings, window: Duration, wanted: Wanted) -> Result<Result<check::Watched, u8>, AppError> {
    let started = Instant::now();
    let window_end = bounds::later(started, window);
    let deadline = bounds::later(window_end, settings.timeout);
    let headless = match Headless::start(settings, deadline, Feeds::streaming(wanted)) {
        Ok(started) => started,
        Err(AppError::DriverSilent(silence)) => return check_silent(&silence, None).map(Err),
        Err(e) => return Err(e),
    };
    let calls = headless.calls.clone();
    let fresh_within = settings.interval;
    let seen =
        headless.finish(HOOKS_ONE_SHOT, |rx, _| check::watch_for(rx, window_end.into(), fresh_within, deadline.into()));
    if seen.silent {
        let since = seen.last_at.map_or(started, tokio::time::Instant::into_std);
        return check_silent(&Silence::new(since, &calls), Some(&seen)).map(Err);
    }
    Ok(Ok(seen))
}

/// How long `doctor` watches, and its longest tick: two readings at least,
/// for what needs two (CPU percentages, the activity counters, the
/// cgroup's throttling), whatever interval the config sets for the views.
const DOCTOR_WATCH: Duration = Duration::from_secs(2);
const DOCTOR_TICK: Duration = Duration::from_secs(1);

/// `gpuscope doctor`: ranked findings for running jobs, exit 0 / 1 / 2.
fn doctor(cli: &Cli, pids: &[u32], json: bool) -> Result<u8, AppError> {
    let mut settings = Settings::resolve(cli)?;
    settings.interval = settings.interval.min(DOCTOR_TICK);
    let seen = match watch_window(&settings, DOCTOR_WATCH, Wanted::ALL)? {
        Ok(seen) => seen,
        Err(silent) => return Ok(silent),
    };
    let Some(snap) = &seen.last else { return Err(AppError::PollerStopped) };
    let report = crate::doctor::diagnose_with(snap, pids, &settings.alerts);
    if json {
        print(&(serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"))?;
    } else {
        print(&crate::doctor::render(&report))?;
    }
    Ok(report.exit_code())
}

/// `gpuscope select`: one snapshot (no activity counters, no PCIe rates:
/// none of them is judged), the devices that fit on stdout.
fn select(cli: &Cli, args: &crate::cli::SelectArgs) -> Result<u8, AppError> {
    use crate::pick;
    let criteria = pick::Criteria {
        count: usize::from(args.count),
        min_free: args.min_free,
        max_util: args.max_util,
        no_processes: args.no_processes,
        count_cached_free: args.count_cached_free,
        mig: args.mig,
    };
    let settings = Settings::resolve(cli)?;
    let started = Instant::now();
    let deadline = bounds::later(started, settings.timeout);
    let headless = Headless::start(&settings, deadline, Feeds::Headless { wanted: Wanted::NONE, once: true })?;
    let calls = headless.calls.clone();
    let seen = headless
        .finish(HOOKS_ONE_SHOT, |rx, _| check::watch_for(rx, started.into(), settings.interval, deadline.into()));
    let Some(snap) = seen.last.filter(|_| !seen.silent) else {
        return Err(AppError::DriverSilent(Silence::new(started, &calls)));
    };
    let outcome = pick::choose(&snap, &criteria);
    let Some(picked) = outcome.chosen(criteria.count) else {
        crate::output::stderr::say!("gpuscope: {}", outcome.shortfall(&criteria));
        return Ok(exit::SELECT_SHORT);
    };
    match pick::render(&picked, args.format) {
        Ok(line) => print(&line),
        Err(why) => {
            crate::output::stderr::say!("gpuscope: {why}");
            Ok(exit::USAGE)
        }
    }
}

/// A check whose driver went silent: the last alerts it saw, the silence
/// as a critical finding, a line on stderr, and its own exit code.
fn check_silent(silence: &Silence, seen: Option<&check::Watched>) -> Result<u8, AppError> {
    let none = check::Watched { last: None, last_at: None, silent: true };
    let text = check::report(seen.unwrap_or(&none), Duration::ZERO, Some(&silence.to_string()));
    crate::output::stderr::say!("gpuscope: {silence}");
    print(&text)?;
    Ok(exit::DRIVER_SILENT)
}

/// `gpuscope serve`: the Prometheus exporter, until SIGINT or SIGTERM.
fn serve(cli: &Cli, options: crate::serve::Options) -> Result<(), AppError> {
    // Headless whatever stdout is: a missing driver stops the exporter at
    // start (exit 2) rather than leaving it up with nothing to export, and
    // so does one that does not answer (exit 3). Later silences are
    // `/healthz`'s to report. Bad certificate, key or token files stop it
    // before NVML is touched (exit 2).
    let settings = Settings::resolve(cli)?;
    let prepared = crate::serve::Prepared::load(options)?;
    let deadline = bounds::later(Instant::now(), settings.timeout);
    let headless = Headless::start(&settings, deadline, Feeds::streaming(Wanted::ALL))?;
    // `--demo=auto` without a driver has said so on stderr already.
    let simulated = settings.library == LibrarySpec::Simulated;
    let served = headless.finish(HOOKS_AT_EXIT, |rx, _| crate::serve::run(prepared, rx, settings.interval, simulated));
    Ok(served?)
}

/// `gpuscope record FILE`: headless whatever stdout is.
fn record(
    cli: &Cli,
    path: &std::path::Path,
    duration: Option<Duration>,
    existing: recording::Existing,
) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    // Before collection: a refused file costs nothing.
    let target = recording::Target::open(path, existing)?;
    if let Some(note) = &target.note {
        crate::output::stderr::say!("gpuscope: {note}");
    }
    let started = Instant::now();
    // Replayed as JSON, a recording shows every reading.
    let deadline = bounds::later(started, settings.timeout);
    let headless = match Headless::start(&settings, deadline, Feeds::streaming(Wanted::ALL)) {
        Ok(started) => started,
        Err(e) => {
            target.discard_if_unused();
            return Err(e);
        }
    };
    let (newest, calls) = (headless.rx.clone(), headless.calls.clone());
    let written = headless.finish(HOOKS_AT_EXIT, |rx, _| recording::record(rx, target, duration));
    let written = written.map_err(|source| AppError::Record { path: path.to_path_buf(), source })?;
    crate::output::stderr::say!("gpuscope: recorded {written} snapshots to {}", path.display());
    // The recording stops on time whatever the driver does; a driver that
    // had stopped answering by then is reported, like a check's.
    let last = newest.borrow().clone();
    match silent_for(last.as_deref(), started, settings.interval.saturating_add(settings.timeout)) {
        Some(waited) => Err(AppError::DriverSilent(Silence { waited, call: calls.current().map(|c| c.to_string()) })),
        None => Ok(exit::OK),
    }
}

/// How long the driver has been silent (since `started` without a
/// snapshot at all), when longer than `patience`.
fn silent_for(last: Option<&crate::model::Snapshot>, started: Instant, patience: Duration) -> Option<Duration> {
    let age = match last {
        None => started.elapsed(),
        Some(snap) => {
            let taken = SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(snap.time.time_unix_ms))?;
            SystemTime::now().duration_since(taken).ok()?
        }
    };
    (age > patience).then_some(age)
}

/// What every headless mode (`-1`, `--json`, a query, `check`, `serve`,
/// `record`) starts with: NVML opened and polled, and the runtime its sink
/// runs on.
struct Headless {
    rx: SnapshotRx,
    calls: Calls,
    runtime: tokio::runtime::Runtime,
}

impl Headless {
    fn start(settings: &Settings, deadline: Instant, feeds: Feeds) -> Result<Self, AppError> {
        let (rx, calls) = start_polling(settings, deadline, feeds)?;
        Ok(Self { rx, calls, runtime: runtime()? })
    }

    /// Runs the sink to its end, then gives the alert hooks it started
    /// `hooks` to finish. A driver call may still be in flight on the
    /// poller's thread: leaving without joining it is what lets a hung
    /// driver not hang the exit.
    fn finish<F: Future>(self, hooks: Duration, sink: impl FnOnce(SnapshotRx, Calls) -> F) -> F::Output {
        let out = self.runtime.block_on(sink(self.rx, self.calls));
        self.runtime.shutdown_background();
        analysis::finish_hooks(hooks);
        out
    }
}

/// Opens NVML and starts the poller for a headless mode. A driver that has
/// not answered by `deadline` (a hung `nvmlInit`) is `DriverSilent`: the
/// opening thread is left behind, and dies with the process.
fn start_polling(settings: &Settings, deadline: Instant, feeds: Feeds) -> Result<(SnapshotRx, Calls), AppError> {
    let started = Instant::now();
    let calls = Calls::default();
    let (tx, opened) = std::sync::mpsc::channel();
    let (owned, tracked) = (settings.clone(), calls.clone());
    std::thread::Builder::new()
        .name("gpuscope-open".into())
        .spawn(move || {
            let _ = tx.send(collector(&owned, feeds, &tracked));
        })
        .map_err(AppError::Runtime)?;
    let left = deadline.saturating_duration_since(Instant::now());
    let collector = match opened.recv_timeout(left) {
        Ok(collector) => collector?,
        Err(_) => return Err(AppError::DriverSilent(Silence::new(started, &calls))),
    };
    let (rx, _control, _poller) = poller::spawn(collector).map_err(AppError::Runtime)?;
    Ok((rx, calls))
}

/// `gpuscope replay FILE [--json]`.
fn replay(cli: &Cli, path: &std::path::Path, as_json: bool) -> Result<u8, AppError> {
    let settings = Settings::resolve(cli)?;
    if as_json || settings.mode != Mode::Tui {
        let analyzer = Analyzer::for_replay(&settings.history, settings.alerts.clone());
        let mut out = io::stdout().lock();
        return match recording::print_json(path, analyzer, &mut out) {
            Ok(summary) => {
                crate::output::stderr::say!(
                    "gpuscope: {}: {} snapshots, {}",
                    path.display(),
                    summary.snapshots,
                    summary.skipped
                );
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
    crate::output::stderr::say!("gpuscope: {}: {} snapshots, {}", path.display(), rec.len(), rec.skipped);
    let runtime = runtime()?;
    let options = tui::TuiOptions::from_env(&settings);
    let result = runtime.block_on(tui::replay(rec, settings.history.clone(), settings.alerts.clone(), options));
    runtime.shutdown_background();
    result.map(|()| exit::OK).map_err(AppError::Output)
}

/// Drawing, serving scrapes and writing output; collection never runs here
/// (the poller has a thread of its own), and none of it keeps a core busy,
/// so it all runs on the thread that starts it: no worker threads to wake
/// (a handoff per snapshot) and no stacks or allocator arenas of their own.
/// glibc gives every thread that allocates an arena of its own, and the
/// poller's kept about a megabyte resident apart from the main heap's free
/// space; two threads that take turns gain nothing from separate arenas.
/// Called before any thread starts, by every mode but a run of one
/// snapshot: that run's one tick is heavy, spread over the CPUs
/// (`util::spread`), and ends with the process. Threads that share an
/// arena take turns at its lock: at 8 x 512, a `--json` whose looks at the
/// processes ran on two threads and one arena switched context 100-190
/// times a run and used 1.13 times the CPU of looking on one thread; with
/// an arena each, about 10 times, and 0.79 of the build before's time (README,
/// Benchmarks).
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter, and no other
    // thread is allocating yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, AppError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(AppError::Runtime)
}

/// Only the dashboard starts without NVML (`for_dashboard`): it opens at
/// once and loads NVML on its first tick, so a slow or missing driver shows
/// as the data's age or NVML's error (retried with backoff), never as a
/// blank terminal. Every headless command needs the driver up front, and a
/// missing one is exit 2, not an empty report.
fn collector(settings: &Settings, feeds: Feeds, calls: &Calls) -> Result<Collector, AppError> {
    let (for_dashboard, once) = match feeds {
        Feeds::Dashboard => (true, false),
        Feeds::Headless { once, .. } => (false, once),
    };
    let unopened = || {
        let simulated = settings.library == LibrarySpec::Simulated;
        (NvmlSource::unopened(settings.library.clone(), settings.selectors.clone()), simulated)
    };
    let (gpu, simulated, fallback) = match (for_dashboard, settings.demo) {
        (true, Some(DemoMode::Auto)) => open_gpus(settings, calls).unwrap_or_else(|_| {
            let (gpu, simulated) = unopened();
            (gpu, simulated, None)
        }),
        (true, _) => {
            let (gpu, simulated) = unopened();
            (gpu, simulated, None)
        }
        (false, _) => {
            let opened = open_gpus(settings, calls)?;
            // Said before the output, where a script's log keeps it.
            if let Some(why) = &opened.2 {
                crate::output::stderr::say!("gpuscope: {why}; showing simulated GPUs");
            }
            opened
        }
    };
    let gpu = if for_dashboard { gpu.on_one_thread() } else { gpu };
    let gpu = gpu.asking(match feeds {
        Feeds::Dashboard => Wanted::DASHBOARD,
        Feeds::Headless { wanted, .. } => wanted,
    });
    Ok(Collector {
        fallback,
        gpu: Box::new(gpu),
        host: host(simulated, for_dashboard, once),
        probes: probes(simulated, once),
        analyzer: Analyzer::new(&settings.history, settings.alerts.clone()),
        interval: settings.interval,
        simulated,
        reads: reads_by(settings),
    })
}

/// What a collector's snapshots are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feeds {
    Dashboard,
    /// A headless mode, asking the driver what its output shows; `once`
    /// where it ends with its first snapshot.
    Headless {
        wanted: Wanted,
        once: bool,
    },
}

impl Feeds {
    /// A headless mode of many snapshots: `check`'s window, the exporter,
    /// a recording.
    const fn streaming(wanted: Wanted) -> Self {
        Self::Headless { wanted, once: false }
    }
}

/// What a snapshot mode's output shows (`sources/nvml/wanted.rs`): JSON
/// everything; the tables what `Wanted::TABLE` says; a query what its
/// fields show. A run of one snapshot shows no PCIe rates, which need two
/// readings of the byte counters (`sources/nvml/pcie.rs`), so it does not
/// ask for the first: 0.3 ms of the driver's CPU a GPU, and on boards
/// without the counters a throughput sample that blocks for 20 ms.
fn wanted_by(settings: &Settings) -> Wanted {
    let shown = match settings.mode {
        Mode::Json | Mode::JsonStream { .. } => Wanted::ALL,
        Mode::Query { .. } => settings.query.as_ref().map_or(Wanted::ALL, query::Query::wanted),
        Mode::Table | Mode::TableStream { .. } | Mode::Tui => Wanted::TABLE,
    };
    if settings.mode.one_shot() {
        let activity = shown.activity && settings.activity;
        // The driver's events: none could come before the one snapshot.
        Wanted { pcie: false, activity, activity_wait: activity, events: false, ..shown }
    } else {
        shown
    }
}

/// What the output shows of the processes and the probes
/// (`collect::Reads`): a query what its columns show, every other output
/// (the dashboard, JSON, the tables, and `check`, the exporter and
/// recordings, which take no query) both. The alerts' rules judge them
/// too, and a query's alerts reach an `[alerts] exec` hook: with one set,
/// a query reads them all.
fn reads_by(settings: &Settings) -> Reads {
    match (&settings.mode, &settings.query) {
        (Mode::Query { .. }, Some(query)) if settings.alerts.exec.is_empty() => query.reads(),
        _ => Reads::ALL,
    }
}

/// The built-in demo's made-up processes get made-up host figures too.
/// The dashboard's reads stay on the poller's thread, as its NVML calls do;
/// a run of one snapshot keeps nothing open for a next.
fn host(simulated: bool, for_dashboard: bool, once: bool) -> Box<dyn crate::sources::HostSource> {
    let real = ProcHost::new();
    let real = if for_dashboard {
        real.on_one_thread()
    } else if once {
        real.for_one_snapshot()
    } else {
        real
    };
    if simulated && std::env::var_os(SIM_SCENARIO_ENV).is_none() {
        Box::new(crate::sources::demo_host::DemoHost::new(real))
    } else {
        Box::new(real)
    }
}

/// The built-in demo gets scripted probes for its processes; anything else
/// reads the real probes' files, a run of one snapshot (`once`) spreading
/// its first looks at many processes over the CPUs.
fn probes(simulated: bool, once: bool) -> Box<dyn ProbeSource> {
    if simulated && std::env::var_os(SIM_SCENARIO_ENV).is_none() {
        return Box::new(DemoProbes::new());
    }
    let files = FileProbes::new(default_dir());
    Box::new(if once { files.spreading_looks() } else { files })
}

/// Points the simulator at a scenario of the user's own (read by
/// `crates/nvml-sim`), whose processes the demo's scripted probes don't know.
const SIM_SCENARIO_ENV: &str = "GPUSCOPE_SIM_SCENARIO";

/// The real NVML, or the simulator for `--demo` (and for `--demo=auto`
/// when no driver can be loaded, or the library loads but cannot start,
/// as when the kernel module is not loaded): then also why, for the user.
fn open_gpus(settings: &Settings, calls: &Calls) -> Result<(NvmlSource, bool, Option<String>), AppError> {
    let simulated = settings.library == LibrarySpec::Simulated;
    let why = match NvmlSource::open_tracked(settings.library.clone(), settings.selectors.clone(), calls.clone()) {
        Ok(source) => return Ok((source, simulated, None)),
        Err(InitError::Library { lib, reason }) if settings.demo == Some(DemoMode::Auto) => {
            format!("no NVIDIA driver found ({lib}: {reason})")
        }
        Err(InitError::Init { lib, reason }) if settings.demo == Some(DemoMode::Auto) => {
            format!("the NVIDIA driver did not start ({lib}: {reason})")
        }
        Err(e) => return Err(e.into()),
    };
    let sim = NvmlSource::open_tracked(LibrarySpec::Simulated, settings.selectors.clone(), calls.clone())?;
    Ok((sim, true, Some(why)))
}

/// Where a wait for the next snapshot started, and when it gives up.
#[derive(Debug, Clone, Copy)]
struct Wait {
    since: Instant,
    deadline: Instant,
}

/// nvidia-smi's CSV: the header once (unless `noheader`), then each
/// snapshot's rows.
fn query_writer(
    query: query::Query,
) -> impl FnMut(&crate::model::Snapshot, &mut io::StdoutLock<'static>) -> io::Result<()> {
    let mut header = query.format.header;
    move |snap, out| {
        use std::io::Write as _;
        let mut text = if std::mem::take(&mut header) { query.header() } else { String::new() };
        text.push_str(&query.rows(snap));
        out.write_all(text.as_bytes())
    }
}

/// Writes snapshots as they come until `count` are written. A closed pipe
/// (`gpuscope --json --watch | head -n 1`) is a normal end, not an error;
/// a driver that gives nothing by the deadline, or for `patience` after
/// the last line, is `DriverSilent`.
async fn emit(
    mut rx: SnapshotRx,
    count: Option<u64>,
    mut write: impl FnMut(&crate::model::Snapshot, &mut io::StdoutLock<'static>) -> io::Result<()>,
    mut wait: Wait,
    patience: Duration,
    calls: &Calls,
) -> Result<(), AppError> {
    let mut written = 0u64;
    while count.is_none_or(|c| written < c) {
        match tokio::time::timeout_at(wait.deadline.into(), rx.changed()).await {
            Err(_) => return Err(AppError::DriverSilent(Silence::new(wait.since, calls))),
            Ok(Err(_)) => return Err(AppError::PollerStopped),
            Ok(Ok(())) => {}
        }
        let Some(snap): Option<Arc<crate::model::Snapshot>> = rx.borrow_and_update().clone() else { continue };
        let now = Instant::now();
        wait = Wait { since: now, deadline: bounds::later(now, patience) };
        match stdout::write_with(|out| write(&snap, out)).map_err(AppError::Output)? {
            Delivered::All => written += 1,
            Delivered::ReaderGone => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Settings {
        let cli = Cli::try_parse_from(std::iter::once("gpuscope").chain(args.iter().copied())).unwrap();
        Settings::resolve(&cli).unwrap()
    }

    #[test]
    fn each_mode_asks_what_its_output_shows_and_one_snapshot_no_pcie_rates() {
        let one_shot = |wanted| Wanted { pcie: false, activity: false, events: false, ..wanted };
        let cases: [(&[&str], Wanted); 12] = [
            (&["--json"], one_shot(Wanted::ALL)),
            (&["--json", "-l", "1"], Wanted::ALL),
            (&["--json", "-l", "1", "--count", "1"], one_shot(Wanted::ALL)),
            (&["--json", "-l", "1", "--count", "2"], Wanted::ALL),
            (&["--json", "--activity"], Wanted { pcie: false, activity_wait: true, events: false, ..Wanted::ALL }),
            (&["-1", "--activity"], Wanted { pcie: false, activity_wait: true, events: false, ..Wanted::TABLE }),
            (&["--query-gpu=index,clocks.max.gr", "--format=csv"], Wanted { max_clocks: true, ..Wanted::NONE }),
            (&["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"], Wanted::NONE),
            (
                &["--query-gpu=fan.speed,clocks.gr,ecc.mode.current,serial", "--format=csv"],
                Wanted { fan: true, clocks: true, health: true, settings: true, ..Wanted::NONE },
            ),
            (&["-1"], one_shot(Wanted::TABLE)),
            (&["-1", "-l", "1"], Wanted::TABLE),
            (&["--query-compute-apps=pid,used_memory", "--format=csv"], Wanted::NONE),
        ];
        for (args, wanted) in cases {
            assert_eq!(wanted_by(&settings(args)), wanted, "{args:?}");
        }
    }

    #[test]
    fn a_query_reads_the_processes_and_the_probes_only_where_its_columns_show_them() {
        let cases: [(&[&str], Reads); 7] = [
            (&["--json"], Reads::ALL),
            (&["--json", "-l", "1"], Reads::ALL),
            (&["-1"], Reads::ALL),
            (&["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"], Reads::NONE),
            (&["--query-gpu=index,memory.used", "--format=csv", "-l", "1"], Reads::NONE),
            (&["--query-compute-apps=pid,process_name,used_memory", "--format=csv"], Reads::PROCESSES),
            (&["--query-compute-apps=pid", "--format=csv", "--loop-ms", "500"], Reads::PROCESSES),
        ];
        for (args, reads) in cases {
            assert_eq!(reads_by(&settings(args)), reads, "{args:?}");
            let mut hooked = settings(args);
            hooked.alerts.exec = vec!["/bin/true".to_owned()];
            assert_eq!(reads_by(&hooked), Reads::ALL, "{args:?} with an exec hook, whose alerts judge everything");
        }
    }

    #[test]
    fn the_dashboard_asks_only_what_it_shows() {
        let mut collector = collector(&settings(&["--demo"]), Feeds::Dashboard, &Calls::default()).unwrap();
        let snap = collector.tick();
        assert!(snap.gpus.len() > 1, "{:?}", snap.sources);
        for gpu in &snap.gpus {
            let mut blank = gpu.clone();
            Wanted::DASHBOARD.blank(&mut blank);
            assert_eq!(&blank, gpu, "GPU {}: nothing read that the dashboard does not show", gpu.index);
        }
        assert!(
            snap.gpus.iter().any(|g| g.process_utilization.is_some()),
            "the table and a process's details show its SM use"
        );
        assert!(snap.gpus.iter().any(|g| g.power_draw_w.is_some() && g.temperature_c.is_some()));
    }
}
