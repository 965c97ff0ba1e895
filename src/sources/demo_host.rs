//! Host figures for the built-in demo's made-up processes: their PIDs are
//! on no real host, so without this every host column of `--demo` would
//! read `n/a`. The demo's PIDs are never looked up in `/proc`; any other
//! PID keeps its real figures, and the machine's own figures (CPU, RAM,
//! swap) are always the real ones.

use std::time::{Duration, SystemTime};

use super::{Figures, HostProcess, HostSample, HostSource};
use crate::model::{
    DataWorker, HostInput, PidNamespace, PinThread, Placement, TaskFigures, TaskState, Timestamp, WorkerSource,
};

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
            input: (name == "python3").then(|| Box::new(input_of(pid))),
        })
    }
}

/// A rank's DataLoader as the host would see it: the workers its probe
/// names (the same PIDs, as many), named by PyTorch 2.5+, busy decoding,
/// and a pin-memory thread, all on node 0.
fn input_of(pid: u32) -> HostInput {
    let placed = |cpu: u32| Placement {
        cpus_allowed: Some("0-31".into()),
        nodes_allowed: Some(vec![0]),
        last_cpu: Some(cpu),
        last_node: Some(0),
    };
    let figures = |state, cpu_percent, cpu| TaskFigures {
        state: Some(state),
        cpu_percent: Some(cpu_percent),
        blkio_wait_percent: None,
        placement: Some(placed(cpu)),
    };
    let states = [TaskState::Running, TaskState::Running, TaskState::Sleeping, TaskState::Running];
    let workers = crate::probe::files::demo::worker_pids(pid)
        .unwrap_or_default()
        .into_iter()
        .zip(0u32..)
        .map(|(worker, i)| DataWorker {
            pid: worker,
            ns_pid: None,
            found_by: WorkerSource::Name,
            alive: true,
            figures: figures(states[i as usize % states.len()], 71.0 + f64::from(i % 4) * 6.5, 2 + i),
            exit_signal: None,
        })
        .collect();
    HostInput {
        workers,
        workers_omitted: 0,
        pin_threads: vec![PinThread { tid: pid + 7, figures: figures(TaskState::Sleeping, 4.2, 1) }],
        placement: Some(placed(0)),
        cgroup_cpu: None,
    }
}

impl<H: HostSource> HostSource for DemoHost<H> {
    fn sample(&mut self, pids: &[u32], figures: &Figures) -> HostSample {
        // The demo's PIDs are never looked up: with `pid_max` at 4194304
        // (systemd's default) an unrelated process may hold one, and its
        // user and command must not appear as a demo job's.
        let real: Vec<u32> = pids.iter().copied().filter(|&pid| self.made_up(pid).is_none()).collect();
        let mut sample = self.inner.sample(&real, figures);
        for &pid in pids {
            if let Some(p) = self.made_up(pid) {
                sample.processes.insert(pid, p);
            }
        }
        sample
    }

    fn pid_namespace(&self) -> Option<PidNamespace> {
        self.inner.pid_namespace()
    }

    fn publish_workers(&mut self, published: &[(u32, Vec<u32>)]) {
        self.inner.publish_workers(published);
    }

    fn gpu_numa_nodes(&mut self, bus_ids: &[Option<&str>]) -> Vec<Option<u32>> {
        self.inner.gpu_numa_nodes(bus_ids)
    }
}

/// The environment `e` shows for a demo process: made up like the rest,
/// so the view can be seen without a GPU; `None` for a PID not the demo's.
pub fn environment(pid: u32) -> Option<Vec<(String, String)>> {
    let (_, _, name, ..) = PROCESSES.iter().find(|p| p.0 == pid)?;
    let vars: &[(&str, &str)] = if *name == "python3" {
        let rank = if pid == PROCESSES[0].0 { "0" } else { "1" };
        &[
            ("LOCAL_RANK", rank),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("NCCL_DEBUG", "WARN"),
            ("OMP_NUM_THREADS", "8"),
            ("RANK", rank),
            ("TORCHELASTIC_RUN_ID", "none"),
            ("WORLD_SIZE", "2"),
        ]
    } else {
        &[("CUDA_VISIBLE_DEVICES", "2"), ("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")]
    };
    Some(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::fake::ScriptedHost;

    #[test]
    fn the_demos_pids_get_made_up_figures_even_where_the_host_has_that_pid() {
        let mut real = HostSample::default();
        real.processes.insert(4_123_402, HostProcess { user: Some("real".into()), ..HostProcess::default() });
        let mut host = DemoHost::new(ScriptedHost::new([real]));
        let sample = host.sample(&[4_123_401, 4_123_402, 4_123_510, 77], &Figures::All);
        let rank0 = &sample.processes[&4_123_401];
        assert_eq!((rank0.user.as_deref(), rank0.parent_pid), (Some("alice"), Some(LAUNCHER)));
        assert_eq!(rank0.parent_name.as_deref(), Some("torchrun"));
        let input = rank0.input.as_deref().unwrap();
        // The workers the rank's probe names: the same PIDs, as many.
        let pids: Vec<u32> = input.workers.iter().map(|w| w.pid).collect();
        assert_eq!(Some(pids), crate::probe::files::demo::worker_pids(4_123_401));
        assert_eq!(input.workers.len(), crate::probe::files::demo::WORKERS as usize);
        let rank1 = sample.processes[&4_123_402].input.as_deref().unwrap();
        assert!(rank1.workers.iter().all(|w| !input.workers.iter().any(|v| v.pid == w.pid)), "each rank its own");
        assert!(input.workers.iter().all(|w| w.alive && w.figures.cpu_percent.is_some()));
        assert!(sample.processes[&4_123_510].input.is_none(), "vLLM serves without a DataLoader");
        assert!(rank0.cpu_percent.is_some() && rank0.memory.is_some() && rank0.start_time.is_some());
        assert_eq!(sample.processes[&4_123_510].name.as_deref(), Some("vllm"));
        assert!(!sample.processes.contains_key(&77), "only the demo's own PIDs are made up");
        assert_eq!(sample.processes[&4_123_402].user.as_deref(), Some("alice"), "an unrelated process, not the demo's");
        assert_eq!(environment(4_123_510).unwrap()[0], ("CUDA_VISIBLE_DEVICES".into(), "2".into()));
        assert_eq!(environment(77), None);
    }
}
