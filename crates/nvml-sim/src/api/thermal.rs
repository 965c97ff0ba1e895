//! Temperature and fans.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU as TEMPERATURE_GPU, nvmlTemperatureSensors_t,
    nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SHUTDOWN as THRESHOLD_SHUTDOWN,
    nvmlTemperatureThresholds_enum_NVML_TEMPERATURE_THRESHOLD_SLOWDOWN as THRESHOLD_SLOWDOWN,
    nvmlTemperatureThresholds_t,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::{percent, uint};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetTemperature", device, Some(Reading::Temperature), |dev| {
        if sensor != TEMPERATURE_GPU {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: NVML's contract: `temp` is null or valid for writing one value.
        unsafe { out::put(temp, uint(dev.gpu.spec.temperature_c.at(dev.t))) }
    })
}

/// The slowdown and shutdown thresholds; the others (memory and GPU
/// maximum operating, acoustic) are NOT_SUPPORTED, as on boards that lack
/// them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: nvmlDevice_t,
    threshold: nvmlTemperatureThresholds_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetTemperatureThreshold", device, Some(Reading::Temperature), |dev| {
        let spec = &dev.gpu.spec;
        let value = match threshold {
            THRESHOLD_SHUTDOWN => spec.temperature_shutdown_c,
            THRESHOLD_SLOWDOWN => spec.temperature_slowdown_c,
            _ => return Err(NOT_SUPPORTED),
        };
        // SAFETY: NVML's contract: `temp` is null or valid for writing one value.
        unsafe { out::put(temp, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNumFans(device: nvmlDevice_t, count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or valid for writing one value.
    call::device("nvmlDeviceGetNumFans", device, Some(Reading::Fan), |dev| unsafe {
        out::put(count, dev.gpu.spec.fans)
    })
}

/// A board with no fan of its own (`fans = 0`: the SXM and passively
/// cooled data-centre boards) answers as an H100 SXM did with driver
/// 580.159.04: NumFans 0, FanSpeed NOT_SUPPORTED, FanSpeed_v2 of fan 0
/// INVALID_ARGUMENT.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed(device: nvmlDevice_t, speed: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetFanSpeed", device, Some(Reading::Fan), |dev| {
        if dev.gpu.spec.fans == 0 {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: NVML's contract: `speed` is null or valid for writing one value.
        unsafe { out::put(speed, percent(dev.gpu.spec.fan_percent.at(dev.t))) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: nvmlDevice_t,
    fan: c_uint,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetFanSpeed_v2", device, Some(Reading::Fan), |dev| {
        if fan >= dev.gpu.spec.fans {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: NVML's contract: `speed` is null or valid for writing one value.
        unsafe { out::put(speed, percent(dev.gpu.spec.fan_percent.at(dev.t))) }
    })
}
