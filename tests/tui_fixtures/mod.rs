//! Snapshots for the dashboard's tests, built from JSON (as the poller's
//! output would read) with fixed times, so that every frame is the same on
//! every run; and the helpers that render them.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use gpuscope::model::Snapshot;
use gpuscope::tui::term::Term;
use gpuscope::tui::{Clock, State, TuiOptions};
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::{Value, json};

/// 2026-11-21T19:30:00Z.
pub const T0: u64 = 1_795_289_400_000;
pub const GIB: u64 = 1 << 30;
const TOTAL: u64 = 85_520_809_984;
const MIB: u64 = 1 << 20;
const DRIVER_RESERVED: u64 = 546_308_096;

#[derive(Debug, Clone, Copy, Default)]
pub struct Spec {
    pub gpus: u32,
    /// Allocator figures from a probe in the training processes.
    pub probed: bool,
    pub alerts: bool,
    pub lost: Option<u32>,
    /// The inference server (GPU 2) has a probe, on `cudaMallocAsync`.
    pub async_server: bool,
    /// GPU 1's process has a probe whose device matches no GPU.
    pub unmatched: bool,
    /// GPU 1's process hit an OOM a minute ago: fragmentation, with its
    /// post-mortem.
    pub oom: bool,
    /// Processes in a Kubernetes pod, a Slurm job and a Docker container.
    pub workloads: bool,
    /// gpuscope in a container of its own: NVML's PIDs are the host's.
    pub container: bool,
    /// Activity counters (GPM): GPU 0 busy but idle (utilisation 80%, SM
    /// 6%), GPU 2 refused them (no permission), GPU 3 idle, the rest a
    /// healthy training step.
    pub activity: bool,
    /// NVML samples each GPU's processes: GPU 2 does not (`n/a`), GPU 3's
    /// notebook ran nothing in the period (`-`).
    pub shares: bool,
    /// The training processes' probes report their input pipeline and
    /// environment: GPU 0's rank waits for its data 41% of the time, its
    /// two workers busy at a full CPU each; GPU 1's `/dev/shm` (Docker's
    /// 64 MiB) is 97% full and a worker died of a bus error two minutes
    /// ago, on a wheel without code for its GPU; the rest keep up.
    pub input: bool,
}

impl Spec {
    pub fn gpus(n: u32) -> Self {
        Self { gpus: n, ..Self::default() }
    }

    pub fn probed(self) -> Self {
        Self { probed: true, ..self }
    }

    pub fn workloads(self) -> Self {
        Self { workloads: true, ..self }
    }

    pub fn activity(self) -> Self {
        Self { activity: true, ..self }
    }

    pub fn shares(self) -> Self {
        Self { shares: true, ..self }
    }

    pub fn input(self) -> Self {
        Self { input: true, ..self }
    }
}

pub fn options() -> TuiOptions {
    TuiOptions { mouse: true, ..TuiOptions::offscreen(Clock::manual(T0 + 400)) }
}

/// A state that has seen ten minutes of snapshots ending at `T0`.
pub fn state(spec: Spec) -> State {
    state_with(spec, options())
}

pub fn state_with(spec: Spec, options: TuiOptions) -> State {
    let mut state = State::new(&options);
    for step in (0..=120u64).rev() {
        state.on_snapshot(Arc::new(snapshot_at(spec, T0 - step * 5000, step)));
    }
    state
}

pub fn snapshot(spec: Spec) -> Snapshot {
    snapshot_at(spec, T0, 0)
}

/// `step` moves the figures the way a training job's move: memory creeps
/// up and is released, utilisation swings.
pub fn snapshot_at(spec: Spec, t_ms: u64, step: u64) -> Snapshot {
    let gpus: Vec<Value> = (0..spec.gpus).map(|i| gpu(spec, i, step)).collect();
    let processes: Vec<Value> =
        (0..spec.gpus).filter(|i| spec.lost != Some(*i)).map(|i| process(spec, i, step)).collect();
    let alerts = if spec.alerts { alerts() } else { Vec::new() };
    from_json(json!({
        "schema_version": 1,
        "time": humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(t_ms)).to_string(),
        "time_unix_ms": t_ms,
        "interval_ms": 1000,
        "collection_ms": 1.7,
        "simulated": false,
        "host": {
            "hostname": "node01", "cpu_percent": 12.5, "cpu_count": 64,
            "memory_total": 270_000_000_000u64, "memory_used": 48_000_000_000u64,
            "memory_available": 220_000_000_000u64, "swap_total": 8_000_000_000u64, "swap_used": 0
        },
        "driver": { "driver_version": "560.35.03", "cuda_driver_version": "12.6",
                    "nvml_version": "12.560.35.03", "library": "libnvidia-ml.so.1" },
        "gpus": gpus,
        "processes": processes,
        "alerts": alerts,
        "sources": sources_in(json!({ "ok": true, "error": null }), spec.container),
    }))
}

/// GPU 0 made a GB10 (DGX Spark): no memory of its own, so NVML answered
/// NOT_SUPPORTED and the collector gave it the machine's, 128 GiB of
/// which 58 GiB are in use, CPU and GPU together.
pub fn unified(mut snap: Snapshot) -> Snapshot {
    let (total, available) = (128 * GIB, 70 * GIB);
    (snap.host.memory_total, snap.host.memory_available, snap.host.memory_used) =
        (Some(total), Some(available), Some(total - available));
    let gpu = &mut snap.gpus[0];
    gpu.name = Some("NVIDIA GB10".into());
    gpu.unified_memory = Some(true);
    gpu.memory.total = Some(total);
    gpu.memory.free = Some(available);
    gpu.memory.used = Some(total - available);
    gpu.memory.driver_reserved = None;
    snap
}

/// NVML could not be loaded: no GPUs, the error in `sources.nvml`.
pub fn without_nvml() -> Snapshot {
    let mut snap = snapshot(Spec::gpus(0));
    snap.sources = serde_json::from_value(sources(json!({
        "ok": false,
        "error": "cannot load libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file"
    })))
    .unwrap();
    snap
}

fn sources(nvml: Value) -> Value {
    sources_in(nvml, false)
}

fn sources_in(nvml: Value, container: bool) -> Value {
    let ns = if container { "container" } else { "host" };
    json!({
        "nvml": nvml,
        "host": { "ok": true, "error": null, "pid_namespace": ns },
        "probes": { "ok": true, "error": null, "directory": "/run/user/1000/gpuscope/probes",
                    "files": 0, "skipped": 0, "last_skipped": null }
    })
}

/// One GPU and `n` processes on it, PIDs from 1000, each holding 1 MiB
/// more than the one before.
pub fn many_processes(n: u32) -> Snapshot {
    let mut snap = snapshot(Spec::gpus(1));
    let model = snap.processes[0].clone();
    snap.processes = (0..n)
        .map(|i| {
            let mut p = model.clone();
            p.pid = 1000 + i;
            p.gpus[0].used_memory = Some(u64::from(i + 1) << 20);
            p
        })
        .collect();
    snap
}

pub fn from_json(v: Value) -> Snapshot {
    serde_json::from_value(v).expect("fixture matches the model")
}

fn wave(step: u64, period: u64) -> f64 {
    let phase = (step % period) as f64 / period as f64;
    (phase * std::f64::consts::TAU).sin()
}

fn used(i: u32, step: u64) -> u64 {
    if i == 3 {
        return 0;
    }
    let base = [60, 62, 70, 0, 44, 52, 58, 66][i as usize % 8] as f64;
    ((base + 4.0 * wave(step, 40)) * GIB as f64) as u64
}

fn gpu(spec: Spec, i: u32, step: u64) -> Value {
    let uuid = format!("GPU-{i:08x}-8b4d-4e71-a0c9-5d2e7b81f403");
    if spec.lost == Some(i) {
        return json!({
            "index": i, "uuid": uuid, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": null,
            "state": "lost", "error": "GPU is lost",
            "memory": { "total": null, "used": null, "free": null, "driver_reserved": null },
            "utilization": { "gpu": null, "memory": null, "encoder": null, "decoder": null },
            "temperature_c": null, "fan_percent": null, "power_draw_w": null, "power_limit_w": null,
            "clocks": { "sm_mhz": null, "memory_mhz": null }, "pcie": { "tx_bytes_per_s": null, "rx_bytes_per_s": null },
            "performance_state": null, "throttle_reasons": null, "mig_mode": null, "allocator": null
        });
    }
    let used = used(i, step);
    let util = if i == 3 { 0 } else { (80.0 + 15.0 * wave(step + u64::from(i), 11)) as u32 };
    let allocator = (spec.probed && i != 2 && i != 3 && !(spec.unmatched && i == 1)).then(|| {
        let (alloc, reserved) = allocator_figures(used);
        json!({
            "probed_processes": 1, "allocated": alloc, "reserved": reserved, "cached": reserved - alloc,
            "inactive_split": 3 * GIB, "overhead": used - reserved, "unprobed": 0
        })
    });
    let mut gpu = json!({
        "index": i, "uuid": uuid, "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + i * 0x12), "state": "ok", "error": null,
        "memory": { "total": TOTAL, "used": used, "free": TOTAL - used - DRIVER_RESERVED, "driver_reserved": DRIVER_RESERVED },
        "utilization": { "gpu": util, "memory": util / 2, "encoder": 0, "decoder": 0 },
        "temperature_c": 60 + i * 3, "fan_percent": null,
        "power_draw_w": if i == 3 { 70.0 } else { 600.0 + f64::from(i) * 12.5 }, "power_limit_w": 700.0,
        // Three days near 600 W since the driver loaded: 43.2 kWh and up.
        "energy_mj": 155_520_000_000u64 + u64::from(i) * 1_000_000_000,
        "clocks": { "sm_mhz": 1980, "memory_mhz": 2619 }, "pcie": { "tx_bytes_per_s": 1024000, "rx_bytes_per_s": 2048000 },
        "performance_state": if i == 3 { "P8" } else { "P0" }, "throttle_reasons": [], "mig_mode": null,
        "allocator": allocator
    });
    if spec.activity {
        gpu["activity"] = activity(i, step);
        gpu["activity_unavailable"] = if i == 2 { json!("no_permission") } else { Value::Null };
    }
    if spec.shares {
        let pid = 4_123_401 + i;
        gpu["process_utilization"] = match i {
            2 => Value::Null,
            3 => json!([]),
            _ => json!([{ "pid": pid, "sm": 57 + i * 20, "memory": 20 + i, "encoder": 0, "decoder": 0 }]),
        };
    }
    gpu
}

/// What GPM reads on GPU `i`: its SMs mostly waiting (GPU 0), nothing
/// (GPU 2, refused), idle (GPU 3), else a training step on the tensor
/// cores (no integer tensor pipe figure).
fn activity(i: u32, step: u64) -> Value {
    let swing = 4.0 * wave(step, 11);
    let (sm, tensor, dram) = match i {
        0 => (6.0, 0.0, 3.0),
        2 => return Value::Null,
        3 => (0.0, 0.0, 0.0),
        _ => (62.0 + swing, 44.0 + swing, 38.0),
    };
    json!({
        "period_ms": 1000, "sm_active": sm, "sm_occupancy": sm / 2.0, "tensor_active": tensor,
        "tensor_hmma": tensor, "tensor_imma": null, "tensor_dfma": 0.0, "dram_active": dram,
        "fp64_active": 0.0, "fp32_active": sm / 5.0, "fp16_active": tensor / 4.0,
        "pcie_tx_bytes_per_s": 1_200_000_000u64, "pcie_rx_bytes_per_s": 300_000_000u64,
        "nvlink_tx_bytes_per_s": if i == 0 { 0 } else { 150_000_000_000u64 },
        "nvlink_rx_bytes_per_s": if i == 0 { 0 } else { 148_000_000_000u64 }
    })
}

/// (allocated, reserved) for a process that NVML says holds `used`.
fn allocator_figures(used: u64) -> (u64, u64) {
    let reserved = used.saturating_sub(3 * GIB);
    (reserved * 3 / 4, reserved)
}

fn process(spec: Spec, i: u32, step: u64) -> Value {
    let pid = 4_123_401 + i;
    let inference = i == 2;
    let used = if i == 3 { GIB / 2 } else { used(i, step) };
    let allocator = if spec.async_server && inference {
        Some(async_allocator(used))
    } else {
        (spec.probed && !inference && i != 3).then(|| training_allocator(spec, i, used))
    };
    let (user, command, name) = match i {
        2 => ("svc-infer", "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 1".to_string(), "vllm"),
        3 => ("carol", "python3 notebook_kernel.py".to_string(), "python3"),
        _ => ("alice", format!("python3 train.py --epochs 90 --batch-size 64 --rank {i}"), "python3"),
    };
    let workload = if spec.workloads { workload(i) } else { Value::Null };
    let mut p = json!({
        "pid": pid, "gpus": [{ "index": i, "type": "compute", "used_memory": used }],
        "gpu_memory_total": used, "name": name, "user": user, "command": command,
        "start_time": "2026-11-21T16:18:00.000Z", "start_time_unix_ms": T0 - 11_520_000,
        "parent_pid": 4_123_300, "cpu_percent": 101.3, "host_memory": 13_200_000_000u64,
        "allocator": allocator, "workload": workload, "other_namespace": false
    });
    if spec.input && spec.probed && !inference && i != 3 {
        p["input"] = input_pipeline(i, step);
        p["environment"] = environment(i);
        if i == 0 {
            p["host_input"] = busy_workers(pid);
        }
    }
    if spec.container {
        // Seen from a container: NVML's name, nothing the host would know.
        for field in ["user", "command", "start_time", "start_time_unix_ms", "parent_pid", "cpu_percent", "host_memory"]
        {
            p[field] = Value::Null;
        }
        p["other_namespace"] = true.into();
    }
    p
}

/// A training rank's DataLoader as its probe reports it (see
/// `Spec::input`).
fn input_pipeline(i: u32, step: u64) -> Value {
    let (share, rate, workers, pin, batch) = match i {
        0 => (0.41, 6.2, 2u32, false, 24 * MIB),
        1 => (0.12, 11.8, 8, true, 3 * MIB),
        _ => (0.03 + f64::from(i % 3) / 100.0, 14.0, 8, true, 3 * MIB),
    };
    let need = batch * u64::from(2 * workers + 2);
    let (total, used) = match i {
        0 => (32 * GIB, 310 * MIB),
        1 => (64 * MIB, 62 * MIB),
        _ => (32 * GIB, 90 * MIB),
    };
    let loader = json!({
        "id": 1, "live": true, "consumer_thread": "MainThread", "batches": 40_000 + step * 50, "epochs": 3,
        "window_s": 30.0, "batches_per_s": rate, "wait_share": share, "wait_per_batch_s": share / rate,
        "waiting_s": 0.0, "first_batch_wait_s": 6.4, "iterator": "_MultiProcessingDataLoaderIter",
        "dataset": "ImageFolder", "num_workers": workers, "pin_memory": pin, "prefetch_factor": 2,
        "persistent_workers": false, "workers": workers,
        "worker_pids": (1..=workers).map(|w| 4_124_000 + i * 100 + w).collect::<Vec<_>>(),
        "pin_memory_thread": pin, "batches_ready": if i == 0 { 0 } else { 9 }, "batch_bytes": batch,
        "shm_need": need
    });
    let failures = if i == 1 {
        json!([{
            "time_unix_ms": T0 - 120_000, "kind": "bus_error", "exception": "RuntimeError",
            "message": "DataLoader worker (pid 4124105) is killed by signal: Bus error. It is possible that \
                        dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
            "loader": 1, "worker_pid": 4_124_105, "shm_total": 64 * MIB, "shm_free": 0,
            "sharing_strategy": "file_descriptor", "batch_bytes": batch,
            "num_workers": workers, "pin_memory": pin, "prefetch_factor": 2, "persistent_workers": false
        }])
    } else {
        json!([])
    };
    json!({
        "hooked": true, "window_s": 30.0, "loaders": [loader], "loaders_left_out": 0,
        "shm": { "path": "/dev/shm", "total": total, "free": total - used, "used": used, "need": need,
                 "sharing_strategy": "file_descriptor", "open_files_limit": 1_048_576,
                 "open_files_limit_hard": 1_048_576 },
        "failures": failures
    })
}

/// PyTorch 2.6 with CUDA 12.4 on an H100; GPU 1's rank runs a wheel
/// built before Hopper, without TF32.
fn environment(i: u32) -> Value {
    let old = i == 1;
    json!({
        "torch_version": if old { "1.13.1" } else { "2.6.0" }, "cuda_version": if old { "11.6" } else { "12.4" },
        "hip_version": null, "cudnn_version": if old { "8.3.2" } else { "9.1.0" },
        "cudnn_compiled_version": if old { "8.3.2" } else { "9.1.0" },
        "arch_flags": if old { "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86" } else { "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" },
        "fp32_precision_matmul": null, "fp32_precision_conv": null,
        "matmul_tf32": !old, "cudnn_tf32": true, "float32_matmul_precision": if old { "highest" } else { "high" },
        "cudnn_benchmark": !old, "cudnn_deterministic": false,
        "devices": [{ "ordinal": i, "capability": "9.0", "arch_supported": !old }],
        "autocast": { "hooked": true, "entries": if old { 0 } else { 52_000 }, "last_s_ago": if old { json!(null) } else { json!(0.1) },
                      "device_type": if old { json!(null) } else { json!("cuda") },
                      "dtype": if old { json!(null) } else { json!("torch.bfloat16") } },
        "grad_scaler": { "count": if old { 1 } else { 0 }, "enabled": old }
    })
}

/// Two DataLoader workers, each busy at a full CPU, as the host sees
/// them.
fn busy_workers(pid: u32) -> Value {
    let worker = |n: u32, cpu: f64| {
        json!({ "pid": 4_124_000 + n, "ns_pid": null, "found_by": "name_and_probe", "alive": true,
                "state": "running", "cpu_percent": cpu, "blkio_wait_percent": 0.0, "placement": null,
                "exit_signal": null })
    };
    json!({
        "workers": [worker(1, 99.2), worker(2, 97.6)], "workers_omitted": 0,
        "pin_threads": [], "placement": null,
        "cgroup_cpu": { "path": format!("/system.slice/train-{pid}.scope"), "version": 2, "quota_cpus": null,
                        "periods": null, "throttled_periods": null, "throttled_usec": null,
                        "throttled_periods_percent": null, "throttled_seconds_per_s": null }
    })
}

/// GPU 0 and 4: one Kubernetes pod; 1: a Slurm step; 2: a Docker
/// container; 3: none.
fn workload(i: u32) -> Value {
    let none = json!({
        "kind": "containerd", "container_id": null, "pod_uid": null, "qos": null,
        "slurm_job": null, "slurm_step": null, "slurm_uid": null
    });
    let mut w = none.clone();
    match i % 4 {
        0 => {
            w["container_id"] = format!("{:x}{}", 0xc0 + i, "3e9a1f0b2d4c6e8a".repeat(4)).get(..64).into();
            w["pod_uid"] = "7a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into();
            w["qos"] = "guaranteed".into();
        }
        1 => {
            w["kind"] = "slurm".into();
            w["slurm_job"] = (48_213 + i).into();
            w["slurm_step"] = "0".into();
            w["slurm_uid"] = 1001.into();
        }
        2 => {
            w["kind"] = "docker".into();
            w["container_id"] = "9f2e4d6c8b0a1e3f".repeat(4).into();
        }
        _ => return Value::Null,
    }
    w
}

fn training_allocator(spec: Spec, i: u32, used: u64) -> Value {
    let (alloc, reserved) = allocator_figures(used);
    // Trapped space is part of the cache: most of it on GPU 1.
    let split = if i == 1 { (reserved - alloc) / 10 * 9 } else { GIB };
    let unmatched = spec.unmatched && i == 1;
    json!({
        "framework": "torch", "framework_version": "2.6.0", "backend": "native",
        "alloc_conf": "expandable_segments:False", "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF",
        "alloc_conf_source": "environment",
        "alloc_conf_env": { "pytorch_alloc_conf": null, "pytorch_cuda_alloc_conf": "expandable_segments:False" },
        "expandable_segments": false, "cuda_visible_devices": if unmatched { json!("0,1") } else { json!(null) },
        "cuda_device_order": null, "oom_events": 0,
        "rank": i, "local_rank": i, "world_size": spec.gpus,
        "pinned_host": 2 * GIB, "pinned_host_peak": 3 * GIB, "state": "fresh", "age_ms": 400,
        "devices": [{
            "gpu": if unmatched { json!(null) } else { json!(i) }, "ordinal": i,
            "gpu_match": if unmatched { json!(null) } else { json!("uuid") },
            "unmatched_reason": if unmatched {
                json!("CUDA's fastest-first order is ambiguous on mixed GPUs; set CUDA_DEVICE_ORDER=PCI_BUS_ID")
            } else {
                json!(null)
            },
            "allocated": alloc, "allocated_peak": alloc + 2 * GIB, "reserved": reserved,
            "reserved_peak": reserved + GIB, "active": alloc, "inactive_split": split,
            "requested": alloc, "cached": reserved - alloc, "overhead": if unmatched { json!(null) } else { json!(used - reserved) },
            "private_pools": null, "releasable": reserved - alloc - split, "segments": 120,
            "alloc_retries": if i == 1 { 3 } else { 0 }, "ooms": 0,
            "fragmentation": if i == 1 { 0.36 } else { 0.02 },
            "largest_free_block": if spec.oom && i == 1 { json!(912 * MIB) } else { json!(null) }, "bytes_limit": null
        }],
        "last_oom": if spec.oom && i == 1 { json!([post_mortem()]) } else { json!([]) }
    })
}

/// An allocation of 2 GiB failed with 6.4 GiB free in the allocator, in
/// pieces no larger than 912 MiB.
fn post_mortem() -> Value {
    let segment = |total: u64, free: u64, largest: u64| {
        json!({"pool": "large", "total": total, "allocated": total - free, "free": free, "split": true,
               "largest_free_block": largest})
    };
    json!({
        "source": "observer", "time_unix_ms": T0 - 60_000, "device": 1, "gpu": 1,
        "requested": 2 * GIB, "device_limit": 80 * GIB, "device_free": 300 * MIB,
        "allocated": 62 * GIB, "reserved": 70 * GIB, "inactive_split": 6 * GIB,
        "pools": [
            {"pool": "large", "segments": 96, "total": 69 * GIB, "allocated": 62 * GIB + 700 * MIB,
             "free": 6 * GIB + 300 * MIB, "largest_free_block": 912 * MIB, "free_below_request": 6 * GIB + 300 * MIB},
            {"pool": "small", "segments": 120, "total": 240 * MIB, "allocated": 140 * MIB, "free": 100 * MIB,
             "largest_free_block": 2 * MIB, "free_below_request": 100 * MIB}
        ],
        "segments": [segment(2 * GIB, 912 * MIB, 912 * MIB), segment(GIB, 600 * MIB, 400 * MIB),
                     segment(GIB, 300 * MIB, 200 * MIB)], "truncated": false,
        "verdict": "needed 2.0 GiB on GPU 1; 6.4 GiB free in the allocator but the largest free block is 912 MiB (fragmentation)"
    })
}

/// vLLM on `cudaMallocAsync` (PyTorch 2.9): only allocated, active and
/// reserved are kept; the settings were changed at run time.
fn async_allocator(used: u64) -> Value {
    let reserved = used - 2 * GIB;
    let alloc = reserved - 20 * GIB;
    json!({
        "framework": "torch", "framework_version": "2.9.0", "backend": "cudaMallocAsync",
        "alloc_conf": "backend:cudaMallocAsync", "alloc_conf_var": "PYTORCH_ALLOC_CONF", "alloc_conf_source": "runtime",
        "alloc_conf_env": { "pytorch_alloc_conf": null, "pytorch_cuda_alloc_conf": "max_split_size_mb:512" },
        "expandable_segments": false, "cuda_visible_devices": "2", "cuda_device_order": null, "oom_events": 1,
        "rank": null, "local_rank": null, "world_size": null,
        "pinned_host": null, "pinned_host_peak": null, "state": "fresh", "age_ms": 400,
        "devices": [{
            "gpu": 2, "ordinal": 0, "gpu_match": "cuda_visible_devices", "unmatched_reason": null,
            "allocated": alloc, "allocated_peak": alloc + GIB, "reserved": reserved, "reserved_peak": reserved,
            "active": alloc, "inactive_split": null, "requested": null, "cached": reserved - alloc,
            "overhead": used - reserved, "private_pools": GIB, "releasable": reserved - alloc - GIB,
            "segments": null, "alloc_retries": null, "ooms": null, "fragmentation": null,
            "largest_free_block": null, "bytes_limit": null
        }]
    })
}

fn alerts() -> Vec<Value> {
    vec![
        json!({
            "kind": "fragmentation", "severity": "warning", "gpu": 1, "pid": 4_123_402,
            "since": "2026-11-21T19:27:00.000Z", "since_unix_ms": T0 - 180_000, "value": 0.36, "threshold": 0.3,
            "message": "fragmentation 36% (20.0 GiB trapped in split blocks)",
            "hint": "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        }),
        json!({
            "kind": "alloc_retry", "severity": "critical", "gpu": 1, "pid": 4_123_402,
            "since": "2026-11-21T19:29:30.000Z", "since_unix_ms": T0 - 30_000, "value": 3.0, "threshold": 0.0,
            "message": "3 allocation retries: cudaMalloc failed and the cache was flushed",
            "hint": "an OOM is close: lower the batch size"
        }),
    ]
}

/// The frame as text, one line per row, trailing blanks trimmed.
pub fn text(terminal: &Term<TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let w = buf.area.width as usize;
    let mut out = String::new();
    for row in buf.content.chunks(w.max(1)).take(buf.area.height as usize) {
        let line: String = row.iter().map(|c| c.symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn render(state: &mut State, w: u16, h: u16) -> Term<TestBackend> {
    let mut terminal = Term::new(TestBackend::new(w, h)).unwrap();
    let clock = Clock::manual(T0 + 400);
    terminal
        .draw(|f| {
            // As the run loop keeps them: a page, and what was drawn where.
            (state.page, state.hits) = gpuscope::tui::render::draw_with_hits(f, state, &clock);
        })
        .unwrap();
    terminal
}

pub fn render_text(state: &mut State, w: u16, h: u16) -> String {
    text(&render(state, w, h))
}

pub fn uses_color(terminal: &Term<TestBackend>) -> bool {
    terminal.backend().buffer().content.iter().any(|c| c.fg != Color::Reset || c.bg != Color::Reset)
}

/// A `TestBackend` the test can read while the loop draws on it, counting
/// the frames (one flush each).
#[derive(Clone)]
pub struct SharedBackend(
    pub std::sync::Arc<std::sync::Mutex<TestBackend>>,
    pub std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Whole-screen clears: a full redraw follows each.
    pub std::sync::Arc<std::sync::atomic::AtomicUsize>,
);

impl SharedBackend {
    pub fn new(w: u16, h: u16) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(TestBackend::new(w, h))), Default::default(), Default::default())
    }

    pub fn frames(&self) -> usize {
        self.1.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn screen(&self) -> String {
        let backend = self.0.lock().unwrap();
        let buf = backend.buffer();
        let w = buf.area.width as usize;
        let mut out = String::new();
        for row in buf.content.chunks(w.max(1)) {
            let line: String = row.iter().map(|c| c.symbol()).collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

impl ratatui::backend::Backend for SharedBackend {
    type Error = std::convert::Infallible;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.0.lock().unwrap().draw(content)
    }

    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.0.lock().unwrap().hide_cursor()
    }

    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.0.lock().unwrap().show_cursor()
    }

    fn get_cursor_position(&mut self) -> Result<ratatui::layout::Position, Self::Error> {
        self.0.lock().unwrap().get_cursor_position()
    }

    fn set_cursor_position<P: Into<ratatui::layout::Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.0.lock().unwrap().set_cursor_position(position)
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        self.0.lock().unwrap().clear()
    }

    fn clear_region(&mut self, clear_type: ratatui::backend::ClearType) -> Result<(), Self::Error> {
        if clear_type == ratatui::backend::ClearType::All {
            self.2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.0.lock().unwrap().clear_region(clear_type)
    }

    fn size(&self) -> Result<ratatui::layout::Size, Self::Error> {
        self.0.lock().unwrap().size()
    }

    fn window_size(&mut self) -> Result<ratatui::backend::WindowSize, Self::Error> {
        self.0.lock().unwrap().window_size()
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.lock().unwrap().flush()
    }
}

/// The shipped 7-way scenario (crates/nvml-sim/scenarios/mig-h100-7way.toml)
/// as gpuscope reads it: one H100 in MIG mode, seven 1g.10gb devices, four
/// of them running a process.
pub fn mig_7way() -> Snapshot {
    const MIB: u64 = 1 << 20;
    let mut snap = snapshot(Spec::gpus(1));
    let used = [8120, 6410, 9210, 0, 2048, 0, 0];
    let gpu = &mut snap.gpus[0];
    gpu.utilization.gpu = None;
    gpu.utilization.memory = None;
    gpu.mig_mode = Some(gpuscope::model::MigMode { current: true, pending: true });
    gpu.memory.used = Some(used.iter().sum::<u64>() * MIB);
    gpu.memory.free = Some(TOTAL - DRIVER_RESERVED - used.iter().sum::<u64>() * MIB);
    gpu.mig_devices = (0..7)
        .map(|i| {
            let total = 9856 * MIB;
            serde_json::from_value(json!({
                "index": i, "uuid": format!("MIG-{i:08x}-6b3e-5d48-a7c1-0e2f4b6d8a01"),
                "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "profile": "1g.10gb",
                "gpu_instance_id": i + 7, "compute_instance_id": 0,
                "memory": { "total": total, "used": used[i as usize] * MIB, "free": total - used[i as usize] * MIB }
            }))
            .expect("a MIG device")
        })
        .collect();
    let on = [(0u32, 4_200_101u32, "python3 train.py --lr 3e-4"), (1, 4_200_102, "python3 train.py --lr 1e-4")];
    let more = [(2u32, 4_200_103u32, "vllm serve Qwen/Qwen2.5-1.5B"), (4, 4_200_105, "jupyter-kernel")];
    snap.processes = on
        .iter()
        .chain(&more)
        .map(|&(m, pid, command)| {
            let bytes = used[m as usize] * MIB;
            serde_json::from_value(json!({
                "pid": pid,
                "gpus": [{ "index": 0, "type": "compute", "used_memory": bytes, "mig_device": m,
                           "mig_uuid": format!("MIG-{m:08x}-6b3e-5d48-a7c1-0e2f4b6d8a01") }],
                "gpu_memory_total": bytes, "name": command.split(' ').next(), "user": "alice", "command": command,
                "start_time": "2026-11-21T16:18:00.000Z", "start_time_unix_ms": T0 - 11_520_000,
                "parent_pid": 4_123_300, "cpu_percent": 99.0, "host_memory": 6_200_000_000u64, "allocator": null
            }))
            .expect("a process")
        })
        .collect();
    snap
}

/// What a replay's dashboard is handed, paused at the end of a one-entry
/// recording; the player's ends of the channels, to keep while it runs.
pub fn replay_handle() -> (
    gpuscope::recording::player::Handle,
    (
        tokio::sync::mpsc::UnboundedReceiver<gpuscope::recording::player::Command>,
        tokio::sync::watch::Sender<gpuscope::recording::player::Status>,
    ),
) {
    use gpuscope::recording::player::{Handle, Status};
    let (commands, commands_rx) = tokio::sync::mpsc::unbounded_channel();
    let status = Status {
        file: "r.ndjson".into(),
        position: 0,
        len: 1,
        speed: 1.0,
        paused: true,
        at_end: true,
        alerts_indexed: Some(0),
        note: None,
    };
    let (status_tx, status) = tokio::sync::watch::channel(status);
    let history = gpuscope::history::Store::shared(Duration::from_secs(600));
    (Handle { commands, status, history }, (commands_rx, status_tx))
}

/// `snap` with a value for every reading some output leaves unasked
/// (`gpuscope::sources::nvml::Wanted`) on each GPU that answers: a test
/// takes them away again with `Wanted::blank` and finds the output the same.
pub fn with_every_reading(snap: Snapshot) -> Snapshot {
    let mut v = serde_json::to_value(&snap).expect("a snapshot serialises");
    for gpu in v["gpus"].as_array_mut().into_iter().flatten() {
        if gpu["state"] != "ok" {
            continue;
        }
        let pid = 4_123_401 + gpu["index"].as_u64().unwrap_or(0);
        gpu["utilization"]["encoder"] = json!(7);
        gpu["utilization"]["decoder"] = json!(3);
        let patch = json!({
            "fan_percent": 41,
            "clocks": { "sm_mhz": 1755, "memory_mhz": 2619, "graphics_mhz": 1755, "video_mhz": 1545 },
            "pcie": { "tx_bytes_per_s": 5_000_000_000u64, "rx_bytes_per_s": 9_000_000_000u64 },
            "throttle_reasons": ["sw_power_cap"],
            "max_clocks": { "sm_mhz": 1980, "memory_mhz": 2619, "graphics_mhz": 1980, "video_mhz": 1755 },
            "ecc": { "mode_current": true, "mode_pending": true, "corrected_volatile": 3, "uncorrected_volatile": 1,
                     "corrected_aggregate": 12, "uncorrected_aggregate": 1, "retired_pages_pending": true },
            "remapped_rows": { "correctable": 2, "uncorrectable": 1, "pending": true, "failure": false },
            "bar1_memory": { "total": 137_438_953_472u64, "used": 1_073_741_824u64, "free": 136_365_211_648u64 },
            "serial": "1654123456789", "persistence_mode": true, "compute_mode": "exclusive_process",
            "power_management_limit_w": 650.0,
            "accounting": { "enabled": true, "buffer_size": 4000, "processes": [] },
            "process_utilization": [{ "pid": pid, "sm": 57, "memory": 20, "encoder": 0, "decoder": 0 }],
        });
        for (key, value) in patch.as_object().into_iter().flatten() {
            gpu[key] = value.clone();
        }
    }
    from_json(v)
}
