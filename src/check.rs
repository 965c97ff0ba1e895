//! `gpuscope check`: watch for a while, print the active alerts, and say
//! through the exit code how bad it is, for scripts and cron.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::exit;
use crate::model::{Alert, AlertKind, Gpu, HealthVerdict, Severity, Snapshot};
use crate::poller::SnapshotRx;

/// How long a check of the alerts watches by default.
pub const WINDOW: Duration = Duration::from_secs(10);

/// What a check judges, and how it says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge<'a> {
    /// The active alerts, those of `fail_on`'s kinds only where given.
    Alerts(&'a [AlertKind]),
    /// Each GPU's health verdict (`--health`), for a Slurm prolog.
    Health,
    /// The same, in node-problem-detector's custom plugin protocol
    /// (`--health --npd`).
    HealthNpd,
}

impl Judge<'_> {
    pub fn health(&self) -> bool {
        !matches!(self, Self::Alerts(_))
    }
}

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

/// The node's health: the worst GPU's verdict, a first line that says it
/// and why, then a line per reason and per healthy GPU, for a Slurm prolog
/// or epilog (whose log keeps stdout) and a person. NVML listing no GPU at
/// all is critical: the check runs where GPUs are expected.
pub fn health_report(snap: &Snapshot) -> (String, u8) {
    let worst = node_verdict(snap);
    let counts = |v: HealthVerdict| snap.gpus.iter().filter(|g| verdict(g) == v).count();
    let mut out = match worst {
        _ if snap.gpus.is_empty() => "health CRITICAL: NVML lists no GPU\n".to_string(),
        v => format!(
            "health {}: {} critical, {} warning, {} ok of {} GPU(s)\n",
            shout(v),
            counts(HealthVerdict::Critical),
            counts(HealthVerdict::Warning),
            counts(HealthVerdict::Ok),
            snap.gpus.len()
        ),
    };
    for gpu in &snap.gpus {
        let who = format!("GPU {} {}", gpu.index, gpu.uuid.as_deref().unwrap_or("(no UUID)"));
        let Some(h) = &gpu.health else {
            out.push_str(&format!("{who}: not judged\n"));
            continue;
        };
        for r in &h.reasons {
            out.push_str(&format!("{who}: {} {}: {}\n", shout(r.severity.into()), r.code.word(), r.message));
        }
        if h.reasons.is_empty() {
            out.push_str(&format!("{who}: ok"));
            if !h.unchecked.is_empty() {
                let words: Vec<&str> = h.unchecked.iter().map(|c| c.word()).collect();
                out.push_str(&format!(" (not checked: {})", words.join(", ")));
            }
            out.push('\n');
        }
    }
    (out, health_exit(worst))
}

/// node-problem-detector's custom plugin protocol (its
/// `pkg/custompluginmonitor`: exit 0 OK, 1 NonOK, anything else Unknown;
/// stdout trimmed and cut at `max_output_length`, 80 bytes by default):
/// one line, the worst reason first. A node is NonOK only when a GPU is
/// critical: a warning (a pending remapping, a hot board) does not take a
/// node out of service, and is said in the OK message.
pub fn npd_report(snap: &Snapshot) -> (String, u8) {
    let worst = node_verdict(snap);
    let first =
        snap.gpus.iter().filter_map(|g| Some((g, g.health.as_ref()?.reasons.first()?))).max_by_key(|(_, r)| r.severity);
    let line = match (worst, first) {
        _ if snap.gpus.is_empty() => "NVML lists no GPU".to_string(),
        (HealthVerdict::Ok, _) | (_, None) => format!("{} GPU(s) healthy", snap.gpus.len()),
        (v, Some((g, r))) => format!("{} GPU {}: {}", v.word(), g.index, r.message),
    };
    let code = if worst == HealthVerdict::Critical || snap.gpus.is_empty() { exit::NPD_NON_OK } else { exit::NPD_OK };
    (format!("{}\n", cut(&line, NPD_MAX_OUTPUT)), code)
}

/// node-problem-detector's default `max_output_length`.
const NPD_MAX_OUTPUT: usize = 80;

fn verdict(g: &Gpu) -> HealthVerdict {
    g.health.as_ref().map_or(HealthVerdict::Ok, |h| h.verdict)
}

fn node_verdict(snap: &Snapshot) -> HealthVerdict {
    if snap.gpus.is_empty() {
        return HealthVerdict::Critical;
    }
    snap.gpus.iter().map(verdict).max().unwrap_or(HealthVerdict::Ok)
}

pub fn health_exit(v: HealthVerdict) -> u8 {
    match v {
        HealthVerdict::Ok => exit::OK,
        HealthVerdict::Warning => exit::CHECK_WARNING,
        HealthVerdict::Critical => exit::CHECK_CRITICAL,
    }
}

fn shout(v: HealthVerdict) -> &'static str {
    match v {
        HealthVerdict::Ok => "OK",
        HealthVerdict::Warning => "WARNING",
        HealthVerdict::Critical => "CRITICAL",
    }
}

/// At most `max` bytes, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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

    fn node(verdicts: &[Option<(crate::model::HealthCode, Severity, &str)>]) -> Snapshot {
        let mut snap = crate::serve::metrics::tests::snapshot();
        snap.gpus = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut g = Gpu::blank(i as u32, crate::model::GpuState::Ok);
                g.uuid = Some(format!("GPU-{i}"));
                let reasons = v
                    .iter()
                    .map(|(code, severity, message)| crate::model::HealthReason {
                        code: *code,
                        severity: *severity,
                        message: (*message).into(),
                    })
                    .collect();
                g.health =
                    Some(crate::model::Health::from_reasons(reasons, vec![crate::model::HealthCode::PcieReplays]));
                g
            })
            .collect();
        snap
    }

    #[test]
    fn the_worst_gpu_decides_the_exit_and_the_first_line_says_so() {
        use crate::model::HealthCode::{HwThermalSlowdown, RowRemapFailed};
        let ok = node(&[None, None]);
        let (text, code) = health_report(&ok);
        assert_eq!(code, exit::OK);
        assert!(text.starts_with("health OK: 0 critical, 0 warning, 2 ok of 2 GPU(s)\n"), "{text}");
        assert!(text.contains("GPU 1 GPU-1: ok (not checked: pcie_replays)"), "{text}");
        let warm = node(&[None, Some((HwThermalSlowdown, Severity::Warning, "too hot"))]);
        assert_eq!(health_report(&warm).1, exit::CHECK_WARNING);
        let bad = node(&[Some((RowRemapFailed, Severity::Critical, "replace the board")), None]);
        let (text, code) = health_report(&bad);
        assert_eq!(code, exit::CHECK_CRITICAL);
        assert!(text.contains("GPU 0 GPU-0: CRITICAL row_remap_failed: replace the board\n"), "{text}");
        let (text, code) = health_report(&node(&[]));
        assert_eq!((text.as_str(), code), ("health CRITICAL: NVML lists no GPU\n", exit::CHECK_CRITICAL));
    }

    #[test]
    fn node_problem_detector_gets_one_short_line_and_non_ok_only_when_critical() {
        use crate::model::HealthCode::{HwThermalSlowdown, RowRemapFailed};
        let (text, code) = npd_report(&node(&[None]));
        assert_eq!((text.as_str(), code), ("1 GPU(s) healthy\n", exit::NPD_OK));
        let (text, code) = npd_report(&node(&[Some((HwThermalSlowdown, Severity::Warning, "too hot"))]));
        assert_eq!((text.as_str(), code), ("warning GPU 0: too hot\n", exit::NPD_OK));
        let long = "a row remapping failed: the memory has no spare rows left; replace the board, soon";
        let bad = node(&[None, Some((RowRemapFailed, Severity::Critical, long))]);
        let (text, code) = npd_report(&bad);
        assert_eq!(code, exit::NPD_NON_OK);
        assert!(
            text.starts_with("critical GPU 1: a row remapping failed") && text.len() <= NPD_MAX_OUTPUT + 1,
            "{text}"
        );
        assert_eq!(cut("héllo", 2), "h", "cut on a character boundary");
    }
}
