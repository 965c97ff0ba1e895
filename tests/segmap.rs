//! The dashboard's live segment map: asked of a live stand-in job's own
//! probe through the requester thread, read back, and every refusal.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Sleeper;
use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use gpuscope::probe::segmap::{MapState, MapUpdate, Requester, RunClass};
use serde_json::json;

fn job(dir: &Path, backend: Option<&str>) -> (Trainer, u32, std::path::PathBuf) {
    let probe_dir = dir.join("gpuscope").join("probes");
    let script = dir.join("torch.json");
    let mut doc = json!({"generation": "2.5", "devices": {"0": {"alloc": {"allocated": 1 << 30, "reserved": 2u64 << 30},
        "segments": [
            {"pool": "large", "blocks": [["active_allocated", 4], ["inactive", 2], ["active_allocated", 2]]},
            {"pool": "large", "blocks": [["inactive", 20]]},
            {"pool": "small", "blocks": [["active_allocated", 0.5], ["inactive", 1.5]]}]}}});
    if let Some(b) = backend {
        doc["backend"] = json!(b);
    }
    write_script(&script, &doc);
    let trainer = Trainer::start(&script, &probe_dir, python_trainer(&["--probe"]));
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);
    (trainer, pid, probe_dir)
}

/// The first update that is not "waiting", within `patience`.
fn settled(requester: &mut Requester, patience: Duration) -> MapUpdate {
    settled_for(requester, None, patience)
}

/// `settled`, for `pid` only where one is given.
fn settled_for(requester: &mut Requester, pid: Option<u32>, patience: Duration) -> MapUpdate {
    let started = Instant::now();
    while started.elapsed() < patience {
        if let Some(u) = requester.updates.borrow_and_update().clone()
            && u.state != MapState::Waiting
            && pid.is_none_or(|p| p == u.pid)
        {
            return u;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no answer within {patience:?}");
}

#[test]
fn a_live_job_answers_with_its_segments_and_keeps_answering_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let (_trainer, pid, probe_dir) = job(dir.path(), None);
    let mut requester = Requester::start(probe_dir.clone()).unwrap();
    requester.open(pid, 0);
    let first = settled(&mut requester, Duration::from_secs(20));
    let MapState::Ready(map) = &first.state else { panic!("{first:?}") };
    assert_eq!((first.pid, first.ordinal), (pid, 0));
    let large = map.pools.iter().find(|p| p.pool == "large").unwrap();
    assert_eq!((large.segments, large.largest_free_block, large.inactive_split), (2, 20 << 20, 2 << 20));
    assert_eq!(map.segments[0].runs[1], (RunClass::InactiveSplit, 2 << 20));
    assert!(map.fit(20 << 20).fits && !map.fit(21 << 20).fits);
    // Refreshed while open: a later answer has a later id.
    let first_id = map.id.clone();
    let started = Instant::now();
    let refreshed = loop {
        assert!(started.elapsed() < Duration::from_secs(20), "no refresh");
        if let Some(MapUpdate { state: MapState::Ready(m), .. }) = requester.updates.borrow_and_update().clone()
            && m.id != first_id
        {
            break m;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(refreshed.pools, map.pools);
    // Closed: no more requests are left for the probe.
    // Closed: a request already left is consumed, and no new one comes.
    requester.close();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!request_pending(&probe_dir));
    assert_eq!(*requester.updates.borrow(), None);
}

fn request_pending(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".request"))
}

#[test]
fn cuda_malloc_async_says_why_there_is_no_map() {
    let dir = tempfile::tempdir().unwrap();
    let (_trainer, pid, probe_dir) = job(dir.path(), Some("cudaMallocAsync"));
    let mut requester = Requester::start(probe_dir).unwrap();
    requester.open(pid, 0);
    let update = settled(&mut requester, Duration::from_secs(20));
    assert!(matches!(&update.state, MapState::Failed(e) if e.contains("cudaMallocAsync")), "{update:?}");
}

#[test]
fn refusals_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let mut requester = Requester::start(probe_dir).unwrap();
    // The interpreter itself, not a wrapper (pyenv's shim) still running.
    let python = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output();
    let python = String::from_utf8(python.unwrap().stdout).unwrap();
    let mut no_probe = std::process::Command::new(python.trim());
    let no_probe = Sleeper(no_probe.args(["-c", "import time; time.sleep(30)"]).spawn().unwrap());
    requester.open(no_probe.pid(), 0);
    let update = settled(&mut requester, Duration::from_secs(10));
    assert!(matches!(&update.state, MapState::Failed(e) if e.contains("has no gpuscope probe")), "{update:?}");
    let not_python = Sleeper::spawn(&["30"]);
    requester.open(not_python.pid(), 0);
    let update = settled_for(&mut requester, Some(not_python.pid()), Duration::from_secs(10));
    assert!(matches!(&update.state, MapState::Failed(e) if e.contains("is not a Python interpreter")), "{update:?}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the other-user case: needs root to start a process as another user");
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut foreign = std::process::Command::new("sleep");
    foreign.arg("30").uid(65534).gid(65534);
    let mut foreign = foreign.spawn().unwrap();
    requester.open(foreign.id(), 0);
    let started = Instant::now();
    let update = loop {
        let u = requester.updates.borrow_and_update().clone().unwrap();
        if u.pid == foreign.id() && u.state != MapState::Waiting {
            break u;
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = foreign.kill();
    let _ = foreign.wait();
    assert!(matches!(&update.state, MapState::Failed(e) if e.contains("belongs to uid 65534")), "{update:?}");
}
