//! Shared test harness: a private copy of the simulated NVML per test (its
//! own state), scenario files, real child processes to list as GPU users,
//! and the real `gpuscope` binary.
#![allow(dead_code)]

pub mod trainer;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

pub struct Sim {
    pub dir: tempfile::TempDir,
    pub lib: PathBuf,
    pub scenario: PathBuf,
}

impl Sim {
    /// A simulator that logs each NVML call's name, a line each, to the
    /// returned file.
    pub fn logged(scenario: &str) -> (Self, PathBuf) {
        let sim = Self::new("");
        let log = sim.dir.path().join("calls.log");
        sim.rewrite(&format!("call_log = {:?}\n{scenario}", log.to_str().unwrap()));
        (sim, log)
    }

    pub fn new(scenario: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnvidia-ml.so.1");
        std::fs::copy(env!("GPUSCOPE_SIM_LIB"), &lib).unwrap();
        let scenario_path = dir.path().join("scenario.toml");
        std::fs::write(&scenario_path, scenario).unwrap();
        Self { dir, lib, scenario: scenario_path }
    }

    /// Where this test's probes write: private to the test.
    pub fn probe_dir(&self) -> PathBuf {
        self.dir.path().join("gpuscope").join("probes")
    }

    /// Replaces the scenario the way an editor would: write aside, rename.
    pub fn rewrite(&self, scenario: &str) {
        let tmp = self.dir.path().join("scenario.toml.new");
        std::fs::write(&tmp, scenario).unwrap();
        std::fs::rename(&tmp, &self.scenario).unwrap();
    }

    /// `gpuscope` with this library and scenario, and no user config.
    pub fn gpuscope(&self) -> Command {
        let mut cmd = gpuscope();
        cmd.arg("--nvml-lib")
            .arg(&self.lib)
            // The simulator lists this namespace's PIDs, wherever the tests run.
            .env("GPUSCOPE_PID_NAMESPACE", "host")
            .env("GPUSCOPE_SIM_SCENARIO", &self.scenario)
            .env("GPUSCOPE_PROBE_DIR", self.probe_dir())
            // What gpuscope keeps for the boot (the boards' maximum
            // clocks) stays with the test too.
            .env("XDG_RUNTIME_DIR", self.dir.path());
        cmd
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.gpuscope().arg("--json").args(args).output().unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The binary, isolated from the developer's own config and environment.
pub fn gpuscope() -> Command {
    let mut cmd = Command::cargo_bin("gpuscope").unwrap();
    let home = std::env::temp_dir().join("gpuscope-test-no-config");
    cmd.env("XDG_CONFIG_HOME", &home)
        .env_remove("GPUSCOPE_NVML_LIB")
        .env_remove("GPUSCOPE_SIM_SCENARIO")
        .env_remove("GPUSCOPE_PID_NAMESPACE")
        .env("GPUSCOPE_PROBE_DIR", home.join("no-probes"))
        .stdin(Stdio::null());
    cmd
}

pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A real process, so the host side has something to find; killed on drop.
pub struct Sleeper(pub Child);

impl Sleeper {
    pub fn spawn(args: &[&str]) -> Self {
        Self(Command::new("sleep").args(args).stdin(Stdio::null()).spawn().unwrap())
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn schema_validator() -> jsonschema::Validator {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/snapshot.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    jsonschema::options().should_validate_formats(true).build(&schema).unwrap()
}

pub fn assert_valid(v: &Value) {
    let validator = schema_validator();
    let errors: Vec<String> = validator.iter_errors(v).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "schema violations:\n{}\n{v:#}", errors.join("\n"));
}

pub const MIB: u64 = 1 << 20;

/// How often the simulator's call log (`Sim::logged`) names `function`.
pub fn calls_to(log: &Path, function: &str) -> usize {
    std::fs::read_to_string(log).unwrap().lines().filter(|l| *l == function).count()
}
