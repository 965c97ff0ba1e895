//! Clocks, the performance state, and why clocks are being held back.

use std::ffi::{c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::{
    nvmlClockType_enum_NVML_CLOCK_GRAPHICS as CLOCK_GRAPHICS, nvmlClockType_enum_NVML_CLOCK_MEM as CLOCK_MEM,
    nvmlClockType_enum_NVML_CLOCK_SM as CLOCK_SM, nvmlClockType_enum_NVML_CLOCK_VIDEO as CLOCK_VIDEO, nvmlClockType_t,
    nvmlDevice_t, nvmlPstates_t,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::uint;

/// The scenario has no video clock; it tracks the SM clock at the ratio of
/// an H100's (1755 MHz video at 1980 MHz SM).
const VIDEO_PER_SM: f64 = 1755.0 / 1980.0;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetClockInfo", device, Some(Reading::Clocks), |dev| {
        let spec = &dev.gpu.spec;
        // Graphics and SM share one clock domain on data-centre GPUs.
        let mhz = match clock_type {
            CLOCK_GRAPHICS => spec.graphics_clock_mhz.as_ref().unwrap_or(&spec.sm_clock_mhz).at(dev.t),
            CLOCK_SM => spec.sm_clock_mhz.at(dev.t),
            CLOCK_MEM => spec.mem_clock_mhz.at(dev.t),
            CLOCK_VIDEO => match &spec.video_clock_mhz {
                Some(v) => v.at(dev.t),
                None => spec.sm_clock_mhz.at(dev.t) * VIDEO_PER_SM,
            },
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: NVML's contract: `clock` is null or valid for writing one value.
        unsafe { out::put(clock, uint(mhz)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPerformanceState(
    device: nvmlDevice_t,
    pstate: *mut nvmlPstates_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `pstate` is null or valid for writing one value.
    call::device("nvmlDeviceGetPerformanceState", device, Some(Reading::Pstate), |dev| unsafe {
        out::put(pstate, dev.gpu.spec.pstate)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `reasons` is null or valid for writing one value.
    call::device("nvmlDeviceGetCurrentClocksThrottleReasons", device, Some(Reading::Throttle), |dev| unsafe {
        out::put(reasons, dev.gpu.spec.throttle_reasons)
    })
}

/// The name newer NVML releases give the same bitmask; drivers export both.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `reasons` is null or valid for writing one value.
    call::device("nvmlDeviceGetCurrentClocksEventReasons", device, Some(Reading::Throttle), |dev| unsafe {
        out::put(reasons, dev.gpu.spec.throttle_reasons)
    })
}
