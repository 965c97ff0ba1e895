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

// What calls cost on a real driver: medians of 50 calls each through
// NVIDIA's Python binding on an H100 SXM, driver 580.159.04, in a
// Firecracker VM (tests/gpu/nvml_costs.py, 2026-11-26). The binding adds
// about a microsecond to each.

/// nvml.h on nvmlDeviceGetPcieThroughput: "This function is querying a
/// byte counter over a 20ms interval": the call blocks that long (20.9 ms
/// measured).
const PCIE_THROUGHPUT: Duration = Duration::from_micros(20_900);
/// Loading the driver's state: 11.3 ms for nvmlInit.
const INIT: Duration = Duration::from_micros(11_300);
/// Per-process utilisation samples: 2.5 ms, even with none to return.
const PROCESS_UTILIZATION: Duration = Duration::from_micros(2_500);
/// The maximum clocks: 1.4 ms (median; up to 4.4).
const MAX_CLOCK: Duration = Duration::from_micros(1_400);
/// The two PCIe counters in one field-value query: 0.3 ms (fifteen
/// fields took 3.6 ms: the cost grows with what is asked).
const FIELD_VALUES: Duration = Duration::from_micros(300);
/// Each field of a query beyond two: what the two measured queries put
/// on each of the thirteen more, (3.6 - 0.3) / 13 ms.
const FIELD_EACH: Duration = Duration::from_micros(254);
/// Fan speed (even where the board has none), MIG mode, ECC mode: about
/// 160 µs each.
const SLOW_QUERY: Duration = Duration::from_micros(160);
/// Memory, the process lists, an NVLink state: about 10 µs.
const LIST_QUERY: Duration = Duration::from_micros(10);
/// An ordinary query (utilisation, temperature, power, clocks, UUID, PCI
/// information): about 2 µs. The energy counter is charged the same,
/// unmeasured (a register read, as the power draw is). The VBIOS version is charged the same,
/// unmeasured so far (nvml_costs.py asks it, and the maximum clocks other
/// than the SM's, on the next GPU run).
const ORDINARY: Duration = Duration::from_micros(2);
/// Assumed, not measured (nvml_costs.py does not time GPM yet): a GPM
/// sample reads the board's counters, charged as the field-value query
/// that reads the PCIe counters. Allocating, freeing, the support query
/// and computing metrics from two samples in host memory are charged as
/// ordinary queries.
const GPM_SAMPLE: Duration = FIELD_VALUES;

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
    enter_from(function, None);
}

/// `enter` for a call whose cost counts from `begun` (else from now),
/// before the simulator's own work: nvml_costs.py timed nvmlInit around
/// NVIDIA's binding loading the library and the driver reading its state,
/// so the simulator's reading of its scenario is part of those 11.3 ms,
/// not more. The thread's CPU clock is read only when calls cost
/// something: it is a system call, not the vDSO's.
pub(crate) fn enter_from(function: &str, begun: Option<Begun>) {
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
        let begun = begun.unwrap_or_else(Begun::now);
        wait(&begun, cost_of(function), function == "nvmlDeviceGetPcieThroughput");
    }
}

/// When a call began, by the clock and by the calling thread's CPU time.
pub(crate) struct Begun {
    wall: Instant,
    cpu: Duration,
}

impl Begun {
    pub(crate) fn now() -> Self {
        Self { wall: Instant::now(), cpu: thread_cpu() }
    }
}

/// The CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the one timespec it is given; the
    // calling thread's CPU clock always exists.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

/// A field-value query of `n` fields waits for each field beyond the two
/// that `FIELD_VALUES` covers; outside the state mutex, as `enter`'s wait.
pub(crate) fn fields(n: usize) {
    if REALISTIC.load(Ordering::Relaxed) {
        wait(&Begun::now(), fields_beyond_two(n), false);
    }
}

fn fields_beyond_two(n: usize) -> Duration {
    FIELD_EACH.saturating_mul(u32::try_from(n.saturating_sub(2)).unwrap_or(u32::MAX))
}

fn cost_of(function: &str) -> Duration {
    match function {
        "nvmlDeviceGetPcieThroughput" => PCIE_THROUGHPUT,
        "nvmlInit" | "nvmlInit_v2" | "nvmlInitWithFlags" => INIT,
        // Assumed, not measured: the versioned call reads the same
        // driver sample buffer as the measured older one.
        "nvmlDeviceGetProcessUtilization" | "nvmlDeviceGetProcessesUtilizationInfo" => PROCESS_UTILIZATION,
        "nvmlGpmSampleGet" | "nvmlGpmMigSampleGet" => GPM_SAMPLE,
        "nvmlDeviceGetMaxClockInfo" => MAX_CLOCK,
        "nvmlDeviceGetFieldValues" => FIELD_VALUES,
        "nvmlDeviceGetFanSpeed" | "nvmlDeviceGetFanSpeed_v2" | "nvmlDeviceGetMigMode" | "nvmlDeviceGetEccMode" => {
            SLOW_QUERY
        }
        f if f.starts_with("nvmlDeviceGetMemoryInfo")
            || f.starts_with("nvmlDeviceGetComputeRunningProcesses")
            || f.starts_with("nvmlDeviceGetGraphicsRunningProcesses")
            || f == "nvmlDeviceGetNvLinkState" =>
        {
            LIST_QUERY
        }
        _ => ORDINARY,
    }
}

/// A driver call works on the caller's CPU: on the H100 each call's CPU
/// time was its wall time, 2.6 ms of CPU for process utilisation
/// (tests/gpu/nvml_costs.py's CPU column), so a cost spins until the
/// calling thread has used that much CPU. Spinning by the clock instead
/// would let a call on a thread that waits its turn for a CPU (eight GPUs'
/// calls at once on a two-CPU VM) end having used less. The PCIe
/// throughput sample is taken to wait out its 20 ms interval instead
/// (`sleeps`; its CPU time was not measured).
fn wait(begun: &Begun, d: Duration, sleeps: bool) {
    if sleeps {
        std::thread::sleep(d.saturating_sub(begun.wall.elapsed()));
        return;
    }
    while thread_cpu().saturating_sub(begun.cpu) < d {
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
    fn costs_follow_a_real_drivers() {
        assert_eq!(cost_of("nvmlDeviceGetPcieThroughput"), Duration::from_micros(20_900));
        assert_eq!(cost_of("nvmlDeviceGetFieldValues"), Duration::from_micros(300));
        assert_eq!(cost_of("nvmlDeviceGetMemoryInfo_v2"), Duration::from_micros(10));
        assert_eq!(cost_of("nvmlDeviceGetComputeRunningProcesses_v3"), Duration::from_micros(10));
        assert_eq!(cost_of("nvmlDeviceGetProcessUtilization"), Duration::from_micros(2_500));
        assert_eq!(cost_of("nvmlDeviceGetTemperature"), Duration::from_micros(2));
        // Unmeasured: the energy counter is read as the power draw is.
        assert_eq!(cost_of("nvmlDeviceGetTotalEnergyConsumption"), Duration::from_micros(2));
        // Assumptions until nvml_costs.py measures them.
        assert_eq!(cost_of("nvmlGpmSampleGet"), Duration::from_micros(300));
        assert_eq!(cost_of("nvmlGpmMetricsGet"), Duration::from_micros(2));
        assert_eq!(cost_of("nvmlDeviceGetProcessesUtilizationInfo"), Duration::from_micros(2_500));
    }

    #[test]
    fn a_field_query_costs_what_was_measured_for_two_and_for_fifteen_fields() {
        let query = |n| cost_of("nvmlDeviceGetFieldValues") + fields_beyond_two(n);
        assert_eq!(query(1), Duration::from_micros(300));
        assert_eq!(query(2), Duration::from_micros(300));
        assert_eq!(query(15), Duration::from_micros(3_602));
    }

    #[test]
    fn a_cost_is_the_calling_thread_s_cpu_counted_from_when_the_call_began() {
        let begun = Begun::now();
        wait(&begun, Duration::from_millis(20), false);
        let spent = thread_cpu().saturating_sub(begun.cpu);
        assert!(spent >= Duration::from_millis(20), "{spent:?} of CPU");
        // Already paid, by CPU and by the clock: no more is spent.
        let again = thread_cpu();
        wait(&begun, Duration::from_millis(20), false);
        assert!(thread_cpu().saturating_sub(again) < Duration::from_millis(20));
        let Some(wall) = Instant::now().checked_sub(Duration::from_secs(60)) else { return };
        let t = Instant::now();
        wait(&Begun { wall, cpu: begun.cpu }, Duration::from_secs(10), true);
        assert!(t.elapsed() < Duration::from_secs(10));
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
