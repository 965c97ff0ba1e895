//! A board that shares the host's memory (GB10, DGX Spark): NVML answers
//! NOT_SUPPORTED for its memory, so gpuscope shows the machine's, marked
//! unified, in `--json`, `-1` and `/metrics`; a discrete board beside it
//! keeps its own. The simulated NVML's `unified_memory` board, the host's
//! real `/proc/meminfo`.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use common::{MIB, Sim, assert_valid, calls_to};
use serde_json::Value;
use serve_common::{Server, promtool_check, sample};

const SCENARIO: &str = r#"
# GB10 ships with R580, the first driver that answers the addressing mode.
driver_version = "580.65.06"

[[gpu]]
name = "NVIDIA GB10"
uuid = "GPU-gb10"
unified_memory = true

[[gpu]]
uuid = "GPU-h100"
memory_total_mib = 81559
"#;

/// `MemTotal` of this machine, in bytes.
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn json_gives_the_machine_s_memory_to_a_unified_board_and_asks_the_mode_once() {
    let (sim, log) = Sim::logged(SCENARIO);
    let out = sim.gpuscope().args(["--json", "-lms", "100", "--count", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs: Vec<Value> =
        serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>().map(Result::unwrap).collect();
    assert_eq!(docs.len(), 3);
    for d in &docs {
        assert_valid(d);
        let gb10 = &d["gpus"][0];
        assert_eq!(gb10["unified_memory"], true, "{gb10}");
        let m = &gb10["memory"];
        assert_eq!(m["total"].as_u64(), Some(mem_total()), "{m}");
        let (used, free) = (m["used"].as_u64().unwrap(), m["free"].as_u64().unwrap());
        assert_eq!(used + free, mem_total(), "{m}");
        assert_eq!(m["driver_reserved"], Value::Null);
        let h100 = &d["gpus"][1];
        assert_eq!(h100["unified_memory"], false);
        assert_eq!(h100["memory"]["total"].as_u64(), Some(81559 * MIB));
    }
    // A fact of the board: asked once, and only of the board whose memory went unanswered.
    assert_eq!(calls_to(&log, "nvmlDeviceGetAddressingMode"), 1);
}

#[test]
fn one_shot_and_metrics_say_unified() {
    let sim = Sim::new(SCENARIO);
    let out = sim.gpuscope().arg("-1").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("unified memory: the machine's").count(), 1, "{text}");

    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let r = server.until("/metrics", "the GPUs' memory", |r| r.body.contains("gpuscope_gpu_memory_total_bytes{"));
    promtool_check(&r.body);
    let m = &r.body;
    let (gb10, h100) = ("{gpu=\"0\",uuid=\"GPU-gb10\"}", "{gpu=\"1\",uuid=\"GPU-h100\"}");
    assert_eq!(sample(m, &format!("gpuscope_gpu_unified_memory{gb10}")), Some(1.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_unified_memory{h100}")), Some(0.0));
    assert_eq!(sample(m, &format!("gpuscope_gpu_memory_total_bytes{gb10}")), Some(mem_total() as f64));
}
