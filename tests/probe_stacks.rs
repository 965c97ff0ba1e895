//! The allocator figures end to end on every stack the probe meets: the
//! real probe in a Python process over a stand-in of one PyTorch API
//! generation (or the stand-in JAX), the simulated NVML listing its PID,
//! the real gpuscope reading both. Each test is one row of README's table
//! "What each framework, version and backend reports".

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::trainer::{Trainer, python_trainer, repo, wait_for_probe_file, write_script};
use common::{Sim, assert_success, assert_valid};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UUIDS: [&str; 3] = [
    "5ea1c0de-0000-4000-8000-0000000000a0",
    "5ea1c0de-0000-4000-8000-0000000000a1",
    "5ea1c0de-0000-4000-8000-0000000000a2",
];

/// Three identical GPUs; `on` = (gpu index, pid) pairs NVML lists.
fn scenario(on: &[(usize, u32)]) -> String {
    let mut s = String::new();
    for (index, uuid) in UUIDS.iter().enumerate() {
        s.push_str(&format!(
            "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\nuuid = \"GPU-{uuid}\"\npci_bus_id = \"00000000:{:02X}:00.0\"\nmemory_total_mib = 81559\n",
            0x18 + index
        ));
        for (_, pid) in on.iter().filter(|(gpu, _)| *gpu == index) {
            s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = 12000\n"));
        }
    }
    s
}

/// The stand-in's script: device 0 of the process is busy; `device` is
/// what its properties say (uuid, PCI).
fn script(dir: &Path, top: Value, device: Value) -> PathBuf {
    let mut dev = json!({"alloc": {
        "allocated": 4 * GIB, "allocated_peak": 6 * GIB, "reserved": 10 * GIB, "reserved_peak": 11 * GIB,
        "active": 5 * GIB, "inactive_split": 3 * GIB, "segments": 40, "alloc_retries": 2, "ooms": 1,
    }});
    for (k, v) in device.as_object().unwrap() {
        dev[k] = v.clone();
    }
    let mut value = json!({"devices": {"0": dev}});
    for (k, v) in top.as_object().unwrap() {
        value[k] = v.clone();
    }
    let path = dir.join("torch-script.json");
    write_script(&path, &value);
    path
}

struct Stack {
    _dir: tempfile::TempDir,
    probe_dir: PathBuf,
    trainer: Trainer,
}

impl Stack {
    fn start(top: Value, device: Value, flags: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let probe_dir = dir.path().join("gpuscope").join("probes");
        let script = script(dir.path(), top, device);
        let mut cmd = python_trainer(&[&["--probe"], flags].concat());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let trainer = Trainer::start(&script, &probe_dir, cmd);
        Self { _dir: dir, probe_dir, trainer }
    }

    fn pid(&self) -> u32 {
        let pid = self.trainer.pid_of("main", 1);
        wait_for_probe_file(&self.probe_dir, pid);
        pid
    }

    fn json(&self, sim: &Sim) -> Value {
        let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &self.probe_dir).output().unwrap();
        assert_success(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(&v);
        v
    }
}

fn allocator(v: &Value, pid: u32) -> &Value {
    let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid);
    &p.unwrap_or_else(|| panic!("{pid}: {v:#}"))["allocator"]
}

#[test]
fn torch_1_12_without_uuid_or_backend_call_is_matched_through_cuda_visible_devices() {
    // 1.12: no get_allocator_backend (the native allocator is the only one),
    // no device uuid, no requested_bytes; CUDA ordinal 0 is GPU 2 here.
    let stack = Stack::start(json!({"generation": "1.12"}), json!({}), &[], &[("CUDA_VISIBLE_DEVICES", "2,0")]);
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(2, pid)]));
    let v = stack.json(&sim);
    let a = allocator(&v, pid);
    assert_eq!(a["framework_version"], "1.12.1");
    assert_eq!(a["backend"], "native");
    assert_eq!(a["cuda_visible_devices"], "2,0");
    let d = &a["devices"][0];
    assert_eq!((d["gpu"].clone(), d["gpu_match"].clone()), (json!(2), json!("cuda_visible_devices")), "{d:#}");
    assert_eq!(d["fragmentation"], 0.3, "native allocator: inactive split / reserved");
    assert_eq!(d["requested"], Value::Null, "1.12 keeps no requested_bytes");
    assert_eq!(d["overhead"], 12_000 * (1 << 20) - 10 * GIB);
    assert_eq!(v["gpus"][2]["allocator"]["probed_processes"], 1);
}

#[test]
fn torch_2_0_without_uuid_and_without_cuda_visible_devices_uses_the_ordinal() {
    let stack = Stack::start(json!({"generation": "2.0"}), json!({}), &[], &[]);
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(0, pid)]));
    let v = stack.json(&sim);
    let d = &allocator(&v, pid)["devices"][0];
    assert_eq!((d["gpu"].clone(), d["gpu_match"].clone()), (json!(0), json!("cuda_visible_devices")), "{d:#}");
}

#[test]
fn torch_2_5_bare_uuid_matches_nvmls_gpu_uuid() {
    let stack = Stack::start(json!({"generation": "2.5"}), json!({"uuid": UUIDS[1]}), &[], &[]);
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(1, pid)]));
    let v = stack.json(&sim);
    let d = &allocator(&v, pid)["devices"][0];
    assert_eq!((d["gpu"].clone(), d["gpu_match"].clone()), (json!(1), json!("uuid")), "{d:#}");
}

#[test]
fn cuda_malloc_async_counters_it_does_not_keep_are_null_not_zero() {
    let stack =
        Stack::start(json!({"generation": "2.7", "backend": "cudaMallocAsync"}), json!({"uuid": UUIDS[0]}), &[], &[]);
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(0, pid)]));
    let v = stack.json(&sim);
    let d = &allocator(&v, pid)["devices"][0];
    assert_eq!((d["allocated"].clone(), d["reserved"].clone()), (json!(4 * GIB), json!(10 * GIB)));
    for key in ["inactive_split", "segments", "alloc_retries", "ooms", "requested", "fragmentation"] {
        assert_eq!(d[key], Value::Null, "{key}: {d:#}");
    }
    let table = sim.gpuscope().arg("-1").env("GPUSCOPE_PROBE_DIR", &stack.probe_dir).output().unwrap();
    assert_success(&table);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("frag n/a"), "{text}");
}

#[test]
fn torch_2_9_reads_pytorch_alloc_conf_first_and_sees_settings_made_at_run_time() {
    settings_made_at_run_time_are_seen("2.9", "PYTORCH_ALLOC_CONF");
}

/// 2.11 has a setter but no getter (seen on a real 2.11.0+cu130), and from
/// 2.10 PYTORCH_CUDA_ALLOC_CONF is read first again: the probe learns the
/// string from the setter it wraps.
#[test]
fn torch_2_11_reads_pytorch_cuda_alloc_conf_first_and_sees_settings_made_at_run_time() {
    settings_made_at_run_time_are_seen("2.11", "PYTORCH_CUDA_ALLOC_CONF");
}

fn settings_made_at_run_time_are_seen(generation: &str, var_read_first: &str) {
    let stack = Stack::start(
        json!({"generation": generation}),
        json!({"uuid": UUIDS[0], "pci": [0, 0x18, 0]}),
        &["--set-allocator-settings", "expandable_segments:True"],
        &[("PYTORCH_ALLOC_CONF", "max_split_size_mb:256")],
    );
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(0, pid)]));
    // The probe publishes the run-time settings on its next sample.
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = stack.json(&sim);
        if allocator(&v, pid)["alloc_conf_source"] == "runtime" || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let a = allocator(&v, pid);
    assert_eq!(a["alloc_conf_var"], var_read_first);
    assert_eq!(
        (a["alloc_conf"].clone(), a["alloc_conf_source"].clone()),
        (json!("expandable_segments:True"), json!("runtime"))
    );
    assert_eq!(a["expandable_segments"], true);
    assert_eq!(a["alloc_conf_env"]["pytorch_cuda_alloc_conf"], "max_split_size_mb:512", "both raw values: {a:#}");
    let d = &a["devices"][0];
    assert_eq!(d["fragmentation"], Value::Null, "expandable segments leave inactive split uncounted");
    assert_eq!(d["gpu"], 0);
}

#[test]
fn jax_without_preallocation_fragmentation_is_xlas_own() {
    // XLA_PYTHON_CLIENT_PREALLOCATE=false: the pool is far below the limit,
    // and its free part is one block, so XLA's own metric is 0.
    let dir = tempfile::tempdir().unwrap();
    let probe_dir = dir.path().join("gpuscope").join("probes");
    let jax_script = dir.path().join("jax.json");
    let stats = json!({"bytes_in_use": 3 * GIB, "peak_bytes_in_use": 3 * GIB, "bytes_limit": 60 * GIB,
        "pool_bytes": 4 * GIB, "peak_pool_bytes": 4 * GIB, "largest_free_block_bytes": GIB});
    write_script(
        &jax_script,
        &json!({"backends": ["cuda"], "devices": [
        {"id": 0, "platform": "gpu", "local_hardware_id": 0, "stats": stats}]}),
    );
    let code = "import sys, time, gpuscope_probe\ngpuscope_probe.start(0.1)\nimport jax\n\
        jax._standin_init_backends()\nwhile True: time.sleep(0.1)\n";
    let path = format!("{}:{}", repo("tests/probe/standin").display(), repo("assets").display());
    let mut child = Command::new("python3")
        .args(["-c", code])
        .env("PYTHONPATH", path)
        .env("STANDIN_JAX_SCRIPT", &jax_script)
        .env("GPUSCOPE_PROBE_DIR", &probe_dir)
        .env("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_probe_file(&probe_dir, pid);
    let sim = Sim::new(&scenario(&[(0, pid)]));
    let out = sim.gpuscope().arg("--json").env("GPUSCOPE_PROBE_DIR", &probe_dir).output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &allocator(&v, pid)["devices"][0];
    assert_eq!(d["fragmentation"], 0.0, "{d:#}");
    assert_eq!(d["largest_free_block"], GIB);
    assert_eq!(d["gpu"], 0, "JAX's local_hardware_id is the CUDA ordinal");
}

#[test]
fn a_rank_forked_before_cuda_is_joined_to_its_gpu() {
    let stack = Stack::start(
        json!({"generation": "2.5"}),
        json!({"uuid": UUIDS[0]}),
        &["--no-init", "--fork", "--fork-init"],
        &[],
    );
    let child = stack.trainer.pid_of("fork", 2);
    wait_for_probe_file(&stack.probe_dir, child);
    let sim = Sim::new(&scenario(&[(0, child)]));
    let v = stack.json(&sim);
    let a = allocator(&v, child);
    assert_eq!(a["devices"][0]["gpu"], 0);
    assert_eq!(a["state"], "fresh");
}

#[test]
fn an_oom_seen_by_the_probe_raises_the_oom_alert_where_the_backend_counts_none() {
    let stack = Stack::start(
        json!({"generation": "2.7", "backend": "cudaMallocAsync"}),
        json!({"uuid": UUIDS[0]}),
        &["--oom-after", "2.0"],
        &[],
    );
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(0, pid)]));
    let out = sim
        .gpuscope()
        .args(["--json", "--watch", "--interval", "200ms", "--count", "25"])
        .env("GPUSCOPE_PROBE_DIR", &stack.probe_dir)
        .output()
        .unwrap();
    assert_success(&out);
    let lines: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = lines.last().unwrap();
    assert_eq!(allocator(last, pid)["oom_events"], 1);
    let fired = lines
        .iter()
        .flat_map(|v| v["alerts"].as_array().cloned().unwrap_or_default())
        .find(|a| a["kind"] == "oom" && a["pid"] == pid);
    assert!(fired.is_some(), "no oom alert: {:#}", last["alerts"]);
}

/// Three 1.3 GiB segments split by live tensors: 2100 MiB free, no free
/// block over 400 MiB.
fn fragmented_segments() -> Value {
    let seg = json!({"pool": "large", "blocks": [["active_allocated", 512], ["inactive", 300],
        ["active_allocated", 100], ["inactive", 400]]});
    json!([seg, seg, seg])
}

#[test]
fn an_oom_post_mortem_reaches_json_the_table_the_alert_and_a_replay() {
    let stack = Stack::start(
        json!({"generation": "2.5"}),
        json!({"uuid": UUIDS[0], "device_free": 300 << 20, "segments": fragmented_segments()}),
        &["--oom-caught", "2048"],
        &[],
    );
    let pid = stack.pid();
    let sim = Sim::new(&scenario(&[(0, pid)]));
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = stack.json(&sim);
        if allocator(&v, pid)["last_oom"].as_array().is_some_and(|a| !a.is_empty()) || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let r = &allocator(&v, pid)["last_oom"][0];
    assert_eq!(
        (r["source"].clone(), r["gpu"].clone(), r["requested"].clone()),
        (json!("observer"), json!(0), json!(2 * GIB))
    );
    let verdict =
        "needed 2.0 GiB on GPU 0; 2.1 GiB free in the allocator but the largest free block is 400 MiB (fragmentation)";
    assert_eq!(r["verdict"], verdict, "{r:#}");
    assert_eq!(allocator(&v, pid)["devices"][0]["largest_free_block"], 400 << 20);
    // A one-shot look right after the OOM raises the alert with the reading.
    let alert = v["alerts"].as_array().unwrap().iter().find(|a| a["kind"] == "oom" && a["pid"] == pid).cloned();
    let alert = alert.unwrap_or_else(|| panic!("no oom alert: {:#}", v["alerts"]));
    assert!(alert["message"].as_str().unwrap().ends_with(verdict), "{alert:#}");
    let table = sim.gpuscope().arg("-1").env("GPUSCOPE_PROBE_DIR", &stack.probe_dir).output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("CUDA out of memory: needed 2.0 GiB on GPU 0"), "{text}");
    // Recorded, then replayed: the post-mortem and its alert at its moment.
    let rec = stack._dir.path().join("run.ndjson");
    let out = sim
        .gpuscope()
        .args(["record", "--interval", "100ms", "--duration", "1s"])
        .arg(&rec)
        .env("GPUSCOPE_PROBE_DIR", &stack.probe_dir)
        .output()
        .unwrap();
    assert_success(&out);
    let out = common::gpuscope().args(["replay", "--json"]).arg(&rec).output().unwrap();
    assert_success(&out);
    let replayed: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let first = &replayed[0];
    assert_eq!(allocator(first, pid)["last_oom"][0]["verdict"], verdict);
    assert!(
        first["alerts"].as_array().unwrap().iter().any(|a| a["kind"] == "oom" && a["pid"] == pid),
        "{:#}",
        first["alerts"]
    );
}
