//! `gpuscope select` on the real binary and the simulated driver: what a
//! job script reads from it, and its exit statuses.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Sim, assert_success};

const SCENARIO: &str = r#"
[[gpu]]
uuid = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
memory_total_mib = 81559
memory_used_mib = 70000
utilization_gpu = 3

[[gpu]]
uuid = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
memory_total_mib = 81559
memory_used_mib = 1000
utilization_gpu = 95

[[gpu]]
uuid = "GPU-cccccccc-0000-0000-0000-000000000000"
memory_total_mib = 81559
memory_used_mib = 2000
utilization_gpu = 0
"#;

fn select(sim: &Sim, args: &[&str]) -> std::process::Output {
    sim.gpuscope().arg("select").args(args).output().unwrap()
}

#[test]
fn prints_a_cuda_visible_devices_value() {
    let sim = Sim::new(SCENARIO);
    let out = select(&sim, &["--count", "2", "--min-free", "20GiB"]);
    assert_success(&out);
    // GPU 0 has 11 GiB free; 1 and 2 fit, in index order.
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "GPU-bbbbbbbb-0000-0000-0000-000000000000,GPU-cccccccc-0000-0000-0000-000000000000\n"
    );
    let out = select(&sim, &["--min-free", "20GiB", "--max-util", "10", "--format", "index"]);
    assert_success(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "2\n");
    // --gpus narrows what is looked at, as everywhere.
    let out = select(&sim, &["--gpus", "0,1", "--format", "index"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "1\n");
}

#[test]
fn too_few_is_exit_1_with_the_reasons() {
    let sim = Sim::new(SCENARIO);
    let out = select(&sim, &["--count", "2", "--min-free", "20GiB", "--max-util", "10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing a script could mistake for an answer");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("1 GPU fits, 2 asked"), "{err}");
    assert!(err.contains("GPU 0: 11.") && err.contains("free, under 20.0 GiB"), "{err}");
    assert!(err.contains("GPU 1: utilisation 95%, above 10%"), "{err}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let sim = Sim::new(SCENARIO);
    let out = select(&sim, &["--min-free", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"lots\" is not a size"));
    assert_eq!(select(&sim, &["--count", "0"]).status.code(), Some(2));
    assert_eq!(select(&sim, &["--max-util", "101"]).status.code(), Some(2));
}

#[test]
fn the_demos_cache_counts_when_asked() {
    // The demo's GPUs 0 and 1 have 19.1 GiB free and a probed trainer
    // holding gigabytes of cache; GPU 3 is empty; 4 is lost.
    let demo = |args: &[&str]| common::gpuscope().args(["select", "--demo", "--min-free", "20GiB"]).args(args).output();
    let three = ["--count", "3", "--format", "index"];
    assert_eq!(demo(&three).unwrap().status.code(), Some(1));
    let out = demo(&[&three[..], &["--count-cached-free"]].concat()).unwrap();
    assert_success(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0,1,3\n");
    let out = demo(&["--format", "json"]).unwrap();
    let picks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(picks[0]["index"], 3);
    assert_eq!(picks[0]["processes"], 0);
}
