//! Command-line flags. Their names are part of the product: scripts and
//! fingers depend on them, so a rename is a breaking change.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Parser, Subcommand, ValueEnum};

use crate::model::AlertKind;
use crate::util::bounds;

#[derive(Debug, Clone, Parser)]
#[command(name = "gpuscope", version, about = "Watch NVIDIA GPUs, their processes and the host", long_about = None)]
#[command(group(ArgGroup::new("stream").args(["watch", "loop_s", "loop_ms"]).multiple(true)))]
#[command(group(ArgGroup::new("query").args(["query_gpu", "query_compute_apps"])))]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Print one plain-text table, like nvidia-smi, and exit.
    #[arg(short = '1', long, conflicts_with = "json")]
    pub once: bool,

    /// Print one JSON snapshot and exit (with --watch: NDJSON, one per interval).
    #[arg(long)]
    pub json: bool,

    /// With --json: keep printing one compact snapshot per line.
    #[arg(long, requires = "json")]
    pub watch: bool,

    /// With --watch, -l or -lms: stop after N snapshots (blocks, lines).
    #[arg(long, value_name = "N", requires = "stream")]
    pub count: Option<u64>,

    /// With -1 or --json: read the GPU's activity counters (SM, tensor,
    /// DRAM), which need two samples 0.1 s apart: the one-shot waits that
    /// long. Modes that keep running always read them.
    #[arg(long)]
    pub activity: bool,

    /// nvidia-smi's query mode: one CSV line per GPU with these fields,
    /// e.g. index,memory.used (see --help-query-gpu). Needs --format=csv.
    #[arg(long, value_name = "FIELDS", requires = "format", conflicts_with_all = ["json", "once"])]
    pub query_gpu: Option<String>,

    /// nvidia-smi's query mode: one CSV line per compute process per GPU
    /// (see --help-query-compute-apps). Needs --format=csv.
    #[arg(long, value_name = "FIELDS", requires = "format", conflicts_with_all = ["json", "once"])]
    pub query_compute_apps: Option<String>,

    /// With --query-gpu or --query-compute-apps: csv[,noheader][,nounits].
    #[arg(long, value_name = "csv[,noheader][,nounits]", requires = "query")]
    pub format: Option<String>,

    /// List the fields --query-gpu answers, and exit.
    #[arg(long)]
    pub help_query_gpu: bool,

    /// List the fields --query-compute-apps answers, and exit.
    #[arg(long)]
    pub help_query_compute_apps: bool,

    /// nvidia-smi's -i: GPUs by index, UUID or PCI bus id, comma-separated
    /// (0,2 or GPU-5ea1... or 00000000:18:00.0). Same as --gpus.
    #[arg(short = 'i', long = "id", value_name = "ID", conflicts_with = "gpus")]
    pub id: Option<String>,

    /// nvidia-smi's -l: repeat every SEC seconds (5 without a value) until
    /// killed or --count: the query's lines, -1's table, --json's lines.
    #[arg(short = 'l', long = "loop", value_name = "SEC", num_args = 0..=1, default_missing_value = "5",
          value_parser = loop_seconds, conflicts_with_all = ["loop_ms", "interval", "watch"])]
    pub loop_s: Option<Duration>,

    /// nvidia-smi's -lms: the same as -l, in milliseconds.
    #[arg(long = "loop-ms", value_name = "MS", value_parser = loop_millis, conflicts_with_all = ["interval", "watch"])]
    pub loop_ms: Option<Duration>,

    /// Time between snapshots, e.g. 500ms, 2s; 10ms to 1 day [default: 1s, or the config's; run: 2s].
    #[arg(long, global = true, value_name = "DURATION", value_parser = bounds::parse_interval)]
    pub interval: Option<Duration>,

    /// Headless modes: how long to wait for a driver that does not answer
    /// before giving up with exit 3 (check and record: beyond --for and
    /// --duration; a stream: beyond one interval); 100ms to 1 day.
    #[arg(long, global = true, value_name = "DURATION", default_value = "10s", value_parser = bounds::parse_timeout)]
    pub timeout: Duration,

    /// GPUs to watch: indices or UUID prefixes, comma-separated (0,2 or GPU-5ea1).
    #[arg(long, global = true, value_name = "LIST")]
    pub gpus: Option<String>,

    /// Config file [default: ~/.config/gpuscope/config.toml].
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// The NVML library to load [default: libnvidia-ml.so.1].
    #[arg(long, global = true, value_name = "PATH", env = "GPUSCOPE_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,

    /// Use simulated GPUs. --demo=auto uses the real driver when there is
    /// one and the simulator only when none can be loaded.
    #[arg(long, global = true, value_name = "WHEN", num_args = 0..=1, require_equals = true, default_missing_value = "always")]
    pub demo: Option<DemoMode>,

    /// Dashboard: only these users' processes (comma-separated or repeated), as htop -u.
    #[arg(short = 'u', long = "user", value_name = "USER", value_delimiter = ',')]
    pub users: Vec<String>,

    /// Dashboard: only these processes (comma-separated or repeated), as htop -p.
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pub pids: Vec<u32>,

    /// Dashboard: no colours (also when NO_COLOR is set and not empty).
    #[arg(long)]
    pub no_color: bool,

    /// Dashboard: draw with ASCII only (automatic when the locale is not UTF-8).
    #[arg(long)]
    pub ascii: bool,

    /// Dashboard: never send signals to processes (also --readonly, htop's spelling).
    #[arg(long, alias = "readonly")]
    pub read_only: bool,

    /// Dashboard: leave the mouse to the terminal (its own text selection); no clicks or wheel.
    #[arg(long)]
    pub no_mouse: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Run a command with the allocator probe injected into its Python
    /// processes (and their torchrun ranks and spawned children); no code
    /// change needed. When it ends, a report on stderr: its length, GPUs,
    /// GPU-hours, energy, utilisation, memory peaks, OOMs and alerts,
    /// sampled every 2 s (--interval; the config's interval is for the
    /// views). gpuscope exits with the command's status (128 + N if signal
    /// N killed it). Example: gpuscope run -- python train.py
    Run {
        /// Also write the end-of-job report as JSON to FILE.
        #[arg(long, value_name = "FILE", conflicts_with = "no_report")]
        report: Option<PathBuf>,
        /// No report: gpuscope replaces itself with the command (the way `run` worked before).
        #[arg(long)]
        no_report: bool,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
    /// Watch for a while and report the active alerts, for scripts and cron:
    /// exit 0 when there are none (or only info), 1 for warnings, 2 for critical ones,
    /// 3 when the driver stopped answering (see --timeout). With --health, the
    /// GPUs' health verdict instead, for a Slurm prolog or node-problem-detector.
    Check {
        /// How long to watch (at most 30 days); 10s, or with --health one
        /// snapshot.
        #[arg(long = "for", value_name = "DURATION", value_parser = bounds::parse_check_window)]
        window: Option<Duration>,
        /// Only these kinds count for the exit code (comma-separated).
        #[arg(long, value_name = "KINDS", value_delimiter = ',', value_parser = alert_kind, conflicts_with = "health")]
        fail_on: Vec<AlertKind>,
        /// Judge the GPUs' health instead (row remapping, ECC, retired
        /// pages, recovery action, Xids, hardware slowdown, NVLink errors):
        /// exit 0 ok, 1 warning, 2 critical, 3 a silent driver. For a Slurm
        /// prolog or epilog.
        #[arg(long)]
        health: bool,
        /// With --health, speak node-problem-detector's custom plugin
        /// protocol: one line of at most 80 bytes, exit 0 (OK; warnings
        /// too), 1 (NonOK: a GPU is critical), 2 or 3 (Unknown).
        #[arg(long, requires = "health")]
        npd: bool,
    },
    /// Diagnose running jobs (every probed one, or the PIDs given): how much
    /// of each step waits for data and why, /dev/shm, DataLoader workers that
    /// died, the wheel against the GPU, the allocator, idle SMs; each finding
    /// with its evidence and its fix. Watches for 2 s; exit 0 when nothing is
    /// found (or only info), 1 for warnings, 2 for critical findings.
    Doctor {
        /// The processes to diagnose (default: every probed one).
        pids: Vec<u32>,
        /// Print the findings as JSON (assets/doctor.schema.json).
        #[arg(long)]
        json: bool,
    },
    /// Pick GPUs for a job and print them as a CUDA_VISIBLE_DEVICES value:
    /// the freest that fit, exit 1 (and why on stderr) when too few do.
    /// Example: CUDA_VISIBLE_DEVICES=$(gpuscope select --count 2 --min-free 20GiB) python train.py
    Select(SelectArgs),
    /// Record snapshots to FILE (NDJSON; zstd-compressed when FILE ends in
    /// .zst) until --duration is up, Ctrl-C or SIGTERM.
    Record {
        file: PathBuf,
        /// Stop after this long (e.g. 8h; at most 1 year).
        #[arg(long, value_name = "DURATION", value_parser = bounds::parse_record_duration)]
        duration: Option<Duration>,
        /// Replace FILE if it exists (without this, an existing FILE is refused).
        #[arg(long, conflicts_with = "append")]
        force: bool,
        /// Add to FILE if it is a recording of the same schema.
        #[arg(long)]
        append: bool,
    },
    /// Replay a recording in the dashboard, or as NDJSON with --json; alerts
    /// are recomputed with the current thresholds.
    Replay {
        file: PathBuf,
        /// Print the recording as NDJSON instead of showing it.
        #[arg(long = "json")]
        as_json: bool,
    },
    /// Start the allocator probe inside a running Python process (Python
    /// 3.14+, through sys.remote_exec); older Pythons need a restart.
    Attach {
        /// The process (yours; any, as root).
        pid: u32,
        /// Only write the script that would run inside the process and
        /// print its path (to run it another way, or to read it first).
        #[arg(long)]
        script_only: bool,
    },
    /// Ask a probed PyTorch process for the snapshot PyTorch's memory
    /// viewer opens (pytorch.org/memory_viz), taken by its own probe.
    Memviz {
        /// The process (it must run the probe, and be yours).
        pid: u32,
        /// Copy the snapshot to FILE (never over an existing file).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Record allocation history (with stack traces) for this long
        /// first, then dump and stop: the viewer's full timeline.
        #[arg(long, value_name = "DURATION", value_parser = bounds::parse_memviz_history)]
        history: Option<std::time::Duration>,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell). Example: gpuscope completions bash > /etc/bash_completion.d/gpuscope
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff). Example: gpuscope man > gpuscope.1; man ./gpuscope.1
    Man,
    /// The Python allocator probe, for `import gpuscope_probe; gpuscope_probe.start()`.
    Probe {
        #[command(subcommand)]
        action: ProbeAction,
    },
    /// Serve Prometheus metrics (/metrics), the JSON snapshot (/snapshot)
    /// and a health check (/healthz) over HTTP until SIGINT or SIGTERM.
    Serve {
        /// Address to listen on. Anything but loopback shows process names,
        /// command lines and users to whoever can reach it.
        /// HOST:PORT (a name such as localhost is resolved), or :PORT for
        /// every interface, as Prometheus's own exporters take it.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:10983", value_parser = listen_addr)]
        listen: SocketAddr,
        /// Open connections at most; at the cap, the one idle the longest is closed.
        #[arg(long, value_name = "N", default_value_t = crate::serve::DEFAULT_MAX_CONNECTIONS, value_parser = max_connections)]
        max_connections: usize,
        /// How long a client may take to send a request's headers (an idle
        /// keep-alive connection included) before it is closed.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = header_timeout)]
        header_timeout: Duration,
        /// Serve HTTPS with this certificate chain (PEM, the server's
        /// certificate first); needs --tls-key.
        #[arg(long, value_name = "PATH", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The certificate's private key (PEM); it must be private to
        /// gpuscope's user (mode 600 or stricter), as ssh demands of a key.
        #[arg(long, value_name = "PATH", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Require `Authorization: Bearer TOKEN` on every request but
        /// /healthz; TOKEN is this file's content, trimmed. The file must be
        /// private to gpuscope's user (mode 600 or stricter).
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// Require the token on /healthz too (by default it stays open, for
        /// load balancers and orchestrators that probe without a secret).
        #[arg(long, requires = "token_file")]
        token_healthz: bool,
        /// Leave out what identifies a process (name, command line, user,
        /// parent's name, container, pod, Slurm job) from /metrics and
        /// /snapshot; PIDs and every per-GPU figure stay.
        #[arg(long)]
        no_processes: bool,
        /// Serve a web page at / that shows the GPUs, their memory, the
        /// processes and the alerts live from /snapshot (over the same TLS;
        /// with --token-file the page asks for the token once and keeps it
        /// in the browser tab).
        #[arg(long)]
        web: bool,
    },
    /// Many nodes in one terminal: reads /snapshot from each node's
    /// `gpuscope serve` (or the same picture from a Prometheus that scrapes
    /// them); a line per host, Enter for its GPUs and processes, J for the
    /// distributed jobs across hosts. Example: gpuscope fleet node1,node2:9000
    Fleet(FleetArgs),
}

/// `gpuscope fleet`'s flags (`--interval` and `--timeout`, per host, are the global ones).
#[derive(Debug, Clone, clap::Args)]
#[command(group(ArgGroup::new("from").required(true).multiple(true).args(["hosts", "hosts_file", "prometheus"])))]
pub struct FleetArgs {
    /// Nodes running `gpuscope serve`: HOST[:PORT], comma-separated (port 10983 when not given).
    #[arg(value_name = "HOST[:PORT],...", value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Read the nodes from FILE: one HOST[:PORT] a line, `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
    /// Ask this Prometheus (its HTTP API, e.g. http://prom:9090) instead of
    /// the nodes: a few queries per tick, whatever the fleet's size.
    #[arg(long, value_name = "URL", conflicts_with_all = ["hosts", "hosts_file"])]
    pub prometheus: Option<String>,
    /// Send `Authorization: Bearer TOKEN` with every request, TOKEN read from PATH.
    /// To a plain http:// host beyond loopback it crosses the network in
    /// clear text: gpuscope warns once a host (use https:// and --ca).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Trust the CA certificates in PATH (PEM) for https:// hosts and
    /// Prometheus; https:// needs it: the system's trust store is not read.
    #[arg(long, value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// Print one JSON document (every host with its snapshot or its error, and the jobs) and exit.
    #[arg(long)]
    pub json: bool,
    /// With --json: one compact document per line, every interval.
    #[arg(long, requires = "json")]
    pub watch: bool,
    /// With --watch: stop after N lines.
    #[arg(long, value_name = "N", requires = "watch")]
    pub count: Option<u64>,
    /// Print a plain-text table (a line per host, then the jobs) and exit.
    #[arg(short = '1', long, conflicts_with = "json")]
    pub once: bool,
}

/// `gpuscope select`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// How many devices the job needs (1 to 1024).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub count: u16,
    /// Free memory each needs at least: 20GiB, 512MiB, 20GB or bytes.
    #[arg(long, value_name = "SIZE", value_parser = crate::pick::parse_size)]
    pub min_free: Option<u64>,
    /// GPU utilisation at most, percent (a GPU whose utilisation NVML cannot tell does not fit).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub max_util: Option<u32>,
    /// Only devices no process holds.
    #[arg(long)]
    pub no_processes: bool,
    /// Count as free what probed processes' allocators could hand back
    /// with empty_cache(): their cache (reserved - allocated) less the
    /// inactive split and private pools, which it cannot free.
    #[arg(long)]
    pub count_cached_free: bool,
    /// Pick MIG devices (printed as MIG-... UUIDs) instead of whole GPUs.
    #[arg(long)]
    pub mig: bool,
    /// uuid (GPU-...: right whatever CUDA_DEVICE_ORDER says), index
    /// (NVML's, PCI bus order: CUDA's only with CUDA_DEVICE_ORDER=PCI_BUS_ID)
    /// or json (the picks with their figures).
    #[arg(long, value_enum, default_value = "uuid")]
    pub format: crate::pick::Format,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ProbeAction {
    /// Write the probe to gpuscope's private directory and print its path.
    Path,
    /// Copy the probe into the Python's user site (or its virtualenv), or
    /// with --target into a directory of your choice (a container image).
    Install {
        /// The Python to install for.
        #[arg(long, default_value = "python3", conflicts_with = "target")]
        python: PathBuf,
        /// Write the probe and its sitecustomize shim into DIR instead: put
        /// DIR on PYTHONPATH (an image's `ENV PYTHONPATH=DIR`, or a mounted
        /// volume) and every Python there starts the probe by itself.
        #[arg(long, value_name = "DIR")]
        target: Option<PathBuf>,
    },
}

/// `-l SEC`: whole seconds, as nvidia-smi takes them, within the bounds
/// of `--interval`.
fn loop_seconds(s: &str) -> Result<Duration, String> {
    let n: u64 = s.parse().map_err(|_| format!("expected whole seconds, e.g. -l 1, not {s:?}"))?;
    bounds::parse_interval(&format!("{n}s"))
}

/// `-lms MS`: whole milliseconds.
fn loop_millis(s: &str) -> Result<Duration, String> {
    let n: u64 = s.parse().map_err(|_| format!("expected whole milliseconds, e.g. -lms 500, not {s:?}"))?;
    bounds::parse_interval(&format!("{n}ms"))
}

/// nvidia-smi spells `--loop-ms` as `-lms`, three letters behind one dash,
/// which no argument parser reads as one flag: rewritten before parsing.
/// Nothing after `run` or `--` is touched: that is another program's.
pub fn nvidia_smi_spellings(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut ours = true;
    args.into_iter()
        .map(|a| {
            let text = a.to_str().filter(|_| ours);
            if matches!(text, Some("run" | "--")) {
                ours = false;
            }
            match text {
                Some("-lms") => OsString::from("--loop-ms"),
                Some(s) if s.starts_with("-lms=") => OsString::from(format!("--loop-ms={}", &s[5..])),
                _ => a,
            }
        })
        .collect()
}

/// What gpuscope calls a flag that nvidia-smi, nvitop or gpustat users
/// type, for the error that refuses it (clap suggests only near spellings).
pub fn foreign_flag_hint(arg: &str) -> Option<&'static str> {
    let flag = arg.split('=').next().unwrap_or(arg);
    Some(match flag {
        "-q" | "--query" => "nvidia-smi's -q: gpuscope -1 prints a table, --json every reading",
        "-d" | "--display" => "nvidia-smi's -q -d: pick readings with --query-gpu=FIELDS --format=csv",
        "-L" | "--list-gpus" => "nvidia-smi's -L: gpuscope --query-gpu=index,name,uuid --format=csv",
        "-f" | "--filename" => "nvidia-smi's -f FILE: redirect the output (> FILE), or gpuscope record FILE",
        "-c" | "--show-cmd" | "--cpu" => "gpustat's -c: gpuscope -1 shows each process's command line and CPU",
        "-p" | "--show-pid" | "-u" | "--show-user" => "gpustat's -p/-u: gpuscope -1 shows PIDs and users",
        "-a" | "--show-all" => "gpustat's -a: gpuscope -1 shows everything it reads; --json even more",
        "-m" | "--monitor" => "nvitop's -m: gpuscope with no flags is the dashboard",
        "-n" | "--watch-interval" => "repeat with -l SEC or --interval DURATION (with --json --watch)",
        "--query-apps" | "--query-processes" => "nvidia-smi's spelling is --query-compute-apps=FIELDS",
        _ => return None,
    })
}

fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::{Ipv4Addr, ToSocketAddrs};
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("{port:?} is not a port number (0 to 65535)"))?;
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
    }
    if !s.contains(':') {
        return Err(format!("{s:?} has no port: give HOST:PORT, IP:PORT or :PORT"));
    }
    let mut found = s.to_socket_addrs().map_err(|e| format!("cannot resolve {s:?}: {e}"))?;
    found.next().ok_or_else(|| format!("{s:?} resolves to no address"))
}

fn max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=65_536) => Ok(n),
        _ => Err("expected a number from 1 to 65536".into()),
    }
}

/// 100ms to 1h: shorter cuts off real clients, longer is no defence.
fn header_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&d) {
        return Err("expected a duration from 100ms to 1h".into());
    }
    Ok(d)
}

/// An alert kind as JSON writes it (`alloc_retry`), so the command line
/// and the output use one set of names.
fn alert_kind(s: &str) -> Result<AlertKind, String> {
    AlertKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
        let names: Vec<&str> = AlertKind::ALL.iter().map(|k| k.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DemoMode {
    Always,
    Auto,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn nvidia_smi_flags() {
        let args = nvidia_smi_spellings(
            ["gpuscope", "--query-gpu=index", "--format=csv", "-lms", "250", "-i", "0,00000000:18:00.0"]
                .map(OsString::from),
        );
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(cli.loop_ms, Some(Duration::from_millis(250)));
        assert_eq!(cli.id.as_deref(), Some("0,00000000:18:00.0"));
        let cli = Cli::try_parse_from(nvidia_smi_spellings(["gpuscope", "-1", "-lms=100"].map(OsString::from)));
        assert_eq!(cli.unwrap().loop_ms, Some(Duration::from_millis(100)));
        assert_eq!(
            Cli::try_parse_from(["gpuscope", "--json", "-l", "2"]).unwrap().loop_s,
            Some(Duration::from_secs(2))
        );
        assert_eq!(Cli::try_parse_from(["gpuscope", "-1", "-l"]).unwrap().loop_s, Some(Duration::from_secs(5)));
        assert!(Cli::try_parse_from(["gpuscope", "--json", "-l", "0.5"]).is_err(), "-l takes whole seconds");
        assert!(Cli::try_parse_from(["gpuscope", "-l", "1", "--interval", "1s"]).is_err(), "one interval");
        assert!(Cli::try_parse_from(["gpuscope", "--query-gpu=index"]).is_err(), "--format is required");
        assert!(Cli::try_parse_from(["gpuscope", "-i", "0", "--gpus", "1"]).is_err());
        assert_eq!(Cli::try_parse_from(["gpuscope", "--json", "-l", "1", "--count", "3"]).unwrap().count, Some(3));
        // Whatever follows `run` is the command's own.
        let run = nvidia_smi_spellings(["gpuscope", "run", "--", "tool", "-lms"].map(OsString::from));
        assert_eq!(run.last().unwrap(), "-lms");
    }

    #[test]
    fn foreign_flags_get_ours() {
        assert!(foreign_flag_hint("-q").unwrap().contains("-1"));
        assert!(foreign_flag_hint("--query=x").unwrap().contains("--json"));
        assert!(foreign_flag_hint("-c").unwrap().contains("gpustat"));
        assert_eq!(foreign_flag_hint("--frobnicate"), None);
    }

    #[test]
    fn flags_parse() {
        let cli =
            Cli::try_parse_from(["gpuscope", "--json", "--watch", "--count", "3", "--interval", "250ms"]).unwrap();
        assert!(cli.json && cli.watch);
        assert_eq!(cli.count, Some(3));
        assert_eq!(cli.interval, Some(Duration::from_millis(250)));
        assert!(Cli::try_parse_from(["gpuscope", "-1"]).unwrap().once);
        assert_eq!(Cli::try_parse_from(["gpuscope", "--demo"]).unwrap().demo, Some(DemoMode::Always));
        assert_eq!(Cli::try_parse_from(["gpuscope", "--demo=auto"]).unwrap().demo, Some(DemoMode::Auto));
        assert!(Cli::try_parse_from(["gpuscope", "--watch"]).is_err(), "--watch needs --json");
        assert!(Cli::try_parse_from(["gpuscope", "-1", "--json"]).is_err());
        let tui = Cli::try_parse_from(["gpuscope", "--no-color", "--ascii", "--read-only"]).unwrap();
        assert!(tui.no_color && tui.ascii && tui.read_only);
        assert!(!tui.no_mouse && Cli::try_parse_from(["gpuscope", "--no-mouse"]).unwrap().no_mouse);
        let run = Cli::try_parse_from(["gpuscope", "run", "--", "python", "-u", "train.py", "--lr", "3"]).unwrap();
        let Some(Command::Run { command, .. }) = run.command else { panic!("{run:?}") };
        assert_eq!(command, ["python", "-u", "train.py", "--lr", "3"]);
        let run = Cli::try_parse_from(["gpuscope", "run", "torchrun", "--nproc-per-node", "8", "t.py"]).unwrap();
        assert!(matches!(run.command, Some(Command::Run { command, .. }) if command.len() == 4));
        assert!(Cli::try_parse_from(["gpuscope", "run"]).is_err(), "a command is required");
        let check = Cli::try_parse_from(["gpuscope", "check", "--for", "3s", "--fail-on", "oom,alloc_retry", "--demo"]);
        let check = check.unwrap();
        assert_eq!(check.demo, Some(DemoMode::Always), "common flags work after the subcommand");
        let Some(Command::Check { window, fail_on, health, npd }) = check.command else { panic!() };
        assert_eq!((window, fail_on), (Some(Duration::from_secs(3)), vec![AlertKind::Oom, AlertKind::AllocRetry]));
        assert!(!health && !npd);
        let health = Cli::try_parse_from(["gpuscope", "check", "--health", "--npd"]).unwrap().command;
        assert!(matches!(health, Some(Command::Check { health: true, npd: true, window: None, .. })));
        assert!(Cli::try_parse_from(["gpuscope", "check", "--npd"]).is_err(), "--npd speaks for --health");
        assert!(Cli::try_parse_from(["gpuscope", "check", "--health", "--fail-on", "oom"]).is_err());
        let err = Cli::try_parse_from(["gpuscope", "check", "--fail-on", "oom,fragmentaton"]).unwrap_err().to_string();
        assert!(err.contains("fragmentaton") && err.contains("expected one of"), "{err}");
        assert!(err.contains("starved, sm_idle, tensor_idle"), "every kind named: {err}");
        let sm = Cli::try_parse_from(["gpuscope", "check", "--fail-on", "sm_idle"]).unwrap().command;
        assert!(matches!(sm, Some(Command::Check { fail_on, .. }) if fail_on == [AlertKind::SmIdle]));
        assert!(matches!(
            Cli::try_parse_from(["gpuscope", "probe", "path"]).unwrap().command,
            Some(Command::Probe { action: ProbeAction::Path })
        ));
    }

    #[test]
    fn listen_takes_names_and_a_bare_port() {
        let addr = |v: &str| match Cli::try_parse_from(["gpuscope", "serve", "--listen", v]).map(|c| c.command) {
            Ok(Some(Command::Serve { listen, .. })) => Ok(listen),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(addr("127.0.0.1:10983").unwrap().to_string(), "127.0.0.1:10983");
        assert_eq!(addr(":10983").unwrap().to_string(), "0.0.0.0:10983");
        assert!(addr("localhost:10983").unwrap().ip().is_loopback());
        assert_eq!(addr("[::1]:10983").unwrap().to_string(), "[::1]:10983");
        assert!(addr("localhost").unwrap_err().contains("has no port"));
        assert!(addr(":99999").unwrap_err().contains("not a port number"));
    }

    #[test]
    fn readonly_is_htops_spelling_of_read_only() {
        assert!(Cli::try_parse_from(["gpuscope", "--readonly"]).unwrap().read_only);
    }

    #[test]
    fn users_and_pids_filter_like_htop() {
        let cli = Cli::try_parse_from(["gpuscope", "-u", "alice,bob", "-p", "12,34", "-p", "56"]).unwrap();
        assert_eq!(cli.users, ["alice", "bob"]);
        assert_eq!(cli.pids, [12, 34, 56]);
        assert!(Cli::try_parse_from(["gpuscope", "-p", "x"]).is_err());
    }
}
