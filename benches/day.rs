//! A day at 1 s, in a few minutes: whether what the dashboard keeps stays
//! the same size however long it runs and however many processes come and
//! go. The analyzer (with the one history, and the rules' own state), the
//! view's state reading the same history, and a 200x50 frame drawn every
//! tick are fed a day of snapshots at one a second (86,400) on simulated
//! time: 8 GPUs and 64 processes, of which `GPUSCOPE_BENCH_CHURN` (default
//! 8) end every second and as many new ones take their places, and one a
//! GPU lives twenty minutes, leaking, so that alerts rise and end. A
//! counting allocator reports the live heap at each simulated hour.
//!
//! What this leaves to `rss_soak.sh`: the sources' own state (kept per
//! process seen in /proc, by NVML and by the probes), the allocator's
//! fragmentation and the kernel's pages, which need real processes and
//! real time.
//!
//! Run: `cargo bench --bench day` (`GPUSCOPE_BENCH_HOURS`, default 24).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use gpuscope::analysis::Analyzer;
use gpuscope::analysis::config::{AlertsConfig, HistoryConfig};
use gpuscope::model::{Snapshot, Timestamp};
use gpuscope::tui::term::Term;
use gpuscope::tui::{Clock, State, TuiOptions, render};
use ratatui::backend::TestBackend;

/// The system allocator, counting the bytes it holds for the program.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is handed to `System` with the caller's own arguments,
// which meet `GlobalAlloc`'s contract as the caller's did; the counters are
// atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const GPUS: usize = 8;
const PROCESSES: usize = 64;
const T0_MS: u64 = 1_795_000_000_000;

/// The demo's snapshot, widened to 8 GPUs and 64 processes: each process
/// a copy of one of the demo's (probed or not), on one GPU.
fn template() -> Snapshot {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuscope")).args(["--demo", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut snap: Snapshot = serde_json::from_slice(&out.stdout).unwrap();
    let gpus = snap.gpus.clone();
    snap.gpus = (0..GPUS)
        .map(|i| {
            let mut g = gpus[i % gpus.len()].clone();
            g.index = i as u32;
            g.uuid = Some(format!("GPU-{i:08x}-0000-0000-0000-000000000000"));
            g.mig_devices.clear();
            g
        })
        .collect();
    let processes = snap.processes.clone();
    snap.processes = (0..PROCESSES).map(|i| processes[i % processes.len()].clone()).collect();
    snap.alerts.clear();
    snap.events.clear();
    snap
}

/// Processes replaced every second; the rest, one a GPU, live twenty
/// minutes and leak a MiB a second all along: the leak rule raises an
/// alert for each, which ends when it does.
const CHURNED: usize = PROCESSES - GPUS;
const LONG_LIFE_S: u64 = 1_200;

/// When slot `i`'s process now began, and how many processes have held
/// the slot: `churn` of the churned slots change hands each second, in
/// turn, and the long-lived ones in turn across their twenty minutes.
fn slot(i: usize, s: u64, churn: u64) -> (u64, u64) {
    let (every, offset) = if i < CHURNED {
        let every = (CHURNED as u64).div_ceil(churn.max(1));
        (every, i as u64 % every)
    } else {
        (LONG_LIFE_S, (i - CHURNED) as u64 * LONG_LIFE_S / GPUS as u64)
    };
    if churn == 0 && i < CHURNED {
        return (0, 0);
    }
    // Replaced at offset, offset + every, ...
    let since = (s + every - offset) % every;
    (s.saturating_sub(since), (s + every - offset) / every)
}

/// How many processes have held slot `i` by second `s`: the first, from
/// the start, unless the slot's first change comes at the start too.
fn seen_in(i: usize, s: u64, churn: u64) -> u64 {
    let (_, generation) = slot(i, s, churn);
    let (born_at_start, first) = slot(i, 0, churn);
    generation + u64::from(born_at_start == 0 && first == 0)
}

/// The snapshot of second `s`.
fn at_second(template: &Snapshot, s: u64, churn: u64) -> Snapshot {
    let mut snap = template.clone();
    let t = T0_MS + s * 1000;
    snap.time = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(t));
    for (i, p) in snap.processes.iter_mut().enumerate() {
        let (born, generation) = slot(i, s, churn);
        p.pid = 1_000 + u32::try_from(generation * PROCESSES as u64 + i as u64).unwrap();
        p.start_time = Some(Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(T0_MS + born * 1000)));
        let mib = if i < CHURNED { 1_000 + (s + i as u64) % 300 } else { 1_000 + (s - born) };
        p.gpus.truncate(1);
        for g in &mut p.gpus {
            g.index = (i % GPUS) as u32;
            g.used_memory = Some(mib << 20);
            g.mig_device = None;
        }
        p.gpu_memory_total = Some(mib << 20);
    }
    for (k, g) in snap.gpus.iter_mut().enumerate() {
        g.utilization.gpu = Some(((s + k as u64 * 7) % 100) as u32);
    }
    snap
}

fn main() {
    let hours: u64 = std::env::var("GPUSCOPE_BENCH_HOURS").ok().and_then(|h| h.parse().ok()).unwrap_or(24);
    let churn: u64 = std::env::var("GPUSCOPE_BENCH_CHURN").ok().and_then(|c| c.parse().ok()).unwrap_or(8);
    let template = template();
    let mut analyzer = Analyzer::new(&HistoryConfig::default(), AlertsConfig::default());
    let clock = Clock::manual(T0_MS);
    let options = TuiOptions { history: Some(analyzer.history()), ..TuiOptions::offscreen(clock.clone()) };
    let mut state = State::new(&options);
    let mut terminal = Term::new(TestBackend::new(200, 50)).unwrap();
    println!("{GPUS} GPUs x {PROCESSES} processes, {churn} replaced a second, a snapshot a second for {hours} h");
    println!("{:>6} {:>10} {:>14} {:>14} {:>9}", "hour", "processes", "live heap KiB", "hour's peak", "alerts");
    let started = Instant::now();
    let mut events = 0;
    for s in 0..=hours * 3600 {
        let mut snap = at_second(&template, s, churn);
        analyzer.observe(&mut snap);
        let alerts = snap.alerts.len();
        events += snap.events.len();
        clock.set(snap.time.time_unix_ms);
        state.on_snapshot(Arc::new(snap));
        terminal.draw(|frame| render::draw(frame, &state, &clock)).unwrap();
        if s % 3600 == 0 || s == 600 {
            let seen: u64 = (0..PROCESSES).map(|i| seen_in(i, s, churn)).sum();
            let (live, peak) = (LIVE.load(Ordering::Relaxed) / 1024, PEAK.swap(0, Ordering::Relaxed) / 1024);
            let hour = format!("{:.2}", s as f64 / 3600.0);
            println!("{hour:>6} {seen:>10} {live:>14} {peak:>14} {alerts:>9}");
        }
    }
    println!("alert events: {events}; {:.0} s for {} snapshots", started.elapsed().as_secs_f64(), hours * 3600 + 1);
}
