//! A probed process in a container, seen from the host: its own PID and
//! mount namespaces and a private `/tmp` (made with `unshare`, as root;
//! skipped with a message otherwise), the real probe over the stand-in
//! torch writing where it would in a container. gpuscope on the host, with
//! no configuration, finds the file through `/proc/PID/root`, names it by
//! the host PID NVML reports, and never lets a file in there speak for a
//! process outside.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::trainer::{repo, write_script};
use common::{Sim, Sleeper, assert_success, assert_valid};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UUID: &str = "5ea1c0de-0000-4000-8000-0000000000c1";

fn root_with_unshare() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let unshare = Command::new("unshare").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(root && unshare) {
        eprintln!("skipped: needs root and unshare(1) to make PID and mount namespaces (CI runs as root)");
    }
    root && unshare
}

/// Outside `/tmp`, which the container replaces with its own.
fn scratch() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

struct Container {
    unshare: Child,
}

impl Drop for Container {
    fn drop(&mut self) {
        // Killing the namespace's first process ends everything in it.
        if let Some(inner) = children_of(self.unshare.id()).first() {
            // SAFETY: signalling a process of this test.
            unsafe { libc::kill(*inner as i32, libc::SIGKILL) };
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// The trainer as PID 1 of a new PID namespace, with a runtime directory
/// of its own: a tmpfs mounted in its mount namespace only, so the host
/// sees an empty directory at that path (a container's private `/tmp`
/// would do the same, but would hide this checkout wherever it lives under
/// `/tmp`). `extra` runs in there first, as the container's own shell.
fn start(dir: &Path, extra: &str) -> (Container, u32) {
    start_with(dir, extra, None)
}

/// With `baked`, the probe comes from that directory on PYTHONPATH (an
/// image made with `gpuscope probe install --target`), not from `--probe`.
fn start_with(dir: &Path, extra: &str, baked: Option<&Path>) -> (Container, u32) {
    let script = dir.join("torch.json");
    write_script(
        &script,
        &json!({"generation": "2.5", "devices": {"0": {"uuid": UUID, "alloc": {
            "allocated": 4 * GIB, "reserved": 10 * GIB, "inactive_split": 3 * GIB}}}}),
    );
    let probe_flag = if baked.is_some() { "" } else { "--probe --interval 0.1" };
    let run = runtime_dir(dir);
    std::fs::create_dir_all(&run).unwrap();
    let inner = format!(
        "mount -t tmpfs -o mode=0700 tmpfs {} && {extra} exec python3 {} {probe_flag} --script {} --pids-file {}",
        run.display(),
        repo("tests/probe/standin/run_trainer.py").display(),
        script.display(),
        dir.join("pids").display(),
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c", &inner])
        .env_remove("GPUSCOPE_PROBE_DIR")
        .env("XDG_RUNTIME_DIR", &run)
        .env_remove("PYTHONPATH")
        .env("GPUSCOPE_PROBE_INTERVAL", "0.1")
        .stdin(Stdio::null());
    if let Some(baked) = baked {
        cmd.env("PYTHONPATH", baked);
    }
    let unshare = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let host_pid = loop {
        let ready = std::fs::read_to_string(dir.join("pids")).is_ok_and(|t| !t.is_empty());
        if let (true, Some(pid)) = (ready, children_of(unshare.id()).first().copied()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the container's trainer never came up");
        std::thread::sleep(Duration::from_millis(50));
    };
    (Container { unshare }, host_pid)
}

/// Where the container's probe writes: its `$XDG_RUNTIME_DIR`.
fn runtime_dir(dir: &Path) -> PathBuf {
    dir.join("container-run")
}

fn scenario(pids: &[u32]) -> String {
    let mut s = format!("[[gpu]]\nuuid = \"GPU-{UUID}\"\nmemory_total_mib = 81559\n");
    for pid in pids {
        s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = 11000\n"));
    }
    s
}

fn allocator(v: &Value, pid: u32) -> Value {
    v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap()["allocator"].clone()
}

/// `--json` until the container's probe has written (it starts once CUDA is
/// up), with the host's own probe directory empty.
fn host_view(sim: &Sim, own: &Path, pid: u32) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", own).output().unwrap();
        assert_success(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(&v);
        if !allocator(&v, pid).is_null() || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_probe_in_its_own_namespaces_is_read_from_the_host_under_the_host_pid() {
    if !root_with_unshare() {
        return;
    }
    let dir = scratch();
    let (_container, host_pid) = start(dir.path(), "");
    let status = std::fs::read_to_string(format!("/proc/{host_pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap().to_string();
    assert!(nspid.ends_with("\t1"), "PID 1 in its own namespace: {nspid}");
    let own: PathBuf = dir.path().join("host-probes");
    let sim = Sim::new(&scenario(&[host_pid]));
    let v = host_view(&sim, &own, host_pid);
    let a = allocator(&v, host_pid);
    assert_eq!(a["state"], "fresh", "{v:#}");
    let d = &a["devices"][0];
    assert_eq!(
        (d["gpu"].clone(), d["allocated"].clone(), d["reserved"].clone()),
        (json!(0), json!(4 * GIB), json!(10 * GIB))
    );
    assert_eq!(d["fragmentation"], 0.3);
    assert_eq!(v["gpus"][0]["allocator"]["probed_processes"], 1);
}

#[test]
fn a_file_in_a_container_never_speaks_for_a_process_outside() {
    if !root_with_unshare() {
        return;
    }
    let dir = scratch();
    // A host process NVML lists too, with no probe of its own.
    let sleeper = Sleeper::spawn(&["60"]);
    let ticks = {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", sleeper.pid())).unwrap();
        stat[stat.rfind(')').unwrap() + 2..].split_whitespace().nth(19).unwrap().to_string()
    };
    // The container plants a file named for the host process, in its own
    // probe directory, and another one in the host's naming for itself.
    let forged = json!({"format": "gpuscope-probe", "version": 1, "pid": sleeper.pid(), "start_ticks": ticks.parse::<u64>().unwrap(),
        "seq": 1, "written_unix_ms": 0, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": null, "alloc_conf_var": null,
        "expandable_segments": false, "rank": null, "local_rank": null, "world_size": null, "pinned_host": null,
        "devices": [{"index": 0, "uuid": UUID, "allocated": 1, "reserved": 2}]});
    let forged_path = dir.path().join("forged.json");
    std::fs::write(&forged_path, forged.to_string()).unwrap();
    let probes = runtime_dir(dir.path()).join("gpuscope");
    let plant = format!(
        "mkdir -m 700 {0} {0}/probes && cp {1} {0}/probes/{2}-{ticks}.json &&",
        probes.display(),
        forged_path.display(),
        sleeper.pid()
    );
    let (_container, host_pid) = start(dir.path(), &plant);
    let own = dir.path().join("host-probes");
    let sim = Sim::new(&scenario(&[host_pid, sleeper.pid()]));
    let v = host_view(&sim, &own, host_pid);
    assert!(!allocator(&v, host_pid).is_null(), "the container's own probe is read: {v:#}");
    assert_eq!(allocator(&v, sleeper.pid()), Value::Null, "a file in the container never speaks for a host process");
}

#[test]
fn a_probe_baked_into_an_image_starts_by_itself_and_is_read_from_the_host() {
    if !root_with_unshare() {
        return;
    }
    let dir = scratch();
    let image = dir.path().join("opt-gpuscope");
    let out = common::gpuscope().args(["probe", "install", "--target"]).arg(&image).output().unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("PYTHONPATH"));
    let (_container, host_pid) = start_with(dir.path(), "", Some(&image));
    let sim = Sim::new(&scenario(&[host_pid]));
    let v = host_view(&sim, &dir.path().join("host-probes"), host_pid);
    assert_eq!(allocator(&v, host_pid)["devices"][0]["allocated"], 4 * GIB, "{v:#}");
}

#[test]
fn probe_install_target_writes_both_files_readable_by_all_and_keeps_foreign_ones() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("image").join("opt");
    let out = common::gpuscope().args(["probe", "install", "--target"]).arg(&target).output().unwrap();
    assert_success(&out);
    for name in ["gpuscope_probe.py", "sitecustomize.py"] {
        let mode = std::fs::metadata(target.join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "{name}: every user of the image can import it");
    }
    // Again: an update of its own files.
    assert_success(&common::gpuscope().args(["probe", "install", "--target"]).arg(&target).output().unwrap());
    // A sitecustomize.py that is not gpuscope's stays as it is.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("sitecustomize.py"), "print('mine')\n").unwrap();
    let out = common::gpuscope().args(["probe", "install", "--target"]).arg(&other).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(other.join("sitecustomize.py")).unwrap(), "print('mine')\n");
    // An interpreter with the directory on PYTHONPATH arms the probe.
    let armed = Command::new("python3")
        .args(["-c", "import sys; print(sys.modules['gpuscope_probe']._armed)"])
        .env("PYTHONPATH", &target)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&armed.stdout).trim(), "True", "{}", String::from_utf8_lossy(&armed.stderr));
}
