//! How busy the device and its video engines are.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlUtilization_t};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, Outcome, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::{Value, percent};

/// The window real GPUs report for encoder and decoder samples.
const CODEC_SAMPLING_PERIOD_US: c_uint = 167_000;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetUtilizationRates", device, Some(Reading::Utilization), |dev| {
        let spec = &dev.gpu.spec;
        let rates = nvmlUtilization_t {
            gpu: percent(spec.utilization_gpu.at(dev.t)),
            memory: percent(spec.utilization_memory.at(dev.t)),
        };
        // SAFETY: NVML's contract: `utilization` is null or valid for writing one value.
        unsafe { out::put(utilization, rates) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    sampling_period_us: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `utilization` and `sampling_period_us` are null or valid for writing one value, as `codec` requires.
    call::device("nvmlDeviceGetEncoderUtilization", device, Some(Reading::Encoder), |dev| unsafe {
        codec(&dev.gpu.spec.encoder, dev.t, utilization, sampling_period_us)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    sampling_period_us: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `utilization` and `sampling_period_us` are null or valid for writing one value, as `codec` requires.
    call::device("nvmlDeviceGetDecoderUtilization", device, Some(Reading::Decoder), |dev| unsafe {
        codec(&dev.gpu.spec.decoder, dev.t, utilization, sampling_period_us)
    })
}

/// # Safety
/// Both pointers must be null or valid for writing a `c_uint`.
unsafe fn codec(value: &Value, t: f64, utilization: *mut c_uint, period: *mut c_uint) -> Outcome {
    if utilization.is_null() || period.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: NVML's contract: `utilization` and `period` are each null or valid for writing one value.
    unsafe {
        out::put(utilization, percent(value.at(t)))?;
        out::put(period, CODEC_SAMPLING_PERIOD_US)
    }
}
