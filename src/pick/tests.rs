//! The picker on hand-made snapshots; `tests/select.rs` runs the command
//! against the simulated driver.

use proptest::prelude::*;

use super::*;
use crate::model::*;

const GIB: u64 = 1 << 30;

fn gpu(index: u32, free_gib: u64, util: Option<u32>, cached_gib: Option<u64>) -> Gpu {
    let mut gpu = Gpu::blank(index, GpuState::Ok);
    gpu.uuid = Some(format!("GPU-{index}"));
    gpu.memory = GpuMemory {
        total: Some(80 * GIB),
        free: Some(free_gib * GIB),
        used: Some((80 - free_gib) * GIB),
        driver_reserved: None,
    };
    gpu.utilization.gpu = util;
    gpu.allocator = cached_gib.map(|c| GpuAllocator {
        probed_processes: 1,
        allocated: None,
        reserved: None,
        cached: Some(c * GIB),
        inactive_split: None,
        overhead: None,
        unprobed: None,
    });
    gpu
}

fn on(pid: u32, index: u32, mig: Option<u32>) -> Process {
    let mut p = Process::bare(pid);
    p.gpus.push(ProcessGpu {
        index,
        kind: ProcessType::Compute,
        used_memory: Some(GIB),
        mig_device: mig,
        mig_uuid: None,
    });
    p
}

fn snapshot(gpus: Vec<Gpu>, processes: Vec<Process>) -> Snapshot {
    Snapshot::of(1_700_000_000, gpus, processes)
}

fn ask(count: usize) -> Criteria {
    Criteria { count, min_free: None, max_util: None, no_processes: false, count_cached_free: false, mig: false }
}

fn chosen(snap: &Snapshot, c: &Criteria, format: Format) -> Option<String> {
    let out = choose(snap, c);
    out.chosen(c.count).map(|p| render(&p, format).unwrap())
}

#[test]
fn the_freest_fitting_gpus_in_index_order() {
    let snap = snapshot(vec![gpu(0, 10, Some(0), None), gpu(1, 70, Some(5), None), gpu(2, 50, Some(0), None)], vec![]);
    let c = Criteria { min_free: Some(20 * GIB), ..ask(2) };
    // 1 and 2 fit; CUDA will number them in the order given.
    assert_eq!(chosen(&snap, &c, Format::Index).as_deref(), Some("1,2\n"));
    assert_eq!(chosen(&snap, &c, Format::Uuid).as_deref(), Some("GPU-1,GPU-2\n"));
    // Of three that fit, the two with the most free memory.
    let c = ask(2);
    assert_eq!(chosen(&snap, &c, Format::Index).as_deref(), Some("1,2\n"));
    let out = choose(&snap, &Criteria { min_free: Some(20 * GIB), ..ask(3) });
    assert_eq!(out.chosen(3), None);
    let why = out.shortfall(&Criteria { min_free: Some(20 * GIB), ..ask(3) });
    assert!(why.starts_with("2 GPUs fit, 3 asked"), "{why}");
    assert!(why.contains("GPU 0: 10.0 GiB free, under 20.0 GiB"), "{why}");
}

#[test]
fn utilisation_and_processes() {
    let snap = snapshot(
        vec![gpu(0, 60, Some(95), None), gpu(1, 60, None, None), gpu(2, 40, Some(3), None), gpu(3, 30, Some(0), None)],
        vec![on(7, 2, None)],
    );
    let c = Criteria { max_util: Some(10), ..ask(2) };
    assert_eq!(chosen(&snap, &c, Format::Index).as_deref(), Some("2,3\n"));
    let out = choose(&snap, &c);
    let reasons: Vec<&str> = out.rejected.iter().map(|(_, why)| why.as_str()).collect();
    assert_eq!(reasons, ["utilisation 95%, above 10%", "utilisation unknown"]);
    let c = Criteria { max_util: Some(10), no_processes: true, ..ask(1) };
    assert_eq!(chosen(&snap, &c, Format::Index).as_deref(), Some("3\n"));
    assert!(choose(&snap, &c).rejected.iter().any(|(d, why)| d == "GPU 2" && why == "1 process on it"));
}

/// A probed process on `gpu` whose cache is `cached` GiB, of which
/// `releasable` GiB `empty_cache()` could hand back.
fn probed(pid: u32, gpu: u32, cached: u64, releasable: Option<u64>) -> Process {
    let mut p = on(pid, gpu, None);
    let allocator = serde_json::json!({
        "framework": "torch", "framework_version": null, "backend": "native", "alloc_conf": null,
        "alloc_conf_var": null, "alloc_conf_source": null, "alloc_conf_env": null,
        "expandable_segments": false, "cuda_visible_devices": null, "cuda_device_order": null,
        "oom_events": null, "rank": null, "local_rank": null, "world_size": null, "pinned_host": null,
        "pinned_host_peak": null, "state": "fresh", "age_ms": 0, "devices": [],
    });
    let mut allocator: ProcessAllocator = serde_json::from_value(allocator).unwrap();
    allocator.devices.push(DeviceAllocator {
        gpu: Some(gpu),
        cached: Some(cached * GIB),
        inactive_split: releasable.map(|r| (cached - r) * GIB),
        releasable: releasable.map(|r| r * GIB),
        ..DeviceAllocator::default()
    });
    p.allocator = Some(Box::new(allocator));
    p
}

#[test]
fn only_the_cache_empty_cache_could_return_counts_as_free_and_only_when_asked() {
    // 19 GiB free; a probed process caches 11 GiB, 3 of them in the
    // inactive split, which empty_cache() cannot free.
    let snap = snapshot(vec![gpu(0, 19, Some(0), Some(11)), gpu(1, 5, Some(0), None)], vec![probed(7, 0, 11, Some(8))]);
    let c = Criteria { min_free: Some(20 * GIB), ..ask(1) };
    assert_eq!(chosen(&snap, &c, Format::Index), None);
    let c = Criteria { count_cached_free: true, ..c };
    assert_eq!(chosen(&snap, &c, Format::Index).as_deref(), Some("0\n"));
    let json = chosen(&snap, &c, Format::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["counted_free"], 27 * GIB);
    assert_eq!(v[0]["memory_free"], 19 * GIB);
    assert_eq!(v[0]["cached"], 11 * GIB);
    assert_eq!(v[0]["releasable"], 8 * GIB);
    // 28 GiB would need the inactive split too: not free for another job.
    let c = Criteria { min_free: Some(28 * GIB), ..c };
    let out = choose(&snap, &c);
    assert_eq!(out.chosen(1), None);
    assert!(out.rejected[0].1.contains("27.0 GiB free (releasable cache counted)"), "{:?}", out.rejected);
    // A probe that cannot say what is releasable adds nothing.
    let unsure = snapshot(vec![gpu(0, 19, Some(0), Some(11))], vec![probed(7, 0, 11, None)]);
    let c = Criteria { min_free: Some(20 * GIB), count_cached_free: true, ..ask(1) };
    assert_eq!(chosen(&unsure, &c, Format::Index), None);
}

#[test]
fn unknown_and_lost_gpus_are_never_picked() {
    let mut unknown = gpu(1, 0, Some(0), None);
    unknown.memory.free = None;
    let snap = snapshot(vec![Gpu::blank(0, GpuState::Lost), unknown], vec![]);
    let out = choose(&snap, &ask(1));
    assert!(out.fits.is_empty());
    assert_eq!(out.rejected[0], ("GPU 0".to_string(), "lost".to_string()));
    assert_eq!(out.rejected[1].1, "free memory unknown");
}

#[test]
fn mig_devices_are_picked_by_uuid_only() {
    let mut parent = gpu(0, 0, Some(20), None);
    parent.mig_mode = Some(MigMode { current: true, pending: false });
    for (i, free) in [(0u32, 9u64), (1, 19), (2, 4)] {
        parent.mig_devices.push(MigDevice {
            index: i,
            uuid: Some(format!("MIG-{i}")),
            name: None,
            profile: Some("2g.20gb".into()),
            gpu_instance_id: Some(i),
            compute_instance_id: Some(0),
            memory: MigMemory { total: Some(20 * GIB), used: None, free: Some(free * GIB) },
            activity: None,
            activity_unavailable: None,
        });
    }
    let snap = snapshot(vec![parent, gpu(1, 70, Some(0), None)], vec![on(9, 0, Some(1))]);
    // Whole GPUs: the MIG GPU is not one.
    let out = choose(&snap, &ask(2));
    assert_eq!(out.chosen(2), None);
    assert!(out.rejected[0].1.contains("use --mig"));
    let c = Criteria { mig: true, min_free: Some(8 * GIB), ..ask(2) };
    assert_eq!(chosen(&snap, &c, Format::Uuid).as_deref(), Some("MIG-0,MIG-1\n"));
    let picked = choose(&snap, &c);
    assert!(render(&picked.chosen(2).unwrap(), Format::Index).unwrap_err().contains("--format uuid"));
    let c = Criteria { no_processes: true, ..c };
    assert_eq!(chosen(&snap, &c, Format::Uuid), None, "MIG 1 runs a process");
}

#[test]
fn sizes_as_people_write_them() {
    assert_eq!(parse_size("20GiB"), Ok(20 * GIB));
    assert_eq!(parse_size("20g"), Ok(20 * GIB));
    assert_eq!(parse_size("20 GB"), Ok(20_000_000_000));
    assert_eq!(parse_size("1.5GiB"), Ok(GIB + GIB / 2));
    assert_eq!(parse_size("512MiB"), Ok(512 << 20));
    assert_eq!(parse_size("1048576"), Ok(1 << 20));
    for bad in ["", "GiB", "20 furlongs", "1..5G", ".5G", "-1G", "99999999999TiB"] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
    assert!(parse_size("20 furlongs").unwrap_err().contains("e.g. 20GiB"));
}

proptest! {
    #[test]
    fn any_text_is_a_size_or_an_error(text in "\\PC{0,24}") {
        let _ = parse_size(&text);
    }

    #[test]
    fn whole_units_read_back(n in 0u64..1_000_000, unit in prop::sample::select(vec![
        ("", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40), ("GB", 1_000_000_000),
    ])) {
        prop_assert_eq!(parse_size(&format!("{n}{}", unit.0)), Ok(n * unit.1));
    }
}
