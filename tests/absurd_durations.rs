//! Durations past any sane bound are refused where they are given, with a
//! message naming the bound, before anything runs: no panic in the poller
//! or the health handler, and no exit 0 after half the output.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Sim, gpuscope};

#[test]
fn absurd_flags_are_refused_with_their_bound() {
    let sim = Sim::new("[[gpu]]\n");
    let cases: [(&[&str], &str); 6] = [
        (&["--json", "--interval", "9223372036854775807s"], "at most 1day"),
        (&["--json", "--watch", "--interval", "99999999999999999999999ms"], "at most 1day"),
        (&["check", "--for", "18446744073709551615s"], "at most 30days"),
        (&["serve", "--interval", "6148914691236517205s"], "at most 1day"),
        (&["record", "/nonexistent/x.ndjson", "--duration", "18446744073709551615s"], "at most 1year"),
        (&["--json", "--timeout", "0s"], "at least 100ms"),
    ];
    for (args, bound) in cases {
        let out = sim.gpuscope().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.lines().next().is_some_and(|l| l.contains(bound)), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn absurd_config_durations_name_the_key() {
    let sim = Sim::new("[[gpu]]\n");
    let config = sim.dir.path().join("config.toml");
    std::fs::write(&config, "interval = \"9223372036854775807s\"\n").unwrap();
    let out = sim.gpuscope().args(["--json", "--config", config.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("interval") && err.contains("at most 1day"), "{err}");
}

#[test]
fn the_largest_interval_allowed_runs_and_exits_cleanly() {
    let sim = Sim::new("[[gpu]]\n");
    let out = sim.gpuscope().args(["--json", "--interval", "1day"]).output().unwrap();
    common::assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interval_ms"], 86_400_000);
    let out = gpuscope().args(["--demo", "check", "--for", "0s", "--interval", "1day"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the demo's lost GPU is critical: {}", String::from_utf8_lossy(&out.stderr));
}
