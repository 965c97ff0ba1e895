//! Each alert kind on synthetic series, with the edge cases: flapping
//! around a threshold, counter resets, PID reuse, gaps, and backends where
//! fragmentation means nothing.

use std::time::{Duration, UNIX_EPOCH};

use super::Analyzer;
use super::config::{AlertsConfig, HistoryConfig};
use crate::model::*;

const GIB: u64 = 1 << 30;

/// One GPU, one optional process; everything else at rest.
#[derive(Clone)]
struct World {
    t_ms: u64,
    free_pct: f64,
    util: u32,
    /// GPM's SM and tensor activity, percent; `None`: not reported.
    sm: Option<f64>,
    tensor: Option<f64>,
    lost: bool,
    proc: Option<Proc>,
}

#[derive(Clone)]
struct Proc {
    pid: u32,
    start_ms: u64,
    allocated: u64,
    reserved: u64,
    split: u64,
    backend: &'static str,
    retries: u64,
    ooms: u64,
    oom_events: Option<u64>,
    conf_var: Option<&'static str>,
    probed: bool,
}

impl Default for Proc {
    fn default() -> Self {
        Self {
            pid: 100,
            start_ms: 1_000,
            allocated: 4 * GIB,
            reserved: 10 * GIB,
            split: GIB,
            backend: "native",
            retries: 0,
            ooms: 0,
            oom_events: Some(0),
            conf_var: None,
            probed: true,
        }
    }
}

impl World {
    fn new() -> Self {
        Self { t_ms: 1_700_000_000_000, free_pct: 50.0, util: 90, sm: None, tensor: None, lost: false, proc: None }
    }

    fn snapshot(&self) -> Snapshot {
        let total = 80 * GIB;
        let mut gpu = Gpu::blank(0, if self.lost { GpuState::Lost } else { GpuState::Ok });
        gpu.uuid = Some("GPU-0".into());
        if !self.lost {
            let free = (total as f64 * self.free_pct / 100.0) as u64;
            gpu.memory =
                GpuMemory { total: Some(total), free: Some(free), used: Some(total - free), driver_reserved: None };
            gpu.utilization.gpu = Some(self.util);
            if self.sm.is_some() || self.tensor.is_some() {
                gpu.activity = Some(Activity {
                    period_ms: 1_000,
                    sm_active: self.sm,
                    tensor_active: self.tensor,
                    ..Activity::default()
                });
            }
        }
        let processes = self.proc.iter().map(process).collect();
        Snapshot {
            schema_version: SCHEMA_VERSION,
            time: Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(self.t_ms)),
            interval_ms: 1_000,
            collection_ms: 0.0,
            simulated: true,
            host: Host::default(),
            driver: Driver::default(),
            gpus: vec![gpu],
            processes,
            alerts: Vec::new(),
            events: Vec::new(),
            sources: Sources::default(),
        }
    }
}

fn process(p: &Proc) -> Process {
    let frag = (p.backend == "native" && p.reserved > 0).then(|| p.split as f64 / p.reserved as f64);
    // cudaMallocAsync keeps none of these counters.
    let kept = |v: u64| (p.backend != "cudaMallocAsync").then_some(v);
    let device = DeviceAllocator {
        gpu: Some(0),
        allocated: Some(p.allocated),
        allocated_peak: None,
        reserved: Some(p.reserved),
        reserved_peak: None,
        active: None,
        inactive_split: kept(p.split),
        requested: None,
        cached: Some(p.reserved - p.allocated.min(p.reserved)),
        overhead: Some(GIB / 2),
        segments: None,
        alloc_retries: kept(p.retries),
        ooms: kept(p.ooms),
        fragmentation: frag,
        ..DeviceAllocator::default()
    };
    let allocator = p.probed.then(|| ProcessAllocator {
        framework: "torch".into(),
        framework_version: None,
        backend: Some(p.backend.into()),
        alloc_conf: None,
        alloc_conf_var: p.conf_var.map(Into::into),
        alloc_conf_source: None,
        alloc_conf_env: None,
        expandable_segments: Some(false),
        cuda_visible_devices: None,
        cuda_device_order: None,
        oom_events: p.oom_events,
        last_oom: Vec::new(),
        job: None,
        rank: None,
        local_rank: None,
        world_size: None,
        pinned_host: None,
        pinned_host_peak: None,
        state: ProbeState::Fresh,
        age_ms: 100,
        devices: vec![device],
    });
    Process {
        pid: p.pid,
        gpus: vec![ProcessGpu {
            index: 0,
            kind: ProcessType::Compute,
            used_memory: Some(p.reserved + GIB / 2),
            mig_device: None,
            mig_uuid: None,
        }],
        gpu_memory_total: Some(p.reserved + GIB / 2),
        name: Some("python3".into()),
        user: None,
        command: None,
        start_time: Some(Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(p.start_ms))),
        parent_pid: None,
        parent_name: None,
        cpu_percent: None,
        host_memory: None,
        allocator: allocator.map(Box::new),
        input: None,
        environment: None,
        workload: None,
        other_namespace: false,
        host_input: None,
    }
}

fn analyzer() -> Analyzer {
    Analyzer::new(&HistoryConfig::default(), AlertsConfig::default())
}

/// Steps the world `n` times by `dt_ms`, changing it with `f`; returns the
/// kinds active after each step.
fn run(
    a: &mut Analyzer,
    w: &mut World,
    n: usize,
    dt_ms: u64,
    mut f: impl FnMut(usize, &mut World),
) -> Vec<Vec<AlertKind>> {
    (0..n)
        .map(|i| {
            w.t_ms += dt_ms;
            f(i, w);
            let mut snap = w.snapshot();
            a.observe(&mut snap);
            snap.alerts.iter().map(|a| a.kind).collect()
        })
        .collect()
}

fn has(kinds: &[AlertKind], k: AlertKind) -> bool {
    kinds.contains(&k)
}

#[test]
fn fragmentation_raises_on_the_median_clears_below_exit_and_never_flaps() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { split: 4 * GIB, ..Proc::default() });
    let steps = run(&mut a, &mut w, 12, 1_000, |_, _| {});
    assert!(!has(&steps[7], AlertKind::Fragmentation), "fewer than 10 samples");
    assert!(has(&steps[11], AlertKind::Fragmentation));
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    let alert = snap.alerts.iter().find(|x| x.kind == AlertKind::Fragmentation).unwrap();
    assert!(alert.hint.contains("expandable_segments:True"), "{}", alert.hint);
    assert_eq!((alert.gpu, alert.pid, alert.severity), (Some(0), Some(100), Severity::Warning));

    // Hovering between exit and enter keeps it; dropping under exit clears.
    let steps = run(&mut a, &mut w, 120, 1_000, |i, w| {
        w.proc.as_mut().unwrap().split = if i < 60 { GIB * 25 / 10 } else { GIB };
    });
    assert!(has(&steps[59], AlertKind::Fragmentation), "0.25 is between 0.20 and 0.30");
    assert!(!has(&steps[119], AlertKind::Fragmentation));
    let changes: usize = a.timeline().filter(|e| e.kind == AlertKind::Fragmentation).count();
    assert_eq!(changes, 2, "raised once, cleared once");
}

#[test]
fn noisy_fragmentation_around_the_threshold_does_not_flap() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc::default());
    run(&mut a, &mut w, 600, 1_000, |i, w| {
        // 0.25 / 0.35 alternating: the median sits on the line; spikes
        // alone must not toggle the alert.
        w.proc.as_mut().unwrap().split = if i % 2 == 0 { GIB * 25 / 10 } else { GIB * 35 / 10 };
    });
    let changes = a.timeline().filter(|e| e.kind == AlertKind::Fragmentation).count();
    assert!(changes <= 1, "{changes} changes");
}

#[test]
fn fragmentation_is_silent_where_the_backend_makes_it_meaningless_or_the_process_is_small() {
    for p in [
        Proc { split: 6 * GIB, backend: "cudaMallocAsync", ..Proc::default() },
        Proc { split: 300 << 20, reserved: GIB, allocated: GIB / 2, ..Proc::default() },
    ] {
        let mut a = analyzer();
        let mut w = World::new();
        w.proc = Some(p);
        let steps = run(&mut a, &mut w, 30, 1_000, |_, _| {});
        assert!(steps.iter().all(|s| !has(s, AlertKind::Fragmentation)));
    }
}

#[test]
fn pid_reuse_starts_a_new_history() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { split: 4 * GIB, ..Proc::default() });
    let steps = run(&mut a, &mut w, 12, 1_000, |_, _| {});
    assert!(has(&steps[11], AlertKind::Fragmentation));
    // Same PID, a new process: it has no history yet.
    let steps = run(&mut a, &mut w, 5, 1_000, |_, w| w.proc.as_mut().unwrap().start_ms = 99_000);
    assert!(!has(&steps[0], AlertKind::Fragmentation), "the old process's alert does not pass to the new one");
    assert!(!has(&steps[4], AlertKind::Fragmentation));
}

#[test]
fn a_retry_rise_is_critical_at_once_and_a_counter_reset_is_not() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { retries: 5, ..Proc::default() });
    let steps = run(&mut a, &mut w, 3, 1_000, |i, w| {
        if i == 2 {
            w.proc.as_mut().unwrap().retries = 0;
        }
    });
    assert!(steps.iter().all(|s| !has(s, AlertKind::AllocRetry)), "first sight and reset only set a baseline");
    let steps = run(&mut a, &mut w, 1, 1_000, |_, w| w.proc.as_mut().unwrap().retries = 1);
    assert!(has(&steps[0], AlertKind::AllocRetry), "the very next tick");
    let steps = run(&mut a, &mut w, 301, 1_000, |_, _| {});
    assert!(has(&steps[298], AlertKind::AllocRetry), "held for five minutes");
    assert!(!has(&steps[300], AlertKind::AllocRetry), "then cleared");
}

#[test]
fn an_oom_is_an_event() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc::default());
    let steps = run(&mut a, &mut w, 2, 1_000, |i, w| w.proc.as_mut().unwrap().ooms = i as u64);
    assert!(has(&steps[1], AlertKind::Oom));
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    assert_eq!(snap.alerts.iter().find(|x| x.kind == AlertKind::Oom).unwrap().severity, Severity::Critical);
}

#[test]
fn an_oom_the_probe_saw_is_an_event() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { backend: "cudaMallocAsync", ..Proc::default() });
    let steps = run(&mut a, &mut w, 3, 1_000, |i, w| w.proc.as_mut().unwrap().oom_events = Some(i as u64 / 2));
    assert!(!has(&steps[1], AlertKind::Oom) && has(&steps[2], AlertKind::Oom));
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    let alert = snap.alerts.iter().find(|x| x.kind == AlertKind::Oom).unwrap();
    assert!(alert.message.contains("1 seen by the probe"), "{}", alert.message);
}

#[test]
fn uncounted_counters_never_alert_and_a_full_device_stands_in_for_the_oom_count() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { backend: "cudaMallocAsync", ..Proc::default() });
    let steps = run(&mut a, &mut w, 5, 1_000, |i, w| {
        let p = w.proc.as_mut().unwrap();
        (p.retries, p.ooms, p.split) = (i as u64, i as u64, 8 * GIB);
    });
    assert!(steps.iter().all(|s| s.is_empty()), "null counters say nothing: {steps:?}");
    let steps = run(&mut a, &mut w, 1, 1_000, |_, w| w.free_pct = 0.0);
    assert!(has(&steps[0], AlertKind::Oom));
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    let alert = snap.alerts.iter().find(|x| x.kind == AlertKind::Oom).unwrap();
    assert!(alert.hint.starts_with("cudaMallocAsync does not count OOMs"), "{}", alert.hint);
    // The native allocator counts its own OOMs: a full device is not one.
    let mut a = analyzer();
    let mut w = World::new();
    (w.free_pct, w.proc) = (0.0, Some(Proc::default()));
    let steps = run(&mut a, &mut w, 3, 1_000, |_, _| {});
    assert!(steps.iter().all(|s| !has(s, AlertKind::Oom)));
}

#[test]
fn hints_name_the_variable_the_process_reads() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { split: 4 * GIB, conf_var: Some("PYTORCH_ALLOC_CONF"), ..Proc::default() });
    run(&mut a, &mut w, 12, 1_000, |i, w| w.proc.as_mut().unwrap().retries = i as u64);
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    for kind in [AlertKind::Fragmentation, AlertKind::AllocRetry] {
        let alert = snap.alerts.iter().find(|x| x.kind == kind).unwrap();
        assert!(alert.hint.contains("PYTORCH_ALLOC_CONF=expandable_segments:True"), "{}", alert.hint);
    }
}

#[test]
fn memory_pressure_needs_30_seconds_escalates_and_clears_with_hysteresis() {
    let mut a = analyzer();
    let mut w = World::new();
    w.free_pct = 3.0;
    let steps = run(&mut a, &mut w, 31, 1_000, |_, _| {});
    assert!(!has(&steps[28], AlertKind::MemoryPressure));
    assert!(has(&steps[30], AlertKind::MemoryPressure));
    run(&mut a, &mut w, 1, 1_000, |_, w| w.free_pct = 1.0);
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    assert_eq!(snap.alerts[0].severity, Severity::Critical);
    let steps = run(&mut a, &mut w, 2, 1_000, |i, w| w.free_pct = if i == 0 { 5.5 } else { 7.0 });
    assert!(has(&steps[0], AlertKind::MemoryPressure), "5.5% is between warn and clear");
    assert!(!has(&steps[1], AlertKind::MemoryPressure));
}

#[test]
fn another_gpu_at_the_same_index_starts_afresh() {
    let mut a = analyzer();
    let mut w = World::new();
    w.free_pct = 3.0;
    let steps = run(&mut a, &mut w, 31, 1_000, |_, _| {});
    assert!(has(&steps[30], AlertKind::MemoryPressure));
    // A reset or hot-plug puts another GPU, as full, at index 0: the first
    // GPU's alert ends, and the new one waits out its own 30 s.
    let swapped: Vec<Vec<AlertKind>> = (0..32)
        .map(|_| {
            w.t_ms += 1_000;
            let mut snap = w.snapshot();
            snap.gpus[0].uuid = Some("GPU-other".into());
            a.observe(&mut snap);
            snap.alerts.iter().map(|a| a.kind).collect()
        })
        .collect();
    assert!(!has(&swapped[0], AlertKind::MemoryPressure), "the old GPU's alert went with it");
    // Cleared on the first tick, the wait starts from the second.
    assert!(!has(&swapped[29], AlertKind::MemoryPressure));
    assert!(has(&swapped[31], AlertKind::MemoryPressure));
}

#[test]
fn memory_pressure_flickering_across_the_line_never_raises() {
    let mut a = analyzer();
    let mut w = World::new();
    let steps = run(&mut a, &mut w, 120, 1_000, |i, w| w.free_pct = if i % 2 == 0 { 4.9 } else { 5.1 });
    assert!(steps.iter().all(|s| !has(s, AlertKind::MemoryPressure)));
}

#[test]
fn a_gap_in_the_data_restarts_the_wait() {
    let mut a = analyzer();
    let mut w = World::new();
    w.free_pct = 3.0;
    run(&mut a, &mut w, 20, 1_000, |_, _| {});
    // Nothing for a minute (a hung driver), then low again.
    let steps = run(&mut a, &mut w, 20, 1_000, |i, w| {
        if i == 0 {
            w.t_ms += 60_000;
        }
    });
    assert!(steps.iter().all(|s| !has(s, AlertKind::MemoryPressure)), "30 s must pass after the gap");
}

#[test]
fn a_lost_gpu_is_critical_at_once_and_clears_when_back() {
    let mut a = analyzer();
    let mut w = World::new();
    let steps = run(&mut a, &mut w, 2, 1_000, |i, w| w.lost = i == 0);
    assert!(has(&steps[0], AlertKind::GpuLost));
    assert!(!has(&steps[1], AlertKind::GpuLost));
}

#[test]
fn a_slow_leak_under_the_sawtooth_is_found_with_its_rate() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc::default());
    let steps = run(&mut a, &mut w, 330, 1_000, |i, w| {
        let in_step = (i % 10) as u64;
        // +2 MiB/s under a 10 s, 2 GiB saw-tooth.
        w.proc.as_mut().unwrap().allocated = 4 * GIB + (i as u64) * (2 << 20) + in_step * (GIB / 5);
        w.proc.as_mut().unwrap().reserved = 12 * GIB;
    });
    assert!(!has(&steps[200], AlertKind::Leak), "not before five minutes of data");
    assert!(has(&steps[329], AlertKind::Leak));
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    let leak = snap.alerts.iter().find(|x| x.kind == AlertKind::Leak).unwrap();
    assert!(leak.message.contains("/min"), "{}", leak.message);
    let rate = leak.value.unwrap();
    assert!((100.0..140.0).contains(&rate), "about 120 MiB/min: {rate}");
}

#[test]
fn a_big_steady_sawtooth_is_not_a_leak() {
    let mut a = analyzer();
    let mut w = World::new();
    w.proc = Some(Proc { reserved: 12 * GIB, ..Proc::default() });
    let steps = run(&mut a, &mut w, 400, 1_000, |i, w| {
        w.proc.as_mut().unwrap().allocated = 4 * GIB + (i % 10) as u64 * (GIB / 2);
    });
    assert!(steps.iter().all(|s| !has(s, AlertKind::Leak)));
}

#[test]
fn an_idle_gpu_under_a_training_process_is_starved() {
    let mut a = analyzer();
    let mut w = World::new();
    w.util = 10;
    w.proc = Some(Proc::default());
    let steps = run(&mut a, &mut w, 125, 1_000, |_, _| {});
    assert!(!has(&steps[60], AlertKind::Starved));
    assert!(has(&steps[124], AlertKind::Starved));
    let steps = run(&mut a, &mut w, 125, 1_000, |_, w| w.util = 95);
    assert!(!has(&steps[124], AlertKind::Starved));

    // No probed process: an idle GPU is just idle.
    let mut a = analyzer();
    let mut w = World::new();
    w.util = 5;
    w.proc = Some(Proc { probed: false, ..Proc::default() });
    assert!(run(&mut a, &mut w, 200, 1_000, |_, _| {}).iter().all(|s| !has(s, AlertKind::Starved)));
}

fn active(a: &mut Analyzer, w: &World, kind: AlertKind) -> Alert {
    let mut snap = w.snapshot();
    a.observe(&mut snap);
    snap.alerts.into_iter().find(|x| x.kind == kind).unwrap()
}

/// A launch-bound inference server: NVML's utilisation near 100 % (some
/// kernel always running) while GPM says few SMs work.
fn launch_bound() -> World {
    World { util: 98, sm: Some(6.0), proc: Some(Proc { probed: false, ..Proc::default() }), ..World::new() }
}

#[test]
fn a_busy_gpu_with_idle_sms_is_raised_after_its_window_and_cleared_with_hysteresis() {
    let mut a = analyzer();
    let mut w = launch_bound();
    let steps = run(&mut a, &mut w, 125, 1_000, |_, _| {});
    assert!(!has(&steps[117], AlertKind::SmIdle), "118 s of a 2 min window");
    assert!(has(&steps[119], AlertKind::SmIdle), "the window covered");
    let alert = active(&mut a, &w, AlertKind::SmIdle);
    assert_eq!((alert.severity, alert.gpu, alert.pid), (Severity::Warning, Some(0), None));
    assert_eq!((alert.value, alert.threshold), (Some(6.0), Some(25.0)));
    assert_eq!(
        alert.message,
        "GPU 0: utilisation 98% but SM activity 6% over 2m: kernels keep the GPU busy while few SMs work"
    );
    assert!(alert.hint.contains("CUDA graphs") && alert.hint.contains("mode=\"reduce-overhead\""), "{}", alert.hint);

    // SM activity climbing to 30 %: the mean passes 25 % but never 35 %.
    let steps = run(&mut a, &mut w, 240, 1_000, |_, w| w.sm = Some(30.0));
    assert!(steps.iter().all(|s| has(s, AlertKind::SmIdle)), "between the thresholds it holds");
    let steps = run(&mut a, &mut w, 120, 1_000, |_, w| w.sm = Some(60.0));
    assert!(!has(&steps[119], AlertKind::SmIdle));
    let changes: Vec<Change> = a.timeline().filter(|e| e.kind == AlertKind::SmIdle).map(|e| e.change).collect();
    assert_eq!(changes, [Change::Raised, Change::Cleared]);
}

#[test]
fn idle_sms_alone_are_not_an_alert() {
    let quiet = [
        ("no process", World { proc: None, ..launch_bound() }),
        ("no activity counters", World { sm: None, ..launch_bound() }),
        ("SMs at work", World { sm: Some(60.0), ..launch_bound() }),
        ("a GPU not busy", World { util: 40, ..launch_bound() }),
    ];
    for (why, mut w) in quiet {
        let mut a = analyzer();
        let steps = run(&mut a, &mut w, 200, 1_000, |_, _| {});
        assert!(steps.iter().all(|s| !has(s, AlertKind::SmIdle)), "{why}");
    }
    // The process leaving clears it at once.
    let mut a = analyzer();
    let mut w = launch_bound();
    assert!(has(&run(&mut a, &mut w, 120, 1_000, |_, _| {})[119], AlertKind::SmIdle));
    assert!(!has(&run(&mut a, &mut w, 1, 1_000, |_, w| w.proc = None)[0], AlertKind::SmIdle));
}

#[test]
fn activity_read_for_part_of_the_window_waits_for_its_own_samples() {
    // Utilisation for three minutes before the counters report: the SM
    // mean must cover two minutes of its own, not a few late samples.
    let mut a = analyzer();
    let mut w = World { sm: None, ..launch_bound() };
    run(&mut a, &mut w, 180, 1_000, |_, _| {});
    let steps = run(&mut a, &mut w, 125, 1_000, |_, w| w.sm = Some(6.0));
    assert!(!has(&steps[100], AlertKind::SmIdle));
    assert!(has(&steps[124], AlertKind::SmIdle));
    // Counters gone for good (the whole window): nothing made up, cleared.
    let steps = run(&mut a, &mut w, 125, 1_000, |_, w| w.sm = None);
    assert!(has(&steps[60], AlertKind::SmIdle), "a mean of what there is, while some is");
    assert!(!has(&steps[124], AlertKind::SmIdle));
}

/// FP32 training on a tensor-core board: SMs busy, tensor cores idle.
fn fp32_matmuls() -> World {
    World { sm: Some(70.0), tensor: Some(0.2), ..World::new() }
}

#[test]
fn idle_tensor_cores_under_busy_sms_are_raised_after_five_minutes() {
    // Every other window shorter than this rule's: the store keeps five
    // minutes all the same, in its coarsest tier past the two of seconds.
    let minute = Duration::from_secs(60);
    let history = HistoryConfig { window: minute };
    let leak = super::config::LeakConfig { window: minute, ..Default::default() };
    let mut a = Analyzer::new(&history, AlertsConfig { leak, ..AlertsConfig::default() });
    let mut w = fp32_matmuls();
    let steps = run(&mut a, &mut w, 305, 1_000, |_, _| {});
    assert!(!has(&steps[290], AlertKind::TensorIdle), "291 s of a 5 min window");
    assert!(has(&steps[300], AlertKind::TensorIdle));
    let alert = active(&mut a, &w, AlertKind::TensorIdle);
    assert_eq!((alert.severity, alert.gpu, alert.pid), (Severity::Info, Some(0), None));
    let value = alert.value.unwrap();
    assert!((value - 0.2).abs() < 1e-6, "{value}");
    assert_eq!(alert.message, "GPU 0: SM activity 70% but tensor cores 0.2% over 5m: the maths runs without them");
    for setting in ["allow_tf32 = True", "set_float32_matmul_precision(\"high\")", "dtype=torch.bfloat16", "bf16"] {
        assert!(alert.hint.contains(setting), "{setting}: {}", alert.hint);
    }
    // Mixed precision on: the tensor mean passes 5 % within the window.
    let steps = run(&mut a, &mut w, 300, 1_000, |_, w| w.tensor = Some(40.0));
    assert!(has(&steps[10], AlertKind::TensorIdle), "a 5 min mean moves slowly");
    assert!(!has(&steps[299], AlertKind::TensorIdle));
}

#[test]
fn idle_tensor_cores_are_judged_only_where_the_board_reports_them() {
    let quiet = [
        ("no tensor figure (an older board)", World { tensor: None, ..fp32_matmuls() }),
        ("no activity at all", World { sm: None, tensor: None, ..fp32_matmuls() }),
        ("tensor cores at work", World { tensor: Some(30.0), ..fp32_matmuls() }),
        ("SMs mostly idle", World { sm: Some(20.0), ..fp32_matmuls() }),
    ];
    for (why, mut w) in quiet {
        let mut a = analyzer();
        let steps = run(&mut a, &mut w, 400, 1_000, |_, _| {});
        assert!(steps.iter().all(|s| !has(s, AlertKind::TensorIdle)), "{why}");
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::analysis::config::MAX_MIB;
    use crate::history::MAX_POINTS;

    fn step() -> impl Strategy<Value = (u64, f64, u32, bool, u64, u64, u64, u64)> {
        (
            prop_oneof![Just(0u64), 1u64..5_000, 60_000u64..120_000],
            0.0f64..100.0,
            0u32..=100,
            any::<bool>(),
            0u64..(100 * GIB),
            0u64..(100 * GIB),
            0u64..20,
            0u64..5,
        )
    }

    /// A threshold as a share of its range: mostly within it, its ends,
    /// and anything at all (NaN, infinities, out of range).
    fn unit() -> impl Strategy<Value = f64> {
        prop_oneof![200 => 0.0f64..=1.0, 5 => Just(0.0), 5 => Just(1.0), 1 => any::<f64>()]
    }

    fn span() -> impl Strategy<Value = Duration> {
        prop_oneof![
            4 => Just(Duration::ZERO),
            90 => (0u64..600_000).prop_map(Duration::from_millis),
            4 => (0u64..=30 * 86_400).prop_map(Duration::from_secs),
            1 => any::<u64>().prop_map(Duration::from_secs),
        ]
    }

    /// Thresholds from `units` (percentages scaled to 100); `sorted` puts
    /// each rule's pairs in the order the validator asks for, so that most
    /// configs pass it.
    fn config_from(u: &[f64], sorted: bool, spans: &[Duration], mibs: &[u64]) -> AlertsConfig {
        let pair = |a: f64, b: f64| if sorted && b < a { (b, a) } else { (a, b) };
        let mut c = AlertsConfig::default();
        (c.fragmentation.exit, c.fragmentation.enter) = pair(u[0], u[1]);
        c.leak.min_r2 = u[2];
        let mut pressure = [u[3] * 100.0, u[4] * 100.0, u[5] * 100.0];
        if sorted {
            pressure.sort_by(f64::total_cmp);
        }
        let p = &mut c.memory_pressure;
        [p.critical_free_percent, p.warn_free_percent, p.clear_free_percent] = pressure;
        (c.starved.max_utilization, c.starved.clear_utilization) = pair(u[6] * 100.0, u[7] * 100.0);
        (c.starved.clear_data_wait, c.starved.min_data_wait) = pair(u[8], u[9]);
        (c.shm_full.clear_share, c.shm_full.used_share) = pair(u[10], u[11]);
        (c.sm_idle.clear_utilization, c.sm_idle.min_utilization) = pair(u[12] * 100.0, u[13] * 100.0);
        (c.sm_idle.max_sm_active, c.sm_idle.clear_sm_active) = pair(u[14] * 100.0, u[15] * 100.0);
        (c.tensor_idle.clear_sm_active, c.tensor_idle.min_sm_active) = pair(u[16] * 100.0, u[17] * 100.0);
        (c.tensor_idle.max_tensor_active, c.tensor_idle.clear_tensor_active) = pair(u[18] * 100.0, u[19] * 100.0);
        c.exec_min_interval = spans[0];
        c.fragmentation.window = spans[1];
        c.alloc_retry.hold = spans[2];
        c.oom.hold = spans[3];
        c.leak.window = spans[4];
        c.memory_pressure.duration = spans[5];
        c.starved.window = spans[6];
        c.sm_idle.window = spans[7];
        c.tensor_idle.window = spans[8];
        c.xid.window = spans[9];
        c.health.hold = spans[10];
        c.fragmentation.min_reserved_mib = mibs[0];
        c.fragmentation.min_inactive_split_mib = mibs[1];
        c.leak.min_growth_mib = mibs[2];
        c.starved.min_process_memory_mib = mibs[3];
        c.fragmentation.min_samples = 0;
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any finite input: no panic, history within its bound, and no
        /// alert raised and cleared on the same sample.
        #[test]
        fn the_engine_is_total_and_bounded(steps in prop::collection::vec(step(), 1..200)) {
            let mut a = analyzer();
            let mut w = World::new();
            for (dt, free, util, lost, alloc, reserved, retries, ooms) in steps {
                w.t_ms += dt;
                w.free_pct = free;
                w.util = util;
                w.lost = lost;
                w.proc = Some(Proc { allocated: alloc, reserved, split: reserved / 3, retries, ooms, ..Proc::default() });
                let mut snap = w.snapshot();
                a.observe(&mut snap);
                let mut keys: Vec<_> = snap.events.iter().map(|e| (e.kind, e.gpu, e.pid)).collect();
                let n = keys.len();
                keys.sort();
                keys.dedup();
                prop_assert_eq!(keys.len(), n, "one change per alert per sample");
                prop_assert!(a.history_points() <= 2 * MAX_POINTS);
            }
        }

        /// Whatever thresholds the validator lets through (extremes, zero
        /// windows, the largest sizes), the rules neither panic nor
        /// overflow on any finite input, in debug builds too.
        #[test]
        fn any_config_the_validator_accepts_runs(
            units in prop::collection::vec(unit(), 20),
            sorted in prop::bool::weighted(0.9),
            spans in prop::collection::vec(span(), 12),
            mibs in prop::collection::vec(prop_oneof![30 => 0..=MAX_MIB, 5 => Just(MAX_MIB), 1 => any::<u64>()], 4),
            steps in prop::collection::vec((step(), prop::option::of(0.0f64..=100.0)), 1..80),
        ) {
            let config = config_from(&units, sorted, &spans, &mibs);
            let history = HistoryConfig { window: spans[11] };
            if config.validate().is_err() || history.validate().is_err() {
                return Ok(());
            }
            let mut a = Analyzer::new(&history, config);
            let mut w = World::new();
            for ((dt, free, util, lost, alloc, reserved, retries, ooms), sm) in steps {
                w.t_ms += dt;
                (w.free_pct, w.util, w.lost, w.sm, w.tensor) = (free, util, lost, sm, sm.map(|s| 100.0 - s));
                w.proc = Some(Proc { allocated: alloc, reserved, split: reserved / 3, retries, ooms, ..Proc::default() });
                let mut snap = w.snapshot();
                a.observe(&mut snap);
                prop_assert!(a.history_points() <= 2 * MAX_POINTS);
            }
        }

        /// A crafted recording: timestamps anywhere in u64 (far apart,
        /// backwards) and any interval. The analysis must neither panic nor
        /// overflow, in debug builds too.
        #[test]
        fn crafted_times_and_intervals_never_panic(
            steps in prop::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 1..40),
        ) {
            let mut a = analyzer();
            let mut w = World::new();
            for (t_ms, interval_ms, start_ms) in steps {
                // SystemTime holds these; the snapshot's fields are what a
                // recording would carry.
                w.proc = Some(Proc { start_ms: start_ms % (1 << 50), ..Proc::default() });
                let mut snap = w.snapshot();
                snap.time.time_unix_ms = t_ms;
                snap.interval_ms = interval_ms;
                a.observe(&mut snap);
                prop_assert!(a.history_points() <= 2 * MAX_POINTS);
            }
        }
    }
}
