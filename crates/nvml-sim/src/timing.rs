//! The artificial per-call delay and the account of real time spent inside
//! the library, kept apart so a benchmark can subtract one from the other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Atomic rather than behind the state mutex so that sleeping callers do
/// not serialise on the lock, as concurrent callers of a slow driver would not.
static DELAY_MS: AtomicU64 = AtomicU64::new(0);
static BUSY_NS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn set_delay_ms(ms: u64) {
    DELAY_MS.store(ms, Ordering::Relaxed);
}

pub(crate) fn sleep_delay() {
    let ms = DELAY_MS.load(Ordering::Relaxed);
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

pub(crate) fn add_busy(since: Instant) {
    let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    BUSY_NS.fetch_add(ns, Ordering::Relaxed);
}

pub(crate) fn busy_ns() -> u64 {
    BUSY_NS.load(Ordering::Relaxed)
}
