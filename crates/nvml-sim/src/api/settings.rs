//! What nvidia-smi users query beside the live readings: the board's
//! serial number, persistence and compute modes, maximum clocks, ECC mode
//! and error counts, pages pending retirement, BAR1 memory.

use std::ffi::{c_char, c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::{
    nvmlBAR1Memory_t, nvmlClockType_enum_NVML_CLOCK_GRAPHICS as CLOCK_GRAPHICS,
    nvmlClockType_enum_NVML_CLOCK_MEM as CLOCK_MEM, nvmlClockType_enum_NVML_CLOCK_SM as CLOCK_SM,
    nvmlClockType_enum_NVML_CLOCK_VIDEO as CLOCK_VIDEO, nvmlClockType_t, nvmlComputeMode_t, nvmlDevice_t,
    nvmlEccCounterType_enum_NVML_AGGREGATE_ECC as AGGREGATE, nvmlEccCounterType_enum_NVML_VOLATILE_ECC as VOLATILE,
    nvmlEccCounterType_t, nvmlEnableState_t, nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED as CORRECTED,
    nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED as UNCORRECTED, nvmlMemoryErrorType_t,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::{mib_to_bytes, uint};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetSerial", device, Some(Reading::Serial), |dev| {
        // Boards without one (GeForce) answer NOT_SUPPORTED.
        let text = dev.gpu.spec.serial.as_deref().ok_or(NOT_SUPPORTED)?;
        // SAFETY: NVML's contract: `serial` is null or valid for writing `length` bytes.
        unsafe { out::put_str(serial, length, text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetVbiosVersion(
    device: nvmlDevice_t,
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // nvml.h: "For all products"; no NOT_SUPPORTED among its returns, so
    // no scenario's `unsupported` reaches it (an old driver's lack of it is
    // `missing_functions`).
    call::device("nvmlDeviceGetVbiosVersion", device, None, |dev| {
        // SAFETY: NVML's contract: `version` is null or valid for writing `length` bytes.
        unsafe { out::put_str(version, length, &dev.gpu.spec.vbios_version) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `mode` is null or valid for writing one value.
    call::device("nvmlDeviceGetPersistenceMode", device, Some(Reading::PersistenceMode), |dev| unsafe {
        out::put(mode, nvmlEnableState_t::from(dev.gpu.spec.persistence_mode))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(device: nvmlDevice_t, mode: *mut nvmlComputeMode_t) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `mode` is null or valid for writing one value.
    call::device("nvmlDeviceGetComputeMode", device, Some(Reading::ComputeMode), |dev| unsafe {
        out::put(mode, dev.gpu.spec.compute_mode.code())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMaxClockInfo", device, Some(Reading::MaxClocks), |dev| {
        let spec = &dev.gpu.spec;
        let mhz = match clock_type {
            CLOCK_GRAPHICS | CLOCK_SM => spec.max_sm_clock_mhz,
            CLOCK_MEM => spec.max_mem_clock_mhz,
            CLOCK_VIDEO => spec.max_video_clock_mhz,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: NVML's contract: `clock` is null or valid for writing one value.
        unsafe { out::put(clock, uint(mhz)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetEccMode", device, Some(Reading::Ecc), |dev| {
        if current.is_null() || pending.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let spec = &dev.gpu.spec;
        // SAFETY: NVML's contract: `current` and `pending` are each null or valid for writing one value.
        unsafe {
            out::put(current, nvmlEnableState_t::from(spec.ecc_enabled))?;
            out::put(pending, nvmlEnableState_t::from(spec.ecc_pending.unwrap_or(spec.ecc_enabled)))
        }
    })
}

/// The totals over every memory location, as nvidia-smi's `*.total`.
/// With ECC off there is nothing to count: NOT_SUPPORTED, as a real
/// board answers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetTotalEccErrors", device, Some(Reading::Ecc), |dev| {
        let spec = &dev.gpu.spec;
        if !spec.ecc_enabled {
            return Err(NOT_SUPPORTED);
        }
        let n = match (error_type, counter_type) {
            (CORRECTED, VOLATILE) => spec.ecc_corrected_volatile,
            (CORRECTED, AGGREGATE) => spec.ecc_corrected_aggregate,
            (UNCORRECTED, VOLATILE) => spec.ecc_uncorrected_volatile,
            (UNCORRECTED, AGGREGATE) => spec.ecc_uncorrected_aggregate,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: NVML's contract: `count` is null or valid for writing one value.
        unsafe { out::put(count, n) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `pending` is null or valid for writing one value.
    call::device("nvmlDeviceGetRetiredPagesPendingStatus", device, Some(Reading::RetiredPages), |dev| unsafe {
        out::put(pending, nvmlEnableState_t::from(dev.gpu.spec.retired_pages_pending))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetBAR1MemoryInfo(
    device: nvmlDevice_t,
    bar1: *mut nvmlBAR1Memory_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetBAR1MemoryInfo", device, Some(Reading::Bar1), |dev| {
        let spec = &dev.gpu.spec;
        let total = mib_to_bytes(spec.bar1_total_mib as f64);
        let used = mib_to_bytes(spec.bar1_used_mib as f64).min(total);
        // SAFETY: NVML's contract: `bar1` is null or valid for writing one value.
        unsafe { out::put(bar1, nvmlBAR1Memory_t { bar1Total: total, bar1Free: total - used, bar1Used: used }) }
    })
}
