//! One state machine per alert key (kind, GPU, process). Each tick a rule
//! gives every key it judges a verdict; a key it no longer mentions (the
//! process ended, the GPU left) clears. A verdict moves a key at most one
//! step, so no alert both enters and exits on one sample.

use std::collections::{BTreeMap, VecDeque};

use crate::model::{Alert, AlertEvent, AlertKind, Change, Severity, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlertKey {
    pub kind: AlertKind,
    pub gpu: Option<u32>,
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Raise {
    pub severity: Severity,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    pub message: String,
    pub hint: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The enter condition holds.
    Raise(Raise),
    /// Between the thresholds: an active alert stays, an inactive one
    /// stays inactive (and any wait towards raising starts over).
    Hold,
    /// The exit condition holds.
    Clear,
}

#[derive(Debug, Default)]
struct Tracker {
    /// When the enter condition began to hold, while waiting out the
    /// kind's minimum duration.
    pending_since: Option<Timestamp>,
    active: Option<Alert>,
}

pub const TIMELINE_LEN: usize = 500;

#[derive(Debug, Default)]
pub struct Engine {
    trackers: BTreeMap<AlertKey, Tracker>,
    timeline: VecDeque<AlertEvent>,
    last_ms: Option<u64>,
}

impl Engine {
    /// Applies one tick's verdicts. `min_duration_ms(kind)` is how long the
    /// enter condition must hold before an alert is raised; a gap in the
    /// data longer than `max_gap_ms` restarts every such wait.
    pub fn apply(
        &mut self,
        now: &Timestamp,
        verdicts: BTreeMap<AlertKey, Verdict>,
        min_duration_ms: impl Fn(AlertKind) -> u64,
        max_gap_ms: u64,
    ) -> Vec<AlertEvent> {
        let gap = self.last_ms.is_some_and(|last| now.time_unix_ms.saturating_sub(last) > max_gap_ms);
        self.last_ms = Some(now.time_unix_ms);
        let mut verdicts = verdicts;
        let mut events = Vec::new();
        for (key, tracker) in &mut self.trackers {
            let verdict = verdicts.remove(key).unwrap_or(Verdict::Clear);
            if gap {
                tracker.pending_since = None;
            }
            events.extend(step(tracker, *key, verdict, now, min_duration_ms(key.kind)));
        }
        // Rules give most keys Hold or Clear on most ticks; for a key not
        // followed yet those leave nothing to follow, so only a Raise
        // starts a tracker (rather than one made and dropped per key and
        // tick).
        for (key, verdict) in verdicts {
            if matches!(verdict, Verdict::Raise(_)) {
                let tracker = self.trackers.entry(key).or_default();
                events.extend(step(tracker, key, verdict, now, min_duration_ms(key.kind)));
            }
        }
        self.trackers.retain(|_, t| t.active.is_some() || t.pending_since.is_some());
        for e in &events {
            if self.timeline.len() == TIMELINE_LEN {
                self.timeline.pop_front();
            }
            self.timeline.push_back(e.clone());
        }
        events
    }

    /// The keys with an alert active or waiting to be raised, sorted: any
    /// other key's hold has nothing to act on.
    pub fn followed(&self) -> Vec<AlertKey> {
        self.trackers.keys().copied().collect()
    }

    /// Active alerts, most severe first.
    pub fn active(&self) -> Vec<Alert> {
        let mut alerts: Vec<Alert> = self.trackers.values().filter_map(|t| t.active.clone()).collect();
        alerts.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.kind.cmp(&b.kind)).then(a.gpu.cmp(&b.gpu)));
        alerts
    }

    pub fn timeline(&self) -> impl Iterator<Item = &AlertEvent> {
        self.timeline.iter()
    }
}

fn step(t: &mut Tracker, key: AlertKey, verdict: Verdict, now: &Timestamp, min_ms: u64) -> Option<AlertEvent> {
    let event = |change, a: &Alert| AlertEvent {
        time: now.clone(),
        change,
        kind: a.kind,
        severity: a.severity,
        gpu: a.gpu,
        pid: a.pid,
        message: a.message.clone(),
    };
    match verdict {
        Verdict::Raise(r) => {
            if let Some(active) = &mut t.active {
                let changed = active.severity != r.severity;
                fill(active, r);
                return changed.then(|| event(Change::Changed, active));
            }
            let since = t.pending_since.get_or_insert_with(|| now.clone()).clone();
            if now.time_unix_ms.saturating_sub(since.time_unix_ms) < min_ms {
                return None;
            }
            t.pending_since = None;
            let mut alert = Alert {
                kind: key.kind,
                severity: r.severity,
                gpu: key.gpu,
                pid: key.pid,
                since,
                value: None,
                threshold: None,
                message: String::new(),
                hint: String::new(),
            };
            fill(&mut alert, r);
            let e = event(Change::Raised, &alert);
            t.active = Some(alert);
            Some(e)
        }
        Verdict::Hold => {
            t.pending_since = None;
            None
        }
        Verdict::Clear => {
            t.pending_since = None;
            t.active.take().map(|a| event(Change::Cleared, &a))
        }
    }
}

fn fill(alert: &mut Alert, r: Raise) {
    alert.severity = r.severity;
    alert.value = r.value;
    alert.threshold = r.threshold;
    alert.message = r.message;
    alert.hint = r.hint;
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: AlertKey = AlertKey { kind: AlertKind::MemoryPressure, gpu: Some(0), pid: None };

    fn raise(severity: Severity) -> Verdict {
        Verdict::Raise(Raise {
            severity,
            value: Some(1.0),
            threshold: Some(5.0),
            message: "low".into(),
            hint: "less".into(),
        })
    }

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_system(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    }

    fn apply(e: &mut Engine, ms: u64, v: Verdict) -> Vec<Change> {
        e.apply(&at(ms), [(KEY, v)].into(), |_| 3_000, 10_000).into_iter().map(|e| e.change).collect()
    }

    #[test]
    fn raises_after_the_minimum_duration_and_clears_with_hysteresis() {
        let mut e = Engine::default();
        assert!(apply(&mut e, 0, raise(Severity::Warning)).is_empty());
        assert!(apply(&mut e, 2_000, raise(Severity::Warning)).is_empty());
        assert_eq!(apply(&mut e, 3_000, raise(Severity::Warning)), [Change::Raised]);
        assert_eq!(e.active()[0].since.time_unix_ms, 0, "since the condition began");
        assert!(apply(&mut e, 4_000, Verdict::Hold).is_empty());
        assert_eq!(e.active().len(), 1);
        assert_eq!(apply(&mut e, 5_000, raise(Severity::Critical)), [Change::Changed]);
        assert_eq!(apply(&mut e, 6_000, Verdict::Clear), [Change::Cleared]);
        assert!(e.active().is_empty());
        assert_eq!(e.timeline().count(), 3);
    }

    #[test]
    fn hold_and_gaps_restart_the_wait() {
        let mut e = Engine::default();
        apply(&mut e, 0, raise(Severity::Warning));
        apply(&mut e, 2_000, Verdict::Hold);
        assert!(apply(&mut e, 3_500, raise(Severity::Warning)).is_empty(), "wait restarted at 3 500");
        assert!(apply(&mut e, 20_000, raise(Severity::Warning)).is_empty(), "a gap restarts it too");
        assert_eq!(apply(&mut e, 23_000, raise(Severity::Warning)), [Change::Raised]);
    }

    #[test]
    fn only_a_raise_starts_following_a_key() {
        let mut e = Engine::default();
        let other = AlertKey { pid: Some(7), ..KEY };
        let verdicts = [(KEY, Verdict::Hold), (other, Verdict::Clear)].into();
        assert!(e.apply(&at(0), verdicts, |_| 3_000, 10_000).is_empty());
        assert!(e.trackers.is_empty(), "Hold and Clear leave nothing to follow");
        let verdicts = [(KEY, raise(Severity::Warning)), (other, Verdict::Clear)].into();
        assert!(e.apply(&at(1_000), verdicts, |_| 3_000, 10_000).is_empty());
        assert_eq!(e.trackers.len(), 1, "waiting out the minimum duration");
        assert_eq!(apply(&mut e, 4_000, raise(Severity::Warning)), [Change::Raised]);
    }

    #[test]
    fn a_key_no_rule_mentions_clears() {
        let mut e = Engine::default();
        e.apply(&at(0), [(KEY, raise(Severity::Warning))].into(), |_| 0, 10_000);
        assert_eq!(e.active().len(), 1);
        let events = e.apply(&at(1_000), BTreeMap::new(), |_| 0, 10_000);
        assert_eq!(events[0].change, Change::Cleared);
    }
}
