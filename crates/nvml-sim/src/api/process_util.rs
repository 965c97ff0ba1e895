//! Per-process utilisation samples.

use std::ffi::{c_uint, c_ulonglong};
use std::time::{SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlProcessUtilizationSample_t};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_FOUND, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::percent;

/// The driver samples periodically, so two polls in quick succession see
/// the same sample and the second, asking only for newer ones, gets
/// NOT_FOUND, just as from a real GPU.
const SAMPLE_PERIOD_US: u64 = 100_000;

/// Returns one sample per process on the device, stamped with the latest
/// sampling instant (microseconds since the epoch), if that is newer than
/// `last_seen_us`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen_us: c_ulonglong,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetProcessUtilization", device, Some(Reading::ProcessUtilization), |dev| {
        if count.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let stamp = latest_sample_us();
        let processes = &dev.gpu.spec.process;
        if stamp <= last_seen_us || processes.is_empty() {
            // SAFETY: `count` is non-null (checked above) and, by NVML's contract, writable.
            unsafe { count.write(0) };
            return Err(NOT_FOUND);
        }
        let samples: Vec<_> = (processes.iter())
            .map(|p| nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: stamp,
                smUtil: percent(p.sm_util.at(dev.t)),
                memUtil: percent(p.mem_util.at(dev.t)),
                encUtil: percent(p.enc_util.at(dev.t)),
                decUtil: percent(p.dec_util.at(dev.t)),
            })
            .collect();
        // SAFETY: NVML's contract: `count` is null or readable and writable, and `utilization` null or valid for `*count` entries.
        unsafe { out::put_list(count, utilization, &samples) }
    })
}

fn latest_sample_us() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let now_us = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
    now_us - now_us % SAMPLE_PERIOD_US
}
