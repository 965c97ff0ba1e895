use super::*;
use crate::model::{GpuState, Process, ProcessGpu, ProcessType, ProcessUtilization};

fn on(pid: u32, gpu: u32, mib: u64) -> Process {
    let mut p = Process::bare(pid);
    p.gpus = vec![ProcessGpu {
        index: gpu,
        kind: ProcessType::Compute,
        used_memory: Some(mib << 20),
        mig_device: None,
        mig_uuid: None,
    }];
    p
}

/// GPU 0 the job's alone, GPU 1 shared with PID 9 (SM 30 against the
/// job's 10), GPU 2 idle; each counter at `mj`.
fn sample(mj: u64) -> Snapshot {
    let mut snap = crate::serve::metrics::tests::snapshot();
    snap.gpus = (0..3)
        .map(|i| {
            let mut g = Gpu::blank(i, GpuState::Ok);
            g.energy_mj = Some(mj);
            g.utilization.gpu = Some(50);
            g
        })
        .collect();
    snap.gpus[1].process_utilization = Some(vec![
        ProcessUtilization { pid: 7, sm: 10, memory: 0, encoder: 0, decoder: 0 },
        ProcessUtilization { pid: 9, sm: 30, memory: 0, encoder: 0, decoder: 0 },
    ]);
    snap.processes = vec![on(5, 0, 100), on(7, 1, 100), on(9, 1, 100)];
    snap.alerts.retain(|a| a.pid.is_none() && a.gpu == Some(0));
    snap
}

fn job() -> IntSet<u32> {
    [5, 7].into_iter().collect()
}

fn exit() -> ReportExit {
    ReportExit { status: 0, code: Some(0), signal: None }
}

#[test]
fn a_gpu_of_its_own_costs_the_job_its_counter_s_difference_and_a_shared_one_its_share() {
    let mut g = Gathered::default();
    for mj in [1_000_000, 1_500_000, 2_000_000] {
        g.observe(&sample(mj), &job());
    }
    let r = g.finish(vec!["train".into()], exit(), 7200.0, 2.0);
    let gpus: Vec<u32> = r.gpus.iter().map(|g| g.index).collect();
    assert_eq!(gpus, [0, 1], "the idle GPU is not the job's");
    assert_eq!(r.gpu_hours, Some(4.0), "two GPUs for two hours");
    assert_eq!(r.gpus[0].energy_j, Some(1000.0));
    assert!(!r.gpus[0].shared);
    // A quarter of the SM samples on GPU 1 were the job's.
    assert_eq!(r.gpus[1].energy_j, Some(250.0));
    assert_eq!((r.gpus[1].shared, r.gpus[1].share_method), (true, Some(ShareMethod::SmSamples)));
    assert!(r.energy_estimated);
    assert_eq!(r.energy_kwh, Some(1250.0 / 3.6e6));
    assert_eq!(r.gpus[0].mean_utilization_percent, Some(50.0));
    assert_eq!(r.gpus[0].mean_sm_active_percent, None, "no activity counters: unknown, not 0");
    let text = r.text();
    assert!(text.contains("GPUs 0,1  4.000 GPU-hours"), "{text}");
    assert!(text.contains("weighed by its share of NVML's per-process SM samples"), "{text}");
}

#[test]
fn without_sm_samples_the_share_is_the_memory_s_and_a_counter_that_goes_back_is_unknown() {
    let mut g = Gathered::default();
    for mj in [10_000, 20_000, 5_000] {
        let mut s = sample(mj);
        s.gpus[1].process_utilization = None;
        s.processes[2] = on(9, 1, 300);
        g.observe(&s, &job());
    }
    let r = g.finish(vec![], exit(), 10.0, 2.0);
    assert_eq!(r.gpus[1].share_method, Some(ShareMethod::Memory));
    assert_eq!(r.gpus[0].energy_j, None, "the driver reloaded: the energy is not known");
    assert_eq!(r.energy_kwh, None);
}

#[test]
fn peaks_ooms_and_alerts_are_the_job_s() {
    let mut s = sample(0);
    let base = crate::serve::metrics::tests::snapshot();
    let probed = base.processes.iter().find(|p| p.allocator.is_some()).unwrap().clone();
    let pid = probed.pid;
    let mut probed = probed;
    for d in probed.allocator.as_mut().unwrap().devices.iter_mut() {
        d.gpu = Some(0);
        (d.allocated_peak, d.reserved_peak, d.ooms) = (Some(3 << 30), Some(4 << 30), Some(2));
    }
    s.processes.push(probed);
    s.alerts = base.alerts.clone();
    let alien = s.alerts.len();
    let mut ours = job();
    ours.insert(pid);
    let mut g = Gathered::default();
    g.observe(&s, &ours);
    let r = g.finish(vec![], exit(), 1.0, 2.0);
    assert_eq!((r.gpus[0].allocated_peak_bytes, r.gpus[0].reserved_peak_bytes), (Some(3 << 30), Some(4 << 30)));
    assert_eq!(r.ooms, Some(2));
    assert!(r.alerts.iter().all(|a| a.pid.is_none_or(|p| ours.contains(&p))), "{:?}", r.alerts);
    assert!(r.alerts.len() <= alien);
}

#[test]
fn without_a_reading_the_gpu_hours_are_unknown_not_zero() {
    let mut g = Gathered::default();
    g.unavailable("no NVML".into());
    let r = g.finish(vec!["train".into()], exit(), 60.0, 2.0);
    assert_eq!(r.gpu_hours, None);
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["gpu_hours"].is_null(), "{json}");
    // Readings that never saw the job on a GPU: a true zero.
    let mut g = Gathered::default();
    let mut idle = sample(1_000_000);
    idle.processes.clear();
    g.observe(&idle, &job());
    assert_eq!(g.finish(vec!["true".into()], exit(), 1.0, 2.0).gpu_hours, Some(0.0));
}
