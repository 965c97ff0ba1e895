//! The machine and the GPU processes, through sysinfo.

use std::collections::{HashMap, HashSet};

use sysinfo::{Pid, Process as SysProcess, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind, Users};

use super::{HostProcess, HostSample, HostSource, sanitize_command};
use crate::model::{Host, SourceStatus, Timestamp};

pub struct SysinfoHost {
    system: System,
    users: Users,
    hostname: Option<String>,
    cpu_count: Option<u32>,
    /// CPU usage is a difference between two readings: the first sample of
    /// the machine, and of each process, has none to offer.
    cpu_primed: bool,
    seen: HashSet<u32>,
}

impl SysinfoHost {
    pub fn new() -> Result<Self, sysinfo::Error> {
        let system = System::new()?;
        let users = Users::new()?;
        Ok(Self {
            cpu_count: std::thread::available_parallelism().ok().and_then(|n| u32::try_from(n.get()).ok()),
            system,
            users,
            hostname: System::host_name().ok(),
            cpu_primed: false,
            seen: HashSet::new(),
        })
    }

    fn user_name_of(&mut self, p: &ProcessView) -> Option<String> {
        let uid = p.uid.as_ref()?;
        if self.users.get_user_by_id(uid).is_none() {
            // Users appear rarely; re-reading the user database only on a
            // miss keeps it off the per-tick path.
            self.users.refresh();
        }
        self.users.get_user_by_id(uid).map(|u| u.name().to_string()).or_else(|| Some(uid.to_string()))
    }
}

impl HostSource for SysinfoHost {
    fn sample(&mut self, pids: &[u32]) -> HostSample {
        self.system.refresh_memory();
        self.system.refresh_cpu_usage();
        let cpu_percent = self.cpu_primed.then(|| f64::from(self.system.global_cpu_usage()));
        self.cpu_primed = true;

        let host = Host {
            hostname: self.hostname.clone(),
            cpu_percent,
            cpu_count: self.cpu_count,
            memory_total: Some(self.system.total_memory()),
            memory_used: Some(self.system.used_memory()),
            memory_available: Some(self.system.available_memory()),
            swap_total: Some(self.system.total_swap()),
            swap_used: Some(self.system.used_swap()),
        };

        let sys_pids: Vec<Pid> = pids.iter().map(|&p| Pid::from_u32(p)).collect();
        // Without `without_tasks`, sysinfo walks /proc/PID/task: every
        // thread of every training process (dozens each), every tick.
        let kind = ProcessRefreshKind::nothing()
            .without_tasks()
            .with_cpu()
            .with_memory()
            .with_cmd(UpdateKind::OnlyIfNotSet)
            .with_user(UpdateKind::OnlyIfNotSet);
        self.system.refresh_processes_specifics(ProcessesToUpdate::Some(&sys_pids), true, kind);

        let mut processes = HashMap::new();
        for &pid in pids {
            let Some(p) = self.system.process(Pid::from_u32(pid)) else { continue };
            let p = ProcessView::of(p);
            let first_sight = self.seen.insert(pid);
            let user = self.user_name_of(&p);
            processes.insert(pid, host_process(&p, user, !first_sight));
        }
        // Forget PIDs that are gone so a recycled PID starts fresh.
        self.seen.retain(|pid| processes.contains_key(pid));

        HostSample { host, processes, status: SourceStatus::ok() }
    }
}

/// The few fields of a sysinfo process gpuscope keeps, copied out so the
/// user lookup can borrow `self` mutably.
struct ProcessView {
    name: String,
    cmd: Vec<String>,
    uid: Option<sysinfo::Uid>,
    start_time: u64,
    parent: Option<u32>,
    cpu: f32,
    memory: u64,
}

impl ProcessView {
    fn of(p: &SysProcess) -> Self {
        Self {
            name: p.name().to_string_lossy().into_owned(),
            cmd: p.cmd().iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            uid: p.user_id().cloned(),
            start_time: p.start_time(),
            parent: p.parent().map(|p| p.as_u32()),
            cpu: p.cpu_usage(),
            memory: p.memory(),
        }
    }
}

fn host_process(p: &ProcessView, user: Option<String>, cpu_valid: bool) -> HostProcess {
    let command = (!p.cmd.is_empty()).then(|| sanitize_command(&p.cmd.join(" ")));
    HostProcess {
        name: Some(sanitize_command(&p.name)).filter(|n| !n.is_empty()),
        user,
        // Kernel threads and zombies have an empty command line.
        command: command.filter(|c| !c.is_empty()),
        start_time: (p.start_time > 0).then(|| Timestamp::from_unix_secs(p.start_time)),
        parent_pid: p.parent,
        cpu_percent: cpu_valid.then_some(f64::from(p.cpu)),
        memory: Some(p.memory),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_this_process() {
        let me = std::process::id();
        let mut host = SysinfoHost::new().unwrap();
        let first = host.sample(&[me, u32::MAX - 1]);
        assert!(first.host.memory_total.unwrap() > 0);
        assert_eq!(first.host.cpu_percent, None, "no CPU figure before a second reading");
        let p = &first.processes[&me];
        assert!(p.command.as_deref().unwrap().contains("gpuscope"), "{p:?}");
        assert!(p.memory.unwrap() > 0);
        assert_eq!(p.cpu_percent, None);
        assert!(!first.processes.contains_key(&(u32::MAX - 1)));

        let second = host.sample(&[me]);
        assert!(second.host.cpu_percent.is_some());
        assert!(second.processes[&me].cpu_percent.is_some());
        assert!(second.processes[&me].user.is_some());
    }
}
