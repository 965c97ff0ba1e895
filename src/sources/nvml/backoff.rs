use std::time::{Duration, Instant};

/// When to try loading NVML again after a failure: soon at first, then less
/// often, so a machine without a driver is not hammered every tick.
#[derive(Debug, Default)]
pub struct Backoff {
    next: Option<Instant>,
    failures: u32,
}

const FIRST: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(30);

impl Backoff {
    pub fn due(&self) -> bool {
        self.next.is_none_or(|t| Instant::now() >= t)
    }

    pub fn failed(&mut self) {
        let wait = FIRST.saturating_mul(1 << self.failures.min(5)).min(MAX);
        self.failures += 1;
        self.next = Some(Instant::now() + wait);
    }

    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_after_failure_and_resets() {
        let mut b = Backoff::default();
        assert!(b.due());
        b.failed();
        assert!(!b.due());
        b.reset();
        assert!(b.due());
    }
}
