//! `fleet --prometheus URL`: the fleet from a Prometheus that scrapes the
//! nodes' exporters. Two instant queries a tick whatever the fleet's size:
//! every family the view reads (`assemble.rs`), and which instances served
//! gpuscope lately with whether their last scrape worked. A Prometheus that
//! is down or answers an error marks every host with that error; the view
//! keeps running and the hosts keep their last figures, stale. An instance
//! Prometheus stops naming is forgotten `FORGET_AFTER_INTERVALS` later.
//! A tick's answers are read within the timeout, off the runtime's thread,
//! in time linear in their size, and cut to `MAX_INSTANCES` and
//! `MAX_SERIES`.

pub mod api;
pub mod assemble;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use super::client::{Client, FetchError};
use super::hosts::{self, HostSpec};
#[cfg(test)]
use super::model::HostStatus;
use super::model::{Answer, FLEET_SCHEMA_VERSION, Fleet, HostState, MAX_INSTANCES, MAX_SERIES, Source, SourceCapped};
use super::poll::{FleetRx, now_ms};

/// Prometheus's own default port.
const DEFAULT_PORT: u16 = 9090;

/// Instances that served gpuscope in this window stay listed (stale when
/// their scrapes fail), then Prometheus's query no longer names them.
const UP_QUERY: &str =
    "max by (instance) (up) and on (instance) max by (instance) (last_over_time(gpuscope_build_info[10m]))";

/// An instance in neither query's answer for this many intervals is
/// forgotten: long enough to ride out one answer that missed it, short
/// enough that names Prometheus churns through do not pile up.
const FORGET_AFTER_INTERVALS: u32 = 3;

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
        capped: None,
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
/// scrape worked, within the caps.
struct Round {
    snapshots: BTreeMap<String, Answer>,
    up: HashMap<String, bool>,
    capped: Option<SourceCapped>,
}

impl Poller {
    async fn query(&self, promql: &str) -> Result<hyper::body::Bytes, String> {
        let path = api::query_path(&self.endpoint.prefix, promql);
        self.client.get(&self.endpoint.spec, &path).await.map_err(|e| format!("Prometheus: {e}"))
    }

    /// Both queries and the reading of their answers, together within the
    /// timeout.
    async fn round(&self) -> Result<Round, String> {
        let work = async {
            let families = assemble::families_query();
            let (series, up) = tokio::join!(self.query(&families), self.query(UP_QUERY));
            let (series, up) = (series?, up?);
            let interval_ms = crate::util::bounds::millis(self.interval);
            // Up to twice 16 MiB of JSON: on a thread of its own, so that
            // the view (on the runtime's one thread) is not held up.
            tokio::task::spawn_blocking(move || read_round(&series, &up, interval_ms, now_ms()))
                .await
                .map_err(|e| format!("reading Prometheus's answer: {e}"))?
        };
        let timeout = self.client.timeout();
        let late = || Err(format!("Prometheus: {}", FetchError::Timeout(timeout)));
        tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| late())
    }
}

/// The two answers into a round: each instance's series gathered once
/// (a map by instance, then by GPU and PID in `assemble.rs`), the first
/// `MAX_INSTANCES` instances by name kept.
fn read_round(series: &[u8], up: &[u8], interval_ms: u64, now: u64) -> Result<Round, String> {
    let (mut series, mut up) = (api::parse_vector(series)?, api::parse_vector(up)?);
    let series_sent = series.len();
    series.truncate(MAX_SERIES);
    up.truncate(MAX_SERIES);
    let named: BTreeSet<&str> = series.iter().chain(&up).filter_map(|s| s.label("instance")).collect();
    let instances_named = named.len();
    let kept: HashSet<String> = named.into_iter().take(MAX_INSTANCES).map(str::to_string).collect();
    let capped = (instances_named > MAX_INSTANCES || series_sent > MAX_SERIES)
        .then_some(SourceCapped { instances_named, series_sent });
    series.retain(|s| s.label("instance").is_some_and(|i| kept.contains(i)));
    let up = up
        .iter()
        .filter_map(|s| Some((s.label("instance").filter(|i| kept.contains(*i))?.to_string(), s.value == Some(1.0))))
        .collect();
    let snapshots =
        assemble::snapshots(&series, interval_ms, now).into_iter().map(|(i, snap)| (i, Answer::of(snap))).collect();
    Ok(Round { snapshots, up, capped })
}

async fn run(poller: Poller, mut fleet: Fleet, tx: watch::Sender<Arc<Fleet>>) {
    let mut ticks = tokio::time::interval(poller.interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let stale_after = crate::util::bounds::millis(poller.interval.saturating_mul(3));
    let forget_after = crate::util::bounds::millis(poller.interval.saturating_mul(FORGET_AFTER_INTERVALS));
    let mut named = HashMap::new();
    loop {
        ticks.tick().await;
        let result = poller.round().await;
        let now = now_ms();
        match result {
            Ok(round) => {
                apply(&mut fleet, round, &mut named, now, &poller.placeholder);
                forget(&mut fleet, &mut named, now.saturating_sub(forget_after));
                ensure_listed(&mut fleet, &poller.placeholder, now);
            }
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

/// A round onto the hosts, by name in a map: new instances are added in
/// name order after the known ones, and each one named is stamped in
/// `named` with `now`.
fn apply(fleet: &mut Fleet, round: Round, named: &mut HashMap<String, u64>, now: u64, placeholder: &str) {
    let Round { mut snapshots, up, capped } = round;
    fleet.capped = capped;
    fleet.hosts.retain(|h| h.host != placeholder);
    let names: BTreeSet<&String> = up.keys().chain(snapshots.keys()).collect();
    let mut known: HashSet<String> = fleet.hosts.iter().map(|h| h.host.clone()).collect();
    for name in names {
        named.insert(name.clone(), now);
        if known.insert(name.clone()) {
            fleet.hosts.push(HostState::new(name.clone()));
        }
    }
    for host in &mut fleet.hosts {
        match (snapshots.remove(&host.host), up.get(&host.host).copied()) {
            (Some(answer), Some(true) | None) => host.answered(answer, now),
            (_, Some(false)) => host.failed("Prometheus: its last scrape failed (up == 0)".into(), now),
            (None, _) => host.failed("Prometheus holds no gpuscope series for it now".into(), now),
        }
    }
}

/// Drops the instances last named before `before`. With each tick's
/// instances capped, the fleet holds at most `FORGET_AFTER_INTERVALS + 1`
/// ticks' worth of `MAX_INSTANCES` hosts, however fast names churn.
fn forget(fleet: &mut Fleet, named: &mut HashMap<String, u64>, before: u64) {
    named.retain(|_, at| *at >= before);
    fleet.hosts.retain(|h| named.contains_key(&h.host));
}

/// With no instance, the fleet is one line: Prometheus, and why.
fn ensure_listed(fleet: &mut Fleet, placeholder: &str, now: u64) {
    if fleet.hosts.is_empty() {
        let mut none = HostState::new(placeholder.to_string());
        none.failed("Prometheus holds no gpuscope series (is it scraping gpuscope serve?)".into(), now);
        fleet.hosts.push(none);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instant-vector answer of `series`, each (instance, value).
    fn vector(series: impl IntoIterator<Item = (String, &'static str)>) -> Vec<u8> {
        let result: Vec<serde_json::Value> = series
            .into_iter()
            .map(|(instance, v)| {
                serde_json::json!({"metric": {"__name__": "gpuscope_gpu_utilization_ratio", "instance": instance,
                    "gpu": "0"}, "value": [1.0, v]})
            })
            .collect();
        serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": result}})
            .to_string()
            .into_bytes()
    }

    fn round(instances: impl Iterator<Item = String> + Clone) -> Round {
        let body = vector(instances.map(|i| (i, "1")));
        read_round(&body, &body, 1000, 0).unwrap()
    }

    fn names(fleet: &Fleet) -> Vec<&str> {
        fleet.hosts.iter().map(|h| h.host.as_str()).collect()
    }

    #[test]
    fn instances_prometheus_stops_naming_are_forgotten_after_the_grace() {
        let mut fleet = Fleet {
            fleet_schema_version: FLEET_SCHEMA_VERSION,
            source: Source::Prometheus,
            time_unix_ms: 0,
            hosts: vec![HostState::new("prom (Prometheus)".into())],
            jobs: Vec::new(),
            capped: None,
        };
        let mut named = HashMap::new();
        let tick = |fleet: &mut Fleet, named: &mut HashMap<String, u64>, r: Round, now: u64| {
            apply(fleet, r, named, now, "prom (Prometheus)");
            forget(fleet, named, now.saturating_sub(3000));
        };
        tick(&mut fleet, &mut named, round(["a:1", "b:1"].map(String::from).into_iter()), 1000);
        assert_eq!(names(&fleet), ["a:1", "b:1"]);
        for now in [2000, 3000, 4000] {
            tick(&mut fleet, &mut named, round(["b:1"].map(String::from).into_iter()), now);
            assert_eq!(names(&fleet), ["a:1", "b:1"], "within the grace, at {now}");
            assert_eq!(fleet.hosts[0].status, HostStatus::Stale);
        }
        tick(&mut fleet, &mut named, round(["b:1"].map(String::from).into_iter()), 5000);
        assert_eq!(names(&fleet), ["b:1"], "3 intervals after it was last named");

        // Churn: every tick names 1,000 instances never seen before.
        for t in 0..50u64 {
            let churn = (0..1000).map(move |i| format!("churn-{t}-{i}:1"));
            tick(&mut fleet, &mut named, round(churn), 6000 + t * 1000);
            assert!(fleet.hosts.len() <= 4 * 1000, "{} hosts at tick {t}", fleet.hosts.len());
        }
        assert_eq!(named.len(), fleet.hosts.len());
    }

    #[test]
    fn a_tick_keeps_at_most_the_capped_instances_and_says_so() {
        let r = round((0..MAX_INSTANCES + 5).map(|i| format!("n{i:05}:1")));
        assert_eq!((r.snapshots.len(), r.up.len()), (MAX_INSTANCES, MAX_INSTANCES));
        let capped = r.capped.unwrap();
        assert_eq!(capped, SourceCapped { instances_named: MAX_INSTANCES + 5, series_sent: MAX_INSTANCES + 5 });
        assert_eq!(capped.text(), "capped: kept 2048 of 2053 instances");
        assert!(r.snapshots.contains_key("n00000:1") && !r.snapshots.contains_key("n02048:1"), "the first by name");
        assert_eq!(round((0..3).map(|i| format!("n{i}:1"))).capped, None);
    }

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
