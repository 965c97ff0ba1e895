//! Which NVML call is in progress, so that a headless mode giving up on a
//! hung driver can say where it hung. Shared with the thread that waits;
//! set before every call, cleared after, at the cost of an uncontended lock.
//! Several may be in progress at once (each GPU on a thread of its own,
//! `mod.rs`'s `first_pass`): the one in progress longest is named.
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
    /// In the order they started.
    current: Mutex<Vec<Call>>,
    made: AtomicU64,
}

impl Calls {
    fn slot(&self) -> std::sync::MutexGuard<'_, Vec<Call>> {
        // A plain value, consistent at every point: a panic elsewhere
        // cannot leave it half-written.
        self.0.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call` marked as in progress, and counts it. A call is one
    /// request to nvml-wrapper: a count-then-fill list is one call here,
    /// two into the library.
    pub fn track<T>(&self, what: &'static str, gpu: Option<u32>, call: impl FnOnce() -> T) -> T {
        self.0.made.fetch_add(1, Ordering::Relaxed);
        let this = Call { what, gpu };
        self.slot().push(this);
        let result = call();
        let mut slot = self.slot();
        // Equal calls are interchangeable: any one of them may go.
        if let Some(at) = slot.iter().position(|c| *c == this) {
            slot.remove(at);
        }
        result
    }

    /// The calls made so far.
    pub fn made(&self) -> u64 {
        self.0.made.load(Ordering::Relaxed)
    }

    /// The call in progress now, if any.
    pub fn current(&self) -> Option<Call> {
        self.slot().first().copied()
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

    #[test]
    fn of_calls_in_progress_together_the_oldest_is_named() {
        let calls = Calls::default();
        let (started, finish) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                calls.track("nvmlDeviceGetMaxClockInfo", Some(0), || {
                    started.wait();
                    finish.wait();
                })
            });
            started.wait();
            let seen = calls.track("nvmlDeviceGetMaxClockInfo", Some(1), || calls.current());
            assert_eq!(seen, Some(Call { what: "nvmlDeviceGetMaxClockInfo", gpu: Some(0) }));
            assert_eq!(calls.current().and_then(|c| c.gpu), Some(0), "GPU 0's call still runs");
            finish.wait();
        });
        assert_eq!(calls.current(), None);
    }
}
