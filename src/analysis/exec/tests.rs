use super::*;
use crate::model::{Severity, Timestamp};

fn alert(pid: u32) -> Alert {
    Alert {
        kind: AlertKind::Oom,
        severity: Severity::Critical,
        gpu: Some(0),
        pid: Some(pid),
        since: Timestamp::from_unix_secs(1_700_000_000),
        value: Some(1.0),
        threshold: None,
        message: "CUDA out of memory".into(),
        hint: "smaller batch".into(),
    }
}

fn sh(script: String) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script]
}

fn wait_until(what: &str, ok: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_command_gets_the_alert_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("got");
    let pool = Pool::new(4, 8, Duration::from_secs(10));
    let mut hook =
        ExecHook::with_pool(&sh(format!("cat >> {}", out.display())), Duration::from_secs(60), pool.clone()).unwrap();
    hook.fire(&alert(42));
    hook.fire(&alert(42));
    assert_eq!(pool.finish(Duration::from_secs(10)), Counts { finished: 1, killed: 0, dropped: 0 }, "rate-limited");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!((v["kind"].as_str(), v["pid"].as_u64()), (Some("oom"), Some(42)));
}

/// A storm of alerts: at most `max_running` runs at once, the queue takes
/// what it can hold, and the rest is counted, not started.
#[test]
fn a_storm_runs_a_few_at_a_time_and_counts_what_it_drops() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = format!("echo start >> {l}; sleep 0.3; echo end >> {l}", l = log.display());
    let pool = Pool::new(2, 3, Duration::from_secs(10));
    let mut hook = ExecHook::with_pool(&sh(script), Duration::from_secs(60), pool.clone()).unwrap();
    for pid in 0..60 {
        hook.fire(&alert(pid));
    }
    let counts = pool.finish(Duration::from_secs(20));
    assert_eq!(counts, Counts { finished: 5, killed: 0, dropped: 55 });
    let text = std::fs::read_to_string(&log).unwrap();
    let (mut now, mut most) = (0i32, 0);
    for line in text.lines() {
        now += if line == "start" { 1 } else { -1 };
        most = most.max(now);
    }
    assert_eq!(text.lines().count(), 10, "{text}");
    assert!(most <= 2, "{most} hooks ran at once:\n{text}");
}

fn alive(pid: i32) -> bool {
    // A zombie still has /proc/PID; its state says it is gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// The time limit kills the hook and what it started, not just the hook.
#[test]
fn the_time_limit_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
    let pool = Pool::new(4, 8, Duration::from_millis(500));
    let mut hook = ExecHook::with_pool(&sh(script), Duration::from_secs(60), pool.clone()).unwrap();
    hook.fire(&alert(1));
    wait_until("the hook started its child", || std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')));
    let child: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(alive(child));
    wait_until("the time limit killed the hook", || pool.counts().killed == 1);
    wait_until("the hook's child died with it", || !alive(child));
}

/// Exiting kills what is still running, with its group, after the wait.
#[test]
fn finish_waits_then_kills_what_is_left() {
    let pool = Pool::new(4, 8, Duration::from_secs(60));
    let mut hook = ExecHook::with_pool(&sh("sleep 1000".into()), Duration::from_secs(60), pool.clone()).unwrap();
    hook.fire(&alert(1));
    let quick = ExecHook::with_pool(&sh("true".into()), Duration::from_secs(60), pool.clone());
    quick.unwrap().fire(&alert(2));
    let t = Instant::now();
    let counts = pool.finish(Duration::from_millis(500));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(counts, Counts { finished: 1, killed: 1, dropped: 0 });
    hook.fire(&alert(3));
    assert_eq!(pool.counts().dropped, 1, "closed: no new runs");
}

#[test]
fn a_program_must_exist_and_be_executable() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("notify");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let err = resolve(script.to_str().unwrap()).unwrap_err();
    assert!(err.contains("notify") && err.contains("not executable"), "{err}");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(resolve(script.to_str().unwrap()).unwrap(), script);
    assert!(resolve("sh").unwrap().is_absolute());
    assert!(resolve("/nonexistent/notify").unwrap_err().contains("cannot find"));
    assert!(resolve(dir.path().to_str().unwrap()).unwrap_err().contains("not a file"));
}
