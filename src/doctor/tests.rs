use std::sync::Arc;

use super::*;
use crate::model::{
    Activity, ActivityUnavailable, CgroupCpu, DataLoaderStats, DataWorker, GpuState, Host, HostInput, InputPipeline,
    LoaderFailure, LoaderFailureKind, LoaderSettings, ProcessGpu, SharedMemory, TaskFigures, TaskState, WorkerSource,
};

const MIB: u64 = 1 << 20;

fn snapshot(processes: Vec<Process>, gpu: Gpu) -> Snapshot {
    let mut snap = Snapshot::of(1_700_000_000, vec![gpu], processes);
    snap.host = Host { cpu_count: Some(32), cpu_percent: Some(25.0), ..Host::default() };
    snap
}

fn gpu() -> Gpu {
    let mut g = Gpu::blank(0, GpuState::Ok);
    g.utilization.gpu = Some(35);
    g
}

/// A trainer on GPU 0 whose one loader waits `wait` of the time.
fn trainer(wait: f64, settings: LoaderSettings) -> Process {
    let mut p = Process::bare(4242);
    p.gpus = vec![ProcessGpu { used_memory: Some(8 << 30), ..ProcessGpu::compute(0) }];
    let loader = DataLoaderStats {
        live: true,
        wait_share: Some(wait),
        batches_per_s: Some(3.5),
        settings,
        batch_bytes: Some(96 * MIB),
        ..DataLoaderStats::default()
    };
    p.input = Some(Arc::new(InputPipeline { hooked: true, loaders: vec![loader], ..InputPipeline::default() }));
    p
}

fn workers(n: usize, cpu: f64, state: TaskState) -> Option<Box<HostInput>> {
    let w = DataWorker {
        pid: 1,
        ns_pid: None,
        found_by: WorkerSource::Name,
        alive: true,
        figures: TaskFigures { state: Some(state), cpu_percent: Some(cpu), ..TaskFigures::default() },
        exit_signal: None,
    };
    Some(Box::new(HostInput { workers: vec![w; n], ..HostInput::default() }))
}

fn with_workers(n: u32) -> LoaderSettings {
    LoaderSettings { num_workers: Some(n), pin_memory: Some(true), prefetch_factor: Some(2), persistent_workers: None }
}

fn only(report: &Report) -> &Finding {
    assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
    &report.findings[0]
}

#[test]
fn a_job_without_workers_is_told_to_add_some_with_the_cpus_it_has() {
    let snap = snapshot(vec![trainer(0.42, with_workers(0))], gpu());
    let report = diagnose(&snap, &[]);
    let f = only(&report);
    assert_eq!((f.code, f.severity, f.pid, f.gpu), ("data_wait", Severity::Warning, Some(4242), Some(0)));
    assert!(f.title.contains("42%"), "{}", f.title);
    assert!(f.evidence.contains("num_workers=0") && f.evidence.contains("3.5 batches/s"), "{}", f.evidence);
    assert!(f.fix.contains("num_workers") && f.fix.contains("32 CPUs"), "{}", f.fix);
    assert_eq!(report.exit_code(), crate::exit::CHECK_WARNING);
    assert!(render(&report).contains("fix: Set DataLoader(num_workers=N)"), "{}", render(&report));
}

#[test]
fn each_cause_is_named_by_the_figures_that_show_it() {
    let cause = |p: Process, g: Gpu| {
        let snap = snapshot(vec![p], g);
        let p = &snap.processes[0];
        let (_, loader) = input_cause::slowest_loader(p).unwrap();
        input_cause::explain(&snap, p, loader, snap.gpus.first(), 0.9).cause
    };
    use input_cause::Cause;
    let mut busy = trainer(0.5, with_workers(4));
    busy.host_input = workers(4, 99.0, TaskState::Running);
    assert_eq!(cause(busy.clone(), gpu()), Cause::WorkersCpuBound);
    let mut disk = trainer(0.5, with_workers(4));
    disk.host_input = workers(4, 12.0, TaskState::DiskSleep);
    assert_eq!(cause(disk, gpu()), Cause::WorkersIoBound);
    let mut quota = busy.clone();
    quota.host_input.as_mut().unwrap().cgroup_cpu = Some(CgroupCpu {
        path: "/kubepods/pod1".into(),
        version: 2,
        quota_cpus: Some(4.0),
        periods: Some(1000),
        throttled_periods: Some(600),
        throttled_usec: None,
        throttled_periods_percent: Some(60.0),
        throttled_seconds_per_s: Some(1.2),
    });
    assert_eq!(cause(quota, gpu()), Cause::CpuQuota, "the quota comes before the workers it starves");
    let unpinned = trainer(0.5, LoaderSettings { pin_memory: Some(false), ..with_workers(4) });
    assert_eq!(cause(unpinned, gpu()), Cause::PinMemoryOff);
    assert_eq!(cause(trainer(0.5, with_workers(4)), gpu()), Cause::Unknown);
    let mut shm = busy;
    let pipeline = Arc::make_mut(shm.input.as_mut().unwrap());
    pipeline.shm = Some(SharedMemory {
        total: Some(64 * MIB),
        free: Some(2 * MIB),
        used: Some(62 * MIB),
        ..SharedMemory::default()
    });
    assert_eq!(cause(shm, gpu()), Cause::SharedMemory, "a full /dev/shm comes first");
}

#[test]
fn workers_on_the_far_numa_node_are_told_where_to_pin() {
    use crate::model::{NumaNode, Placement};
    let mut p = trainer(0.3, with_workers(2));
    p.host_input = workers(2, 40.0, TaskState::Sleeping);
    for w in &mut p.host_input.as_mut().unwrap().workers {
        w.figures.placement = Some(Placement { last_node: Some(1), ..Placement::default() });
    }
    let mut g = gpu();
    g.numa_node = Some(0);
    let mut snap = snapshot(vec![p], g);
    snap.host.numa_nodes =
        Some((0..2).map(|node| NumaNode { node, cpus: format!("{}-{}", node * 16, node * 16 + 15) }).collect());
    let f = only(&diagnose(&snap, &[])).clone();
    assert!(f.evidence.contains("2 of 2 workers") && f.fix.contains("--cpunodebind=0"), "{f:#?}");
}

#[test]
fn shared_memory_warns_before_it_fills_and_is_critical_once_workers_died() {
    let mut p = trainer(0.05, with_workers(4));
    let pipeline = Arc::make_mut(p.input.as_mut().unwrap());
    pipeline.shm = Some(SharedMemory {
        total: Some(64 * MIB),
        free: Some(20 * MIB),
        used: Some(44 * MIB),
        need: Some(100 * MIB),
        ..SharedMemory::default()
    });
    let snap = snapshot(vec![p.clone()], gpu());
    let f = only(&diagnose(&snap, &[])).clone();
    assert_eq!((f.code, f.severity), ("shm_full", Severity::Warning));
    assert!(f.evidence.contains("100 MiB in flight") && f.fix.contains("--shm-size"), "{f:#?}");
    Arc::make_mut(p.input.as_mut().unwrap()).failures.push(LoaderFailure {
        time_unix_ms: 1,
        kind: LoaderFailureKind::BusError,
        exception: Some("RuntimeError".into()),
        message: Some("DataLoader worker (pid 77) is killed by signal: Bus error.".into()),
        loader: None,
        worker_pid: Some(77),
        shm_total: None,
        shm_free: None,
        sharing_strategy: None,
        batch_bytes: None,
        settings: LoaderSettings::default(),
    });
    let report = diagnose(&snapshot(vec![p], gpu()), &[]);
    let f = only(&report);
    assert_eq!((f.code, f.severity), ("workers_died", Severity::Critical));
    assert!(f.evidence.contains("Bus error"), "{f:#?}");
    assert_eq!(report.exit_code(), crate::exit::CHECK_CRITICAL);
}

#[test]
fn a_busy_gpu_with_idle_sms_and_nothing_else_is_one_finding() {
    let mut g = gpu();
    g.utilization.gpu = Some(100);
    g.activity = Some(Activity { period_ms: 1000, sm_active: Some(6.0), ..Activity::default() });
    let snap = snapshot(vec![trainer(0.02, with_workers(4))], g.clone());
    let f = only(&diagnose(&snap, &[])).clone();
    assert_eq!((f.code, f.gpu), ("sm_idle", Some(0)));
    // No activity: nothing is made up, and the report says what it could
    // not judge rather than pass it as healthy.
    g.activity = None;
    g.activity_unavailable = Some(ActivityUnavailable::FirstSample);
    let quiet = diagnose(&snapshot(vec![trainer(0.02, with_workers(4))], g), &[]);
    assert!(quiet.findings.is_empty(), "{:#?}", quiet.findings);
    assert_eq!(quiet.exit_code(), crate::exit::OK);
    assert_eq!(
        quiet.not_judged,
        ["GPU 0: busy-but-idle SMs (SM activity needs a second sample (at least 0.1 s after the first))"]
    );
    let text = render(&quiet);
    assert!(text.contains("Nothing found") && text.contains("Not judged:\n  - GPU 0: busy-but-idle SMs"), "{text}");
}

#[test]
fn a_process_without_a_probe_is_examined_for_what_can_be_seen_and_said_unjudged() {
    let mut plain = Process::bare(31);
    plain.gpus = trainer(0.0, with_workers(0)).gpus;
    let snap = snapshot(vec![plain], gpu());
    let report = diagnose(&snap, &[31]);
    assert_eq!(report.pids, [31]);
    assert_eq!(report.not_judged.len(), 2, "{:?}", report.not_judged);
    assert!(report.not_judged[0].starts_with("PID 31: data wait and allocator (no probe"), "{:?}", report.not_judged);
}

#[test]
fn pids_narrow_the_diagnosis_and_an_unknown_pid_examines_nothing() {
    let mut other = trainer(0.6, with_workers(0));
    other.pid = 7;
    let snap = snapshot(vec![trainer(0.3, with_workers(0)), other], gpu());
    let all = diagnose(&snap, &[]);
    assert_eq!(all.pids, [4242, 7]);
    assert_eq!(all.findings[0].pid, Some(7), "the critical one (60%) first");
    assert_eq!(all.findings[0].severity, Severity::Critical);
    assert_eq!(diagnose(&snap, &[4242]).pids, [4242]);
    // A PID that is not a GPU process is named, and fails the exit status:
    // `doctor $PID && echo healthy` must not bless a typo.
    let none = diagnose(&snap, &[1]);
    assert!(none.pids.is_empty() && none.findings.is_empty());
    assert_eq!(none.not_found, [1]);
    assert_eq!(none.exit_code(), crate::exit::USAGE);
    let text = render(&none);
    assert!(text.starts_with("Not a GPU process: PID 1 (") && text.contains("No GPU process"), "{text}");
    let some = diagnose(&snap, &[4242, 99]);
    assert_eq!((some.pids.as_slice(), some.not_found.as_slice()), ([4242].as_slice(), [99].as_slice()));
    assert_eq!(some.exit_code(), crate::exit::USAGE, "worse than the warning found");
}
