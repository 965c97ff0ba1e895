//! Allocator figures for the built-in demo's processes, so that `--demo`
//! shows what a probe adds: rank 0 fragments until its alert fires (within
//! about 15 s) and later needs an allocation retry; rank 1 leaks slowly
//! under a training saw-tooth; the inference server runs `cudaMallocAsync`,
//! where fragmentation has no meaning. Rank 0 also waits for its data
//! about a third of each step, its 64 MiB `/dev/shm` three quarters full;
//! rank 1's loader keeps up. The processes are the demo
//! scenario's (`crates/nvml-sim/scenarios/demo.toml`), whose NVML figures
//! ramp from 60 to 70 GiB over 15 minutes; these figures follow them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ProbeDevice, ProbeFile, ProbeReport, ProbeSample, ProbeSource};
use crate::model::DeviceAllocator;
use crate::model::{
    Autocast, DataLoaderStats, DeviceArch, FrameworkEnvironment, GradScalerUse, InputPipeline, LoaderSettings,
    ProbeStatus, SharedMemory,
};
use crate::probe::segmap::{Pool, RunClass, Segment, SegmentMap};

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;
/// CUDA context, cuBLAS workspace and NCCL buffers of a training rank.
const CONTEXT: f64 = 700.0 * MIB;

struct DemoProcess {
    pid: u32,
    /// Bare, as PyTorch gives it.
    uuid: &'static str,
    pci_bus_id: &'static str,
    rank: Option<u32>,
    backend: &'static str,
    /// CUDA_VISIBLE_DEVICES, and the device's ordinal under it.
    visible: Option<&'static str>,
    ordinal: u32,
}

const PROCESSES: [DemoProcess; 3] = [
    DemoProcess {
        pid: 4_123_401,
        uuid: "3f6a1c2e-8b4d-4e71-a0c9-5d2e7b81f403",
        pci_bus_id: "00000000:18:00.0",
        rank: Some(0),
        backend: "native",
        visible: None,
        ordinal: 0,
    },
    DemoProcess {
        pid: 4_123_402,
        uuid: "9c04d7b5-2e1f-4a38-b6f0-c17a4e9d2b56",
        pci_bus_id: "00000000:2a:00.0",
        rank: Some(1),
        backend: "native",
        visible: None,
        ordinal: 1,
    },
    DemoProcess {
        pid: 4_123_510,
        uuid: "61b8e0f2-7d3c-4c95-8e27-0a4f3b6c9d18",
        pci_bus_id: "00000000:3b:00.0",
        rank: None,
        backend: "cudaMallocAsync",
        visible: Some("2"),
        ordinal: 0,
    },
];

pub struct DemoProbes {
    started: Instant,
}

impl DemoProbes {
    pub fn new() -> Self {
        Self { started: Instant::now() }
    }
}

impl Default for DemoProbes {
    fn default() -> Self {
        Self::new()
    }
}

impl ProbeSource for DemoProbes {
    fn sample(&mut self) -> ProbeSample {
        let t = self.started.elapsed().as_secs_f64();
        let reports = PROCESSES.iter().map(|p| report(p, t)).collect();
        let status = ProbeStatus {
            ok: true,
            directory: Some("(demo: simulated probes)".into()),
            files: PROCESSES.len() as u32,
            ..ProbeStatus::default()
        };
        ProbeSample { reports, status }
    }
}

/// The scenario's NVML figure for a training rank: a 15-minute ramp.
fn nvml_used(t: f64) -> f64 {
    (61_440.0 + 10_240.0 * ((t % 900.0) / 900.0)) * MIB
}

fn report(p: &DemoProcess, t: f64) -> ProbeReport {
    let (allocated, reserved, split, retries) = match p.rank {
        // Splits pile up from the start; one retry after 45 s.
        Some(0) => {
            let reserved = nvml_used(t) - CONTEXT;
            let frag = (0.08 + 0.03 * t).min(0.42);
            (reserved * (0.9 - frag), reserved, reserved * frag, u64::from(t >= 45.0))
        }
        // A floor rising 2 MiB/s under a 10 s, 6 GiB saw-tooth.
        Some(_) => {
            let reserved = nvml_used(t) - CONTEXT;
            let floor = 30.0 * GIB + 2.0 * MIB * t;
            let split = 0.04 * reserved;
            ((floor + 6.0 * GIB * ((t % 10.0) / 10.0)).min(reserved - split), reserved, split, 0)
        }
        // vLLM preallocates its KV cache: steady.
        None => (65.0 * GIB, 70.0 * GIB, 0.0, 0),
    };
    let b = |x: f64| Some(x.max(0.0) as u64);
    // cudaMallocAsync keeps only allocated, active and reserved; the probe
    // publishes the rest as null.
    let native = p.backend == "native";
    let kept = |v: Option<u64>| v.filter(|_| native);
    let device = ProbeDevice {
        index: p.ordinal,
        uuid: Some(p.uuid.into()),
        pci_bus_id: Some(p.pci_bus_id.into()),
        private_pools_reserved: None,
        allocated: b(allocated),
        allocated_peak: b(allocated.max(reserved * 0.95)),
        reserved: b(reserved),
        reserved_peak: b(reserved),
        active: b(allocated),
        active_peak: b(reserved * 0.95),
        inactive_split: kept(b(split)),
        inactive_split_peak: kept(b(split)),
        requested: kept(b(allocated * 0.99)),
        requested_peak: kept(b(reserved * 0.94)),
        segments: kept(Some(400)),
        alloc_retries: kept(Some(retries)),
        ooms: kept(Some(0)),
        device_allocs: kept(Some(1500)),
        device_frees: kept(Some(1100)),
        largest_free_block: None,
        bytes_limit: None,
    };
    let conf: Option<Arc<str>> = (!native).then(|| "backend:cudaMallocAsync".into());
    let file = ProbeFile {
        format: super::PROBE_FORMAT.into(),
        version: 1,
        pid: p.pid,
        start_ticks: 0,
        pid_ns: None,
        seq: t as u64,
        written_unix_ms: 0,
        interval_s: 1.0,
        errors: 0,
        framework: "torch".into(),
        framework_version: Some("2.5.1".into()),
        backend: Some(p.backend.into()),
        alloc_conf: conf.clone(),
        alloc_conf_var: Some("PYTORCH_CUDA_ALLOC_CONF".into()),
        alloc_conf_source: Some("environment".into()),
        alloc_conf_env: Some(super::file::AllocConfEnv { pytorch_alloc_conf: None, pytorch_cuda_alloc_conf: conf }),
        expandable_segments: false,
        cuda_visible_devices: Some(p.visible.map(Into::into)),
        cuda_device_order: None,
        oom_events: Some(0),
        last_oom: None,
        // The two DDP ranks share torchrun's rendezvous.
        job: p.rank.map(|_| "127.0.0.1:29500".into()),
        rank: p.rank,
        local_rank: p.rank,
        world_size: p.rank.map(|_| 2),
        pinned_host: None,
        devices: vec![device],
        input: Some(Arc::new(input(p, t))),
        environment: Some(Arc::new(environment(p))),
    };
    ProbeReport { file: file.into(), alive: true, age: Duration::from_millis(300) }
}

/// How many DataLoader workers each demo rank runs.
pub const WORKERS: u32 = 8;

/// The PIDs of a demo rank's DataLoader workers, as its probe publishes
/// them (`worker_pids`) and the demo's host source shows them; `None` for
/// the server, which has none, and for a PID not the demo's.
pub fn worker_pids(pid: u32) -> Option<Vec<u32>> {
    let rank = PROCESSES.iter().find(|p| p.pid == pid)?.rank?;
    Some((1..=WORKERS).map(|i| pid + 10 * (rank + 1) + i).collect())
}

/// A training rank's DataLoader (8 workers, 2 MiB batches); the server
/// has none.
fn input(p: &DemoProcess, t: f64) -> InputPipeline {
    const MIB: u64 = 1 << 20;
    let Some(rank) = p.rank else {
        return InputPipeline { hooked: false, window_s: Some(30.0), ..InputPipeline::default() };
    };
    let (share, rate) = if rank == 0 { (0.33 + 0.04 * (t / 7.0).sin(), 9.5) } else { (0.04, 14.2) };
    let workers = worker_pids(p.pid).unwrap_or_default();
    let loader = DataLoaderStats {
        id: 1,
        live: true,
        consumer_thread: Some("MainThread".into()),
        batches: (rate * t) as u64,
        epochs: 1 + (t / 600.0) as u64,
        window_s: Some(30.0_f64.min(t)),
        batches_per_s: Some(rate),
        wait_share: Some(share),
        wait_per_batch_s: Some(share / rate),
        waiting_s: Some(0.0),
        first_batch_wait_s: Some(4.2),
        iterator: Some("_MultiProcessingDataLoaderIter".into()),
        dataset: Some("ImageFolder".into()),
        settings: LoaderSettings {
            num_workers: Some(WORKERS),
            pin_memory: Some(rank != 0),
            prefetch_factor: Some(2),
            persistent_workers: Some(false),
        },
        workers: Some(WORKERS),
        worker_pids: Some(workers),
        pin_memory_thread: Some(rank != 0),
        batches_ready: Some(u64::from(rank != 0) * 6),
        batch_bytes: Some(2 * MIB),
        shm_need: Some(2 * MIB * (2 * u64::from(WORKERS) + 2)),
    };
    let total = 64 * MIB;
    let free = if rank == 0 { 16 * MIB } else { 40 * MIB };
    InputPipeline {
        hooked: true,
        window_s: Some(30.0),
        loaders: vec![loader],
        loaders_left_out: 0,
        shm: Some(SharedMemory {
            path: Some("/dev/shm".into()),
            total: Some(total),
            free: Some(free),
            used: Some(total - free),
            need: Some(2 * MIB * (2 * u64::from(WORKERS) + 2)),
            sharing_strategy: Some("file_descriptor".into()),
            open_files_limit: Some(1_048_576),
            open_files_limit_hard: Some(1_048_576),
        }),
        failures: Vec::new(),
    }
}

fn environment(p: &DemoProcess) -> FrameworkEnvironment {
    let training = p.rank.is_some();
    FrameworkEnvironment {
        torch_version: Some("2.5.1".into()),
        cuda_version: Some("12.4".into()),
        hip_version: None,
        cudnn_version: Some("9.1.0".into()),
        cudnn_compiled_version: Some("9.1.0".into()),
        arch_flags: Some("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90".into()),
        fp32_precision_matmul: None,
        fp32_precision_conv: None,
        matmul_tf32: Some(false),
        cudnn_tf32: Some(true),
        float32_matmul_precision: Some("highest".into()),
        cudnn_benchmark: Some(training),
        cudnn_deterministic: Some(false),
        devices: vec![DeviceArch { ordinal: p.ordinal, capability: Some("9.0".into()), arch_supported: Some(true) }],
        autocast: Some(Autocast {
            hooked: true,
            entries: if training { 12_000 } else { 0 },
            last_s_ago: training.then_some(0.1),
            device_type: training.then(|| "cuda".into()),
            dtype: training.then(|| "torch.bfloat16".into()),
        }),
        grad_scaler: Some(GradScalerUse { count: Some(0), enabled: None }),
    }
}

/// The segment map (`m`) a demo rank's probe would answer with, drawn
/// from what its probe reports on that device (`device`, as the snapshot
/// has it), so the map and the detail view agree: as many segments as it
/// counts, adding up to what it has reserved, allocated and split. Rank 0
/// is fragmented: its free space lies in splits and in whole free segments
/// of at most 512 MiB, so no cached block holds the 1 GiB asked about by
/// default and the map answers that it needs a new `cudaMalloc`; rank 1
/// keeps whole segments of up to 2 GiB free. The server runs
/// `cudaMallocAsync` and has none (`None`, as for a PID not the demo's).
pub fn segment_map(pid: u32, device: &DeviceAllocator) -> Option<SegmentMap> {
    let p = PROCESSES.iter().find(|p| p.pid == pid && p.backend == "native")?;
    let free_segment = if p.rank == Some(0) { 512 << 20 } else { 2 << 30 };
    let segments = demo_segments(device, free_segment);
    let pools = ["large", "small"]
        .into_iter()
        .map(|pool| {
            let of: Vec<&Segment> = segments.iter().filter(|s| s.pool == pool).collect();
            let sum = |f: fn(&Segment) -> u64| of.iter().map(|s| f(s)).sum();
            Pool {
                pool: pool.into(),
                segments: of.len() as u64,
                total: sum(|s| s.total),
                allocated: sum(|s| s.allocated),
                inactive_split: sum(|s| s.inactive_split),
                free: of.iter().filter(|s| s.free == s.total).map(|s| s.total).sum(),
                largest_free_block: of.iter().map(|s| s.largest_free_block).max().unwrap_or(0),
            }
        })
        .collect();
    Some(SegmentMap {
        id: None,
        state: "done".into(),
        error: None,
        device: Some(p.ordinal),
        taken_unix_ms: None,
        pools,
        segments,
        truncated: false,
        segments_left_out: 0,
    })
}

/// `device`'s segments: a tenth (at most) in the small pool, 2 MiB each,
/// three quarters allocated; in the large pool, what is neither allocated
/// nor split as whole free segments of at most `free_segment` bytes, and
/// the allocated and split bytes spread unevenly over the rest.
fn demo_segments(device: &DeviceAllocator, free_segment: u64) -> Vec<Segment> {
    use RunClass::{Allocated as A, Free as F, InactiveSplit as S};
    const SMALL: u64 = 2 << 20;
    let reserved = device.reserved.unwrap_or(0);
    let allocated = device.allocated.unwrap_or(0).min(reserved);
    let split = device.inactive_split.unwrap_or(0).min(reserved - allocated);
    let free = reserved - allocated - split;
    let count = device.segments.unwrap_or(64).max(1);
    // Small blocks take at most half the allocated and split bytes.
    let small = (count / 10).min(allocated / (3 * SMALL / 2)).min(split / (SMALL / 2));
    let whole = free.div_ceil(free_segment.max(1)).min(count - small - 1);
    let used = count - small - whole;
    let mut segments: Vec<Segment> = Vec::new();
    let (large_allocated, large_split) = (allocated - small * 3 * SMALL / 4, split - small * SMALL / 4);
    let a = shares(large_allocated, used, Some(0));
    let s = shares(large_split, used, Some(3));
    for (i, (a, s)) in a.into_iter().zip(s).enumerate() {
        // Where the split blocks lie in the segment varies, as it does.
        let runs: Vec<(RunClass, u64)> = match i % 3 {
            0 => vec![(A, a / 3 * 2), (S, s), (A, a - a / 3 * 2)],
            1 => vec![(A, a), (S, s)],
            _ => vec![(S, s / 2), (A, a), (S, s - s / 2)],
        };
        let mut runs: Vec<(RunClass, u64)> = runs.into_iter().filter(|r| r.1 > 0).collect();
        // Too few segments to hold the free bytes apart: the last holds them.
        if whole == 0 && free > 0 && i as u64 == used - 1 {
            runs.push((F, free));
        }
        segments.push(demo_segment("large", &runs));
    }
    // The whole free segments among the others, evenly.
    for (k, f) in shares(free, whole, None).into_iter().enumerate() {
        let at = (k as u64 + 1) * used / (whole + 1) + k as u64;
        segments
            .insert(usize::try_from(at).unwrap_or(usize::MAX).min(segments.len()), demo_segment("large", &[(F, f)]));
    }
    for _ in 0..small {
        segments.push(demo_segment("small", &[(A, 3 * SMALL / 4), (S, SMALL / 4)]));
    }
    segments
}

/// `total` in `n` parts: uneven, by a cycle of weights from `phase`, or
/// even without one; the last takes what rounding leaves, so the parts
/// add up to `total`.
fn shares(total: u64, n: u64, phase: Option<usize>) -> Vec<u64> {
    const WEIGHTS: [u64; 8] = [5, 2, 8, 3, 1, 6, 4, 7];
    let n = usize::try_from(n).unwrap_or(0);
    let weight = |i: usize| u128::from(phase.map_or(1, |p| WEIGHTS[(i + p) % WEIGHTS.len()]));
    let sum: u128 = (0..n).map(weight).sum();
    let mut parts: Vec<u64> =
        (0..n.saturating_sub(1)).map(|i| u64::try_from(u128::from(total) * weight(i) / sum).unwrap_or(0)).collect();
    if n > 0 {
        parts.push(total - parts.iter().sum::<u64>());
    }
    parts
}

fn demo_segment(pool: &str, runs: &[(RunClass, u64)]) -> Segment {
    let of = |class: RunClass| runs.iter().filter(|r| r.0 == class).map(|r| r.1).sum::<u64>();
    let inactive = |c: RunClass| matches!(c, RunClass::InactiveSplit | RunClass::Free);
    Segment {
        pool: pool.into(),
        address: None,
        total: runs.iter().map(|r| r.1).sum(),
        allocated: of(RunClass::Allocated),
        inactive_split: of(RunClass::InactiveSplit),
        free: of(RunClass::InactiveSplit) + of(RunClass::Free),
        largest_free_block: runs.iter().filter(|r| inactive(r.0)).map(|r| r.1).max().unwrap_or(0),
        runs: runs.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zero_fragments_rank_one_leaks_the_server_is_async() {
        let at = |pid, t| report(PROCESSES.iter().find(|p| p.pid == pid).unwrap(), t).file.devices[0].clone();
        let (early, late) = (at(4_123_401, 1.0), at(4_123_401, 20.0));
        let frag = |d: &ProbeDevice| d.inactive_split.unwrap() as f64 / d.reserved.unwrap() as f64;
        assert!(frag(&early) < 0.2 && frag(&late) > 0.3);
        assert_eq!((at(4_123_401, 30.0).alloc_retries, at(4_123_401, 50.0).alloc_retries), (Some(0), Some(1)));
        // Same phase of the saw-tooth, a minute apart: 120 MiB higher.
        let rise = at(4_123_402, 70.0).allocated.unwrap() - at(4_123_402, 10.0).allocated.unwrap();
        assert_eq!(rise, 120 << 20);
        let server = at(4_123_510, 5.0);
        assert_eq!((server.inactive_split, server.segments, server.ooms), (None, None, None));
        assert!(server.reserved.is_some());
    }

    /// What the snapshot has of a demo process's device at `t`.
    fn device_at(pid: u32, t: f64) -> DeviceAllocator {
        let d = report(PROCESSES.iter().find(|p| p.pid == pid).unwrap(), t).file.devices[0].clone();
        DeviceAllocator {
            allocated: d.allocated,
            reserved: d.reserved,
            inactive_split: d.inactive_split,
            segments: d.segments,
            ..DeviceAllocator::default()
        }
    }

    /// The map says what the detail view says: as many segments, adding up
    /// to the reserved, allocated and split bytes, whenever it is asked;
    /// whether 1 GiB fits follows the largest free block it draws.
    #[test]
    fn the_demo_ranks_answer_with_a_segment_map_that_adds_up() {
        for t in [1.0, 20.0, 45.0, 300.0, 899.0, 3000.0, 20_000.0] {
            for pid in [4_123_401, 4_123_402] {
                let d = device_at(pid, t);
                let map = segment_map(pid, &d).unwrap();
                let sum = |f: fn(&Segment) -> u64| map.segments.iter().map(f).sum::<u64>();
                let at = format!("PID {pid} at {t}s");
                assert_eq!(Some(map.segments.len() as u64), d.segments, "{at}");
                assert_eq!(Some(sum(|s| s.total)), d.reserved, "{at}");
                assert_eq!(Some(sum(|s| s.allocated)), d.allocated, "{at}");
                assert_eq!(Some(sum(|s| s.inactive_split)), d.inactive_split, "{at}");
                assert_eq!(map.pools.iter().map(|p| p.segments).sum::<u64>(), 400, "{at}");
                assert_eq!(map.pools.iter().map(|p| p.total).sum::<u64>(), d.reserved.unwrap(), "{at}");
                assert!(map.segments.iter().all(|s| s.total > 0), "{at}");
                let fit = map.fit(1 << 30);
                let largest = map.segments.iter().filter(|s| s.pool == "large").map(|s| s.largest_free_block).max();
                assert_eq!(fit.largest_free_block, largest.unwrap(), "{at}");
                if pid == 4_123_401 {
                    assert!(!fit.fits, "rank 0 is too fragmented for 1 GiB: {at}");
                } else if t <= 3000.0 {
                    assert!(fit.fits, "rank 1 keeps whole segments free: {at}");
                }
            }
        }
        let any = device_at(4_123_401, 1.0);
        assert_eq!(segment_map(4_123_510, &any), None, "cudaMallocAsync keeps no segments");
        assert_eq!(segment_map(77, &any), None);
    }

    /// Figures from elsewhere (a recording, a test's) still add up, down
    /// to a device with one segment.
    #[test]
    fn any_figures_make_a_map_that_adds_up() {
        for (allocated, split, reserved, segments) in [
            (0, 0, 0, Some(0)),
            (1 << 20, 0, 5 << 20, Some(1)),
            (40 << 30, 1 << 30, 57 << 30, Some(120)),
            (7, 3, 100, None),
        ] {
            let d = DeviceAllocator {
                allocated: Some(allocated),
                reserved: Some(reserved),
                inactive_split: Some(split),
                segments,
                ..DeviceAllocator::default()
            };
            let map = segment_map(4_123_401, &d).unwrap();
            assert_eq!(map.segments.iter().map(|s| s.total).sum::<u64>(), reserved, "{d:?}");
            assert_eq!(map.segments.iter().map(|s| s.allocated).sum::<u64>(), allocated, "{d:?}");
        }
    }
}
