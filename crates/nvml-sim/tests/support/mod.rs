//! Harness for running checks against the built simulator.
//!
//! The scenario is named by an environment variable, and setting one while
//! the test harness runs other threads is unsound. So each scenario test
//! re-runs this test binary as a child, filtered to itself, with the
//! variable set through `Command::env`; the child does the checks on its
//! own copy of the `.so` (a separate dlopen, hence separate state).

#![allow(dead_code)] // Each test binary uses a different subset.

use std::ffi::c_uint;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gpuscope_nvml_sim::SCENARIO_ENV;
use libloading::{Library, Symbol};
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use tempfile::TempDir;

const CHILD_ENV: &str = "GPUSCOPE_SIM_TEST_CHILD";

/// Comfortably longer than the simulator's 10 ms re-check interval.
const RELOAD_WAIT: Duration = Duration::from_millis(60);

/// What a check running in the child gets.
pub struct Sim {
    pub lib: PathBuf,
    pub scenario: PathBuf,
    _dir: TempDir,
}

impl Sim {
    pub fn nvml(&self) -> Result<Nvml, NvmlError> {
        Nvml::builder().lib_path(self.lib.as_os_str()).init()
    }

    /// Replaces the scenario and waits until the simulator may notice.
    pub fn rewrite(&self, toml: &str) {
        std::thread::sleep(RELOAD_WAIT);
        fs::write(&self.scenario, toml).unwrap();
        std::thread::sleep(RELOAD_WAIT);
    }

    /// The same `.so` as `nvml()` uses, for calls nvml-wrapper cannot make.
    pub fn raw(&self) -> Raw {
        Raw::open(&self.lib)
    }
}

pub struct Raw(Library);

impl Raw {
    pub fn open(path: &Path) -> Raw {
        // SAFETY: the simulator's initialisers have no preconditions.
        Raw(unsafe { Library::new(path) }.unwrap())
    }

    /// Calls an exported `fn() -> nvmlReturn_t` by name.
    pub fn call0(&self, name: &str) -> c_uint {
        // SAFETY: `name` is one of the simulator's zero-argument functions.
        unsafe {
            let f: Symbol<unsafe extern "C" fn() -> c_uint> = self.0.get(name.as_bytes()).unwrap();
            f()
        }
    }

    pub fn device_count(&self) -> c_uint {
        let mut count = 0;
        // SAFETY: matches nvmlDeviceGetCount_v2's signature.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(*mut c_uint) -> c_uint> = self.0.get(b"nvmlDeviceGetCount_v2").unwrap();
            f(&mut count)
        }
    }

    pub fn busy_ns(&self) -> u64 {
        // SAFETY: matches gpuscope_sim_busy_ns's signature.
        unsafe {
            let f: Symbol<extern "C" fn() -> u64> = self.0.get(b"gpuscope_sim_busy_ns").unwrap();
            f()
        }
    }

    /// This copy's count of calls at `function`.
    pub fn call_count(&self, function: &str) -> u64 {
        let name = std::ffi::CString::new(function).unwrap();
        // SAFETY: matches gpuscope_sim_call_count's signature; `name` is
        // NUL-terminated.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u64> =
                self.0.get(b"gpuscope_sim_call_count").unwrap();
            f(name.as_ptr())
        }
    }

    pub fn has(&self, name: &str) -> bool {
        // SAFETY: only looks the symbol up.
        unsafe { self.0.get::<*const ()>(name.as_bytes()).is_ok() }
    }
}

/// `libgpuscope_nvml_sim.so` as cargo built it for this test run: beside
/// the test executable in `deps/` (cargo builds the cdylib there for the
/// package's tests), or one level up where `cargo build` puts it.
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [deps.join("libgpuscope_nvml_sim.so"), deps.parent().unwrap().join("libgpuscope_nvml_sim.so")];
    let found = candidates.iter().find(|p| p.exists());
    found.unwrap_or_else(|| panic!("the simulator library was not built; looked at {candidates:?}")).clone()
}

/// A private copy of the library, so this test has its own driver state.
pub fn fresh_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("libnvidia-ml.so");
    fs::copy(built_library(), &copy).unwrap();
    copy
}

/// Runs `check` in a child process with the scenario file holding
/// `scenario` (or missing, for `None`). `name` must be the calling test's
/// name. Returns, in the parent only, the child's stderr, which is where
/// the simulator reports scenario errors.
pub fn scenario_test(name: &str, scenario: Option<&str>, check: impl FnOnce(&Sim)) -> Option<String> {
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        let dir = tempfile::tempdir().unwrap();
        let sim =
            Sim { lib: fresh_copy(dir.path()), scenario: std::env::var_os(SCENARIO_ENV).unwrap().into(), _dir: dir };
        check(&sim);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.toml");
    if let Some(text) = scenario {
        fs::write(&path, text).unwrap();
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(SCENARIO_ENV, &path)
        .env(CHILD_ENV, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success() && stdout.contains("1 passed"), "child {name} failed:\n{stdout}\n{stderr}");
    Some(stderr)
}

/// The simulator's lines on stderr, without the test harness's chatter.
pub fn sim_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("gpuscope-nvml-sim:")).collect()
}
