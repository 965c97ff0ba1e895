//! Processes holding a compute or graphics context on a device.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{NVML_VALUE_NOT_AVAILABLE, nvmlDevice_t, nvmlProcessInfo_t};

use super::out;
use crate::call::{self, Dev};
use crate::code::{Outcome, nvmlReturn_t};
use crate::scenario::{Gpu, ProcessSpec, Reading};

/// What NVML puts in `usedGpuMemory` when it cannot attribute memory.
const MEMORY_UNAVAILABLE: u64 = NVML_VALUE_NOT_AVAILABLE as u64;
/// What NVML puts in the instance IDs when MIG is off.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetComputeRunningProcesses_v3", device, Some(Reading::Processes), |dev| unsafe {
        running(dev, |p| p.kind.is_compute(), count, infos)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetGraphicsRunningProcesses_v3", device, Some(Reading::Processes), |dev| unsafe {
        running(dev, |p| p.kind.is_graphics(), count, infos)
    })
}

/// # Safety
/// As for [`out::put_list`].
unsafe fn running(
    dev: &Dev<'_>,
    wanted: impl Fn(&ProcessSpec) -> bool,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Outcome {
    // With MIG on, this simulation places every process in GPU instance 0,
    // compute instance 0.
    let instance = if dev.gpu.spec.mig_current { 0 } else { NO_INSTANCE };
    let list: Vec<nvmlProcessInfo_t> = (dev.gpu.spec.process.iter())
        .filter(|p| wanted(p))
        .map(|p| nvmlProcessInfo_t {
            pid: p.pid,
            usedGpuMemory: Gpu::process_bytes(p, dev.t).unwrap_or(MEMORY_UNAVAILABLE),
            gpuInstanceId: instance,
            computeInstanceId: instance,
        })
        .collect();
    unsafe { out::put_list(count, infos, &list) }
}
