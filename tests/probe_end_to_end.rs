//! The allocator probe end to end: a Python process running the real probe
//! over a stand-in torch, listed by PID in the simulated NVML, read by the
//! real gpuscope binary.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::trainer::{Trainer, python_trainer, repo, wait_for_probe_file};
use common::{MIB, Sim, Sleeper, assert_success, assert_valid};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UUID: &str = "5ea1c0de-0000-4000-8000-000000000001";

/// The allocator as the stand-in torch will report it.
fn torch_script(dir: &Path) -> PathBuf {
    let script = json!({
        "version": "2.5.1",
        "backend": "native",
        "devices": {"0": {"uuid": UUID, "alloc": {
            "allocated": 4 * GIB, "allocated_peak": 6 * GIB,
            "reserved": 10 * GIB, "reserved_peak": 11 * GIB,
            "inactive_split": 3 * GIB, "segments": 40,
            "alloc_retries": 2, "ooms": 1,
        }}},
    });
    let path = dir.join("torch-script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

fn scenario(pids: &[(u32, u64)]) -> String {
    let mut s = format!("[[gpu]]\nuuid = \"GPU-{UUID}\"\nmemory_total_mib = 81559\n");
    for (pid, mib) in pids {
        s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = {mib}\n"));
    }
    s
}

fn process(v: &Value, pid: u32) -> &Value {
    v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap_or_else(|| panic!("{pid}: {v:#}"))
}

fn check_figures(v: &Value, pid: u32, nvml_mib: u64) {
    assert_valid(v);
    let a = &process(v, pid)["allocator"];
    assert_eq!(a["framework"], "torch");
    assert_eq!(a["framework_version"], "2.5.1");
    assert_eq!(a["backend"], "native");
    assert_eq!(a["alloc_conf"], "max_split_size_mb:512");
    assert_eq!((a["rank"].clone(), a["world_size"].clone()), (json!(0), json!(2)));
    assert_eq!(a["state"], "fresh");
    let d = &a["devices"][0];
    assert_eq!(d["gpu"], 0, "matched to NVML's GPU by UUID");
    assert_eq!(d["allocated"], 4 * GIB);
    assert_eq!(d["allocated_peak"], 6 * GIB);
    assert_eq!(d["reserved"], 10 * GIB);
    assert_eq!(d["reserved_peak"], 11 * GIB);
    assert_eq!(d["inactive_split"], 3 * GIB);
    assert_eq!(d["cached"], 6 * GIB);
    assert_eq!(d["overhead"], nvml_mib * MIB - 10 * GIB, "NVML used minus reserved");
    assert_eq!(d["fragmentation"], 0.3);
    assert_eq!((d["segments"].clone(), d["alloc_retries"].clone(), d["ooms"].clone()), (json!(40), json!(2), json!(1)));
    let totals = &v["gpus"][0]["allocator"];
    assert_eq!(totals["probed_processes"], 1);
    assert_eq!(totals["allocated"], 4 * GIB);
    assert_eq!(totals["overhead"], nvml_mib * MIB - 10 * GIB);
}

#[test]
fn imported_probe_figures_reach_the_json_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let cmd = python_trainer(&["--probe"]);
    let trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);

    let sim = Sim::new(&scenario(&[(pid, 12_000)]));
    let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_figures(&v, pid, 12_000);
    assert_eq!(v["sources"]["probes"]["files"], 1);
    assert_eq!(v["sources"]["probes"]["skipped"], 0);

    let table = sim.gpuscope().arg("-1").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("alloc 4.0 GiB  resv 10.0 GiB  frag 30%"), "{text}");
}

#[test]
fn gpuscope_run_injects_the_probe_without_code_change() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gpuscope"));
    cmd.args(["run", "--", "python3"]).arg(repo("tests/probe/standin/run_trainer.py"));
    // The probe's code goes to the runtime directory, wherever its figures go.
    cmd.env("XDG_RUNTIME_DIR", dir.path());
    let trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let pid = trainer.pid_of("main", 1);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let parent: u32 = stat.rsplit_once(") ").unwrap().1.split(' ').nth(1).unwrap().parse().unwrap();
    assert_eq!(parent, trainer.child.id(), "gpuscope run stays the command's parent, to report at its end");
    wait_for_probe_file(&probe_dir, pid);
    assert!(dir.path().join("gpuscope/python/sitecustomize.py").exists());

    let sim = Sim::new(&scenario(&[(pid, 11_000)]));
    let v = {
        let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
        assert_success(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    check_figures(&v, pid, 11_000);
}

#[test]
fn forked_workers_stay_silent_and_a_spawned_rank_publishes_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let cmd = python_trainer(&["--probe", "--fork", "--spawn-rank1"]);
    let trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let (main, fork, spawn) = (trainer.pid_of("main", 3), trainer.pid_of("fork", 3), trainer.pid_of("spawn", 3));
    wait_for_probe_file(&probe_dir, main);
    wait_for_probe_file(&probe_dir, spawn);
    // Many probe intervals: a forked worker that were going to publish would have.
    std::thread::sleep(Duration::from_millis(600));

    let sim = Sim::new(&scenario(&[(main, 12_000), (fork, 600), (spawn, 12_000)]));
    let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(process(&v, main)["allocator"]["rank"], 0);
    assert_eq!(process(&v, spawn)["allocator"]["rank"], 1);
    assert_eq!(process(&v, fork)["allocator"], Value::Null);
    assert_eq!(v["gpus"][0]["allocator"]["probed_processes"], 2);
    assert_eq!(v["gpus"][0]["allocator"]["unprobed"], 600 * MIB);
}

/// The loop's own measurement (run_trainer.py --loop-report), once it
/// covers `seconds`.
fn loop_report(path: &Path, seconds: f64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if let Some(v) = found.filter(|v| v["window_s"].as_f64().unwrap_or(0.0) >= seconds) {
            return v;
        }
        assert!(Instant::now() < deadline, "the trainer's loop never reported");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_wait_for_data_reaches_the_json_as_the_loop_measures_it() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let report = dir.path().join("loop.json");
    // Two workers take 2 x 20 ms per batch of two: a batch every 20 ms
    // against a 12 ms step, so the loop waits about 40 % of the time.
    let spec = r#"{"num_workers": 2, "fetch_s": 0.02, "batch_size": 2, "step_s": 0.012, "item_bytes": 65536,
                   "persistent_workers": true}"#;
    let cmd = python_trainer(&["--probe", "--loader", spec, "--loop-report", report.to_str().unwrap()]);
    let trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let pid = trainer.pid_of("main", 3);
    let workers: Vec<u32> = trainer.pids(3).into_iter().filter(|(r, _)| r == "worker").map(|(_, p)| p).collect();
    wait_for_probe_file(&probe_dir, pid);
    let measured = loop_report(&report, 6.0);

    let sim = Sim::new(&scenario(&[(pid, 12_000)]));
    let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    let p = process(&v, pid);
    let input = &p["input"];
    assert_eq!(input["hooked"], true);
    let loader = &input["loaders"][0];
    let share = loader["wait_share"].as_f64().unwrap_or_else(|| panic!("no wait share: {loader:#}"));
    let loop_share = measured["wait_share"].as_f64().unwrap();
    assert!((share - loop_share).abs() <= 0.05, "gpuscope {share} against the loop's own {loop_share}");
    assert!((0.3..=0.5).contains(&share), "about 40 %: {share}");
    let rate = loader["batches_per_s"].as_f64().unwrap();
    let loop_rate = measured["batches_per_s"].as_f64().unwrap();
    assert!((rate - loop_rate).abs() <= loop_rate * 0.15, "{rate} batches/s against the loop's {loop_rate}");
    assert_eq!((loader["num_workers"].clone(), loader["prefetch_factor"].clone()), (json!(2), json!(2)));
    assert_eq!((loader["persistent_workers"].clone(), loader["pin_memory"].clone()), (json!(true), json!(false)));
    assert_eq!(loader["worker_pids"], json!(workers), "the trainer's own workers");
    assert_eq!(loader["batch_bytes"], 2 * 65536);
    assert_eq!(loader["shm_need"], 2 * 65536 * (2 * 2 + 2));
    let shm = &input["shm"];
    assert!(shm["total"].as_u64().unwrap() > 0 && shm["used"].is_u64(), "{shm}");
    assert_eq!(shm["sharing_strategy"], "file_descriptor");
    let env = &p["environment"];
    assert_eq!((env["torch_version"].clone(), env["cuda_version"].clone()), (json!("2.5.1"), json!("12.1")));
    assert_eq!(env["devices"][0], json!({"ordinal": 0, "capability": "9.0", "arch_supported": true}));
}

#[test]
fn a_killed_process_disappears_and_a_recycled_pid_inherits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let cmd = python_trainer(&["--probe"]);
    let mut trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let pid = trainer.pid_of("main", 1);
    let file = wait_for_probe_file(&probe_dir, pid);
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();

    // A live process whose PID once belonged to a probed process (or to
    // one in another PID namespace: nothing tells them apart).
    let sleeper = Sleeper::spawn(&["60"]);
    let mut forged = good.clone();
    forged["pid"] = sleeper.pid().into();
    forged["start_ticks"] = 1.into();
    // Without the namespace the probe records, nothing proves it gone.
    forged.as_object_mut().unwrap().remove("pid_ns");
    let forged_path = probe_dir.join(format!("{}-1.json", sleeper.pid()));
    std::fs::write(&forged_path, forged.to_string()).unwrap();
    // With it (ours), the same PID and another start time prove it ended.
    let mut claimed = good.clone();
    claimed["pid"] = sleeper.pid().into();
    claimed["start_ticks"] = 2.into();
    let claimed_path = probe_dir.join(format!("{}-2.json", sleeper.pid()));
    std::fs::write(&claimed_path, claimed.to_string()).unwrap();

    // NVML still lists both PIDs (the driver can lag a process's exit).
    let sim = Sim::new(&scenario(&[(pid, 12_000), (sleeper.pid(), 100)]));
    let mut watch = sim
        .gpuscope()
        .args(["--json", "--watch", "--interval", "100ms"])
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = || serde_json::from_str::<Value>(&lines.next().unwrap().unwrap()).unwrap();
    // Seen running first: only then is its file gpuscope's to remove.
    let deadline = Instant::now() + Duration::from_secs(20);
    while process(&next(), pid)["allocator"]["state"] != "fresh" {
        assert!(Instant::now() < deadline, "the probed process was never seen running");
    }
    trainer.child.kill().unwrap();
    trainer.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = next();
        assert_eq!(process(&v, sleeper.pid())["allocator"], Value::Null, "a recycled PID inherits nothing");
        let state = &process(&v, pid)["allocator"]["state"];
        assert!(state == "fresh" || state == "gone" || state.is_null(), "{state}");
        if state.is_null() {
            assert!(v["sources"]["probes"]["skipped"].as_u64().unwrap() >= 1, "the forged file is counted");
            break;
        }
        assert!(Instant::now() < deadline, "the killed process never went: {v}");
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(!file.exists(), "the file of the process seen running, then killed, is removed");
    assert!(forged_path.exists(), "a file whose process was never seen running is left in place");
    assert!(!claimed_path.exists(), "a file of this namespace whose PID runs another process is removed");
}

#[test]
fn files_from_another_pid_namespace_are_left_in_place() {
    let sim = Sim::new("[[gpu]]\n");
    let dir = sim.probe_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    // What a probe in a container sharing the directory writes: its own
    // PIDs, which here are another process (PID 1, started at another
    // time) or none at all.
    let files: Vec<PathBuf> = [(1u32, 987_654_321u64), (4_100_000, 5)]
        .iter()
        .map(|&(pid, ticks)| {
            let path = dir.join(format!("{pid}-{ticks}.json"));
            std::fs::write(&path, good_file(pid, ticks).to_string()).unwrap();
            path
        })
        .collect();
    let out = sim.gpuscope().args(["--json", "--watch", "--count", "3", "--interval", "50ms"]).output().unwrap();
    assert_success(&out);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let probes = &v["sources"]["probes"];
        assert_eq!(probes["skipped"], 2, "{probes}");
        assert!(probes["last_skipped"].as_str().unwrap().contains("left in place"), "{probes}");
    }
    for f in &files {
        assert!(f.exists(), "{} was removed", f.display());
    }
}

#[test]
fn hostile_probe_files_are_counted_not_fatal() {
    let sim = Sim::new("[[gpu]]\n");
    let dir = sim.probe_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let me = std::process::id();
    let ticks = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    let ticks: u64 = ticks[ticks.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap();
    let valid = good_file(me, ticks);
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = valid.clone();
        f(&mut v);
        v.to_string()
    };
    let mut bad: Vec<(String, Vec<u8>)> = vec![
        ("garbage".into(), b"\x00\xff{{{ not json".to_vec()),
        ("truncated".into(), valid.to_string().as_bytes()[..40].to_vec()),
        ("ten megabytes".into(), vec![b' '; 10 << 20]),
        ("NaN".into(), valid.to_string().replace("\"interval_s\":1.0", "\"interval_s\":NaN").into_bytes()),
        ("negative".into(), with(&|v| v["devices"][0]["reserved"] = json!(-1)).into_bytes()),
        ("wrong type".into(), with(&|v| v["devices"] = json!("all of them")).into_bytes()),
        ("escape codes".into(), b"\x1b[2J\x07\x1b]0;owned\x07".to_vec()),
    ];
    let loaders = json!({"loaders": vec![json!({"id": 1}); 17]});
    bad.push(("more loaders than a probe writes".into(), with(&|v| v["input"] = loaders.clone()).into_bytes()));
    // Named for this process but claiming another's PID.
    bad.push(("claims another PID".into(), with(&|v| v["pid"] = json!(1)).into_bytes()));
    for (i, (_, bytes)) in bad.iter().enumerate() {
        let name =
            if i == bad.len() - 1 { format!("{me}-{ticks}.json") } else { format!("{}-{}.json", 4_000_000 + i, i) };
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", dir.join("9-9.json")).unwrap();
    let mut expected = bad.len() + 1;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root can make a file that belongs to someone else: it must be
        // refused even though it is well formed.
        let foreign = dir.join("10-10.json");
        std::fs::write(&foreign, good_file(10, 10).to_string()).unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        expected += 1;
    }
    let out = sim.gpuscope().args(["--json", "--watch", "--count", "2", "--interval", "50ms"]).output().unwrap();
    assert_success(&out);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_valid(&v);
        let probes = &v["sources"]["probes"];
        assert_eq!(probes["ok"], true);
        assert_eq!(probes["skipped"], expected, "each bad file counted once: {probes}");
        assert!(probes["last_skipped"].is_string());
        assert!(v["processes"].as_array().unwrap().is_empty(), "nothing hostile becomes a process");
    }
}

/// A well-formed probe file for `pid`, as the probe writes them.
fn good_file(pid: u32, ticks: u64) -> Value {
    json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": ticks, "seq": 1,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": null, "alloc_conf_var": null,
        "expandable_segments": false, "rank": null, "local_rank": null, "world_size": null, "pinned_host": null,
        "devices": [{"index": 0, "uuid": null, "allocated": 1, "allocated_peak": 1, "reserved": 2,
            "reserved_peak": 2, "active": 1, "active_peak": 1, "inactive_split": 0, "inactive_split_peak": 0,
            "requested": 1, "requested_peak": 1, "segments": 1, "alloc_retries": 0, "ooms": 0,
            "device_allocs": 1, "device_frees": 0, "largest_free_block": null, "bytes_limit": null}]
    })
}

/// A job without DataLoader workers that waits for its data: the `starved`
/// alert and `gpuscope doctor` name the cause (num_workers=0) with the
/// figures, and doctor's JSON follows its schema; exit 1 for a warning.
#[test]
fn doctor_and_the_starved_alert_name_why_a_job_waits_for_data() {
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    // No workers: the loop fetches each 20 ms batch itself against a 40 ms
    // step, and so waits about a third of the time: a warning (from 20 %),
    // not critical (from 50 %).
    let spec = r#"{"num_workers": 0, "fetch_s": 0.02, "batch_size": 1, "step_s": 0.04, "item_bytes": 4096}"#;
    let cmd = python_trainer(&["--probe", "--loader", spec]);
    let trainer = Trainer::start(&torch_script(dir.path()), &probe_dir, cmd);
    let pid = trainer.pid_of("main", 1);
    wait_for_probe_file(&probe_dir, pid);
    std::thread::sleep(Duration::from_secs(3));
    let sim = Sim::new(&scenario(&[(pid, 12_000)]));

    let v: Value = {
        let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let starved = v["alerts"].as_array().unwrap().iter().find(|a| a["kind"] == "starved");
    let starved = starved.unwrap_or_else(|| panic!("no starved alert: {:#}", v["alerts"]));
    let message = starved["message"].as_str().unwrap();
    assert!(message.contains(&format!("PID {pid} waits for data")) && message.contains("num_workers=0"), "{message}");
    assert!(starved["hint"].as_str().unwrap().contains("num_workers"), "{starved}");

    let out = sim.gpuscope().args(["doctor", "--json"]).env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../assets/doctor.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&report), "{report:#}");
    assert_eq!(report["pids"], json!([pid]));
    let findings = report["findings"].as_array().unwrap();
    let f = findings.iter().find(|f| f["code"] == "data_wait").unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!((f["severity"].clone(), f["pid"].clone()), (json!("warning"), json!(pid)));
    assert!(f["evidence"].as_str().unwrap().contains("num_workers=0"), "{f}");
    // The stand-in's script also reports an OOM: critical, listed first,
    // and the exit code is the worst finding's.
    let critical = findings.iter().any(|f| f["severity"] == "critical");
    assert_eq!(findings[0]["severity"], if critical { "critical" } else { "warning" });
    assert_eq!(out.status.code(), Some(if critical { 2 } else { 1 }), "{}", String::from_utf8_lossy(&out.stderr));
    let text = sim.gpuscope().arg("doctor").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("[WARNING]") && text.contains("fix: Set DataLoader(num_workers=N)"), "{text}");
}
