//! Per-process utilisation (`nvmlDeviceGetProcessUtilization`): samples
//! since a timestamp, which must be the newest one seen on that device
//! (nvml.h: `lastSeenTimeStamp`); NOT_FOUND means nothing newer, so the
//! last batch stands.
//!
//! On a real driver the call is the dearest of a tick: 2.6 ms of the
//! caller's CPU on an H100 with driver 580.159.04, even when it finds
//! nothing (tests/gpu/nvml_costs.py). A device with no processes has no
//! samples to give, so once the device has said whether it samples
//! processes at all, it is not asked while it runs none.

use std::collections::HashMap;

use nvml_wrapper::Device;
use nvml_wrapper::error::NvmlError;

use super::calls::Calls;
use crate::model::ProcessUtilization;

/// The newest batch per device, by UUID (by index where it has none).
#[derive(Default)]
pub struct ProcessUtil {
    devices: HashMap<String, Batch>,
}

#[derive(Default)]
struct Batch {
    last_seen_us: u64,
    samples: Vec<ProcessUtilization>,
    /// Whether the device samples processes, once it has answered.
    sampled: Option<bool>,
}

impl ProcessUtil {
    /// The device's newest sample per process; `None` where the device
    /// does not sample processes (or the call failed). A device that runs
    /// no process now (`idle`) has none to sample: the driver is not asked
    /// once it is known whether the device samples at all, and the last
    /// seen timestamp stays, so the next process's samples are the first
    /// asked for.
    pub fn read(
        &mut self,
        key: String,
        index: u32,
        dev: &Device<'_>,
        calls: &Calls,
        idle: bool,
    ) -> Option<Vec<ProcessUtilization>> {
        let batch = self.devices.entry(key).or_default();
        match (idle, batch.sampled) {
            (true, Some(false)) => return None,
            (true, Some(true)) => {
                batch.samples.clear();
                return Some(Vec::new());
            }
            _ => {}
        }
        let last = batch.last_seen_us;
        match calls.track("nvmlDeviceGetProcessUtilization", Some(index), || dev.process_utilization_stats(last)) {
            Ok(samples) => {
                batch.sampled = Some(true);
                batch.last_seen_us = samples.iter().map(|s| s.timestamp).max().unwrap_or(last).max(last);
                batch.samples = newest_per_pid(samples);
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

    /// Forgets devices no longer watched.
    pub fn retain(&mut self, keys: &[String]) {
        self.devices.retain(|k, _| keys.contains(k));
    }
}

/// The driver buffers several periods; a process's newest sample wins.
fn newest_per_pid(
    samples: Vec<nvml_wrapper::struct_wrappers::device::ProcessUtilizationSample>,
) -> Vec<ProcessUtilization> {
    let mut newest: HashMap<u32, (u64, ProcessUtilization)> = HashMap::new();
    for s in samples {
        let util = ProcessUtilization {
            pid: s.pid,
            sm: s.sm_util,
            memory: s.mem_util,
            encoder: s.enc_util,
            decoder: s.dec_util,
        };
        let entry = newest.entry(s.pid).or_insert((s.timestamp, util));
        if s.timestamp >= entry.0 {
            *entry = (s.timestamp, util);
        }
    }
    let mut out: Vec<ProcessUtilization> = newest.into_values().map(|(_, u)| u).collect();
    out.sort_by_key(|u| u.pid);
    out
}
