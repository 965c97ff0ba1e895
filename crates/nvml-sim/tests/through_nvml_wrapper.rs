//! The simulator as gpuscope sees it: loaded from a path by nvml-wrapper.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, PerformanceState, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use support::{scenario_test, sim_lines};

const MIB: u64 = 1 << 20;

fn full_scenario(parent_pid: u32) -> String {
    format!(
        r#"
driver_version = "555.42.06"
cuda_driver_version = 12050

[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
uuid = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
pci_bus_id = "00000000:3b:00.0"
memory_total_mib = 81920
memory_reserved_mib = 512
utilization_gpu = 87
utilization_memory = 41
encoder = 12
decoder = 7
temperature_c = 64
fan_percent = 55
power_draw_w = 312.5
power_limit_w = 400
sm_clock_mhz = 1410
mem_clock_mhz = 1593
pcie_tx_kib_s = 1234
pcie_rx_kib_s = 5678
pstate = 2
throttle_reasons = 0x24
mig_pending = true

[[gpu.process]]
pid = 1111
name = "trainer"
used_mib = 1024
sm_util = 50

[[gpu.process]]
pid = {parent_pid}
type = "graphics"

[[gpu.process]]
pid = 2222
type = "both"
name = "render"
used_mib = 512

[[gpu]]
"#
    )
}

#[test]
fn reports_the_scenario() {
    scenario_test("reports_the_scenario", Some(&full_scenario(std::process::id())), |sim| {
        // The scenario was written by the parent test process.
        let parent = std::os::unix::process::parent_id();
        let nvml = sim.nvml().unwrap();
        assert_eq!(nvml.device_count().unwrap(), 2);
        assert_eq!(nvml.sys_driver_version().unwrap(), "555.42.06");
        assert_eq!(nvml.sys_nvml_version().unwrap(), "12.555.42.06");
        assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12050);

        let d = nvml.device_by_index(0).unwrap();
        assert_eq!(d.name().unwrap(), "NVIDIA A100-SXM4-80GB");
        assert_eq!(d.uuid().unwrap(), "GPU-aaaaaaaa-1111-2222-3333-444444444444");
        let pci = d.pci_info().unwrap();
        assert_eq!((pci.bus_id.as_str(), pci.domain, pci.bus, pci.device), ("00000000:3B:00.0", 0, 0x3b, 0));
        let by_uuid = nvml.device_by_uuid("GPU-aaaaaaaa-1111-2222-3333-444444444444").unwrap();
        assert_eq!(by_uuid.index().unwrap(), 0);
        assert!(matches!(nvml.device_by_uuid("GPU-nope"), Err(NvmlError::NotFound)));
        assert!(matches!(nvml.device_by_index(2), Err(NvmlError::InvalidArg)));

        let m = d.memory_info().unwrap();
        assert_eq!((m.total, m.reserved, m.used), (81920 * MIB, 512 * MIB, 1536 * MIB));
        assert_eq!(m.free, m.total - m.reserved - m.used);
        let u = d.utilization_rates().unwrap();
        assert_eq!((u.gpu, u.memory), (87, 41));
        assert_eq!(d.encoder_utilization().unwrap().utilization, 12);
        assert_eq!(d.decoder_utilization().unwrap().utilization, 7);
        assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), 64);
        assert_eq!(d.num_fans().unwrap(), 1);
        assert_eq!(d.fan_speed(0).unwrap(), 55);
        assert!(matches!(d.fan_speed(1), Err(NvmlError::InvalidArg)));
        assert_eq!(d.power_usage().unwrap(), 312_500);
        assert_eq!(d.enforced_power_limit().unwrap(), 400_000);
        assert_eq!(d.power_management_limit().unwrap(), 400_000);
        assert_eq!(d.clock_info(Clock::Graphics).unwrap(), 1410);
        assert_eq!(d.clock_info(Clock::SM).unwrap(), 1410);
        assert_eq!(d.clock_info(Clock::Memory).unwrap(), 1593);
        assert_eq!(d.clock_info(Clock::Video).unwrap(), 1250);
        assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 1234);
        assert_eq!(d.pcie_throughput(PcieUtilCounter::Receive).unwrap(), 5678);
        assert_eq!(d.performance_state().unwrap(), PerformanceState::Two);
        let throttle = ThrottleReasons::SW_POWER_CAP | ThrottleReasons::SW_THERMAL_SLOWDOWN;
        assert_eq!(d.current_throttle_reasons().unwrap(), throttle);
        let mig = d.mig_mode().unwrap();
        assert_eq!((mig.current, mig.pending), (0, 1));

        let compute = d.running_compute_processes().unwrap();
        let summary: Vec<_> = compute.iter().map(|p| (p.pid, p.used_gpu_memory.clone())).collect();
        assert_eq!(summary, [(1111, UsedGpuMemory::Used(1024 * MIB)), (2222, UsedGpuMemory::Used(512 * MIB))]);
        assert_eq!((compute[0].gpu_instance_id, compute[0].compute_instance_id), (None, None));
        let graphics = d.running_graphics_processes().unwrap();
        let summary: Vec<_> = graphics.iter().map(|p| (p.pid, p.used_gpu_memory.clone())).collect();
        assert_eq!(summary, [(parent, UsedGpuMemory::Unavailable), (2222, UsedGpuMemory::Used(512 * MIB))]);

        let samples = d.process_utilization_stats(None).unwrap();
        assert_eq!(samples.len(), 3);
        assert_eq!((samples[0].pid, samples[0].sm_util), (1111, 50));
        assert!(samples[0].timestamp > 1_600_000_000_000_000, "microseconds since the epoch");
        let newest = samples[0].timestamp;
        assert!(matches!(d.process_utilization_stats(newest + 3_600_000_000), Err(NvmlError::NotFound)));

        assert_eq!(nvml.sys_process_name(1111, 64).unwrap(), "trainer");
        assert_eq!(nvml.sys_process_name(1111, 4).unwrap(), "tra");
        let exe = std::env::current_exe().unwrap();
        let own = nvml.sys_process_name(parent, 4096).unwrap();
        assert!(own.ends_with(exe.file_name().unwrap().to_str().unwrap()), "{own}");
        assert!(matches!(nvml.sys_process_name(0, 64), Err(NvmlError::NotFound)));

        let idle = nvml.device_by_index(1).unwrap();
        assert_eq!(idle.name().unwrap(), "NVIDIA Simulated GPU");
        assert_eq!(idle.uuid().unwrap(), "GPU-00000000-5c0b-4e5a-9d1e-000000000001");
        assert_eq!(idle.pci_info().unwrap().bus_id, "00000000:28:00.0");
        assert_eq!(idle.memory_info().unwrap().used, 0);
        assert!(idle.running_compute_processes().unwrap().is_empty());
        assert!(matches!(idle.process_utilization_stats(None), Err(NvmlError::NotFound)));
    });
}

#[test]
fn lost_unsupported_and_missing_readings_fail_as_declared() {
    let scenario = r#"
missing_functions = ["nvmlDeviceGetFanSpeed_v2"]
[[gpu]]
state = "lost"
[[gpu]]
unsupported = ["temperature", "processes", "power"]
"#;
    scenario_test("lost_unsupported_and_missing_readings_fail_as_declared", Some(scenario), |sim| {
        let nvml = sim.nvml().unwrap();
        let lost = nvml.device_by_index(0).unwrap();
        assert_eq!(lost.index().unwrap(), 0);
        assert!(matches!(lost.name(), Err(NvmlError::GpuLost)));
        assert!(matches!(lost.memory_info(), Err(NvmlError::GpuLost)));
        assert!(matches!(lost.temperature(TemperatureSensor::Gpu), Err(NvmlError::GpuLost)));
        assert!(matches!(lost.running_compute_processes(), Err(NvmlError::GpuLost)));

        let partial = nvml.device_by_index(1).unwrap();
        assert!(partial.name().is_ok() && partial.memory_info().is_ok());
        assert!(matches!(partial.temperature(TemperatureSensor::Gpu), Err(NvmlError::NotSupported)));
        assert!(matches!(partial.running_compute_processes(), Err(NvmlError::NotSupported)));
        assert!(matches!(partial.running_graphics_processes(), Err(NvmlError::NotSupported)));
        assert!(matches!(partial.power_usage(), Err(NvmlError::NotSupported)));
        assert_eq!(partial.enforced_power_limit().unwrap(), 700_000);
        assert_eq!(partial.num_fans().unwrap(), 1);
        assert!(matches!(partial.fan_speed(0), Err(NvmlError::FunctionNotFound)));
    });
}

#[test]
fn edits_to_the_scenario_are_picked_up() {
    let before = "[[gpu]]\nname = \"Before\"\ntemperature_c = 40\n";
    let Some(stderr) = scenario_test("edits_to_the_scenario_are_picked_up", Some(before), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        assert_eq!(d.name().unwrap(), "Before");

        sim.rewrite("[[gpu]]\nname = \"After\"\ntemperature_c = 80\n[[gpu]]\n");
        assert_eq!(nvml.device_count().unwrap(), 2);
        assert_eq!(d.name().unwrap(), "After");
        assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), 80);

        // A broken edit keeps the last good scenario, and is reported once.
        sim.rewrite("[[gpu]]\nname = \"Broken\"\ntemprature_c = 1\n");
        for _ in 0..3 {
            assert_eq!(d.name().unwrap(), "After");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        sim.rewrite("[[gpu]]\nname = \"Fixed\"\n");
        assert_eq!(d.name().unwrap(), "Fixed");
        assert_eq!(nvml.device_count().unwrap(), 1);
    }) else {
        return;
    };
    let lines = sim_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("scenario.toml") && lines[0].contains("line 3"), "{stderr}");
    assert!(lines[0].contains("temprature_c"), "{stderr}");
}

#[test]
fn init_fails_as_the_scenario_says() {
    let scenario = "init_error = \"driver_not_loaded\"\n[[gpu]]\n";
    let Some(stderr) = scenario_test("init_fails_as_the_scenario_says", Some(scenario), |sim| {
        assert!(matches!(sim.nvml(), Err(NvmlError::DriverNotLoaded)));
        sim.rewrite("init_error = \"no_permission\"\n");
        assert!(matches!(sim.nvml(), Err(NvmlError::NoPermission)));
        sim.rewrite("[[gpu]]\n");
        assert_eq!(sim.nvml().unwrap().device_count().unwrap(), 1);
    }) else {
        return;
    };
    assert!(sim_lines(&stderr).is_empty(), "{stderr}");
}

#[test]
fn invalid_scenario_fails_init_with_one_line() {
    let scenario = "[[gpu]]\nnmae = \"x\"\n";
    let Some(stderr) = scenario_test("invalid_scenario_fails_init_with_one_line", Some(scenario), |sim| {
        assert!(matches!(sim.nvml(), Err(NvmlError::Unknown)));
    }) else {
        return;
    };
    let lines = sim_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    assert!(line.contains("scenario.toml") && line.contains("line 2, column 1") && line.contains("nmae"), "{line}");
}

#[test]
fn missing_scenario_file_fails_init() {
    let Some(stderr) = scenario_test("missing_scenario_file_fails_init", None, |sim| {
        assert!(matches!(sim.nvml(), Err(NvmlError::Unknown)));
    }) else {
        return;
    };
    let lines = sim_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("scenario.toml"), "{stderr}");
}

#[test]
fn memory_v2_rejects_a_wrong_struct_version() {
    use gpuscope_nvml_sim::{
        MEMORY_V2_VERSION, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetMemoryInfo_v2, nvmlInit_v2, nvmlShutdown,
    };
    use nvml_wrapper_sys::bindings::{
        nvmlMemory_v2_t, nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH as MISMATCH,
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID, nvmlReturn_enum_NVML_SUCCESS as OK,
    };
    scenario_test("memory_v2_rejects_a_wrong_struct_version", Some("[[gpu]]\n"), |_| {
        assert_eq!(MEMORY_V2_VERSION, 0x0200_0028);
        // SAFETY: every pointer passed is to a live local.
        unsafe {
            assert_eq!(nvmlInit_v2(), OK);
            let mut device = std::ptr::null_mut();
            assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut device), OK);
            let mut memory: nvmlMemory_v2_t = std::mem::zeroed();
            for wrong in [0, 0x0100_0028, 0x0200_0020] {
                memory.version = wrong;
                assert_eq!(nvmlDeviceGetMemoryInfo_v2(device, &mut memory), MISMATCH);
            }
            assert_eq!(nvmlDeviceGetMemoryInfo_v2(device, std::ptr::null_mut()), INVALID);
            memory.version = MEMORY_V2_VERSION;
            assert_eq!(nvmlDeviceGetMemoryInfo_v2(device, &mut memory), OK);
            assert_eq!(memory.total, 81559 * MIB);
            assert_eq!(nvmlShutdown(), OK);
        }
    });
}
