//! A scripted probe source for tests: each `sample` returns the next
//! scripted value, then repeats the last one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{ProbeSample, ProbeSource};

/// Also counts the samples taken, so tests can check that the probes are
/// read only where the output shows them.
pub struct ScriptedProbes {
    script: VecDeque<ProbeSample>,
    last: ProbeSample,
    pub sampled: Arc<Mutex<u32>>,
}

impl ScriptedProbes {
    pub fn new(script: impl IntoIterator<Item = ProbeSample>) -> Self {
        Self { script: script.into_iter().collect(), last: ProbeSample::default(), sampled: Arc::default() }
    }
}

impl ProbeSource for ScriptedProbes {
    fn sample(&mut self) -> ProbeSample {
        *self.sampled.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        if let Some(next) = self.script.pop_front() {
            self.last = next;
        }
        self.last.clone()
    }
}
