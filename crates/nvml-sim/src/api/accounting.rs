//! Per-process accounting (`nvidia-smi -am 1`): the driver keeps, for each
//! process that ran on the GPU while it was on, its lifetime utilisation,
//! peak memory and run time, finished processes included.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{nvmlAccountingStats_t, nvmlDevice_t, nvmlEnableState_t};

use super::out;
use crate::call;
use crate::code::{NOT_FOUND, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::mib_to_bytes;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAccountingMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetAccountingMode", device, Some(Reading::Accounting), |dev| {
        // SAFETY: NVML's contract: `mode` is null or writable.
        unsafe { out::put(mode, nvmlEnableState_t::from(dev.gpu.spec.accounting.enabled)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAccountingBufferSize(device: nvmlDevice_t, size: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetAccountingBufferSize", device, Some(Reading::Accounting), |dev| {
        // SAFETY: NVML's contract: `size` is null or writable.
        unsafe { out::put(size, dev.gpu.spec.accounting.buffer_size) }
    })
}

/// With accounting off the buffer is empty: zero PIDs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAccountingPids(
    device: nvmlDevice_t,
    count: *mut c_uint,
    pids: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetAccountingPids", device, Some(Reading::Accounting), |dev| {
        let a = &dev.gpu.spec.accounting;
        let list: Vec<c_uint> = if a.enabled { a.process.iter().map(|p| p.pid).collect() } else { Vec::new() };
        // SAFETY: NVML's contract for count-then-fill arrays.
        unsafe { out::put_list(count, pids, &list) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAccountingStats(
    device: nvmlDevice_t,
    pid: c_uint,
    stats: *mut nvmlAccountingStats_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetAccountingStats", device, Some(Reading::Accounting), |dev| {
        let a = &dev.gpu.spec.accounting;
        let p = a.process.iter().find(|p| p.pid == pid).filter(|_| a.enabled).ok_or(NOT_FOUND)?;
        let value = nvmlAccountingStats_t {
            gpuUtilization: p.gpu_util,
            memoryUtilization: p.mem_util,
            maxMemoryUsage: mib_to_bytes(p.max_memory_mib),
            time: p.time_ms,
            startTime: p.start_time_us,
            isRunning: c_uint::from(p.running),
            reserved: [0; 5],
        };
        // SAFETY: NVML's contract: `stats` is null or writable.
        unsafe { out::put(stats, value) }
    })
}
