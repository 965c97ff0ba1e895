//! Which NVML call is in progress, so that a headless mode giving up on a
//! hung driver can say where it hung. Shared with the thread that waits;
//! set before every call, cleared after, at the cost of an uncontended lock.
//! Also how many calls were made, for the snapshot's calls per tick.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One call: the NVML function (or the reading it serves) and the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub what: &'static str,
    pub gpu: Option<u32>,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gpu {
            Some(gpu) => write!(f, "{} on GPU {gpu}", self.what),
            None => f.write_str(self.what),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Calls(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    current: Mutex<Option<Call>>,
    made: AtomicU64,
}

impl Calls {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Call>> {
        // A plain value, consistent at every point: a panic elsewhere
        // cannot leave it half-written.
        self.0.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call` marked as in progress, and counts it. A call is one
    /// request to nvml-wrapper: a count-then-fill list is one call here,
    /// two into the library.
    pub fn track<T>(&self, what: &'static str, gpu: Option<u32>, call: impl FnOnce() -> T) -> T {
        self.0.made.fetch_add(1, Ordering::Relaxed);
        *self.slot() = Some(Call { what, gpu });
        let result = call();
        *self.slot() = None;
        result
    }

    /// The calls made so far.
    pub fn made(&self) -> u64 {
        self.0.made.load(Ordering::Relaxed)
    }

    /// The call in progress now, if any.
    pub fn current(&self) -> Option<Call> {
        *self.slot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_call_only_while_it_runs() {
        let calls = Calls::default();
        let seen = calls.track("nvmlDeviceGetMemoryInfo", Some(1), || calls.current());
        assert_eq!(seen.map(|c| c.to_string()).as_deref(), Some("nvmlDeviceGetMemoryInfo on GPU 1"));
        assert_eq!(calls.current(), None);
        assert_eq!(calls.made(), 1);
        calls.track("nvmlDeviceGetCount", None, || ());
        assert_eq!(calls.clone().made(), 2, "clones share the count");
    }
}
