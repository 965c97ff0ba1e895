//! The machine and the GPU processes. What a process keeps for life (name,
//! command line, owner, start time) is read when its PID is first seen,
//! from the `stat` read then, `status` and `cmdline`; after that, each tick
//! reads only its CPU-time clock and its `statm` (`procstat::Tracked`), or
//! `/proc/PID/stat` where no descriptor can be held, which is what makes a
//! tick over hundreds of processes cheap; and where the output shows only
//! some processes' figures (`Figures`), nothing at all of the others. The parent, which only `stat`
//! tells, changes only when the parent exits: each tick reads the `stat` of
//! each distinct parent (a launcher above many ranks, a shell) and asks a
//! child again only when its parent has exited. The machine's own figures
//! come from files held open (see `machine`).

use crate::hashing::IntMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::input::{Inputs, Seed};
use super::machine::Machine;
use super::procstat::{self, Stat, Tracked};
use super::users::UserNames;
use super::{Figures, HostProcess, HostProcesses, HostSample, HostSource, sanitize_command};
use super::{numa, pidns, workload};
use crate::model::{Host, PidNamespace, SourceStatus, Timestamp, Workload};
use crate::util::spread::on_threads;

pub struct ProcHost {
    machine: Machine,
    users: UserNames,
    hostname: Option<String>,
    cpu_count: Option<u32>,
    /// Boxed: a table keeps room for about as many entries again as it
    /// holds, and an entry is 168 bytes (about 70 KiB spared at 512).
    known: IntMap<u32, Box<Known>>,
    /// Processes whose stat file is held open at once.
    max_open: usize,
    ticks_per_second: u64,
    page_size: u64,
    /// Seconds since the epoch at boot, which start times count from.
    boot_time: Option<u64>,
    buf: Vec<u8>,
    pid_namespace: Option<PidNamespace>,
    /// A bad `GPUSCOPE_PID_NAMESPACE`, reported with every sample.
    pid_namespace_error: Option<String>,
    /// Whether many processes seen at once are read on several threads.
    spread: bool,
    /// The processes' input side: workers, pin threads, placement, cgroup.
    inputs: Inputs,
    /// Where sysfs is, for the NUMA layout and the GPUs' nodes.
    sys_root: PathBuf,
    /// Each GPU's node by bus id: fixed while the machine runs.
    gpu_nodes: HashMap<String, Option<u32>>,
    /// Names the pods of processes in Kubernetes.
    pods: super::pods::PodNamer,
}

/// A process seen before: what does not change, and the last reading to
/// take CPU time from.
struct Known {
    /// Held while fewer than `max_open` processes are known, so the
    /// descriptors stay within half their limit.
    tracked: Option<Tracked>,
    start_ticks: u64,
    /// CPU time at `at`, and whether it came from the clock (nanoseconds)
    /// or from `stat` (whole ticks): a rate across the two could be off by
    /// a tick, so a change of source starts the rate over.
    cpu_ns: u64,
    from_clock: bool,
    at: Instant,
    /// Not read by the last sample (`Figures`): `cpu_ns` is from longer
    /// ago than a tick, and a rate from it would be an average over
    /// however long the process went unread, shown as this tick's.
    skipped: bool,
    fixed: Fixed,
    parent: Option<Parent>,
}

/// What a process keeps for life, as each tick's `HostProcess` shows it:
/// the lifelong fields alone, not a whole `HostProcess` with its per-tick
/// ones empty (56 bytes more for each of hundreds of processes).
#[derive(Debug, Clone)]
struct Fixed {
    name: Option<Arc<str>>,
    user: Option<Arc<str>>,
    command: Option<Arc<str>>,
    start_time: Option<Timestamp>,
    workload: Option<Arc<Workload>>,
}

/// The parent last seen, read again only when it changes.
#[derive(Clone)]
struct Parent {
    pid: u32,
    name: Option<Arc<str>>,
    /// `None` where its `stat` could not be read (a parent outside this
    /// PID namespace is 0): then it cannot be watched, and the child's own
    /// `stat` is read every tick instead.
    start_ticks: Option<u64>,
}

impl Parent {
    fn read(pid: u32) -> Self {
        let proc_root = Path::new("/proc");
        Self {
            pid,
            name: procstat::comm(proc_root, pid).map(Arc::from),
            start_ticks: procstat::start_ticks(proc_root, pid),
        }
    }
}

/// This tick's figures of one process.
#[derive(Debug, Clone, Copy)]
struct Reading {
    cpu_ns: u64,
    from_clock: bool,
    rss_pages: u64,
    /// `None`: as last seen (read through the clock, which does not tell).
    parent: Option<u32>,
    /// First sight of this process: no rate yet.
    first: bool,
}

impl Reading {
    fn of_stat(stat: &Stat, tps: u64, first: bool) -> Self {
        Self {
            cpu_ns: stat.cpu_ticks.saturating_mul(1_000_000_000 / tps.max(1)),
            from_clock: false,
            rss_pages: stat.rss_pages,
            parent: Some(stat.parent),
            first,
        }
    }
}

impl Default for ProcHost {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcHost {
    pub fn new() -> Self {
        let mut machine = Machine::open(Path::new("/proc"));
        let cpu_count = std::thread::available_parallelism().ok().and_then(|n| u32::try_from(n.get()).ok());
        Self {
            cpu_count,
            boot_time: machine.boot_time(),
            machine,
            users: UserNames::default(),
            hostname: host_name(),
            known: IntMap::default(),
            max_open: procstat::held_stat_budget(),
            ticks_per_second: procstat::ticks_per_second(),
            page_size: procstat::page_size(),
            buf: Vec::new(),
            pid_namespace: None,
            pid_namespace_error: None,
            spread: true,
            inputs: Inputs::new(Path::new("/proc"), Path::new("/sys"), cpu_count),
            sys_root: PathBuf::from("/sys"),
            gpu_nodes: HashMap::new(),
            pods: super::pods::PodNamer::system(),
        }
        .with_pid_namespace(pidns::current(Path::new("/proc")))
    }

    /// Keeps every read on the sampling thread, for the dashboard, as
    /// `NvmlSource::on_one_thread` does: its first tick shows whenever it
    /// comes, and glibc keeps an ended thread's stack and TLS pages for
    /// reuse.
    pub fn on_one_thread(mut self) -> Self {
        self.spread = false;
        self
    }

    /// Holds no descriptor for later readings, for a run of one snapshot:
    /// at first sight each would cost an open of `statm`, its CPU-time
    /// clock asked for and read, and `statm` read, all for a next tick
    /// that never comes. The snapshot's figures are the same: a first
    /// sight's come from `stat`.
    pub fn for_one_snapshot(mut self) -> Self {
        self.max_open = 0;
        self
    }

    /// A bad override is reported, and the namespace then counts as unknown.
    fn with_pid_namespace(mut self, ns: Result<Option<PidNamespace>, String>) -> Self {
        (self.pid_namespace, self.pid_namespace_error) = match ns {
            Ok(ns) => (ns, None),
            Err(e) => (None, Some(e)),
        };
        self
    }

    /// The user's name, or the number where no name is known.
    fn user_name_of(&mut self, uid: u32) -> String {
        self.users.name(uid).unwrap_or_else(|| uid.to_string())
    }

    /// First sight of these PIDs (or of a new process behind a recycled
    /// one): the lifelong fields. The name comes from the `stat` line this
    /// tick read, so two files more are read: `status` and `cmdline`
    /// (sysinfo, which did this before, read `status` twice, `stat` again
    /// and `cmdline`). Many at once (a one-shot's, or a first tick's, on a
    /// busy node) are read on as many threads as there are CPUs: about
    /// 85 µs each, mostly the kernel writing the files, 44 ms at 512.
    fn first_sight(&mut self, fresh: Vec<(u32, Stat, Option<String>)>, now: Instant) {
        // Descriptors for as many as there is room for, in PID order.
        let room = self.max_open.saturating_sub(self.known.len());
        let jobs: Vec<_> = fresh.into_iter().enumerate().map(|(at, f)| (f, at < room)).collect();
        let parallel = self.spread && jobs.len() >= SPREAD_FROM;
        let (boot_time, tps) = (self.boot_time, self.ticks_per_second);
        let sights = on_threads(jobs, parallel, |((pid, stat, name), track)| {
            Sight::read(pid, &stat, name, track, boot_time, tps)
        });
        for sight in sights.into_iter().flatten() {
            self.inputs.seed(sight.pid, sight.start_ticks, sight.seed, now);
            let user = self.user_name_of(sight.view.uid);
            let mut fixed = fixed_fields(&sight.view, user);
            fixed.workload = sight.workload;
            let known = Known {
                tracked: sight.tracked,
                start_ticks: sight.start_ticks,
                cpu_ns: sight.cpu_ns,
                from_clock: sight.from_clock,
                at: now,
                skipped: false,
                fixed,
                parent: None,
            };
            self.known.insert(sight.pid, Box::new(known));
        }
    }

    /// Whether another descriptor may be held.
    fn room(&self) -> bool {
        self.known.len() < self.max_open
    }

    /// Whether a process can go unread this tick: one read through its
    /// clock and `statm` last time, which will tell, when next read, whether
    /// it is still the process first seen. Until then nothing is read of
    /// it, so a PID that went to a new GPU process meanwhile shows the old
    /// one's name and command line; one read through `stat` (its parent
    /// unwatchable, or no descriptor to spare) is read as ever.
    fn followed(&self, pid: u32) -> bool {
        let Some(k) = self.known.get(&pid) else { return false };
        // A parent that cannot be watched leaves the child's `stat` to tell
        // (and the clock is read there, once).
        k.tracked.is_some() && k.parent.as_ref().is_some_and(|p| p.start_ticks.is_some())
    }

    /// Through the clock and `statm` of a process followed since first
    /// sight; dropped once it fails (the process ended, or is a zombie).
    fn read_tracked(&mut self, pid: u32) -> Option<Reading> {
        if !self.followed(pid) {
            return None;
        }
        let k = self.known.get_mut(&pid)?;
        let usage = k.tracked.as_ref()?.read(&mut self.buf);
        if usage.is_none() {
            k.tracked = None;
        }
        let usage = usage?;
        Some(Reading { cpu_ns: usage.cpu_ns, from_clock: true, rss_pages: usage.rss_pages, parent: None, first: false })
    }

    /// The parents of processes read through their clocks, each once: one
    /// that exited (gone, a zombie, or its PID another process's) has
    /// handed its children to another, so they are asked their `stat`.
    fn check_parents(&mut self, readings: &mut [(u32, Option<Reading>)]) {
        let proc_root = Path::new("/proc");
        let mut verdicts: IntMap<u32, bool> = IntMap::default();
        let read = readings.iter_mut().filter_map(|(pid, r)| Some((pid, r.as_mut()?)));
        for (pid, reading) in read.filter(|(_, r)| r.parent.is_none()) {
            let Some(k) = self.known.get(pid) else { continue };
            let Some(parent) = &k.parent else { continue };
            let still = *verdicts.entry(parent.pid).or_insert_with(|| {
                procstat::read(proc_root, parent.pid)
                    .is_some_and(|s| !s.exited() && Some(s.start_ticks) == parent.start_ticks)
            });
            if still {
                continue;
            }
            if let Some(stat) = procstat::read(proc_root, *pid).filter(|s| s.start_ticks == k.start_ticks) {
                reading.parent = Some(stat.parent);
            }
        }
    }

    /// `parents` holds the parents read this sample: the ranks a launcher
    /// started share one, read once for all of them. A process not read
    /// (`None`) shows what it keeps for life, and no figures.
    fn process(
        &mut self,
        pid: u32,
        reading: Option<Reading>,
        now: Instant,
        parents: &mut IntMap<u32, Parent>,
    ) -> Option<HostProcess> {
        let max_percent = f64::from(self.cpu_count.unwrap_or(1)) * 100.0;
        let page = self.page_size;
        let k = self.known.get_mut(&pid)?;
        let mut cpu_percent = None;
        if let Some(reading) = &reading {
            let seconds = now.duration_since(k.at).as_secs_f64();
            let comparable = !reading.first && !k.skipped && reading.from_clock == k.from_clock && seconds > 0.0;
            let used = reading.cpu_ns.saturating_sub(k.cpu_ns);
            cpu_percent = comparable.then(|| procstat::cpu_percent(used, seconds, max_percent));
            if !reading.first {
                (k.cpu_ns, k.from_clock, k.at) = (reading.cpu_ns, reading.from_clock, now);
            }
        }
        k.skipped = reading.is_none();
        if let Some(ppid) = reading.and_then(|r| r.parent).filter(|&pp| k.parent.as_ref().is_none_or(|p| p.pid != pp)) {
            k.parent = Some(parents.entry(ppid).or_insert_with(|| Parent::read(ppid)).clone());
        }
        let fixed = k.fixed.clone();
        Some(HostProcess {
            name: fixed.name,
            user: fixed.user,
            command: fixed.command,
            start_time: fixed.start_time,
            parent_pid: k.parent.as_ref().map(|p| p.pid),
            parent_name: k.parent.as_ref().and_then(|p| p.name.clone()),
            cpu_percent,
            memory: reading.map(|r| r.rss_pages.saturating_mul(page)),
            workload: fixed.workload,
            input: None,
        })
    }
}

impl HostSource for ProcHost {
    fn sample(&mut self, pids: &[u32], figures: &Figures) -> HostSample {
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
            numa_nodes: None,
        };

        let now = Instant::now();
        let tps = self.ticks_per_second;
        let mut readings = Vec::with_capacity(pids.len());
        let mut fresh = Vec::new();
        for &pid in pids {
            if !figures.wants(pid) && self.followed(pid) {
                readings.push((pid, None));
                continue;
            }
            if let Some(reading) = self.read_tracked(pid) {
                readings.push((pid, Some(reading)));
                continue;
            }
            // Not in /proc: exited, or in a PID namespace this one cannot see.
            let Some(stat) = procstat::read_into(Path::new("/proc"), pid, &mut self.buf) else { continue };
            let room = self.room();
            match self.known.get_mut(&pid) {
                Some(k) if k.start_ticks == stat.start_ticks => {
                    // Followed through the clock again (a zombie's fails,
                    // and it stays on stat); its CPU time from the clock
                    // now, so that the next rate compares like with like.
                    if k.tracked.is_none() && room && !stat.exited() {
                        k.tracked = Tracked::open(pid);
                    }
                    let mut reading = Reading::of_stat(&stat, tps, false);
                    if let Some(usage) = k.tracked.as_ref().and_then(|t| t.read(&mut self.buf)) {
                        (reading.cpu_ns, reading.from_clock, reading.rss_pages) = (usage.cpu_ns, true, usage.rss_pages);
                    }
                    readings.push((pid, Some(reading)));
                }
                _ => {
                    // A new process behind a known PID keeps nothing of the
                    // old one's, even should its first sight fail.
                    self.known.remove(&pid);
                    readings.push((pid, Some(Reading::of_stat(&stat, tps, true))));
                    fresh.push((pid, stat, procstat::name_in(&self.buf)));
                }
            }
        }
        self.first_sight(fresh, now);
        self.check_parents(&mut readings);
        let status = match &self.pid_namespace_error {
            Some(e) => SourceStatus::failed(e.clone()),
            None => SourceStatus::ok(),
        };
        // `pids` come sorted, and so do the readings.
        let mut processes = HostProcesses::with_capacity(readings.len());
        let mut parents = IntMap::default();
        for (pid, reading) in readings {
            if let Some(p) = self.process(pid, reading, now, &mut parents) {
                processes.insert(pid, p);
            }
        }
        // Forget PIDs that are gone so a recycled PID starts fresh.
        self.known.retain(|pid, _| processes.contains_key(pid));
        for (pid, p) in processes.iter_mut().filter(|(pid, _)| figures.wants(*pid)) {
            if let Some(k) = self.known.get(&pid) {
                p.input = Some(Box::new(self.inputs.read(pid, k.start_ticks, now)));
            }
        }
        self.inputs.end_tick(now);
        let host = Host { numa_nodes: self.inputs.numa_nodes(now), ..host };

        HostSample { host, processes, status, pid_namespace: self.pid_namespace }
    }

    fn pid_namespace(&self) -> Option<PidNamespace> {
        self.pid_namespace
    }

    fn publish_workers(&mut self, published: &[(u32, Vec<u32>)]) {
        self.inputs.publish(published);
    }

    fn gpu_numa_nodes(&mut self, bus_ids: &[Option<&str>]) -> Vec<Option<u32>> {
        let sys_root = &self.sys_root;
        (bus_ids.iter())
            .map(|id| {
                let id = (*id)?;
                *self.gpu_nodes.entry(id.to_owned()).or_insert_with(|| numa::pci_node(sys_root, id))
            })
            .collect()
    }

    fn name_pods(&mut self, processes: &mut [crate::model::Process], gpus: &[crate::model::Gpu]) {
        self.pods.name(processes, gpus);
    }
}

/// What a process keeps for life, as read at first sight.
struct ProcessView {
    name: String,
    cmd: Vec<String>,
    /// The real user ID.
    uid: u32,
    /// Seconds since the epoch, whole as `stat` counts them after boot.
    start_time: Option<u64>,
}

/// The machine's name (gethostname(2)); `None` where it is not UTF-8.
fn host_name() -> Option<String> {
    // HOST_NAME_MAX is 64 on Linux; room for a terminating NUL besides.
    let mut buf = [0u8; 256];
    // SAFETY: writes at most `buf.len()` bytes into `buf`.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// Fewer processes seen at once than this are read on the sampling
/// thread: starting a thread costs about what reading one process does.
const SPREAD_FROM: usize = 16;

/// What the first sight of one process read: all but the owner's name,
/// which comes from the shared cache of user names.
struct Sight {
    pid: u32,
    view: ProcessView,
    workload: Option<Arc<Workload>>,
    tracked: Option<Tracked>,
    start_ticks: u64,
    /// The rate's base, from the source the next readings come from.
    cpu_ns: u64,
    from_clock: bool,
    seed: Seed,
}

impl Sight {
    /// `None` when the process has gone since its `stat` was read: nothing
    /// to follow. A descriptor is held only where `track`.
    fn read(
        pid: u32,
        stat: &Stat,
        name: Option<String>,
        track: bool,
        boot_time: Option<u64>,
        tps: u64,
    ) -> Option<Self> {
        let proc_root = Path::new("/proc");
        // One read of `status` for the owner, and for the input side's
        // first look (`Inputs::seed`): its longest read.
        let status = procstat::read_up_to(&procstat::pid_file(proc_root, pid, "status"), usize::MAX).ok()?;
        let uid = procstat::uid_in(&status)?;
        let seed = Seed::of_status(&status);
        let view = ProcessView {
            name: name.unwrap_or_default(),
            cmd: procstat::command_line(proc_root, pid),
            uid,
            start_time: boot_time.map(|boot| boot + stat.start_ticks / tps.max(1)),
        };
        let workload = workload::read(proc_root, pid)
            // Read after the PID's stat: dropped should the PID have gone
            // to another process in between.
            .filter(|_| procstat::start_ticks(proc_root, pid) == Some(stat.start_ticks))
            .map(Arc::new);
        let tracked = track.then(|| Tracked::open(pid)).flatten();
        let (cpu_ns, from_clock) = match tracked.as_ref().and_then(|t| t.read(&mut Vec::new())) {
            Some(usage) => (usage.cpu_ns, true),
            None => (Reading::of_stat(stat, tps, true).cpu_ns, false),
        };
        Some(Self { pid, view, workload, tracked, start_ticks: stat.start_ticks, cpu_ns, from_clock, seed })
    }
}

/// What stays true for the life of the process; the rest comes from
/// `/proc/PID/stat` each tick.
fn fixed_fields(p: &ProcessView, user: String) -> Fixed {
    let command = (!p.cmd.is_empty()).then(|| sanitize_command(&p.cmd.join(" ")));
    Fixed {
        name: Some(sanitize_command(&p.name)).filter(|n| !n.is_empty()).map(Arc::from),
        user: Some(Arc::from(user)),
        // Kernel threads and zombies have an empty command line.
        command: command.filter(|c| !c.is_empty()).map(Arc::from),
        start_time: p.start_time.filter(|&t| t > 0).map(Timestamp::from_unix_secs),
        workload: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_this_process() {
        let me = std::process::id();
        let mut host = ProcHost::new();
        let first = host.sample(&[me, u32::MAX - 1], &Figures::All);
        assert!(first.host.memory_total.unwrap() > 0);
        assert_eq!(first.host.cpu_percent, None, "no CPU figure before a second reading");
        let p = &first.processes[&me];
        assert!(p.command.as_deref().unwrap().contains("gpuscope"), "{p:?}");
        let own = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(p.name.as_deref(), Some(own.trim_end()));
        let now_ms =
            u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis())
                .unwrap();
        let started = p.start_time.as_ref().unwrap().time_unix_ms;
        assert!(started <= now_ms && started + 86_400_000 > now_ms, "started at {started}, now {now_ms}");
        assert!(p.memory.unwrap() > 0);
        assert_eq!(p.cpu_percent, None);
        assert_eq!(
            p.workload.as_deref(),
            workload::read(Path::new("/proc"), me).as_ref(),
            "the cgroup is read on first sight"
        );
        assert_eq!(first.pid_namespace, pidns::current(Path::new("/proc")).unwrap());
        let topology = super::super::numa::Topology::read(Path::new("/sys"));
        assert_eq!(first.host.numa_nodes, topology.map(|t| t.nodes()));
        let input = p.input.as_deref().expect("the input side is read with the figures");
        assert!(input.placement.as_ref().is_some_and(|p| p.last_cpu.is_some() && p.cpus_allowed.is_some()));
        assert!(!first.processes.contains_key(&(u32::MAX - 1)));

        // Burn some CPU between the readings, so there is a rate to see.
        let start = procstat::start_ticks(Path::new("/proc"), me).unwrap();
        let cpu = || procstat::read(Path::new("/proc"), me).unwrap().cpu_ticks;
        let before = cpu();
        while cpu() < before + 5 {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        let second = host.sample(&[me], &Figures::All);
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
        // rate carried over from the one before. (Its predecessor's
        // descriptor answers no more once that one is reaped.)
        let known = host.known.get_mut(&me).unwrap();
        (known.start_ticks, known.tracked) = (start + 1, None);
        let recycled = host.sample(&[me], &Figures::All);
        assert_eq!(recycled.processes[&me].cpu_percent, None);
        assert_eq!(host.known[&me].start_ticks, start);
        assert_eq!(host.sample(&[], &Figures::All).processes.len(), 0);
        assert!(host.known.is_empty(), "PIDs no longer asked for are forgotten");
    }

    /// A process followed through its clock and `statm` goes unread where
    /// its figures are not wanted, and its rate starts over once it is
    /// read again: one across the gap would be an average over it.
    #[test]
    fn a_process_whose_figures_are_not_wanted_is_not_read() {
        let me = std::process::id();
        let mut host = ProcHost::new();
        let burn = || {
            let cpu = || procstat::read(Path::new("/proc"), me).unwrap().cpu_ticks;
            let before = cpu();
            while cpu() < before + 2 {
                std::hint::black_box((0..10_000u64).sum::<u64>());
            }
        };
        let nobody = Figures::Of(Arc::from([]));
        let only_me = Figures::Of(Arc::from([me]));
        assert!(host.sample(&[me], &nobody).processes[&me].memory.is_some(), "a first sight reads `stat`");
        let at = host.known[&me].at;
        burn();
        let unread = host.sample(&[me], &nobody);
        let p = &unread.processes[&me];
        assert_eq!((p.cpu_percent, p.memory, &p.input), (None, None, &None), "{p:?}");
        assert!(p.command.is_some() && p.user.is_some() && p.parent_pid.is_some(), "what it keeps for life: {p:?}");
        assert!(host.known[&me].tracked.is_some() && host.known[&me].at == at, "followed, and not read");
        burn();
        let again = &host.sample(&[me], &only_me).processes[&me];
        assert_eq!(again.cpu_percent, None, "no rate across the unread tick");
        assert!(again.memory.is_some_and(|m| m > 0));
        burn();
        let rate = &host.sample(&[me], &only_me).processes[&me];
        assert!(rate.cpu_percent.is_some_and(|c| c > 0.0), "{rate:?}");
        // One read through `stat` (no descriptor held) is read as ever.
        host.known.get_mut(&me).unwrap().tracked = None;
        assert!(host.sample(&[me], &nobody).processes[&me].memory.is_some());
        // And `All` reads every process.
        let all = &host.sample(&[me], &Figures::All).processes[&me];
        assert!(all.memory.is_some());
    }

    /// Sampled together, processes first seen at once (read on several
    /// threads) give what one sampling thread reads of them.
    #[test]
    fn many_processes_seen_at_once_are_read_as_one_at_a_time_is() {
        let mut children: Vec<std::process::Child> =
            (0..SPREAD_FROM + 4).map(|_| std::process::Command::new("sleep").arg("60").spawn().unwrap()).collect();
        let enders: Vec<procstat::Ender> =
            children.iter().map(|c| procstat::Ender(i32::try_from(c.id()).unwrap())).collect();
        let pids: Vec<u32> = children.iter().map(std::process::Child::id).collect();
        // `spawn` returns once the child's old memory is released, inside
        // its `execve` (a vfork-style spawn) and before the kernel has laid
        // out the new arguments, so `cmdline` can still read empty then.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pids.iter().any(|&pid| procstat::command_line(Path::new("/proc"), pid) != ["sleep", "60"]) {
            assert!(std::time::Instant::now() < deadline, "the children never finished their exec");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut host = ProcHost::new();
        // Descriptors for the first few only: the others stay on `stat`.
        host.max_open = 5;
        let many = host.sample(&pids, &Figures::All);
        let mut alone = ProcHost::new().on_one_thread();
        alone.max_open = 5;
        let same = alone.sample(&pids, &Figures::All);
        let one = ProcHost::new().sample(&pids[..1], &Figures::All);
        for pid in &pids {
            let p = &many.processes[pid];
            assert_eq!(p.name.as_deref(), Some("sleep"));
            assert_eq!(p.command.as_deref(), Some("sleep 60"));
            assert_eq!((p.user.as_deref(), p.start_time.is_some()), (one.processes[&pids[0]].user.as_deref(), true));
            assert_eq!(p.parent_pid, Some(std::process::id()));
        }
        let tracked = |h: &ProcHost| pids.iter().filter(|pid| h.known[*pid].tracked.is_some()).count();
        assert_eq!(tracked(&host), 5, "as many held as there was room for");
        assert_eq!(tracked(&alone), 5);
        let lifelong = |s: &HostSample| -> Vec<_> {
            let p = |pid| &s.processes[pid];
            pids.iter()
                .map(|pid| {
                    (p(pid).name.clone(), p(pid).user.clone(), p(pid).command.clone(), p(pid).start_time.clone())
                })
                .collect()
        };
        assert_eq!(lifelong(&many), lifelong(&same), "spread or not, the same reading");
        drop(enders);
        for c in &mut children {
            let _ = c.wait();
        }
    }

    #[test]
    fn one_snapshot_s_figures_are_the_same_without_a_descriptor_held() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pids = [std::process::id(), child.id()];
        // Until its `execve` has laid out the new program, the child has no
        // resident pages to count (see the test above).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while procstat::command_line(Path::new("/proc"), child.id()) != ["sleep", "30"] {
            assert!(std::time::Instant::now() < deadline, "the child never finished its exec");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut held = ProcHost::new();
        let mut once = ProcHost::new().for_one_snapshot();
        let (a, b) = (held.sample(&pids, &Figures::All), once.sample(&pids, &Figures::All));
        let _ = child.kill();
        let _ = child.wait();
        for pid in pids {
            let (a, b) = (&a.processes[&pid], &b.processes[&pid]);
            assert_eq!((&a.name, &a.user, &a.command, &a.start_time), (&b.name, &b.user, &b.command, &b.start_time));
            assert_eq!((a.cpu_percent, b.cpu_percent), (None, None), "no rate from one reading");
            assert_eq!(a.parent_pid, b.parent_pid);
            assert!(b.memory.is_some_and(|m| m > 0), "{b:?}");
            assert!(held.known[&pid].tracked.is_some());
            assert!(once.known[&pid].tracked.is_none(), "nothing held open for a next tick");
        }
    }

    /// Read through its clock, a process still shows a new parent once its
    /// parent exits: the parent is watched, and the child asked again.
    #[test]
    fn a_new_parent_is_seen_when_the_parent_exits() {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg("sleep 60 & echo $!; read _")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let _shell = procstat::Ender(i32::try_from(shell.id()).unwrap());
        let mut line = String::new();
        BufReader::new(shell.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let sleeper: u32 = line.trim().parse().unwrap();
        let _sleeper = procstat::Ender(i32::try_from(sleeper).unwrap());
        let mut host = ProcHost::new();
        for _ in 0..2 {
            assert_eq!(host.sample(&[sleeper], &Figures::All).processes[&sleeper].parent_pid, Some(shell.id()));
        }
        assert!(host.known[&sleeper].tracked.is_some(), "followed through its clock");
        drop(shell.stdin.take());
        shell.wait().unwrap();
        let now = procstat::read(Path::new("/proc"), sleeper).unwrap().parent;
        assert_ne!(now, shell.id());
        let p = &host.sample(&[sleeper], &Figures::All).processes[&sleeper];
        assert_eq!(p.parent_pid, Some(now), "{p:?}");
        assert_eq!(p.parent_name.as_deref(), procstat::comm(Path::new("/proc"), now).as_deref());
        assert!(p.cpu_percent.is_some(), "the rate goes on through the change");
    }

    #[test]
    fn a_bad_namespace_override_is_reported_and_counts_as_unknown() {
        let mut host = ProcHost::new().with_pid_namespace(Err("GPUSCOPE_PID_NAMESPACE must be".into()));
        let s = host.sample(&[], &Figures::All);
        assert_eq!(s.status.error.as_deref(), Some("GPUSCOPE_PID_NAMESPACE must be"));
        assert_eq!((s.pid_namespace, host.pid_namespace()), (None, None));
        let host = ProcHost::new().with_pid_namespace(Ok(Some(PidNamespace::Container)));
        assert_eq!(host.pid_namespace(), Some(PidNamespace::Container));
    }
}
