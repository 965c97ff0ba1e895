use std::collections::BTreeSet;

use super::*;
use crate::model::{
    Activity, ActivityUnavailable, Alert, AlertKind, DataLoaderStats, DeviceAllocator, Driver, FrameworkEnvironment,
    Gpu, GpuAllocator, GpuState, Host, InputPipeline, LoaderFailure, LoaderFailureKind, LoaderSettings, NvmlStatus,
    ProbeState, Process, ProcessAllocator, ProcessGpu, ProcessType, Severity, SharedMemory, SourceStatus, Sources,
    Timestamp,
};

const GIB: u64 = 1 << 30;

fn device(gpu: Option<u32>) -> DeviceAllocator {
    DeviceAllocator {
        gpu,
        allocated: Some(4 * GIB),
        allocated_peak: Some(6 * GIB),
        reserved: Some(10 * GIB),
        reserved_peak: Some(12 * GIB),
        active: None,
        inactive_split: Some(3 * GIB),
        requested: None,
        cached: Some(6 * GIB),
        overhead: Some(GIB),
        segments: Some(40),
        alloc_retries: Some(2),
        ooms: Some(0),
        fragmentation: Some(0.3),
        largest_free_block: Some(400 << 20),
        ..DeviceAllocator::default()
    }
}

fn process(pid: u32, command: Option<&str>, allocator: Option<ProcessAllocator>) -> Process {
    Process {
        pid,
        gpus: vec![ProcessGpu {
            index: 0,
            kind: ProcessType::Compute,
            used_memory: Some(11 * GIB),
            mig_device: None,
            mig_uuid: None,
        }],
        gpu_memory_total: Some(11 * GIB),
        name: Some("python3".into()),
        user: command.map(|_| "alice".into()),
        command: command.map(Into::into),
        start_time: None,
        parent_pid: None,
        parent_name: None,
        cpu_percent: command.map(|_| 150.0),
        host_memory: command.map(|_| 2 * GIB),
        allocator: allocator.map(Box::new),
        input: None,
        environment: None,
        workload: None,
        other_namespace: false,
        host_input: None,
    }
}

fn allocator() -> ProcessAllocator {
    ProcessAllocator {
        framework: "torch".into(),
        framework_version: None,
        backend: Some("native".into()),
        alloc_conf: None,
        alloc_conf_var: None,
        alloc_conf_source: None,
        alloc_conf_env: None,
        expandable_segments: Some(false),
        cuda_visible_devices: None,
        cuda_device_order: None,
        oom_events: None,
        last_oom: Vec::new(),
        job: Some("10.1.2.3:29500".into()),
        rank: Some(3),
        local_rank: None,
        world_size: Some(8),
        pinned_host: Some(2 * GIB),
        pinned_host_peak: None,
        state: ProbeState::Fresh,
        age_ms: 10,
        // The unmatched device is left out: it has no `gpu` to tell it apart.
        devices: vec![device(Some(0)), device(None)],
    }
}

/// A probed process on MIG device 2 of GPU 0.
fn on_mig() -> Process {
    let mut p = process(5150, Some("python3 serve.py"), None);
    p.gpus[0].mig_device = Some(2);
    p.gpus[0].mig_uuid = Some("MIG-bb".into());
    let mut d = device(Some(0));
    (d.mig_device, d.mig_uuid) = (Some(2), Some("MIG-bb".into()));
    p.allocator =
        Some(Box::new(ProcessAllocator { devices: vec![d], job: None, rank: None, world_size: None, ..allocator() }));
    p
}

/// A job that waits for its data: a training loader at 41% wait whose
/// workers died once of a full `/dev/shm`, beside a validation loader
/// without workers whose figures are not in yet.
pub(crate) fn input() -> InputPipeline {
    let settings = LoaderSettings {
        num_workers: Some(4),
        pin_memory: Some(false),
        prefetch_factor: Some(2),
        persistent_workers: None,
    };
    let train = DataLoaderStats {
        id: 1,
        live: true,
        batches: 500,
        batches_per_s: Some(16.5),
        wait_share: Some(0.41),
        wait_per_batch_s: Some(0.025),
        settings: settings.clone(),
        batches_ready: Some(0),
        batch_bytes: Some(4 << 20),
        shm_need: Some(40 << 20),
        ..DataLoaderStats::default()
    };
    let val = DataLoaderStats {
        id: 2,
        batches: 3,
        settings: LoaderSettings { num_workers: Some(0), ..LoaderSettings::default() },
        ..DataLoaderStats::default()
    };
    let failure = |kind| LoaderFailure {
        time_unix_ms: 1_700_000_000_000,
        kind,
        exception: Some("RuntimeError".into()),
        message: None,
        loader: Some(1),
        worker_pid: Some(103),
        shm_total: Some(64 << 20),
        shm_free: Some(0),
        sharing_strategy: None,
        batch_bytes: None,
        settings: settings.clone(),
    };
    InputPipeline {
        hooked: true,
        window_s: Some(30.0),
        loaders: vec![train, val],
        loaders_left_out: 0,
        shm: Some(SharedMemory {
            total: Some(64 << 20),
            free: Some(8 << 20),
            used: Some(56 << 20),
            need: Some(40 << 20),
            ..SharedMemory::default()
        }),
        failures: vec![
            failure(LoaderFailureKind::BusError),
            failure(LoaderFailureKind::WorkerExited),
            failure(LoaderFailureKind::BusError),
        ],
    }
}

pub(crate) fn environment() -> FrameworkEnvironment {
    FrameworkEnvironment {
        torch_version: Some("2.5.1+cu124".into()),
        cuda_version: Some("12.4".into()),
        cudnn_version: Some("90100".into()),
        ..FrameworkEnvironment::default()
    }
}

/// Every activity counter, as an H100 training in bf16 might show them.
fn activity() -> Activity {
    Activity {
        period_ms: 1000,
        sm_active: Some(62.5),
        sm_occupancy: Some(31.0),
        tensor_active: Some(45.0),
        tensor_hmma: Some(44.0),
        tensor_imma: Some(0.0),
        tensor_dfma: Some(1.0),
        dram_active: Some(55.0),
        fp64_active: Some(0.0),
        fp32_active: Some(12.0),
        fp16_active: Some(3.0),
        pcie_tx_bytes_per_s: Some(3_000_000),
        pcie_rx_bytes_per_s: Some(24_000_000_000),
        nvlink_tx_bytes_per_s: Some(150_000_000_000),
        nvlink_rx_bytes_per_s: Some(149_000_000_000),
    }
}

/// An A100: no activity counters.
fn without_gpm() -> Gpu {
    let mut g = Gpu::blank(2, GpuState::Ok);
    (g.uuid, g.name) = (Some("GPU-cc".into()), Some("NVIDIA A100-SXM4-80GB".into()));
    g.utilization.gpu = Some(90);
    g.activity_unavailable = Some(ActivityUnavailable::NotSupported);
    g
}

/// Three GPUs (one with every reading, activity counters included, and two
/// MIG devices, one lost with none, one without activity counters), a
/// probed process, a process the host cannot see, one on a MIG device, and
/// two alerts.
pub(crate) fn snapshot() -> Snapshot {
    let mut ok = Gpu::blank(0, GpuState::Ok);
    ok.uuid = Some("GPU-aa".into());
    ok.name = Some("NVIDIA H100 80GB HBM3".into());
    ok.pci_bus_id = Some("00000000:18:00.0".into());
    ok.memory = crate::model::GpuMemory {
        total: Some(80 * GIB),
        used: Some(20 * GIB),
        free: Some(60 * GIB),
        driver_reserved: Some(GIB / 2),
    };
    ok.utilization = crate::model::Utilization { gpu: Some(37), memory: Some(5), encoder: Some(0), decoder: Some(0) };
    (ok.temperature_c, ok.fan_percent, ok.power_draw_w, ok.power_limit_w) =
        (Some(70), Some(40), Some(612.5), Some(700.0));
    ok.energy_mj = Some(3_600_000_250);
    ok.clocks = crate::model::Clocks { sm_mhz: Some(1980), memory_mhz: Some(2619), ..Default::default() };
    ok.pcie = crate::model::Pcie { tx_bytes_per_s: Some(1024), rx_bytes_per_s: Some(2048) };
    ok.mig_devices = vec![crate::model::MigDevice {
        index: 2,
        uuid: Some("MIG-bb".into()),
        name: Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb".into()),
        profile: Some("1g.10gb".into()),
        gpu_instance_id: Some(9),
        compute_instance_id: Some(0),
        memory: crate::model::MigMemory { total: Some(10 * GIB), used: Some(3 * GIB), free: Some(7 * GIB) },
        activity: Some(Activity { sm_active: Some(40.0), tensor_active: Some(12.5), ..activity() }),
        activity_unavailable: None,
    }];
    ok.mig_devices.push(crate::model::MigDevice {
        index: 3,
        uuid: Some("MIG-dd".into()),
        gpu_instance_id: Some(10),
        activity: None,
        activity_unavailable: Some(ActivityUnavailable::FirstSample),
        ..ok.mig_devices[0].clone()
    });
    ok.activity = Some(activity());
    (ok.persistence_mode, ok.power_management_limit_w) = (Some(true), Some(700.0));
    ok.unified_memory = Some(false);
    ok.max_clocks.sm_mhz = Some(1980);
    ok.ecc = crate::model::Ecc {
        mode_current: Some(true),
        mode_pending: Some(true),
        corrected_volatile: Some(3),
        uncorrected_volatile: Some(0),
        corrected_aggregate: Some(12),
        uncorrected_aggregate: Some(1),
        retired_pages_pending: Some(false),
    };
    ok.process_utilization =
        Some(vec![crate::model::ProcessUtilization { pid: 4242, sm: 57, memory: 21, encoder: 0, decoder: 3 }]);
    ok.bar1_memory = crate::model::Bar1Memory { total: Some(128 * GIB), used: Some(GIB), free: Some(127 * GIB) };
    ok.nvlink = Some(crate::model::NvLink {
        links: vec![
            crate::model::NvLinkState { link: 0, active: true },
            crate::model::NvLinkState { link: 1, active: false },
        ],
        tx_bytes_per_s: Some(5 * GIB),
        rx_bytes_per_s: Some(4 * GIB),
    });
    ok.accounting = Some(crate::model::Accounting { enabled: true, buffer_size: Some(4000), processes: Vec::new() });
    ok.remapped_rows = crate::model::RemappedRows {
        correctable: Some(2),
        uncorrectable: Some(0),
        pending: Some(true),
        failure: Some(false),
    };
    ok.xid_counts =
        vec![crate::model::XidCount { xid: Some(79), count: 1 }, crate::model::XidCount { xid: None, count: 2 }];
    ok.recovery_action = Some(crate::model::RecoveryAction::GpuReset);
    ok.nvlink_errors = Some(crate::model::NvLinkErrors { replay: Some(5), crc_flit: Some(1), ..Default::default() });
    ok.health = Some(crate::model::Health::from_reasons(
        vec![crate::model::HealthReason {
            code: crate::model::HealthCode::RowRemapPending,
            severity: Severity::Warning,
            message: "a row remapping waits".into(),
        }],
        Vec::new(),
    ));
    ok.allocator = Some(GpuAllocator {
        probed_processes: 1,
        allocated: Some(4 * GIB),
        reserved: Some(10 * GIB),
        cached: Some(6 * GIB),
        inactive_split: Some(3 * GIB),
        overhead: Some(GIB),
        unprobed: Some(9 * GIB),
    });
    let allocator = allocator();
    let alert = |kind, severity, gpu, pid| Alert {
        kind,
        severity,
        gpu,
        pid,
        since: Timestamp::from_unix_secs(1_700_000_000),
        value: None,
        threshold: None,
        message: String::new(),
        hint: String::new(),
    };
    Snapshot {
        schema_version: crate::model::SCHEMA_VERSION,
        time: Timestamp::from_unix_secs(1_700_000_000),
        interval_ms: 1000,
        collection_ms: 2.5,
        simulated: true,
        host: Host::default(),
        driver: Driver::default(),
        gpus: vec![ok, Gpu::blank(1, GpuState::Lost), without_gpm()],
        processes: vec![
            Process {
                input: Some(std::sync::Arc::new(input())),
                environment: Some(std::sync::Arc::new(environment())),
                ..process(4242, Some("python3 \"train.py\" --out C:\\runs"), Some(allocator))
            },
            process(77, None, None),
            on_mig(),
        ],
        alerts: vec![
            alert(AlertKind::GpuLost, Severity::Critical, Some(1), None),
            alert(AlertKind::Fragmentation, Severity::Warning, Some(0), Some(4242)),
        ],
        events: Vec::new(),
        sources: Sources {
            nvml: NvmlStatus { calls: Some(145), ..SourceStatus::ok().into() },
            host: SourceStatus::ok().into(),
            probes: Default::default(),
            driver_events: Some(crate::model::EventsStatus { listening: true, unavailable: None, not_on: Vec::new() }),
        },
    }
}

fn lines(format: Format) -> Vec<String> {
    let mut body = encode(format, &snapshot(), 7);
    body.push_str(&per_scrape(format, 1.25));
    body.lines().map(String::from).collect()
}

fn has(lines: &[String], line: &str) -> bool {
    lines.iter().any(|l| l == line)
}

#[test]
fn every_family_is_declared_and_a_full_snapshot_uses_them_all() {
    let declared: BTreeSet<String> = families().map(|d| d.name.to_string()).collect();
    assert_eq!(declared.len(), families().count(), "no family is declared twice");
    let emitted: BTreeSet<String> = lines(Format::OpenMetrics)
        .iter()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next().map(String::from))
        .collect();
    assert_eq!(emitted, declared);
    for def in families() {
        assert!(def.name.starts_with("gpuscope_"), "{}", def.name);
        if let Some(unit) = def.unit {
            assert!(def.name.ends_with(&format!("_{unit}")), "{} does not end with its unit", def.name);
        }
    }
}

#[test]
fn gpu_readings_in_base_units() {
    let l = lines(Format::Text);
    let gpu0 = "{gpu=\"0\",uuid=\"GPU-aa\"}";
    for expected in [
        format!("gpuscope_gpu_memory_used_bytes{gpu0} {}", 20 * GIB),
        format!("gpuscope_gpu_utilization_ratio{gpu0} 0.37"),
        format!("gpuscope_gpu_encoder_utilization_ratio{gpu0} 0"),
        format!("gpuscope_gpu_fan_speed_ratio{gpu0} 0.4"),
        format!("gpuscope_gpu_power_draw_watts{gpu0} 612.5"),
        // NVML's millijoules as joules: one kWh and a quarter joule.
        format!("gpuscope_gpu_energy_joules_total{gpu0} 3600000.25"),
        format!("gpuscope_gpu_sm_clock_hertz{gpu0} 1980000000"),
        format!("gpuscope_gpu_temperature_celsius{gpu0} 70"),
        format!("gpuscope_gpu_lost{gpu0} 0"),
        format!("gpuscope_gpu_persistence_mode{gpu0} 1"),
        format!("gpuscope_gpu_ecc_corrected_aggregate_errors_total{gpu0} 12"),
        format!("gpuscope_gpu_retired_pages_pending{gpu0} 0"),
        format!("gpuscope_gpu_unified_memory{gpu0} 0"),
        format!("gpuscope_gpu_bar1_memory_used_bytes{gpu0} {GIB}"),
        format!("gpuscope_gpu_allocator_unprobed_bytes{gpu0} {}", 9 * GIB),
        "gpuscope_gpu_info{gpu=\"0\",uuid=\"GPU-aa\",name=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:18:00.0\"} 1"
            .into(),
        "gpuscope_gpu_lost{gpu=\"1\"} 1".into(),
        "gpuscope_gpu_info{gpu=\"1\"} 1".into(),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
}

#[test]
fn unknown_readings_leave_no_sample() {
    for l in lines(Format::Text).iter().filter(|l| l.contains("gpu=\"1\"")) {
        let name = l.split('{').next().unwrap();
        assert!(["gpuscope_gpu_lost", "gpuscope_gpu_info", "gpuscope_alert_active"].contains(&name), "{l}");
    }
    for l in lines(Format::Text).iter().filter(|l| l.contains("pid=\"77\"")) {
        assert!(l.starts_with("gpuscope_process_gpu_memory_bytes{gpu=\"0\",pid=\"77\",command=\"python3\"}"), "{l}");
    }
}

#[test]
fn process_and_allocator_series_carry_escaped_labels() {
    let l = lines(Format::Text);
    let who = "pid=\"4242\",user=\"alice\",command=\"python3 \\\"train.py\\\" --out C:\\\\runs\"";
    for expected in [
        format!("gpuscope_process_gpu_memory_bytes{{gpu=\"0\",{who}}} {}", 11 * GIB),
        format!("gpuscope_process_cpu_usage_ratio{{{who}}} 1.5"),
        format!("gpuscope_process_sm_utilization_ratio{{gpu=\"0\",{who}}} 0.57"),
        format!("gpuscope_process_decoder_utilization_ratio{{gpu=\"0\",{who}}} 0.03"),
        format!(
            "gpuscope_allocator_allocated_bytes{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} {}",
            4 * GIB
        ),
        format!(
            "gpuscope_allocator_fragmentation_ratio{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} 0.3"
        ),
        format!(
            "gpuscope_allocator_peak_allocated_bytes{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} {}",
            6 * GIB
        ),
        format!(
            "gpuscope_allocator_peak_reserved_bytes{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} {}",
            12 * GIB
        ),
        format!(
            "gpuscope_process_pinned_host_bytes{{{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} {}",
            2 * GIB
        ),
        format!(
            "gpuscope_allocator_alloc_retries_total{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} 2"
        ),
        format!(
            "gpuscope_allocator_ooms_total{{gpu=\"0\",{who},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} 0"
        ),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    let allocated = l.iter().filter(|l| l.starts_with("gpuscope_allocator_allocated_bytes{pid=\"4242\"")).count();
    assert_eq!(allocated, 0, "the unmatched device has no series");
}

#[test]
fn alerts_and_self_metrics() {
    let l = lines(Format::Text);
    for expected in [
        "gpuscope_alert_active{kind=\"gpu_lost\",severity=\"critical\",gpu=\"1\"} 1",
        "gpuscope_alert_active{kind=\"fragmentation\",severity=\"warning\",gpu=\"0\",pid=\"4242\"} 1",
        "gpuscope_collect_duration_seconds 0.0025",
        "gpuscope_collect_nvml_calls 145",
        "gpuscope_nvml_errors_total 7",
        "# TYPE gpuscope_nvml_errors_total counter",
        "gpuscope_probe_files_skipped_total 0",
        "gpuscope_simulated 1",
        "gpuscope_snapshot_age_seconds 1.25",
    ] {
        assert!(has(&l, expected), "missing {expected}");
    }
    assert!(has(&l, &format!("gpuscope_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))));
    assert!(!l.iter().any(|l| l.starts_with("# EOF") || l.starts_with("# UNIT")), "not in the 0.0.4 format");
}

#[test]
fn health_and_xids_with_bounded_labels() {
    let l = lines(Format::Text);
    let gpu0 = "gpu=\"0\",uuid=\"GPU-aa\"";
    for expected in [
        format!("gpuscope_gpu_health{{{gpu0}}} 1"),
        format!("gpuscope_gpu_health_reason{{{gpu0},reason=\"row_remap_pending\",severity=\"warning\"}} 1"),
        format!("gpuscope_gpu_xid_errors_total{{{gpu0},xid=\"79\"}} 1"),
        format!("gpuscope_gpu_xid_errors_total{{{gpu0},xid=\"other\"}} 2"),
        format!("gpuscope_gpu_recovery_action{{{gpu0}}} 1"),
        format!("gpuscope_gpu_nvlink_errors_total{{{gpu0},type=\"replay\"}} 5"),
        "gpuscope_driver_events_listening 1".into(),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    assert!(!l.iter().any(|l| l.contains("type=\"crc_data\"")), "an unknown counter leaves no sample");
    let mut silent = snapshot();
    silent.sources.driver_events = None;
    assert!(!encode(Format::Text, &silent, 0).contains("gpuscope_driver_events_listening "), "null: no sample");
}

#[test]
fn unknown_nvml_calls_are_absent_not_zero() {
    let mut snap = snapshot();
    snap.sources.nvml.calls = None;
    let text = encode(Format::Text, &snap, 0);
    assert!(!text.contains("gpuscope_collect_nvml_calls"), "{text}");
}

#[test]
fn openmetrics_declares_units_and_ends_once_with_eof() {
    let l = lines(Format::OpenMetrics);
    assert_eq!(l.last().map(String::as_str), Some("# EOF"));
    assert_eq!(l.iter().filter(|l| *l == "# EOF").count(), 1);
    for expected in [
        "# TYPE gpuscope_nvml_errors counter",
        "gpuscope_nvml_errors_total 7",
        "# TYPE gpuscope_build info",
        "# TYPE gpuscope_gpu info",
        "# UNIT gpuscope_gpu_memory_used_bytes bytes",
        "# UNIT gpuscope_snapshot_age_seconds seconds",
    ] {
        assert!(has(&l, expected), "missing {expected}");
    }
}

#[test]
fn sample_names_include_the_suffixes_queries_use() {
    let names = sample_names();
    for name in ["gpuscope_build_info", "gpuscope_gpu_info", "gpuscope_allocator_ooms_total", "gpuscope_gpu_lost"] {
        assert!(names.iter().any(|n| n == name), "{name}");
    }
}

#[test]
fn processes_in_a_workload_carry_its_labels() {
    let mut snap = snapshot();
    let id = "c0ffee".repeat(10) + "abcd";
    snap.processes[0].workload = Some(std::sync::Arc::new(crate::model::Workload {
        kind: crate::model::WorkloadKind::Containerd,
        container_id: Some(id.clone()),
        pod_uid: Some("7a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into()),
        qos: Some(crate::model::PodQos::Burstable),
        slurm_job: None,
        slurm_step: None,
        slurm_uid: None,
        pod: crate::model::PodNames::default(),
    }));
    snap.processes[1].workload = Some(std::sync::Arc::new(crate::model::Workload {
        kind: crate::model::WorkloadKind::Slurm,
        container_id: None,
        pod_uid: None,
        qos: None,
        slurm_job: Some(4242),
        slurm_step: Some("0".into()),
        slurm_uid: Some(1001),
        pod: crate::model::PodNames::default(),
    }));
    let l: Vec<String> = encode(Format::Text, &snap, 7).lines().map(String::from).collect();
    let who = "pid=\"4242\",user=\"alice\",command=\"python3 \\\"train.py\\\" --out C:\\\\runs\"";
    let pod = format!("container=\"{id}\",pod=\"7a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9\"");
    for expected in [
        format!("gpuscope_process_gpu_memory_bytes{{gpu=\"0\",{who},{pod}}} {}", 11 * GIB),
        format!("gpuscope_process_cpu_usage_ratio{{{who},{pod}}} 1.5"),
        format!(
            "gpuscope_allocator_allocated_bytes{{gpu=\"0\",{who},{pod},rank=\"3\",job_id=\"10.1.2.3:29500\",world_size=\"8\"}} {}",
            4 * GIB
        ),
        format!(
            "gpuscope_process_gpu_memory_bytes{{gpu=\"0\",pid=\"77\",command=\"python3\",slurm_job=\"4242\"}} {}",
            11 * GIB
        ),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    // Without a source for the names, the namespace is left out, not guessed.
    assert!(!l.iter().any(|l| l.contains("namespace=")));
    promtool_accepts(&encode(Format::Text, &snap, 7));
}

#[test]
fn a_named_pod_carries_its_name_namespace_and_container_as_dcgm_exporter_does() {
    let mut snap = snapshot();
    snap.processes[1].workload = None;
    snap.processes[0].workload = Some(std::sync::Arc::new(crate::model::Workload {
        kind: crate::model::WorkloadKind::Containerd,
        container_id: Some("c0ffee".repeat(10) + "abcd"),
        pod_uid: Some("7a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into()),
        qos: None,
        slurm_job: None,
        slurm_step: None,
        slurm_uid: None,
        pod: crate::model::PodNames {
            pod_name: Some("trainer-0".into()),
            pod_namespace: Some("ml".into()),
            container_name: Some("main".into()),
            pod_source: Some(crate::model::PodSource::Kubelet),
        },
    }));
    let text = encode(Format::Text, &snap, 7);
    let who = "pid=\"4242\",user=\"alice\",command=\"python3 \\\"train.py\\\" --out C:\\\\runs\"";
    let expected = format!(
        "gpuscope_process_gpu_memory_bytes{{gpu=\"0\",{who},container=\"main\",pod=\"trainer-0\",namespace=\"ml\"}} {}",
        11 * GIB
    );
    assert!(text.lines().any(|l| l == expected), "missing {expected}\n{text}");
    promtool_accepts(&text);
}

/// `promtool check metrics` lints the exposition (names, types, labels).
fn promtool_accepts(body: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        println!("promtool not found: the lint is skipped");
        return;
    };
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn mig_devices_have_series_with_dcgm_exporter_s_labels() {
    let l = lines(Format::Text);
    let mig = "gpu=\"0\",uuid=\"GPU-aa\",GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"MIG-bb\"";
    let inst = "GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"MIG-bb\"";
    let who = "pid=\"5150\",user=\"alice\",command=\"python3 serve.py\"";
    for expected in [
        format!("gpuscope_mig_device_info{{{mig},mig_device=\"2\"}} 1"),
        format!("gpuscope_mig_memory_total_bytes{{{mig}}} {}", 10 * GIB),
        format!("gpuscope_mig_memory_used_bytes{{{mig}}} {}", 3 * GIB),
        format!("gpuscope_process_gpu_memory_bytes{{gpu=\"0\",{who},{inst}}} {}", 11 * GIB),
        format!("gpuscope_allocator_allocated_bytes{{gpu=\"0\",{who},{inst}}} {}", 4 * GIB),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    let mut snap = snapshot();
    snap.gpus[0].mig_devices.iter_mut().for_each(|m| m.memory.free = None);
    let body = encode(Format::Text, &snap, 0);
    assert!(!body.contains("gpuscope_mig_memory_free_bytes{"), "unknown: no sample, not 0");
    // A process on the whole GPU carries no MIG labels.
    let plain = l.iter().find(|l| l.starts_with("gpuscope_process_gpu_memory_bytes{gpu=\"0\",pid=\"4242\"")).unwrap();
    assert!(!plain.contains("GPU_I_ID"), "{plain}");
}

/// Issue 55: a probe file's job key of 60,000 characters, and a user name
/// with a bidirectional override, must neither bloat `/metrics` nor reach
/// a label raw. Every label value a process supplies is bounded.
#[test]
fn label_values_from_a_process_are_bounded_and_visible() {
    let tame = encode(Format::Text, &snapshot(), 7);
    let mut snap = snapshot();
    let hostile = format!("{}\u{202E}{}", "j".repeat(30_000), "k".repeat(30_000));
    for p in &mut snap.processes {
        p.user = Some(format!("root\u{202E}{}", "u".repeat(10_000)).into());
        p.command = Some(format!("python3 {}\u{202E}", "a".repeat(10_000)).into());
        if let Some(a) = &mut p.allocator {
            a.job = Some(hostile.as_str().into());
        }
        if let Some(env) = &mut p.environment {
            let env = std::sync::Arc::make_mut(env);
            (env.torch_version, env.cudnn_version) = (Some(hostile.clone()), Some("9\u{202E}\n1".into()));
        }
    }
    let body = encode(Format::Text, &snap, 7);
    assert!(!body.contains('\u{202E}'), "no bidirectional override reaches a label");
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let labels = line.split_once('{').map_or("", |(_, rest)| rest.rsplit_once('}').map_or("", |(l, _)| l));
        for value in labels.split("\",").filter_map(|kv| kv.split_once("=\"").map(|(_, v)| v.trim_end_matches('"'))) {
            assert!(value.chars().count() <= crate::sources::NAME_MAX_CHARS, "{} chars in {line:.200}", value.len());
        }
    }
    // The same series as before, each a few hundred bytes longer at most.
    let series = |b: &str| b.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(series(&body), series(&tame));
    assert!(body.len() < tame.len() + series(&tame) * 3 * 4 * crate::sources::NAME_MAX_CHARS, "{} bytes", body.len());
    promtool_accepts(&body);
}

#[test]
fn gpu_activity_in_ratios_and_bytes_per_second_with_the_gpu_labels() {
    let l = lines(Format::Text);
    let gpu0 = "{gpu=\"0\",uuid=\"GPU-aa\"}";
    for expected in [
        format!("gpuscope_gpu_sm_active_ratio{gpu0} 0.625"),
        format!("gpuscope_gpu_sm_occupancy_ratio{gpu0} 0.31"),
        format!("gpuscope_gpu_tensor_active_ratio{gpu0} 0.45"),
        format!("gpuscope_gpu_tensor_hmma_active_ratio{gpu0} 0.44"),
        format!("gpuscope_gpu_tensor_imma_active_ratio{gpu0} 0"),
        format!("gpuscope_gpu_tensor_dfma_active_ratio{gpu0} 0.01"),
        format!("gpuscope_gpu_dram_active_ratio{gpu0} 0.55"),
        format!("gpuscope_gpu_fp64_active_ratio{gpu0} 0"),
        format!("gpuscope_gpu_fp32_active_ratio{gpu0} 0.12"),
        format!("gpuscope_gpu_fp16_active_ratio{gpu0} 0.03"),
        format!("gpuscope_gpu_gpm_pcie_tx_bytes_per_second{gpu0} 3000000"),
        format!("gpuscope_gpu_gpm_pcie_rx_bytes_per_second{gpu0} 24000000000"),
        format!("gpuscope_gpu_gpm_nvlink_tx_bytes_per_second{gpu0} 150000000000"),
        format!("gpuscope_gpu_gpm_nvlink_rx_bytes_per_second{gpu0} 149000000000"),
        // NVML's own PCIe figure keeps its name and meaning beside GPM's.
        format!("gpuscope_gpu_pcie_tx_bytes_per_second{gpu0} 1024"),
        "gpuscope_gpu_activity_unavailable{gpu=\"2\",uuid=\"GPU-cc\",reason=\"not_supported\"} 1".into(),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    let om = lines(Format::OpenMetrics);
    for expected in [
        "# UNIT gpuscope_gpu_sm_active_ratio ratio",
        "# UNIT gpuscope_gpu_gpm_pcie_tx_bytes_per_second bytes_per_second",
        "# TYPE gpuscope_gpu_activity_unavailable gauge",
    ] {
        assert!(has(&om, expected), "missing {expected}");
    }
    promtool_accepts(&encode(Format::Text, &snapshot(), 7));
}

/// A GPU without the counters has no activity series, not zeros, and one
/// series saying why; a GPU with them has no reason series.
#[test]
fn absent_activity_is_no_series_and_a_reason() {
    let l = lines(Format::Text);
    let activity_names: Vec<&str> = activity::families(0).map(|d| d.name).collect();
    let of = |gpu: &str| -> Vec<&str> {
        l.iter()
            .filter(|l| l.contains(&format!("{{gpu=\"{gpu}\"")))
            .filter_map(|l| l.split('{').next())
            .filter(|name| activity_names.contains(name))
            .collect()
    };
    assert_eq!(of("2"), ["gpuscope_gpu_activity_unavailable"]);
    assert_eq!(of("1"), Vec::<&str>::new(), "a lost GPU says nothing of its activity");
    assert_eq!(of("0").len(), activity::READINGS.len(), "{:?}", of("0"));

    // One counter the board does not report: that series alone is missing.
    let mut snap = snapshot();
    let a = snap.gpus[0].activity.as_mut().unwrap();
    (a.fp64_active, a.nvlink_tx_bytes_per_s) = (None, None);
    let body = encode(Format::Text, &snap, 0);
    assert!(!body.contains("gpuscope_gpu_fp64_active_ratio{"), "{body}");
    assert!(!body.contains("gpuscope_gpu_gpm_nvlink_tx_bytes_per_second{"), "{body}");
    assert!(body.contains("gpuscope_gpu_fp32_active_ratio{gpu=\"0\",uuid=\"GPU-aa\"} 0.12"), "{body}");
}

#[test]
fn mig_activity_carries_the_mig_labels() {
    let l = lines(Format::Text);
    let mig = "gpu=\"0\",uuid=\"GPU-aa\",GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"MIG-bb\"";
    let fresh =
        "gpu=\"0\",uuid=\"GPU-aa\",GPU_I_ID=\"10\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"MIG-dd\"";
    for expected in [
        format!("gpuscope_mig_sm_active_ratio{{{mig}}} 0.4"),
        format!("gpuscope_mig_tensor_active_ratio{{{mig}}} 0.125"),
        format!("gpuscope_mig_dram_active_ratio{{{mig}}} 0.55"),
        format!("gpuscope_mig_activity_unavailable{{{fresh},reason=\"first_sample\"}} 1"),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    let fresh_series: Vec<&String> = l.iter().filter(|l| l.contains("MIG-dd")).collect();
    assert!(
        fresh_series.iter().all(|l| !l.contains("_active_ratio") && !l.contains("_occupancy_ratio")),
        "{fresh_series:?}"
    );
    assert!(!l.iter().any(|l| l.starts_with("gpuscope_mig_activity_unavailable{") && l.contains("MIG-bb")));
}

/// Issue 58: how long a process waits for its data, per process and per
/// loader, its `/dev/shm`, the failures kept and the versions, with the
/// process's and the job's labels and no `gpu`.
#[test]
fn the_input_pipeline_per_process_and_per_loader() {
    let l = lines(Format::Text);
    let who = "pid=\"4242\",user=\"alice\",command=\"python3 \\\"train.py\\\" --out C:\\\\runs\",rank=\"3\",\
               job_id=\"10.1.2.3:29500\",world_size=\"8\"";
    for expected in [
        format!("gpuscope_process_data_wait_ratio{{{who}}} 0.41"),
        format!("gpuscope_process_shm_size_bytes{{{who}}} {}", 64 << 20),
        format!("gpuscope_process_shm_free_bytes{{{who}}} {}", 8 << 20),
        format!("gpuscope_process_shm_need_bytes{{{who}}} {}", 40 << 20),
        format!("gpuscope_process_dataloader_failures{{{who},kind=\"bus_error\"}} 2"),
        format!("gpuscope_process_dataloader_failures{{{who},kind=\"worker_exited\"}} 1"),
        format!("gpuscope_dataloader_wait_ratio{{{who},loader=\"1\"}} 0.41"),
        format!("gpuscope_dataloader_batches_per_second{{{who},loader=\"1\"}} 16.5"),
        format!("gpuscope_dataloader_wait_per_batch_seconds{{{who},loader=\"1\"}} 0.025"),
        format!("gpuscope_dataloader_batches_total{{{who},loader=\"1\"}} 500"),
        format!("gpuscope_dataloader_batches_total{{{who},loader=\"2\"}} 3"),
        format!("gpuscope_dataloader_num_workers{{{who},loader=\"1\"}} 4"),
        format!("gpuscope_dataloader_num_workers{{{who},loader=\"2\"}} 0"),
        format!("gpuscope_dataloader_batches_ready{{{who},loader=\"1\"}} 0"),
        format!(
            "gpuscope_process_framework_info{{{who},torch_version=\"2.5.1+cu124\",cuda_version=\"12.4\",\
             cudnn_version=\"90100\"}} 1"
        ),
    ] {
        assert!(has(&l, &expected), "missing {expected}");
    }
    // The validation loader's figures are not in yet: no series, not 0.
    for name in ["gpuscope_dataloader_wait_ratio", "gpuscope_dataloader_batches_per_second"] {
        let of_val = l.iter().filter(|x| x.starts_with(&format!("{name}{{")) && x.contains("loader=\"2\"")).count();
        assert_eq!(of_val, 0, "{name}");
    }
    let input_names: Vec<&str> = input::ALL.iter().map(|d| d.name).collect();
    let input_series: Vec<&String> =
        l.iter().filter(|x| !x.starts_with('#') && input_names.iter().any(|n| x.starts_with(n))).collect();
    assert_eq!(input_series.len(), 15, "{input_series:#?}");
    assert!(input_series.iter().all(|x| x.contains("pid=\"4242\"") && !x.contains("gpu=")), "{input_series:#?}");
    let om = lines(Format::OpenMetrics);
    for expected in [
        "# TYPE gpuscope_dataloader_batches counter",
        "# TYPE gpuscope_process_framework info",
        "# TYPE gpuscope_process_dataloader_failures gauge",
        "# UNIT gpuscope_process_shm_size_bytes bytes",
        "# UNIT gpuscope_dataloader_wait_per_batch_seconds seconds",
    ] {
        assert!(has(&om, expected), "missing {expected}");
    }
    promtool_accepts(&encode(Format::Text, &snapshot(), 7));
}

/// A probe that has seen no loader yet, and no `/dev/shm`: no input
/// series at all; a probe with more loaders than it writes: eight have
/// series, and the process's share is still the largest of all.
#[test]
fn input_series_exist_only_for_what_the_probe_knows() {
    let mut snap = snapshot();
    snap.processes[0].input = Some(std::sync::Arc::new(InputPipeline::default()));
    snap.processes[0].environment = None;
    let body = encode(Format::Text, &snap, 0);
    for def in input::ALL {
        assert!(!body.contains(&format!("\n{}", def.sample_name())), "{}: {body}", def.name);
    }

    let mut many = input();
    many.loaders = (0..12)
        .map(|id| DataLoaderStats { id, wait_share: Some(f64::from(id) / 100.0), ..DataLoaderStats::default() })
        .collect();
    snap.processes[0].input = Some(std::sync::Arc::new(many));
    let body = encode(Format::Text, &snap, 0);
    let waits = body.lines().filter(|x| x.starts_with("gpuscope_dataloader_wait_ratio{")).count();
    assert_eq!(waits, input::MAX_LOADERS);
    assert!(body.contains("gpuscope_process_data_wait_ratio{pid=\"4242\","), "{body}");
    assert!(body.lines().any(|x| x.starts_with("gpuscope_process_data_wait_ratio{") && x.ends_with(" 0.11")), "{body}");
    promtool_accepts(&body);
}
