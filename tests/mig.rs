//! A MIG-partitioned H100 (the shipped 7 × 1g.10gb scenario) end to end:
//! each MIG device under its parent in `--json`, processes placed on their
//! MIG device, `--gpus` by MIG UUID, and a probe's MIG device matched.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![recursion_limit = "256"]

mod common;
mod serve_common;

use common::{MIB, Sim, Sleeper, assert_success, assert_valid};
use serde_json::{Value, json};
use serve_common::{Server, promtool_check, sample};

const SCENARIO: &str = include_str!("../crates/nvml-sim/scenarios/mig-h100-7way.toml");
const PARENT: &str = "GPU-7a1e4c2b-93d5-4f60-b8a2-1c5e9d3f7b04";
const MIG0: &str = "MIG-1f0c9a52-6b3e-5d48-a7c1-0e2f4b6d8a01";
const MIG4: &str = "MIG-5b4a5e96-af7c-5b8c-ebf5-4c6d8fab2e05";
const GIB: u64 = 1 << 30;

fn pids(v: &Value) -> Vec<u64> {
    v["processes"].as_array().unwrap().iter().map(|p| p["pid"].as_u64().unwrap()).collect()
}

#[test]
fn json_shows_each_mig_device_under_its_parent() {
    let sim = Sim::new(SCENARIO);
    let v = sim.json(&[]);
    assert_valid(&v);
    let gpu = &v["gpus"][0];
    assert_eq!(gpu["mig_mode"], json!({"current": true, "pending": true}));
    assert_eq!(gpu["utilization"]["gpu"], Value::Null, "NVML has no utilization for a MIG-enabled GPU");
    let migs = gpu["mig_devices"].as_array().unwrap();
    assert_eq!(migs.len(), 7);
    let m0 = &migs[0];
    assert_eq!(
        *m0,
        json!({"index": 0, "uuid": MIG0, "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "profile": "1g.10gb",
            "gpu_instance_id": 7, "compute_instance_id": 0,
            "memory": {"total": 9856 * MIB, "used": 8120 * MIB, "free": (9856 - 8120) * MIB},
            "activity": null, "activity_unavailable": "not_read"})
    );
    let ids: Vec<(u64, u64)> =
        migs.iter().map(|m| (m["index"].as_u64().unwrap(), m["gpu_instance_id"].as_u64().unwrap())).collect();
    assert_eq!(ids, (0..7).map(|i| (i, i + 7)).collect::<Vec<_>>());
    assert_eq!(migs[3]["memory"]["used"], 0, "an idle instance uses nothing: 0, not null");
    // Each process on its own MIG device, once.
    assert_eq!(pids(&v), [4200101, 4200102, 4200103, 4200105]);
    let on = &v["processes"][3]["gpus"];
    assert_eq!(
        *on,
        json!([{"index": 0, "type": "compute", "used_memory": 2 * GIB, "mig_device": 4, "mig_uuid": MIG4}])
    );
}

#[test]
fn gpus_selects_by_mig_uuid_or_prefix_and_shows_the_parent() {
    let sim = Sim::new(SCENARIO);
    for selector in [MIG4, &MIG4[..12], &MIG4.to_lowercase()] {
        let v = sim.json(&["--gpus", selector]);
        assert_valid(&v);
        let migs = v["gpus"][0]["mig_devices"].as_array().unwrap();
        assert_eq!(v["gpus"][0]["uuid"], PARENT, "{selector}");
        assert_eq!(migs.len(), 1, "{selector}");
        assert_eq!(migs[0]["uuid"], MIG4);
        assert_eq!(pids(&v), [4200105], "only the processes on that MIG device");
    }
    // The parent by its own UUID (or index) keeps every MIG device.
    for both in [PARENT.to_string(), format!("{MIG4},0")] {
        let v = sim.json(&["--gpus", &both]);
        assert_eq!(v["gpus"][0]["mig_devices"].as_array().unwrap().len(), 7, "{both}");
        assert_eq!(pids(&v).len(), 4, "{both}");
    }
    let v = sim.json(&["--gpus", &format!("{MIG4},{}", &MIG0[..10])]);
    let shown: Vec<&Value> = v["gpus"][0]["mig_devices"].as_array().unwrap().iter().map(|m| &m["uuid"]).collect();
    assert_eq!(shown, [MIG0, MIG4]);
    assert_eq!(pids(&v), [4200101, 4200105]);
    let out = sim.gpuscope().args(["--json", "--gpus", "MIG-ffff"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MIG-ffff"), "{err}");
}

fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap()
}

fn probe(pid: u32, uuid: Option<&str>, cvd: Option<&str>, reserved: u64) -> Value {
    json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": start_ticks(pid), "seq": 1,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": null,
        "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF", "alloc_conf_source": "environment",
        "alloc_conf_env": {"PYTORCH_ALLOC_CONF": null, "PYTORCH_CUDA_ALLOC_CONF": null},
        "expandable_segments": false, "cuda_visible_devices": cvd, "cuda_device_order": null, "oom_events": 0,
        "rank": null, "local_rank": null, "world_size": null, "pinned_host": null,
        "devices": [{"index": 0, "uuid": uuid, "pci_bus_id": null, "private_pools_reserved": null,
            "allocated": GIB, "allocated_peak": GIB, "reserved": reserved, "reserved_peak": reserved,
            "active": 4 * GIB, "active_peak": 6 * GIB, "inactive_split": 0, "inactive_split_peak": 0,
            "requested": 4 * GIB, "requested_peak": 6 * GIB, "segments": 40, "alloc_retries": 0, "ooms": 0,
            "device_allocs": 50, "device_frees": 10, "largest_free_block": null, "bytes_limit": null}]
    })
}

fn place(sim: &Sim, file: &Value) {
    let dir = sim.probe_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let name = format!("{}-{}.json", file["pid"], file["start_ticks"]);
    let aside = sim.dir.path().join(&name);
    std::fs::write(&aside, file.to_string()).unwrap();
    std::fs::rename(aside, dir.join(name)).unwrap();
}

#[test]
fn a_probe_on_a_mig_device_is_matched_to_it() {
    let procs: Vec<Sleeper> = (0..2).map(|_| Sleeper::spawn(&["60"])).collect();
    let (a, b) = (procs[0].pid(), procs[1].pid());
    let scenario = SCENARIO.replace("4200101", &a.to_string()).replace("4200105", &b.to_string());
    let sim = Sim::new(&scenario);
    // PyTorch reports a MIG device's UUID bare.
    place(&sim, &probe(a, Some(&MIG0[4..]), None, 6 * GIB));
    // No UUID: cuda:0 through CUDA_VISIBLE_DEVICES=MIG-<uuid>.
    place(&sim, &probe(b, None, Some(MIG4), 1536 * MIB));
    let v = sim.json(&[]);
    assert_valid(&v);
    let device = |pid: u32| {
        let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap();
        p["allocator"]["devices"][0].clone()
    };
    let (da, db) = (device(a), device(b));
    let placed = |d: &Value| {
        (
            d["gpu"].clone(),
            d["mig_device"].clone(),
            d["mig_uuid"].clone(),
            d["gpu_match"].clone(),
            d["unmatched_reason"].clone(),
        )
    };
    assert_eq!(placed(&da), (json!(0), json!(0), json!(MIG0), json!("uuid"), Value::Null));
    assert_eq!(placed(&db), (json!(0), json!(4), json!(MIG4), json!("cuda_visible_devices"), Value::Null));
    // Overhead against the process's own figure on that MIG device.
    assert_eq!(da["overhead"], 8120 * MIB - 6 * GIB);
    assert_eq!(db["overhead"], 2 * GIB - 1536 * MIB);
    assert_eq!(v["gpus"][0]["allocator"]["probed_processes"], 2);
    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
}

#[test]
fn one_shot_table_lists_mig_devices_under_their_gpu_within_80_columns() {
    let sim = Sim::new(SCENARIO);
    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.lines().all(|l| l.chars().count() <= 80), "{table}");
    let gpu_row = table.lines().position(|l| l.starts_with("  0 NVIDIA H100")).unwrap();
    let migs: Vec<&str> = table.lines().filter(|l| l.starts_with("  0:")).collect();
    assert_eq!(migs.len(), 7, "{table}");
    assert!(table.lines().position(|l| l.starts_with("  0:0")).unwrap() > gpu_row);
    assert!(migs[4].contains("1g.10gb") && migs[4].contains("2.0/9.6 GiB") && migs[4].contains("1 proc"));
    assert!(migs[4].ends_with(MIG4), "the UUID --gpus takes: {}", migs[4]);
    assert!(migs[3].contains("0 proc"));
    assert!(table.lines().any(|l| l.starts_with("4200105") && l.contains(" 0:4 C ")), "{table}");
}

#[test]
fn metrics_have_a_series_per_mig_device_and_pass_promtool() {
    let sim = Sim::new(SCENARIO);
    let server = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "100ms"]);
    let r = server.until("/metrics", "the MIG devices", |r| r.body.contains("gpuscope_mig_memory_used_bytes"));
    promtool_check(&r.body);
    let m = &r.body;
    let labels = |gi: u32, uuid: &str| {
        format!(
            "gpu=\"0\",uuid=\"{PARENT}\",GPU_I_ID=\"{gi}\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"{uuid}\""
        )
    };
    let mig4 = labels(11, MIG4);
    assert_eq!(sample(m, &format!("gpuscope_mig_memory_used_bytes{{{mig4}}}")), Some((2 * GIB) as f64));
    assert_eq!(sample(m, &format!("gpuscope_mig_memory_total_bytes{{{mig4}}}")), Some((9856 * MIB) as f64));
    assert_eq!(sample(m, &format!("gpuscope_mig_memory_free_bytes{{{mig4}}}")), Some(((9856 - 2048) * MIB) as f64));
    assert_eq!(sample(m, &format!("gpuscope_mig_device_info{{{},mig_device=\"0\"}}", labels(7, MIG0))), Some(1.0));
    assert_eq!(m.lines().filter(|l| l.starts_with("gpuscope_mig_memory_used_bytes{")).count(), 7);
    // The process on MIG device 4 carries its labels.
    let line = m.lines().find(|l| l.starts_with("gpuscope_process_gpu_memory_bytes{gpu=\"0\",pid=\"4200105\""));
    let line = line.unwrap_or_else(|| panic!("{m}"));
    assert!(
        line.contains(&format!("GPU_I_ID=\"11\",GPU_I_PROFILE=\"1g.10gb\",GPU_CI_ID=\"0\",mig_uuid=\"{MIG4}\"")),
        "{line}"
    );
    // NVML has no utilization for a MIG-enabled GPU: no sample, not 0.
    assert!(!m.contains("gpuscope_gpu_utilization_ratio{"), "{m}");
}
