//! Probe files as the issue-11 probe writes them, placed straight into a
//! private probe directory, read by the real binary over the simulated
//! NVML: counters a backend does not keep stay null, every device finds its
//! GPU by UUID, PCI bus id or CUDA_VISIBLE_DEVICES (or says why not), and
//! JAX's fragmentation is XLA's own.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{MIB, Sim, Sleeper, assert_success, assert_valid};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UUIDS: [&str; 3] = [
    "3f6a1c2e-8b4d-4e71-a0c9-5d2e7b81f403",
    "9c04d7b5-2e1f-4a38-b6f0-c17a4e9d2b56",
    "61b8e0f2-7d3c-4c95-8e27-0a4f3b6c9d18",
];
const BUSES: [&str; 3] = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3B:00.0"];

/// Three GPUs (named `names`), each process on the GPU given, holding 12 GiB.
fn scenario(names: [&str; 3], on: &[(u32, usize)], full: Option<usize>) -> String {
    let mut s = String::new();
    for (i, name) in names.iter().enumerate() {
        s.push_str(&format!(
            "[[gpu]]\nname = \"{name}\"\nuuid = \"GPU-{}\"\npci_bus_id = \"{}\"\nmemory_total_mib = 81559\n",
            UUIDS[i], BUSES[i]
        ));
        if full == Some(i) {
            s.push_str("memory_used_mib = 81559\n");
        }
        for (pid, _) in on.iter().filter(|(_, g)| *g == i) {
            s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = {}\n", 12 * 1024));
        }
    }
    s
}

const H100: [&str; 3] = ["NVIDIA H100 80GB HBM3"; 3];

fn probe_dir(sim: &Sim) -> PathBuf {
    let dir = sim.probe_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for d in [dir.parent().unwrap(), dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    dir
}

fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// One device as PyTorch 2.5 on the native allocator reports it.
fn device(index: u32, uuid: Option<&str>, bus: Option<&str>) -> Value {
    json!({"index": index, "uuid": uuid, "pci_bus_id": bus, "private_pools_reserved": null,
        "allocated": 4 * GIB, "allocated_peak": 6 * GIB, "reserved": 10 * GIB, "reserved_peak": 11 * GIB,
        "active": 4 * GIB, "active_peak": 6 * GIB, "inactive_split": GIB, "inactive_split_peak": GIB,
        "requested": 4 * GIB, "requested_peak": 6 * GIB, "segments": 40, "alloc_retries": 0, "ooms": 0,
        "device_allocs": 50, "device_frees": 10, "largest_free_block": null, "bytes_limit": null})
}

/// A probe file of the issue-11 format for a live process.
fn probe(pid: u32, devices: Vec<Value>, edit: impl FnOnce(&mut Value)) -> Value {
    let mut v = json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": start_ticks(pid), "seq": 1,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": null,
        "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF", "alloc_conf_source": "environment",
        "alloc_conf_env": {"PYTORCH_ALLOC_CONF": null, "PYTORCH_CUDA_ALLOC_CONF": null},
        "expandable_segments": false, "cuda_visible_devices": null, "cuda_device_order": null, "oom_events": 0,
        "rank": null, "local_rank": null, "world_size": null, "pinned_host": null, "devices": devices
    });
    edit(&mut v);
    v
}

/// Written aside and renamed in, as the probe does, so that a reader never
/// sees half a file.
fn place(sim: &Sim, file: &Value) {
    let dir = probe_dir(sim);
    let name = format!("{}-{}.json", file["pid"], file["start_ticks"]);
    let aside = sim.dir.path().join(&name);
    std::fs::write(&aside, file.to_string()).unwrap();
    std::fs::rename(aside, dir.join(name)).unwrap();
}

fn allocator(v: &Value, pid: u32) -> &Value {
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid);
    &p.unwrap_or_else(|| panic!("{pid} missing: {v:#}"))["allocator"]
}

fn sleepers(n: usize) -> Vec<Sleeper> {
    (0..n).map(|_| Sleeper::spawn(&["60"])).collect()
}

#[test]
fn counters_cuda_malloc_async_does_not_keep_are_null() {
    let procs = sleepers(2);
    let (a, b) = (procs[0].pid(), procs[1].pid());
    let sim = Sim::new(&scenario(H100, &[(a, 0), (b, 0)], None));
    let async_device = |zeros: bool| {
        let mut d = device(0, Some(UUIDS[0]), None);
        for k in ["inactive_split", "inactive_split_peak", "requested", "requested_peak", "segments"] {
            d[k] = if zeros { json!(0) } else { Value::Null };
        }
        for k in ["alloc_retries", "ooms", "device_allocs", "device_frees"] {
            d[k] = if zeros { json!(0) } else { Value::Null };
        }
        d
    };
    let conf = |v: &mut Value| {
        v["backend"] = "cudaMallocAsync".into();
        v["alloc_conf"] = "backend:cudaMallocAsync".into();
        v["alloc_conf_env"]["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync".into();
    };
    // As the issue-11 probe writes it, and as an older probe did (zeros).
    place(&sim, &probe(a, vec![async_device(false)], conf));
    place(&sim, &probe(b, vec![async_device(true)], conf));
    let v = sim.json(&[]);
    assert_valid(&v);
    for pid in [a, b] {
        let al = allocator(&v, pid);
        assert_eq!(al["backend"], "cudaMallocAsync");
        let d = &al["devices"][0];
        for k in ["inactive_split", "requested", "segments", "alloc_retries", "ooms", "fragmentation"] {
            assert_eq!(d[k], Value::Null, "{k} of {pid}: {d:#}");
        }
        assert_eq!((d["allocated"].clone(), d["reserved"].clone()), (json!(4 * GIB), json!(10 * GIB)));
        assert_eq!(d["releasable"], 6 * GIB, "the whole cache: no split is counted");
        assert_eq!(d["overhead"], 12 * 1024 * MIB - 10 * GIB);
        assert_eq!(al["oom_events"], 0);
    }
    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("frag n/a  ovh 2.0 GiB  retry n/a  oom n/a"), "{table}");
}

#[test]
fn devices_are_matched_by_bare_uuid_pci_bus_id_and_cuda_visible_devices() {
    let procs = sleepers(4);
    let pids: Vec<u32> = procs.iter().map(Sleeper::pid).collect();
    let sim = Sim::new(&scenario(H100, &[(pids[0], 1), (pids[1], 2), (pids[2], 0), (pids[2], 2), (pids[3], 1)], None));
    // PyTorch gives the UUID bare.
    place(&sim, &probe(pids[0], vec![device(0, Some(UUIDS[1]), None)], |_| {}));
    // No UUID (before ~2.1), the bus id in the probe's lower-case form.
    place(&sim, &probe(pids[1], vec![device(0, None, Some("00000000:3b:00.0"))], |_| {}));
    // Neither: the ordinal through a reordered list.
    let reordered = |v: &mut Value| v["cuda_visible_devices"] = "2,0".into();
    place(&sim, &probe(pids[2], vec![device(0, None, None), device(1, None, None)], reordered));
    // A UUID prefix in the list.
    let prefix = |v: &mut Value| v["cuda_visible_devices"] = format!("GPU-{}", &UUIDS[1][..8]).into();
    place(&sim, &probe(pids[3], vec![device(0, None, None)], prefix));
    let v = sim.json(&[]);
    assert_valid(&v);
    let placed = |pid: u32, i: usize| {
        let d = &allocator(&v, pid)["devices"][i];
        (d["gpu"].clone(), d["gpu_match"].clone(), d["ordinal"].clone())
    };
    assert_eq!(placed(pids[0], 0), (json!(1), json!("uuid"), json!(0)));
    assert_eq!(placed(pids[1], 0), (json!(2), json!("pci_bus_id"), json!(0)));
    assert_eq!(placed(pids[2], 0), (json!(2), json!("cuda_visible_devices"), json!(0)));
    assert_eq!(placed(pids[2], 1), (json!(0), json!("cuda_visible_devices"), json!(1)));
    assert_eq!(placed(pids[3], 0), (json!(1), json!("cuda_visible_devices"), json!(0)));
    // Matched figures reach the GPUs' totals.
    let totals: Vec<Value> = (0..3).map(|i| v["gpus"][i]["allocator"]["probed_processes"].clone()).collect();
    assert_eq!(totals, [json!(1), json!(2), json!(2)]);
    assert_eq!(allocator(&v, pids[2])["devices"][1]["overhead"], 12 * 1024 * MIB - 10 * GIB);

    // `--gpus` leaves GPU 0 out: indices stay NVML's, and what is on GPU 0
    // says so rather than landing elsewhere.
    let v = sim.json(&["--gpus", "1,2"]);
    assert_valid(&v);
    assert_eq!(allocator(&v, pids[2])["devices"][0]["gpu"], 2);
    let left_out = &allocator(&v, pids[2])["devices"][1];
    assert_eq!((left_out["gpu"].clone(), left_out["gpu_match"].clone()), (Value::Null, Value::Null));
    assert_eq!(left_out["unmatched_reason"], "on GPU 0, which --gpus leaves out");
}

#[test]
fn a_device_that_cannot_be_matched_is_kept_with_its_figures_and_reason() {
    let procs = sleepers(3);
    let pids: Vec<u32> = procs.iter().map(Sleeper::pid).collect();
    let mixed = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"];
    let sim = Sim::new(&scenario(mixed, &[(pids[0], 1), (pids[1], 1)], None));
    let index_list = |v: &mut Value| v["cuda_visible_devices"] = "1".into();
    place(&sim, &probe(pids[0], vec![device(0, None, None)], index_list));
    let pci_order = |v: &mut Value| {
        v["cuda_visible_devices"] = "1".into();
        v["cuda_device_order"] = "PCI_BUS_ID".into();
    };
    place(&sim, &probe(pids[1], vec![device(0, None, None)], pci_order));
    // NVML does not list this one (a container hiding per-process data):
    // shown all the same, on no GPU.
    place(&sim, &probe(pids[2], vec![device(0, Some("MIG-4b6f3a5e-2f1d-5c3b-9a8e-7d6c5b4a3f21"), None)], |_| {}));
    let v = sim.json(&[]);
    assert_valid(&v);
    let d = &allocator(&v, pids[0])["devices"][0];
    assert_eq!((d["gpu"].clone(), d["gpu_match"].clone()), (Value::Null, Value::Null));
    assert_eq!(
        d["unmatched_reason"],
        "CUDA's fastest-first order is ambiguous on mixed GPUs; set CUDA_DEVICE_ORDER=PCI_BUS_ID"
    );
    assert_eq!((d["allocated"].clone(), d["reserved"].clone()), (json!(4 * GIB), json!(10 * GIB)));
    assert_eq!(d["overhead"], Value::Null, "no GPU, no NVML figure to subtract from");
    assert_eq!(allocator(&v, pids[1])["devices"][0]["gpu"], 1, "PCI_BUS_ID makes the index certain");
    let mig = &allocator(&v, pids[2])["devices"][0];
    assert_eq!(mig["gpu"], Value::Null);
    assert!(mig["unmatched_reason"].as_str().unwrap().contains("none of the MIG devices gpuscope reads"), "{mig}");
    assert_eq!(v["gpus"][1]["allocator"]["probed_processes"], 1, "the unmatched device adds to no GPU");

    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("cuda:0 gpu n/a  alloc 4.0 GiB  resv 10.0 GiB"), "{table}");
    assert!(table.contains("CUDA's fastest-first order is ambiguous on mixed GPUs;"), "{table}");
    assert!(table.contains(&format!("{:>7} ", pids[2])), "the probe-only process has a row:\n{table}");
}

#[test]
fn jax_fragmentation_is_xla_s_over_the_pool_it_obtained() {
    let procs = sleepers(1);
    let pid = procs[0].pid();
    let sim = Sim::new(&scenario(H100, &[(pid, 0)], None));
    // XLA_PYTHON_CLIENT_PREALLOCATE=false: a 2 GiB pool far below the
    // 60 GiB limit, its free GiB in one block.
    let mut d = device(0, None, Some(BUSES[0]));
    for k in ["inactive_split", "inactive_split_peak", "requested", "requested_peak", "segments", "alloc_retries"] {
        d[k] = Value::Null;
    }
    for k in ["ooms", "device_allocs", "device_frees", "active", "active_peak"] {
        d[k] = Value::Null;
    }
    (d["allocated"], d["reserved"], d["reserved_peak"]) = (json!(GIB), json!(2 * GIB), json!(2 * GIB));
    (d["largest_free_block"], d["bytes_limit"]) = (json!(GIB), json!(60 * GIB));
    let jax = |v: &mut Value| {
        (v["framework"], v["framework_version"], v["backend"]) = (json!("jax"), json!("0.4.35"), json!("jax"));
        for k in ["alloc_conf_var", "alloc_conf_source", "alloc_conf_env", "oom_events"] {
            v[k] = Value::Null;
        }
    };
    place(&sim, &probe(pid, vec![d], jax));
    let v = sim.json(&[]);
    assert_valid(&v);
    let a = allocator(&v, pid);
    let d = &a["devices"][0];
    assert_eq!((d["gpu"].clone(), d["gpu_match"].clone()), (json!(0), json!("pci_bus_id")));
    assert_eq!(d["fragmentation"], 0.0, "all free memory of the pool is one block");
    assert_eq!((d["largest_free_block"].clone(), d["bytes_limit"].clone()), (json!(GIB), json!(60 * GIB)));
    assert_eq!((d["cached"].clone(), d["releasable"].clone()), (json!(GIB), Value::Null));
    assert_eq!(a["expandable_segments"], Value::Null);
}

#[test]
fn an_oom_a_backend_does_not_count_is_inferred_from_a_full_gpu() {
    let procs = sleepers(1);
    let pid = procs[0].pid();
    let sim = Sim::new(&scenario(H100, &[(pid, 0)], Some(0)));
    let mut d = device(0, Some(UUIDS[0]), None);
    for k in ["inactive_split", "requested", "segments", "alloc_retries", "ooms"] {
        d[k] = Value::Null;
    }
    place(&sim, &probe(pid, vec![d], |v| v["backend"] = "cudaMallocAsync".into()));
    let v = sim.json(&[]);
    assert_valid(&v);
    assert_eq!(v["gpus"][0]["memory"]["free"], 0);
    let oom = v["alerts"].as_array().unwrap().iter().find(|a| a["kind"] == "oom");
    let oom = oom.unwrap_or_else(|| panic!("no oom alert: {:#}", v["alerts"]));
    assert_eq!((oom["pid"].clone(), oom["gpu"].clone()), (json!(pid), json!(0)));
    assert!(oom["hint"].as_str().unwrap().starts_with("cudaMallocAsync does not count OOMs"), "{oom}");
}

#[test]
fn an_oom_error_the_probe_saw_raises_the_oom_alert() {
    use std::io::{BufRead, BufReader};
    let procs = sleepers(1);
    let pid = procs[0].pid();
    let sim = Sim::new(&scenario(H100, &[(pid, 0)], None));
    let mut d = device(0, Some(UUIDS[0]), None);
    for k in ["inactive_split", "requested", "segments", "alloc_retries", "ooms"] {
        d[k] = Value::Null;
    }
    let file = |seen: u64| {
        probe(pid, vec![d.clone()], |v| (v["backend"], v["oom_events"]) = ("cudaMallocAsync".into(), seen.into()))
    };
    place(&sim, &file(0));
    let mut child = sim
        .gpuscope()
        .args(["--json", "--watch", "--count", "3", "--interval", "300ms"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(first["alerts"].as_array().unwrap().is_empty(), "{:#}", first["alerts"]);
    // The training process hits an uncaught OutOfMemoryError.
    place(&sim, &file(1));
    let rest: Vec<Value> = lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    assert!(child.wait().unwrap().success());
    let last = rest.last().unwrap();
    assert_valid(last);
    let oom = last["alerts"].as_array().unwrap().iter().find(|a| a["kind"] == "oom");
    let oom = oom.unwrap_or_else(|| panic!("no oom alert: {:#}", last["alerts"]));
    assert_eq!((oom["pid"].clone(), oom["value"].clone()), (json!(pid), json!(1.0)));
    assert!(oom["message"].as_str().unwrap().contains("1 seen by the probe"), "{oom}");
}
