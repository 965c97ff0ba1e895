//! `[alerts] exec`: a user command run for each raised alert, with the
//! alert as JSON on its standard input. It runs on a thread of its own and
//! is never waited for by collection; a command that hangs is killed.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::model::{Alert, AlertKind};

const TIME_LIMIT: Duration = Duration::from_secs(30);

pub struct ExecHook {
    argv: Vec<String>,
    min_interval: Duration,
    last: HashMap<(AlertKind, Option<u32>, Option<u32>), Instant>,
}

impl ExecHook {
    pub fn new(argv: &[String], min_interval: Duration) -> Option<Self> {
        (!argv.is_empty()).then(|| Self { argv: argv.to_vec(), min_interval, last: HashMap::new() })
    }

    /// Runs the command for `alert`, unless it ran for the same alert key
    /// less than `min_interval` ago.
    pub fn fire(&mut self, alert: &Alert) {
        let key = (alert.kind, alert.gpu, alert.pid);
        if self.last.get(&key).is_some_and(|t| t.elapsed() < self.min_interval) {
            return;
        }
        self.last.insert(key, Instant::now());
        let Ok(json) = crate::sinks::json::to_vec(alert) else { return };
        let argv = self.argv.clone();
        std::thread::spawn(move || run(&argv, &json));
    }
}

fn run(argv: &[String], input: &[u8]) {
    let Some((program, args)) = argv.split_first() else { return };
    // Its output would land on gpuscope's terminal or JSON stream.
    let Ok(mut child) =
        Command::new(program).args(args).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()
    else {
        return;
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
        let _ = stdin.write_all(b"\n");
    }
    let started = Instant::now();
    while started.elapsed() < TIME_LIMIT {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether `program` can be run: a path that exists, or a name on `PATH`.
pub fn findable(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Severity, Timestamp};

    fn alert() -> Alert {
        Alert {
            kind: AlertKind::Oom,
            severity: Severity::Critical,
            gpu: Some(0),
            pid: Some(42),
            since: Timestamp::from_unix_secs(1_700_000_000),
            value: Some(1.0),
            threshold: None,
            message: "CUDA out of memory".into(),
            hint: "smaller batch".into(),
        }
    }

    #[test]
    fn the_command_gets_the_alert_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("got");
        let script = format!("cat >> {}", out.display());
        let mut hook = ExecHook::new(&["sh".into(), "-c".into(), script], Duration::from_secs(60)).unwrap();
        hook.fire(&alert());
        hook.fire(&alert());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&out).is_ok_and(|s| s.ends_with('\n')) {
            assert!(Instant::now() < deadline, "the hook never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().count(), 1, "rate-limited: {text}");
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!((v["kind"].as_str(), v["pid"].as_u64()), (Some("oom"), Some(42)));
        assert!(findable("sh") && !findable("/nonexistent/notify"));
    }
}
