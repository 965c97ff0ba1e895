//! The fleet's collection: one task per host for the direct source (a
//! slow or dead host holds back only its own task, each attempt bounded by
//! the timeout, reading the answer included), and one aggregator that applies their answers and
//! publishes the whole picture on a `watch` channel, as the poller does
//! for the local dashboard.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use super::client::{Client, FetchError};
use super::hosts::HostSpec;
use super::jobs;
use super::model::{Answer, FLEET_SCHEMA_VERSION, Fleet, HostState, HostStatus, Source};
use crate::model::Snapshot;

pub type FleetRx = watch::Receiver<Arc<Fleet>>;

/// One host's answer (or why none), as a source reports it.
pub struct Outcome {
    pub host: String,
    pub result: Result<Answer, String>,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Starts the per-host tasks and the aggregator on the current runtime.
pub fn spawn_direct(hosts: &[HostSpec], client: &Client, interval: Duration) -> FleetRx {
    let names: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    let (out_tx, out_rx) = mpsc::channel(hosts.len().max(1) * 2);
    for spec in hosts {
        tokio::spawn(poll_host(spec.clone(), client.clone(), interval, out_tx.clone()));
    }
    spawn_aggregator(Source::Direct, names, interval, out_rx)
}

pub fn spawn_aggregator(
    source: Source,
    names: Vec<String>,
    interval: Duration,
    rx: mpsc::Receiver<Outcome>,
) -> FleetRx {
    let fleet = Fleet {
        fleet_schema_version: FLEET_SCHEMA_VERSION,
        source,
        time_unix_ms: now_ms(),
        hosts: names.into_iter().map(HostState::new).collect(),
        jobs: Vec::new(),
        capped: None,
    };
    let (tx, fleet_rx) = watch::channel(Arc::new(fleet.clone()));
    tokio::spawn(aggregate(fleet, interval, rx, tx));
    fleet_rx
}

async fn poll_host(spec: HostSpec, client: Client, interval: Duration, tx: mpsc::Sender<Outcome>) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let host = spec.to_string();
    loop {
        ticks.tick().await;
        let result = attempt(&spec, &client).await;
        if tx.send(Outcome { host: host.clone(), result }).await.is_err() {
            return;
        }
    }
}

/// One request and the reading of its answer, together within the
/// timeout: a node whose answer is slow to read is as late as one whose
/// network is slow.
async fn attempt(spec: &HostSpec, client: &Client) -> Result<Answer, String> {
    let work = async {
        let reply = client.get_reply(spec, "/snapshot").await.map_err(|e| e.to_string())?;
        // Up to `MAX_BODY` of JSON is tens of milliseconds of work: on a
        // thread of its own, so that neither the view nor the other hosts
        // (one runtime thread for all) wait for it.
        tokio::task::spawn_blocking(move || {
            let answer = parse_snapshot(&reply.body)?;
            let age = node_age_ms(&reply.headers, answer.snapshot.time.time_unix_ms);
            Ok(answer.aged(age))
        })
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
    };
    let timeout = client.timeout();
    tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| Err(FetchError::Timeout(timeout).to_string()))
}

/// How old a node's snapshot was when the node sent it, by the node's own
/// clock, so that this machine's clock need not agree with it: the age
/// `serve` states (`gpuscope-snapshot-age`, seconds), else the snapshot's
/// time against the answer's `Date` (whole seconds: up to one less), else
/// 0 (as old as the answer).
pub fn node_age_ms(headers: &hyper::HeaderMap, snapshot_unix_ms: u64) -> u64 {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let stated = text(crate::serve::SNAPSHOT_AGE_HEADER).and_then(|t| t.trim().parse::<f64>().ok());
    if let Some(secs) = stated.filter(|s| s.is_finite() && *s >= 0.0) {
        // A node's figure is bounded, not trusted: `as` saturates.
        return (secs * 1000.0) as u64;
    }
    let date = text(hyper::header::DATE.as_str()).and_then(|t| httpdate::parse_http_date(t).ok());
    date.and_then(|d| d.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).saturating_sub(snapshot_unix_ms))
}

/// A `/snapshot` body: the schema this gpuscope reads, cut to the caps and
/// summed up, or why not.
pub fn parse_snapshot(body: &[u8]) -> Result<Answer, String> {
    serde_json::from_slice::<Snapshot>(body).map(Answer::of).map_err(|e| {
        let mut why = format!("not a gpuscope snapshot: {e}");
        why.truncate(200);
        why
    })
}

/// Hosts whose newest answer is older than this many intervals are stale.
const STALE_AFTER_INTERVALS: u32 = 3;

async fn aggregate(
    mut fleet: Fleet,
    interval: Duration,
    mut rx: mpsc::Receiver<Outcome>,
    tx: watch::Sender<Arc<Fleet>>,
) {
    let stale_after = crate::util::bounds::millis(interval.saturating_mul(STALE_AFTER_INTERVALS));
    // A host whose request hangs sends nothing: ages are looked at on a
    // clock of their own, and published only when a status changes.
    let mut clock = tokio::time::interval(interval.max(Duration::from_millis(500)));
    clock.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let changed = tokio::select! {
            got = rx.recv() => {
                let Some(first) = got else { return };
                let now = now_ms();
                apply(&mut fleet, first, now);
                while let Ok(more) = rx.try_recv() {
                    apply(&mut fleet, more, now);
                }
                true
            }
            _ = clock.tick() => {
                let before: Vec<HostStatus> = fleet.hosts.iter().map(|h| h.status).collect();
                refresh(&mut fleet, now_ms(), stale_after);
                fleet.hosts.iter().map(|h| h.status).ne(before)
            }
        };
        if changed {
            refresh(&mut fleet, now_ms(), stale_after);
            fleet.jobs = jobs::group(&fleet.hosts);
            if tx.send(Arc::new(fleet.clone())).is_err() {
                return;
            }
        }
    }
}

fn refresh(fleet: &mut Fleet, now: u64, stale_after: u64) {
    fleet.time_unix_ms = now;
    for h in &mut fleet.hosts {
        h.refresh(now, stale_after);
    }
}

pub fn apply(fleet: &mut Fleet, outcome: Outcome, now: u64) {
    let index = match fleet.hosts.iter().position(|h| h.host == outcome.host) {
        Some(i) => i,
        None => {
            fleet.hosts.push(HostState::new(outcome.host.clone()));
            fleet.hosts.len() - 1
        }
    };
    let Some(host) = fleet.hosts.get_mut(index) else { return };
    match outcome.result {
        Ok(answer) => host.answered(answer, now),
        Err(why) => host.failed(why, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(pairs: &[(&'static str, &str)]) -> hyper::HeaderMap {
        pairs.iter().map(|(k, v)| (hyper::header::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    /// The node's own figure first, then its `Date`, then nothing: a
    /// node whose clock is an hour off is judged by its own clock.
    #[test]
    fn a_snapshot_s_age_is_the_node_s_own() {
        // Sun, 06 Nov 1994 08:49:37 GMT, as unix milliseconds.
        let date_ms = 784_111_777_000;
        let stated = headers(&[("gpuscope-snapshot-age", "18.250"), ("date", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(node_age_ms(&stated, 0), 18_250);
        let dated = headers(&[("date", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(node_age_ms(&dated, date_ms - 18_000), 18_000);
        assert_eq!(node_age_ms(&dated, date_ms + 500), 0, "a snapshot after its answer's Date is new");
        assert_eq!(node_age_ms(&headers(&[]), 0), 0);
        for bad in ["-1", "NaN", "inf", "soon"] {
            assert_eq!(node_age_ms(&headers(&[("gpuscope-snapshot-age", bad), ("date", "x")]), 0), 0, "{bad}");
        }
        assert_eq!(node_age_ms(&headers(&[("gpuscope-snapshot-age", "1e300")]), 0), u64::MAX);
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_snapshot(&body);
        }

        #[test]
        fn arbitrary_json_never_panics(text in "[\\[\\]{}\",:0-9a-z_ ]{0,300}") {
            let _ = parse_snapshot(text.as_bytes());
        }
    }
}
