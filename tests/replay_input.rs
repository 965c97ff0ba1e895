//! Hostile and unusual input to `replay`, and `record` on an existing file:
//! endless lines, pipes and FIFOs, zstd without its extension, newer
//! schemas; refusal, `--force` and `--append`.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use common::{Sim, assert_success, gpuscope};
use serde_json::Value;

const SCENARIO: &str = "[[gpu]]\nname = \"Rec\"\nutilization_gpu = 42\n";

fn record(sim: &Sim, path: &Path, extra: &[&str]) -> Output {
    sim.gpuscope()
        .arg("record")
        .arg(path)
        .args(["--interval", "100ms", "--duration", "600ms"])
        .args(extra)
        .output()
        .unwrap()
}

fn recorded(sim: &Sim, name: &str) -> PathBuf {
    let path = sim.dir.path().join(name);
    assert_success(&record(sim, &path, &[]));
    path
}

fn snapshots(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn replay_stdin(input: Vec<u8>) -> (Output, u64) {
    let mut child = gpuscope()
        .args(["replay", "--json", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for chunk in input.chunks(1 << 20) {
            stdin.write_all(chunk).unwrap();
        }
    });
    let status = format!("/proc/{}/status", child.id());
    let peak = std::thread::spawn(move || {
        let mut peak = 0u64;
        while let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kib) = text.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                peak = peak.max(kib.trim().trim_end_matches("kB").trim().parse().unwrap_or(0));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    (out, peak.join().unwrap())
}

#[test]
fn a_recording_reads_through_a_pipe_plain_or_zstd() {
    let sim = Sim::new(SCENARIO);
    for name in ["r.ndjson", "r.ndjson.zst"] {
        let path = recorded(&sim, name);
        let direct = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
        assert_success(&direct);
        let (piped, _) = replay_stdin(std::fs::read(&path).unwrap());
        assert_success(&piped);
        let (a, b) = (snapshots(&direct.stdout), snapshots(&piped.stdout));
        assert!(!a.is_empty(), "{name}");
        assert_eq!(a.len(), b.len(), "{name}: {}", String::from_utf8_lossy(&piped.stderr));
        let stderr = String::from_utf8_lossy(&piped.stderr);
        assert!(stderr.contains(&format!("{} snapshots, 0 lines skipped", a.len())), "{stderr}");
    }
}

#[test]
fn a_zstd_recording_through_a_fifo_is_recognised_by_its_content() {
    let sim = Sim::new(SCENARIO);
    let path = recorded(&sim, "r.ndjson.zst");
    let fifo = sim.dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let bytes = std::fs::read(&path).unwrap();
    let fifo_w = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(fifo_w, bytes).unwrap());
    let out = gpuscope().args(["replay", "--json"]).arg(&fifo).output().unwrap();
    writer.join().unwrap();
    assert_success(&out);
    assert!(snapshots(&out.stdout).len() >= 3, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_endless_line_costs_the_cap_not_the_line() {
    let sim = Sim::new(SCENARIO);
    let path = recorded(&sim, "r.ndjson");
    // 300 MiB without a newline, then a real recording.
    let mut input = vec![0u8; 300 << 20];
    input.push(b'\n');
    input.extend(std::fs::read(&path).unwrap());
    let (out, peak_kib) = replay_stdin(input);
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 longer than 64 MiB"), "{stderr}");
    assert!(!snapshots(&out.stdout).is_empty(), "the lines after it still read");
    assert!(peak_kib < 160 * 1024, "peak {peak_kib} KiB: the endless line was held");
}

#[test]
fn skipped_lines_are_counted_by_why() {
    let sim = Sim::new(SCENARIO);
    let path = recorded(&sim, "r.ndjson");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("garbage\n{\"schema_version\":1,\"time_unix_ms\":5}\n{\"schema_version\":1,\"time_unix");
    std::fs::write(&path, text).unwrap();
    let out = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("3 lines skipped (1 torn last line, 1 not a snapshot, 1 a snapshot this gpuscope cannot read)"),
        "{stderr}"
    );
}

#[test]
fn a_newer_schema_is_said_not_dropped_silently() {
    let sim = Sim::new(SCENARIO);
    let path = recorded(&sim, "r.ndjson");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[0] = lines[0].replace("\"schema_version\":1", "\"schema_version\":7");
    // A snapshot of that future schema this gpuscope cannot read.
    lines.push(lines[1].replace("\"gpus\":[", "\"gpus\":7,\"x\":["));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("schema 7") && stderr.contains("reads schema 1"), "{stderr}");
    assert!(stderr.contains("1 a snapshot this gpuscope cannot read"), "{stderr}");
}

#[test]
fn record_refuses_an_existing_file_unless_told() {
    let sim = Sim::new(SCENARIO);
    let path = sim.dir.path().join("keep.ndjson");
    std::fs::write(&path, "precious\n").unwrap();
    let out = record(&sim, &path, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("keep.ndjson already exists") && stderr.contains("--force") && stderr.contains("--append"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n", "untouched");

    let out = record(&sim, &path, &["--append"]);
    assert_eq!(out.status.code(), Some(2), "not a recording: nothing to append to");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a gpuscope recording"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");

    let out = record(&sim, &path, &["--force"]);
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("replacing"));
    let lines = std::fs::read_to_string(&path).unwrap();
    assert!(lines.starts_with("{\"format\":\"gpuscope-recording\""), "{lines}");
}

#[test]
fn record_never_writes_through_a_planted_link() {
    let sim = Sim::new(SCENARIO);
    let victim = sim.dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = sim.dir.path().join("planted.ndjson");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for flags in [&[][..], &["--force"][..], &["--append"][..]] {
        let out = record(&sim, &link, flags);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "{flags:?}: the link's target is untouched"
        );
    }
    let out = record(&sim, &link, &["--force"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn record_appends_to_a_recording_of_the_same_schema() {
    let sim = Sim::new(SCENARIO);
    for name in ["a.ndjson", "a.ndjson.zst"] {
        let path = recorded(&sim, name);
        let count = |p: &Path| snapshots(&gpuscope().args(["replay", "--json"]).arg(p).output().unwrap().stdout).len();
        let before = count(&path);
        let out = record(&sim, &path, &["--append"]);
        assert_success(&out);
        assert!(String::from_utf8_lossy(&out.stderr).contains("appending to"), "{name}");
        let after = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&after.stderr);
        assert!(snapshots(&after.stdout).len() > before, "{name}: {stderr}");
        assert!(stderr.contains(" 0 lines skipped"), "{name}: one header, nothing damaged: {stderr}");
    }
    // Another schema is refused.
    let path = recorded(&sim, "old.ndjson");
    let text = std::fs::read_to_string(&path).unwrap().replacen("\"schema_version\":1", "\"schema_version\":0", 1);
    std::fs::write(&path, &text).unwrap();
    let out = record(&sim, &path, &["--append"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema 0"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    assert!(record(&sim, &path, &["--append", "--force"]).status.code() == Some(2), "one or the other");
}

/// A `record` that collects nothing (no driver) leaves no empty file that
/// the next `record` would refuse; a file that was there stays.
#[test]
fn a_record_that_collects_nothing_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.ndjson");
    let out = gpuscope().args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "record"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!path.exists(), "an empty file was left behind");
    std::fs::write(&path, "").unwrap();
    let out = gpuscope()
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "record", "--force"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(path.exists(), "not ours to remove");
}

/// Issue 55: a FIFO planted where `record --append` (or `--force`) is to
/// write made it wait in `open()` for a reader forever, silent, before any
/// `--timeout`. Refused at once, like the link and the device.
#[test]
fn record_refuses_a_planted_fifo_at_once() {
    let sim = Sim::new(SCENARIO);
    let fifo = sim.dir.path().join("planted.ndjson");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    // As another user would plant it in a shared directory.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&fifo, Some(65534), Some(65534)).unwrap();
    }
    for flags in [&["--append"][..], &["--force"][..]] {
        // Were open() to block, this child would never end: the test's own
        // deadline ends it and fails.
        let mut child = sim
            .gpuscope()
            .arg("record")
            .arg(&fifo)
            .args(["--interval", "100ms", "--duration", "600ms"])
            .args(flags)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{flags:?}: record still waits on the FIFO after 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains("FIFO") || stderr.contains("not a regular file"), "{flags:?}: {stderr}");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "left as it was");
    }
}

/// `--append` and `--force` never write to another user's file, even one
/// this user may write to (root's `record --force /tmp/x` on a file some
/// user left there).
#[test]
fn record_never_continues_or_replaces_another_user_s_file() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("needs root to give a file to another user, which CI has; this run is not root");
        return;
    }
    let sim = Sim::new(SCENARIO);
    let path = recorded(&sim, "theirs.ndjson");
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    let before = std::fs::read(&path).unwrap();
    for flags in [&["--append"][..], &["--force"][..]] {
        let out = record(&sim, &path, flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains("belongs to uid 65534"), "{flags:?}: {stderr}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{flags:?}: untouched");
    }
}
