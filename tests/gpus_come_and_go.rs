//! GPUs that appear, disappear or change places while gpuscope runs (a GPU
//! reset, hot-plug, a driver reload): every line of `--json --watch` shows
//! each UUID with that GPU's own readings, and a new GPU appears.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{MIB, Sim, assert_success};
use serde_json::Value;

/// Three GPUs told apart by their used memory, and when they are where.
fn scenario(topology: &str) -> String {
    let gpus = [("aaaaaaaa", 1000), ("bbbbbbbb", 2000), ("cccccccc", 3000)].map(|(id, mib)| {
        format!("[[gpu]]\nuuid = \"GPU-{id}-0000-0000-0000-000000000000\"\nmemory_used_mib = {mib}\n")
    });
    format!("{}\n{topology}", gpus.concat())
}

/// A leaves, C arrives, then the order changes with the count unchanged.
const MOVES: &str = r#"
[[topology]]
at_s = 0
gpus = [0, 1]
[[topology]]
at_s = 1.0
gpus = [1]
[[topology]]
at_s = 2.0
gpus = [2, 1, 0]
[[topology]]
at_s = 3.0
gpus = [1, 0, 2]
"#;

fn used_mib_of(uuid: &str) -> u64 {
    match &uuid[..12] {
        "GPU-aaaaaaaa" => 1000,
        "GPU-bbbbbbbb" => 2000,
        "GPU-cccccccc" => 3000,
        other => panic!("unknown GPU {other}"),
    }
}

/// Each line's GPUs as (index, uuid prefix), after checking that every
/// UUID carries its own GPU's reading.
fn layouts(stdout: &[u8]) -> Vec<Vec<(u64, String)>> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let gpus = v["gpus"].as_array().unwrap();
            gpus.iter()
                .map(|g| {
                    let uuid = g["uuid"].as_str().unwrap();
                    let used = g["memory"]["used"].as_u64().unwrap();
                    assert_eq!(used, used_mib_of(uuid) * MIB, "{uuid} shown with another GPU's memory: {line}");
                    (g["index"].as_u64().unwrap(), uuid[4..12].to_string())
                })
                .collect()
        })
        .collect()
}

fn layout(spec: &[(u64, &str)]) -> Vec<(u64, String)> {
    spec.iter().map(|(i, u)| (*i, u.to_string())).collect()
}

#[test]
fn the_watch_follows_gpus_that_come_go_and_move() {
    let sim = Sim::new(&scenario(MOVES));
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", "100ms", "--count", "45"]).output().unwrap();
    assert_success(&out);
    let seen = layouts(&out.stdout);
    let mut distinct: Vec<Vec<(u64, String)>> = Vec::new();
    for l in seen {
        if distinct.last() != Some(&l) {
            distinct.push(l);
        }
    }
    let expected = [
        layout(&[(0, "aaaaaaaa"), (1, "bbbbbbbb")]),
        layout(&[(0, "bbbbbbbb")]),
        layout(&[(0, "cccccccc"), (1, "bbbbbbbb"), (2, "aaaaaaaa")]),
        layout(&[(0, "bbbbbbbb"), (1, "aaaaaaaa"), (2, "cccccccc")]),
    ];
    assert_eq!(distinct, expected, "each change seen, in order, nothing in between");
}

#[test]
fn a_selected_gpu_is_followed_by_its_uuid() {
    let sim = Sim::new(&scenario(MOVES));
    // GPU 1 at start is B; it stays B wherever it moves.
    let out = sim
        .gpuscope()
        .args(["--json", "--watch", "--interval", "100ms", "--count", "35", "--gpus", "1"])
        .output()
        .unwrap();
    assert_success(&out);
    let seen = layouts(&out.stdout);
    assert!(seen.iter().all(|l| l.len() == 1 && l[0].1 == "bbbbbbbb"), "{seen:?}");
    let indices: Vec<u64> = seen.iter().map(|l| l[0].0).collect();
    assert!(indices.contains(&1) && indices.contains(&0), "B moved from index 1 to 0: {indices:?}");
}

#[test]
fn a_gpu_replaced_at_its_index_is_never_shown_with_the_old_one_s_readings() {
    // B leaves and C takes index 1 in the same moment: the count does not
    // change, and each tick asks NVML for one index's handle only. B's kept
    // handle then names nothing, which the tick notices at its first call.
    let sim = Sim::new(&scenario("[[topology]]\nat_s = 0\ngpus = [0, 1]\n[[topology]]\nat_s = 1.0\ngpus = [0, 2]\n"));
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", "100ms", "--count", "20"]).output().unwrap();
    assert_success(&out);
    let mut distinct: Vec<Vec<(u64, String)>> = Vec::new();
    for l in layouts(&out.stdout) {
        if distinct.last() != Some(&l) {
            distinct.push(l);
        }
    }
    let expected = [layout(&[(0, "aaaaaaaa"), (1, "bbbbbbbb")]), layout(&[(0, "aaaaaaaa"), (1, "cccccccc")])];
    assert_eq!(distinct, expected, "the change seen at once, and no line with an error in between");
}
