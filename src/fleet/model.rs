//! What the fleet knows: every host with its newest snapshot or why there
//! is none, and since when; the jobs across hosts. Published whole on a
//! `watch` channel; the snapshots are shared, not copied.
//!
//! A node's answer is cut to the caps below and summed up once, where it
//! arrives (`Answer::of`, off the view's task): the host table is redrawn
//! many times a second and must cost the same whatever a node sent.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use super::jobs::Job;
use crate::model::{HealthVerdict, Snapshot};

/// Bumped when a field of `fleet --json` is renamed, removed or changes
/// meaning; each host's `snapshot` follows the snapshot's own schema.
pub const FLEET_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Each node's `gpuscope serve`, `/snapshot`.
    Direct,
    /// A Prometheus that scrapes the nodes' exporters.
    Prometheus,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub fleet_schema_version: u32,
    pub source: Source,
    /// When this state was published, unix milliseconds.
    pub time_unix_ms: u64,
    pub hosts: Vec<HostState>,
    pub jobs: Vec<Job>,
    /// What the source named beyond its caps at its newest answer (only
    /// Prometheus has them); `null`: nothing was left out.
    pub capped: Option<SourceCapped>,
}

/// Prometheus's instances and series of one tick, counted before the caps
/// of `prometheus/mod.rs` kept the first of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceCapped {
    pub instances_named: usize,
    pub series_sent: usize,
}

impl SourceCapped {
    /// "capped: kept 2048 of 45000 instances, 262144 of 300000 series".
    pub fn text(&self) -> String {
        let all = [(self.instances_named, MAX_INSTANCES, "instances"), (self.series_sent, MAX_SERIES, "series")];
        kept_text(&all)
    }
}

/// The most GPUs kept of one node's answer. One operating system drives at
/// most a few dozen GPUs (8 on an HGX board, 16 on the largest single-image
/// servers): 1,024 is far past any real node, yet small enough that every
/// screen over it stays cheap.
pub const MAX_GPUS: usize = 1024;
/// The most processes kept of one node's answer: 16 a GPU at `MAX_GPUS`
/// (MPS and MIG put a few dozen on one GPU, but not on a thousand of them).
pub const MAX_PROCESSES: usize = 16_384;
/// The most alerts (and alert events) kept: 4 a GPU at `MAX_GPUS`.
pub const MAX_ALERTS: usize = 4096;

/// The most instances kept of Prometheus's answer (`--prometheus`): the
/// series of a few hundred 8-GPU nodes fill the client's 16 MiB answer
/// cap, and the host list stays one a screen can page through.
pub const MAX_INSTANCES: usize = 2048;
/// The most series read of one Prometheus answer: 16 MiB holds about
/// 140,000 series as the exporter labels them, so only series barer than
/// the exporter's meet this cap.
pub const MAX_SERIES: usize = 1 << 18;

/// What a node sent beyond the caps, counted before they were applied; the
/// snapshot holds the first `MAX_*` of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capped {
    pub gpus_sent: usize,
    pub processes_sent: usize,
    pub alerts_sent: usize,
}

impl Capped {
    /// "kept 1024 of 20000 GPUs, 16384 of 50000 processes".
    pub fn text(&self) -> String {
        let all = [
            (self.gpus_sent, MAX_GPUS, "GPUs"),
            (self.processes_sent, MAX_PROCESSES, "processes"),
            (self.alerts_sent, MAX_ALERTS, "alerts"),
        ];
        kept_text(&all)
    }
}

/// "capped: kept CAP of SENT WHAT, ..." for each (SENT, CAP, WHAT) over its cap.
fn kept_text(all: &[(usize, usize, &str)]) -> String {
    let parts: Vec<String> = all
        .iter()
        .filter(|(sent, cap, _)| sent > cap)
        .map(|(sent, cap, what)| format!("{cap} of {sent} {what}"))
        .collect();
    format!("capped: kept {}", parts.join(", "))
}

/// The host table's figures of one answer, computed when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// GPUs with a process on them or at least 5% utilisation.
    pub busy_gpus: usize,
    pub gpus: usize,
    /// Used and total over the GPUs that report both; `None`: none does.
    pub memory: Option<(u64, u64)>,
    pub alerts: usize,
    /// The mean of the GPUs' SM activity, percent, over those that report
    /// it; `None`: none does.
    pub sm_active: Option<u32>,
    /// The worst GPU's health verdict, and that GPU; `None`: no GPU was
    /// judged.
    pub health: Option<(HealthVerdict, u32)>,
}

/// One node's snapshot, cut to the caps, with its summary.
#[derive(Debug, Clone)]
pub struct Answer {
    pub snapshot: Arc<Snapshot>,
    pub summary: Summary,
    pub capped: Option<Capped>,
    /// How old the snapshot was when the node sent it, by the node's own
    /// clock (`poll::node_age_ms`); 0 where the node did not say.
    pub node_age_ms: u64,
}

impl Answer {
    /// Linear in what the node sent: every figure is read once.
    pub fn of(mut snap: Snapshot) -> Self {
        let capped = cap(&mut snap);
        Self { summary: summarize(&snap), capped, snapshot: Arc::new(snap), node_age_ms: 0 }
    }

    /// The answer of a snapshot that was `node_age_ms` old when sent.
    pub fn aged(self, node_age_ms: u64) -> Self {
        Self { node_age_ms, ..self }
    }
}

fn cap(snap: &mut Snapshot) -> Option<Capped> {
    let sent =
        Capped { gpus_sent: snap.gpus.len(), processes_sent: snap.processes.len(), alerts_sent: snap.alerts.len() };
    snap.gpus.truncate(MAX_GPUS);
    snap.processes.truncate(MAX_PROCESSES);
    snap.alerts.truncate(MAX_ALERTS);
    snap.events.truncate(MAX_ALERTS);
    // Lists inside the kept entries are bounded by the ones above too: a
    // process is on at most every GPU, a GPU samples at most every process.
    for p in &mut snap.processes {
        p.gpus.truncate(MAX_GPUS);
        if let Some(a) = p.allocator.as_mut() {
            a.devices.truncate(MAX_GPUS);
        }
        // The probe's sections are held to what gpuscope accepts of a probe
        // file (its lists cut, its shares and rates in range, its texts
        // safe), as the node's own reader held them: a node is not trusted
        // to have. Just deserialized, each `Arc` is this snapshot's alone.
        if let Some(input) = p.input.as_mut() {
            crate::probe::files::bound_input(Arc::make_mut(input));
        }
        if let Some(env) = p.environment.as_mut() {
            crate::probe::files::bound_environment(Arc::make_mut(env));
        }
    }
    for g in &mut snap.gpus {
        if let Some(u) = g.process_utilization.as_mut() {
            u.truncate(MAX_PROCESSES);
        }
    }
    let over = sent.gpus_sent > MAX_GPUS || sent.processes_sent > MAX_PROCESSES || sent.alerts_sent > MAX_ALERTS;
    over.then_some(sent)
}

fn summarize(snap: &Snapshot) -> Summary {
    let used: HashSet<u32> = snap.processes.iter().flat_map(|p| p.gpus.iter().map(|g| g.index)).collect();
    let busy_gpus =
        snap.gpus.iter().filter(|g| g.utilization.gpu.is_some_and(|u| u >= 5) || used.contains(&g.index)).count();
    let memory = snap
        .gpus
        .iter()
        .filter_map(|g| g.memory.used.zip(g.memory.total))
        .reduce(|(u, t), (gu, gt)| (u.saturating_add(gu), t.saturating_add(gt)));
    let (sum, n) = snap
        .gpus
        .iter()
        .filter_map(|g| g.activity.as_ref()?.sm_active)
        .fold((0.0, 0u32), |(sum, n), sm| (sum + sm, n + 1));
    // Clamped: a node's figure is shown, not trusted.
    let sm_active = (n > 0).then(|| (sum / f64::from(n)).round().clamp(0.0, 100.0) as u32);
    // The first of the worst: `max_by_key` keeps the last of equals.
    let health = snap
        .gpus
        .iter()
        .rev()
        .filter_map(|g| Some((g.health.as_ref()?.verdict, g.index)))
        .max_by_key(|(verdict, _)| *verdict);
    Summary { busy_gpus, gpus: snap.gpus.len(), memory, alerts: snap.alerts.len(), sm_active, health }
}

/// A host's worst GPU: its verdict, which GPU, and its first reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostHealth {
    pub verdict: HealthVerdict,
    pub gpu: u32,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostState {
    /// As the user named it (`node1:10983`), or Prometheus's `instance`.
    pub host: String,
    pub status: HostStatus,
    /// Why the newest attempt failed, or why its snapshot is stale though
    /// it answers; `null` while it is `ok`.
    pub error: Option<String>,
    /// When this host last answered, unix milliseconds; `null`: never.
    pub last_ok_unix_ms: Option<u64>,
    /// The first failure of the current run of failures; `null` while it answers.
    pub failing_since_unix_ms: Option<u64>,
    /// When the node took the snapshot below, on this machine's clock: its
    /// arrival less the age the node gave it (`poll::node_age_ms`), so the
    /// two clocks need not agree; `null` without one.
    pub snapshot_unix_ms: Option<u64>,
    /// Milliseconds since the node took the snapshot below; `null` without one.
    pub age_ms: Option<u64>,
    /// The newest snapshot this host gave, kept while it is stale.
    #[serde(serialize_with = "shared")]
    pub snapshot: Option<Arc<Snapshot>>,
    /// What the node sent beyond the caps; `null`: the snapshot is whole.
    pub capped: Option<Capped>,
    /// The health of the host's worst GPU; `null` without a snapshot, or
    /// where no GPU was judged.
    pub health: Option<HostHealth>,
    /// The snapshot's figures, as the host table shows them.
    #[serde(skip)]
    pub summary: Option<Summary>,
}

fn shared<S: serde::Serializer>(snap: &Option<Arc<Snapshot>>, s: S) -> Result<S::Ok, S::Error> {
    snap.as_deref().serialize(s)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostStatus {
    /// No attempt has finished yet.
    Waiting,
    Ok,
    /// It answered before, not lately: the figures shown are old.
    Stale,
    /// It never answered.
    Unreachable,
}

impl HostState {
    pub fn new(host: String) -> Self {
        Self {
            host,
            status: HostStatus::Waiting,
            error: None,
            last_ok_unix_ms: None,
            failing_since_unix_ms: None,
            snapshot_unix_ms: None,
            age_ms: None,
            snapshot: None,
            capped: None,
            health: None,
            summary: None,
        }
    }

    pub fn answered(&mut self, answer: Answer, now_ms: u64) {
        self.health = answer.summary.health.map(|(verdict, gpu)| HostHealth {
            verdict,
            gpu,
            reason: (answer.snapshot.gpus.iter().find(|g| g.index == gpu))
                .and_then(|g| g.health.as_ref()?.reasons.first())
                .map(|r| r.message.clone()),
        });
        self.snapshot = Some(answer.snapshot);
        self.summary = Some(answer.summary);
        self.capped = answer.capped;
        self.snapshot_unix_ms = Some(now_ms.saturating_sub(answer.node_age_ms));
        self.last_ok_unix_ms = Some(now_ms);
        self.failing_since_unix_ms = None;
        self.error = None;
        self.status = HostStatus::Ok;
    }

    pub fn failed(&mut self, error: String, now_ms: u64) {
        self.failing_since_unix_ms.get_or_insert(now_ms);
        self.error = Some(error);
        self.status = if self.snapshot.is_some() { HostStatus::Stale } else { HostStatus::Unreachable };
    }

    /// Ages as of `now_ms`. A snapshot older than `stale_after_ms` is
    /// stale even without a failure, and says why: a host whose request
    /// still hangs, or one that answers with an old snapshot (its driver
    /// hung, its collection stopped).
    pub fn refresh(&mut self, now_ms: u64, stale_after_ms: u64) {
        self.age_ms = self.snapshot_unix_ms.map(|t| now_ms.saturating_sub(t));
        let answering =
            matches!(self.status, HostStatus::Ok | HostStatus::Stale) && self.failing_since_unix_ms.is_none();
        let Some(age) = self.age_ms.filter(|a| *a > stale_after_ms && answering) else { return };
        let quiet = now_ms.saturating_sub(self.last_ok_unix_ms.unwrap_or(now_ms));
        let short = crate::fleet::short_age;
        self.status = HostStatus::Stale;
        self.error = Some(if quiet > stale_after_ms {
            format!("no answer for {}", short(quiet))
        } else {
            format!(
                "the snapshot is {} old: the node answers, but its collection has stopped (a hung driver? \
                 see its /healthz)",
                short(age)
            )
        });
    }

    /// "ok", "stale 12s", "down 5s" (never answered), "waiting".
    pub fn status_text(&self, now_ms: u64) -> String {
        let since = |t: Option<u64>| crate::fleet::short_age(now_ms.saturating_sub(t.unwrap_or(now_ms)));
        match self.status {
            HostStatus::Waiting => "waiting".into(),
            HostStatus::Ok => "ok".into(),
            HostStatus::Stale => format!("stale {}", since(self.snapshot_unix_ms)),
            HostStatus::Unreachable => format!("down {}", since(self.failing_since_unix_ms)),
        }
    }

    /// GPUs with a process on them or at least 5% utilisation, of all;
    /// `None` without a snapshot.
    pub fn busy_gpus(&self) -> Option<(usize, usize)> {
        self.summary.map(|s| (s.busy_gpus, s.gpus))
    }

    /// Memory used and total over the GPUs that report both.
    pub fn memory(&self) -> Option<(u64, u64)> {
        self.summary?.memory
    }

    pub fn alert_count(&self) -> Option<usize> {
        self.summary.map(|s| s.alerts)
    }

    /// The mean SM activity of the GPUs that report it, percent.
    pub fn sm_active(&self) -> Option<u32> {
        self.summary?.sm_active
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpu, GpuState, Process, ProcessGpu, ProcessType, SCHEMA_VERSION, Timestamp};
    use proptest::prelude::*;

    /// `gpus` GPUs with `util[i % len]` percent; process `p` on GPU `on[p]`.
    fn snapshot(gpus: u32, util: &[Option<u32>], on: impl IntoIterator<Item = u32>) -> Snapshot {
        let gpus = (0..gpus)
            .map(|i| {
                let mut g = Gpu::blank(i, GpuState::Ok);
                g.utilization.gpu = util.get(i as usize % util.len().max(1)).copied().flatten();
                (g.memory.used, g.memory.total) = (Some(u64::from(i)), Some(100));
                g
            })
            .collect();
        let processes = on
            .into_iter()
            .enumerate()
            .map(|(p, gpu)| {
                let kind = ProcessType::Compute;
                let on = ProcessGpu { index: gpu, kind, used_memory: None, mig_device: None, mig_uuid: None };
                Process { gpus: vec![on], ..Process::bare(p as u32) }
            })
            .collect();
        Snapshot {
            schema_version: SCHEMA_VERSION,
            time: Timestamp::from_system(std::time::UNIX_EPOCH),
            interval_ms: 1000,
            collection_ms: 1.0,
            simulated: false,
            host: Default::default(),
            driver: Default::default(),
            gpus,
            processes,
            alerts: Vec::new(),
            events: Vec::new(),
            sources: Default::default(),
        }
    }

    /// The hostile node: 20,000 GPUs and 50,000 processes, all but
    /// the first on the last GPU. Looking through the processes for each GPU
    /// (as the table once did on every frame) is 10^9 steps, minutes in a
    /// debug build; one pass is a blink.
    #[test]
    fn a_huge_answer_is_capped_and_summed_in_one_pass() {
        let on = (0..50_000).map(|p| if p == 0 { 0 } else { 19_999 });
        let a = Answer::of(snapshot(20_000, &[Some(0), Some(50)], on));
        assert_eq!((a.snapshot.gpus.len(), a.snapshot.processes.len()), (MAX_GPUS, MAX_PROCESSES));
        let capped = a.capped.unwrap();
        assert_eq!(capped, Capped { gpus_sent: 20_000, processes_sent: 50_000, alerts_sent: 0 });
        assert_eq!(capped.text(), "capped: kept 1024 of 20000 GPUs, 16384 of 50000 processes");
        // Every other GPU at 50%, and GPU 0 with the first process.
        assert_eq!((a.summary.busy_gpus, a.summary.gpus), (MAX_GPUS / 2 + 1, MAX_GPUS));
        let mut h = HostState::new("n".into());
        h.answered(a, 1);
        assert_eq!(h.busy_gpus(), Some((MAX_GPUS / 2 + 1, MAX_GPUS)));
        assert_eq!(Answer::of(snapshot(8, &[None], [0, 3])).capped, None, "a real node is kept whole");
    }

    /// Issue 57: the mean over the GPUs that have the counters, bounded
    /// whatever a node sends; none without them.
    #[test]
    fn sm_activity_is_the_mean_of_the_gpus_that_report_it() {
        let with = |sm: &[Option<f64>]| {
            let mut snap = snapshot(sm.len() as u32, &[None], []);
            for (g, sm) in snap.gpus.iter_mut().zip(sm) {
                g.activity = sm.map(|sm| crate::model::Activity { sm_active: Some(sm), ..Default::default() });
            }
            Answer::of(snap).summary.sm_active
        };
        assert_eq!(with(&[Some(62.5), None, Some(30.0)]), Some(46));
        assert_eq!(with(&[Some(0.0)]), Some(0), "idle is 0, not n/a");
        assert_eq!(with(&[None, None]), None);
        assert_eq!(with(&[]), None);
        assert_eq!(with(&[Some(1e300), Some(1e300)]), Some(100));
        assert_eq!(with(&[Some(-5.0)]), Some(0));
    }

    /// Issue 58: a node's input pipeline and environment are held to what
    /// gpuscope accepts of a probe file, lists cut rather than refused.
    #[test]
    fn a_node_s_input_pipeline_is_held_to_the_probe_s_bounds() {
        use crate::model::{DataLoaderStats, DeviceArch, FrameworkEnvironment, InputPipeline, LoaderFailure};
        let loader = DataLoaderStats {
            wait_share: Some(7.0),
            batches_per_s: Some(f64::MAX),
            dataset: Some("\u{1b}]0;owned\u{7}Images".into()),
            worker_pids: Some((0..100_000).collect()),
            ..DataLoaderStats::default()
        };
        let failure: LoaderFailure =
            serde_json::from_value(serde_json::json!({"time_unix_ms": 1, "kind": "bus_error"}))
                .expect("a failure with its two required fields");
        let input =
            InputPipeline { loaders: vec![loader; 1000], failures: vec![failure; 1000], ..InputPipeline::default() };
        let device = DeviceArch { ordinal: 0, capability: None, arch_supported: None };
        let env = FrameworkEnvironment {
            torch_version: Some(format!("2.5\u{202E}{}", "x".repeat(100_000))),
            devices: vec![device; 100_000],
            ..FrameworkEnvironment::default()
        };
        let mut snap = snapshot(1, &[None], [0]);
        (snap.processes[0].input, snap.processes[0].environment) = (Some(Arc::new(input)), Some(Arc::new(env)));
        let a = Answer::of(snap);
        let p = &a.snapshot.processes[0];
        let input = p.input.as_deref().unwrap();
        assert_eq!((input.loaders.len(), input.failures.len()), (16, 8));
        let l = &input.loaders[0];
        assert_eq!((l.wait_share, l.batches_per_s, l.worker_pids.as_ref().map(Vec::len)), (None, None, Some(128)));
        assert_eq!(l.dataset.as_deref(), Some("Images"), "no escape sequence reaches a terminal");
        let env = p.environment.as_deref().unwrap();
        assert_eq!(env.devices.len(), 64);
        let torch = env.torch_version.as_deref().unwrap();
        assert!(torch.chars().count() <= crate::sources::NAME_MAX_CHARS && !torch.contains('\u{202E}'), "{torch}");
    }

    /// Issue 59: a host's health is its worst GPU's, the first of equals,
    /// with that GPU's first reason; none where no GPU was judged.
    #[test]
    fn a_hosts_health_is_its_worst_gpus() {
        use crate::model::{Health, HealthCode, HealthReason, Severity};
        let judged = |verdicts: &[Option<Severity>]| {
            let mut snap = snapshot(verdicts.len() as u32, &[None], []);
            for (g, v) in snap.gpus.iter_mut().zip(verdicts) {
                let reasons = v
                    .iter()
                    .map(|severity| HealthReason {
                        code: HealthCode::RowRemapFailed,
                        severity: *severity,
                        message: format!("GPU {}'s reason", g.index),
                    })
                    .collect();
                g.health = Some(Health::from_reasons(reasons, Vec::new()));
            }
            let mut h = HostState::new("n".into());
            h.answered(Answer::of(snap), 1);
            h.health
        };
        let worst = judged(&[None, Some(Severity::Critical), Some(Severity::Warning), Some(Severity::Critical)]);
        let worst = worst.unwrap();
        assert_eq!(
            (worst.verdict, worst.gpu, worst.reason.as_deref()),
            (HealthVerdict::Critical, 1, Some("GPU 1's reason"))
        );
        assert_eq!(judged(&[None, None]).map(|w| (w.verdict, w.gpu)), Some((HealthVerdict::Ok, 0)));
        let mut h = HostState::new("n".into());
        h.answered(Answer::of(snapshot(2, &[None], [])), 1);
        assert_eq!(h.health, None, "not judged");
        h.health = judged(&[Some(Severity::Warning)]);
        assert_eq!(super::super::table::health_text(&h).as_deref(), Some("health warning: GPU 0: GPU 0's reason"));
    }

    /// The QA's hung node: it answers every interval, with a snapshot 18 s
    /// old by its own clock. Stale, its age the snapshot's, and why; ok
    /// again with a current one.
    #[test]
    fn a_node_answering_with_an_old_snapshot_is_stale_and_says_why() {
        let mut h = HostState::new("n".into());
        h.answered(Answer::of(snapshot(1, &[None], [])).aged(18_000), 100_000);
        h.refresh(100_000, 3000);
        assert_eq!((h.status, h.age_ms, h.snapshot_unix_ms), (HostStatus::Stale, Some(18_000), Some(82_000)));
        assert_eq!(h.status_text(100_000), "stale 18s");
        let why = h.error.as_deref().unwrap();
        assert!(why.starts_with("the snapshot is 18s old: the node answers, but its collection has stopped"), "{why}");
        h.answered(Answer::of(snapshot(1, &[None], [])).aged(200), 101_000);
        h.refresh(101_000, 3000);
        assert_eq!((h.status, h.error.as_deref(), h.age_ms), (HostStatus::Ok, None, Some(200)));
        // No answer since: stale for that, not for the snapshot's age.
        h.refresh(105_000, 3000);
        assert_eq!((h.status, h.error.as_deref()), (HostStatus::Stale, Some("no answer for 4.0s")));
        // A failure's reason is kept.
        h.failed("cannot connect: refused".into(), 106_000);
        h.refresh(107_000, 3000);
        assert_eq!(h.error.as_deref(), Some("cannot connect: refused"));
    }

    proptest! {
        /// The summary is the table's old per-frame definition, computed once.
        #[test]
        fn the_summary_is_what_the_table_showed(
            gpus in 0u32..12,
            util in proptest::collection::vec(proptest::option::of(0u32..10), 1..4),
            on in proptest::collection::vec(0u32..16, 0..12),
        ) {
            let snap = snapshot(gpus, &util, on);
            let busy = snap.gpus.iter().filter(|g| {
                g.utilization.gpu.is_some_and(|u| u >= 5)
                    || snap.processes.iter().any(|p| p.gpus.iter().any(|pg| pg.index == g.index))
            }).count();
            let used: u64 = (0..u64::from(gpus)).sum();
            let memory = (gpus > 0).then_some((used, 100 * u64::from(gpus)));
            let s = Answer::of(snap.clone()).summary;
            let want =
                Summary { busy_gpus: busy, gpus: snap.gpus.len(), memory, alerts: 0, sm_active: None, health: None };
            prop_assert_eq!(s, want);
        }
    }
}
