//! Power draw and the limits it is held to, in milliwatts as NVML reports.

use std::ffi::{c_uint, c_ulonglong};

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::{NOT_SUPPORTED, nvmlReturn_t};
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

/// nvml.h: "total energy consumption for this GPU in millijoules (mJ)
/// since the driver was last reloaded"; "For Volta or newer fully
/// supported devices". The counter is the scenario's value at init plus
/// the power draw summed over the seconds since, so a constant draw of P
/// watts adds P joules a second, as a real board's counter does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut c_ulonglong,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetTotalEnergyConsumption", device, Some(Reading::Energy), |dev| {
        if !dev.gpu.supports(Reading::Power) {
            return Err(NOT_SUPPORTED);
        }
        let spec = &dev.gpu.spec;
        let joules = spec.power_draw_w.integral(dev.t).max(0.0);
        let mj = spec.energy_at_init_mj.saturating_add((joules * 1000.0) as u64);
        // SAFETY: NVML's contract: `energy` is null or valid for writing one value.
        unsafe { out::put(energy, mj) }
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
