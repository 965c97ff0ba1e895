//! The PCIe link's generation and width and its replay counter, and what
//! other NVML clients (nvtop, nvitop) call that gpuscope does not: the
//! temperature thresholds, and the first version of the process lists with
//! its 16-byte entry; the energy counter.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::c_uint;
use std::ptr;

use gpuscope_nvml_sim::*;
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlProcessInfo_v1_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as INSUFFICIENT_SIZE,
    nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as NOT_SUPPORTED, nvmlReturn_enum_NVML_SUCCESS as OK,
};
use support::scenario_test;

const SCENARIO: &str = "[[gpu]]\npcie_link_gen_current = 4\npcie_link_width_current = 8\n\
                        temperature_slowdown_c = 85\n\
                        [[gpu.process]]\npid = 4242\nused_mib = 1024\n\
                        [[gpu.process]]\npid = 4343\nused_mib = 2048\n\
                        [[gpu]]\nunsupported = [\"pcie\"]\n\
                        [[gpu]]\npcie_replay_counter = 5\npcie_replays_per_s = 1000\n\
                        [[gpu]]\nunsupported = [\"pcie_replay\"]\n";

fn handle(index: c_uint) -> nvmlDevice_t {
    let mut dev = ptr::null_mut();
    // SAFETY: a live local the library writes one handle to.
    assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut dev) }, OK);
    dev
}

type Reader<T> = unsafe extern "C" fn(nvmlDevice_t, *mut T) -> u32;

fn read<T: Default>(f: Reader<T>, dev: nvmlDevice_t) -> (u32, T) {
    let mut v = T::default();
    // SAFETY: a live local the library writes one value to.
    let code = unsafe { f(dev, &mut v) };
    (code, v)
}

#[test]
fn link_generation_width_and_thresholds_come_from_the_scenario() {
    scenario_test("link_generation_width_and_thresholds_come_from_the_scenario", Some(SCENARIO), |_| {
        // SAFETY: init takes no arguments.
        assert_eq!(unsafe { nvmlInit_v2() }, OK);
        let (a, b) = (handle(0), handle(1));
        assert_eq!(read(nvmlDeviceGetCurrPcieLinkGeneration, a), (OK, 4));
        assert_eq!(read(nvmlDeviceGetMaxPcieLinkGeneration, a), (OK, 5), "an H100's by default");
        assert_eq!(read(nvmlDeviceGetCurrPcieLinkWidth, a), (OK, 8));
        assert_eq!(read(nvmlDeviceGetMaxPcieLinkWidth, a), (OK, 16));
        assert_eq!(read(nvmlDeviceGetMaxPcieLinkWidth, b).0, NOT_SUPPORTED, "no PCIe readings on this board");
        let mut t: c_uint = 0;
        // SAFETY: live locals; 1 is NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, 0 SHUTDOWN, 3 GPU_MAX.
        unsafe {
            assert_eq!(nvmlDeviceGetTemperatureThreshold(a, 1, &mut t), OK);
            assert_eq!(t, 85);
            assert_eq!(nvmlDeviceGetTemperatureThreshold(a, 0, &mut t), OK);
            assert_eq!(t, 92);
            assert_eq!(nvmlDeviceGetTemperatureThreshold(a, 3, &mut t), NOT_SUPPORTED);
            assert_eq!(nvmlShutdown(), OK);
        }
    });
}

#[test]
fn the_replay_counter_grows_at_its_rate_and_is_not_supported_where_a_board_keeps_none() {
    scenario_test(
        "the_replay_counter_grows_at_its_rate_and_is_not_supported_where_a_board_keeps_none",
        Some(SCENARIO),
        |_| {
            // SAFETY: init and shutdown take no arguments.
            assert_eq!(unsafe { nvmlInit_v2() }, OK);
            assert_eq!(read(nvmlDeviceGetPcieReplayCounter, handle(0)), (OK, 0), "none by default");
            assert_eq!(read(nvmlDeviceGetPcieReplayCounter, handle(1)).0, NOT_SUPPORTED, "no PCIe readings at all");
            assert_eq!(read(nvmlDeviceGetPcieReplayCounter, handle(3)).0, NOT_SUPPORTED);
            assert_eq!(read(nvmlDeviceGetCurrPcieLinkWidth, handle(3)), (OK, 16), "the link itself still answers");
            let (code, first) = read(nvmlDeviceGetPcieReplayCounter, handle(2));
            assert!(code == OK && first >= 5, "{first}");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let (_, later) = read(nvmlDeviceGetPcieReplayCounter, handle(2));
            assert!(later >= first + 10, "1000 a second for 20 ms: {first} then {later}");
            // SAFETY: as above.
            assert_eq!(unsafe { nvmlShutdown() }, OK);
        },
    );
}

#[test]
fn the_first_process_list_version_counts_then_fills_sixteen_byte_entries() {
    scenario_test("the_first_process_list_version_counts_then_fills_sixteen_byte_entries", Some(SCENARIO), |_| {
        assert_eq!(std::mem::size_of::<nvmlProcessInfo_v1_t>(), 16);
        // SAFETY: init takes no arguments; the list calls get live locals and
        // a buffer of the length the count says.
        unsafe {
            assert_eq!(nvmlInit_v2(), OK);
            let dev = handle(0);
            let mut count: c_uint = 0;
            assert_eq!(nvmlDeviceGetComputeRunningProcesses(dev, &mut count, ptr::null_mut()), INSUFFICIENT_SIZE);
            assert_eq!(count, 2);
            let mut infos = vec![nvmlProcessInfo_v1_t { pid: 0, usedGpuMemory: 0 }; 2];
            assert_eq!(nvmlDeviceGetComputeRunningProcesses(dev, &mut count, infos.as_mut_ptr()), OK);
            let got: Vec<(u32, u64)> = infos.iter().map(|p| (p.pid, p.usedGpuMemory)).collect();
            assert_eq!(got, vec![(4242, 1024 << 20), (4343, 2048 << 20)]);
            let mut none: c_uint = 0;
            assert_eq!(nvmlDeviceGetGraphicsRunningProcesses(dev, &mut none, ptr::null_mut()), OK);
            assert_eq!(none, 0, "no graphics contexts: SUCCESS with a count of 0");
            assert_eq!(nvmlShutdown(), OK);
        }
    });
}

const ENERGY: &str = "[[gpu]]\npower_draw_w = 250\nenergy_at_init_mj = 7000000\n\
                      [[gpu]]\nunsupported = [\"energy\"]\n\
                      [[gpu]]\nunsupported = [\"power\"]\n";

fn energy(dev: nvmlDevice_t) -> (u32, u64) {
    read(nvmlDeviceGetTotalEnergyConsumption, dev)
}

#[test]
fn the_energy_counter_grows_by_the_power_draw_and_is_not_supported_before_volta() {
    scenario_test("the_energy_counter_grows_by_the_power_draw_and_is_not_supported_before_volta", Some(ENERGY), |_| {
        // SAFETY: init and shutdown take no arguments.
        assert_eq!(unsafe { nvmlInit_v2() }, OK);
        let (code, first) = energy(handle(0));
        assert!(code == OK && first >= 7_000_000, "the counter at init: {first}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (_, later) = energy(handle(0));
        // 250 W for at least 200 ms is at least 50 J, 50,000 mJ.
        assert!(later - first >= 50_000, "{first} then {later}");
        assert!(later - first < 250_000, "no more than a second's worth: {first} then {later}");
        assert_eq!(energy(handle(1)).0, NOT_SUPPORTED, "a board before Volta");
        assert_eq!(energy(handle(2)).0, NOT_SUPPORTED, "no power readings at all");
        // SAFETY: as above.
        assert_eq!(unsafe { nvmlShutdown() }, OK);
    });
}
