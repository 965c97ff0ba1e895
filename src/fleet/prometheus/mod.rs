//! `fleet --prometheus URL`: the fleet from a Prometheus that scrapes the
//! nodes' exporters. Two instant queries a tick whatever the fleet's size:
//! every family the view reads (`assemble.rs`), and which instances served
//! gpuscope lately with whether their last scrape worked. A Prometheus that
//! is down or answers an error marks every host with that error; the view
//! keeps running and the hosts keep their last figures, stale.

pub mod api;
pub mod assemble;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use super::client::Client;
use super::hosts::{self, HostSpec};
use super::model::{Answer, FLEET_SCHEMA_VERSION, Fleet, HostState, Source};
use super::poll::{FleetRx, now_ms};

/// Prometheus's own default port.
const DEFAULT_PORT: u16 = 9090;

/// Instances that served gpuscope in this window stay listed (stale when
/// their scrapes fail), then are forgotten by Prometheus's query.
const UP_QUERY: &str =
    "max by (instance) (up) and on (instance) max by (instance) (last_over_time(gpuscope_build_info[10m]))";

/// Where Prometheus's API is: scheme, host, port, and a path prefix.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub spec: HostSpec,
    pub prefix: String,
}

/// `http[s]://HOST[:PORT][/PREFIX]`, port 9090 when not given.
pub fn parse_url(url: &str) -> Result<Endpoint, String> {
    let t = url.trim();
    let (scheme, rest) = t.split_once("://").unwrap_or(("http", t));
    let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let mut spec = hosts::parse(&format!("{scheme}://{authority}")).map_err(|e| format!("--prometheus {e}"))?;
    let has_port = match authority.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => authority.contains(':'),
    };
    if !has_port {
        spec.port = DEFAULT_PORT;
    }
    let prefix = prefix.trim_end_matches('/');
    let prefix = if prefix.is_empty() { String::new() } else { format!("/{prefix}") };
    Ok(Endpoint { spec, prefix })
}

pub fn spawn(endpoint: Endpoint, client: Client, interval: Duration) -> FleetRx {
    // Until the first answer the fleet is one line: Prometheus itself.
    let placeholder = format!("{} (Prometheus)", endpoint.spec);
    let fleet = Fleet {
        fleet_schema_version: FLEET_SCHEMA_VERSION,
        source: Source::Prometheus,
        time_unix_ms: now_ms(),
        hosts: vec![HostState::new(placeholder.clone())],
        jobs: Vec::new(),
    };
    let (tx, rx) = watch::channel(Arc::new(fleet.clone()));
    tokio::spawn(run(Poller { endpoint, client, interval, placeholder }, fleet, tx));
    rx
}

struct Poller {
    endpoint: Endpoint,
    client: Client,
    interval: Duration,
    placeholder: String,
}

/// One tick's answer: every instance's snapshot, and whether its last
/// scrape worked.
struct Round {
    snapshots: std::collections::BTreeMap<String, crate::model::Snapshot>,
    up: Vec<(String, bool)>,
}

impl Poller {
    async fn query(&self, promql: &str) -> Result<Vec<api::Sample>, String> {
        let path = api::query_path(&self.endpoint.prefix, promql);
        let body = self.client.get(&self.endpoint.spec, &path).await.map_err(|e| format!("Prometheus: {e}"))?;
        api::parse_vector(&body)
    }

    async fn round(&self) -> Result<Round, String> {
        let families = assemble::families_query();
        let (series, up) = tokio::join!(self.query(&families), self.query(UP_QUERY));
        let (series, up) = (series?, up?);
        let interval_ms = crate::bounds::millis(self.interval);
        let up = up.iter().filter_map(|s| Some((s.label("instance")?.to_string(), s.value == Some(1.0)))).collect();
        Ok(Round { snapshots: assemble::snapshots(&series, interval_ms, now_ms()), up })
    }
}

async fn run(poller: Poller, mut fleet: Fleet, tx: watch::Sender<Arc<Fleet>>) {
    let mut ticks = tokio::time::interval(poller.interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let stale_after = crate::bounds::millis(poller.interval.saturating_mul(3));
    loop {
        ticks.tick().await;
        let result = poller.round().await;
        let now = now_ms();
        match result {
            Ok(round) => apply(&mut fleet, round, &poller.placeholder, now),
            Err(why) => fleet.hosts.iter_mut().for_each(|h| h.failed(why.clone(), now)),
        }
        fleet.time_unix_ms = now;
        fleet.hosts.iter_mut().for_each(|h| h.refresh(now, stale_after));
        fleet.jobs = super::jobs::group(&fleet.hosts);
        if tx.send(Arc::new(fleet.clone())).is_err() {
            return;
        }
    }
}

fn apply(fleet: &mut Fleet, mut round: Round, placeholder: &str, now: u64) {
    fleet.hosts.retain(|h| h.host != placeholder);
    let mut names: Vec<String> = round.up.iter().map(|(i, _)| i.clone()).collect();
    names.extend(round.snapshots.keys().cloned());
    names.sort();
    for name in names {
        if !fleet.hosts.iter().any(|h| h.host == name) {
            fleet.hosts.push(HostState::new(name));
        }
    }
    for host in &mut fleet.hosts {
        let up = round.up.iter().find(|(i, _)| *i == host.host).map(|(_, up)| *up);
        match (round.snapshots.remove(&host.host), up) {
            (Some(snap), Some(true) | None) => host.answered(Answer::of(snap), now),
            (_, Some(false)) => host.failed("Prometheus: its last scrape failed (up == 0)".into(), now),
            (None, _) => host.failed("Prometheus holds no gpuscope series for it now".into(), now),
        }
    }
    if fleet.hosts.is_empty() {
        let mut none = HostState::new(placeholder.to_string());
        none.failed("Prometheus holds no gpuscope series (is it scraping gpuscope serve?)".into(), now);
        fleet.hosts.push(none);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = parse_url("http://prom").unwrap();
        assert_eq!((e.spec.port, e.prefix.as_str()), (DEFAULT_PORT, ""));
        let e = parse_url("https://prom:443/prometheus/").unwrap();
        assert_eq!((e.spec.to_string().as_str(), e.prefix.as_str()), ("https://prom:443", "/prometheus"));
        assert_eq!(parse_url("127.0.0.1:9091").unwrap().spec.port, 9091);
        assert_eq!(parse_url("[::1]").unwrap().spec.port, DEFAULT_PORT);
        assert!(parse_url("ftp://x").unwrap_err().starts_with("--prometheus "));
    }
}
