//! Allocator figures published from inside training processes by the
//! Python probe (`assets/gpuscope_probe.py`): one JSON file per process in a
//! private per-user directory. See `dir.rs` for where and how it is trusted,
//! `file.rs` for the format.

mod container;
pub mod demo;
mod dir;
pub mod fake;
mod file;
mod input;
mod reader;

use std::sync::Arc;
use std::time::Duration;

pub use demo::DemoProbes;
pub use dir::{ProbeDir, default_dir};
pub use file::{PROBE_FORMAT, ProbeDevice, ProbeFile};
pub use input::{bound_environment, bound_input};
pub use reader::FileProbes;

#[cfg(test)]
pub(crate) use file::sample_json as sample_json_for_tests;

use crate::model::ProbeStatus;

/// One process's latest probe file, with what gpuscope found out about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReport {
    /// Shared with the reader's cache of parsed versions: a tick that finds
    /// a version unchanged hands it on without a copy.
    pub file: Arc<ProbeFile>,
    /// The process (same PID and start time) still runs.
    pub alive: bool,
    /// Time since the probe wrote this.
    pub age: Duration,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeSample {
    pub reports: Vec<ProbeReport>,
    pub status: ProbeStatus,
}

pub trait ProbeSource: Send {
    fn sample(&mut self) -> ProbeSample;

    /// The same, also looking for the probes of `gpu_pids` that publish
    /// somewhere else (in a container, as another user): by default only
    /// what `sample` finds.
    fn sample_with(&mut self, gpu_pids: &[u32]) -> ProbeSample {
        let _ = gpu_pids;
        self.sample()
    }
}
