//! nvidia-smi's selection and looping flags (`-i`, `-l`, `-lms`) and the
//! hints for flags users bring from nvidia-smi, nvitop and gpustat.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Sim, assert_success};

const THREE: &str = r#"
[[gpu]]
uuid = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
pci_bus_id = "00000000:18:00.0"
[[gpu]]
uuid = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
pci_bus_id = "00000000:2A:00.0"
[[gpu]]
uuid = "GPU-cccccccc-0000-0000-0000-000000000000"
pci_bus_id = "00000000:3B:00.0"
"#;

fn run(sim: &Sim, args: &[&str]) -> String {
    let out = sim.gpuscope().args(args).output().unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn id_by_index_uuid_pci_and_list() {
    let sim = Sim::new(THREE);
    let indices = |id: &str| run(&sim, &["-i", id, "--query-gpu=index", "--format=csv,noheader"]);
    assert_eq!(indices("1"), "1\n");
    assert_eq!(indices("GPU-cccccccc-0000-0000-0000-000000000000"), "2\n");
    assert_eq!(indices("00000000:2A:00.0"), "1\n");
    assert_eq!(indices("0000:3b:00.0"), "2\n");
    assert_eq!(indices("2,00000000:18:00.0"), "0\n2\n");
    assert_eq!(run(&sim, &["--id=1", "--query-gpu=index", "--format=csv,noheader"]), "1\n");
    let out = sim.gpuscope().args(["-i", "9", "--query-gpu=index", "--format=csv"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no GPU matches \"9\""));
    let out = sim.gpuscope().args(["-i", "18:00.x", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-i/--id: \"18:00.x\" is not a PCI bus id"));
}

#[test]
fn loop_prints_the_header_once_and_a_block_per_interval() {
    let sim = Sim::new(THREE);
    let text = run(&sim, &["--query-gpu=index", "--format=csv", "-lms", "50", "--count", "3"]);
    assert_eq!(text, format!("index\n{}", "0\n1\n2\n".repeat(3)));
    let text = run(&sim, &["--query-gpu=index", "--format=csv,noheader", "-l", "1", "--count", "2"]);
    assert_eq!(text, "0\n1\n2\n".repeat(2));
}

#[test]
fn loop_with_json_and_table() {
    let sim = Sim::new(THREE);
    let text = run(&sim, &["--json", "-lms", "50", "--count", "4"]);
    assert_eq!(text.lines().count(), 4);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["gpus"].as_array().unwrap().len(), 3);
    }
    let text = run(&sim, &["-1", "-lms", "50", "--count", "2", "-i", "1"]);
    let rows = |i: &str| text.lines().filter(|l| l.starts_with(&format!("  {i} NVIDIA"))).count();
    assert_eq!((rows("0"), rows("1"), rows("2")), (0, 2, 0), "{text}");
}

#[test]
fn foreign_flags_get_a_hint() {
    for (flag, ours) in [("-q", "gpuscope -1"), ("-L", "--query-gpu=index,name,uuid"), ("-c", "gpustat")] {
        let out = common::gpuscope().arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("unexpected argument '{flag}'")) && err.contains(ours), "{flag}: {err}");
    }
}
