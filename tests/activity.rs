//! The GPU's activity counters (NVML GPM) end to end: the simulated NVML's
//! scenario through `--json`, for a GPU and its MIG instances; `null` with
//! the reason where a board has none, refuses, or a one-shot did not wait;
//! what the driver is asked, by the simulator's log of calls.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{MIB, Sim, assert_valid, calls_to};
use serde_json::{Value, json};

/// An H100 with GPM (no FP64 or IMMA figures scripted), an A100 without.
const SCENARIO: &str = r#"
[[gpu]]
uuid = "GPU-h100"
utilization_gpu = 100
[gpu.gpm]
sm_util = 6
sm_occupancy = 3
any_tensor_util = 0.5
hmma_tensor_util = 0.5
dram_bw_util = 12
fp32_util = 4
fp16_util = 1
pcie_tx_per_sec = 100
pcie_rx_per_sec = 300
nvlink_total_tx_per_sec = 2000
nvlink_total_rx_per_sec = 1000

[[gpu]]
uuid = "GPU-a100"
utilization_gpu = 100
"#;

fn documents(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|got| (got - want).abs() < 1e-6)
}

#[test]
fn a_one_shot_with_activity_shows_each_metric_and_none_without_gpm() {
    let sim = Sim::new(SCENARIO);
    let doc = sim.json(&["--activity"]);
    assert_valid(&doc);
    let h100 = &doc["gpus"][0];
    assert_eq!(h100["activity_unavailable"], Value::Null);
    let a = &h100["activity"];
    assert!(a["period_ms"].as_u64().is_some_and(|ms| ms >= 100), "two samples more than 0.1 s apart: {a}");
    for (field, want) in [("sm_active", 6.0), ("sm_occupancy", 3.0), ("tensor_active", 0.5), ("tensor_hmma", 0.5)] {
        assert!(close(&a[field], want), "{field}: {a}");
    }
    for (field, want) in [("dram_active", 12.0), ("fp32_active", 4.0), ("fp16_active", 1.0)] {
        assert!(close(&a[field], want), "{field}: {a}");
    }
    for field in ["tensor_imma", "tensor_dfma", "fp64_active"] {
        assert_eq!(a[field], Value::Null, "a metric the board does not report is null, never 0: {field}");
    }
    // MiB/s in NVML, bytes per second here.
    assert_eq!(a["pcie_tx_bytes_per_s"], json!(100 * MIB));
    assert_eq!(a["pcie_rx_bytes_per_s"], json!(300 * MIB));
    assert_eq!(a["nvlink_tx_bytes_per_s"], json!(2000 * MIB));
    assert_eq!(a["nvlink_rx_bytes_per_s"], json!(1000 * MIB));
    let a100 = &doc["gpus"][1];
    assert_eq!((&a100["activity"], &a100["activity_unavailable"]), (&Value::Null, &json!("not_supported")));
    assert_eq!(a100["utilization"]["gpu"], 100, "the rest of its snapshot is unaffected");
}

#[test]
fn a_one_shot_without_the_flag_asks_nothing_and_says_why() {
    let (sim, log) = Sim::logged(SCENARIO);
    let doc = sim.json(&[]);
    assert_valid(&doc);
    for gpu in doc["gpus"].as_array().unwrap() {
        assert_eq!((&gpu["activity"], &gpu["activity_unavailable"]), (&Value::Null, &json!("not_read")));
    }
    for f in ["nvmlGpmQueryDeviceSupport", "nvmlGpmSampleGet", "nvmlGpmMetricsGet"] {
        assert_eq!(calls_to(&log, f), 0, "{f}");
    }
    std::fs::write(&log, "").unwrap();
    sim.json(&["--activity"]);
    // The support query once per GPU; two samples and one comparison for
    // the H100, none for the A100, which said it has no GPM.
    assert_eq!(calls_to(&log, "nvmlGpmQueryDeviceSupport"), 2);
    assert_eq!(calls_to(&log, "nvmlGpmSampleGet"), 2);
    assert_eq!(calls_to(&log, "nvmlGpmMetricsGet"), 1);
}

/// Modes that keep running show the figures from their second snapshot
/// on; a driver that starts refusing is `no_permission`, asked again only
/// after a pause, and the other readings go on.
#[test]
fn a_refusal_is_null_with_its_reason_and_not_asked_again_every_tick() {
    let scenario = SCENARIO.replacen("uuid = \"GPU-h100\"", "uuid = \"GPU-h100\"\ngpm_no_permission_after_s = 1.0", 1);
    let (sim, log) = Sim::logged(&scenario);
    let out = sim.gpuscope().args(["--json", "-lms", "150", "--count", "16"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = documents(&String::from_utf8(out.stdout).unwrap());
    docs.iter().for_each(assert_valid);
    let reasons: Vec<&Value> = docs.iter().map(|d| &d["gpus"][0]["activity_unavailable"]).collect();
    assert_eq!(reasons[0], "first_sample", "{reasons:?}");
    assert!(docs[1]["gpus"][0]["activity"]["sm_active"].is_number(), "{reasons:?}");
    let refused = reasons.iter().position(|r| *r == "no_permission").expect("the refusal is said");
    assert!(reasons[refused..].iter().all(|r| *r == "no_permission"), "{reasons:?}");
    assert!(docs[refused..].iter().all(|d| d["gpus"][0]["activity"].is_null()));
    assert!(docs.last().unwrap()["gpus"][0]["memory"]["total"].is_number(), "the rest goes on");
    // One refused sample, then a pause of 30 s: 16 ticks of 150 ms ask once.
    let samples = calls_to(&log, "nvmlGpmSampleGet");
    assert!(samples <= refused + 1, "{samples} samples for {refused} ticks before the refusal");
}

/// At an interval under NVML's 0.1 s the counters are read every 0.1 s or
/// so, each figure over the time since the last pair, which `period_ms`
/// says; the ticks between show the last figures.
#[test]
fn ticks_faster_than_the_counters_refresh_reuse_the_last_figures() {
    let (sim, log) = Sim::logged(SCENARIO);
    let out = sim.gpuscope().args(["--json", "-lms", "20", "--count", "30"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = documents(&String::from_utf8(out.stdout).unwrap());
    let periods: Vec<u64> = docs.iter().filter_map(|d| d["gpus"][0]["activity"]["period_ms"].as_u64()).collect();
    assert!(!periods.is_empty() && periods.iter().all(|&p| p >= 100), "{periods:?}");
    let samples = calls_to(&log, "nvmlGpmSampleGet");
    assert!(samples < docs.len() / 2, "{samples} samples over {} ticks", docs.len());
}

/// A MIG instance's own counters (`nvmlGpmMigSampleGet`), one reading per
/// GPU instance.
#[test]
fn mig_instances_show_their_own_activity() {
    let scenario =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/crates/nvml-sim/scenarios/mig-h100-7way.toml"))
            .unwrap();
    let sim = Sim::new(&scenario);
    let doc = sim.json(&["--activity"]);
    assert_valid(&doc);
    let gpu = &doc["gpus"][0];
    assert!(close(&gpu["activity"]["sm_active"], 40.0), "the whole GPU: {}", gpu["activity"]);
    let migs = gpu["mig_devices"].as_array().unwrap();
    assert!(close(&migs[0]["activity"]["sm_active"], 71.0), "{}", migs[0]);
    assert!(migs[0]["activity"]["period_ms"].as_u64().is_some_and(|ms| ms >= 100));
    // An instance that reports nothing has every figure null, not 0.
    assert!(migs[1]["activity"].is_object(), "{}", migs[1]);
    assert_eq!(migs[1]["activity"]["sm_active"], Value::Null);
}

/// Each process's share of the GPU comes from
/// `nvmlDeviceGetProcessesUtilizationInfo` where the driver has it (R550+):
/// on Blackwell with driver 580 the older call reads 0 for every process
/// (HAMi issue 2015). A driver before R550 is asked the older call.
#[test]
fn per_process_shares_use_the_newer_call_and_fall_back_to_the_older() {
    let worker = common::Sleeper::spawn(&["60"]);
    let board = |driver: &str| {
        format!(
            "driver_version = \"{driver}\"\n[[gpu]]\nname = \"NVIDIA B200\"\nprocess_utilization_reads_zero = true\n\
             [[gpu.process]]\npid = {}\nused_mib = 100\nsm_util = 60\nmem_util = 20\n",
            worker.pid()
        )
    };
    let (sim, log) = Sim::logged(&board("580.95.05"));
    let doc = sim.json(&[]);
    assert_eq!(
        doc["gpus"][0]["process_utilization"],
        json!([{"pid": worker.pid(), "sm": 60, "memory": 20, "encoder": 0, "decoder": 0}])
    );
    assert_eq!(calls_to(&log, "nvmlDeviceGetProcessesUtilizationInfo"), 1);
    assert_eq!(calls_to(&log, "nvmlDeviceGetProcessUtilization"), 0);
    // Before R550 only the older call exists; this board's reads 0, as
    // the driver says.
    let (sim, log) = Sim::logged(&board("535.183.01"));
    let doc = sim.json(&[]);
    assert_eq!(doc["gpus"][0]["process_utilization"][0]["sm"], 0);
    assert_eq!(calls_to(&log, "nvmlDeviceGetProcessUtilization"), 1);
}
