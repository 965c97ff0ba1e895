//! A driver that hangs (in `nvmlInit`, or in any call once running) must
//! not hang the headless modes: each gives up after `--timeout` (beyond
//! `--for`, `--duration` or an interval), keeps what it has, says on stderr
//! that the driver did not answer and where, and exits 3.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Sim;

const HANG_AT_INIT: &str = "hang_init = true\n[[gpu]]\n";
/// Calls hang from the moment `nvmlInit_v2` has returned: the driver
/// version nvml-wrapper reads right after it already hangs.
const HANG_AT_ONCE: &str = "hang_after_s = 0\n[[gpu]]\n";
/// A few snapshots, then every call hangs.
const HANG_LATER: &str = "hang_after_s = 0.5\n[[gpu]]\n";

/// Runs gpuscope under coreutils' `timeout`, so a hang fails the test
/// (status 137) instead of stalling the suite.
fn run(sim: &Sim, args: &[&str]) -> (Output, Duration) {
    let bin = assert_cmd::cargo::cargo_bin("gpuscope");
    let started = Instant::now();
    let out = Command::new("timeout")
        .args(["-s", "KILL", "60"])
        .arg(bin)
        .arg("--nvml-lib")
        .arg(&sim.lib)
        .args(args)
        .env("GPUSCOPE_SIM_SCENARIO", &sim.scenario)
        .env("GPUSCOPE_PROBE_DIR", sim.probe_dir())
        .env("XDG_CONFIG_HOME", sim.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, started.elapsed())
}

fn assert_gave_up(out: &Output, took: Duration, within: Duration, call: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {err}");
    assert!(took < within, "took {took:?}");
    let line = err.lines().find(|l| l.contains("did not answer")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(call), "{line}");
}

#[test]
fn one_shots_give_up_on_a_driver_hung_at_start() {
    for (scenario, call) in [(HANG_AT_INIT, "nvmlInit"), (HANG_AT_ONCE, "nvmlInit")] {
        for mode in [&["--json"][..], &["-1"]] {
            let sim = Sim::new(scenario);
            let (out, took) = run(&sim, &[mode, &["--timeout", "1s"]].concat());
            assert_gave_up(&out, took, Duration::from_secs(8), call);
            assert!(took >= Duration::from_secs(1), "{took:?}");
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn a_stream_keeps_its_lines_and_stops_when_the_driver_hangs() {
    let sim = Sim::new(HANG_LATER);
    let (out, took) = run(&sim, &["--json", "--watch", "--interval", "100ms", "--timeout", "1s"]);
    assert_gave_up(&out, took, Duration::from_secs(10), "nvmlDeviceGetCount");
    let lines: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        serde_json::from_slice::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn the_stuck_reading_and_its_gpu_are_named() {
    // GPU 1's calls hang after a few snapshots; the count and GPU 0 answer.
    // A tick's first call to a GPU is the first reading of its PCIe
    // counters' window, once they are a tick old.
    let sim = Sim::new("[[gpu]]\n[[gpu]]\nhang_after_s = 0.5\n");
    let (out, took) = run(&sim, &["--json", "--watch", "--interval", "100ms", "--timeout", "1s"]);
    assert_gave_up(&out, took, Duration::from_secs(10), "PCIe counters on GPU 1");
    let (out, took) = run(&sim, &["-1", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(0), "GPU 1 answers at start: {}", String::from_utf8_lossy(&out.stderr));
    assert!(took < Duration::from_secs(5));
}

#[test]
fn check_calls_a_silent_driver_critical() {
    for scenario in [HANG_AT_INIT, HANG_LATER] {
        let sim = Sim::new(scenario);
        let (out, took) = run(&sim, &["check", "--for", "1s", "--interval", "100ms", "--timeout", "1s"]);
        assert_gave_up(&out, took, Duration::from_secs(10), "nvml");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(report.contains("CRITICAL driver: the NVML driver did not answer"), "{report}");
        assert!(!report.contains("no alerts"), "{report}");
    }
}

#[test]
fn check_waits_out_a_slow_tick_instead_of_calling_it_silent() {
    // Each tick takes ~0.3 s, more than the interval: late, never silent.
    let sim = Sim::new("call_delay_ms = 15\n[[gpu]]\n");
    let (out, _) = run(&sim, &["check", "--for", "1s", "--interval", "100ms", "--timeout", "3s"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no alerts (watched 1s)\n");
}

#[test]
fn record_stops_on_time_and_keeps_what_it_recorded() {
    let sim = Sim::new(HANG_LATER);
    let file = sim.dir.path().join("run.ndjson");
    let file_arg = file.to_str().unwrap();
    let args = ["record", file_arg, "--duration", "2500ms", "--interval", "100ms", "--timeout", "1s"];
    let (out, took) = run(&sim, &args);
    assert_gave_up(&out, took, Duration::from_secs(10), "nvmlDeviceGetCount");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().count() >= 2, "a header and at least one snapshot: {text}");
}

#[test]
fn record_and_serve_give_up_on_a_hung_init() {
    let sim = Sim::new(HANG_AT_INIT);
    let file = sim.dir.path().join("run.ndjson");
    let (out, took) = run(&sim, &["record", file.to_str().unwrap(), "--duration", "1s", "--timeout", "1s"]);
    assert_gave_up(&out, took, Duration::from_secs(8), "nvmlInit");
    assert!(!file.exists());
    let (out, took) = run(&sim, &["serve", "--listen", "127.0.0.1:0", "--timeout", "1s"]);
    assert_gave_up(&out, took, Duration::from_secs(8), "nvmlInit");
}
