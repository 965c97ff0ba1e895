//! Alerts end to end: the real binary on the simulated NVML, with a probed
//! pretend trainer whose allocator figures the test changes while it runs.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{ChildStdout, Stdio};
use std::time::{Duration, Instant};

use common::trainer::{Trainer, python_trainer, wait_for_probe_file, write_script};
use common::{Sim, assert_valid};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UUID: &str = "5ea1c0de-0000-4000-8000-0000000000aa";

fn script(split: u64, retries: u64) -> Value {
    json!({
        "backend": "native",
        "devices": {"0": {"uuid": UUID, "alloc": {
            "allocated": 4 * GIB, "reserved": 10 * GIB, "inactive_split": split,
            "alloc_retries": retries, "ooms": 0,
        }}},
    })
}

/// Short windows so the test takes seconds, not minutes.
const FAST_CONFIG: &str = r#"
[alerts.fragmentation]
window = "1s"
min_samples = 3
"#;

struct Watch {
    lines: Lines<BufReader<ChildStdout>>,
    child: std::process::Child,
}

impl Watch {
    fn start(sim: &Sim, probe_dir: &Path, config: &Path) -> Self {
        Self::every("100ms", sim, probe_dir, config)
    }

    fn every(interval: &str, sim: &Sim, probe_dir: &Path, config: &Path) -> Self {
        let mut child = sim
            .gpuscope()
            .args(["--json", "--watch", "--interval", interval, "--config"])
            .arg(config)
            .env("GPUSCOPE_PROBE_DIR", probe_dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { lines, child }
    }

    /// Reads snapshots until `pred` holds; returns it and how many it took.
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> (Value, usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for n in 1.. {
            let v: Value = serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
            if pred(&v) {
                assert_valid(&v);
                return (v, n);
            }
            assert!(Instant::now() < deadline, "never saw: {what}; last: {:#}", v["alerts"]);
        }
        unreachable!()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn alert<'a>(v: &'a Value, kind: &str) -> Option<&'a Value> {
    v["alerts"].as_array().unwrap().iter().find(|a| a["kind"] == kind)
}

fn probed_world() -> (tempfile::TempDir, std::path::PathBuf, Trainer, Sim, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let script_path = dir.path().join("torch.json");
    write_script(&script_path, &script(GIB / 2, 0));
    let trainer = Trainer::start(&script_path, &probe_dir, python_trainer(&["--probe"]));
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);
    let sim = Sim::new(&format!("[[gpu]]\nuuid = \"GPU-{UUID}\"\n[[gpu.process]]\npid = {pid}\nused_mib = 11000\n"));
    let config = dir.path().join("config.toml");
    std::fs::write(&config, FAST_CONFIG).unwrap();
    (dir, probe_dir, trainer, sim, config)
}

#[test]
fn fragmentation_is_raised_with_its_hint_and_cleared_when_it_recovers() {
    let (dir, probe_dir, trainer, sim, config) = probed_world();
    let script_path = dir.path().join("torch.json");
    let mut watch = Watch::start(&sim, &probe_dir, &config);
    watch.until("the probe's figures", |v| v["processes"][0]["allocator"].is_object());

    write_script(&script_path, &script(4 * GIB, 0));
    let (v, _) = watch.until("fragmentation raised", |v| alert(v, "fragmentation").is_some());
    let a = alert(&v, "fragmentation").unwrap();
    assert_eq!(a["severity"], "warning");
    assert_eq!((a["gpu"].clone(), a["pid"].clone()), (json!(0), json!(trainer.child.id())));
    assert_eq!(a["threshold"], 0.3);
    assert!(a["hint"].as_str().unwrap().contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["change"] == "raised" && e["kind"] == "fragmentation"));

    write_script(&script_path, &script(GIB / 2, 0));
    let (v, _) = watch.until("fragmentation cleared", |v| alert(v, "fragmentation").is_none());
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["change"] == "cleared"));
}

#[test]
fn a_retry_rise_raises_alloc_retry_on_the_next_tick() {
    let (dir, probe_dir, _trainer, sim, config) = probed_world();
    let script_path = dir.path().join("torch.json");
    let mut watch = Watch::start(&sim, &probe_dir, &config);
    watch.until("the probe's figures", |v| v["processes"][0]["allocator"]["devices"][0]["alloc_retries"] == 0);

    write_script(&script_path, &script(GIB / 2, 1));
    let (v, _) = watch
        .until("the probe reporting the retry", |v| v["processes"][0]["allocator"]["devices"][0]["alloc_retries"] == 1);
    // The snapshot that first carries the rise carries the alert.
    let a = alert(&v, "alloc_retry").unwrap_or_else(|| panic!("no alert with the rise: {:#}", v["alerts"]));
    assert_eq!(a["severity"], "critical");
}

fn check(sim: &Sim, args: &[&str], config: &str) -> (Option<i32>, String) {
    let path = sim.dir.path().join("check.toml");
    std::fs::write(&path, config).unwrap();
    let out = sim
        .gpuscope()
        .arg("check")
        .args(["--for", "300ms", "--interval", "50ms", "--config"])
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn check_exit_codes_follow_the_worst_alert() {
    let healthy = Sim::new("[[gpu]]\nmemory_total_mib = 1000\nmemory_used_mib = 100\n");
    let (code, out) = check(&healthy, &[], "");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no alerts"), "{out}");

    // Nearly full for longer than the (shortened) duration: a warning.
    let full = Sim::new("[[gpu]]\nmemory_total_mib = 1000\nmemory_used_mib = 960\n");
    let quick = "[alerts.memory_pressure]\nduration = \"0s\"\n";
    let (code, out) = check(&full, &[], quick);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("WARNING memory_pressure") && out.contains("hint:"), "{out}");
    let (code, _) = check(&full, &["--fail-on", "oom,gpu_lost"], quick);
    assert_eq!(code, Some(0), "only the named kinds count");

    let lost = Sim::new("[[gpu]]\n[[gpu]]\nstate = \"lost\"\n");
    let (code, out) = check(&lost, &[], "");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("CRITICAL gpu_lost"), "{out}");
}

#[test]
fn the_table_shows_active_alerts_with_hints() {
    let sim = Sim::new("[[gpu]]\nstate = \"lost\"\n");
    let out = sim.gpuscope().arg("-1").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("CRITICAL gpu_lost") && text.contains("hint: Look for Xid errors"), "{text}");
    assert!(text.lines().all(|l| l.len() <= 80), "{text}");
}

/// GPU 0 busy with few SMs at work under a process; GPU 1 with busy SMs
/// and idle tensor cores. Needs the NVML side's GPM reading (the
/// simulator's `[gpu.gpm]`); windows shortened to seconds.
#[test]
fn activity_alerts_reach_the_json_and_the_hook() {
    let me = std::process::id();
    let sim = Sim::new(&format!(
        "[[gpu]]\nutilization_gpu = 98\n[[gpu.process]]\npid = {me}\nused_mib = 1000\n\
         [gpu.gpm]\ngraphics_util = 98\nsm_util = 5\nany_tensor_util = 2\n\
         [[gpu]]\nutilization_gpu = 90\n[gpu.gpm]\ngraphics_util = 90\nsm_util = 70\nany_tensor_util = 0\n"
    ));
    let hook = sim.dir.path().join("page-me");
    let log = sim.dir.path().join("paged");
    std::fs::write(&hook, format!("#!/bin/sh\ncat >> '{}'\necho >> '{}'\n", log.display(), log.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = sim.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[alerts]\nexec = [{:?}]\n[alerts.sm_idle]\nwindow = \"2s\"\n[alerts.tensor_idle]\nwindow = \"2s\"\n",
            hook.display().to_string()
        ),
    )
    .unwrap();
    // A GPM sample pair within one of the simulator's 100 ms refreshes
    // would read nothing new: ticks further apart.
    let mut watch = Watch::every("250ms", &sim, &sim.probe_dir(), &config);
    let (v, _) =
        watch.until("sm_idle and tensor_idle", |v| alert(v, "sm_idle").is_some() && alert(v, "tensor_idle").is_some());

    let a = alert(&v, "sm_idle").unwrap();
    assert_eq!((a["severity"].clone(), a["gpu"].clone(), a["pid"].clone()), (json!("warning"), json!(0), Value::Null));
    assert_eq!(a["threshold"], 25.0);
    let message = a["message"].as_str().unwrap();
    assert!(message.starts_with("GPU 0: utilisation 98% but SM activity 5% over 2s"), "{message}");
    assert!(a["hint"].as_str().unwrap().contains("CUDA graphs"), "{a:#}");
    let a = alert(&v, "tensor_idle").unwrap();
    assert_eq!((a["severity"].clone(), a["gpu"].clone()), (json!("info"), json!(1)));
    let message = a["message"].as_str().unwrap();
    assert!(message.starts_with("GPU 1: SM activity 70% but tensor cores 0.0% over 2s"), "{message}");
    let sm_idle = v["alerts"].as_array().unwrap().iter().filter(|a| a["kind"] == "sm_idle").count();
    assert_eq!(sm_idle, 1, "GPU 1 runs no process: no sm_idle there");

    // The hook runs beside collection: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let paged = loop {
        let paged = std::fs::read_to_string(&log).unwrap_or_default();
        if (paged.contains("\"kind\":\"sm_idle\"") && paged.contains("\"kind\":\"tensor_idle\""))
            || Instant::now() > deadline
        {
            break paged;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let kinds: Vec<String> = paged
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "sm_idle").count(), 1, "once per raise: {paged}");
    assert_eq!(kinds.iter().filter(|k| *k == "tensor_idle").count(), 1, "once per raise: {paged}");
}
