//! Power draw and the limits it is held to, in milliwatts as NVML reports.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::nvmlReturn_t;
use crate::scenario::Reading;
use crate::value::uint;

fn milliwatts(watts: f64) -> c_uint {
    uint(watts * 1000.0)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(device: nvmlDevice_t, power: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `power` is null or valid for writing one value.
    call::device("nvmlDeviceGetPowerUsage", device, Some(Reading::Power), |dev| unsafe {
        out::put(power, milliwatts(dev.gpu.spec.power_draw_w.at(dev.t)))
    })
}

/// Nothing in the simulation lowers the limit, so the enforced limit is
/// the management limit.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `limit` is null or valid for writing one value.
    call::device("nvmlDeviceGetEnforcedPowerLimit", device, Some(Reading::PowerLimit), |dev| unsafe {
        out::put(limit, milliwatts(dev.gpu.spec.power_limit_w))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `limit` is null or valid for writing one value.
    call::device("nvmlDeviceGetPowerManagementLimit", device, Some(Reading::PowerLimit), |dev| unsafe {
        out::put(limit, milliwatts(dev.gpu.spec.power_limit_w))
    })
}
