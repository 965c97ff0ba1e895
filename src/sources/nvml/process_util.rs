//! Per-process utilisation: samples since a timestamp, which must be the
//! newest one seen on that device (nvml.h: `lastSeenTimeStamp`); NOT_FOUND
//! means nothing newer, so the last batch stands. Asked first through
//! `nvmlDeviceGetProcessesUtilizationInfo` (R550+, a versioned struct),
//! then, where a driver lacks it or refuses it, through the older
//! `nvmlDeviceGetProcessUtilization`, which on Blackwell with driver 580
//! reads 0 for every process (HAMi issue 2015). Which one a device
//! answers is remembered. Under MIG neither works (NOT_SUPPORTED).
//!
//! On a real driver the call is the dearest of a tick: 2.6 ms of the
//! caller's CPU on an H100 with driver 580.159.04, even when it finds
//! nothing (tests/gpu/nvml_costs.py). A device with no processes has no
//! samples to give, so once the device has said whether it samples
//! processes at all, it is not asked while it runs none.

use std::cell::RefCell;
use std::collections::HashMap;

use nvml_wrapper::Device;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::{
    nvmlProcessUtilizationInfo_v1_t, nvmlProcessUtilizationSample_t, nvmlProcessesUtilizationInfo_t,
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH as ARGUMENT_VERSION_MISMATCH,
};

use super::calls::Calls;
use super::sized;
use crate::model::ProcessUtilization;

/// The newest batch per device, by UUID (by index where it has none).
#[derive(Default)]
pub struct ProcessUtil {
    devices: HashMap<String, Batch>,
}

#[derive(Default)]
pub struct Batch {
    last_seen_us: u64,
    samples: Vec<ProcessUtilization>,
    /// Whether the device samples processes, once it has answered.
    sampled: Option<bool>,
    /// Whether it answers the newer call, once asked.
    info: Option<bool>,
}

std::thread_local! {
    /// The driver's buffer, kept from tick to tick (`sized::fill`): one
    /// a thread, not one a GPU. With room for 16 samples a process it is
    /// 32 KiB at 64 processes a GPU: eight GPUs keeping one each would
    /// keep a quarter of a MiB at 8 x 512.
    static BUFFER: RefCell<Vec<nvmlProcessUtilizationSample_t>> = const { RefCell::new(Vec::new()) };
    /// The newer call's entries, before they are read as the older's.
    static INFO: RefCell<Vec<nvmlProcessUtilizationInfo_v1_t>> = const { RefCell::new(Vec::new()) };
}

impl ProcessUtil {
    /// The device's batch, taken out for a `Batch::read` that may run on
    /// another thread; `put` brings it back.
    pub fn take(&mut self, key: &str) -> Batch {
        self.devices.remove(key).unwrap_or_default()
    }

    pub fn put(&mut self, key: String, batch: Batch) {
        self.devices.insert(key, batch);
    }

    /// Forgets devices no longer watched.
    pub fn retain(&mut self, keys: &[String]) {
        self.devices.retain(|k, _| keys.contains(k));
    }
}

impl Batch {
    /// The device's newest sample per process; `None` where the device
    /// does not sample processes (or the call failed). A device that runs
    /// no process now (`idle`) has none to sample: the driver is not asked
    /// once it is known whether the device samples at all, and the last
    /// seen timestamp stays, so the next process's samples are the first
    /// asked for.
    pub fn read(&mut self, index: u32, dev: &Device<'_>, calls: &Calls, idle: bool) -> Option<Vec<ProcessUtilization>> {
        let batch = self;
        match (idle, batch.sampled) {
            (true, Some(false)) => return None,
            (true, Some(true)) => {
                batch.samples.clear();
                return Some(Vec::new());
            }
            _ => {}
        }
        let last = batch.last_seen_us;
        let room = batch.samples.len();
        let info = &mut batch.info;
        let read = BUFFER.with_borrow_mut(|buffer| {
            let read = read_either(dev, index, calls, info, last, room, buffer);
            if read.is_ok() {
                batch.last_seen_us = buffer.iter().map(|s| s.timeStamp).max().unwrap_or(last).max(last);
                newest_per_pid(buffer, &mut batch.samples);
            }
            read
        });
        match read {
            Ok(()) => {
                batch.sampled = Some(true);
                Some(batch.samples.clone())
            }
            Err(NvmlError::NotFound) => {
                batch.sampled = Some(true);
                Some(batch.samples.clone())
            }
            Err(NvmlError::NotSupported) => {
                batch.sampled = Some(false);
                None
            }
            Err(_) => None,
        }
    }
}

/// The newer call unless the device is known not to answer it, then the
/// older. A device that answers neither is NOT_SUPPORTED to the caller.
fn read_either(
    dev: &Device<'_>,
    index: u32,
    calls: &Calls,
    info: &mut Option<bool>,
    last: u64,
    room: usize,
    buffer: &mut Vec<nvmlProcessUtilizationSample_t>,
) -> Result<(), NvmlError> {
    if *info != Some(false) {
        let read = calls.track("nvmlDeviceGetProcessesUtilizationInfo", Some(index), || {
            INFO.with_borrow_mut(|entries| {
                let read = info_samples(dev, last, room, entries);
                buffer.clear();
                buffer.extend(entries.iter().map(|e| nvmlProcessUtilizationSample_t {
                    pid: e.pid,
                    timeStamp: e.timeStamp,
                    smUtil: e.smUtil,
                    memUtil: e.memUtil,
                    encUtil: e.encUtil,
                    decUtil: e.decUtil,
                }));
                read
            })
        });
        match read {
            // A driver that knows only an older struct (nvml.h's
            // ARGUMENT_VERSION_MISMATCH, which nvml-wrapper has no name for).
            Err(NvmlError::FunctionNotFound | NvmlError::NotSupported) => *info = Some(false),
            Err(NvmlError::UnexpectedVariant(ARGUMENT_VERSION_MISMATCH)) => *info = Some(false),
            other => {
                *info = Some(true);
                return other;
            }
        }
    }
    calls.track("nvmlDeviceGetProcessUtilization", Some(index), || samples(dev, last, room, buffer))
}

/// nvml.h's `nvmlProcessesUtilizationInfo_v1`: `NVML_STRUCT_VERSION`, the
/// struct's size with the version in its top byte.
const PROCESSES_UTILIZATION_INFO_V1: u32 = (std::mem::size_of::<nvmlProcessesUtilizationInfo_t>() as u32) | (1 << 24);

/// The newer call's entries newer than `last_seen_us`, into `into`, sized
/// as `samples` sizes the older's. It lists only processes "that had some
/// non-zero utilization during the last sample period" (nvml.h), so an
/// idle process has no entry rather than a 0.
fn info_samples(
    dev: &Device<'_>,
    last_seen_us: u64,
    processes: usize,
    into: &mut Vec<nvmlProcessUtilizationInfo_v1_t>,
) -> Result<(), NvmlError> {
    let Ok(f) = dev.nvml().lib().nvmlDeviceGetProcessesUtilizationInfo.as_ref() else {
        return Err(NvmlError::FunctionNotFound);
    };
    let room = processes.saturating_mul(16).max(MIN_ROOM);
    let grow = |needed: usize, room: usize| needed.max(room.saturating_mul(2));
    // SAFETY: the entries are plain old data (all-zero is valid); the
    // request points at a buffer of `count` of them, which is what NVML
    // writes at most, and lives through the call.
    unsafe {
        sized::fill(into, room, 2, grow, |buf, count| {
            let mut request = nvmlProcessesUtilizationInfo_t {
                version: PROCESSES_UTILIZATION_INFO_V1,
                processSamplesCount: *count,
                lastSeenTimeStamp: last_seen_us,
                procUtilArray: buf,
            };
            let code = f(dev.handle(), &mut request);
            *count = request.processSamplesCount;
            code
        })
    }
}

/// Room for this many samples at least, and for 16 a process: the driver
/// keeps several sampling periods of each process.
const MIN_ROOM: usize = 128;

/// The samples newer than `last_seen_us`, written to `into`, in one
/// driver call where they fit in room for 16 per process last seen
/// (`MIN_ROOM` at least).
/// nvml-wrapper asks for the count first, a second call that costs as
/// much as the first: 2.6 ms of CPU on an H100 (driver 580.159.04). Too
/// small a buffer gets INSUFFICIENT_SIZE and the count needed (nvml.h),
/// and one more try with room for that.
fn samples(
    dev: &Device<'_>,
    last_seen_us: u64,
    processes: usize,
    into: &mut Vec<nvmlProcessUtilizationSample_t>,
) -> Result<(), NvmlError> {
    let Ok(f) = dev.nvml().lib().nvmlDeviceGetProcessUtilization.as_ref() else {
        return Err(NvmlError::FunctionNotFound);
    };
    let room = processes.saturating_mul(16).max(MIN_ROOM);
    let grow = |needed: usize, room: usize| needed.max(room.saturating_mul(2));
    // SAFETY: nvmlProcessUtilizationSample_t is plain old data (all-zero is
    // valid); the handle is NVML's own, and NVML writes at most `count`
    // entries.
    unsafe { sized::fill(into, room, 2, grow, |buf, count| f(dev.handle(), buf, count, last_seen_us)) }
}

/// The driver buffers several periods; a process's newest sample wins,
/// and of two equally new, the later in the buffer (the sort is stable).
/// Sorted by PID and time, the winner is the last of its PID's run: no map
/// of PIDs to build per GPU per tick. Written to `out`.
fn newest_per_pid(samples: &mut [nvmlProcessUtilizationSample_t], out: &mut Vec<ProcessUtilization>) {
    samples.sort_by_key(|s| (s.pid, s.timeStamp));
    out.clear();
    for s in samples.iter() {
        let util =
            ProcessUtilization { pid: s.pid, sm: s.smUtil, memory: s.memUtil, encoder: s.encUtil, decoder: s.decUtil };
        match out.last_mut() {
            Some(last) if last.pid == s.pid => *last = util,
            _ => out.push(util),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(pid: u32, time: u64, sm: u32) -> nvmlProcessUtilizationSample_t {
        nvmlProcessUtilizationSample_t { pid, timeStamp: time, smUtil: sm, memUtil: 0, encUtil: 0, decUtil: 0 }
    }

    #[test]
    fn each_process_keeps_its_newest_sample_and_of_equals_the_later() {
        let mut buffered = [sample(30, 5, 1), sample(10, 7, 2), sample(30, 9, 3), sample(10, 7, 4), sample(20, 1, 5)];
        let mut out = vec![ProcessUtilization { pid: 99, sm: 1, memory: 1, encoder: 1, decoder: 1 }];
        newest_per_pid(&mut buffered, &mut out);
        let kept: Vec<(u32, u32)> = out.iter().map(|u| (u.pid, u.sm)).collect();
        assert_eq!(kept, [(10, 4), (20, 5), (30, 3)], "what was there before is gone");
        newest_per_pid(&mut [], &mut out);
        assert!(out.is_empty());
    }
}
