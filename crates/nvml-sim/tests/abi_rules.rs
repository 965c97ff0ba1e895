//! NVML's calling conventions, checked at the C ABI where nvml-wrapper
//! would hide them: init gating, argument checks, count-then-fill, timing.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::{CStr, c_char, c_uint};
use std::ptr;
use std::time::{Duration, Instant};

use gpuscope_nvml_sim::*;
use nvml_wrapper_sys::bindings::{
    nvmlProcessInfo_t, nvmlProcessUtilizationSample_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as SHORT,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID, nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND,
    nvmlReturn_enum_NVML_ERROR_UNINITIALIZED as UNINIT, nvmlReturn_enum_NVML_SUCCESS as OK,
};
use support::{Raw, built_library, fresh_copy, scenario_test};

const TWO_GPUS: &str = "[[gpu]]\nname = \"ABCD\"\n[[gpu.process]]\npid = 7\n[[gpu.process]]\npid = 8\n[[gpu]]\n";

#[test]
fn calls_before_init_and_after_last_shutdown_are_refused() {
    scenario_test("calls_before_init_and_after_last_shutdown_are_refused", Some(TWO_GPUS), |sim| {
        let raw = sim.raw();
        assert_eq!(raw.device_count(), UNINIT);
        assert_eq!(raw.call0("nvmlShutdown"), UNINIT);
        assert_eq!(raw.call0("nvmlInit_v2"), OK);
        assert_eq!(raw.call0("nvmlInit_v2"), OK);
        assert_eq!(raw.call0("nvmlShutdown"), OK);
        assert_eq!(raw.device_count(), OK, "one init is still outstanding");
        assert_eq!(raw.call0("nvmlShutdown"), OK);
        assert_eq!(raw.device_count(), UNINIT);
        assert_eq!(raw.call0("nvmlShutdown"), UNINIT);
        // SAFETY: nvmlErrorString returns a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(nvmlErrorString(15)) };
        assert_eq!(text.to_str().unwrap(), "GPU is lost");
    });
}

#[test]
fn bad_arguments_are_rejected() {
    // SAFETY: the library's own functions, called with live locals, null
    // (which they must refuse), or handles it handed out; `name` holds a NUL
    // once nvmlDeviceGetName has succeeded.
    scenario_test("bad_arguments_are_rejected", Some(TWO_GPUS), |_| unsafe {
        assert_eq!(nvmlInit_v2(), OK);
        let mut device = ptr::null_mut();
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(2, &mut device), INVALID);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, ptr::null_mut()), INVALID);
        let mut name = [0 as c_char; 8];
        assert_eq!(nvmlDeviceGetName(ptr::null_mut(), name.as_mut_ptr(), 8), INVALID);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut device), OK);
        assert_eq!(nvmlDeviceGetName(device, name.as_mut_ptr(), 4), SHORT, "no room for the NUL");
        assert_eq!(nvmlDeviceGetName(device, name.as_mut_ptr(), 5), OK);
        assert_eq!(CStr::from_ptr(name.as_ptr()).to_str().unwrap(), "ABCD");
        let mut value: c_uint = 0;
        assert_eq!(nvmlDeviceGetTemperature(device, 0, ptr::null_mut()), INVALID);
        assert_eq!(nvmlDeviceGetTemperature(device, 1, &mut value), INVALID);
        assert_eq!(nvmlDeviceGetClockInfo(device, 7, &mut value), INVALID);
        assert_eq!(nvmlDeviceGetPcieThroughput(device, 2, &mut value), INVALID);
        assert_eq!(nvmlShutdown(), OK);
    });
}

#[test]
fn process_lists_are_count_then_fill() {
    // SAFETY: the library's own functions, given live locals, null, and
    // arrays at least as long as the count passed with them; the process
    // info struct is plain old data, for which all-zero is valid.
    scenario_test("process_lists_are_count_then_fill", Some(TWO_GPUS), |_| unsafe {
        assert_eq!(nvmlInit_v2(), OK);
        let (mut busy, mut idle) = (ptr::null_mut(), ptr::null_mut());
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut busy), OK);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(1, &mut idle), OK);
        let mut infos = [std::mem::zeroed::<nvmlProcessInfo_t>(); 4];
        let mut count: c_uint = 0;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(busy, &mut count, ptr::null_mut()), SHORT);
        assert_eq!(count, 2);
        count = 1;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(busy, &mut count, infos.as_mut_ptr()), SHORT);
        assert_eq!(count, 2);
        count = 4;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(busy, &mut count, infos.as_mut_ptr()), OK);
        assert_eq!((count, infos[0].pid, infos[1].pid), (2, 7, 8));
        assert_eq!(infos[0].usedGpuMemory, u64::MAX, "memory unknown to the driver");
        assert_eq!(infos[0].gpuInstanceId, 0xFFFF_FFFF);
        count = 0;
        assert_eq!(nvmlDeviceGetGraphicsRunningProcesses_v3(busy, &mut count, ptr::null_mut()), OK);
        assert_eq!(count, 0);
        count = 3;
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(idle, &mut count, ptr::null_mut()), OK);
        assert_eq!(count, 0);

        let mut samples = [std::mem::zeroed::<nvmlProcessUtilizationSample_t>(); 2];
        count = 0;
        assert_eq!(nvmlDeviceGetProcessUtilization(busy, ptr::null_mut(), &mut count, 0), SHORT);
        assert_eq!(count, 2);
        assert_eq!(nvmlDeviceGetProcessUtilization(busy, samples.as_mut_ptr(), &mut count, 0), OK);
        assert_eq!((samples[0].pid, samples[1].pid), (7, 8));
        let seen = samples[0].timeStamp;
        assert_eq!(
            nvmlDeviceGetProcessUtilization(busy, samples.as_mut_ptr(), &mut count, seen + 10_000_000),
            NOT_FOUND
        );
        assert_eq!(nvmlDeviceGetProcessUtilization(idle, samples.as_mut_ptr(), &mut count, 0), NOT_FOUND);
        assert_eq!(nvmlShutdown(), OK);
    });
}

#[test]
fn call_delay_is_slept_but_not_counted_as_busy() {
    let scenario = "call_delay_ms = 25\n[[gpu]]\n";
    scenario_test("call_delay_is_slept_but_not_counted_as_busy", Some(scenario), |sim| {
        let raw = sim.raw();
        assert_eq!(raw.call0("nvmlInit_v2"), OK);
        let busy_before = raw.busy_ns();
        let started = Instant::now();
        for _ in 0..4 {
            assert_eq!(raw.device_count(), OK);
        }
        let elapsed = started.elapsed();
        let busy = Duration::from_nanos(raw.busy_ns() - busy_before);
        let delays = Duration::from_millis(100);
        assert!(elapsed >= delays, "{elapsed:?}");
        // Busy time and sleeps are disjoint parts of the elapsed time.
        assert!(busy > Duration::ZERO && busy < delays && busy <= elapsed - delays, "{busy:?} of {elapsed:?}");
        assert_eq!(raw.call0("nvmlShutdown"), OK);
    });
}

#[test]
fn copies_of_the_library_have_separate_state() {
    scenario_test("copies_of_the_library_have_separate_state", Some("[[gpu]]\n"), |sim| {
        let other_dir = tempfile::tempdir().unwrap();
        let other = Raw::open(&fresh_copy(other_dir.path()));
        let raw = sim.raw();
        assert_eq!(raw.call0("nvmlInit_v2"), OK);
        assert_eq!(raw.device_count(), OK);
        assert_eq!(other.device_count(), UNINIT);
    });
}

#[test]
fn every_listed_function_is_exported() {
    let dir = tempfile::tempdir().unwrap();
    let raw = Raw::open(&fresh_copy(dir.path()));
    for name in EXPORTED.iter().chain(&["gpuscope_sim_busy_ns", "gpuscope_sim_call_count"]) {
        assert!(raw.has(name), "{name} is not exported");
    }
    assert!(built_library().exists());
}
