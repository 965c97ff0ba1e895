//! The artificial per-call delay and the account of real time spent inside
//! the library, kept apart so a benchmark can subtract one from the other.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// When calls start to hang (`hang_after_s`), and whether init does
/// (`hang_init`). Outside the state mutex, like the delay, so a hung call
/// does not also hold the lock every other call needs.
static HANG_AT: Mutex<Option<Instant>> = Mutex::new(None);
static INIT_HANGS: AtomicBool = AtomicBool::new(false);

/// Long enough for any test to give up first, short enough that a stray
/// process does not live forever.
const HANG_FOR: Duration = Duration::from_secs(3600);

pub(crate) fn set_hang(started: Instant, after_s: Option<f64>) {
    let at = after_s.and_then(|s| started.checked_add(Duration::from_secs_f64(s.min(1e9))));
    *HANG_AT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = at;
}

pub(crate) fn set_init_hangs(hangs: bool) {
    INIT_HANGS.store(hangs, Ordering::Relaxed);
}

pub(crate) fn init_hangs() -> bool {
    INIT_HANGS.load(Ordering::Relaxed)
}

/// Blocks for an hour when the scenario says calls hang by now.
pub(crate) fn hang_if_due() {
    let at = *HANG_AT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if at.is_some_and(|at| Instant::now() >= at) {
        hang();
    }
}

pub(crate) fn hang() {
    std::thread::sleep(HANG_FOR);
}
