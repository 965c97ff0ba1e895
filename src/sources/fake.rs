//! Scripted sources for tests: each `sample` returns the next scripted
//! value, then repeats the last one.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::{Figures, GpuSample, GpuSource, HostSample, HostSource, OnScreen};

pub struct ScriptedGpu {
    script: VecDeque<GpuSample>,
    last: GpuSample,
    /// What `process_names` answers, a call each; and which PIDs it was
    /// asked, for tests that check it is asked only where needed.
    driver_names: HashMap<u32, String>,
    pub asked_names: Arc<Mutex<Vec<Vec<u32>>>>,
    /// What `show` was told, call by call.
    pub shown: Arc<Mutex<Vec<OnScreen>>>,
}

impl ScriptedGpu {
    pub fn new(script: impl IntoIterator<Item = GpuSample>) -> Self {
        Self {
            script: script.into_iter().collect(),
            last: GpuSample::default(),
            driver_names: HashMap::new(),
            asked_names: Arc::default(),
            shown: Arc::default(),
        }
    }

    pub fn with_driver_names(mut self, names: impl IntoIterator<Item = (u32, String)>) -> Self {
        self.driver_names = names.into_iter().collect();
        self
    }
}

impl GpuSource for ScriptedGpu {
    fn sample(&mut self) -> GpuSample {
        if let Some(next) = self.script.pop_front() {
            self.last = next;
        }
        self.last.clone()
    }

    fn process_names(&mut self, pids: &[u32]) -> (Vec<Option<String>>, u64) {
        self.asked_names.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(pids.to_vec());
        let calls = u64::try_from(pids.len()).unwrap_or(u64::MAX);
        (pids.iter().map(|pid| self.driver_names.get(pid).cloned()).collect(), calls)
    }

    fn show(&mut self, shown: OnScreen) {
        self.shown.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(shown);
    }
}

/// What one `publish_workers` call gave: each trainer's workers.
pub type Published = Vec<(u32, Vec<u32>)>;

/// Answers only for the PIDs asked, and records them and whose figures
/// were wanted, so tests can check that the host is asked only for GPU
/// processes, and for the figures the output shows.
pub struct ScriptedHost {
    script: VecDeque<HostSample>,
    last: HostSample,
    pub asked: Arc<Mutex<Vec<Vec<u32>>>>,
    pub figures: Arc<Mutex<Vec<Figures>>>,
    /// What `publish_workers` was given, call by call.
    pub published: Arc<Mutex<Vec<Published>>>,
    /// The GPUs' NUMA nodes by bus id, as `gpu_numa_nodes` answers.
    gpu_nodes: HashMap<String, u32>,
}

impl ScriptedHost {
    pub fn new(script: impl IntoIterator<Item = HostSample>) -> Self {
        let script = script.into_iter().collect();
        Self {
            script,
            last: HostSample::default(),
            asked: Arc::default(),
            figures: Arc::default(),
            published: Arc::default(),
            gpu_nodes: HashMap::new(),
        }
    }

    pub fn with_gpu_numa_nodes(mut self, nodes: impl IntoIterator<Item = (String, u32)>) -> Self {
        self.gpu_nodes = nodes.into_iter().collect();
        self
    }
}

impl HostSource for ScriptedHost {
    fn sample(&mut self, pids: &[u32], figures: &Figures) -> HostSample {
        // A test that panicked while holding the lock has failed already.
        if let (Ok(mut asked), Ok(mut wanted)) = (self.asked.lock(), self.figures.lock()) {
            asked.push(pids.to_vec());
            wanted.push(figures.clone());
        }
        if let Some(next) = self.script.pop_front() {
            self.last = next;
        }
        // As the real host: the processes asked about, and no others; the
        // figures of those wanted alone.
        let mut sample = self.last.clone();
        sample.processes.retain(|pid| pids.contains(&pid));
        for (_, p) in sample.processes.iter_mut().filter(|(pid, _)| !figures.wants(*pid)) {
            (p.cpu_percent, p.memory, p.input) = (None, None, None);
        }
        sample
    }

    fn pid_namespace(&self) -> Option<crate::model::PidNamespace> {
        self.script.front().unwrap_or(&self.last).pid_namespace
    }

    fn publish_workers(&mut self, published: &[(u32, Vec<u32>)]) {
        if let Ok(mut all) = self.published.lock() {
            all.push(published.to_vec());
        }
    }

    fn gpu_numa_nodes(&mut self, bus_ids: &[Option<&str>]) -> Vec<Option<u32>> {
        bus_ids.iter().map(|id| id.and_then(|id| self.gpu_nodes.get(id).copied())).collect()
    }
}
