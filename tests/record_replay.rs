//! `gpuscope record` and `gpuscope replay` through the real binary.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Sim, assert_success, assert_valid, gpuscope};
use serde_json::Value;

const SCENARIO: &str = "[[gpu]]\nname = \"Rec\"\nutilization_gpu = 42\n[[gpu]]\nstate = \"lost\"\n";

fn lines_of(path: &Path) -> Vec<Value> {
    let bytes = std::fs::read(path).unwrap();
    let text = if path.extension().is_some_and(|e| e == "zst") {
        String::from_utf8(zstd::decode_all(&bytes[..]).unwrap()).unwrap()
    } else {
        String::from_utf8(bytes).unwrap()
    };
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// What replay recomputes is left out of the comparison.
fn without_alerts(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    o.remove("alerts");
    o.remove("events");
    v
}

fn replay_json(path: &Path) -> (Vec<Value>, String) {
    let out = gpuscope().args(["replay", "--json"]).arg(path).output().unwrap();
    assert_success(&out);
    let lines = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, String::from_utf8(out.stderr).unwrap())
}

#[test]
fn record_then_replay_gives_the_same_snapshots() {
    let sim = Sim::new(SCENARIO);
    for name in ["run.ndjson", "run.ndjson.zst"] {
        let path = sim.dir.path().join(name);
        let out =
            sim.gpuscope().arg("record").arg(&path).args(["--interval", "100ms", "--duration", "1s"]).output().unwrap();
        assert_success(&out);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("recorded") && stderr.contains(name), "{stderr}");

        let recorded = lines_of(&path);
        let header = &recorded[0];
        assert_eq!(header["format"], "gpuscope-recording");
        assert_eq!(header["schema_version"], 1);
        assert!(header["host"].is_string() && header["start_unix_ms"].is_u64());
        let snapshots = &recorded[1..];
        assert!(snapshots.len() >= 5, "{name}: {} snapshots in 1 s at 100 ms", snapshots.len());

        let (replayed, _) = replay_json(&path);
        assert_eq!(replayed.len(), snapshots.len());
        for (r, s) in replayed.iter().zip(snapshots) {
            assert_valid(r);
            assert_eq!(without_alerts(r.clone()), without_alerts(s.clone()));
        }
        // Alerts are recomputed from the data: the lost GPU is there.
        assert!(replayed[0]["alerts"].as_array().unwrap().iter().any(|a| a["kind"] == "gpu_lost"));
    }
}

fn wait_for_lines(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count()) < n {
        assert!(Instant::now() < deadline, "the recording never reached {n} lines");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_and_kill_leave_readable_recordings() {
    let sim = Sim::new(SCENARIO);
    let plain = sim.dir.path().join("term.ndjson");
    let mut child = sim.gpuscope().arg("record").arg(&plain).args(["--interval", "50ms"]).spawn().unwrap();
    wait_for_lines(&plain, 4);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "SIGTERM is a normal end");
    let (replayed, stderr) = replay_json(&plain);
    assert_eq!(replayed.len() + 1, lines_of(&plain).len());
    assert!(stderr.contains(" 0 lines skipped"), "{stderr}");

    // SIGKILL mid-stream: the zstd frame is never finished.
    let zst = sim.dir.path().join("killed.ndjson.zst");
    let mut child = sim.gpuscope().arg("record").arg(&zst).args(["--interval", "50ms"]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&zst).map_or(0, |m| m.len()) < 2_000 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (replayed, _) = replay_json(&zst);
    assert!(!replayed.is_empty(), "every complete line reads back");
}

#[test]
fn a_foreign_file_gets_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "shopping list\neggs\n").unwrap();
    let out = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("notes.txt") && err.contains("not a gpuscope recording"), "{err}");
}

/// A synthetic recording of `hours` at 1 Hz, from one real snapshot.
fn synthesise(path: &Path, template: &Value, hours: u64) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let t0 = 1_795_000_000_000u64;
    let mut snap = template.clone();
    for s in 0..hours * 3600 {
        let t = t0 + s * 1000;
        snap["time_unix_ms"] = t.into();
        snap["time"] =
            humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(t)).to_string().into();
        snap["gpus"][0]["memory"]["used"] = ((1u64 << 30) + (s % 600) * (1 << 20)).into();
        serde_json::to_writer(&mut out, &snap).unwrap();
        out.write_all(b"\n").unwrap();
    }
}

/// Peak resident memory of `gpuscope replay --json FILE`, in KiB.
fn replay_peak_kib(path: &Path) -> u64 {
    let mut child = gpuscope().args(["replay", "--json"]).arg(path).stdout(Stdio::null()).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kib) = text.lines().find_map(|l| l.strip_prefix("VmHWM:"))
        {
            peak = peak.max(kib.trim().trim_end_matches("kB").trim().parse().unwrap_or(0));
        }
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success());
            return peak;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_day_at_one_hertz_replays_in_bounded_memory() {
    let sim = Sim::new(SCENARIO);
    let template = sim.json(&[]);
    let hour = sim.dir.path().join("hour.ndjson");
    let day = sim.dir.path().join("day.ndjson");
    synthesise(&hour, &template, 1);
    synthesise(&day, &template, 24);
    let (peak_hour, peak_day) = (replay_peak_kib(&hour), replay_peak_kib(&day));
    println!("replay peak RSS: 1 h {} KiB, 24 h {} KiB", peak_hour, peak_day);
    // 24 times the data may cost the index (a few MB), not 24 times the memory.
    assert!(peak_day < peak_hour + 32 * 1024, "1 h: {peak_hour} KiB, 24 h: {peak_day} KiB");
}

/// Recordings made on a real H100 (driver 580.159.04, PyTorch 2.11 and
/// JAX 0.11.2) while `tests/gpu/run_all.sh` ran its checks, on
/// 2026-11-26 and by the build of 2026-11-28: every snapshot the real
/// driver and the real frameworks produced replays, valid against the
/// schema, with the out-of-memory failures of the OOM check raised again
/// by today's rules.
#[test]
fn recordings_from_a_real_h100_replay_with_their_alerts() {
    for (name, snapshots) in [("h100-real.ndjson.zst", 238), ("h100-real-2.ndjson.zst", 241)] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        let (lines, _) = replay_json(&path);
        assert_eq!(lines.len(), snapshots, "{name}");
        lines.iter().for_each(assert_valid);
        assert!(lines.iter().all(|s| s["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"));
        assert!(lines.iter().all(|s| s["gpus"][0]["error"].is_null()), "a board without fans is no error");
        // pcie_check.py's copies: tens of GB/s through 32-bit counters
        // that wrapped several times a second.
        let fast = |s: &Value| s["gpus"][0]["pcie"]["rx_bytes_per_s"].as_f64().is_some_and(|r| r > 40e9);
        assert!(lines.iter().filter(|s| fast(s)).count() >= 4, "{name}");
        let backends: std::collections::BTreeSet<String> = lines
            .iter()
            .flat_map(|s| s["processes"].as_array().unwrap().iter())
            .filter_map(|p| p["allocator"]["backend"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(backends.into_iter().collect::<Vec<_>>(), ["cudaMallocAsync", "jax", "native"], "{name}");
        let oom = |s: &Value| s["alerts"].as_array().unwrap().iter().any(|a| a["kind"] == "oom");
        assert!(lines.iter().any(oom), "{name}: the OOM check's failures raise alerts on replay");
    }
}
