//! The machine and the GPU processes. sysinfo reads what a process keeps
//! for life (name, command line, owner, start time) when its PID is first
//! seen; after that, each tick reads only `/proc/PID/stat` (see
//! `procstat`), which is what makes a tick over 64 processes cheap. The
//! machine's own figures come from files held open (see `machine`).

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use sysinfo::{Pid, Process as SysProcess, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

use super::machine::Machine;
use super::procstat::{self, Stat, StatFile};
use super::users::UserNames;
use super::{HostProcess, HostSample, HostSource, sanitize_command};
use super::{pidns, workload};
use crate::model::{Host, PidNamespace, SourceStatus, Timestamp};

pub struct SysinfoHost {
    machine: Machine,
    users: UserNames,
    hostname: Option<String>,
    cpu_count: Option<u32>,
    known: HashMap<u32, Known>,
    /// Processes whose stat file is held open at once.
    max_open: usize,
    ticks_per_second: f64,
    page_size: u64,
    buf: Vec<u8>,
    pid_namespace: Option<PidNamespace>,
    /// A bad `GPUSCOPE_PID_NAMESPACE`, reported with every sample.
    pid_namespace_error: Option<String>,
}

/// A process seen before: what does not change, and the last reading to
/// take CPU time from.
struct Known {
    /// Held open while fewer than `max_open` processes are known, so the
    /// descriptors stay within half their limit.
    file: Option<StatFile>,
    start_ticks: u64,
    cpu_ticks: u64,
    at: Instant,
    fixed: HostProcess,
    /// The parent PID last seen and its name, read again only when the
    /// parent changes (the process was re-parented).
    parent: Option<(u32, Option<String>)>,
}

impl Default for SysinfoHost {
    fn default() -> Self {
        Self::new()
    }
}

impl SysinfoHost {
    pub fn new() -> Self {
        Self {
            cpu_count: std::thread::available_parallelism().ok().and_then(|n| u32::try_from(n.get()).ok()),
            machine: Machine::open(Path::new("/proc")),
            users: UserNames::default(),
            hostname: System::host_name(),
            known: HashMap::new(),
            max_open: procstat::held_stat_budget(),
            ticks_per_second: procstat::ticks_per_second() as f64,
            page_size: procstat::page_size(),
            buf: Vec::new(),
            pid_namespace: None,
            pid_namespace_error: None,
        }
        .with_pid_namespace(pidns::current(Path::new("/proc")))
    }

    /// A bad override is reported, and the namespace then counts as unknown.
    fn with_pid_namespace(mut self, ns: Result<Option<PidNamespace>, String>) -> Self {
        (self.pid_namespace, self.pid_namespace_error) = match ns {
            Ok(ns) => (ns, None),
            Err(e) => (None, Some(e)),
        };
        self
    }

    fn user_name_of(&mut self, p: &ProcessView) -> Option<String> {
        let uid = **p.uid.as_ref()?;
        self.users.name(uid).or_else(|| Some(uid.to_string()))
    }

    /// First sight of these PIDs (or of a new process behind a recycled
    /// one): the lifelong fields through sysinfo. A `System` made for the
    /// purpose keeps no table of processes between ticks.
    fn first_sight(&mut self, fresh: Vec<(u32, Stat, Option<StatFile>)>, now: Instant) {
        if fresh.is_empty() {
            return;
        }
        let mut system = System::new();
        let sys_pids: Vec<Pid> = fresh.iter().map(|&(p, ..)| Pid::from_u32(p)).collect();
        // Without `without_tasks`, sysinfo walks /proc/PID/task: every
        // thread of a training process (dozens).
        let kind =
            ProcessRefreshKind::nothing().without_tasks().with_cmd(UpdateKind::Always).with_user(UpdateKind::Always);
        system.refresh_processes_specifics(ProcessesToUpdate::Some(&sys_pids), true, kind);
        for (pid, stat, file) in fresh {
            let Some(p) = system.process(Pid::from_u32(pid)) else { continue };
            let view = ProcessView::of(p);
            let user = self.user_name_of(&view);
            let mut fixed = fixed_fields(&view, user);
            fixed.workload = workload::read(Path::new("/proc"), pid)
                // Read after the PID's stat: dropped should the PID have
                // gone to another process in between.
                .filter(|_| procstat::start_ticks(Path::new("/proc"), pid) == Some(stat.start_ticks));
            let known =
                Known { file, start_ticks: stat.start_ticks, cpu_ticks: stat.cpu_ticks, at: now, fixed, parent: None };
            self.known.insert(pid, known);
        }
    }

    /// The reading through the file held open for this process, if it is
    /// still the process the file was opened for.
    fn read_held(&mut self, pid: u32) -> Option<Stat> {
        let k = self.known.get(&pid)?;
        k.file.as_ref()?.read(&mut self.buf).filter(|s| s.start_ticks == k.start_ticks)
    }

    /// Whoever has the PID now, with the file held open if there is room.
    fn open(&mut self, pid: u32, pending: usize) -> Option<(Stat, Option<StatFile>)> {
        let proc_root = Path::new("/proc");
        if self.known.len() + pending >= self.max_open {
            return procstat::read(proc_root, pid).map(|s| (s, None));
        }
        let file = StatFile::open(proc_root, pid)?;
        Some((file.read(&mut self.buf)?, Some(file)))
    }

    fn process(&mut self, pid: u32, stat: Stat, now: Instant, first: bool) -> Option<HostProcess> {
        let max_percent = f64::from(self.cpu_count.unwrap_or(1)) * 100.0;
        let (tps, page) = (self.ticks_per_second, self.page_size);
        let k = self.known.get_mut(&pid)?;
        let seconds = now.duration_since(k.at).as_secs_f64();
        let used = stat.cpu_ticks.saturating_sub(k.cpu_ticks) as f64 / tps;
        // Tenths: finer is tick-rounding noise, not information.
        let cpu_percent =
            (!first && seconds > 0.0).then(|| ((used / seconds * 100.0).min(max_percent) * 10.0).round() / 10.0);
        k.cpu_ticks = stat.cpu_ticks;
        k.at = now;
        if k.parent.as_ref().is_none_or(|p| p.0 != stat.parent) {
            k.parent = Some((stat.parent, procstat::comm(Path::new("/proc"), stat.parent)));
        }
        Some(HostProcess {
            parent_pid: Some(stat.parent),
            parent_name: k.parent.as_ref().and_then(|p| p.1.clone()),
            cpu_percent,
            memory: Some(stat.rss_pages.saturating_mul(page)),
            ..k.fixed.clone()
        })
    }
}

impl HostSource for SysinfoHost {
    fn sample(&mut self, pids: &[u32]) -> HostSample {
        // CPU usage is a difference between two readings: the first sample
        // of the machine, and of each process, has none to offer.
        let cpu_percent = self.machine.cpu_percent();
        let memory = self.machine.memory();
        let host = Host {
            hostname: self.hostname.clone(),
            cpu_percent,
            cpu_count: self.cpu_count,
            memory_total: memory.map(|m| m.total),
            memory_used: memory.map(|m| m.used),
            memory_available: memory.map(|m| m.available),
            swap_total: memory.map(|m| m.swap_total),
            swap_used: memory.map(|m| m.swap_used),
        };

        let now = Instant::now();
        let mut stats = Vec::with_capacity(pids.len());
        let mut fresh = Vec::new();
        for &pid in pids {
            if let Some(stat) = self.read_held(pid) {
                stats.push((pid, stat, false));
                continue;
            }
            // Not in /proc: exited, or in a PID namespace this one cannot see.
            let Some((stat, file)) = self.open(pid, fresh.len()) else { continue };
            match self.known.get_mut(&pid) {
                Some(k) if k.start_ticks == stat.start_ticks => {
                    k.file = file;
                    stats.push((pid, stat, false));
                }
                _ => {
                    // A new process behind a known PID keeps nothing of the
                    // old one's, even should its first sight fail.
                    self.known.remove(&pid);
                    fresh.push((pid, stat, file));
                    stats.push((pid, stat, true));
                }
            }
        }
        self.first_sight(fresh, now);
        let status = match &self.pid_namespace_error {
            Some(e) => SourceStatus::failed(e.clone()),
            None => SourceStatus::ok(),
        };
        let mut processes = HashMap::with_capacity(stats.len());
        for (pid, stat, first) in stats {
            if let Some(p) = self.process(pid, stat, now, first) {
                processes.insert(pid, p);
            }
        }
        // Forget PIDs that are gone so a recycled PID starts fresh.
        self.known.retain(|pid, _| processes.contains_key(pid));

        HostSample { host, processes, status, pid_namespace: self.pid_namespace }
    }

    fn pid_namespace(&self) -> Option<PidNamespace> {
        self.pid_namespace
    }
}

/// The few fields of a sysinfo process gpuscope keeps, copied out so the
/// user lookup can borrow `self` mutably.
struct ProcessView {
    name: String,
    cmd: Vec<String>,
    uid: Option<sysinfo::Uid>,
    start_time: u64,
}

impl ProcessView {
    fn of(p: &SysProcess) -> Self {
        Self {
            name: p.name().to_string_lossy().into_owned(),
            cmd: p.cmd().iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            uid: p.user_id().cloned(),
            start_time: p.start_time(),
        }
    }
}

/// What stays true for the life of the process; the rest comes from
/// `/proc/PID/stat` each tick.
fn fixed_fields(p: &ProcessView, user: Option<String>) -> HostProcess {
    let command = (!p.cmd.is_empty()).then(|| sanitize_command(&p.cmd.join(" ")));
    HostProcess {
        name: Some(sanitize_command(&p.name)).filter(|n| !n.is_empty()),
        user,
        // Kernel threads and zombies have an empty command line.
        command: command.filter(|c| !c.is_empty()),
        start_time: (p.start_time > 0).then(|| Timestamp::from_unix_secs(p.start_time)),
        ..HostProcess::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_this_process() {
        let me = std::process::id();
        let mut host = SysinfoHost::new();
        let first = host.sample(&[me, u32::MAX - 1]);
        assert!(first.host.memory_total.unwrap() > 0);
        assert_eq!(first.host.cpu_percent, None, "no CPU figure before a second reading");
        let p = &first.processes[&me];
        assert!(p.command.as_deref().unwrap().contains("gpuscope"), "{p:?}");
        assert!(p.memory.unwrap() > 0);
        assert_eq!(p.cpu_percent, None);
        assert_eq!(p.workload, workload::read(Path::new("/proc"), me), "the cgroup is read on first sight");
        assert_eq!(first.pid_namespace, pidns::current(Path::new("/proc")).unwrap());
        assert!(!first.processes.contains_key(&(u32::MAX - 1)));

        // Burn some CPU between the readings, so there is a rate to see.
        let start = procstat::start_ticks(Path::new("/proc"), me).unwrap();
        let cpu = || procstat::read(Path::new("/proc"), me).unwrap().cpu_ticks;
        let before = cpu();
        while cpu() < before + 5 {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        let second = host.sample(&[me]);
        assert!(second.host.cpu_percent.is_some());
        let p = &second.processes[&me];
        let max = f64::from(host.cpu_count.unwrap()) * 100.0;
        assert!(p.cpu_percent.is_some_and(|c| c > 0.0 && c <= max), "{p:?}");
        assert!(p.user.is_some());
        assert_eq!(p.parent_pid, Some(std::os::unix::process::parent_id()));
        let parent_comm = std::fs::read_to_string(format!("/proc/{}/comm", p.parent_pid.unwrap())).unwrap();
        assert_eq!(p.parent_name.as_deref(), Some(parent_comm.trim_end()), "the parent's name, from the host source");
        assert_eq!(host.known[&me].start_ticks, start);

        // The same PID with another start time is another process: no CPU
        // rate carried over from the one before.
        host.known.get_mut(&me).unwrap().start_ticks = start + 1;
        let recycled = host.sample(&[me]);
        assert_eq!(recycled.processes[&me].cpu_percent, None);
        assert_eq!(host.known[&me].start_ticks, start);
        assert_eq!(host.sample(&[]).processes.len(), 0);
        assert!(host.known.is_empty(), "PIDs no longer asked for are forgotten");
    }

    #[test]
    fn a_bad_namespace_override_is_reported_and_counts_as_unknown() {
        let mut host = SysinfoHost::new().with_pid_namespace(Err("GPUSCOPE_PID_NAMESPACE must be".into()));
        let s = host.sample(&[]);
        assert_eq!(s.status.error.as_deref(), Some("GPUSCOPE_PID_NAMESPACE must be"));
        assert_eq!((s.pid_namespace, host.pid_namespace()), (None, None));
        let host = SysinfoHost::new().with_pid_namespace(Ok(Some(PidNamespace::Container)));
        assert_eq!(host.pid_namespace(), Some(PidNamespace::Container));
    }
}
