//! What each call costs on a real driver, when the scenario asks for it
//! (`realistic_costs`), and the count of calls made by name, which tests
//! and benchmarks read (`gpuscope_sim_call_count`, or the `call_log` file
//! for a client in another process).
//!
//! Kept out of the state mutex, like the delay: concurrent callers of a
//! slow driver call wait side by side, not one after another.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::scenario::Scenario;

/// Overrides the scenario's `realistic_costs` ("1" or "0"), so that a
/// benchmark can time the same scenario both ways.
pub const COSTS_ENV: &str = "GPUSCOPE_SIM_REALISTIC_COSTS";

/// nvml.h on nvmlDeviceGetPcieThroughput: "This function is querying a
/// byte counter over a 20ms interval": the call blocks that long.
const PCIE_THROUGHPUT: Duration = Duration::from_millis(20);
/// A field-value query makes the driver gather each field it is asked
/// for: the 0.3 ms a call that issue 17's cost model assumes.
const FIELD_VALUES: Duration = Duration::from_micros(300);
/// An ordinary query: an ioctl into the kernel driver, some 20 µs.
const ORDINARY: Duration = Duration::from_micros(20);

static REALISTIC: AtomicBool = AtomicBool::new(false);
static COUNTS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
static LOG: Mutex<Option<File>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain counters and a file handle: a panic cannot leave them torn.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the scenario says about costs and the call log.
pub(crate) fn apply(scenario: &Scenario) {
    set_realistic(scenario.realistic_costs);
    set_log(scenario.call_log.as_deref());
}

/// After the last shutdown: calls cost nothing and go unlogged.
pub(crate) fn stop() {
    REALISTIC.store(false, Ordering::Relaxed);
    set_log(None);
}

/// The scenario's choice, unless the environment overrides it.
fn set_realistic(from_scenario: bool) {
    let on = match std::env::var(COSTS_ENV).as_deref() {
        Ok("1" | "true") => true,
        Ok("0" | "false") => false,
        _ => from_scenario,
    };
    REALISTIC.store(on, Ordering::Relaxed);
}

/// Appends one line per call to `path` from now on; `None` stops.
fn set_log(path: Option<&Path>) {
    let file = path.and_then(|p| match File::options().create(true).append(true).open(p) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("gpuscope-nvml-sim: cannot open call_log {}: {e}", p.display());
            None
        }
    });
    *lock(&LOG) = file;
}

/// Counts the call, logs it, and makes the caller wait what the driver
/// would make it wait.
pub(crate) fn enter(function: &str) {
    {
        let mut counts = lock(&COUNTS);
        let counts = counts.get_or_insert_with(HashMap::new);
        match counts.get_mut(function) {
            Some(n) => *n += 1,
            None => drop(counts.insert(function.to_owned(), 1)),
        }
    }
    if let Some(file) = lock(&LOG).as_mut() {
        // One write per line, to a file opened for appending: lines from
        // concurrent callers do not interleave.
        let _ = file.write_all(format!("{function}\n").as_bytes());
    }
    if REALISTIC.load(Ordering::Relaxed) {
        wait(cost_of(function));
    }
}

fn cost_of(function: &str) -> Duration {
    match function {
        "nvmlDeviceGetPcieThroughput" => PCIE_THROUGHPUT,
        "nvmlDeviceGetFieldValues" => FIELD_VALUES,
        _ => ORDINARY,
    }
}

/// Sleeping for microseconds overshoots by the timer slack (50 µs by
/// default on Linux), so short costs spin; long ones sleep, as a caller
/// blocked in the driver would.
fn wait(d: Duration) {
    if d >= Duration::from_millis(1) {
        std::thread::sleep(d);
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Calls of `function` since the library was loaded; every call, for `None`.
pub(crate) fn count(function: Option<&str>) -> u64 {
    let counts = lock(&COUNTS);
    let Some(counts) = counts.as_ref() else { return 0 };
    match function {
        Some(f) => counts.get(f).copied().unwrap_or(0),
        None => counts.values().sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_nvidias_documentation() {
        assert_eq!(cost_of("nvmlDeviceGetPcieThroughput"), Duration::from_millis(20));
        assert_eq!(cost_of("nvmlDeviceGetFieldValues"), Duration::from_micros(300));
        assert_eq!(cost_of("nvmlDeviceGetMemoryInfo_v2"), Duration::from_micros(20));
    }

    #[test]
    fn counts_calls_by_name() {
        let before = (count(Some("nvmlTestOnlyA")), count(None));
        enter("nvmlTestOnlyA");
        enter("nvmlTestOnlyA");
        enter("nvmlTestOnlyB");
        assert_eq!(count(Some("nvmlTestOnlyA")), before.0 + 2);
        assert_eq!(count(Some("nvmlTestOnlyB")), 1);
        assert!(count(None) >= before.1 + 3);
    }
}
