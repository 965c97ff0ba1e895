use super::spec::{GpuState, ProcessKind};
use super::*;

fn parse(text: &str) -> Scenario {
    Scenario::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> String {
    Scenario::parse(text).expect_err("scenario should be rejected")
}

#[test]
fn empty_file_gets_documented_defaults() {
    let s = parse("");
    assert_eq!(s.driver_version, "560.35.03");
    assert_eq!(s.cuda_driver_version, 12060);
    assert_eq!(s.nvml_version, "12.560.35.03");
    assert_eq!(s.call_delay_ms, 0);
    assert_eq!(s.init_error, None);
    assert!(s.gpus.is_empty());
}

#[test]
fn nvml_version_follows_the_driver_unless_given() {
    assert_eq!(parse("driver_version = \"550.1\"").nvml_version, "12.550.1");
    assert_eq!(parse("nvml_version = \"13.0\"").nvml_version, "13.0");
}

#[test]
fn bare_gpus_get_defaults_and_derived_identifiers() {
    let s = parse("[[gpu]]\n[[gpu]]\n");
    let (a, b) = (&s.gpus[0], &s.gpus[1]);
    assert_eq!(a.spec.name, "NVIDIA Simulated GPU");
    assert_eq!(a.uuid, "GPU-00000000-5c0b-4e5a-9d1e-000000000000");
    assert_eq!(b.uuid, "GPU-00000000-5c0b-4e5a-9d1e-000000000001");
    assert_eq!(a.pci.bus_id(), "00000000:18:00.0");
    assert_eq!(b.pci.bus_id(), "00000000:28:00.0");
    assert_eq!(a.spec.state, GpuState::Ok);
    assert_eq!(a.spec.memory_total_mib, 81559);
    assert_eq!(a.spec.temperature_c.at(5.0), 35.0);
    assert_eq!(a.spec.fan_percent.at(5.0), 30.0);
    assert_eq!(a.spec.power_draw_w.at(5.0), 70.0);
    assert_eq!(a.spec.power_limit_w, 700.0);
    assert_eq!(a.spec.sm_clock_mhz.at(0.0), 1980.0);
    assert_eq!(a.spec.mem_clock_mhz.at(0.0), 2619.0);
    assert!(a.supports(Reading::Fan));
}

#[test]
fn memory_used_defaults_to_the_known_process_memory() {
    let s = parse(
        "[[gpu]]\nmemory_total_mib = 1000\nmemory_reserved_mib = 100\n\
         [[gpu.process]]\npid = 1\nused_mib = 300\n\
         [[gpu.process]]\npid = 2\ntype = \"graphics\"\n\
         [[gpu.process]]\npid = 3\ntype = \"both\"\nused_mib = 2000\n",
    );
    let gpu = &s.gpus[0];
    assert_eq!(gpu.spec.process[1].kind, ProcessKind::Graphics);
    let m = gpu.memory(0.0);
    let mib = 1_048_576;
    // 300 + 2000 MiB is clamped to what the reservation leaves.
    assert_eq!((m.total, m.reserved, m.used, m.free), (1000 * mib, 100 * mib, 900 * mib, 0));
    let explicit = parse("[[gpu]]\nmemory_total_mib = 1000\nmemory_used_mib = 250\n");
    assert_eq!(explicit.gpus[0].memory(0.0).free, 750 * mib);
}

#[test]
fn unknown_keys_are_rejected_by_name_with_position() {
    let e = error("driver_version = \"1\"\nfan_speed = 3\n");
    assert!(e.contains("fan_speed") && e.contains("line 2"), "{e}");
    let e = error("[[gpu]]\nname = \"x\"\ntemperature = 50\n");
    assert!(e.contains("temperature") && e.contains("line 3"), "{e}");
    let e = error("[[gpu]]\n[[gpu.process]]\npid = 1\ncmd = \"x\"\n");
    assert!(e.contains("cmd"), "{e}");
    assert!(!e.contains('\n'), "errors must be one line: {e}");
}

#[test]
fn bad_enum_values_and_missing_pids_are_rejected() {
    assert!(error("[[gpu]]\nunsupported = [\"fans\"]\n").contains("fans"));
    assert!(error("[[gpu]]\nstate = \"gone\"\n").contains("gone"));
    assert!(error("init_error = \"nope\"\n").contains("nope"));
    assert!(error("[[gpu]]\n[[gpu.process]]\ntype = \"compute\"\n").contains("pid"));
}

#[test]
fn semantic_errors_name_the_gpu() {
    let e = error("[[gpu]]\n[[gpu]]\npstate = 16\n");
    assert!(e.starts_with("gpu[1]") && e.contains("pstate"), "{e}");
    assert!(error("[[gpu]]\npci_bus_id = \"18:00.0\"\n").contains("pci_bus_id"));
    assert!(error("[[gpu]]\nmemory_total_mib = 1\nmemory_reserved_mib = 2\n").contains("reserved"));
    assert!(error("[[gpu]]\nuuid = \"A\"\n[[gpu]]\nuuid = \"A\"\n").contains("twice"));
    assert!(error(&format!("[[gpu]]\nname = \"{}\"\n", "x".repeat(96))).contains("name"));
}

#[test]
fn missing_functions_must_name_exported_functions() {
    let s = parse("missing_functions = [\"nvmlDeviceGetFanSpeed_v2\"]");
    assert!(s.hides("nvmlDeviceGetFanSpeed_v2"));
    assert!(!s.hides("nvmlDeviceGetFanSpeed"));
    assert!(error("missing_functions = [\"nvmlDeviceGetFanSpeedz\"]").contains("FanSpeedz"));
    assert!(error("missing_functions = [\"nvmlErrorString\"]").contains("nvmlErrorString"));
}

#[test]
fn init_errors_parse_from_snake_case() {
    let s = parse("init_error = \"lib_rm_version_mismatch\"");
    assert_eq!(s.init_error, Some(InitError::LibRmVersionMismatch));
}

#[test]
fn demo_scenario_describes_the_documented_node() {
    let s = parse(DEMO_SCENARIO);
    assert_eq!(s.gpus.len(), 5);
    let pids: Vec<_> =
        (s.gpus.iter()).map(|g| g.spec.process.iter().map(|p| p.pid_now().unwrap()).collect::<Vec<_>>()).collect();
    assert_eq!(pids, [vec![4123401], vec![4123402], vec![4123510], vec![], vec![]]);
    assert!(s.gpus[4].is_lost(), "the fifth GPU fell off the bus");
    let gib = 1u64 << 30;
    for t in [0.0, 200.0, 450.0, 899.0] {
        for gpu in &s.gpus[..2] {
            let used = gpu.memory(t).used;
            assert!((60 * gib..=70 * gib).contains(&used), "t={t}: {used}");
        }
    }
    let idle = &s.gpus[3];
    assert_eq!((idle.spec.pstate, idle.memory(0.0).used), (8, 0));
}

#[test]
fn topology_lists_gpus_from_each_step_on() {
    let s = parse(
        "[[gpu]]\n[[gpu]]\n[[gpu]]\n\
         [[topology]]\nat_s = 0\ngpus = [0, 1]\n\
         [[topology]]\nat_s = 2.5\ngpus = [1]\n\
         [[topology]]\nat_s = 5\ngpus = [2, 1, 0]\n",
    );
    assert_eq!(s.visible(0.0), [0, 1]);
    assert_eq!(s.visible(2.4), [0, 1]);
    assert_eq!(s.visible(2.5), [1]);
    assert_eq!(s.visible(99.0), [2, 1, 0]);
    assert_eq!(parse("[[gpu]]\n[[gpu]]\n").visible(7.0), [0, 1], "no steps: all, in file order");
}

#[test]
fn bad_topology_and_hangs_are_refused() {
    assert!(error("[[gpu]]\n[[topology]]\nat_s = 0\ngpus = [1]\n").contains("there is no gpu[1]"));
    assert!(error("[[gpu]]\n[[topology]]\nat_s = 0\ngpus = [0, 0]\n").contains("listed twice"));
    let backwards = "[[gpu]]\n[[topology]]\nat_s = 2\ngpus = [0]\n[[topology]]\nat_s = 1\ngpus = []\n";
    assert!(error(backwards).contains("later than the step before"));
    assert!(error("hang_after_s = -1").contains("hang_after_s"));
    assert!(error("[[gpu]]\nhang_after_s = nan").contains("hang_after_s"));
    let gpu = &parse("[[gpu]]\nhang_after_s = 2").gpus[0];
    assert!(!gpu.hangs_at(1.9) && gpu.hangs_at(2.0));
    let s = parse("hang_init = true\nhang_after_s = 3");
    assert!(s.hang_init);
    assert_eq!(s.hang_after_s, Some(3.0));
}

const MIG_7WAY: &str = include_str!("../../scenarios/mig-h100-7way.toml");

#[test]
fn the_shipped_mig_scenario_is_a_seven_way_h100() {
    let s = parse(MIG_7WAY);
    let gpu = &s.gpus[0];
    assert_eq!(gpu.mig.len(), 7);
    assert!(gpu.mig.iter().all(|m| m.name == "NVIDIA H100 80GB HBM3 MIG 1g.10gb" && m.uuid.starts_with("MIG-")));
    assert_eq!(gpu.mig.iter().filter(|m| !m.spec.process.is_empty()).count(), 4);
    // The parent's used memory is what its MIG devices hold.
    let used: u64 = gpu.mig.iter().map(|m| m.memory(0.0).used).sum();
    assert_eq!(gpu.memory(0.0).used, used);
    assert_eq!(gpu.mig[0].memory(0.0).used, 8120 << 20);
}

#[test]
fn mig_devices_are_checked() {
    let base = "[[gpu]]\nmig_current = true\n[[gpu.mig]]\nprofile = \"1g.10gb\"\nmemory_total_mib = 9856\n";
    assert!(
        error("[[gpu]]\n[[gpu.mig]]\nprofile = \"1g.10gb\"\nmemory_total_mib = 1\ngpu_instance_id = 1\n")
            .contains("mig_current")
    );
    assert!(error(base).contains("gpu_instance_id"));
    let twice = format!(
        "{base}gpu_instance_id = 1\n[[gpu.mig]]\nprofile = \"1g.10gb\"\nmemory_total_mib = 1\ngpu_instance_id = 1\n"
    );
    assert!(error(&twice).contains("used twice"), "{}", error(&twice));
    assert!(error(&format!("{base}gpu_instance_id = 1\nuuid = \"GPU-x\"\n")).contains("must start with \"MIG-\""));
    let eight: String = (0..8)
        .map(|i| format!("[[gpu.mig]]\nprofile = \"1g.10gb\"\nmemory_total_mib = 1\ngpu_instance_id = {i}\n"))
        .collect();
    assert!(error(&format!("[[gpu]]\nmig_current = true\n{eight}")).contains("at most 7"));
    let huge = "[[gpu]]\nmig_current = true\nmemory_total_mib = 100\n[[gpu.mig]]\nprofile = \"7g.80gb\"\nmemory_total_mib = 101\ngpu_instance_id = 0\n";
    assert!(error(huge).contains("exceeds"));
}

#[test]
fn gpm_tables_name_nvml_metrics_and_mark_hopper_boards() {
    let s = parse("[[gpu]]\n[gpu.gpm]\nsm_util = 7\nnvlink_l17_tx_per_sec = 5\n[[gpu]]\n");
    let ids: Vec<u32> = s.gpus[0].gpm.as_ref().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [97, 2]);
    assert!(s.gpus[1].gpm.is_none());
    assert!(error("[[gpu]]\n[gpu.gpm]\nsm_active = 7\n").contains("\"sm_active\""));
    assert!(error("[[gpu]]\ngpm_no_permission_after_s = -1\n").contains("gpm_no_permission_after_s"));
    let mig_only = "[[gpu]]\nmig_current = true\n[[gpu.mig]]\nprofile = \"7g.80gb\"\nmemory_total_mib = 80000\ngpu_instance_id = 0\n[gpu.mig.gpm]\nsm_util = 1\n";
    assert!(error(mig_only).contains("only on a board with gpm"));
}

#[test]
fn functions_newer_than_the_driver_are_missing() {
    let old = parse("driver_version = \"535.183.01\"");
    assert!(old.hides("nvmlDeviceGetProcessesUtilizationInfo"));
    assert!(!old.hides("nvmlGpmSampleGet"));
    assert!(parse("driver_version = \"515.105.01\"").hides("nvmlGpmSampleGet"));
    assert!(!parse("").hides("nvmlDeviceGetProcessesUtilizationInfo"));
}

#[test]
fn the_demo_has_gpm_on_every_h100_and_one_gpu_with_idle_sms() {
    let s = parse(DEMO_SCENARIO);
    assert!(s.gpus.iter().all(|g| g.gpm.is_some()));
    let sm = |g: &Gpu| g.gpm.as_ref().unwrap().iter().find(|m| m.id == 2).map(|m| m.value.clone());
    let low = (0..450).map(|i| f64::from(i) / 10.0).all(|t| sm(&s.gpus[2]).unwrap().at(t) < 10.0);
    assert!(low);
}

#[test]
fn scripted_events_and_health_readings_are_checked() {
    let gpu = &parse(
        "[[gpu]]\nrecovery_action = \"drain_and_reset\"\nrecovery_action_from_s = 2\n\
         [[gpu.event]]\nat_s = 1.5\ntype = \"xid\"\nxid = 48\n\
         [[gpu.event]]\nat_s = 3\ntype = \"ecc_double_bit\"\n",
    )
    .gpus[0];
    assert_eq!(gpu.spec.event.len(), 2);
    assert_eq!(gpu.recovery_action(1.0).code(), 0, "none until recovery_action_from_s");
    assert_eq!(gpu.recovery_action(2.0).code(), 4);
    assert!(error("[[gpu]]\n[[gpu.event]]\nat_s = 1\ntype = \"xid\"\n").contains("needs its xid"));
    assert!(error("[[gpu]]\n[[gpu.event]]\nat_s = 1\ntype = \"pstate\"\nxid = 3\n").contains("only an xid event"));
    assert!(error("[[gpu]]\n[[gpu.event]]\nat_s = -1\ntype = \"pstate\"\n").contains("at_s"));
    assert!(error("[[gpu]]\nnvlink_errors_per_s = { replay = -1 }\n").contains("nvlink_errors_per_s"));
}
