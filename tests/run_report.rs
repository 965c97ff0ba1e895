//! `gpuscope run` as the job's parent: the job's exit status passed
//! through, signals sent on, and the end-of-job report against a scenario
//! whose power draw is known.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Sim;
use serde_json::Value;

/// GPU 0 runs the job (its PID from `pid_file`) at a constant 250 W; GPU
/// 1 idles at 70 W with nothing on it.
fn scenario(pid_file: &Path) -> String {
    format!(
        "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\npower_draw_w = 250\nenergy_at_init_mj = 9000000\n\
         utilization_gpu = 80\n\
         [[gpu.process]]\npid_file = {:?}\nused_mib = 2048\n\
         [[gpu]]\npower_draw_w = 70\n",
        pid_file.to_str().unwrap()
    )
}

fn run(sim: &Sim, args: &[&str], job: &str) -> Command {
    let mut cmd = sim.gpuscope();
    cmd.args(["--interval", "250ms", "run"]).args(args).args(["--", "sh", "-c", job]);
    cmd
}

fn output(mut cmd: Command) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).output().unwrap()
}

fn report_schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/run-report.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::options().build(&schema).unwrap()
}

#[test]
fn the_job_s_exit_status_is_gpuscope_s_and_a_death_by_signal_is_128_plus_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::new(&scenario(&dir.path().join("none")));
    for (job, status) in [("true", 0), ("exit 3", 3), ("kill -TERM $$", 128 + libc::SIGTERM)] {
        let out = output(run(&sim, &[], job));
        assert_eq!(out.status.code(), Some(status), "{job}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = output(run(&sim, &[], "kill -TERM $$"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("job ended, killed by signal 15 (exit 143)"), "{err}");
}

#[test]
fn a_sigterm_to_gpuscope_reaches_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::new(&scenario(&dir.path().join("none")));
    let ready = dir.path().join("ready");
    let job = format!("trap 'exit 42' TERM; echo $$ > {:?}; while :; do sleep 0.05; done", ready.to_str().unwrap());
    let child = run(&sim, &[], &job).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let job_pid: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&ready).ok().and_then(|s| s.trim().parse().ok()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_ne!(job_pid, child.id() as i32, "gpuscope stays the job's parent");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(42), "the job's trap ran: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_report_gives_the_job_s_gpu_hours_and_energy_from_the_counter() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("job.pid");
    let sim = Sim::new(&scenario(&pid_file));
    let report = dir.path().join("report.json");
    let job = format!("echo $$ > {:?}; exec sleep 3", pid_file.to_str().unwrap());
    let out = output(run(&sim, &["--report", report.to_str().unwrap()], &job));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");

    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let errors: Vec<String> =
        report_schema().iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}\n{v:#}");

    let duration = v["duration_s"].as_f64().unwrap();
    assert!((3.0..10.0).contains(&duration), "{duration}");
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "only the GPU the job ran on: {v:#}");
    let g = &gpus[0];
    assert_eq!((g["index"].as_u64(), g["shared"].as_bool()), (Some(0), Some(false)));
    assert!((v["gpu_hours"].as_f64().unwrap() - duration / 3600.0).abs() < 1e-9);
    // 250 W from the first sample (once the driver is open, a moment
    // after the job started) to the last (as it ended).
    let joules = g["energy_j"].as_f64().unwrap();
    assert!(joules <= 250.0 * (duration + 0.5) && joules >= 250.0 * (duration - 1.0), "{joules} J in {duration} s");
    assert!((v["energy_kwh"].as_f64().unwrap() - joules / 3.6e6).abs() < 1e-12);
    assert_eq!(g["mean_utilization_percent"].as_f64(), Some(80.0));
    assert_eq!(g["mean_sm_active_percent"], Value::Null, "no activity counters on this board");
    assert_eq!(v["ooms"], Value::Null, "no probe: unknown");
    assert_eq!(v["exit"]["code"], 0);
    assert!(err.contains("GPUs 0  0.00"), "{err}");
    assert!(err.contains("kWh"), "{err}");
}

#[test]
fn with_no_report_gpuscope_becomes_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::new(&scenario(&dir.path().join("none")));
    let child = run(&sim, &["--no-report"], "echo $$").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string(), "exec'd in place");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("job ended"));
}

#[test]
fn a_report_path_that_cannot_be_written_is_refused_before_the_job_starts() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::new(&scenario(&dir.path().join("none")));
    let marker = dir.path().join("ran");
    let job = format!("touch {}", marker.display());
    for (path, why) in
        [(dir.path().join("no/such/folder/r.json"), "no folder"), (dir.path().to_path_buf(), "is a directory")]
    {
        let out = output(run(&sim, &["--report", path.to_str().unwrap()], &job));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--report") && err.contains(why), "{err}");
        assert!(!marker.exists(), "the job must not have run");
    }
}

#[test]
fn without_a_driver_the_report_says_so_and_its_gpu_hours_are_null() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "run", "--report", report.to_str().unwrap()])
        .args(["--", "sh", "-c", "exit 3"])
        .env_remove("GPUSCOPE_NVML_LIB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(json["gpu_hours"].is_null() && json["unavailable"].is_string(), "{json}");
    assert!(report_schema().is_valid(&json));
}
