//! `gpuscope serve` over HTTP: the real binary on the simulated NVML,
//! checked by promtool, the snapshot schema, and its own exit codes.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use common::{MIB, Sim, Sleeper, assert_valid};
use serve_common::{Server, get, promtool_check, sample};

/// A process whose command line needs escaping and cutting.
fn odd_process() -> Sleeper {
    let long = format!("--out=C:\\runs\\{}", "x".repeat(80));
    // The interpreter itself, not a wrapper script (pyenv) that would be
    // the process NVML lists.
    let python = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    let child = Command::new(String::from_utf8(python.stdout).unwrap().trim())
        .arg0("python3")
        .args(["-c", "import time; time.sleep(120)", "say \"hi\"", &long])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Sleeper(child)
}

fn scenario(pids: &[u32]) -> String {
    let mut s = String::from("[[gpu]]\nuuid = \"GPU-5ea1\"\nmemory_total_mib = 81559\nmemory_used_mib = 20000\n");
    for pid in pids {
        // Busy: NVML's newer per-process call lists only processes that
        // used the GPU in its last period.
        s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = 6000\nsm_util = 10\n"));
    }
    s + "[[gpu]]\nstate = \"lost\"\n"
}

fn serve(sim: &Sim) -> Server {
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "100ms"]);
    server.until("/healthz", "a first snapshot", |r| r.status == 200);
    server
}

#[test]
fn metrics_pass_promtool_and_carry_the_scenario() {
    let (sleeper, odd) = (Sleeper::spawn(&["120"]), odd_process());
    let sim = Sim::new(&scenario(&[sleeper.pid(), odd.pid()]));
    let server = serve(&sim);
    let pid = odd.pid();
    let r = server.until("/metrics", "both processes", |r| r.body.contains(&format!("pid=\"{pid}\"")));
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));

    promtool_check(&r.body);

    let m = &r.body;
    assert_eq!(sample(m, "gpuscope_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-5ea1\"}"), Some((20_000 * MIB) as f64));
    // The readings nvidia-smi users query, through promtool too.
    assert_eq!(sample(m, "gpuscope_gpu_ecc_uncorrected_volatile_errors_total{gpu=\"0\",uuid=\"GPU-5ea1\"}"), Some(0.0));
    assert_eq!(sample(m, "gpuscope_gpu_persistence_mode{gpu=\"0\",uuid=\"GPU-5ea1\"}"), Some(1.0));
    assert!(m.contains("gpuscope_process_sm_utilization_ratio{gpu=\"0\",pid="), "{m}");
    assert_eq!(sample(m, "gpuscope_gpu_lost{gpu=\"1\"}"), Some(1.0));
    assert_eq!(sample(m, "gpuscope_alert_active{kind=\"gpu_lost\",severity=\"critical\",gpu=\"1\"}"), Some(1.0));
    let sleeper_series = format!("gpuscope_process_gpu_memory_bytes{{gpu=\"0\",pid=\"{}\",", sleeper.pid());
    let line = m.lines().find(|l| l.starts_with(&sleeper_series)).unwrap_or_else(|| panic!("{m}"));
    assert!(line.contains("command=\"sleep 120\"") && line.ends_with(&format!(" {}", 6000 * MIB)), "{line}");
    let odd_line = m.lines().find(|l| l.contains(&format!("pid=\"{pid}\""))).unwrap();
    let command = odd_line.split("command=\"").nth(1).unwrap().split("\"}").next().unwrap();
    let unescaped = command.replace("\\\"", "\"").replace("\\\\", "\\");
    assert!(unescaped.starts_with("python3 -c import time; time.sleep(120) say \"hi\" --out=C:\\r"), "{command}");
    assert!(unescaped.ends_with('…') && unescaped.chars().count() == 60, "cut to 60 characters: {command}");
    assert_eq!(sample(m, "gpuscope_nvml_errors_total"), Some(0.0));
    assert!(sample(m, "gpuscope_snapshot_age_seconds").is_some_and(|age| (0.0..30.0).contains(&age)));

    let om = get(server.addr, "/metrics", Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"));
    assert_eq!(om.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    assert!(om.body.ends_with("\n# EOF\n") && om.body.contains("\n# TYPE gpuscope_nvml_errors counter\n"));
}

#[test]
fn snapshot_is_the_json_and_healthz_says_ok() {
    let sim = Sim::new(&scenario(&[]));
    let server = serve(&sim);
    let r = server.get("/snapshot");
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")));
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_valid(&v);
    assert_eq!(v["gpus"][0]["memory"]["used"], 20_000 * MIB);
    let health = server.get("/healthz");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    assert_eq!(server.get("/nothing-here").status, 404);
}

#[test]
fn ended_processes_leave_no_series_and_a_stuck_driver_fails_healthz() {
    let (gone, stays) = (Sleeper::spawn(&["120"]), Sleeper::spawn(&["120"]));
    let sim = Sim::new(&scenario(&[gone.pid(), stays.pid()]));
    let server = serve(&sim);
    let gone_label = format!("pid=\"{}\"", gone.pid());
    server.until("/metrics", "the first process", |r| r.body.contains(&gone_label));
    sim.rewrite(&scenario(&[stays.pid()]));
    let r = server.until("/metrics", "its series gone", |r| !r.body.contains(&gone_label));
    assert!(r.body.contains(&format!("pid=\"{}\"", stays.pid())));

    // Every driver call now takes longer than the 3 intervals healthz allows.
    sim.rewrite(&format!("call_delay_ms = 400\n{}", scenario(&[stays.pid()])));
    let stale = server.until("/healthz", "a stale snapshot", |r| r.status == 503);
    assert!(stale.body.starts_with("stale: the newest snapshot is"), "{}", stale.body);
    assert_eq!(server.get("/metrics").status, 200, "scrapes still answer from the last snapshot");
    sim.rewrite(&scenario(&[stays.pid()]));
    server.until("/healthz", "fresh snapshots again", |r| r.status == 200);
}

#[test]
fn sigterm_and_sigint_stop_it_cleanly() {
    let sim = Sim::new(&scenario(&[]));
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let server = serve(&sim);
        let status = server.stop_with(sig);
        assert_eq!(status.code(), Some(0), "signal {sig}: {status:?}");
    }
}

#[test]
fn a_taken_address_is_one_error_line_and_exit_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let sim = Sim::new(&scenario(&[]));
    let out = sim.gpuscope().args(["serve", "--listen", &addr]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with(&format!("gpuscope: cannot listen on {addr}: ")), "{stderr}");
}

#[test]
fn a_non_loopback_address_works_with_a_warning() {
    let sim = Sim::new(&scenario(&[]));
    let server = Server::start(sim.gpuscope(), &["--listen", "0.0.0.0:0", "--interval", "100ms"]);
    server.until("/healthz", "a first snapshot", |r| r.status == 200);
    let stderr = server.stderr();
    assert!(stderr.contains("warning: 0.0.0.0:0 is not a loopback address") && stderr.contains("users"), "{stderr}");
}

/// `serve --demo` says the GPUs are made up, on start and in `/metrics`,
/// where a dashboard or an alert can tell them from a real node's.
#[test]
fn the_demo_says_its_gpus_are_simulated() {
    let server = Server::start(common::gpuscope(), &["--demo", "--listen", "127.0.0.1:0", "--interval", "100ms"]);
    assert!(server.stderr().contains("the GPUs are simulated (--demo)"), "{}", server.stderr());
    let metrics = server.until("/metrics", "GPU figures", |r| r.body.contains("gpuscope_gpu_info"));
    assert_eq!(sample(&metrics.body, "gpuscope_simulated"), Some(1.0), "{}", metrics.body);
    let real = serve(&Sim::new(&scenario(&[])));
    let metrics = real.until("/metrics", "GPU figures", |r| r.body.contains("gpuscope_gpu_info"));
    assert_eq!(sample(&metrics.body, "gpuscope_simulated"), Some(0.0));
    assert!(!real.stderr().contains("simulated"), "{}", real.stderr());
}
