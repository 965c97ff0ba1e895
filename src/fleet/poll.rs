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
        let body = client.get(spec, "/snapshot").await.map_err(|e| e.to_string())?;
        // Up to `MAX_BODY` of JSON is tens of milliseconds of work: on a
        // thread of its own, so that neither the view nor the other hosts
        // (one runtime thread for all) wait for it.
        tokio::task::spawn_blocking(move || parse_snapshot(&body))
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
    };
    let timeout = client.timeout();
    tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| Err(FetchError::Timeout(timeout).to_string()))
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
