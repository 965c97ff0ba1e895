//! `[alerts] exec` through the real binary: one-shot modes run the hook for
//! the alerts they report exactly once and wait for it (bounded); a hook
//! file without the execute bit is refused at start, naming it.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Sim, assert_success};

/// One GPU that fell off the bus: a critical `gpu_lost` alert at once.
const LOST: &str = "[[gpu]]\nname = \"Ok\"\n[[gpu]]\nstate = \"lost\"\n";

fn hook_config(dir: &Path, sleep: &str) -> std::path::PathBuf {
    let hook = dir.join("page-me");
    let log = dir.join("paged");
    std::fs::write(&hook, format!("#!/bin/sh\nsleep {sleep}\ncat >> '{}'\n", log.display())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("[alerts]\nexec = [{:?}]\n", hook.display().to_string())).unwrap();
    config
}

#[test]
fn one_shot_modes_run_the_hook_once_and_wait_for_it() {
    for args in [&["--json"][..], &["-1"], &["check", "--for", "200ms"]] {
        let sim = Sim::new(LOST);
        let config = hook_config(sim.dir.path(), "0.5");
        let t = Instant::now();
        let out = sim.gpuscope().args(args).arg("--config").arg(&config).output().unwrap();
        if args[0] == "check" {
            assert_eq!(out.status.code(), Some(2), "a lost GPU is critical");
        } else {
            assert_success(&out);
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{args:?}: bounded: {:?}", t.elapsed());
        // Right after gpuscope exits, not some time later.
        let paged = std::fs::read_to_string(sim.dir.path().join("paged")).unwrap_or_default();
        assert_eq!(paged.lines().count(), 1, "{args:?}: {paged}");
        assert!(paged.contains("\"kind\":\"gpu_lost\""), "{args:?}: {paged}");
    }
}

#[test]
fn a_hook_past_the_one_shot_wait_is_killed_and_said() {
    let sim = Sim::new(LOST);
    let config = hook_config(sim.dir.path(), "1000");
    let t = Instant::now();
    let out = sim.gpuscope().arg("--json").arg("--config").arg(&config).output().unwrap();
    assert_success(&out);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[alerts] exec") && stderr.contains("1 killed"), "{stderr}");
}

#[test]
fn a_hook_without_the_execute_bit_is_refused_at_start() {
    let sim = Sim::new(LOST);
    let config = hook_config(sim.dir.path(), "0");
    std::fs::set_permissions(sim.dir.path().join("page-me"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = sim.gpuscope().arg("--json").arg("--config").arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alerts.exec") && stderr.contains("page-me") && stderr.contains("not executable"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
