//! Issue 59 end to end: an Xid the simulated driver delivers reaches the
//! JSON stream, the alerts, `/metrics` and a recording; the health verdict
//! decides `check --health`'s exit, for Slurm and for node-problem-detector.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Sim, assert_success, assert_valid, gpuscope};
use serde_json::Value;
use serve_common::{Server, sample};

/// GPU 0 falls off the bus one second in (Xid 79, critical); GPU 1 has an
/// application fault (Xid 13, a warning) at the same time.
const XID_AT_1S: &str = r#"
driver_version = "570.86.15"
[[gpu]]
uuid = "GPU-00000000-0000-0000-0000-00000000e079"
[[gpu.event]]
at_s = 1.0
type = "xid"
xid = 79
[[gpu]]
[[gpu.event]]
at_s = 1.0
type = "xid"
xid = 13
"#;

const REMAP_FAILED: &str = r#"
driver_version = "570.86.15"
[[gpu]]
[[gpu]]
remapped_rows = { correctable = 3, uncorrectable = 1, pending = false, failure = true }
"#;

const HEALTHY: &str = "driver_version = \"570.86.15\"\n[[gpu]]\n[[gpu]]\n";

fn alert<'a>(snap: &'a Value, kind: &str, gpu: u64) -> Option<&'a Value> {
    snap["alerts"].as_array()?.iter().find(|a| a["kind"] == kind && a["gpu"] == gpu)
}

#[test]
fn an_xid_scripted_at_one_second_reaches_the_json_stream_with_its_meaning_and_action() {
    let sim = Sim::new(XID_AT_1S);
    let mut child = sim
        .gpuscope()
        .args(["--json", "--watch", "--interval", "200ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let snap = loop {
        let line = lines.next().expect("the stream ended").unwrap();
        let snap: Value = serde_json::from_str(&line).unwrap();
        assert!(started.elapsed() < Duration::from_secs(15), "no Xid within 15 s: {snap}");
        let heard = |gpu: usize| snap["gpus"][gpu]["driver_events"].as_array().is_some_and(|e| !e.is_empty());
        if heard(0) && heard(1) {
            break snap;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_valid(&snap);
    assert_eq!(snap["sources"]["driver_events"]["listening"], true, "{}", snap["sources"]);
    let event = &snap["gpus"][0]["driver_events"][0];
    assert_eq!((&event["kind"], &event["xid"], &event["severity"]), (&"xid".into(), &79.into(), &"critical".into()));
    assert_eq!(event["mnemonic"], "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
    assert_eq!(event["action"], "reboot_node");
    assert_eq!(snap["gpus"][0]["xid_counts"], serde_json::json!([{ "xid": 79, "count": 1 }]));
    let xid = alert(&snap, "xid", 0).unwrap_or_else(|| panic!("no xid alert: {}", snap["alerts"]));
    assert_eq!(xid["severity"], "critical");
    let (message, hint) = (xid["message"].as_str().unwrap(), xid["hint"].as_str().unwrap());
    assert!(message.contains("Xid 79") && message.contains("fallen off the bus"), "{message}");
    assert!(hint.starts_with("Drain the node and reboot it") && hint.contains("docs.nvidia.com"), "{hint}");
    assert_eq!(snap["gpus"][0]["health"]["verdict"], "critical");
    // GPU 1's Xid 13 is the application's fault: a warning, the board ok.
    let app = alert(&snap, "xid", 1).unwrap_or_else(|| panic!("no xid alert on GPU 1: {}", snap["alerts"]));
    assert_eq!(app["severity"], "warning");
    assert!(app["hint"].as_str().unwrap().starts_with("Restart the application"), "{app}");
    assert_eq!(snap["gpus"][1]["health"]["verdict"], "ok");
}

#[test]
fn the_exporter_counts_xids_by_gpu_and_xid_and_gives_the_health() {
    let sim = Sim::new(XID_AT_1S);
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let uuid = "GPU-00000000-0000-0000-0000-00000000e079";
    let counted = format!("gpuscope_gpu_xid_errors_total{{gpu=\"0\",uuid=\"{uuid}\",xid=\"79\"}}");
    let r = server.until("/metrics", "the Xid counted", |r| sample(&r.body, &counted).is_some());
    assert_eq!(sample(&r.body, &counted), Some(1.0));
    assert_eq!(sample(&r.body, &format!("gpuscope_gpu_health{{gpu=\"0\",uuid=\"{uuid}\"}}")), Some(2.0));
    assert!(r.body.contains("reason=\"xid\",severity=\"critical\"} 1"), "{}", r.body);
    assert_eq!(sample(&r.body, "gpuscope_driver_events_listening"), Some(1.0));
    assert!(r.body.contains("gpuscope_alert_active{kind=\"xid\",severity=\"critical\",gpu=\"0\"} 1"), "{}", r.body);
    server.stop_with(libc::SIGTERM);
}

fn check(sim: &Sim, args: &[&str]) -> (i32, String) {
    let out = sim.gpuscope().arg("check").args(args).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn check_health_fails_a_node_whose_memory_can_no_longer_be_remapped() {
    let bad = Sim::new(REMAP_FAILED);
    let began = Instant::now();
    let (code, text) = check(&bad, &["--health"]);
    assert!(began.elapsed() < Duration::from_secs(5), "one snapshot: fit for a prolog and NPD's 5 s");
    assert_eq!(code, 2, "{text}");
    assert!(text.starts_with("health CRITICAL: 1 critical"), "{text}");
    assert!(text.contains(": CRITICAL row_remap_failed: a row remapping failed"), "{text}");
    let (code, text) = check(&bad, &["--health", "--npd"]);
    assert_eq!(code, 1, "node-problem-detector's NonOK: {text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.trim_end().len() <= 80 && text.starts_with("critical GPU 1: a row remapping failed"), "{text}");

    let good = Sim::new(HEALTHY);
    let (code, text) = check(&good, &["--health"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("health OK: 0 critical, 0 warning, 2 ok of 2 GPU(s)"), "{text}");
    assert_eq!(check(&good, &["--health", "--npd"]), (0, "2 GPU(s) healthy\n".into()));
}

#[test]
fn a_gpu_without_events_is_said_once_and_the_others_still_listen() {
    let sim = Sim::new("[[gpu]]\n[[gpu]]\nunsupported = [\"events\"]\n");
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", "300ms", "--count", "4"]).output().unwrap();
    assert_success(&out);
    let last: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
    let status = &last["sources"]["driver_events"];
    assert_eq!(status["listening"], true, "{status}");
    let why = status["unavailable"].as_str().unwrap();
    assert!(why.starts_with("GPU 1:") && why.contains("no Xid events"), "{why}");
    let unchecked = |gpu: usize| last["gpus"][gpu]["health"]["unchecked"].as_array().unwrap().clone();
    assert!(unchecked(1).contains(&"xid".into()), "GPU 1 is not heard: {:?}", unchecked(1));
    assert!(!unchecked(0).contains(&"xid".into()), "GPU 0 is: {:?}", unchecked(0));
    assert_eq!(status["not_on"], serde_json::json!([last["gpus"][1]["uuid"]]));

    let none = Sim::new("[[gpu]]\nunsupported = [\"events\"]\n");
    let out = none.gpuscope().args(["--json", "--watch", "--interval", "300ms", "--count", "4"]).output().unwrap();
    let last: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["sources"]["driver_events"]["listening"], false);
    let unchecked = last["gpus"][0]["health"]["unchecked"].as_array().unwrap();
    assert!(unchecked.contains(&"xid".into()) && unchecked.contains(&"driver_events".into()), "{unchecked:?}");
    // A one-shot listens to nothing: no event could come before it ends.
    assert_eq!(none.json(&[])["sources"]["driver_events"], Value::Null);
}

#[test]
fn a_recording_keeps_the_events_and_a_replay_shows_them_without_waiting() {
    let sim = Sim::new(XID_AT_1S);
    let path = sim.dir.path().join("xid.ndjson");
    let out = sim.gpuscope().arg("record").arg(&path).args(["--interval", "200ms", "--duration", "2500ms"]).output();
    assert_success(&out.unwrap());
    // The simulated driver is gone: a replay has only the recording.
    let began = Instant::now();
    let out = gpuscope().args(["replay", "--json"]).arg(&path).output().unwrap();
    assert_success(&out);
    assert!(began.elapsed() < Duration::from_secs(5), "a replay does not wait for new events");
    let replayed: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = replayed.last().unwrap();
    assert_valid(last);
    assert_eq!(last["gpus"][0]["driver_events"][0]["xid"], 79, "{}", last["gpus"][0]);
    assert_eq!(
        alert(last, "xid", 0).map(|a| &a["severity"]),
        Some(&"critical".into()),
        "recomputed from the recording"
    );
    assert_eq!(last["gpus"][0]["health"]["verdict"], "critical");
}
