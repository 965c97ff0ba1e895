//! Per-process utilisation samples.

use std::ffi::{c_uint, c_ulonglong};
use std::time::{SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlProcessUtilizationInfo_v1_t, nvmlProcessUtilizationSample_t, nvmlProcessesUtilizationInfo_t,
};

use super::out;
use crate::call;
use crate::code::{ARGUMENT_VERSION_MISMATCH, INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_FOUND, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::percent;

/// The driver samples periodically, so two polls in quick succession see
/// the same sample and the second, asking only for newer ones, gets
/// NOT_FOUND, just as from a real GPU.
const SAMPLE_PERIOD_US: u64 = 100_000;

/// nvml.h's `nvmlProcessesUtilizationInfo_v1`: `NVML_STRUCT_VERSION`, the
/// struct's size with the version in the top byte.
const PROCESSES_UTILIZATION_INFO_V1: c_uint =
    (std::mem::size_of::<nvmlProcessesUtilizationInfo_t>() as c_uint) | (1 << 24);

/// Returns one sample per process on the device, stamped with the latest
/// sampling instant (microseconds since the epoch), if that is newer than
/// `last_seen_us`. With the scenario's `process_utilization_reads_zero`,
/// every sample reads 0, as this call does on Blackwell with driver 580
/// (HAMi issue 2015).
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
        let zero = dev.gpu.spec.process_utilization_reads_zero;
        let read = |v: &crate::value::Value| if zero { 0 } else { percent(v.at(dev.t)) };
        let samples: Vec<_> = (processes.iter())
            .filter_map(|p| {
                Some(nvmlProcessUtilizationSample_t {
                    pid: p.pid_now()?,
                    timeStamp: stamp,
                    smUtil: read(&p.sm_util),
                    memUtil: read(&p.mem_util),
                    encUtil: read(&p.enc_util),
                    decUtil: read(&p.dec_util),
                })
            })
            .collect();
        // SAFETY: NVML's contract: `count` is null or readable and writable, and `utilization` null or valid for `*count` entries.
        unsafe { out::put_list(count, utilization, &samples) }
    })
}

/// The versioned successor (R550): one entry per process "that had some
/// non-zero utilization during the last sample period", with the JPEG and
/// OFA engines too. As nvml.h documents: ARGUMENT_VERSION_MISMATCH for a
/// version other than `nvmlProcessesUtilizationInfo_v1`; NOT_FOUND when no
/// sample is newer than `lastSeenTimeStamp`; INSUFFICIENT_SIZE, with the
/// count needed in `processSamplesCount`, when `procUtilArray` is null or
/// too short. Neither this nor the older call works on a MIG device handle
/// or on a GPU with MIG on (NOT_SUPPORTED, from `call::device`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessesUtilizationInfo(
    device: nvmlDevice_t,
    info: *mut nvmlProcessesUtilizationInfo_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetProcessesUtilizationInfo", device, Some(Reading::ProcessUtilization), |dev| {
        if info.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null, and by NVML's contract valid for reading and writing one struct.
        let request = unsafe { info.read() };
        if request.version != PROCESSES_UTILIZATION_INFO_V1 {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let stamp = latest_sample_us();
        let samples: Vec<_> = (dev.gpu.spec.process.iter())
            .filter_map(|p| {
                Some(nvmlProcessUtilizationInfo_v1_t {
                    timeStamp: stamp,
                    pid: p.pid_now()?,
                    smUtil: percent(p.sm_util.at(dev.t)),
                    memUtil: percent(p.mem_util.at(dev.t)),
                    encUtil: percent(p.enc_util.at(dev.t)),
                    decUtil: percent(p.dec_util.at(dev.t)),
                    jpgUtil: percent(p.jpg_util.at(dev.t)),
                    ofaUtil: percent(p.ofa_util.at(dev.t)),
                })
            })
            .filter(|s| [s.smUtil, s.memUtil, s.encUtil, s.decUtil, s.jpgUtil, s.ofaUtil].iter().any(|&u| u > 0))
            .collect();
        // SAFETY: `info` is non-null; the field's address is computed without reading.
        let count = unsafe { &raw mut (*info).processSamplesCount };
        if stamp <= request.lastSeenTimeStamp || samples.is_empty() {
            // SAFETY: as above.
            unsafe { count.write(0) };
            return Err(NOT_FOUND);
        }
        if request.procUtilArray.is_null() || (request.processSamplesCount as usize) < samples.len() {
            // SAFETY: as above.
            unsafe { count.write(samples.len() as c_uint) };
            return Err(INSUFFICIENT_SIZE);
        }
        // SAFETY: as above; `procUtilArray` holds `processSamplesCount` entries by NVML's contract.
        unsafe { out::put_list(count, request.procUtilArray, &samples) }
    })
}

fn latest_sample_us() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let now_us = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
    now_us - now_us % SAMPLE_PERIOD_US
}
