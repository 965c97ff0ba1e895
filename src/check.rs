//! `gpuscope check`: watch for a while, print the active alerts, and say
//! through the exit code how bad it is, for scripts and cron.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::{Alert, AlertKind, Severity, Snapshot};
use crate::poller::SnapshotRx;

pub const EXIT_WARNING: u8 = 1;
pub const EXIT_CRITICAL: u8 = 2;

/// The newest snapshot once `window` has passed (at least one).
pub async fn watch_for(mut rx: SnapshotRx, window: Duration) -> Option<std::sync::Arc<Snapshot>> {
    let deadline = Instant::now() + window;
    let mut last = None;
    loop {
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => last = rx.borrow_and_update().clone().or(last),
            Ok(Err(_)) => return last,
            Err(_) if last.is_some() => return last,
            // Past the window with nothing yet (a slow driver): wait for
            // the first snapshot rather than judge on none.
            Err(_) => {
                rx.changed().await.ok()?;
                return rx.borrow_and_update().clone();
            }
        }
    }
}

/// Exit code for the alerts that count: only `fail_on` kinds when given.
pub fn exit_code(alerts: &[Alert], fail_on: &[AlertKind]) -> u8 {
    let worst = alerts.iter().filter(|a| fail_on.is_empty() || fail_on.contains(&a.kind)).map(|a| a.severity).max();
    match worst {
        Some(Severity::Critical) => EXIT_CRITICAL,
        Some(Severity::Warning) => EXIT_WARNING,
        Some(Severity::Info) | None => 0,
    }
}

pub fn report(snap: &Snapshot, window: Duration) -> String {
    if snap.alerts.is_empty() {
        return format!("no alerts (watched {})\n", humantime::format_duration(window));
    }
    let mut out = String::new();
    for a in &snap.alerts {
        out.push_str(&crate::sinks::table::alert_text(a, 100));
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
        assert_eq!(exit_code(&alerts, &[]), EXIT_WARNING);
        assert_eq!(exit_code(&alerts, &[AlertKind::Oom]), 0);
        let crit = [alert(AlertKind::GpuLost, Severity::Critical)];
        assert_eq!(exit_code(&crit, &[AlertKind::GpuLost, AlertKind::Leak]), EXIT_CRITICAL);
    }
}
