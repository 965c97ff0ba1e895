//! MIG devices through the C ABI, with NVML's semantics: handles per
//! slot, NOT_FOUND for an empty slot, readings NOT_SUPPORTED on a MIG
//! handle, processes per MIG handle with count-then-fill.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::{CStr, c_char, c_uint};

use gpuscope_nvml_sim::*;
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlMemory_t, nvmlProcessInfo_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as SHORT,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID, nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND,
    nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as UNSUPPORTED, nvmlReturn_enum_NVML_SUCCESS as OK, nvmlUtilization_t,
};
use support::scenario_test;

const SCENARIO: &str = "
[[gpu]]
name = \"NVIDIA H100 80GB HBM3\"
mig_current = true
[[gpu.process]]
pid = 10
used_mib = 100
[[gpu.mig]]
profile = \"1g.10gb\"
memory_total_mib = 9856
gpu_instance_id = 7
compute_instance_id = 0
uuid = \"MIG-11111111-2222-5333-8444-555555555555\"
[[gpu.mig.process]]
pid = 20
used_mib = 1000
[[gpu.mig.process]]
pid = 21
used_mib = 500
[[gpu.mig]]
profile = \"2g.20gb\"
memory_total_mib = 19968
gpu_instance_id = 3
compute_instance_id = 1
[[gpu]]
";

fn text(f: impl FnOnce(*mut c_char, c_uint) -> c_uint) -> String {
    let mut buf = [0 as c_char; 96];
    assert_eq!(f(buf.as_mut_ptr(), 96), OK);
    // SAFETY: the simulator wrote a NUL-terminated string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned()
}

fn processes(dev: nvmlDevice_t) -> Vec<nvmlProcessInfo_t> {
    let mut count: c_uint = 0;
    // SAFETY: count-then-fill with live locals.
    unsafe {
        // An empty list fits in zero entries; a longer one says how many.
        match nvmlDeviceGetComputeRunningProcesses_v3(dev, &mut count, std::ptr::null_mut()) {
            OK => return Vec::new(),
            rc => assert_eq!(rc, SHORT),
        }
        let mut list = vec![std::mem::zeroed::<nvmlProcessInfo_t>(); count as usize];
        assert_eq!(nvmlDeviceGetComputeRunningProcesses_v3(dev, &mut count, list.as_mut_ptr()), OK);
        list.truncate(count as usize);
        list
    }
}

#[test]
fn mig_devices_answer_as_the_driver_does() {
    // SAFETY: the library's own functions, given live locals, null, and
    // handles it handed out (a stale one it must refuse).
    scenario_test("mig_devices_answer_as_the_driver_does", Some(SCENARIO), |_| unsafe {
        assert_eq!(nvmlInit_v2(), OK);
        let (mut gpu, mut plain) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut gpu), OK);
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(1, &mut plain), OK);
        let mut n: c_uint = 99;
        assert_eq!(nvmlDeviceGetMaxMigDeviceCount(gpu, &mut n), OK);
        assert_eq!(n, 7);
        assert_eq!(nvmlDeviceGetMaxMigDeviceCount(plain, &mut n), OK);
        assert_eq!(n, 0);
        let mut mig = std::ptr::null_mut();
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(plain, 0, &mut mig), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 2, &mut mig), NOT_FOUND);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7, &mut mig), INVALID);
        let mut second = std::ptr::null_mut();
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, &mut second), OK);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mut mig), OK);
        assert_ne!(mig, gpu);

        let mut is_mig: c_uint = 9;
        assert_eq!(nvmlDeviceIsMigDeviceHandle(mig, &mut is_mig), OK);
        assert_eq!(is_mig, 1);
        assert_eq!(nvmlDeviceIsMigDeviceHandle(gpu, &mut is_mig), OK);
        assert_eq!(is_mig, 0);
        let (mut gi, mut ci) = (0, 0);
        assert_eq!(nvmlDeviceGetGpuInstanceId(mig, &mut gi), OK);
        assert_eq!(nvmlDeviceGetComputeInstanceId(second, &mut ci), OK);
        assert_eq!((gi, ci), (7, 1));
        assert_eq!(nvmlDeviceGetGpuInstanceId(gpu, &mut gi), UNSUPPORTED);
        let mut parent = std::ptr::null_mut();
        assert_eq!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &mut parent), OK);
        assert_eq!(parent, gpu);
        assert_eq!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(gpu, &mut parent), UNSUPPORTED);

        assert_eq!(text(|b, l| nvmlDeviceGetUUID(mig, b, l)), "MIG-11111111-2222-5333-8444-555555555555");
        assert!(text(|b, l| nvmlDeviceGetUUID(second, b, l)).starts_with("MIG-"));
        assert_eq!(text(|b, l| nvmlDeviceGetName(second, b, l)), "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
        let mut memory: nvmlMemory_t = std::mem::zeroed();
        assert_eq!(nvmlDeviceGetMemoryInfo(mig, &mut memory), OK);
        assert_eq!((memory.total, memory.used), (9856 << 20, 1500 << 20));
        assert_eq!(memory.free, memory.total - memory.used);
        let mut whole: nvmlMemory_t = std::mem::zeroed();
        assert_eq!(nvmlDeviceGetMemoryInfo(gpu, &mut whole), OK);
        assert_eq!(whole.used, 1600 << 20);

        // Readings NVML keeps for the parent, and utilization on a
        // MIG-enabled parent.
        let mut util: nvmlUtilization_t = std::mem::zeroed();
        assert_eq!(nvmlDeviceGetUtilizationRates(mig, &mut util), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetUtilizationRates(gpu, &mut util), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetUtilizationRates(plain, &mut util), OK);
        let mut value: c_uint = 0;
        assert_eq!(nvmlDeviceGetTemperature(mig, 0, &mut value), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetTemperature(gpu, 0, &mut value), OK);
        assert_eq!(nvmlDeviceGetPowerUsage(mig, &mut value), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetClockInfo(mig, 0, &mut value), UNSUPPORTED);
        assert_eq!(nvmlDeviceGetIndex(mig, &mut value), UNSUPPORTED);
        let (mut current, mut pending) = (0, 0);
        assert_eq!(nvmlDeviceGetMigMode(mig, &mut current, &mut pending), UNSUPPORTED);
        let mut count: c_uint = 0;
        let mut list = [std::mem::zeroed::<nvmlProcessInfo_t>(); 4];
        assert_eq!(nvmlDeviceGetGraphicsRunningProcesses_v3(mig, &mut count, list.as_mut_ptr()), UNSUPPORTED);

        let on_mig = processes(mig);
        let pids: Vec<(u32, u64, u32, u32)> =
            on_mig.iter().map(|p| (p.pid, p.usedGpuMemory >> 20, p.gpuInstanceId, p.computeInstanceId)).collect();
        assert_eq!(pids, [(20, 1000, 7, 0), (21, 500, 7, 0)]);
        assert!(processes(second).is_empty());
        let all: Vec<(u32, u32)> = processes(gpu).iter().map(|p| (p.pid, p.gpuInstanceId)).collect();
        assert_eq!(all, [(10, 0), (20, 7), (21, 7)]);
        let none: Vec<u32> = processes(plain).iter().map(|p| p.gpuInstanceId).collect();
        assert!(none.is_empty());
        // A bogus MIG slot or a handle from past the GPUs is no device.
        let bogus = second.cast::<u8>().wrapping_add(1).cast();
        assert_eq!(nvmlDeviceGetMemoryInfo(bogus, &mut memory), INVALID);
        assert_eq!(nvmlShutdown(), OK);
    });
}

#[test]
fn turning_mig_off_invalidates_its_handles() {
    // SAFETY: the library's own functions, given live locals, null, and
    // handles it handed out (a stale one it must refuse).
    scenario_test("turning_mig_off_invalidates_its_handles", Some(SCENARIO), |sim| unsafe {
        assert_eq!(nvmlInit_v2(), OK);
        let (mut gpu, mut mig) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut gpu), OK);
        assert_eq!(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mut mig), OK);
        sim.rewrite("[[gpu]]\n");
        let mut memory: nvmlMemory_t = std::mem::zeroed();
        assert_eq!(nvmlDeviceGetMemoryInfo(mig, &mut memory), INVALID);
        assert_eq!(nvmlShutdown(), OK);
    });
}
