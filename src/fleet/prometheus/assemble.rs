//! Prometheus's series, per `instance`, back into the `Snapshot` the rest
//! of the fleet reads. Only what the exporter publishes is filled in;
//! everything else stays `None` (the view's `n/a`), never 0. Fields the
//! snapshot cannot leave empty say where they came from (`framework`
//! "n/a", the alert's message).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::api::Sample;
use crate::model::{
    Activity, Alert, DataLoaderStats, DeviceAllocator, Gpu, GpuState, Health, HealthCode, HealthReason, HealthVerdict,
    InputPipeline, Process, ProcessAllocator, ProcessGpu, ProcessType, ProcessUtilization, SCHEMA_VERSION, Snapshot,
    Timestamp,
};

/// The families the fleet reads: one query asks for all of them.
pub const FAMILIES: &[&str] = &[
    "gpuscope_gpu_info",
    "gpuscope_gpu_lost",
    "gpuscope_gpu_memory_used_bytes",
    "gpuscope_gpu_memory_total_bytes",
    "gpuscope_gpu_utilization_ratio",
    "gpuscope_gpu_memory_utilization_ratio",
    "gpuscope_gpu_temperature_celsius",
    "gpuscope_gpu_power_draw_watts",
    "gpuscope_gpu_power_limit_watts",
    // Of the activity counters, the three the dashboard charts: each
    // family is a series per GPU in every answer, and the answer's size
    // caps how many instances one query can bring.
    "gpuscope_gpu_sm_active_ratio",
    "gpuscope_gpu_tensor_active_ratio",
    "gpuscope_gpu_dram_active_ratio",
    "gpuscope_gpu_activity_unavailable",
    // The health verdict and its reasons (their messages stay in the
    // node's /snapshot), so `fleet` can name a host's worst GPU.
    "gpuscope_gpu_health",
    "gpuscope_gpu_health_reason",
    "gpuscope_process_gpu_memory_bytes",
    "gpuscope_process_cpu_usage_ratio",
    "gpuscope_process_host_memory_bytes",
    "gpuscope_process_sm_utilization_ratio",
    "gpuscope_process_memory_utilization_ratio",
    "gpuscope_process_encoder_utilization_ratio",
    "gpuscope_process_decoder_utilization_ratio",
    "gpuscope_allocator_allocated_bytes",
    "gpuscope_allocator_reserved_bytes",
    "gpuscope_allocator_cached_bytes",
    "gpuscope_allocator_inactive_split_bytes",
    "gpuscope_allocator_overhead_bytes",
    "gpuscope_allocator_fragmentation_ratio",
    "gpuscope_allocator_alloc_retries_total",
    "gpuscope_allocator_ooms_total",
    // Per loader (8 at most a process), so that the snapshot's loaders are
    // the node's own, each with the probe's number for it.
    "gpuscope_dataloader_wait_ratio",
    "gpuscope_alert_active",
    "gpuscope_collect_duration_seconds",
];

/// `{__name__=~"a|b|..."}`: every family in one instant query.
pub fn families_query() -> String {
    format!("{{__name__=~\"{}\"}}", FAMILIES.join("|"))
}

/// Every instance's snapshot, as of `now_ms`.
pub fn snapshots(samples: &[Sample], interval_ms: u64, now_ms: u64) -> BTreeMap<String, Snapshot> {
    let mut by_instance: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        if let Some(instance) = s.label("instance") {
            by_instance.entry(instance).or_default().push(s);
        }
    }
    by_instance.into_iter().map(|(i, series)| (i.to_string(), snapshot(&series, interval_ms, now_ms))).collect()
}

fn snapshot(series: &[&Sample], interval_ms: u64, now_ms: u64) -> Snapshot {
    let time = Timestamp::from_system(std::time::UNIX_EPOCH + std::time::Duration::from_millis(now_ms));
    let collect = series.iter().find(|s| s.name() == "gpuscope_collect_duration_seconds").and_then(|s| s.value);
    let mut processes = processes(series);
    allocators(series, &mut processes);
    loaders(series, &mut processes);
    Snapshot {
        schema_version: SCHEMA_VERSION,
        time: time.clone(),
        interval_ms,
        // NaN is JSON's null: Prometheus had no such figure.
        collection_ms: collect.map_or(f64::NAN, |s| s * 1000.0),
        simulated: false,
        host: Default::default(),
        driver: Default::default(),
        gpus: gpus(series, interval_ms),
        processes: processes.into_values().collect(),
        alerts: alerts(series, &time),
        events: Vec::new(),
        sources: Default::default(),
    }
}

fn index(s: &Sample, label: &str) -> Option<u32> {
    s.label(label)?.parse().ok()
}

fn bytes(v: Option<f64>) -> Option<u64> {
    v.filter(|v| *v >= 0.0).map(|v| v.round() as u64)
}

fn percent(v: Option<f64>) -> Option<u32> {
    v.filter(|v| *v >= 0.0).map(|v| (v * 100.0).round().min(f64::from(u32::MAX)) as u32)
}

/// A ratio from 0 to 1 as the snapshot's percent, kept unrounded.
fn share(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v * 100.0)
}

/// The activity a figure goes into, begun on the first one that came.
/// Prometheus keeps no sample period: it is taken to be the interval
/// these snapshots are read at, as `Snapshot::interval_ms` is.
fn activity(g: &mut Gpu, interval_ms: u64) -> &mut Activity {
    g.activity.get_or_insert_with(|| Activity { period_ms: interval_ms, ..Activity::default() })
}

/// The verdict a figure goes into, begun (ok, no reasons) on the first.
fn health(g: &mut Gpu) -> &mut Health {
    g.health.get_or_insert_with(|| Health { verdict: HealthVerdict::Ok, reasons: Vec::new(), unchecked: Vec::new() })
}

fn gpus(series: &[&Sample], interval_ms: u64) -> Vec<Gpu> {
    let mut gpus: BTreeMap<u32, Gpu> = BTreeMap::new();
    for s in series.iter().filter(|s| s.name().starts_with("gpuscope_gpu_")) {
        let Some(i) = index(s, "gpu") else { continue };
        let g = gpus.entry(i).or_insert_with(|| Gpu::blank(i, GpuState::Ok));
        g.uuid = g.uuid.take().or_else(|| s.label("uuid").map(str::to_string));
        let v = s.value;
        match s.name() {
            "gpuscope_gpu_info" => {
                g.name = s.label("name").map(str::to_string);
                g.pci_bus_id = s.label("pci_bus_id").map(str::to_string);
            }
            "gpuscope_gpu_lost" if v == Some(1.0) => g.state = GpuState::Lost,
            "gpuscope_gpu_memory_used_bytes" => g.memory.used = bytes(v),
            "gpuscope_gpu_memory_total_bytes" => g.memory.total = bytes(v),
            "gpuscope_gpu_utilization_ratio" => g.utilization.gpu = percent(v),
            "gpuscope_gpu_memory_utilization_ratio" => g.utilization.memory = percent(v),
            "gpuscope_gpu_temperature_celsius" => g.temperature_c = v.filter(|t| *t >= 0.0).map(|t| t.round() as u32),
            "gpuscope_gpu_power_draw_watts" => g.power_draw_w = v,
            "gpuscope_gpu_power_limit_watts" => g.power_limit_w = v,
            "gpuscope_gpu_sm_active_ratio" if share(v).is_some() => {
                activity(g, interval_ms).sm_active = share(v);
            }
            "gpuscope_gpu_tensor_active_ratio" if share(v).is_some() => {
                activity(g, interval_ms).tensor_active = share(v);
            }
            "gpuscope_gpu_dram_active_ratio" if share(v).is_some() => {
                activity(g, interval_ms).dram_active = share(v);
            }
            "gpuscope_gpu_activity_unavailable" if v == Some(1.0) => g.activity_unavailable = word(s, "reason"),
            "gpuscope_gpu_health" => {
                let verdict = match v {
                    Some(x) if x >= 2.0 => HealthVerdict::Critical,
                    Some(x) if x >= 1.0 => HealthVerdict::Warning,
                    Some(_) => HealthVerdict::Ok,
                    None => continue,
                };
                health(g).verdict = verdict;
            }
            "gpuscope_gpu_health_reason" if v == Some(1.0) => {
                let (Some(code), Some(severity)) = (word::<HealthCode>(s, "reason"), word(s, "severity")) else {
                    continue;
                };
                let message = format!("{} (from Prometheus: the message is in the node's /snapshot)", code.word());
                health(g).reasons.push(HealthReason { code, severity, message });
            }
            _ => {}
        }
    }
    for h in gpus.values_mut().filter_map(|g| g.health.as_mut()) {
        Health::sort_reasons(&mut h.reasons);
    }
    let mut gpus: Vec<Gpu> = gpus.into_values().collect();
    process_utilization(series, &mut gpus);
    gpus
}

/// NVML's per-process samples: kept only where all four shares came, as
/// the exporter writes them from one sample.
fn process_utilization(series: &[&Sample], gpus: &mut [Gpu]) {
    let mut shares: BTreeMap<(u32, u32), [Option<u32>; 4]> = BTreeMap::new();
    for s in series {
        let slot = match s.name() {
            "gpuscope_process_sm_utilization_ratio" => 0,
            "gpuscope_process_memory_utilization_ratio" => 1,
            "gpuscope_process_encoder_utilization_ratio" => 2,
            "gpuscope_process_decoder_utilization_ratio" => 3,
            _ => continue,
        };
        let (Some(gpu), Some(pid)) = (index(s, "gpu"), index(s, "pid")) else { continue };
        if let Some(share) = shares.entry((gpu, pid)).or_default().get_mut(slot) {
            *share = percent(s.value);
        }
    }
    // `gpus` is in index order (from a BTreeMap): found by bisection.
    for ((gpu, pid), share) in shares {
        let at = gpus.binary_search_by_key(&gpu, |g| g.index).ok();
        let (Some(g), [Some(sm), Some(memory), Some(encoder), Some(decoder)]) =
            (at.and_then(|i| gpus.get_mut(i)), share)
        else {
            continue;
        };
        g.process_utilization.get_or_insert_with(Vec::new).push(ProcessUtilization {
            pid,
            sm,
            memory,
            encoder,
            decoder,
        });
    }
}

fn new_process(pid: u32, s: &Sample) -> Process {
    Process { user: s.label("user").map(Arc::from), command: s.label("command").map(Arc::from), ..Process::bare(pid) }
}

fn processes(series: &[&Sample]) -> BTreeMap<u32, Process> {
    let mut procs: BTreeMap<u32, Process> = BTreeMap::new();
    for s in series.iter().filter(|s| s.name().starts_with("gpuscope_process_")) {
        let Some(pid) = index(s, "pid") else { continue };
        let p = procs.entry(pid).or_insert_with(|| new_process(pid, s));
        match s.name() {
            "gpuscope_process_gpu_memory_bytes" => {
                let Some(gpu) = index(s, "gpu") else { continue };
                // The exporter does not say compute or graphics; compute is
                // what a GPU job is.
                let used = bytes(s.value);
                p.gpus.push(ProcessGpu {
                    index: gpu,
                    kind: ProcessType::Compute,
                    used_memory: used,
                    mig_device: None,
                    mig_uuid: s.label("mig_uuid").map(str::to_string),
                });
                p.gpu_memory_total = used.map(|u| p.gpu_memory_total.unwrap_or(0).saturating_add(u));
            }
            "gpuscope_process_cpu_usage_ratio" => p.cpu_percent = s.value.map(|r| r * 100.0),
            "gpuscope_process_host_memory_bytes" => p.host_memory = bytes(s.value),
            _ => {}
        }
    }
    procs
}

fn new_allocator(s: &Sample) -> ProcessAllocator {
    ProcessAllocator {
        framework: "n/a".into(),
        framework_version: None,
        backend: None,
        alloc_conf: None,
        alloc_conf_var: None,
        alloc_conf_source: None,
        alloc_conf_env: None,
        expandable_segments: None,
        cuda_visible_devices: None,
        cuda_device_order: None,
        oom_events: None,
        last_oom: Vec::new(),
        job: s.label("job_id").map(Into::into),
        rank: index(s, "rank"),
        local_rank: None,
        world_size: index(s, "world_size"),
        pinned_host: None,
        pinned_host_peak: None,
        state: crate::model::ProbeState::Fresh,
        age_ms: 0,
        devices: Vec::new(),
    }
}

/// Each (process, GPU) pair's figures gathered in a map, then handed to
/// the processes: a process with thousands of devices costs no search per
/// series.
fn allocators(series: &[&Sample], procs: &mut BTreeMap<u32, Process>) {
    let mut devices: BTreeMap<(u32, u32), DeviceAllocator> = BTreeMap::new();
    for s in series.iter().filter(|s| s.name().starts_with("gpuscope_allocator_")) {
        let (Some(pid), Some(gpu)) = (index(s, "pid"), index(s, "gpu")) else { continue };
        let p = procs.entry(pid).or_insert_with(|| new_process(pid, s));
        p.allocator.get_or_insert_with(|| Box::new(new_allocator(s)));
        let d = devices.entry((pid, gpu)).or_insert_with(|| DeviceAllocator { gpu: Some(gpu), ..Default::default() });
        let v = s.value;
        match s.name() {
            "gpuscope_allocator_allocated_bytes" => d.allocated = bytes(v),
            "gpuscope_allocator_reserved_bytes" => d.reserved = bytes(v),
            "gpuscope_allocator_cached_bytes" => d.cached = bytes(v),
            "gpuscope_allocator_inactive_split_bytes" => d.inactive_split = bytes(v),
            "gpuscope_allocator_overhead_bytes" => d.overhead = bytes(v),
            "gpuscope_allocator_fragmentation_ratio" => d.fragmentation = v,
            "gpuscope_allocator_alloc_retries_total" => d.alloc_retries = bytes(v),
            "gpuscope_allocator_ooms_total" => d.ooms = bytes(v),
            _ => {}
        }
    }
    for ((pid, _), d) in devices {
        if let Some(a) = procs.get_mut(&pid).and_then(|p| p.allocator.as_mut()) {
            a.devices.push(d);
        }
    }
}

/// Each loader's wait share, gathered by process, then handed to the
/// processes as their input pipelines: only the share is filled in, the
/// rest of what the probe reports stays `None`.
fn loaders(series: &[&Sample], procs: &mut BTreeMap<u32, Process>) {
    let mut by_pid: BTreeMap<u32, BTreeMap<u32, Option<f64>>> = BTreeMap::new();
    for s in series.iter().filter(|s| s.name() == "gpuscope_dataloader_wait_ratio") {
        let (Some(pid), Some(id)) = (index(s, "pid"), index(s, "loader")) else { continue };
        procs.entry(pid).or_insert_with(|| new_process(pid, s));
        by_pid.entry(pid).or_default().insert(id, s.value);
    }
    for (pid, loaders) in by_pid {
        let loaders = loaders
            .into_iter()
            .map(|(id, wait_share)| DataLoaderStats { id, wait_share, ..DataLoaderStats::default() })
            .collect();
        if let Some(p) = procs.get_mut(&pid) {
            p.input = Some(Arc::new(InputPipeline { hooked: true, loaders, ..InputPipeline::default() }));
        }
    }
}

/// A label holding one of the snapshot's snake_case words (`oom`, `warning`).
fn word<T: serde::de::DeserializeOwned>(s: &Sample, label: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(s.label(label)?.to_string())).ok()
}

fn alerts(series: &[&Sample], now: &Timestamp) -> Vec<Alert> {
    series
        .iter()
        .filter(|s| s.name() == "gpuscope_alert_active" && s.value == Some(1.0))
        .filter_map(|s| {
            Some(Alert {
                kind: word(s, "kind")?,
                severity: word(s, "severity")?,
                gpu: index(s, "gpu"),
                pid: index(s, "pid"),
                // Prometheus keeps no start; this is when it was seen active.
                since: now.clone(),
                value: None,
                threshold: None,
                message: format!(
                    "{} (from Prometheus: the message is in the node's /snapshot)",
                    s.label("kind").unwrap_or("")
                ),
                hint: String::new(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, labels: &[(&str, String)], value: f64) -> Sample {
        let mut all: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        all.insert("__name__".into(), name.into());
        all.insert("instance".into(), "n:1".into());
        Sample { labels: all, value: Some(value) }
    }

    /// The answer: one process with 60,000 allocator devices, and
    /// 20,000 GPUs each sampling it. A search of the process's devices for
    /// each series, and of the GPUs for each share, is 2*10^9 steps, minutes
    /// in a debug build; gathered in maps, a blink.
    #[test]
    fn one_process_of_many_series_is_assembled_in_one_pass() {
        let mut series = Vec::new();
        for gpu in 0..60_000u32 {
            let labels = [("pid", "7".to_string()), ("gpu", gpu.to_string())];
            series.push(sample("gpuscope_allocator_allocated_bytes", &labels, f64::from(gpu)));
        }
        for gpu in 0..20_000u32 {
            let labels = [("pid", "7".to_string()), ("gpu", gpu.to_string())];
            series.push(sample("gpuscope_gpu_info", &labels[1..], 1.0));
            for share in ["sm", "memory", "encoder", "decoder"] {
                series.push(sample(&format!("gpuscope_process_{share}_utilization_ratio"), &labels, 0.25));
            }
        }
        let snaps = snapshots(&series, 1000, 0);
        let snap = &snaps["n:1"];
        let devices = &snap.processes[0].allocator.as_ref().unwrap().devices;
        assert_eq!(devices.len(), 60_000);
        assert_eq!((devices[59_999].gpu, devices[59_999].allocated), (Some(59_999), Some(59_999)));
        assert_eq!(snap.gpus.len(), 20_000);
        let shares = snap.gpus[19_999].process_utilization.as_ref().unwrap();
        assert_eq!((shares[0].pid, shares[0].sm), (7, 25));
    }

    /// The exporter's text as Prometheus stores it: a sample a line, with
    /// the instance it scraped, and only the families the fleet asks for.
    fn scraped(body: &str) -> Vec<Sample> {
        let mut samples = Vec::new();
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, mut rest) = series.split_once('{').map_or((series, ""), |(n, l)| (n, l));
            let mut labels = vec![("instance", "n:1".to_string())];
            while let Some((key, after)) = rest.split_once("=\"") {
                let (mut value, mut chars) = (String::new(), after.char_indices());
                let end = loop {
                    match chars.next().unwrap() {
                        (i, '"') => break i,
                        (_, '\\') => value.push(chars.next().unwrap().1),
                        (_, c) => value.push(c),
                    }
                };
                labels.push((key, value));
                rest = after[end + 1..].trim_start_matches([',', '}']);
            }
            if FAMILIES.contains(&name) {
                samples.push(sample(name, &labels, value.parse().unwrap()));
            }
        }
        samples
    }

    #[test]
    fn the_families_asked_for_are_ones_the_exporter_writes() {
        let written = crate::serve::metrics::sample_names();
        for family in FAMILIES {
            assert!(written.iter().any(|w| w == family), "{family}");
        }
    }

    /// Issue 59: each GPU's verdict and its reasons' codes come back; the
    /// messages stay in the node's /snapshot.
    #[test]
    fn health_the_exporter_writes_is_read_back() {
        let node = crate::serve::metrics::tests::snapshot();
        let body = crate::serve::metrics::encode(crate::serve::encode::Format::Text, &node, 0);
        let back = &snapshots(&scraped(&body), 2000, 0)["n:1"];
        let (got, sent) = (back.gpus[0].health.as_ref().unwrap(), node.gpus[0].health.as_ref().unwrap());
        assert_eq!(got.verdict, sent.verdict);
        let codes = |h: &Health| h.reasons.iter().map(|r| (r.code, r.severity)).collect::<Vec<_>>();
        assert_eq!(codes(got), codes(sent));
        assert!(back.gpus[1].health.is_none(), "not judged: nothing made up");
    }

    /// Issue 57: SM, tensor and DRAM activity, and why a GPU has none,
    /// come back from Prometheus as the node's exporter wrote them.
    #[test]
    fn activity_the_exporter_writes_is_read_back() {
        use crate::model::ActivityUnavailable;
        let node = crate::serve::metrics::tests::snapshot();
        let body = crate::serve::metrics::encode(crate::serve::encode::Format::Text, &node, 0);
        let back = &snapshots(&scraped(&body), 2000, 0)["n:1"];
        let (got, sent) = (back.gpus[0].activity.as_ref().unwrap(), node.gpus[0].activity.as_ref().unwrap());
        for (got, sent) in [
            (got.sm_active, sent.sm_active),
            (got.tensor_active, sent.tensor_active),
            (got.dram_active, sent.dram_active),
        ] {
            assert!((got.unwrap() - sent.unwrap()).abs() < 1e-9, "{got:?} for {sent:?}");
        }
        assert_eq!(got.period_ms, 2000, "the interval: Prometheus keeps no period");
        assert_eq!((got.fp32_active, got.pcie_tx_bytes_per_s), (None, None), "not asked for: n/a, not 0");
        assert_eq!(back.gpus[0].activity_unavailable, None);
        assert_eq!((&back.gpus[1].activity, back.gpus[1].activity_unavailable), (&None, None), "lost");
        assert_eq!(
            (&back.gpus[2].activity, back.gpus[2].activity_unavailable),
            (&None, Some(ActivityUnavailable::NotSupported))
        );
    }

    /// Issue 58: each loader's wait share comes back from Prometheus with
    /// the probe's number for the loader, so that the jobs view shows each
    /// rank's data wait; what the fleet does not ask for stays `None`.
    #[test]
    fn the_data_wait_the_exporter_writes_is_read_back() {
        let node = crate::serve::metrics::tests::snapshot();
        let body = crate::serve::metrics::encode(crate::serve::encode::Format::Text, &node, 0);
        let back = &snapshots(&scraped(&body), 2000, 0)["n:1"];
        let by_pid = |snap: &Snapshot, pid| snap.processes.iter().find(|p| p.pid == pid).unwrap().input.clone();
        let (got, sent) = (by_pid(back, 4242).unwrap(), by_pid(&node, 4242).unwrap());
        assert_eq!(got.wait_share(), sent.wait_share());
        assert_eq!(got.wait_share(), Some(0.41));
        // The validation loader has no share yet: no series, so no loader.
        let ids: Vec<(u32, Option<f64>, Option<f64>)> =
            got.loaders.iter().map(|l| (l.id, l.wait_share, l.batches_per_s)).collect();
        assert_eq!(ids, [(1, Some(0.41), None)]);
        assert_eq!(got.shm, None, "not asked for: n/a, not 0");
        assert_eq!((by_pid(back, 77), by_pid(back, 5150)), (None, None), "no probe reports them");
        let hosts = vec![crate::fleet::model::HostState {
            snapshot: Some(Arc::new(back.clone())),
            status: crate::fleet::model::HostStatus::Ok,
            ..crate::fleet::model::HostState::new("n:1".into())
        }];
        let jobs = crate::fleet::jobs::group(&hosts);
        assert_eq!(jobs[0].ranks[0].data_wait, Some(0.41), "{jobs:?}");
    }
}
