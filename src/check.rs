//! `gpuscope check`: watch for a while, print the active alerts, and say
//! through the exit code how bad it is, for scripts and cron.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::exit;
use crate::model::{Alert, AlertKind, Severity, Snapshot};
use crate::poller::SnapshotRx;

/// What a check saw: the newest snapshot, and whether the driver went
/// silent (nothing new by the deadline).
#[derive(Debug)]
pub struct Watched {
    pub last: Option<Arc<Snapshot>>,
    /// When `last` came; `None` with it.
    pub last_at: Option<Instant>,
    pub silent: bool,
}

/// Watches until `window_end`, then returns the newest snapshot if it is
/// at most `fresh_within` old. A stale one (the driver stopped answering)
/// or none at all is waited on until `deadline` for a new one: what has
/// not come by then is a silent driver, never "no alerts".
pub async fn watch_for(mut rx: SnapshotRx, window_end: Instant, fresh_within: Duration, deadline: Instant) -> Watched {
    let mut seen = Watched { last: None, last_at: None, silent: false };
    loop {
        let until = if Instant::now() < window_end { window_end } else { deadline };
        match tokio::time::timeout_at(until, rx.changed()).await {
            Ok(Ok(())) => {
                if let Some(snap) = rx.borrow_and_update().clone() {
                    seen.last = Some(snap);
                    seen.last_at = Some(Instant::now());
                }
            }
            // The poller stopped (it panicked): nothing more will come.
            Ok(Err(_)) => {
                seen.silent = true;
                return seen;
            }
            Err(_) => {}
        }
        let now = Instant::now();
        if now < window_end {
            continue;
        }
        if seen.last_at.is_some_and(|at| now.duration_since(at) <= fresh_within) {
            return seen;
        }
        if now >= deadline {
            seen.silent = true;
            return seen;
        }
    }
}

/// Exit code for the alerts that count: only `fail_on` kinds when given.
pub fn exit_code(alerts: &[Alert], fail_on: &[AlertKind]) -> u8 {
    let worst = alerts.iter().filter(|a| fail_on.is_empty() || fail_on.contains(&a.kind)).map(|a| a.severity).max();
    match worst {
        Some(Severity::Critical) => exit::CHECK_CRITICAL,
        Some(Severity::Warning) => exit::CHECK_WARNING,
        Some(Severity::Info) | None => 0,
    }
}

/// The report on stdout. A silent driver is a critical finding of its own,
/// after whatever the last snapshot said.
pub fn report(seen: &Watched, window: Duration, silence: Option<&str>) -> String {
    let mut out = seen.last.as_deref().map(|snap| alerts_text(snap, window, silence.is_none())).unwrap_or_default();
    if let Some(why) = silence {
        out.push_str(&format!("CRITICAL driver: {why}\n"));
    }
    out
}

fn alerts_text(snap: &Snapshot, window: Duration, complete: bool) -> String {
    if snap.alerts.is_empty() {
        if !complete {
            return String::new();
        }
        return format!("no alerts (watched {})\n", humantime::format_duration(window));
    }
    let mut out = String::new();
    for a in &snap.alerts {
        out.push_str(&crate::output::table::alert_text(a, 100));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;

    fn alert(kind: AlertKind, severity: Severity) -> Alert {
        Alert {
            kind,
            severity,
            gpu: Some(0),
            pid: None,
            since: Timestamp::from_unix_secs(0),
            value: None,
            threshold: None,
            message: String::new(),
            hint: String::new(),
        }
    }

    #[test]
    fn worst_counted_severity_decides() {
        let alerts = [alert(AlertKind::Starved, Severity::Info), alert(AlertKind::Leak, Severity::Warning)];
        assert_eq!(exit_code(&[], &[]), 0);
        assert_eq!(exit_code(&alerts[..1], &[]), 0, "info alone is not a failure");
        assert_eq!(exit_code(&alerts, &[]), exit::CHECK_WARNING);
        assert_eq!(exit_code(&alerts, &[AlertKind::Oom]), 0);
        let crit = [alert(AlertKind::GpuLost, Severity::Critical)];
        assert_eq!(exit_code(&crit, &[AlertKind::GpuLost, AlertKind::Leak]), exit::CHECK_CRITICAL);
    }
}
