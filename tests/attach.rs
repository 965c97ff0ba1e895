//! `gpuscope attach PID`. No Python 3.14 can be installed on these
//! machines, so `sys.remote_exec` itself has not run here: the script
//! gpuscope hands it is run in a live stand-in job the way remote_exec
//! would (main thread, between steps), and every refusal is tested.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::process::Command;

use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use common::{Sim, Sleeper, gpuscope};
use serde_json::{Value, json};

#[test]
fn the_attach_script_starts_the_probe_in_a_running_job() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let script = dir.path().join("torch.json");
    write_script(
        &script,
        &json!({"generation": "2.5", "devices": {"0": {"uuid": "5ea1c0de-0000-4000-8000-0000000000d1",
        "alloc": {"allocated": 1u64 << 30, "reserved": 2u64 << 30}}}}),
    );
    let trigger = dir.path().join("exec-this");
    // Running, on the GPU, with no probe.
    let trainer = Trainer::start(&script, &probe_dir, {
        let mut cmd = python_trainer(&["--exec-from"]);
        cmd.arg(&trigger);
        cmd
    });
    let pid = trainer.pid_of("main", 1);
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = gpuscope()
        .args(["attach", &pid.to_string(), "--script-only"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(std::fs::read_to_string(&path).unwrap().contains("gpuscope_probe.start()"));
    // What sys.remote_exec(pid, path) does in 3.14.
    std::fs::write(&trigger, &path).unwrap();
    wait_for_probe_file(&probe_dir, pid);
    let sim = Sim::new(&format!(
        "[[gpu]]\nuuid = \"GPU-5ea1c0de-0000-4000-8000-0000000000d1\"\n[[gpu.process]]\npid = {pid}\nused_mib = 4000\n"
    ));
    let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap();
    assert_eq!(p["allocator"]["devices"][0]["allocated"], 1u64 << 30, "{p:#}");
}

#[test]
fn every_refusal_is_one_clear_line_and_exit_2() {
    let attach = |pid: u32| gpuscope().args(["attach", &pid.to_string()]).output().unwrap();
    let says = |out: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(what), "{err}");
    };
    says(&attach(4_194_304), "no process 4194304");
    let sleeper = Sleeper::spawn(&["30"]);
    says(&attach(sleeper.pid()), "is not a Python interpreter");
    // This machine's Python (3.11) has no sys.remote_exec.
    let mut py = Command::new("python3").args(["-c", "import time; time.sleep(30)"]).spawn().unwrap();
    wait_for_python(py.id());
    let out = attach(py.id());
    let _ = py.kill();
    let _ = py.wait();
    says(&out, "has no safe way to start code in a running process");
    says(&out, "gpuscope run");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the other-user case: needs root to run gpuscope as another user");
        return;
    }
    let mut cmd = gpuscope();
    cmd.args(["attach", &sleeper.pid().to_string()]).uid(65534).gid(65534);
    let out = cmd.output().unwrap();
    says(&out, "only its owner or root can attach");
}

/// Until `pid` runs a Python interpreter. `python3` may be a launcher
/// script (pyenv's shim is one) that execs the interpreter only after its
/// own lookups, which took over 200 ms on a loaded 2-core machine.
fn wait_for_python(pid: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let is_python = || {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| exe.file_name().is_some_and(|n| n.to_string_lossy().starts_with("python")))
    };
    while !is_python() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
