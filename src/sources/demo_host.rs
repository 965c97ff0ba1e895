//! Host figures for the built-in demo's made-up processes: their PIDs are
//! on no real host, so without this every host column of `--demo` would
//! read `n/a`. Any PID the real host can see keeps its real figures; the
//! machine's own figures (CPU, RAM, swap) are always the real ones.

use std::time::{Duration, SystemTime};

use super::{Figures, HostProcess, HostSample, HostSource};
use crate::model::{PidNamespace, Timestamp};

/// (PID, user, name, command, CPU %, resident GiB, hours running) of the
/// demo scenario's processes (`crates/nvml-sim/scenarios/demo.toml`).
const PROCESSES: [(u32, &str, &str, &str, f64, f64, u64); 3] = [
    (4_123_401, "alice", "python3", "python3 train.py --epochs 90 --batch-size 64 --rank 0", 101.3, 12.3, 3),
    (4_123_402, "alice", "python3", "python3 train.py --epochs 90 --batch-size 64 --rank 1", 98.7, 12.1, 3),
    (4_123_510, "svc-infer", "vllm", "vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000", 35.2, 6.8, 24),
];
/// torchrun, the ranks' parent.
const LAUNCHER: u32 = 4_123_399;

pub struct DemoHost<H> {
    inner: H,
    started: SystemTime,
}

impl<H: HostSource> DemoHost<H> {
    pub fn new(inner: H) -> Self {
        Self { inner, started: SystemTime::now() }
    }

    fn made_up(&self, pid: u32) -> Option<HostProcess> {
        let &(_, user, name, command, cpu, gib, hours) = PROCESSES.iter().find(|p| p.0 == pid)?;
        let started = self.started.checked_sub(Duration::from_secs(hours * 3600)).unwrap_or(self.started);
        Some(HostProcess {
            name: Some(name.into()),
            user: Some(user.into()),
            command: Some(command.into()),
            start_time: Some(Timestamp::from_system(started)),
            parent_pid: Some(if name == "python3" { LAUNCHER } else { 1 }),
            parent_name: Some(if name == "python3" { "torchrun" } else { "systemd" }.into()),
            cpu_percent: Some(cpu),
            memory: Some((gib * f64::from(1u32 << 30)) as u64),
            workload: None,
        })
    }
}

impl<H: HostSource> HostSource for DemoHost<H> {
    fn sample(&mut self, pids: &[u32], figures: &Figures) -> HostSample {
        let mut sample = self.inner.sample(pids, figures);
        for &pid in pids {
            if !sample.processes.contains_key(&pid)
                && let Some(p) = self.made_up(pid)
            {
                sample.processes.insert(pid, p);
            }
        }
        sample
    }

    fn pid_namespace(&self) -> Option<PidNamespace> {
        self.inner.pid_namespace()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::fake::ScriptedHost;

    #[test]
    fn the_demos_pids_get_host_figures_and_real_ones_stay_real() {
        let mut real = HostSample::default();
        real.processes.insert(4_123_402, HostProcess { user: Some("real".into()), ..HostProcess::default() });
        let mut host = DemoHost::new(ScriptedHost::new([real]));
        let sample = host.sample(&[4_123_401, 4_123_402, 4_123_510, 77], &Figures::All);
        let rank0 = &sample.processes[&4_123_401];
        assert_eq!((rank0.user.as_deref(), rank0.parent_pid), (Some("alice"), Some(LAUNCHER)));
        assert_eq!(rank0.parent_name.as_deref(), Some("torchrun"));
        assert!(rank0.cpu_percent.is_some() && rank0.memory.is_some() && rank0.start_time.is_some());
        assert_eq!(sample.processes[&4_123_510].name.as_deref(), Some("vllm"));
        assert!(!sample.processes.contains_key(&77), "only the demo's own PIDs are made up");
        assert_eq!(sample.processes[&4_123_402].user.as_deref(), Some("real"), "a PID the host sees stays real");
    }
}
