//! What the host sees of a GPU process's input side without its probe
//! (`model::HostInput`): its DataLoader workers and pin-memory thread, each
//! with its CPU, scheduler state and placement; where the trainer itself
//! runs and may run; its cgroup's CPU throttling.
//!
//! Workers are found as the trainer's children named `pt_data_worker`
//! (PyTorch 2.5 and later name them so, and the pin-memory thread
//! `pt_data_pin`), the children of a child that has such children (the
//! forkserver of Python 3.14's default start method), and the PIDs the
//! trainer's probe published (`publish`), which name workers of any
//! PyTorch. Children come from `/proc/PID/task/PID/children`, the main
//! thread's: a loader is iterated, and its workers forked, by the thread
//! that runs the training loop, the main one in every trainer we know of
//! (Documentation/filesystems/proc.rst, "task/<tid>/children": "first
//! level children", of that thread only); a loader iterated elsewhere is
//! found through its probe.
//!
//! Cost. A process is scanned (children, `status`, `stat`, its cgroup) at
//! first sight and every `SCAN`; a trainer, one with workers, a pin thread
//! or published PIDs, has its children file and each worker's and pin
//! thread's `stat` read every tick (one read each: CPU time, state, last
//! CPU, I/O delay, exit code), and its threads listed for pin threads when
//! scanned. Other processes cost nothing between scans but their cgroup's
//! `cpu.stat`, read once a tick for all the processes in it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroup_cpu::{self, Limit, Throttling};
use super::numa::{CpuList, Topology};
use super::procstat::{self, TaskStat};
use crate::hashing::IntMap;
use crate::model::{
    DataWorker, HostInput, MAX_WORKERS, NumaNode, PinThread, Placement, TaskFigures, TaskState, WorkerSource,
};

/// How often a process is looked at again in full: its children (for a
/// process that is no trainer yet), threads (for a trainer's pin threads),
/// allowed CPUs and cgroup.
const SCAN: Duration = Duration::from_secs(10);
/// How long a worker that ended stays listed, `alive: false`: a dashboard
/// refreshing every few seconds still shows it, and a rule sees it end.
const GONE_KEPT: Duration = Duration::from_secs(10);
/// A trainer's child that is no worker is asked its name every tick for
/// this long after it appeared: a spawned worker imports torch (seconds)
/// before it names itself.
const YOUNG: Duration = Duration::from_secs(60);
/// How often the machine's NUMA nodes and the kernel's delay accounting
/// switch are read again.
const MACHINE_REFRESH: Duration = Duration::from_secs(60);
/// Bounds on what one process can make gpuscope read.
const MAX_CHILDREN: usize = 256;
const MAX_THREADS: usize = 4096;
const MAX_PARENTS: usize = 8;
const MAX_PINS: usize = 8;
/// `comm` of the workers and of the pin-memory thread (PyTorch 2.5+:
/// `torch.utils.data._utils.worker._worker_loop` and `pin_memory` call
/// `torch.multiprocessing._set_thread_name`).
pub const WORKER_NAME: &str = "pt_data_worker";
pub const PIN_NAME: &str = "pt_data_pin";
/// A `stat` line: 52 numbers of at most 20 digits and a name of at most
/// 64 bytes, well within this (a line cut short parses as nothing).
const STAT_MAX: usize = 2048;

pub struct Inputs {
    proc_root: PathBuf,
    sys_root: PathBuf,
    ticks_per_second: u64,
    max_percent: f64,
    machine: Option<Machine>,
    trainers: IntMap<u32, Trainer>,
    /// The workers each trainer's probe published, as the trainer's own
    /// PID namespace numbers them (`publish`).
    published: IntMap<u32, Vec<u32>>,
    throttling: Throttling,
    /// The binding limit by `/proc/PID/cgroup`'s text, found once a scan
    /// for all the processes of a cgroup: the ranks of one job share it.
    limits: HashMap<String, (Instant, Option<Limit>)>,
}

/// What the machine says, read every `MACHINE_REFRESH`.
struct Machine {
    at: Instant,
    topology: Option<Topology>,
    /// `kernel.task_delayacct`: whether `stat`'s block I/O delay counts.
    /// Absent before Linux 5.14, where it cannot be told: `None`.
    delayacct: Option<bool>,
}

/// A process or thread followed from tick to tick.
#[derive(Debug, Clone)]
struct Task {
    /// `/proc/PID` or `/proc/PID/task/TID`.
    dir: PathBuf,
    id: u32,
    start_ticks: u64,
    /// The last reading, and when it was taken.
    last: Option<(Instant, TaskStat)>,
    /// This tick's reading, `None` once gone.
    now: Option<TaskStat>,
    /// Its allowed CPUs, read at first sight and every scan.
    allowed: Option<String>,
    cpu_percent: Option<f64>,
    blkio_percent: Option<f64>,
}

struct Worker {
    task: Task,
    ns_pid: Option<u32>,
    by_name: bool,
    by_probe: bool,
    gone_at: Option<Instant>,
    exit_signal: Option<u32>,
}

struct Trainer {
    start_ticks: u64,
    /// In a PID namespace below this `/proc`'s: its probe's PIDs are
    /// mapped through its descendants' `NSpid`.
    nested: bool,
    scanned_at: Option<Instant>,
    /// When it was last read: one not read in a tick is forgotten, so no
    /// rate spans the gap.
    read_at: Instant,
    /// It has (or had) workers, pin threads or published PIDs: followed
    /// every tick.
    active: bool,
    /// Workers found since its pin threads were last looked for: a new
    /// loader iterator, and maybe a new pin thread.
    new_workers: bool,
    /// Its `status` as the host source read it at first sight, not read
    /// again by the first scan.
    seeded: bool,
    own: Task,
    /// Its children that hold workers (a forkserver), besides itself.
    parents: Vec<(u32, u64)>,
    workers: Vec<Worker>,
    /// Its other children, by PID.
    others: IntMap<u32, Other>,
    pins: Vec<Task>,
    limit: Option<Limit>,
    /// The published list last resolved.
    resolved: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Other {
    start_ticks: u64,
    /// When first seen: a young child is asked its name every tick.
    seen: Instant,
    /// Its PID in the trainer's namespace, where that is nested.
    ns_pid: Option<u32>,
    /// A worker beyond `MAX_WORKERS`: counted, not listed.
    worker: bool,
}

impl Inputs {
    pub fn new(proc_root: &Path, sys_root: &Path, cpu_count: Option<u32>) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            sys_root: sys_root.to_path_buf(),
            ticks_per_second: procstat::ticks_per_second(),
            max_percent: f64::from(cpu_count.unwrap_or(1)) * 100.0,
            machine: None,
            trainers: IntMap::default(),
            published: IntMap::default(),
            throttling: Throttling::default(),
            limits: HashMap::new(),
        }
    }

    /// Replaces what the probes published: per trainer (by the PID this
    /// `/proc` gives it), its workers' PIDs as its own namespace numbers
    /// them. A trainer left out has none.
    pub fn publish(&mut self, published: &[(u32, Vec<u32>)]) {
        self.published =
            published.iter().map(|(pid, w)| (*pid, w.iter().copied().take(MAX_CHILDREN).collect())).collect();
    }

    /// The machine's nodes, read again when due.
    pub fn numa_nodes(&mut self, now: Instant) -> Option<Vec<NumaNode>> {
        self.machine(now).topology.as_ref().map(Topology::nodes)
    }

    fn machine(&mut self, now: Instant) -> &Machine {
        let machine = match self.machine.take() {
            Some(m) if now.saturating_duration_since(m.at) < MACHINE_REFRESH => m,
            _ => {
                let flag = procstat::read_up_to(&self.proc_root.join("sys/kernel/task_delayacct"), 16).ok();
                Machine {
                    at: now,
                    topology: Topology::read(&self.sys_root),
                    delayacct: flag.map(|f| f.trim_ascii() == b"1"),
                }
            }
        };
        self.machine.insert(machine)
    }

    fn delayacct(&self) -> Option<bool> {
        self.machine.as_ref().and_then(|m| m.delayacct)
    }

    /// What the host source's first sight of `pid` read of its `status`,
    /// so that its first scan need not read it again.
    pub fn seed(&mut self, pid: u32, start_ticks: u64, seed: Seed, now: Instant) {
        let mut t = Trainer::new(&self.proc_root, pid, start_ticks, now);
        (t.own.allowed, t.nested, t.seeded) = (seed.0.cpus_allowed.clone(), seed.0.ns_pid().is_some(), true);
        self.trainers.insert(pid, t);
    }

    /// The input side of `pid`, whose process started at `start_ticks`.
    pub fn read(&mut self, pid: u32, start_ticks: u64, now: Instant) -> HostInput {
        self.machine(now);
        let mut t = match self.trainers.remove(&pid) {
            Some(t) if t.start_ticks == start_ticks => t,
            _ => Trainer::new(&self.proc_root, pid, start_ticks, now),
        };
        t.read_at = now;
        let published = self.published.get(&pid).cloned().unwrap_or_default();
        let scan = t.scanned_at.is_none_or(|at| now.saturating_duration_since(at) >= SCAN) || published != t.resolved;
        if scan && !std::mem::take(&mut t.seeded) {
            // First: whether its descendants' PIDs need mapping.
            (t.own.allowed, t.nested) = status_of(&t.own.dir);
        }
        if t.active || scan {
            self.follow(&mut t, pid, now, scan);
        }
        if scan {
            self.scan(&mut t, pid, &published, now);
        } else if t.new_workers {
            self.find_pins(&mut t, pid, now);
        }
        if t.active || scan {
            let (tps, max, delayacct) = (self.ticks_per_second, self.max_percent, self.delayacct());
            t.own.read(now, tps, max, delayacct);
        }
        let input = self.view(&t, now);
        self.trainers.insert(pid, t);
        input
    }

    /// Ends a tick: processes not read in it are forgotten (so that no
    /// rate spans a gap), with the cgroups none of the rest is in.
    pub fn end_tick(&mut self, now: Instant) {
        self.trainers.retain(|_, t| t.read_at == now);
        self.limits.retain(|_, (at, _)| now.saturating_duration_since(*at) < SCAN);
        self.throttling.end_tick();
    }

    /// Every tick of a trainer, and at a scan: new children, and each
    /// worker's and pin thread's figures.
    fn follow(&mut self, t: &mut Trainer, pid: u32, now: Instant, scan: bool) {
        let mut seen = Vec::new();
        let mut parents = vec![(pid, t.start_ticks)];
        parents.extend(t.parents.iter().copied());
        for (parent, start) in parents {
            let kids = children(&self.proc_root, parent);
            if parent == pid {
                // A forkserver that has gone (or is no longer a child).
                t.parents.retain(|(p, _)| kids.contains(p));
            }
            for kid in kids {
                seen.push(kid);
                self.look_at(t, pid, parent, start, kid, now, scan);
            }
        }
        if scan {
            t.others.retain(|kid, _| seen.contains(kid));
        }
        let (tps, max, delayacct) = (self.ticks_per_second, self.max_percent, self.delayacct());
        for w in t.workers.iter_mut().filter(|w| w.gone_at.is_none()) {
            // One the probe named, that has named itself since.
            w.by_name |= w.task.read(now, tps, max, delayacct).as_deref() == Some(WORKER_NAME);
            match w.task.now {
                Some(s) if matches!(s.state, b'Z' | b'X') => w.exit_signal = signal_of(s.exit_code),
                Some(_) => {}
                None => w.gone_at = Some(now),
            }
        }
        t.workers.retain(|w| w.gone_at.is_none_or(|at| now.saturating_duration_since(at) < GONE_KEPT));
        for p in &mut t.pins {
            p.read(now, tps, max, delayacct);
        }
        t.pins.retain(|p| p.now.is_some());
    }

    /// A child of a trainer (`parent` is the trainer or one of its
    /// forkservers): a worker, or another child, looked at again while
    /// young and at a scan.
    #[allow(clippy::too_many_arguments)]
    fn look_at(&self, t: &mut Trainer, trainer: u32, parent: u32, start: u64, kid: u32, now: Instant, scan: bool) {
        if t.workers.iter().any(|w| w.task.id == kid && w.gone_at.is_none()) {
            return;
        }
        let young = |o: &Other| now.saturating_duration_since(o.seen) < YOUNG;
        if t.others.get(&kid).is_some_and(|o| !scan && !young(o)) {
            return;
        }
        let dir = procstat::pid_file(&self.proc_root, kid, "");
        let Some((stat, name)) = read_stat(&dir) else { return };
        // The PID is the child's only while its parent is still the one
        // that started it: a reused PID belongs to someone else.
        if stat.parent != parent || stat.start_ticks < start {
            return;
        }
        let known = t.others.get(&kid).filter(|o| o.start_ticks == stat.start_ticks).copied();
        let is_worker = name.as_deref() == Some(WORKER_NAME);
        // Its `status` for its allowed CPUs (a worker) and its PID in a
        // nested namespace (any child there), once.
        let status = (is_worker || (t.nested && known.is_none())).then(|| read_status(&dir)).flatten();
        let ns = known.and_then(|o| o.ns_pid).or_else(|| status.as_ref().and_then(Status::ns_pid));
        if is_worker {
            let mut task = Task::new(dir, kid, stat.start_ticks);
            task.allowed = status.and_then(|s| s.cpus_allowed);
            if t.add_worker(task, ns, true, false) {
                t.others.remove(&kid);
                return;
            }
        }
        if t.others.len() < MAX_CHILDREN || known.is_some() {
            let seen = known.map_or(now, |o| o.seen);
            t.others.insert(kid, Other { start_ticks: stat.start_ticks, seen, ns_pid: ns, worker: is_worker });
        }
        if parent == trainer && !is_worker && t.parents.len() < MAX_PARENTS && !t.parents.iter().any(|(p, _)| *p == kid)
        {
            let grandchildren = children(&self.proc_root, kid);
            let named = |g: &u32| {
                read_stat(&procstat::pid_file(&self.proc_root, *g, ""))
                    .is_some_and(|(s, n)| s.parent == kid && n.as_deref() == Some(WORKER_NAME))
            };
            // A child of the trainer whose own children are workers: a
            // forkserver, looked through from now on.
            if grandchildren.iter().any(named) {
                t.parents.push((kid, stat.start_ticks));
                for g in grandchildren {
                    self.look_at(t, trainer, kid, stat.start_ticks, g, now, true);
                }
            }
        }
    }

    /// Every `SCAN`, and when the published PIDs change: those PIDs, pin
    /// threads, allowed CPUs and the cgroup.
    fn scan(&mut self, t: &mut Trainer, pid: u32, published: &[u32], now: Instant) {
        t.scanned_at = Some(now);
        self.resolve(t, pid, published, now);
        for w in t.workers.iter_mut().filter(|w| w.gone_at.is_none()) {
            w.task.allowed = status_of(&w.task.dir).0;
        }
        if t.workers.iter().any(|w| w.gone_at.is_none()) || !t.pins.is_empty() {
            self.find_pins(t, pid, now);
        }
        t.active = !t.workers.is_empty() || !t.pins.is_empty() || !published.is_empty();
        t.limit = self.limit_of(pid, now);
    }

    /// The published PIDs as this `/proc` numbers them: the same where the
    /// trainer shares this namespace, else the child (or a child's child)
    /// whose innermost `NSpid` is that PID. Each must be the trainer's
    /// child or grandchild (through a forkserver), started after it: a PID
    /// a worker left behind may be another process's by now.
    fn resolve(&self, t: &mut Trainer, pid: u32, published: &[u32], now: Instant) {
        t.resolved = published.to_vec();
        for w in &mut t.workers {
            w.by_probe = false;
        }
        for &inner in published {
            let host = if t.nested { self.host_pid_of(t, inner) } else { Some(inner) };
            let Some(host) = host else { continue };
            if let Some(w) = t.workers.iter_mut().find(|w| w.task.id == host && w.gone_at.is_none()) {
                w.by_probe = true;
                continue;
            }
            let dir = procstat::pid_file(&self.proc_root, host, "");
            let Some((stat, _)) = read_stat(&dir) else { continue };
            let grandparent = || {
                read_stat(&procstat::pid_file(&self.proc_root, stat.parent, "")).is_some_and(|(p, _)| p.parent == pid)
            };
            if (stat.parent != pid && !grandparent()) || stat.start_ticks < t.start_ticks {
                continue;
            }
            let mut task = Task::new(dir, host, stat.start_ticks);
            task.allowed = status_of(&task.dir).0;
            self.first_reading(&mut task, now);
            if t.add_worker(task, t.nested.then_some(inner), false, true) {
                t.others.remove(&host);
            }
        }
        // One only the probe named, that it names no more.
        t.workers.retain(|w| w.by_name || w.by_probe || w.gone_at.is_some());
    }

    /// In a nested namespace, the PID this `/proc` gives the trainer's
    /// descendant numbered `inner` in there: a child's, else a child's
    /// child's (bounded as the forkservers are).
    fn host_pid_of(&self, t: &Trainer, inner: u32) -> Option<u32> {
        let listed = t.others.iter().find(|(_, o)| o.ns_pid == Some(inner)).map(|(kid, _)| *kid);
        let worker = || t.workers.iter().find(|w| w.ns_pid == Some(inner)).map(|w| w.task.id);
        let below = || {
            let mut kids: Vec<u32> = t.others.keys().copied().collect();
            kids.sort_unstable();
            kids.into_iter()
                .take(MAX_PARENTS)
                .flat_map(|kid| children(&self.proc_root, kid))
                .find(|&g| ns_pid(&procstat::pid_file(&self.proc_root, g, "")) == Some(inner))
        };
        listed.or_else(worker).or_else(below)
    }

    /// The trainer's threads named `pt_data_pin`.
    fn find_pins(&self, t: &mut Trainer, pid: u32, now: Instant) {
        t.new_workers = false;
        let Ok(entries) = std::fs::read_dir(t.own.dir.join("task")) else { return };
        let mut pins = Vec::new();
        for entry in entries.flatten().take(MAX_THREADS) {
            let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if tid == pid || pins.len() >= MAX_PINS {
                continue;
            }
            let dir = entry.path();
            let Ok(comm) = procstat::read_up_to(&dir.join("comm"), 64) else { continue };
            if comm.trim_ascii() != PIN_NAME.as_bytes() {
                continue;
            }
            let Some((stat, _)) = read_stat(&dir) else { continue };
            let kept = t.pins.iter().find(|p| p.id == tid && p.start_ticks == stat.start_ticks).cloned();
            let mut task = kept.unwrap_or_else(|| {
                let mut new = Task::new(dir, tid, stat.start_ticks);
                self.first_reading(&mut new, now);
                new
            });
            task.allowed = status_of(&task.dir).0;
            pins.push(task);
        }
        pins.sort_by_key(|p| p.id);
        t.pins = pins;
    }

    /// A task found after this tick's readings: its first, so that it
    /// shows its state now and its rates from the next tick.
    fn first_reading(&self, task: &mut Task, now: Instant) {
        task.read(now, self.ticks_per_second, self.max_percent, self.delayacct());
    }

    /// The cgroup whose quota binds `pid`, found once a scan per cgroup.
    fn limit_of(&mut self, pid: u32, now: Instant) -> Option<Limit> {
        let cgroup = cgroup_cpu::cgroup_of(&self.proc_root, pid)?;
        if let Some((at, limit)) = self.limits.get(&cgroup)
            && now.saturating_duration_since(*at) < SCAN
        {
            return limit.clone();
        }
        let limit = cgroup_cpu::find(&cgroup, &self.sys_root);
        self.limits.insert(cgroup, (now, limit.clone()));
        limit
    }

    fn view(&mut self, t: &Trainer, now: Instant) -> HostInput {
        let topology = self.machine.as_ref().and_then(|m| m.topology.as_ref());
        let workers = (t.workers.iter())
            .map(|w| DataWorker {
                pid: w.task.id,
                ns_pid: w.ns_pid,
                found_by: match (w.by_name, w.by_probe) {
                    (true, true) => WorkerSource::NameAndProbe,
                    (false, true) => WorkerSource::Probe,
                    _ => WorkerSource::Name,
                },
                alive: w.gone_at.is_none() && w.task.now.is_some_and(|s| !matches!(s.state, b'Z' | b'X')),
                figures: w.task.figures(topology),
                exit_signal: w.exit_signal,
            })
            .collect();
        let omitted = t.others.values().filter(|o| o.worker).count();
        HostInput {
            workers,
            workers_omitted: u32::try_from(omitted).unwrap_or(u32::MAX),
            pin_threads: t.pins.iter().map(|p| PinThread { tid: p.id, figures: p.figures(topology) }).collect(),
            placement: Some(t.own.placement(topology)),
            cgroup_cpu: t.limit.as_ref().and_then(|l| self.throttling.read(l, now)),
        }
    }
}

impl Trainer {
    fn new(proc_root: &Path, pid: u32, start_ticks: u64, now: Instant) -> Self {
        Self {
            start_ticks,
            nested: false,
            scanned_at: None,
            read_at: now,
            active: false,
            new_workers: false,
            seeded: false,
            own: Task::new(procstat::pid_file(proc_root, pid, ""), pid, start_ticks),
            parents: Vec::new(),
            workers: Vec::new(),
            others: IntMap::default(),
            pins: Vec::new(),
            limit: None,
            resolved: Vec::new(),
        }
    }

    /// Lists a worker, in PID order; `false` where `MAX_WORKERS` live ones
    /// are listed already (it is counted instead).
    fn add_worker(&mut self, task: Task, ns_pid: Option<u32>, by_name: bool, by_probe: bool) -> bool {
        // A PID that ended as one worker and came back as another.
        self.workers.retain(|w| w.task.id != task.id);
        if self.workers.len() >= MAX_WORKERS {
            // Ended ones give way to a live one.
            match self.workers.iter().position(|w| w.gone_at.is_some()) {
                Some(at) => drop(self.workers.remove(at)),
                None => return false,
            }
        }
        let at = self.workers.partition_point(|w| w.task.id < task.id);
        self.workers.insert(at, Worker { task, ns_pid, by_name, by_probe, gone_at: None, exit_signal: None });
        (self.active, self.new_workers) = (true, true);
        true
    }
}

impl Task {
    fn new(dir: PathBuf, id: u32, start_ticks: u64) -> Self {
        Self { dir, id, start_ticks, last: None, now: None, allowed: None, cpu_percent: None, blkio_percent: None }
    }

    /// This tick's `stat`, and the rates since the last; the name in it.
    fn read(&mut self, now: Instant, tps: u64, max_percent: f64, delayacct: Option<bool>) -> Option<String> {
        let read = read_stat(&self.dir).filter(|(s, _)| s.start_ticks == self.start_ticks);
        let (stat, name) = read.map_or((None, None), |(s, n)| (Some(s), n));
        self.now = stat;
        (self.cpu_percent, self.blkio_percent) = (None, None);
        let stat = stat?;
        if let Some((at, was)) = self.last {
            let seconds = now.saturating_duration_since(at).as_secs_f64();
            if seconds > 0.0 {
                let ns_per_tick = 1_000_000_000 / tps.max(1);
                let used = stat.cpu_ticks.saturating_sub(was.cpu_ticks).saturating_mul(ns_per_tick);
                self.cpu_percent = Some(procstat::cpu_percent(used, seconds, max_percent));
                if delayacct == Some(true)
                    && let (Some(b), Some(a)) = (was.blkio_ticks, stat.blkio_ticks)
                {
                    let waited = a.saturating_sub(b).saturating_mul(ns_per_tick);
                    self.blkio_percent = Some(procstat::cpu_percent(waited, seconds, 100.0));
                }
            }
        }
        self.last = Some((now, stat));
        name
    }

    fn placement(&self, topology: Option<&Topology>) -> Placement {
        let last_cpu = self.now.or(self.last.map(|(_, s)| s)).and_then(|s| s.last_cpu);
        let list = self.allowed.as_deref().and_then(CpuList::parse);
        Placement {
            cpus_allowed: self.allowed.clone(),
            nodes_allowed: topology.zip(list.as_ref()).map(|(t, l)| t.nodes_of(l)),
            last_cpu,
            last_node: topology.zip(last_cpu).and_then(|(t, c)| t.node_of(c)),
        }
    }

    fn figures(&self, topology: Option<&Topology>) -> TaskFigures {
        TaskFigures {
            state: self.now.map(|s| TaskState::from_letter(s.state)),
            cpu_percent: self.cpu_percent,
            blkio_wait_percent: self.blkio_percent,
            placement: Some(self.placement(topology)).filter(|_| self.now.is_some()),
        }
    }
}

/// A task's `stat` and the name in it; `None` once it is gone.
fn read_stat(dir: &Path) -> Option<(TaskStat, Option<String>)> {
    let raw = procstat::read_up_to(&dir.join("stat"), STAT_MAX).ok()?;
    Some((procstat::parse_task(&raw)?, procstat::name_in(&raw)))
}

/// `task/PID/children`: the PIDs of the main thread's children, at most
/// `MAX_CHILDREN`; none where the kernel lacks the file
/// (CONFIG_PROC_CHILDREN) or the process is gone.
fn children(proc_root: &Path, pid: u32) -> Vec<u32> {
    let path = procstat::pid_file(proc_root, pid, "task").join(pid.to_string()).join("children");
    procstat::read_up_to(&path, procstat::SMALL_TEXT).map(|raw| parse_children(&raw)).unwrap_or_default()
}

fn parse_children(raw: &[u8]) -> Vec<u32> {
    let text = String::from_utf8_lossy(raw);
    text.split_ascii_whitespace().filter_map(|p| p.parse().ok()).take(MAX_CHILDREN).collect()
}

fn read_status(dir: &Path) -> Option<Status> {
    let raw = procstat::read_up_to(&dir.join("status"), procstat::SMALL_TEXT).ok()?;
    Some(parse_status(&String::from_utf8_lossy(&raw)))
}

/// `Cpus_allowed_list` of a task's `status`, and whether its `NSpid` names
/// a namespace below this one's.
fn status_of(dir: &Path) -> (Option<String>, bool) {
    read_status(dir).map_or((None, false), |s| {
        let nested = s.ns_pid().is_some();
        (s.cpus_allowed, nested)
    })
}

/// Its PID in its own namespace, where that is below this one's.
fn ns_pid(dir: &Path) -> Option<u32> {
    read_status(dir)?.ns_pid()
}

/// A process's `status` as first read (`Inputs::seed`).
pub struct Seed(Status);

impl Seed {
    pub fn of_status(status: &[u8]) -> Self {
        Self(parse_status(&String::from_utf8_lossy(status)))
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Status {
    cpus_allowed: Option<String>,
    /// `NSpid`: from this `/proc`'s namespace down to the task's own.
    ns_pids: Vec<u32>,
}

impl Status {
    /// The innermost `NSpid`, where it is not this namespace's.
    fn ns_pid(&self) -> Option<u32> {
        (self.ns_pids.len() > 1).then(|| self.ns_pids.last().copied()).flatten()
    }
}

/// proc_pid_status(5): "Cpus_allowed_list: Same as previous, but in
/// 'list format'" (since Linux 2.6.26); "NSpid: Thread ID in each of the
/// PID namespaces of which [pid] is a member" (since 4.1).
fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        if let Some(list) = line.strip_prefix("Cpus_allowed_list:") {
            let list = list.trim();
            s.cpus_allowed = CpuList::parse(list).map(|_| list.to_owned());
        } else if let Some(pids) = line.strip_prefix("NSpid:") {
            s.ns_pids = pids.split_whitespace().map_while(|p| p.parse().ok()).take(64).collect();
        }
    }
    s
}

/// The signal that ended a task, from its waitpid(2)-style exit status:
/// the low seven bits, where neither 0 (a normal exit) nor 0x7f (stopped).
fn signal_of(exit_code: Option<u64>) -> Option<u32> {
    let sig = u32::try_from(exit_code? & 0x7f).ok()?;
    (sig != 0 && sig != 0x7f).then_some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A scripted `/proc` and `/sys`: a two-node machine (node 0: CPUs
    /// 0-3 and 8-11, node 1: 4-7 and 12-15), delay accounting on.
    struct Tree(tempfile::TempDir);

    /// One task's `stat` as Linux writes it, 52 fields.
    #[derive(Clone, Copy)]
    struct St<'a> {
        pid: u32,
        comm: &'a str,
        state: char,
        ppid: u32,
        utime: u64,
        start: u64,
        cpu: u32,
        blkio: u64,
        exit_code: u64,
    }

    impl St<'_> {
        fn line(&self) -> String {
            let mut f = vec!["0".to_owned(); 53];
            f[3] = self.state.to_string();
            f[4] = self.ppid.to_string();
            f[14] = self.utime.to_string();
            f[22] = self.start.to_string();
            f[39] = self.cpu.to_string();
            f[42] = self.blkio.to_string();
            f[52] = self.exit_code.to_string();
            format!("{} ({}) {}\n", self.pid, self.comm, f[3..].join(" "))
        }
    }

    fn st(pid: u32, comm: &str, ppid: u32) -> St<'_> {
        St { pid, comm, state: 'R', ppid, utime: 0, start: 1000 + u64::from(pid), cpu: 0, blkio: 0, exit_code: 0 }
    }

    const TRAINER: u32 = 100;

    impl Tree {
        fn new() -> Self {
            let t = Self(tempfile::tempdir().unwrap());
            t.write("sys/devices/system/node/node0/cpulist", "0-3,8-11\n");
            t.write("sys/devices/system/node/node1/cpulist", "4-7,12-15\n");
            t.write("proc/sys/kernel/task_delayacct", "1\n");
            t.write("proc/100/cgroup", "0::/job.slice\n");
            t.write("sys/fs/cgroup/job.slice/cpu.max", "200000 100000\n");
            t.write("sys/fs/cgroup/job.slice/cpu.stat", "nr_periods 10\nnr_throttled 1\nthrottled_usec 1000\n");
            t.task(&St { start: 50, cpu: 9, ..st(TRAINER, "python3", 1) }, "0-3", "100");
            t.children(TRAINER, &[]);
            t
        }

        fn write(&self, path: &str, text: &str) {
            let path = self.0.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        /// A process: its `stat`, and `status` with these allowed CPUs and
        /// `NSpid`.
        fn task(&self, s: &St<'_>, allowed: &str, ns_pid: &str) {
            self.write(&format!("proc/{}/stat", s.pid), &s.line());
            let status = format!("Name:\t{}\nCpus_allowed_list:\t{allowed}\nNSpid:\t{ns_pid}\n", s.comm);
            self.write(&format!("proc/{}/status", s.pid), &status);
        }

        fn thread(&self, pid: u32, s: &St<'_>) {
            self.write(&format!("proc/{pid}/task/{}/stat", s.pid), &s.line());
            self.write(&format!("proc/{pid}/task/{}/comm", s.pid), &format!("{}\n", s.comm));
            self.write(&format!("proc/{pid}/task/{}/status", s.pid), "Cpus_allowed_list:\t4-7\n");
        }

        fn children(&self, pid: u32, kids: &[u32]) {
            let list: String = kids.iter().map(|k| format!("{k} ")).collect();
            self.write(&format!("proc/{pid}/task/{pid}/children"), &list);
        }

        fn gone(&self, pid: u32) {
            std::fs::remove_dir_all(self.0.path().join(format!("proc/{pid}"))).unwrap();
        }

        fn inputs(&self) -> Inputs {
            let mut i = Inputs::new(&self.0.path().join("proc"), &self.0.path().join("sys"), Some(16));
            i.ticks_per_second = 100;
            i
        }
    }

    /// One tick of the trainer.
    fn tick(i: &mut Inputs, now: Instant) -> HostInput {
        let input = i.read(TRAINER, 50, now);
        i.end_tick(now);
        input
    }

    fn worker(input: &HostInput, pid: u32) -> &DataWorker {
        input.workers.iter().find(|w| w.pid == pid).unwrap_or_else(|| panic!("no worker {pid}: {input:#?}"))
    }

    #[test]
    fn named_workers_and_the_pin_thread_are_joined_with_cpu_state_and_node() {
        let t = Tree::new();
        t.children(TRAINER, &[201, 202, 300]);
        t.task(&St { cpu: 5, ..st(201, WORKER_NAME, TRAINER) }, "4-7", "201");
        t.task(&St { state: 'D', cpu: 13, ..st(202, WORKER_NAME, TRAINER) }, "4-7", "202");
        t.task(&st(300, "python3", TRAINER), "0-15", "300");
        t.thread(TRAINER, &St { state: 'S', cpu: 6, ..st(105, PIN_NAME, TRAINER) });
        t.thread(TRAINER, &st(106, "python3", TRAINER));
        let mut i = t.inputs();
        let t0 = Instant::now();
        let first = tick(&mut i, t0);
        assert_eq!(first.workers.iter().map(|w| w.pid).collect::<Vec<_>>(), [201, 202], "300 is no worker");
        let w = worker(&first, 202);
        assert_eq!((w.found_by, w.alive, w.ns_pid), (WorkerSource::Name, true, None));
        assert_eq!(w.figures.state, Some(TaskState::DiskSleep));
        assert_eq!((w.figures.cpu_percent, w.figures.blkio_wait_percent), (None, None), "no rate from one reading");
        let placed = w.figures.placement.as_ref().unwrap();
        assert_eq!(placed.cpus_allowed.as_deref(), Some("4-7"));
        assert_eq!(
            (placed.nodes_allowed.as_deref(), placed.last_cpu, placed.last_node),
            (Some(&[1][..]), Some(13), Some(1))
        );
        let own = first.placement.as_ref().unwrap();
        assert_eq!((own.nodes_allowed.as_deref(), own.last_cpu, own.last_node), (Some(&[0][..]), Some(9), Some(0)));
        assert_eq!(first.pin_threads.iter().map(|p| p.tid).collect::<Vec<_>>(), [105]);
        assert_eq!(first.pin_threads[0].figures.state, Some(TaskState::Sleeping));
        assert_eq!(first.cgroup_cpu.as_ref().map(|c| c.quota_cpus), Some(Some(2.0)));
        assert_eq!(i.numa_nodes(t0).map(|n| n.len()), Some(2));

        // A second later: 201 used 0.8 s of CPU, 202 waited 0.3 s on disk.
        t.task(&St { utime: 80, cpu: 6, ..st(201, WORKER_NAME, TRAINER) }, "4-7", "201");
        t.task(&St { utime: 10, blkio: 30, state: 'D', ..st(202, WORKER_NAME, TRAINER) }, "4-7", "202");
        t.thread(TRAINER, &St { utime: 5, ..st(105, PIN_NAME, TRAINER) });
        let second = tick(&mut i, t0 + Duration::from_secs(1));
        assert_eq!(worker(&second, 201).figures.cpu_percent, Some(80.0));
        assert_eq!(worker(&second, 201).figures.blkio_wait_percent, Some(0.0));
        assert_eq!(worker(&second, 202).figures.blkio_wait_percent, Some(30.0));
        assert_eq!(second.pin_threads[0].figures.cpu_percent, Some(5.0));
        assert_eq!(second.workers_omitted, 0);
    }

    #[test]
    fn the_host_source_s_first_read_of_status_is_not_read_again() {
        let t = Tree::new();
        let mut i = t.inputs();
        let t0 = Instant::now();
        i.seed(TRAINER, 50, Seed::of_status(b"Name:\tpython3\nCpus_allowed_list:\t4-7\nNSpid:\t100\n"), t0);
        // What `status` says now is not what was read.
        t.task(&St { start: 50, cpu: 9, ..st(TRAINER, "python3", 1) }, "0-3", "100");
        let first = tick(&mut i, t0);
        assert_eq!(first.placement.as_ref().unwrap().cpus_allowed.as_deref(), Some("4-7"));
        assert_eq!(first.placement.as_ref().unwrap().nodes_allowed.as_deref(), Some(&[1][..]));
        let rescanned = tick(&mut i, t0 + SCAN);
        assert_eq!(rescanned.placement.unwrap().cpus_allowed.as_deref(), Some("0-3"), "read at the next scan");
    }

    #[test]
    fn without_delay_accounting_the_io_wait_is_unknown_not_zero() {
        let t = Tree::new();
        t.write("proc/sys/kernel/task_delayacct", "0\n");
        t.children(TRAINER, &[201]);
        t.task(&st(201, WORKER_NAME, TRAINER), "0-3", "201");
        let mut i = t.inputs();
        let t0 = Instant::now();
        tick(&mut i, t0);
        let second = tick(&mut i, t0 + Duration::from_secs(1));
        assert_eq!(worker(&second, 201).figures.cpu_percent, Some(0.0));
        assert_eq!(worker(&second, 201).figures.blkio_wait_percent, None);
    }

    #[test]
    fn a_worker_that_dies_stays_listed_dead_with_its_signal_for_a_while() {
        let t = Tree::new();
        t.children(TRAINER, &[201, 202]);
        t.task(&st(201, WORKER_NAME, TRAINER), "0-3", "201");
        t.task(&st(202, WORKER_NAME, TRAINER), "0-3", "202");
        let mut i = t.inputs();
        let t0 = Instant::now();
        assert!(tick(&mut i, t0).workers.iter().all(|w| w.alive));
        // 201 killed by SIGBUS (a full /dev/shm), not yet reaped; 202 gone.
        t.task(&St { state: 'Z', exit_code: 7, ..st(201, WORKER_NAME, TRAINER) }, "0-3", "201");
        t.gone(202);
        t.children(TRAINER, &[201]);
        let died = tick(&mut i, t0 + Duration::from_secs(1));
        let (w201, w202) = (worker(&died, 201), worker(&died, 202));
        assert_eq!((w201.alive, w201.exit_signal, w201.figures.state), (false, Some(7), Some(TaskState::Zombie)));
        assert_eq!((w202.alive, w202.figures.state, w202.figures.cpu_percent), (false, None, None));
        assert!(w202.figures.placement.is_none());
        // Reaped: the signal seen stays with it.
        t.gone(201);
        t.children(TRAINER, &[]);
        let reaped = tick(&mut i, t0 + Duration::from_secs(2));
        assert_eq!(worker(&reaped, 201).exit_signal, Some(7));
        let later = tick(&mut i, t0 + Duration::from_secs(2) + GONE_KEPT);
        assert!(later.workers.is_empty(), "{later:#?}");
    }

    #[test]
    fn a_process_without_workers_is_looked_at_again_only_every_scan() {
        let t = Tree::new();
        let mut i = t.inputs();
        let t0 = Instant::now();
        assert!(tick(&mut i, t0).workers.is_empty());
        t.children(TRAINER, &[201]);
        t.task(&st(201, WORKER_NAME, TRAINER), "0-3", "201");
        assert!(tick(&mut i, t0 + Duration::from_secs(1)).workers.is_empty(), "not read between scans");
        assert_eq!(tick(&mut i, t0 + SCAN).workers.len(), 1, "found at the next scan");
        // A trainer's children are read every tick: the next epoch's
        // workers are seen at once.
        t.children(TRAINER, &[201, 203]);
        t.task(&st(203, WORKER_NAME, TRAINER), "0-3", "203");
        assert_eq!(tick(&mut i, t0 + SCAN + Duration::from_secs(1)).workers.len(), 2);
    }

    #[test]
    fn a_spawned_child_that_names_itself_late_is_found_while_young() {
        let t = Tree::new();
        t.children(TRAINER, &[201, 202]);
        t.task(&st(201, WORKER_NAME, TRAINER), "0-3", "201");
        t.task(&st(202, "python3", TRAINER), "0-3", "202");
        let mut i = t.inputs();
        let t0 = Instant::now();
        assert_eq!(tick(&mut i, t0).workers.len(), 1);
        // Torch imported, it names itself.
        t.task(&st(202, WORKER_NAME, TRAINER), "0-3", "202");
        assert_eq!(tick(&mut i, t0 + Duration::from_secs(1)).workers.len(), 2);
    }

    #[test]
    fn a_forkserver_s_workers_are_the_trainer_s() {
        let t = Tree::new();
        t.children(TRAINER, &[600]);
        t.task(&st(600, "python3", TRAINER), "0-3", "600");
        t.children(600, &[601, 602]);
        t.task(&st(601, WORKER_NAME, 600), "0-3", "601");
        t.task(&st(602, WORKER_NAME, 600), "0-3", "602");
        let mut i = t.inputs();
        let t0 = Instant::now();
        let input = tick(&mut i, t0);
        assert_eq!(input.workers.iter().map(|w| w.pid).collect::<Vec<_>>(), [601, 602]);
        // The forkserver's next workers, between scans.
        t.children(600, &[601, 602, 603]);
        t.task(&st(603, WORKER_NAME, 600), "0-3", "603");
        assert_eq!(tick(&mut i, t0 + Duration::from_secs(1)).workers.len(), 3);
    }

    #[test]
    fn published_pids_are_checked_to_be_the_trainer_s_descendants() {
        let t = Tree::new();
        // PyTorch 2.4: workers without a name; 400 is the trainer's, 401
        // a forkserver's, 402 someone else's, 403 older than the trainer
        // (the PID came back before the trainer started).
        t.children(TRAINER, &[400, 600]);
        t.task(&st(400, "python3", TRAINER), "0-3", "400");
        t.task(&st(600, "python3", TRAINER), "0-3", "600");
        t.task(&st(401, "python3", 600), "0-3", "401");
        t.task(&st(402, "python3", 1), "0-3", "402");
        t.task(&St { start: 10, ..st(403, "python3", TRAINER) }, "0-3", "403");
        let mut i = t.inputs();
        i.publish(&[(TRAINER, vec![400, 401, 402, 403, 404])]);
        let t0 = Instant::now();
        let input = tick(&mut i, t0);
        assert_eq!(
            input.workers.iter().map(|w| (w.pid, w.found_by)).collect::<Vec<_>>(),
            [(400, WorkerSource::Probe), (401, WorkerSource::Probe)]
        );
        assert_eq!(worker(&input, 400).figures.placement.as_ref().unwrap().cpus_allowed.as_deref(), Some("0-3"));
        // Named too, once it has a name.
        t.task(&st(400, WORKER_NAME, TRAINER), "0-3", "400");
        i.publish(&[(TRAINER, vec![400])]);
        let both = tick(&mut i, t0 + Duration::from_secs(1));
        assert_eq!(worker(&both, 400).found_by, WorkerSource::NameAndProbe);
    }

    #[test]
    fn in_a_container_published_pids_are_mapped_through_nspid() {
        let t = Tree::new();
        // The trainer is PID 7 in its container, its worker 12 there.
        t.task(&St { start: 50, ..st(TRAINER, "python3", 1) }, "0-3", "100\t7");
        t.children(TRAINER, &[500, 501]);
        t.task(&st(500, "python3", TRAINER), "0-3", "500\t12");
        t.task(&st(501, WORKER_NAME, TRAINER), "0-3", "501\t13");
        let mut i = t.inputs();
        i.publish(&[(TRAINER, vec![12, 13, 99])]);
        let input = tick(&mut i, Instant::now());
        let found: Vec<_> = input.workers.iter().map(|w| (w.pid, w.ns_pid, w.found_by)).collect();
        assert_eq!(found, [(500, Some(12), WorkerSource::Probe), (501, Some(13), WorkerSource::NameAndProbe)]);
    }

    #[test]
    fn workers_past_the_bound_are_counted_not_listed() {
        let t = Tree::new();
        let kids: Vec<u32> = (1000..1000 + MAX_WORKERS as u32 + 6).collect();
        t.children(TRAINER, &kids);
        for &k in &kids {
            t.task(&st(k, WORKER_NAME, TRAINER), "0-3", &k.to_string());
        }
        let mut i = t.inputs();
        let input = tick(&mut i, Instant::now());
        assert_eq!((input.workers.len(), input.workers_omitted), (MAX_WORKERS, 6));
        assert_eq!(input.workers.last().map(|w| w.pid), Some(1000 + MAX_WORKERS as u32 - 1), "the lowest PIDs");
    }

    #[test]
    fn a_new_process_behind_the_pid_or_one_not_read_starts_afresh() {
        let t = Tree::new();
        t.children(TRAINER, &[201]);
        t.task(&st(201, WORKER_NAME, TRAINER), "0-3", "201");
        let mut i = t.inputs();
        let t0 = Instant::now();
        tick(&mut i, t0);
        // Another process with the trainer's PID: what was known goes.
        let other = i.read(TRAINER, 51, t0 + Duration::from_secs(1));
        assert_eq!(worker(&other, 201).figures.cpu_percent, None, "no rate carried over");
        i.end_tick(t0 + Duration::from_secs(1));
        // Not read for a tick: no rate across the gap.
        i.end_tick(t0 + Duration::from_secs(2));
        assert!(i.trainers.is_empty());
    }

    #[test]
    fn a_real_child_named_pt_data_worker_is_found_with_its_cpu() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        // A shell stands for the trainer: the worker is its main thread's
        // child (this test's own children are its thread's). The worker
        // names itself as PyTorch 2.5's do, then burns CPU.
        let worker = "import ctypes\nctypes.CDLL(None).prctl(15, b'pt_data_worker', 0, 0, 0)\n\
                      print('named', flush=True)\nwhile True: pass\n";
        let Ok(mut trainer) = Command::new("sh")
            .args(["-c", "command -v python3 >/dev/null || exit 1; python3 -c \"$0\" & echo \"pid $!\"; wait", worker])
            .stdout(Stdio::piped())
            .spawn()
        else {
            return;
        };
        let _end = procstat::Ender(i32::try_from(trainer.id()).unwrap());
        let mut out = std::io::BufReader::new(trainer.stdout.take().unwrap());
        let (mut named, mut pid) = (false, None);
        while !named || pid.is_none() {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                return; // No Python here; the end-to-end test needs one.
            }
            named |= line.trim() == "named";
            pid = pid.or_else(|| line.trim().strip_prefix("pid ").and_then(|p| p.parse::<u32>().ok()));
        }
        let pid = pid.unwrap();
        let _worker = procstat::Ender(i32::try_from(pid).unwrap());
        let start = procstat::start_ticks(Path::new("/proc"), trainer.id()).unwrap();
        let mut i = Inputs::new(Path::new("/proc"), Path::new("/sys"), Some(64));
        let t0 = Instant::now();
        let first = i.read(trainer.id(), start, t0);
        i.end_tick(t0);
        let w = first.workers.iter().find(|w| w.pid == pid).expect("the child is a worker");
        assert!(w.alive && w.figures.state.is_some(), "{w:?}");
        std::thread::sleep(Duration::from_millis(300));
        let second = i.read(trainer.id(), start, Instant::now());
        let w = second.workers.iter().find(|w| w.pid == pid).unwrap();
        assert!(w.figures.cpu_percent.is_some_and(|c| c > 10.0), "{w:?}");
        assert!(w.figures.placement.as_ref().is_some_and(|p| p.cpus_allowed.is_some() && p.last_cpu.is_some()));
        let _ = trainer.kill();
        let _ = trainer.wait();
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_not_without_panicking(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = procstat::parse_task(&raw);
            prop_assert!(parse_children(&raw).len() <= MAX_CHILDREN);
            let s = parse_status(&String::from_utf8_lossy(&raw));
            if let Some(list) = s.cpus_allowed {
                prop_assert!(CpuList::parse(&list).is_some());
            }
            prop_assert!(s.ns_pids.len() <= 64);
        }

        #[test]
        fn written_stat_lines_parse_back(
            comm in "[ -~]{0,15}", state in "[RSDZTtXI]", ppid in any::<u32>(), utime in any::<u32>(),
            start in any::<u64>(), cpu in any::<u32>(), blkio in any::<u32>(), code in any::<u16>(),
        ) {
            let s = St {
                pid: 1, comm: &comm, state: state.chars().next().unwrap(), ppid, utime: u64::from(utime),
                start, cpu, blkio: u64::from(blkio), exit_code: u64::from(code),
            };
            let parsed = procstat::parse_task(s.line().as_bytes()).unwrap();
            prop_assert_eq!(parsed, TaskStat {
                state: state.as_bytes()[0], parent: ppid, cpu_ticks: u64::from(utime), start_ticks: start,
                last_cpu: Some(cpu), blkio_ticks: Some(u64::from(blkio)), exit_code: Some(u64::from(code)),
            });
            prop_assert_eq!(procstat::name_in(s.line().as_bytes()), Some(comm.clone()));
        }

        #[test]
        fn signals_are_only_read_from_a_killed_task_s_status(code in any::<u64>()) {
            match signal_of(Some(code)) {
                Some(sig) => prop_assert!((1..0x7f).contains(&sig)),
                None => prop_assert!(code & 0x7f == 0 || code & 0x7f == 0x7f),
            }
        }
    }

    #[test]
    fn status_lines_parse_as_linux_writes_them() {
        let s = parse_status("Name:\tpython3\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\nNSpid:\t48213\t57\n");
        assert_eq!(s, Status { cpus_allowed: Some("0-7".into()), ns_pids: vec![48213, 57] });
        assert_eq!(parse_status("Cpus_allowed_list:\t3-1\n").cpus_allowed, None, "not a list the kernel writes");
        assert_eq!(parse_children(b"12 13 x 14 \n"), [12, 13, 14]);
        assert_eq!(
            (signal_of(Some(7)), signal_of(Some(0x87)), signal_of(Some(256)), signal_of(None)),
            (Some(7), Some(7), None, None)
        );
    }
}
