//! `gpuscope memviz PID`: PyTorch's memory-viewer snapshot of a live job,
//! taken by the job's own probe on request, and every refusal.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use common::{Sleeper, gpuscope};
use serde_json::json;

fn job(dir: &Path) -> (Trainer, u32, std::path::PathBuf) {
    let probe_dir = dir.join("gpuscope").join("probes");
    let script = dir.join("torch.json");
    write_script(
        &script,
        &json!({"generation": "2.5", "devices": {"0": {"alloc": {"allocated": 1 << 30, "reserved": 2u64 << 30},
            "segments": [{"pool": "large", "blocks": [["active_allocated", 4], ["inactive", 2]]}]}}}),
    );
    let trainer = Trainer::start(&script, &probe_dir, python_trainer(&["--probe"]));
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);
    (trainer, pid, probe_dir)
}

/// (segments, whether allocation history is in it), read by Python's pickle.
fn read_pickle(path: &Path) -> (usize, bool) {
    let code = "import pickle, sys\nd = pickle.load(open(sys.argv[1], 'rb'))\n\
                print(len(d['segments']), bool(d['device_traces'][0]))";
    let out = Command::new("python3").args(["-c", code]).arg(path).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut parts = text.split_whitespace();
    (parts.next().unwrap().parse().unwrap(), parts.next() == Some("True"))
}

#[test]
fn a_live_job_gives_its_snapshot_and_a_timeline_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let (_trainer, pid, probe_dir) = job(dir.path());
    let out_file = dir.path().join("now.pickle");
    let out = gpuscope()
        .args(["memviz", &pid.to_string(), "-o"])
        .arg(&out_file)
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("now.pickle"));
    assert_eq!(read_pickle(&out_file), (1, false));
    // With a timeline: recorded for a second, then dumped, then stopped.
    let timeline = dir.path().join("timeline.pickle");
    let out = gpuscope()
        .args(["memviz", &pid.to_string(), "--history", "1s", "-o"])
        .arg(&timeline)
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("recording its allocation history"));
    assert_eq!(read_pickle(&timeline), (1, true));
    // Without -o the snapshot stays in the probe directory, and its path is printed.
    let out = gpuscope().args(["memviz", &pid.to_string()]).env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    assert!(out.status.success());
    let path = String::from_utf8(out.stdout).unwrap().lines().next().unwrap().to_string();
    assert!(path.starts_with(probe_dir.to_str().unwrap()) && path.ends_with(".memviz.pickle"), "{path}");
    // An existing output file is never overwritten.
    let out = gpuscope()
        .args(["memviz", &pid.to_string(), "-o"])
        .arg(&out_file)
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

#[test]
fn refusals_are_clear_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    // The interpreter itself, not a wrapper (pyenv's shim) still running.
    let python = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let no_probe = Sleeper(
        Command::new(python.trim()).args(["-c", "import time; time.sleep(30)"]).stdin(Stdio::null()).spawn().unwrap(),
    );
    let memviz = |pid: u32| {
        let out = gpuscope().args(["memviz", &pid.to_string()]).env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = memviz(no_probe.pid());
    assert!(said.contains("has no gpuscope probe") && said.contains("gpuscope run"), "{said}");
    // Not Python: no advice to restart it under `gpuscope run`.
    let not_python = Sleeper::spawn(&["30"]);
    let said = memviz(not_python.pid());
    assert!(said.contains("is not a Python interpreter") && !said.contains("gpuscope run"), "{said}");
    let out = gpuscope().args(["memviz", "4194304"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process 4194304"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the other-user case: needs root to start a process as another user");
        return;
    }
    let mut foreign = Command::new("sleep");
    foreign.arg("30").uid(65534).gid(65534);
    let mut foreign = foreign.spawn().unwrap();
    let out = gpuscope().args(["memviz", &foreign.id().to_string()]).output().unwrap();
    let _ = foreign.kill();
    let _ = foreign.wait();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("belongs to uid 65534"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
