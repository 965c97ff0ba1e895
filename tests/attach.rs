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
use common::{Sim, Sleeper, assert_success, gpuscope};
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
    let gpuscope_here = |args: &[&str]| {
        gpuscope().args(args).env("XDG_RUNTIME_DIR", &runtime).env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap()
    };
    // The stand-in job runs this machine's Python: before 3.14,
    // `--script-only` refuses it as `attach` does, and writes nothing.
    let refused = gpuscope_here(&["attach", &pid.to_string(), "--script-only"]);
    let mut new_python = Command::new("python3");
    new_python.args(["-c", "import sys; sys.exit(sys.version_info < (3, 14))"]);
    if !new_python.status().unwrap().success() {
        assert_eq!(refused.status.code(), Some(2));
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("has no safe way to start code in a running process"), "{err}");
        assert!(refused.stdout.is_empty());
    }
    // The script itself, as `attach` writes it beside the probe that
    // `probe path` places where `attach` would.
    let out = gpuscope_here(&["probe", "path"]);
    assert_success(&out);
    let probe = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let probe_home = probe.parent().unwrap();
    let path = probe_home.join(format!("attach-{pid}.py"));
    std::fs::write(&path, gpuscope::probe::attach::script(probe_home)).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().contains("gpuscope_probe.start()"));
    // What sys.remote_exec(pid, path) does in 3.14.
    std::fs::write(&trigger, path.to_str().unwrap()).unwrap();
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

/// A stand-in interpreter: an ELF file that declares a Python version the
/// way CPython 3.13+ does (`_PyRuntime` in `.PyRuntime`, opening with the
/// `xdebugpy` cookie and `PY_VERSION_HEX`). Started without `-I` it waits
/// like a job; started as `attach` starts an interpreter (`-I -S -c ...`)
/// it appends its mark, uid and arguments to `$FAKE_PYTHON_LOG`.
const FAKE_PYTHON: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
struct debug_offsets { char cookie[8]; unsigned long long version; unsigned long long free_threaded; };
__attribute__((section(".PyRuntime"), used))
struct debug_offsets _PyRuntime = {{'x','d','e','b','u','g','p','y'}, 0x030E00F0ULL, 0};
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-I") == 0) {
        const char *log = getenv("FAKE_PYTHON_LOG");
        FILE *f = log ? fopen(log, "a") : NULL;
        if (!f) return 3;
        fprintf(f, "%s uid=%d", MARK, (int)getuid());
        for (int i = 0; i < argc; i++) fprintf(f, "\t%s", argv[i]);
        fprintf(f, "\n");
        fclose(f);
        return 0;
    }
    for (;;) pause();
}
"#;

fn compile_fake(out: &std::path::Path, mark: &str) {
    let src = out.with_extension("c");
    std::fs::write(&src, FAKE_PYTHON).unwrap();
    let status = Command::new("cc").arg(format!("-DMARK=\"{mark}\"")).arg("-o").arg(out).arg(&src).status().unwrap();
    assert!(status.success(), "cc failed");
    std::fs::remove_file(&src).unwrap();
}

fn set_mode(path: &std::path::Path, mode: u32) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A directory whose every ancestor only root can change, as root's
/// attach requires of an interpreter's: the build's own scratch space
/// where the checkout allows, else root's /run.
fn trusted_dir() -> tempfile::TempDir {
    use std::os::unix::fs::MetadataExt;
    let closed = |p: &std::path::Path| {
        p.ancestors()
            .all(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o022 == 0))
    };
    let parent = [env!("CARGO_TARGET_TMPDIR"), "/run", "/var/lib"]
        .into_iter()
        .map(std::path::Path::new)
        .find(|p| closed(p))
        .expect("no directory here is closed to all but root");
    let dir = tempfile::Builder::new().prefix("attach-trusted-").tempdir_in(parent).unwrap();
    set_mode(dir.path(), 0o755);
    dir
}

/// Until `pid` has exec'd `exe` (a fork has the parent's until then).
fn wait_for_exe(pid: u32, exe: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_deref() != Some(exe)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// What every attach below runs with: its own runtime directory, TMPDIR and
/// log, so that what it leaves behind can be seen.
struct Scene {
    _dir: tempfile::TempDir,
    runtime: std::path::PathBuf,
    tmp: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Scene {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (runtime, tmp) = (dir.path().join("runtime"), dir.path().join("tmp"));
        for d in [&runtime, &tmp] {
            std::fs::create_dir(d).unwrap();
            set_mode(d, 0o700);
        }
        let log = dir.path().join("ran.log");
        Self { _dir: dir, runtime, tmp, log }
    }

    fn attach(&self, pid: u32) -> std::process::Output {
        gpuscope()
            .args(["attach", &pid.to_string()])
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("TMPDIR", &self.tmp)
            .env("FAKE_PYTHON_LOG", &self.log)
            .output()
            .unwrap()
    }

    fn ran(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn left_in_tmp(&self) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&self.tmp).unwrap().map(|e| e.unwrap().path()).collect()
    }
}

fn spawn_as(exe: &std::path::Path, uid: Option<u32>) -> std::process::Child {
    let mut cmd = Command::new(exe);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let child = cmd.stdin(std::process::Stdio::null()).spawn().unwrap();
    wait_for_exe(child.id(), exe);
    child
}

fn stop(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn attach_runs_the_very_file_the_process_runs_through_its_descriptor() {
    let trusted = trusted_dir();
    let python = trusted.path().join("python3.14");
    compile_fake(&python, "trusted");
    let scene = Scene::new();
    let job = spawn_as(&python, None);
    let pid = job.id();
    let out = scene.attach(pid);
    stop(job);
    assert_success(&out);
    let ran = scene.ran();
    let fields: Vec<&str> = ran.trim_end().split('\t').collect();
    // SAFETY: getuid has no preconditions.
    assert_eq!(fields[0], format!("trusted uid={}", unsafe { libc::getuid() }), "{ran}");
    assert_eq!(fields[1], python.to_str().unwrap(), "argv[0] is the checked path: {ran}");
    let code = format!("import sys; sys.remote_exec({pid}, sys.argv[1])");
    assert_eq!(&fields[2..6], ["-I", "-S", "-c", code.as_str()], "{ran}");
    assert!(std::fs::read_to_string(fields[6]).unwrap().contains("gpuscope_probe.start()"));
}

#[test]
fn root_attaching_to_another_user_leaves_the_files_root_s_and_readable() {
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        eprintln!("the other-user case needs root, which CI has; this run is not root");
        return;
    }
    let trusted = trusted_dir();
    let python = trusted.path().join("python3.14");
    compile_fake(&python, "trusted");
    let scene = Scene::new();
    let job = spawn_as(&python, Some(65534));
    let out = scene.attach(job.id());
    stop(job);
    assert_success(&out);
    let ran = scene.ran();
    assert!(ran.starts_with("trusted uid=0\t"), "{ran}");
    let script = std::path::PathBuf::from(ran.trim_end().rsplit('\t').next().unwrap());
    let dir = script.parent().unwrap();
    assert!(dir.starts_with(&scene.tmp), "{}", dir.display());
    for (path, mode) in [(dir, 0o755), (&*script, 0o644), (&*dir.join("gpuscope_probe.py"), 0o644)] {
        let m = std::fs::symlink_metadata(path).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (0, mode), "{}", path.display());
    }
}

/// The attack issue 55 describes: a user's process runs from a binary they
/// deleted, in a directory they control, where `x (deleted)` is a link
/// they can flip to a root-owned interpreter. Root must run neither.
#[test]
fn root_never_runs_a_file_a_user_controls_and_a_refusal_leaves_nothing() {
    if !is_root() {
        eprintln!("the hostile-user cases need root to make a user's process, which CI has; this run is not root");
        return;
    }
    let trusted = trusted_dir();
    let root_python = trusted.path().join("python3.14");
    compile_fake(&root_python, "trusted");
    let home = tempfile::tempdir().unwrap();
    set_mode(home.path(), 0o755);
    let users = home.path().join("d");
    std::fs::create_dir(&users).unwrap();
    std::os::unix::fs::chown(&users, Some(65534), Some(65534)).unwrap();
    let says = |out: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(what), "{err}");
    };

    // Deleted, and its `(deleted)` name a link to root's interpreter.
    let x = users.join("x");
    compile_fake(&x, "users");
    std::os::unix::fs::chown(&x, Some(65534), Some(65534)).unwrap();
    let job = spawn_as(&x, Some(65534));
    std::fs::remove_file(&x).unwrap();
    std::os::unix::fs::symlink(&root_python, users.join("x (deleted)")).unwrap();
    let scene = Scene::new();
    let out = scene.attach(job.id());
    stop(job);
    says(&out, "not owned by root");
    assert_eq!(scene.ran(), "", "nothing ran");
    assert_eq!(scene.left_in_tmp(), Vec::<std::path::PathBuf>::new());

    // Root's own interpreter, but in a directory the user can change.
    let copy = users.join("python3.14");
    std::fs::copy(&root_python, &copy).unwrap();
    let job = spawn_as(&copy, Some(65534));
    let out = scene.attach(job.id());
    stop(job);
    says(&out, "is not a directory only root can change");
    assert_eq!(scene.ran(), "");
    assert_eq!(scene.left_in_tmp(), Vec::<std::path::PathBuf>::new());

    // A library named like libpython, preloaded into a program that is not
    // Python: the name proves nothing.
    let lib = users.join("libpython3.14.so.1.0");
    let src = users.join("empty.c");
    std::fs::write(&src, "int gpuscope_test_empty;\n").unwrap();
    assert!(Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&src).status().unwrap().success());
    let mut sleeper = Command::new("sleep");
    sleeper.arg("30").env("LD_PRELOAD", &lib).uid(65534).gid(65534);
    let job = sleeper.spawn().unwrap();
    let sleep = std::fs::canonicalize(which("sleep")).unwrap();
    wait_for_exe(job.id(), &sleep);
    let out = scene.attach(job.id());
    stop(job);
    says(&out, "is not a Python interpreter");
    assert_eq!(scene.left_in_tmp(), Vec::<std::path::PathBuf>::new());
}

fn which(name: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap()
}
