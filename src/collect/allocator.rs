//! Joins the probes' allocator figures to NVML's view: per process and
//! device (allocated, reserved, cached, overhead, fragmentation), and per
//! GPU (totals, and what processes without a probe hold).

use std::collections::HashMap;
use std::time::Duration;

use crate::model::{
    DeviceAllocator, Gpu, GpuAllocator, ProbeState, Process, ProcessAllocator, ProcessGpu, ProcessType,
};
use crate::sources::GpuProcess;
use crate::sources::probe::{ProbeDevice, ProbeFile, ProbeReport};

/// Attaches each report to its process; a live probed process NVML does
/// not list (some containers hide per-process data) gets an entry of its
/// own, with NVML's figures unknown.
pub fn join(processes: &mut Vec<Process>, gpus: &mut [Gpu], reports: Vec<ProbeReport>) {
    let by_uuid: HashMap<String, u32> =
        gpus.iter().filter_map(|g| Some((g.uuid.as_deref()?.to_ascii_lowercase(), g.index))).collect();
    for report in reports {
        let pos = match processes.iter().position(|p| p.pid == report.file.pid) {
            Some(pos) => pos,
            None if report.alive => {
                processes.push(probe_only_process(&report.file, &by_uuid));
                processes.len() - 1
            }
            None => continue,
        };
        let process = &mut processes[pos];
        process.allocator = Some(process_allocator(&report, &process.gpus, &by_uuid));
    }
    processes.sort_by_key(|p| p.pid);
    for gpu in gpus.iter_mut() {
        gpu.allocator = gpu_totals(gpu.index, processes);
    }
}

fn gpu_of(d: &ProbeDevice, by_uuid: &HashMap<String, u32>) -> Option<u32> {
    by_uuid.get(&d.uuid.as_deref()?.to_ascii_lowercase()).copied()
}

fn probe_only_process(file: &ProbeFile, by_uuid: &HashMap<String, u32>) -> Process {
    let gpus = file
        .devices
        .iter()
        .filter_map(|d| gpu_of(d, by_uuid))
        .map(|index| ProcessGpu { index, kind: ProcessType::Compute, used_memory: None })
        .collect();
    Process::from(GpuProcess { pid: file.pid, gpus, driver_name: None })
}

fn process_allocator(report: &ProbeReport, nvml: &[ProcessGpu], by_uuid: &HashMap<String, u32>) -> ProcessAllocator {
    let f = &report.file;
    // Two missed writes make a probe stale; a second of slack covers a
    // tick that reads just before the probe writes.
    let fresh_for = Duration::from_secs_f64(f.interval_s * 2.0) + Duration::from_secs(1);
    let state = match (report.alive, report.age <= fresh_for) {
        (false, _) => ProbeState::Gone,
        (true, true) => ProbeState::Fresh,
        (true, false) => ProbeState::Stale,
    };
    // Fragmentation means inactive split / reserved only with the native
    // allocator and fixed-size segments: cudaMallocAsync leaves the split
    // counters at zero, and expandable segments do not count it.
    let native_fixed = f.framework == "torch" && f.backend.as_deref() == Some("native") && !f.expandable_segments;
    let devices = f
        .devices
        .iter()
        .map(|d| {
            let gpu = gpu_of(d, by_uuid);
            let nvml_used = gpu.and_then(|g| nvml.iter().find(|p| p.index == g)).and_then(|p| p.used_memory);
            device_allocator(d, gpu, nvml_used, native_fixed, f.framework == "jax")
        })
        .collect();
    ProcessAllocator {
        framework: f.framework.clone(),
        framework_version: f.framework_version.clone(),
        backend: f.backend.clone(),
        alloc_conf: f.alloc_conf.clone(),
        rank: f.rank,
        local_rank: f.local_rank,
        world_size: f.world_size,
        pinned_host: f.pinned_host.as_ref().and_then(|p| p.current),
        pinned_host_peak: f.pinned_host.as_ref().and_then(|p| p.peak),
        state,
        age_ms: u64::try_from(report.age.as_millis()).unwrap_or(u64::MAX),
        devices,
    }
}

fn device_allocator(
    d: &ProbeDevice,
    gpu: Option<u32>,
    nvml_used: Option<u64>,
    native_fixed: bool,
    jax: bool,
) -> DeviceAllocator {
    let fragmentation = if jax {
        // JAX: how much of the free pool is not one usable block.
        match (d.largest_free_block, d.bytes_limit, d.allocated) {
            (Some(largest), Some(limit), Some(used)) if limit > used => {
                Some((1.0 - largest as f64 / (limit - used) as f64).clamp(0.0, 1.0))
            }
            _ => None,
        }
    } else {
        match (native_fixed, d.inactive_split, d.reserved) {
            (true, Some(split), Some(reserved)) if reserved > 0 => {
                Some((split as f64 / reserved as f64).clamp(0.0, 1.0))
            }
            _ => None,
        }
    };
    DeviceAllocator {
        gpu,
        allocated: d.allocated,
        allocated_peak: d.allocated_peak,
        reserved: d.reserved,
        reserved_peak: d.reserved_peak,
        active: d.active,
        inactive_split: d.inactive_split,
        requested: d.requested,
        cached: d.reserved.zip(d.allocated).map(|(r, a)| r.saturating_sub(a)),
        // The two figures are read at slightly different moments; a
        // reserved figure ahead of NVML's is not negative overhead.
        overhead: nvml_used.zip(d.reserved).map(|(n, r)| n.saturating_sub(r)),
        segments: d.segments,
        alloc_retries: d.alloc_retries,
        ooms: d.ooms,
        fragmentation,
    }
}

fn gpu_totals(index: u32, processes: &[Process]) -> Option<GpuAllocator> {
    // No process without a probe is a known zero, not an unknown.
    let mut t = GpuAllocator { unprobed: Some(0), ..GpuAllocator::default() };
    let add = |acc: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *acc = Some(acc.unwrap_or(0) + v);
        }
    };
    for p in processes {
        let on_this = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(index)));
        match on_this {
            Some(d) => {
                t.probed_processes += 1;
                add(&mut t.allocated, d.allocated);
                add(&mut t.reserved, d.reserved);
                add(&mut t.cached, d.cached);
                add(&mut t.inactive_split, d.inactive_split);
                add(&mut t.overhead, d.overhead);
            }
            None => add(&mut t.unprobed, p.gpus.iter().find(|g| g.index == index).and_then(|g| g.used_memory)),
        }
    }
    (t.probed_processes > 0).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuState;
    use crate::sources::probe::ProbeFile;

    const GIB: u64 = 1 << 30;

    fn report(pid: u32, backend: &str, conf_expandable: bool, alive: bool) -> ProbeReport {
        let mut v: serde_json::Value =
            serde_json::from_str(&crate::sources::probe::sample_json_for_tests(pid, 1)).unwrap();
        v["backend"] = backend.into();
        v["expandable_segments"] = conf_expandable.into();
        v["devices"][0]["uuid"] = "GPU-AAAA".into();
        v["devices"][0]["allocated"] = (4 * GIB).into();
        v["devices"][0]["reserved"] = (10 * GIB).into();
        v["devices"][0]["inactive_split"] = (3 * GIB).into();
        ProbeReport { file: ProbeFile::parse(&v.to_string(), pid, 1).unwrap(), alive, age: Duration::from_millis(300) }
    }

    fn gpu() -> Gpu {
        let mut g = Gpu::blank(0, GpuState::Ok);
        g.uuid = Some("GPU-aaaa".into());
        g
    }

    fn nvml_process(pid: u32, used: Option<u64>) -> Process {
        let gpus = vec![ProcessGpu { index: 0, kind: ProcessType::Compute, used_memory: used }];
        Process::from(GpuProcess { pid, gpus, driver_name: None })
    }

    #[test]
    fn native_allocator_figures_and_gpu_totals() {
        let mut procs = vec![nvml_process(10, Some(11 * GIB)), nvml_process(20, Some(2 * GIB))];
        let mut gpus = [gpu()];
        join(&mut procs, &mut gpus, vec![report(10, "native", false, true)]);
        let a = procs[0].allocator.as_ref().unwrap();
        assert_eq!(a.state, ProbeState::Fresh);
        let d = &a.devices[0];
        assert_eq!(d.gpu, Some(0), "matched by UUID, whatever the case");
        assert_eq!(d.cached, Some(6 * GIB));
        assert_eq!(d.overhead, Some(GIB), "NVML's 11 GiB minus 10 GiB reserved");
        assert_eq!(d.fragmentation, Some(0.3));
        assert_eq!(procs[1].allocator, None);
        let t = gpus[0].allocator.as_ref().unwrap();
        assert_eq!(
            (t.probed_processes, t.allocated, t.reserved, t.overhead),
            (1, Some(4 * GIB), Some(10 * GIB), Some(GIB))
        );
        assert_eq!(t.unprobed, Some(2 * GIB));
    }

    #[test]
    fn fragmentation_is_undefined_where_the_backend_makes_it_meaningless() {
        for (backend, expandable) in [("cudaMallocAsync", false), ("native", true)] {
            let mut procs = vec![nvml_process(10, Some(11 * GIB))];
            join(&mut procs, &mut [gpu()], vec![report(10, backend, expandable, true)]);
            assert_eq!(procs[0].allocator.as_ref().unwrap().devices[0].fragmentation, None, "{backend}");
        }
    }

    #[test]
    fn jax_fragmentation_uses_the_largest_free_block() {
        let d = ProbeDevice {
            allocated: Some(6 * GIB),
            bytes_limit: Some(10 * GIB),
            largest_free_block: Some(GIB),
            ..serde_json::from_str::<ProbeDevice>("{\"index\":0}").unwrap()
        };
        let f = device_allocator(&d, Some(0), None, false, true).fragmentation.unwrap();
        assert!((f - 0.75).abs() < 1e-9, "{f}");
    }

    #[test]
    fn unknown_nvml_figure_means_unknown_overhead_and_probe_only_processes_appear() {
        let mut procs = vec![nvml_process(10, None)];
        let mut gpus = [gpu()];
        join(&mut procs, &mut gpus, vec![report(10, "native", false, true), report(30, "native", false, true)]);
        assert_eq!(procs[0].allocator.as_ref().unwrap().devices[0].overhead, None);
        assert_eq!(procs[1].pid, 30);
        assert_eq!(procs[1].gpus[0].used_memory, None);
        assert_eq!(gpus[0].allocator.as_ref().unwrap().probed_processes, 2);
    }

    #[test]
    fn gone_processes_are_marked_and_not_added() {
        let mut procs = vec![nvml_process(10, Some(GIB))];
        join(&mut procs, &mut [gpu()], vec![report(10, "native", false, false), report(40, "native", false, false)]);
        assert_eq!(procs.len(), 1);
        assert_eq!(procs[0].allocator.as_ref().unwrap().state, ProbeState::Gone);
    }
}
