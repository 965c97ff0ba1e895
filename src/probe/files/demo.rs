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
            ((floor + 6.0 * GIB * ((t % 10.0) / 10.0)).min(reserved), reserved, 0.04 * reserved, 0)
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

/// A training rank's DataLoader (8 workers, 4 MiB batches); the server
/// has none.
fn input(p: &DemoProcess, t: f64) -> InputPipeline {
    const MIB: u64 = 1 << 20;
    let Some(rank) = p.rank else {
        return InputPipeline { hooked: false, window_s: Some(30.0), ..InputPipeline::default() };
    };
    let (share, rate) = if rank == 0 { (0.33 + 0.04 * (t / 7.0).sin(), 9.5) } else { (0.04, 14.2) };
    let workers: Vec<u32> = (1..=8).map(|i| p.pid + 10 * (rank + 1) + i).collect();
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
            num_workers: Some(8),
            pin_memory: Some(rank != 0),
            prefetch_factor: Some(2),
            persistent_workers: Some(false),
        },
        workers: Some(8),
        worker_pids: Some(workers),
        pin_memory_thread: Some(rank != 0),
        batches_ready: Some(u64::from(rank != 0) * 6),
        batch_bytes: Some(2 * MIB),
        shm_need: Some(2 * MIB * (2 * 8 + 2)),
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
            need: Some(2 * MIB * (2 * 8 + 2)),
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

/// The segment map (`m`) a demo rank's probe would answer with: made up
/// like the rest of the demo, so the map can be seen without a GPU. Rank 0
/// is fragmented: no cached block holds the 1 GiB asked about by default,
/// so the map answers that it needs a new `cudaMalloc`. The server runs
/// `cudaMallocAsync` and has none (`None`, as for a PID not the demo's).
pub fn segment_map(pid: u32) -> Option<SegmentMap> {
    use RunClass::{Allocated as A, Free as F, InactiveSplit as S, PendingFree as P};
    let p = PROCESSES.iter().find(|p| p.pid == pid && p.backend == "native")?;
    let mib = |n: u64| n << 20;
    let large: &[&[(RunClass, u64)]] = if p.rank == Some(0) {
        &[
            &[(A, mib(1536)), (S, mib(380)), (A, mib(132))],
            &[(A, mib(600)), (S, mib(212)), (A, mib(40)), (S, mib(172))],
            &[(S, mib(700)), (A, mib(324))],
            &[(A, mib(260)), (P, mib(64)), (S, mib(188))],
            &[(F, mib(20))],
        ]
    } else {
        &[&[(A, mib(2048))], &[(A, mib(1800)), (S, mib(248))], &[(A, mib(900)), (F, mib(124))], &[(F, mib(1024))]]
    };
    let small: &[&[(RunClass, u64)]] =
        &[&[(A, mib(1)), (S, 512 << 10), (A, 512 << 10)], &[(A, 1536 << 10), (F, 512 << 10)]];
    let segments: Vec<Segment> = [("large", large), ("small", small)]
        .into_iter()
        .flat_map(|(pool, segs)| segs.iter().map(move |runs| demo_segment(pool, runs)))
        .collect();
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

    #[test]
    fn the_demo_ranks_answer_with_a_segment_map_that_adds_up() {
        let map = segment_map(4_123_401).unwrap();
        let large = map.pools.iter().find(|p| p.pool == "large").unwrap();
        let segs: u64 = map.segments.iter().filter(|s| s.pool == "large").map(|s| s.total).sum();
        assert_eq!(large.total, segs);
        assert!(!map.fit(1 << 30).fits, "rank 0 is too fragmented for 1 GiB");
        assert!(segment_map(4_123_402).unwrap().fit(1 << 30).fits);
        assert_eq!(segment_map(4_123_510), None, "cudaMallocAsync keeps no segments");
        assert_eq!(segment_map(77), None);
    }
}
