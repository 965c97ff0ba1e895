//! The real binary, on the simulated NVML loaded through nvml-wrapper's
//! normal path: what the scenario says is what `--json` prints.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{MIB, Sim, Sleeper, assert_success, assert_valid};
use serde_json::{Value, json};

fn scenario(trainer: u32, viewer: u32) -> String {
    format!(
        r#"
driver_version = "560.35.03"
cuda_driver_version = 12060

[[gpu]]
name = "NVIDIA H100 80GB HBM3"
uuid = "GPU-11111111-2222-3333-4444-555555555555"
pci_bus_id = "00000000:18:00.0"
memory_total_mib = 81559
memory_reserved_mib = 521
memory_used_mib = 40000
utilization_gpu = 97
utilization_memory = 64
encoder = 3
decoder = 4
temperature_c = 71
fan_percent = 45
power_draw_w = 612.5
power_limit_w = 700
energy_at_init_mj = 5000000000
sm_clock_mhz = 1980
mem_clock_mhz = 2619
pcie_tx_kib_s = 1000
pcie_rx_kib_s = 2000
pstate = 0
throttle_reasons = 4
mig_current = false
mig_pending = true
serial = "1654922012345"
persistence_mode = true
compute_mode = "exclusive_process"
video_clock_mhz = 1755
max_sm_clock_mhz = 1980
max_mem_clock_mhz = 2619
max_video_clock_mhz = 1755
ecc_corrected_volatile = 2
ecc_uncorrected_volatile = 0
ecc_corrected_aggregate = 7
ecc_uncorrected_aggregate = 1
retired_pages_pending = true
bar1_total_mib = 131072
bar1_used_mib = 4

[[gpu.process]]
pid = {trainer}
type = "compute"
used_mib = 30000

[[gpu.process]]
pid = {viewer}
type = "both"
used_mib = 512

[[gpu]]
name = "NVIDIA A10"
memory_total_mib = 23028
unsupported = ["fan", "encoder", "decoder", "mig", "serial", "persistence_mode", "compute_mode", "max_clocks", "bar1", "energy"]
ecc_enabled = false

[[gpu.process]]
pid = {trainer}
type = "compute"

[[gpu.process]]
pid = 4194000
type = "graphics"
used_mib = 100
name = "/usr/bin/Xorg"
"#
    )
}

fn gpu(v: &Value, i: usize) -> &Value {
    &v["gpus"][i]
}

#[test]
fn every_field_comes_from_the_scenario() {
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let v = sim.json(&[]);
    assert_valid(&v);

    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["simulated"], false, "loaded through --nvml-lib, gpuscope cannot know");
    assert_eq!(v["driver"]["driver_version"], "560.35.03");
    assert_eq!(v["driver"]["cuda_driver_version"], "12.6");
    let nvml = &v["sources"]["nvml"];
    assert_eq!((&nvml["ok"], &nvml["error"]), (&json!(true), &Value::Null));
    assert!(nvml["calls"].as_u64().is_some_and(|n| n > 0), "the tick's NVML calls: {nvml}");

    let g0 = gpu(&v, 0);
    assert_eq!(g0["index"], 0);
    assert_eq!(g0["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(g0["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(g0["pci_bus_id"], "00000000:18:00.0");
    assert_eq!(g0["state"], "ok");
    assert_eq!(g0["error"], Value::Null);
    assert_eq!(
        g0["memory"],
        json!({
            "total": 81559 * MIB,
            "used": 40000 * MIB,
            "free": (81559 - 521 - 40000) * MIB,
            "driver_reserved": 521 * MIB,
        })
    );
    assert_eq!(g0["utilization"], json!({"gpu": 97, "memory": 64, "encoder": 3, "decoder": 4}));
    assert_eq!(g0["temperature_c"], 71);
    assert_eq!(g0["fan_percent"], 45);
    assert_eq!(g0["power_draw_w"], 612.5);
    assert_eq!(g0["power_limit_w"], 700.0);
    // The counter at init plus 612.5 J for each second since (well under
    // a minute in a one-shot).
    let mj = g0["energy_mj"].as_u64().unwrap();
    assert!((5_000_000_000..5_000_000_000 + 612_500 * 60).contains(&mj), "{mj}");
    assert_eq!(g0["clocks"], json!({"sm_mhz": 1980, "memory_mhz": 2619, "graphics_mhz": 1980, "video_mhz": 1755}));
    assert_eq!(g0["serial"], "1654922012345");
    assert_eq!(g0["persistence_mode"], true);
    assert_eq!(g0["compute_mode"], "exclusive_process");
    assert_eq!(g0["power_management_limit_w"], 700.0);
    assert_eq!(g0["max_clocks"], json!({"sm_mhz": 1980, "memory_mhz": 2619, "graphics_mhz": 1980, "video_mhz": 1755}));
    assert_eq!(
        g0["ecc"],
        json!({"mode_current": true, "mode_pending": true, "corrected_volatile": 2, "uncorrected_volatile": 0,
               "corrected_aggregate": 7, "uncorrected_aggregate": 1, "retired_pages_pending": true})
    );
    assert_eq!(g0["bar1_memory"], json!({"total": 131072 * MIB, "used": 4 * MIB, "free": (131072 - 4) * MIB}));
    // Rates come from the byte counters between ticks: a one-shot has one.
    assert_eq!(g0["pcie"], json!({"tx_bytes_per_s": null, "rx_bytes_per_s": null}));
    assert_eq!(g0["performance_state"], "P0");
    assert_eq!(g0["throttle_reasons"], json!(["sw_power_cap"]));
    assert_eq!(g0["mig_mode"], json!({"current": false, "pending": true}));
    // The link as the driver says (an H100's Gen5 x16 by default); growth
    // of the replay counter needs a second tick.
    assert_eq!(
        g0["pcie_link"],
        json!({"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16,
               "replay_counter": 0, "replays_since_last": null})
    );

    // Unsupported readings are null, with no error: that is normal hardware.
    let g1 = gpu(&v, 1);
    assert_eq!(g1["name"], "NVIDIA A10");
    assert_eq!(g1["fan_percent"], Value::Null);
    assert_eq!(g1["energy_mj"], Value::Null, "a board that keeps no energy counter");
    assert_eq!(g1["utilization"]["encoder"], Value::Null);
    assert_eq!(g1["utilization"]["decoder"], Value::Null);
    assert_eq!(g1["mig_mode"], Value::Null);
    for field in ["serial", "persistence_mode", "compute_mode"] {
        assert_eq!(g1[field], Value::Null, "{field}");
    }
    assert!(g1["max_clocks"].as_object().unwrap().values().all(Value::is_null));
    assert!(g1["bar1_memory"].as_object().unwrap().values().all(Value::is_null));
    // ECC off: the mode says so, and there are no counts to read.
    assert_eq!(
        g1["ecc"],
        json!({"mode_current": false, "mode_pending": false, "corrected_volatile": null, "uncorrected_volatile": null,
               "corrected_aggregate": null, "uncorrected_aggregate": null, "retired_pages_pending": false})
    );
    assert_eq!(g1["error"], Value::Null);
    assert_eq!(g1["memory"]["used"], 100 * MIB, "defaults to the sum of the known process figures");
}

#[test]
fn processes_are_merged_by_pid_and_joined_with_the_host() {
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let v = sim.json(&[]);
    let procs = v["processes"].as_array().unwrap();
    let find = |pid: u32| procs.iter().find(|p| p["pid"] == pid).unwrap_or_else(|| panic!("{pid} in {procs:?}"));

    let t = find(trainer.pid());
    // One entry across two GPUs; on the second NVML could not say how much.
    assert_eq!(
        t["gpus"],
        json!([
            {"index": 0, "type": "compute", "used_memory": 30000 * MIB, "mig_device": null, "mig_uuid": null},
            {"index": 1, "type": "compute", "used_memory": null, "mig_device": null, "mig_uuid": null},
        ])
    );
    assert_eq!(t["gpu_memory_total"], 30000 * MIB);
    assert_eq!(t["name"], "sleep");
    assert_eq!(t["command"], "sleep 60");
    assert_eq!(t["parent_pid"], std::process::id());
    let own = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(t["parent_name"], own.trim_end(), "the parent's name, read by the host source");
    assert!(t["user"].is_string());
    assert!(t["host_memory"].as_u64().unwrap() > 0);
    assert!(t["start_time_unix_ms"].as_u64().unwrap() > 1_600_000_000_000);
    assert_eq!(t["cpu_percent"], Value::Null, "a single sample has no CPU figure");

    // Listed as compute and graphics: one entry of both kinds.
    let w = find(viewer.pid());
    assert_eq!(
        w["gpus"],
        json!([{"index": 0, "type": "compute_graphics", "used_memory": 512 * MIB, "mig_device": null, "mig_uuid": null}])
    );

    // Not visible on this host (another PID namespace): NVML's name, and
    // null for what only the host could say.
    let x = find(4194000);
    assert_eq!(x["name"], "/usr/bin/Xorg");
    assert_eq!(x["user"], Value::Null);
    assert_eq!(x["command"], Value::Null);
    assert_eq!(x["host_memory"], Value::Null);
}

#[test]
fn host_figures_are_present() {
    let sim = Sim::new("[[gpu]]\n");
    let v = sim.json(&[]);
    assert_valid(&v);
    let h = &v["host"];
    assert!(h["hostname"].is_string());
    assert!(h["memory_total"].as_u64().unwrap() >= h["memory_available"].as_u64().unwrap());
    assert!(h["cpu_count"].as_u64().unwrap() >= 1);
    assert_eq!(v["sources"]["host"]["ok"], true);
}

#[test]
fn a_lost_gpu_is_marked_and_the_others_report() {
    let sim = Sim::new(
        "[[gpu]]\nname = \"A\"\nutilization_gpu = 50\n\n[[gpu]]\nname = \"B\"\nstate = \"lost\"\n\n[[gpu]]\nname = \"C\"\ntemperature_c = 40\n",
    );
    let out = sim.gpuscope().arg("--json").output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(gpu(&v, 0)["utilization"]["gpu"], 50);
    let lost = gpu(&v, 1);
    assert_eq!(lost["state"], "lost");
    // Lost before gpuscope started: NVML refuses even its name.
    assert_eq!(lost["name"], Value::Null);
    assert_eq!(lost["memory"]["used"], Value::Null);
    assert_eq!(lost["temperature_c"], Value::Null);
    assert_eq!(gpu(&v, 2)["temperature_c"], 40);

    let table = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&table);
    assert!(String::from_utf8_lossy(&table.stdout).contains("LOST"));
}

#[test]
fn gpus_flag_selects_by_index_and_uuid_prefix() {
    let sim = Sim::new(
        "[[gpu]]\nuuid = \"GPU-aaaa0000\"\n[[gpu]]\nuuid = \"GPU-bbbb0000\"\n[[gpu]]\nuuid = \"GPU-cccc0000\"\n",
    );
    let v = sim.json(&["--gpus", "2,GPU-aaaa"]);
    let indices: Vec<u64> = v["gpus"].as_array().unwrap().iter().map(|g| g["index"].as_u64().unwrap()).collect();
    assert_eq!(indices, [0, 2]);

    let out = sim.gpuscope().args(["--json", "--gpus", "7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no GPU matches \"7\""), "{err}");
}

/// gpuscope in a container of its own, with NVML's (host) PIDs that happen
/// to be local processes too: they keep NVML's figures and name, and take
/// nothing from the local process of the same number.
#[test]
fn in_a_container_host_pids_never_take_a_local_process_s_identity() {
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let out = sim.gpuscope().env("GPUSCOPE_PID_NAMESPACE", "container").arg("--json").output().unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(v["sources"]["host"]["pid_namespace"], "container");
    let procs = v["processes"].as_array().unwrap();
    let t = procs.iter().find(|p| p["pid"] == trainer.pid()).unwrap();
    assert_eq!(t["other_namespace"], true);
    assert_eq!(t["gpus"][0]["used_memory"], 30000 * MIB, "NVML's figure is kept");
    for field in ["user", "command", "host_memory", "start_time", "parent_pid", "parent_name", "workload"] {
        assert_eq!(t[field], Value::Null, "{field}: {t:#}");
    }
    assert_eq!(v["gpus"][0]["memory"]["used"], 40000 * MIB);

    let table = sim.gpuscope().env("GPUSCOPE_PID_NAMESPACE", "container").arg("-1").output().unwrap();
    assert_success(&table);
    let text = String::from_utf8(table.stdout).unwrap();
    assert_eq!(text.matches("gpuscope runs in a container").count(), 1, "{text}");
    assert!(text.contains("[host]") && !text.contains("sleep 60"), "{text}");

    let bad = sim.gpuscope().env("GPUSCOPE_PID_NAMESPACE", "sideways").arg("--json").output().unwrap();
    let v: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(v["sources"]["host"]["error"], "GPUSCOPE_PID_NAMESPACE must be `host` or `container`, not \"sideways\"");
}

#[test]
fn the_host_namespace_is_reported_and_processes_carry_a_workload_field() {
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let v = sim.json(&[]);
    assert_valid(&v);
    assert_eq!(v["sources"]["host"]["pid_namespace"], "host");
    let t = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == trainer.pid()).unwrap().clone();
    assert_eq!(t["other_namespace"], false);
    // Whatever cgroup this test runs in, the field is there, and a child
    // shares its parent's cgroup, so both name the same workload (or none).
    let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    assert!(t.get("workload").is_some(), "{t:#}");
    assert_eq!(t["workload"].is_null(), gpuscope::sources::workload::parse(&me).is_none(), "{me}\n{t:#}");
}

/// The detection itself, without a container runtime: gpuscope started in
/// a PID namespace (and procfs) of its own by `unshare`, on an NVML that
/// lists this namespace's PIDs, which are the host's as seen from there.
#[test]
fn started_in_a_new_pid_namespace_gpuscope_sees_it_is_in_a_container() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: unshare --pid needs root");
        return;
    }
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let home = sim.dir.path().join("home");
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(assert_cmd::cargo::cargo_bin("gpuscope"))
        .arg("--nvml-lib")
        .arg(&sim.lib)
        .arg("--json")
        .env("XDG_CONFIG_HOME", &home)
        .env("GPUSCOPE_PROBE_DIR", home.join("no-probes"))
        .env("GPUSCOPE_SIM_SCENARIO", &sim.scenario)
        .env_remove("GPUSCOPE_PID_NAMESPACE")
        .env_remove("GPUSCOPE_NVML_LIB")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert_eq!(v["sources"]["host"]["pid_namespace"], "container", "{v:#}");
    let procs = v["processes"].as_array().unwrap();
    let t = procs.iter().find(|p| p["pid"] == trainer.pid()).unwrap();
    assert_eq!((t["other_namespace"].clone(), t["command"].clone()), (json!(true), Value::Null), "{t:#}");
    assert_eq!(t["gpus"][0]["used_memory"], 30000 * MIB);
}

/// A cgroup made for the test, removed (deepest first) once its process is
/// gone; nothing outside it is touched.
struct TestCgroup {
    dirs: Vec<std::path::PathBuf>,
}

impl TestCgroup {
    /// `<root>/gpuscope-test-<pid>/docker/<id>` in a writable hierarchy:
    /// cgroup v2, else v1's `pids`.
    fn create(id: &str) -> Option<Self> {
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let root = if v2.join("cgroup.controllers").exists() { v2.to_path_buf() } else { v2.join("pids") };
        let top = root.join(format!("gpuscope-test-{}", std::process::id()));
        let mut made = Self { dirs: Vec::new() };
        for dir in [top.clone(), top.join("docker"), top.join("docker").join(id)] {
            std::fs::create_dir(&dir).ok()?;
            made.dirs.push(dir);
        }
        Some(made)
    }

    fn adopt(&self, pid: u32) -> bool {
        let leaf = self.dirs.last().unwrap();
        std::fs::write(leaf.join("cgroup.procs"), pid.to_string()).is_ok()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A process in a cgroup named as Docker names its containers shows that
/// container in the JSON, read by the real host source.
#[test]
fn a_process_in_a_docker_style_cgroup_shows_its_container() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: making a cgroup needs root");
        return;
    }
    let id = format!("{:016x}", std::process::id()).repeat(4);
    // Made first so that it is dropped last, after its process is gone,
    // even when an assertion fails.
    let Some(cgroup) = TestCgroup::create(&id) else {
        println!("skipped: no writable cgroup hierarchy here");
        return;
    };
    let trainer = Sleeper::spawn(&["60"]);
    let viewer = Sleeper::spawn(&["61"]);
    if !cgroup.adopt(trainer.pid()) {
        println!("skipped: cannot move a process into a new cgroup here");
        return;
    }
    let sim = Sim::new(&scenario(trainer.pid(), viewer.pid()));
    let v = sim.json(&[]);
    assert_valid(&v);
    let procs = v["processes"].as_array().unwrap();
    let t = procs.iter().find(|p| p["pid"] == trainer.pid()).unwrap();
    assert_eq!(t["workload"]["kind"], "docker", "{t:#}");
    assert_eq!(t["workload"]["container_id"], id);
    let w = procs.iter().find(|p| p["pid"] == viewer.pid()).unwrap();
    assert_ne!(w["workload"]["container_id"], id, "the other process is not in it");
    let table = sim.gpuscope().arg("-1").output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains(&format!("[{}]", &id[..12])), "{text}");
}

/// NVML's per-process samples reach the snapshot; the timestamp rule
/// (only samples newer than the last seen; NOT_FOUND when there are none)
/// keeps the last batch at ticks faster than the driver samples (100 ms in
/// the simulator), and a GPU that does not sample processes says `null`.
#[test]
fn per_process_utilisation_from_nvml_samples() {
    let worker = Sleeper::spawn(&["60"]);
    let sim = Sim::new(&format!(
        r#"
[[gpu]]
[[gpu.process]]
pid = {pid}
used_mib = 1000
sm_util = 61
mem_util = 23
enc_util = 4
dec_util = 5

[[gpu]]
unsupported = ["process_utilization"]
[[gpu.process]]
pid = {pid}
used_mib = 1000
"#,
        pid = worker.pid()
    ));
    let out = sim.gpuscope().args(["--json", "--watch", "--interval", "30ms", "--count", "8"]).output().unwrap();
    assert_success(&out);
    let expected = json!([{"pid": worker.pid(), "sm": 61, "memory": 23, "encoder": 4, "decoder": 5}]);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_valid(&v);
        assert_eq!(gpu(&v, 0)["process_utilization"], expected, "{line}");
        assert_eq!(gpu(&v, 1)["process_utilization"], Value::Null);
    }
}
