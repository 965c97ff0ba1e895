//! Joins the probes' allocator figures to NVML's view: per process and
//! device (allocated, reserved, cached, overhead, fragmentation), and per
//! GPU (totals, and what processes without a probe hold).

use std::time::Duration;

use super::device_match::{Gpus, Match, match_device};
use crate::model::{
    AllocConfEnv, DeviceAllocator, Gpu, GpuAllocator, OomPostMortem, ProbeState, Process, ProcessAllocator, ProcessGpu,
};
use crate::probe::files::{ProbeDevice, ProbeFile, ProbeReport};
use crate::sources::{GpuIdentity, GpuProcess};

/// Attaches each report to its process; a live probed process NVML does
/// not list (some containers hide per-process data) gets an entry of its
/// own, with NVML's figures unknown. `all` is every GPU NVML enumerates
/// (empty: the watched `gpus` stand for them).
pub fn join(processes: &mut Vec<Process>, gpus: &mut [Gpu], all: &[GpuIdentity], reports: Vec<ProbeReport>) {
    let own: Vec<GpuIdentity>;
    let all = if all.is_empty() {
        own = gpus.iter().map(identity).collect();
        &own
    } else {
        all
    };
    let watched: Vec<u32> = gpus.iter().map(|g| g.index).collect();
    let mig = gpus.iter().any(|g| g.mig_mode.is_some_and(|m| m.current));
    let ctx = Gpus { all, watched: &watched, mig };
    // One entry per PID, so an unstable sort orders the same; a stable one
    // would allocate a copy of the list (368 KiB at 512 processes). Sorted,
    // a report finds its process by bisection: a scan read a line of each
    // 736-byte process per report, a fortieth of a tick at 8 x 512 with
    // 128 probed. Processes known only from their probe go after the
    // sorted ones, and are few.
    processes.sort_unstable_by_key(|p| p.pid);
    let sorted = processes.len();
    for report in reports {
        let matches: Vec<Match> = report.file.devices.iter().map(|d| match_device(d, &report.file, &ctx)).collect();
        let pid = report.file.pid;
        let found = processes[..sorted].binary_search_by_key(&pid, |p| p.pid).ok();
        let pos = match found.or_else(|| processes[sorted..].iter().position(|p| p.pid == pid).map(|i| sorted + i)) {
            Some(pos) => pos,
            None if report.alive => {
                processes.push(probe_only_process(&report.file, &matches));
                processes.len() - 1
            }
            None => continue,
        };
        let process = &mut processes[pos];
        process.allocator = Some(Box::new(process_allocator(&report, &process.gpus, &matches)));
        // As the probe wrote them: shared, not copied, each tick.
        process.input.clone_from(&report.file.input);
        process.environment.clone_from(&report.file.environment);
    }
    if processes.len() > sorted {
        processes.sort_unstable_by_key(|p| p.pid);
    }
    for gpu in gpus.iter_mut() {
        gpu.allocator = gpu_totals(gpu.index, processes);
    }
}

fn identity(g: &Gpu) -> GpuIdentity {
    GpuIdentity::of(g)
}

fn probe_only_process(file: &ProbeFile, matches: &[Match]) -> Process {
    let mut indices: Vec<u32> = matches.iter().filter_map(|m| m.gpu).collect();
    indices.sort_unstable();
    indices.dedup();
    let gpus = indices.into_iter().map(ProcessGpu::compute).collect();
    Process::from(GpuProcess { pid: file.pid, gpus, driver_name: None })
}

/// What the probe says is in effect decides what the counters mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// PyTorch's native allocator with fixed-size segments: every counter
    /// kept, inactive split is memory trapped in partly used segments.
    NativeFixed,
    /// Native with expandable segments: segments grow in place, so free
    /// space is not trapped and inactive split is no fragmentation.
    NativeExpandable,
    /// `cudaMallocAsync`: the driver's pool does the work; PyTorch's
    /// memory_stats docstring says only allocated, active and reserved are
    /// kept, the rest "not meaningful, and always reported as zero".
    Async,
    Jax,
    /// A PyTorch probe that does not name the backend (very old files).
    Unknown,
}

fn counting(f: &ProbeFile) -> Counting {
    match (&*f.framework, f.backend.as_deref()) {
        ("jax", _) => Counting::Jax,
        (_, Some("native")) if f.expandable_segments => Counting::NativeExpandable,
        (_, Some("native")) => Counting::NativeFixed,
        (_, Some("cudaMallocAsync")) => Counting::Async,
        _ => Counting::Unknown,
    }
}

fn process_allocator(report: &ProbeReport, nvml: &[ProcessGpu], matches: &[Match]) -> ProcessAllocator {
    let f = &report.file;
    // Two missed writes make a probe stale; a second of slack covers a
    // tick that reads just before the probe writes.
    let fresh_for = Duration::from_secs_f64(f.interval_s * 2.0) + Duration::from_secs(1);
    let state = match (report.alive, report.age <= fresh_for) {
        (false, _) => ProbeState::Gone,
        (true, true) => ProbeState::Fresh,
        (true, false) => ProbeState::Stale,
    };
    let how = counting(f);
    let last_oom = post_mortems(f, matches);
    let devices = f
        .devices
        .iter()
        .zip(matches)
        .map(|(d, m)| {
            let mig = m.mig.as_ref().map(|r| r.index);
            let on = |p: &&ProcessGpu| Some(p.index) == m.gpu && (mig.is_none() || p.mig_device == mig);
            let nvml_used = nvml.iter().find(on).and_then(|p| p.used_memory);
            let mut device = device_allocator(d, m, nvml_used, how);
            // The newest post-mortem's segments say it for PyTorch.
            if device.largest_free_block.is_none() {
                device.largest_free_block = last_oom
                    .iter()
                    .rev()
                    .find(|r| r.device == Some(d.index))
                    .and_then(OomPostMortem::largest_free_block);
            }
            device
        })
        .collect();
    ProcessAllocator {
        framework: f.framework.clone(),
        framework_version: f.framework_version.clone(),
        backend: f.backend.clone(),
        alloc_conf: f.alloc_conf.clone(),
        alloc_conf_var: f.alloc_conf_var.clone(),
        alloc_conf_source: f.alloc_conf_source.clone(),
        alloc_conf_env: f.alloc_conf_env.as_ref().map(|e| AllocConfEnv {
            pytorch_alloc_conf: e.pytorch_alloc_conf.clone(),
            pytorch_cuda_alloc_conf: e.pytorch_cuda_alloc_conf.clone(),
        }),
        expandable_segments: (&*f.framework == "torch").then_some(f.expandable_segments),
        cuda_visible_devices: f.cuda_visible_devices.clone().flatten(),
        cuda_device_order: f.cuda_device_order.clone(),
        oom_events: f.oom_events,
        last_oom,
        job: f.job.clone(),
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

/// The probe's post-mortems, each placed on its GPU the way its device was
/// and read into one line.
fn post_mortems(f: &ProbeFile, matches: &[Match]) -> Vec<OomPostMortem> {
    let gpu_of =
        |ordinal: u32| f.devices.iter().zip(matches).find(|(d, _)| d.index == ordinal).and_then(|(_, m)| m.gpu);
    f.last_oom
        .iter()
        .flatten()
        .map(|r| {
            let mut r = r.clone();
            r.gpu = r.device.and_then(gpu_of);
            r.verdict = Some(r.read());
            r
        })
        .collect()
}

fn device_allocator(d: &ProbeDevice, m: &Match, nvml_used: Option<u64>, how: Counting) -> DeviceAllocator {
    // A backend that does not keep a counter reports 0 for it: that 0 is
    // not a count, whatever the file says.
    let kept = |v: Option<u64>| if how == Counting::Async { None } else { v };
    let inactive_split = kept(d.inactive_split);
    let cached = d.reserved.zip(d.allocated).map(|(r, a)| r.saturating_sub(a));
    DeviceAllocator {
        gpu: m.gpu,
        mig_device: m.mig.as_ref().map(|r| r.index),
        mig_uuid: m.mig.as_ref().and_then(|r| r.uuid.clone()),
        ordinal: Some(d.index),
        gpu_match: m.how,
        unmatched_reason: m.unmatched_reason.clone(),
        allocated: d.allocated,
        allocated_peak: d.allocated_peak,
        reserved: d.reserved,
        reserved_peak: d.reserved_peak,
        active: d.active,
        inactive_split,
        requested: kept(d.requested),
        cached,
        // The two figures are read at slightly different moments; a
        // reserved figure ahead of NVML's is not negative overhead.
        overhead: nvml_used.zip(d.reserved).map(|(n, r)| n.saturating_sub(r)),
        private_pools: d.private_pools_reserved,
        releasable: releasable(cached, inactive_split, d.private_pools_reserved, how),
        segments: kept(d.segments),
        alloc_retries: kept(d.alloc_retries),
        ooms: kept(d.ooms),
        fragmentation: fragmentation(d, how),
        largest_free_block: d.largest_free_block,
        bytes_limit: d.bytes_limit,
    }
}

/// What `empty_cache()` could hand back: the cache less what it cannot
/// return, the free space inside partly used segments and what private
/// pools (CUDA graphs) hold. With `cudaMallocAsync` or expandable segments
/// free space is not trapped in segments, so that part is 0; private pools
/// a version does not report count as 0 (the hint says "at most").
fn releasable(cached: Option<u64>, split: Option<u64>, pools: Option<u64>, how: Counting) -> Option<u64> {
    let trapped = match how {
        Counting::NativeFixed => split?,
        Counting::NativeExpandable | Counting::Async => 0,
        Counting::Jax | Counting::Unknown => return None,
    };
    Some(cached?.saturating_sub(trapped).saturating_sub(pools.unwrap_or(0)))
}

fn fragmentation(d: &ProbeDevice, how: Counting) -> Option<f64> {
    match how {
        // Trapped free space (`inactive_split_bytes`, which PyTorch's
        // `free_block` counts for split blocks) over what the allocator holds.
        Counting::NativeFixed => {
            let (split, reserved) = (d.inactive_split?, d.reserved?);
            (reserved > 0).then(|| (split as f64 / reserved as f64).clamp(0.0, 1.0))
        }
        // XLA's BFC allocator (xla/tsl/framework/bfc_allocator.cc,
        // BFCAllocator::GetFragmentation): 1 − largest free chunk / free
        // bytes of the memory it has obtained (pool_bytes − bytes_in_use),
        // 0 when nothing is free. Over the pool, not bytes_limit: without
        // preallocation the pool is far below the limit.
        Counting::Jax => {
            let (largest, pool, used) = (d.largest_free_block?, d.reserved?, d.allocated?);
            let free = pool.saturating_sub(used);
            if free == 0 {
                return Some(0.0);
            }
            Some((1.0 - largest as f64 / free as f64).clamp(0.0, 1.0))
        }
        Counting::NativeExpandable | Counting::Async | Counting::Unknown => None,
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
    use std::sync::Arc;

    use super::*;
    use crate::model::{GpuMatch, GpuState};
    use crate::probe::files::ProbeFile;

    const GIB: u64 = 1 << 30;

    fn file(pid: u32, edit: impl FnOnce(&mut serde_json::Value)) -> ProbeFile {
        let mut v: serde_json::Value =
            serde_json::from_str(&crate::probe::files::sample_json_for_tests(pid, 1)).unwrap();
        v["devices"][0]["uuid"] = "GPU-AAAA".into();
        v["devices"][0]["allocated"] = (4 * GIB).into();
        v["devices"][0]["reserved"] = (10 * GIB).into();
        v["devices"][0]["inactive_split"] = (3 * GIB).into();
        edit(&mut v);
        ProbeFile::parse(&v.to_string(), pid, 1).unwrap()
    }

    fn report(pid: u32, backend: &str, conf_expandable: bool, alive: bool) -> ProbeReport {
        let file = file(pid, |v| {
            v["backend"] = backend.into();
            v["expandable_segments"] = conf_expandable.into();
        });
        ProbeReport { file: file.into(), alive, age: Duration::from_millis(300) }
    }

    fn live(file: ProbeFile) -> ProbeReport {
        ProbeReport { file: file.into(), alive: true, age: Duration::from_millis(300) }
    }

    fn gpu() -> Gpu {
        let mut g = Gpu::blank(0, GpuState::Ok);
        g.uuid = Some("GPU-aaaa".into());
        g.name = Some("NVIDIA H100 80GB HBM3".into());
        g
    }

    fn nvml_process(pid: u32, used: Option<u64>) -> Process {
        let gpus = vec![ProcessGpu { used_memory: used, ..ProcessGpu::compute(0) }];
        Process::from(GpuProcess { pid, gpus, driver_name: None })
    }

    /// The one device of one process joined against GPU 0.
    fn joined(f: ProbeFile) -> (ProcessAllocator, DeviceAllocator) {
        let mut procs = vec![nvml_process(f.pid, Some(11 * GIB))];
        join(&mut procs, &mut [gpu()], &[], vec![live(f)]);
        let a = *procs.remove(0).allocator.unwrap();
        let d = a.devices[0].clone();
        (a, d)
    }

    #[test]
    fn the_input_pipeline_and_environment_go_with_the_process_unchanged() {
        let f = file(30, |v| {
            v["input"] = serde_json::json!({"hooked": true, "loaders": [{"id": 1, "wait_share": 0.4}]});
            v["environment"] = serde_json::json!({"cuda_version": "12.4"});
        });
        let report = live(f);
        let shared = report.file.input.clone().unwrap();
        let mut procs = vec![nvml_process(30, Some(11 * GIB)), nvml_process(40, Some(GIB))];
        join(&mut procs, &mut [gpu()], &[], vec![report]);
        let input = procs[0].input.as_ref().unwrap();
        assert!(Arc::ptr_eq(input, &shared), "the probe file's, not a copy");
        assert_eq!(input.wait_share(), Some(0.4));
        assert_eq!(procs[0].environment.as_ref().unwrap().cuda_version.as_deref(), Some("12.4"));
        assert_eq!((procs[1].input.clone(), procs[1].environment.clone()), (None, None), "no probe, nothing");
    }

    #[test]
    fn native_allocator_figures_and_gpu_totals() {
        let mut procs = vec![nvml_process(10, Some(11 * GIB)), nvml_process(20, Some(2 * GIB))];
        let mut gpus = [gpu()];
        join(&mut procs, &mut gpus, &[], vec![report(10, "native", false, true)]);
        let a = procs[0].allocator.as_ref().unwrap();
        assert_eq!(a.state, ProbeState::Fresh);
        let d = &a.devices[0];
        assert_eq!((d.gpu, d.gpu_match, d.ordinal), (Some(0), Some(GpuMatch::Uuid), Some(0)), "by UUID, any case");
        assert_eq!(d.cached, Some(6 * GIB));
        assert_eq!(d.releasable, Some(3 * GIB), "6 GiB cached, 3 GiB of it trapped in split segments");
        assert_eq!(d.overhead, Some(GIB), "NVML's 11 GiB minus 10 GiB reserved");
        assert_eq!(d.fragmentation, Some(0.3));
        assert_eq!((d.segments, d.alloc_retries, d.ooms), (Some(4), Some(0), Some(0)));
        assert_eq!(procs[1].allocator, None);
        let t = gpus[0].allocator.as_ref().unwrap();
        assert_eq!(
            (t.probed_processes, t.allocated, t.reserved, t.overhead),
            (1, Some(4 * GIB), Some(10 * GIB), Some(GIB))
        );
        assert_eq!(t.unprobed, Some(2 * GIB));
    }

    #[test]
    fn settings_and_environment_reach_the_model() {
        let (a, _) = joined(file(10, |v| {
            v["alloc_conf"] = "expandable_segments:True".into();
            v["alloc_conf_var"] = "PYTORCH_ALLOC_CONF".into();
            v["alloc_conf_source"] = "runtime".into();
            v["alloc_conf_env"]["PYTORCH_ALLOC_CONF"] = "garbage_collection_threshold:0.6".into();
            v["expandable_segments"] = true.into();
            v["cuda_visible_devices"] = "0".into();
            v["cuda_device_order"] = "PCI_BUS_ID".into();
            v["oom_events"] = 2.into();
        }));
        assert_eq!(a.alloc_conf_var.as_deref(), Some("PYTORCH_ALLOC_CONF"));
        assert_eq!(a.alloc_conf_source.as_deref(), Some("runtime"));
        let env = a.alloc_conf_env.unwrap();
        assert_eq!(env.pytorch_alloc_conf.as_deref(), Some("garbage_collection_threshold:0.6"));
        assert_eq!(env.pytorch_cuda_alloc_conf.as_deref(), Some("max_split_size_mb:512"));
        assert_eq!((a.expandable_segments, a.oom_events), (Some(true), Some(2)));
        assert_eq!(
            (a.cuda_visible_devices.as_deref(), a.cuda_device_order.as_deref()),
            (Some("0"), Some("PCI_BUS_ID"))
        );
    }

    #[test]
    fn counters_cuda_malloc_async_does_not_keep_are_null_even_when_the_file_says_0() {
        let (_, d) = joined(file(10, |v| {
            v["backend"] = "cudaMallocAsync".into();
            v["devices"][0]["inactive_split"] = 0.into();
        }));
        assert_eq!(
            (d.inactive_split, d.requested, d.segments, d.alloc_retries, d.ooms),
            (None, None, None, None, None)
        );
        assert_eq!((d.allocated, d.reserved, d.active), (Some(4 * GIB), Some(10 * GIB), Some(120)));
        assert_eq!(d.fragmentation, None);
        assert_eq!(d.releasable, Some(6 * GIB), "the driver's pool traps nothing in split segments");
    }

    #[test]
    fn fragmentation_follows_the_settings_in_effect() {
        for (backend, expandable) in [("cudaMallocAsync", false), ("native", true)] {
            let mut procs = vec![nvml_process(10, Some(11 * GIB))];
            join(&mut procs, &mut [gpu()], &[], vec![report(10, backend, expandable, true)]);
            assert_eq!(procs[0].allocator.as_ref().unwrap().devices[0].fragmentation, None, "{backend}");
        }
        let (_, d) = joined(file(10, |v| v["expandable_segments"] = true.into()));
        assert_eq!(d.releasable, Some(6 * GIB), "expandable segments: split space is not trapped");
        // A probe file too old to name the backend: nothing is assumed.
        let (a, d) = joined(file(10, |v| v["backend"] = serde_json::Value::Null));
        assert_eq!((a.backend, d.fragmentation, d.releasable), (None, None, None));
    }

    #[test]
    fn private_pools_are_not_releasable() {
        let (_, d) = joined(file(10, |v| v["devices"][0]["private_pools_reserved"] = GIB.into()));
        assert_eq!((d.private_pools, d.releasable), (Some(GIB), Some(2 * GIB)));
        let (_, d) = joined(file(10, |v| v["devices"][0]["inactive_split"] = serde_json::Value::Null));
        assert_eq!(d.releasable, None, "native, fixed segments: an unknown split leaves it unknown");
    }

    fn jax(pool: u64, in_use: u64, largest: Option<u64>) -> DeviceAllocator {
        joined(file(10, |v| {
            v["framework"] = "jax".into();
            v["backend"] = "jax".into();
            let d = &mut v["devices"][0];
            (d["reserved"], d["allocated"], d["largest_free_block"]) = (pool.into(), in_use.into(), largest.into());
            d["bytes_limit"] = (60 * GIB).into();
        }))
        .1
    }

    #[test]
    fn jax_fragmentation_is_xla_s_over_the_pool() {
        // Preallocation off: a 2 GiB pool far below the 60 GiB limit, its
        // free GiB one block. The old formula over bytes_limit said 0.98.
        let d = jax(2 * GIB, GIB, Some(GIB));
        assert_eq!((d.fragmentation, d.largest_free_block, d.bytes_limit), (Some(0.0), Some(GIB), Some(60 * GIB)));
        let f = jax(10 * GIB, 6 * GIB, Some(GIB)).fragmentation.unwrap();
        assert!((f - 0.75).abs() < 1e-9, "{f}");
        assert_eq!(jax(4 * GIB, 4 * GIB, Some(0)).fragmentation, Some(0.0), "a full pool");
        assert_eq!(jax(4 * GIB, GIB, None).fragmentation, None);
        let (a, d) = joined(file(10, |v| v["framework"] = "jax".into()));
        assert_eq!((a.expandable_segments, d.releasable), (None, None), "no empty_cache() in JAX");
    }

    #[test]
    fn an_unmatched_device_is_kept_with_its_figures_and_reason() {
        let f = file(10, |v| {
            v["devices"][0]["uuid"] = serde_json::Value::Null;
            v["devices"][0]["pci_bus_id"] = serde_json::Value::Null;
            v["devices"][0]["index"] = 3.into();
        });
        let (_, d) = joined(f.clone());
        assert_eq!((d.gpu, d.gpu_match, d.ordinal, d.allocated), (None, None, Some(3), Some(4 * GIB)));
        assert!(d.unmatched_reason.unwrap().contains("cuda:3 is beyond the 1 GPU(s)"));
        // A process NVML does not list is shown too, on no GPU.
        let mut procs = Vec::new();
        let mut gpus = [gpu()];
        join(&mut procs, &mut gpus, &[], vec![live(f)]);
        assert_eq!((procs.len(), procs[0].gpus.len()), (1, 0));
        assert_eq!(procs[0].allocator.as_ref().unwrap().devices.len(), 1);
        assert_eq!(gpus[0].allocator, None, "an unmatched device adds to no GPU's totals");
    }

    #[test]
    fn nvml_indices_stay_real_when_gpus_are_left_out() {
        let all: Vec<GpuIdentity> = (0..3)
            .map(|i| GpuIdentity {
                index: i,
                uuid: Some(format!("GPU-{i}{i}{i}{i}")),
                name: Some("NVIDIA H100 80GB HBM3".into()),
                pci_bus_id: Some(format!("00000000:{:02x}:00.0", 0x18 + i)),
                mig_devices: Vec::new(),
            })
            .collect();
        let mut watched = Gpu::blank(2, GpuState::Ok);
        watched.uuid = Some("GPU-2222".into());
        let f = file(10, |v| {
            v["devices"][0]["uuid"] = serde_json::Value::Null;
            v["devices"][0]["pci_bus_id"] = serde_json::Value::Null;
            v["cuda_visible_devices"] = "2".into();
        });
        let mut procs = Vec::new();
        join(&mut procs, std::slice::from_mut(&mut watched), &all, vec![live(f)]);
        let d = &procs[0].allocator.as_ref().unwrap().devices[0];
        assert_eq!((d.gpu, d.gpu_match), (Some(2), Some(GpuMatch::CudaVisibleDevices)));
        assert_eq!(procs[0].gpus[0].index, 2);
    }

    #[test]
    fn unknown_nvml_figure_means_unknown_overhead_and_probe_only_processes_appear() {
        let mut procs = vec![nvml_process(10, None)];
        let mut gpus = [gpu()];
        join(&mut procs, &mut gpus, &[], vec![report(10, "native", false, true), report(30, "native", false, true)]);
        assert_eq!(procs[0].allocator.as_ref().unwrap().devices[0].overhead, None);
        assert_eq!(procs[1].pid, 30);
        assert_eq!(procs[1].gpus[0].used_memory, None);
        assert_eq!(gpus[0].allocator.as_ref().unwrap().probed_processes, 2);
    }

    #[test]
    fn gone_processes_are_marked_and_not_added() {
        let mut procs = vec![nvml_process(10, Some(GIB))];
        let reports = vec![report(10, "native", false, false), report(40, "native", false, false)];
        join(&mut procs, &mut [gpu()], &[], reports);
        assert_eq!(procs.len(), 1);
        assert_eq!(procs[0].allocator.as_ref().unwrap().state, ProbeState::Gone);
    }
}
