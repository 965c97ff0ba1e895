//! NVLink, PCIe, remapped rows and per-process accounting end to end: the
//! simulated NVML's scenario through `--json` (rates from the second
//! reading on), `-1`, the query mode and `/metrics` (checked by promtool);
//! `null` where a board has none of them. What the driver is asked, by the
//! simulator's log of calls.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use common::{Sim, assert_valid, calls_to};
use serde_json::Value;
use serve_common::{Server, promtool_check, sample};

const SCENARIO: &str = r#"
[[gpu]]
uuid = "GPU-a100"
memory_total_mib = 81559
nvlink = [{ active = true, tx_kib_s = 1000000, rx_kib_s = 500000 }, { active = true, tx_kib_s = 1000000, rx_kib_s = 500000 }, { active = false }]
remapped_rows = { correctable = 3, uncorrectable = 1, pending = true }
accounting = { enabled = true, process = [
  { pid = 777, gpu_util = 91, mem_util = 40, max_memory_mib = 30000, time_ms = 3600000, start_time_us = 1700000000000000 },
  { pid = 778, gpu_util = 12, mem_util = 3, max_memory_mib = 2048, time_ms = 5000, start_time_us = 1700003600000000, running = true },
] }

[[gpu]]
uuid = "GPU-t4"
memory_total_mib = 15360
unsupported = ["remapped_rows", "accounting"]

[[gpu]]
state = "lost"
"#;

fn documents(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text).into_iter::<Value>().map(Result::unwrap).collect()
}

#[test]
fn json_has_links_rates_and_remapped_rows_or_null() {
    let sim = Sim::new(SCENARIO);
    let out = sim.gpuscope().args(["--json", "-lms", "300", "--count", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let docs = documents(&text);
    assert!(docs.len() >= 2, "{text}");
    for d in &docs {
        assert_valid(d);
    }
    let first = &docs[0]["gpus"][0];
    let links = first["nvlink"]["links"].as_array().unwrap();
    assert_eq!(links.len(), 3);
    assert_eq!(links[2], serde_json::json!({"link": 2, "active": false}));
    assert_eq!(first["nvlink"]["tx_bytes_per_s"], Value::Null, "no rate from one reading");
    let second = &docs[1]["gpus"][0]["nvlink"];
    // Two active links at 1,000,000 KiB/s each way out: 2,048,000,000 B/s.
    let tx = second["tx_bytes_per_s"].as_f64().unwrap();
    assert!((tx - 2.048e9).abs() / 2.048e9 < 0.05, "{second}");
    let rx = second["rx_bytes_per_s"].as_f64().unwrap();
    assert!((rx - 1.024e9).abs() / 1.024e9 < 0.05, "{second}");
    assert_eq!(
        first["remapped_rows"],
        serde_json::json!({"correctable": 3, "uncorrectable": 1, "pending": true, "failure": false})
    );
    let t4 = &docs[0]["gpus"][1];
    assert_eq!(t4["nvlink"], Value::Null);
    assert_eq!(
        t4["remapped_rows"],
        serde_json::json!({"correctable": null, "uncorrectable": null, "pending": null, "failure": null})
    );
    let lost = &docs[0]["gpus"][2];
    assert_eq!((lost["nvlink"].clone(), lost["remapped_rows"]["correctable"].clone()), (Value::Null, Value::Null));
}

#[test]
fn one_shot_text_names_a_link_down_and_remapped_rows() {
    let sim = Sim::new(SCENARIO);
    let out = sim.gpuscope().arg("-1").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("NVLink 2/3 up  tx n/a rx n/a; down: link 2"), "{text}");
    assert!(text.contains("remapped rows: 3 correctable, 1 uncorrectable; pending a GPU reset"), "{text}");
    assert_eq!(text.matches("NVLink").count(), 1, "the T4 has none: {text}");
}

#[test]
fn metrics_carry_links_and_remapped_rows() {
    let sim = Sim::new(SCENARIO);
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let r = server.until("/metrics", "an NVLink rate", |r| r.body.contains("gpuscope_gpu_nvlink_tx_bytes_per_second{"));
    promtool_check(&r.body);
    let m = &r.body;
    let a100 = "{gpu=\"0\",uuid=\"GPU-a100\"}";
    assert_eq!(sample(m, &format!("gpuscope_gpu_nvlink_links{a100}")), Some(3.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_nvlink_links_active{a100}")), Some(2.0));
    assert!(sample(m, &format!("gpuscope_gpu_nvlink_tx_bytes_per_second{a100}")).unwrap() > 1e9);
    assert_eq!(sample(m, &format!("gpuscope_gpu_remapped_rows_correctable{a100}")), Some(3.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_row_remap_pending{a100}")), Some(1.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_row_remap_failure{a100}")), Some(0.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_accounting_mode{a100}")), Some(1.0));
    // Not supported is absent, never 0.
    assert!(!m.contains("gpuscope_gpu_nvlink_links{gpu=\"1\""), "{m}");
    assert!(!m.contains("gpuscope_gpu_remapped_rows_correctable{gpu=\"1\""), "{m}");
}

#[test]
fn accounting_lists_finished_and_running_processes() {
    let sim = Sim::new(SCENARIO);
    let out = sim.gpuscope().arg("--json").output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&doc);
    let a = &doc["gpus"][0]["accounting"];
    assert_eq!((a["enabled"].clone(), a["buffer_size"].clone()), (Value::Bool(true), Value::from(4000)));
    assert_eq!(
        a["processes"][0],
        serde_json::json!({"pid": 777, "gpu_utilization": 91, "memory_utilization": 40,
            "max_memory": 30000u64 << 20, "time_ms": 3600000, "start_time_unix_us": 1700000000000000u64,
            "running": false})
    );
    assert_eq!(a["processes"][1]["running"], Value::Bool(true));
    assert_eq!(doc["gpus"][1]["accounting"], Value::Null, "not supported is null");
    let out = sim
        .gpuscope()
        .args(["--query-gpu=index,accounting.mode,accounting.buffer_size", "--format=csv"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "index, accounting.mode, accounting.buffer_size\n0, Enabled, 4000\n1, [N/A], [N/A]\n2, [GPU is lost], [GPU is lost]\n"
    );
}

/// A scenario whose NVML calls the simulator logs, one line per call,
/// and the log's path.
fn stream(sim: &Sim, count: &str) -> Vec<Value> {
    let out = sim.gpuscope().args(["--json", "-lms", "200", "--count", count]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = documents(&String::from_utf8(out.stdout).unwrap());
    docs.iter().for_each(assert_valid);
    docs
}

fn near(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() / want < 0.05)
}

#[test]
fn pcie_rates_come_from_the_counters_and_the_sampled_call_only_where_they_are_missing() {
    // The third GPU copies at 50 GB/s into the device: its 32-bit counter
    // wraps every 86 ms, several times between ticks.
    let (sim, log) = Sim::logged(
        "[[gpu]]\npcie_tx_kib_s = 1000\npcie_rx_kib_s = 3000\n\
         [[gpu]]\nunsupported = [\"pcie_counters\"]\npcie_tx_kib_s = 500\npcie_rx_kib_s = 700\n\
         [[gpu]]\npcie_tx_kib_s = 2000\npcie_rx_kib_s = 48828125\n",
    );
    let docs = stream(&sim, "3");
    assert_eq!(docs.len(), 3);
    let pcie = |d: usize, g: usize| docs[d]["gpus"][g]["pcie"].clone();
    assert_eq!(pcie(0, 0), serde_json::json!({"tx_bytes_per_s": null, "rx_bytes_per_s": null}), "no interval yet");
    for d in 1..3 {
        let p = pcie(d, 0);
        assert!(near(&p["tx_bytes_per_s"], 1000.0 * 1024.0) && near(&p["rx_bytes_per_s"], 3000.0 * 1024.0), "{p}");
        let p = pcie(d, 2);
        assert!(near(&p["tx_bytes_per_s"], 2000.0 * 1024.0) && near(&p["rx_bytes_per_s"], 50e9), "{p}");
    }
    // Without counters: one sampled direction per tick, RX first.
    assert_eq!(pcie(0, 1), serde_json::json!({"tx_bytes_per_s": null, "rx_bytes_per_s": 700 * 1024}));
    assert_eq!(pcie(1, 1), serde_json::json!({"tx_bytes_per_s": 500 * 1024, "rx_bytes_per_s": 700 * 1024}));
    // One sample per tick, all of them the second GPU's (a tick may have
    // begun when the third snapshot ended the run).
    let sampled = calls_to(&log, "nvmlDeviceGetPcieThroughput");
    assert!((3..=4).contains(&sampled), "{sampled} throughput calls");
    // The counters of the first and third GPUs once on their first tick,
    // then twice a tick (their 32-bit counters are read over a window of
    // their own); the second GPU is asked once, and not again once it has
    // said it lacks them.
    let fields = calls_to(&log, "nvmlDeviceGetFieldValues");
    assert!((11..=15).contains(&fields), "{fields} field-value calls");
}

#[test]
fn on_a_driver_as_slow_as_a_real_one_the_pcie_window_spans_the_process_samples() {
    // Ten busy GPUs: their per-process samples cost 2.5 ms of the driver's
    // CPU each (realistic_costs), more than a window's 20 ms together, so
    // from the third tick on the windows close among those calls rather
    // than after a wait of their own. The first GPU's 32-bit counter wraps
    // every 86 ms at 50 GB/s: the rates must still come out right.
    let worker = common::Sleeper::spawn(&["60"]);
    let busy = format!("[[gpu.process]]\npid = {}\nused_mib = 100\nsm_util = 40\n", worker.pid());
    let mut scenario = String::from("realistic_costs = true\n");
    scenario.push_str(&format!("[[gpu]]\npcie_tx_kib_s = 2000\npcie_rx_kib_s = 48828125\n{busy}"));
    scenario.push_str(&format!("[[gpu]]\npcie_tx_kib_s = 1000\npcie_rx_kib_s = 3000\n{busy}"));
    for _ in 0..8 {
        scenario.push_str(&format!("[[gpu]]\n{busy}"));
    }
    let (sim, log) = Sim::logged(&scenario);
    let docs = stream(&sim, "5");
    assert_eq!(docs.len(), 5);
    for d in &docs[1..] {
        let p = &d["gpus"][0]["pcie"];
        assert!(near(&p["tx_bytes_per_s"], 2000.0 * 1024.0) && near(&p["rx_bytes_per_s"], 50e9), "{p}");
        let p = &d["gpus"][1]["pcie"];
        assert!(near(&p["tx_bytes_per_s"], 1000.0 * 1024.0) && near(&p["rx_bytes_per_s"], 3000.0 * 1024.0), "{p}");
        assert_eq!(d["gpus"][2]["process_utilization"][0]["sm"], 40);
    }
    // Ticks told apart by the device count each begins with: in a tick
    // whose window spans the samples, some are asked between its two
    // readings of the counters. Ticks 3 to 5 can span them; one is enough
    // (with the overlap switched off, none does): on a CPU shared with
    // other work the readings before the samples may use up a window's
    // 20 ms on their own.
    let text = std::fs::read_to_string(&log).unwrap();
    let ticks: Vec<Vec<&str>> = text.split("nvmlDeviceGetCount_v2\n").map(|t| t.lines().collect()).collect();
    let spanning = ticks.iter().filter(|calls| {
        let fields: Vec<usize> =
            (calls.iter().enumerate()).filter(|(_, c)| **c == "nvmlDeviceGetFieldValues").map(|(at, _)| at).collect();
        let (Some(&first), Some(&last)) = (fields.first(), fields.last()) else { return false };
        fields.len() == 20 && calls[first..last].contains(&"nvmlDeviceGetProcessesUtilizationInfo")
    });
    assert!(spanning.count() >= 1, "{} ticks", ticks.len());
}

#[test]
fn each_tick_asks_nvml_for_one_gpu_s_handle_not_every_one() {
    // nvitop and nvtop hold their handles from start to end. gpuscope reads
    // through the handles it holds too, and asks for one index's each tick,
    // in turn, to see GPUs that swapped places (tests/gpus_come_and_go.rs).
    let (sim, log) = Sim::logged("[[gpu]]\n[[gpu]]\n[[gpu]]\n[[gpu]]\n");
    let docs = stream(&sim, "6");
    assert_eq!(docs.len(), 6);
    assert!(docs.iter().all(|d| d["gpus"].as_array().unwrap().iter().all(|g| g["memory"]["used"].is_u64())));
    // Four when NVML is loaded, then one a tick: 4 + 6, and a seventh tick
    // may have begun when the sixth snapshot ended the run; and four by
    // the driver events' listener, which registers each GPU once.
    let asked = calls_to(&log, "nvmlDeviceGetHandleByIndex_v2");
    assert!((14..=15).contains(&asked), "{asked} handles asked for");
    assert!(calls_to(&log, "nvmlDeviceGetMemoryInfo_v2") >= 24, "every GPU read every tick");
}

#[test]
fn settings_are_read_on_first_sight_not_every_tick() {
    let (sim, log) = Sim::logged("[[gpu]]\n[[gpu]]\n");
    let docs = stream(&sim, "3");
    assert_eq!(docs.len(), 3);
    assert!(calls_to(&log, "nvmlDeviceGetMemoryInfo_v2") >= 6, "live readings every tick");
    // Settings, and the health counters that move on a failing board's
    // timescale: the ECC totals (four a GPU), BAR1, remapped rows, and the
    // NVLink states (one call a link; the first link answers NOT_SUPPORTED
    // on these boards, which is remembered too).
    for seldom in [
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetBAR1MemoryInfo",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetNvLinkState",
    ] {
        let per_gpu = if matches!(seldom, "nvmlDeviceGetMaxClockInfo" | "nvmlDeviceGetTotalEccErrors") { 4 } else { 1 };
        assert_eq!(calls_to(&log, seldom), 2 * per_gpu, "{seldom}: once per GPU");
    }
    assert_eq!(docs[2]["gpus"][1]["power_management_limit_w"], 700.0, "still shown");
    assert!(docs[2]["gpus"][1]["bar1_memory"]["total"].as_u64().is_some(), "still shown");
    // The snapshot says what each tick cost: the first read the settings too.
    let calls: Vec<u64> = docs.iter().map(|d| d["sources"]["nvml"]["calls"].as_u64().unwrap()).collect();
    assert!(calls[1] > 0 && calls[0] > calls[1], "{calls:?}");
}

#[test]
fn a_board_without_fans_shows_no_fan_and_no_error() {
    // As an H100 SXM answers (driver 580.159.04): NumFans 0, and fan 0's
    // speed INVALID_ARGUMENT, which is no fault of the board.
    let (sim, log) = Sim::logged("[[gpu]]\nfans = 0\n[[gpu]]\nfan_percent = 45\n");
    let out = sim.gpuscope().arg("--json").output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["gpus"][0]["fan_percent"], Value::Null);
    assert_eq!(doc["gpus"][0]["error"], Value::Null, "{}", doc["gpus"][0]);
    assert_eq!(doc["gpus"][1]["fan_percent"], serde_json::json!(45));
    assert_eq!(calls_to(&log, "nvmlDeviceGetFanSpeed_v2"), 1, "only the board with a fan is asked");
    let once = sim.gpuscope().arg("-1").output().unwrap();
    let text = String::from_utf8(once.stdout).unwrap();
    assert!(!text.contains("error"), "{text}");
}

#[test]
fn a_gpu_running_no_process_is_not_asked_for_process_samples_every_tick() {
    // nvmlDeviceGetProcessUtilization costs a real driver 2.6 ms of CPU
    // even when it finds nothing: asked on the first tick only, to learn
    // whether the board samples processes at all.
    let worker = common::Sleeper::spawn(&["60"]);
    let (sim, log) = Sim::logged(&format!(
        "[[gpu]]\n[[gpu]]\nunsupported = [\"process_utilization\"]\n\
         [[gpu]]\n[[gpu.process]]\npid = {}\nused_mib = 100\nsm_util = 40\n",
        worker.pid()
    ));
    let docs = stream(&sim, "3");
    for d in &docs {
        assert_eq!(d["gpus"][0]["process_utilization"], serde_json::json!([]), "samples processes, runs none");
        assert_eq!(d["gpus"][1]["process_utilization"], Value::Null, "does not sample processes");
        assert_eq!(d["gpus"][2]["process_utilization"][0]["sm"], 40);
    }
    // Once for each idle GPU; once a tick for the busy one, the samples
    // going straight into a buffer with room for them (no call to ask how
    // many first); a fourth tick may have begun when the third snapshot
    // ended the run. Asking the idle GPUs every tick would make 9 or more,
    // asking for the count first 8 or more.
    let asked = calls_to(&log, "nvmlDeviceGetProcessesUtilizationInfo");
    assert!((5..=6).contains(&asked), "{asked} calls");
    // The board that samples no processes was asked the older call once
    // too, before it was known to answer neither.
    assert_eq!(calls_to(&log, "nvmlDeviceGetProcessUtilization"), 1);
}

#[test]
fn settings_are_read_again_after_ten_seconds_but_what_the_board_fixes_only_once() {
    let (sim, log) = Sim::logged("[[gpu]]\n");
    // Ticks at 0, 5.5 and 11 s: the third is past the 10 s refresh.
    let out = sim.gpuscope().args(["--json", "-lms", "5500", "--count", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = documents(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(docs.len(), 3);
    assert_eq!(calls_to(&log, "nvmlDeviceGetPowerManagementLimit"), 2, "first tick, and again after 10 s");
    // Four maximum clocks and the serial: once in the GPU's life.
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 4);
    assert_eq!(calls_to(&log, "nvmlDeviceGetSerial"), 1);
    assert!(docs[2]["gpus"][0]["max_clocks"]["sm_mhz"].as_u64().is_some(), "still shown");
}

#[test]
fn maximum_clocks_are_kept_for_the_boot_and_asked_again_only_of_new_firmware() {
    let (sim, log) = Sim::logged("[[gpu]]\nmax_sm_clock_mhz = 1755\n[[gpu]]\n");
    let max_clocks = |doc: &Value| -> Vec<Value> { (0..2).map(|i| doc["gpus"][i]["max_clocks"].clone()).collect() };
    let first = sim.json(&[]);
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8, "four a GPU");
    let kept = std::fs::read_to_string(sim.dir.path().join("gpuscope/boards")).unwrap();
    assert!(kept.starts_with("gpuscope boards 1\n") && kept.lines().count() == 4, "{kept}");

    let second = sim.json(&[]);
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8, "none the second time");
    assert_eq!(calls_to(&log, "nvmlDeviceGetVbiosVersion"), 4, "the firmware, to find them");
    assert_eq!(max_clocks(&second), max_clocks(&first));
    assert_eq!(second["gpus"][0]["max_clocks"]["sm_mhz"], 1755);

    // The first board flashed with other firmware: its clocks are asked
    // again, the other's still kept.
    let flashed = "[[gpu]]\nmax_sm_clock_mhz = 1980\nvbios_version = \"96.00.99.00.01\"\n[[gpu]]\n";
    sim.rewrite(&format!("call_log = {:?}\n{flashed}", log.to_str().unwrap()));
    let third = sim.json(&[]);
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 12);
    assert_eq!(third["gpus"][0]["max_clocks"]["sm_mhz"], 1980);
    assert_eq!(third["gpus"][1]["max_clocks"], first["gpus"][1]["max_clocks"]);
}

#[test]
fn the_maximum_clocks_are_asked_only_by_outputs_that_show_them() {
    let (sim, log) = Sim::logged("[[gpu]]\nmax_sm_clock_mhz = 1755\n[[gpu]]\n");
    let run = |args: &[&str]| {
        let out = sim.gpuscope().args(args).output().unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // The table, `check`, and a query of other fields show none of them.
    assert!(run(&["-1"]).contains("SM "), "the table shows the current clocks");
    run(&["check", "--for", "0s"]);
    assert!(run(&["--query-gpu=index,clocks.sm", "--format=csv,noheader"]).starts_with("0, "));
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 0);
    assert_eq!(calls_to(&log, "nvmlDeviceGetVbiosVersion"), 0, "not even to look for kept ones");
    assert!(!sim.dir.path().join("gpuscope/boards").exists(), "nothing kept that was not asked");

    // A query that names one asks them, four a GPU, and keeps them.
    let csv = run(&["--query-gpu=index,clocks.max.sm", "--format=csv,noheader"]);
    assert!(csv.starts_with("0, 1755 MHz\n1, "), "{csv}");
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8);
    // JSON shows them: the ones the query kept.
    let doc = sim.json(&[]);
    assert_eq!(doc["gpus"][0]["max_clocks"]["sm_mhz"], 1755);
    assert!(doc["gpus"][1]["max_clocks"]["memory_mhz"].as_u64().is_some());
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8);
}

#[test]
fn per_process_samples_are_asked_only_by_outputs_that_show_them() {
    let worker = common::Sleeper::spawn(&["60"]);
    let (sim, log) =
        Sim::logged(&format!("[[gpu]]\n[[gpu.process]]\npid = {}\nused_mib = 100\nsm_util = 40\n", worker.pid()));
    let asked =
        || calls_to(&log, "nvmlDeviceGetProcessUtilization") + calls_to(&log, "nvmlDeviceGetProcessesUtilizationInfo");
    for args in [&["-1"][..], &["check", "--for", "0s"], &["--query-compute-apps=pid,used_memory", "--format=csv"]] {
        let out = sim.gpuscope().args(args).output().unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let csv = sim.gpuscope().args(["--query-compute-apps=pid", "--format=csv,noheader"]).output().unwrap().stdout;
    assert_eq!(String::from_utf8(csv).unwrap(), format!("{}\n", worker.pid()), "the process is listed");
    assert_eq!(asked(), 0, "none of them shows a process's SM use");
    let doc = sim.json(&[]);
    assert_eq!(doc["gpus"][0]["process_utilization"][0]["sm"], 40);
    assert_eq!(asked(), 1);
}

/// The functions one run of gpuscope with `args` called, and how often.
fn calls_of(sim: &Sim, log: &std::path::Path, args: &[&str]) -> std::collections::HashMap<String, usize> {
    std::fs::write(log, "").unwrap();
    let out = sim.gpuscope().args(args).output().unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let mut calls = std::collections::HashMap::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        *calls.entry(line.to_owned()).or_default() += 1;
    }
    calls
}

#[test]
fn each_output_asks_the_driver_only_for_what_it_shows() {
    let worker = common::Sleeper::spawn(&["60"]);
    let (sim, log) =
        Sim::logged(&format!("[[gpu]]\n[[gpu.process]]\npid = {}\nused_mib = 100\n[[gpu]]\n", worker.pid()));
    let every = ["nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature"]
        .into_iter()
        .chain(["nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPerformanceState"])
        .chain(["nvmlDeviceGetMigMode", "nvmlDeviceGetComputeRunningProcesses_v3"]);
    let table = ["nvmlDeviceGetClockInfo", "nvmlDeviceGetEncoderUtilization"].into_iter().chain([
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRemappedRows",
    ]);
    let settings = ["nvmlDeviceGetSerial", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode"]
        .into_iter()
        .chain(["nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetAccountingMode"]);
    let dear = ["nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetProcessesUtilizationInfo"];
    let (every, table, settings): (Vec<_>, Vec<_>, Vec<_>) = (every.collect(), table.collect(), settings.collect());

    let json = calls_of(&sim, &log, &["--json"]);
    for f in every.iter().chain(&table).chain(&settings).chain(&dear) {
        assert!(json.contains_key(*f), "JSON shows what {f} says");
    }
    let one = calls_of(&sim, &log, &["-1"]);
    for f in every.iter().chain(&table) {
        assert!(one.contains_key(*f), "-1 shows what {f} says");
    }
    for f in settings.iter().chain(&dear) {
        assert!(!one.contains_key(*f), "-1 does not show what {f} says");
    }
    let check = calls_of(&sim, &log, &["check", "--for", "0s"]);
    let query = calls_of(&sim, &log, &["--query-gpu=index,memory.used,utilization.gpu", "--format=csv"]);
    // The energy counter: in JSON (and the dashboard's detail), nowhere else.
    let energy = "nvmlDeviceGetTotalEnergyConsumption";
    assert_eq!(json.get(energy), Some(&2), "one call a GPU");
    for (what, calls) in [("-1", &one), ("the rules", &check), ("the query", &query)] {
        assert!(!calls.contains_key(energy), "{what} shows no energy");
    }
    // The rules judge each GPU's health too: its counters and why its
    // clocks are held down, not the clocks themselves.
    let health =
        ["nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows"];
    for (what, calls) in [("the rules", &check), ("the query", &query)] {
        for f in &every {
            assert!(calls.contains_key(*f), "{what}: every output reads what {f} says");
        }
        for f in table.iter().chain(&settings).chain(&dear) {
            if what == "the rules" && health.contains(f) {
                assert!(calls.contains_key(*f), "the rules judge the health by what {f} says");
                continue;
            }
            assert!(!calls.contains_key(*f), "{what}: nothing shows what {f} says");
        }
    }
    // Fewer calls than JSON even with the health's counters.
    assert!(check.values().sum::<usize>() * 3 < json.values().sum::<usize>() * 2, "{check:?}\n{json:?}");
    // PCIe rates need two readings of the counters: a run of one snapshot
    // shows none, so it reads none; a stream reads them from its first
    // tick. What field values a one-shot reads are the health's (the
    // recovery action, NVLink's errors): one call a GPU, none for a query.
    for (what, calls) in [("--json", &json), ("-1", &one), ("the rules", &check), ("the query", &query)] {
        let fields = calls.get("nvmlDeviceGetFieldValues").copied().unwrap_or(0);
        assert!(fields <= if what == "the query" { 0 } else { 2 }, "{what}: {calls:?}");
    }
    for args in [&["-1", "-lms", "100", "--count", "2"][..], &["--json", "-lms", "100", "--count", "2"]] {
        let stream = calls_of(&sim, &log, args);
        assert!(stream.get("nvmlDeviceGetFieldValues").is_some_and(|&n| n >= 2), "{args:?}: {stream:?}");
    }
}

#[test]
fn a_one_shot_on_a_board_without_pcie_counters_waits_for_no_throughput_sample() {
    let (sim, log) = Sim::logged("[[gpu]]\nunsupported = [\"pcie_counters\"]\npcie_rx_kib_s = 700\n");
    for args in [&["--json"][..], &["-1"]] {
        let calls = calls_of(&sim, &log, args);
        assert!(!calls.contains_key("nvmlDeviceGetPcieThroughput"), "{args:?}: {calls:?}");
    }
    let pcie = &sim.json(&[])["gpus"][0]["pcie"];
    assert_eq!(pcie, &serde_json::json!({"tx_bytes_per_s": null, "rx_bytes_per_s": null}));
}

#[test]
fn without_the_firmware_version_or_with_a_file_not_gpuscopes_the_clocks_are_asked_each_time() {
    // A driver that lacks nvmlDeviceGetVbiosVersion: nothing to key on.
    let (sim, log) = Sim::logged("missing_functions = [\"nvmlDeviceGetVbiosVersion\"]\n[[gpu]]\n");
    for _ in 0..2 {
        let doc = sim.json(&[]);
        assert!(doc["gpus"][0]["error"].is_null(), "{}", doc["gpus"][0]["error"]);
        assert!(doc["gpus"][0]["max_clocks"]["sm_mhz"].as_u64().is_some());
    }
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8);

    // A file of the user's own where gpuscope would keep them: left as it is.
    let (sim, log) = Sim::logged("[[gpu]]\n");
    let own = sim.dir.path().join("gpuscope");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(own.join("boards"), "my notes\n").unwrap();
    for _ in 0..2 {
        sim.json(&[]);
    }
    assert_eq!(calls_to(&log, "nvmlDeviceGetMaxClockInfo"), 8);
    assert_eq!(std::fs::read_to_string(own.join("boards")).unwrap(), "my notes\n");
}

#[test]
fn process_samples_that_outgrow_the_buffer_are_fetched_again_with_room() {
    // 200 processes: more samples than the first call makes room for.
    let procs: String =
        (0..200).map(|i| format!("[[gpu.process]]\npid = {}\nused_mib = 10\nsm_util = 7\n", 3_000_000 + i)).collect();
    let (sim, log) = Sim::logged(&format!("[[gpu]]\n{procs}"));
    let out = sim.gpuscope().arg("--json").output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["gpus"][0]["process_utilization"].as_array().map(Vec::len), Some(200));
    assert_eq!(calls_to(&log, "nvmlDeviceGetProcessesUtilizationInfo"), 2, "the first too small, the second right");
}

#[test]
fn a_process_list_is_one_call_where_it_fits_and_two_where_it_outgrows_the_room() {
    // Eight processes fit the first call's room; a hundred do not.
    let list = |n: u32, base: u32| -> String {
        (0..n).map(|i| format!("[[gpu.process]]\npid = {}\nused_mib = 10\n", base + i)).collect()
    };
    let (sim, log) = Sim::logged(&format!("[[gpu]]\n{}\n[[gpu]]\n{}", list(8, 3_100_000), list(100, 3_200_000)));
    let out = sim.gpuscope().arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["processes"].as_array().map(Vec::len), Some(108), "every process, once");
    assert_eq!(calls_to(&log, "nvmlDeviceGetComputeRunningProcesses_v3"), 1 + 2, "one for the GPU of 8, two for 100");
    assert_eq!(calls_to(&log, "nvmlDeviceGetGraphicsRunningProcesses_v3"), 2, "an empty list is one call");
}

#[test]
fn link_traffic_is_one_sum_over_all_links_or_link_by_link_where_the_driver_wants() {
    // PCIe counters off: asked once, on the first tick; every other
    // field-value call is NVLink's.
    let board = |unsupported: &str| {
        format!(
            "[[gpu]]\nunsupported = [\"pcie_counters\"{unsupported}]\nnvlink = [{{ active = true, tx_kib_s = 1000000, \
             rx_kib_s = 500000 }}, {{ active = true, tx_kib_s = 1000000, rx_kib_s = 500000 }}, {{ active = false }}]\n"
        )
    };
    // And one on the first tick for the health's fields (recovery action,
    // NVLink's error totals).
    for (unsupported, calls) in [("", 1 + 2 + 1), (", \"nvlink_sum\"", 1 + 3 + 1)] {
        let (sim, log) = Sim::logged(&board(unsupported));
        let docs = stream(&sim, "2");
        let link = &docs[1]["gpus"][0]["nvlink"];
        assert!(near(&link["tx_bytes_per_s"], 2.048e9) && near(&link["rx_bytes_per_s"], 1.024e9), "{link}");
        // Summed: one call a tick. Refused: the sum, then the links, then
        // the links alone from the second tick on.
        assert_eq!(calls_to(&log, "nvmlDeviceGetFieldValues"), calls, "unsupported: [pcie_counters{unsupported}]");
    }
}
