//! NVLink: each link's state (read every `slow::REFRESH`: one call per link,
//! 18 a GPU on Hopper, for something that changes when a link fails), and
//! the data payload over the active links, every tick, as a rate between
//! two ticks of the cumulative counters
//! `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` / `_RX` (nvml.h: field ids 138
//! and 139, KiB), read in one `nvmlDeviceGetFieldValues` call
//! (`fields.rs`). nvml.h: "A scopeId of UINT_MAX returns aggregate value
//! summed up across all links", so two fields are asked, not two per
//! active link: a field-value query cost a real driver about 0.25 ms per
//! field (two fields 0.3 ms, fifteen 3.6 ms, an H100 with driver
//! 580.159.04), and 36 per-link fields on an 18-link board would have cost
//! some 9 ms per GPU per tick. A driver that refuses the aggregate is
//! asked link by link from then on.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use nvml_wrapper::Device;
use nvml_wrapper::error::NvmlError;

use super::calls::Calls;
use super::fields::{self, rate};
use super::slow::REFRESH;
use crate::model::{NvLink, NvLinkState};

const FI_DATA_TX: u32 = 138;
const FI_DATA_RX: u32 = 139;
/// The `scopeId` for the sum over every link (nvml.h).
const ALL_LINKS: u32 = u32::MAX;
/// NVML_NVLINK_MAX_LINKS (nvml.h, 18 on Hopper and Blackwell).
const MAX_LINKS: u32 = nvml_wrapper_sys::bindings::NVML_NVLINK_MAX_LINKS;

/// The counters at the last tick, and the link states with when they were
/// read, per device (by UUID, else index).
#[derive(Default)]
pub struct Links {
    last: HashMap<String, (Instant, u64, u64)>,
    states: HashMap<String, (Instant, Option<Vec<NvLinkState>>)>,
    /// Devices whose driver refused the sum over all links.
    per_link: HashSet<String>,
}

impl Links {
    /// `None` on a board without NVLink.
    pub fn read(&mut self, key: String, index: u32, dev: &Device<'_>, calls: &Calls) -> Option<NvLink> {
        let links = self.states_of(&key, index, dev, calls)?;
        let active: Vec<u32> = links.iter().filter(|l| l.active).map(|l| l.link).collect();
        let now = Instant::now();
        let summed = !self.per_link.contains(&key);
        let totals = calls.track("nvmlDeviceGetFieldValues", Some(index), || counters(dev, &active, summed));
        let totals = match totals {
            Ok(Counted::Refused) => {
                self.per_link.insert(key.clone());
                calls.track("nvmlDeviceGetFieldValues", Some(index), || counters(dev, &active, false))
            }
            other => other,
        };
        let totals = match totals {
            Ok(Counted::Bytes(tx, rx)) => Some((tx, rx)),
            _ => None,
        };
        let (tx, rx) = match (totals, self.last.get(&key)) {
            (Some((tx, rx)), Some(&(then, tx0, rx0))) => {
                let secs = now.duration_since(then).as_secs_f64();
                (rate(tx0, tx, secs), rate(rx0, rx, secs))
            }
            _ => (None, None),
        };
        match totals {
            Some((tx, rx)) => drop(self.last.insert(key, (now, tx, rx))),
            None => drop(self.last.remove(&key)),
        }
        Some(NvLink { links, tx_bytes_per_s: tx, rx_bytes_per_s: rx })
    }

    /// Forgets devices no longer watched.
    pub fn retain(&mut self, keys: &[String]) {
        self.last.retain(|k, _| keys.contains(k));
        self.states.retain(|k, _| keys.contains(k));
        self.per_link.retain(|k| keys.contains(k));
    }

    /// The link states as last read, read again once `REFRESH` old; a
    /// board without NVLink is remembered as such for as long.
    fn states_of(&mut self, key: &str, index: u32, dev: &Device<'_>, calls: &Calls) -> Option<Vec<NvLinkState>> {
        match self.states.get(key) {
            Some((at, links)) if at.elapsed() < REFRESH => links.clone(),
            _ => {
                let links = states(index, dev, calls);
                self.states.insert(key.to_owned(), (Instant::now(), links.clone()));
                links
            }
        }
    }
}

/// Every link the board has: NVML answers INVALID_ARGUMENT past the last
/// one, NOT_SUPPORTED on a board without NVLink.
fn states(index: u32, dev: &Device<'_>, calls: &Calls) -> Option<Vec<NvLinkState>> {
    let mut links = Vec::new();
    for link in 0..MAX_LINKS {
        match calls.track("nvmlDeviceGetNvLinkState", Some(index), || dev.link_wrapper_for(link).is_active()) {
            Ok(active) => links.push(NvLinkState { link, active }),
            Err(_) => break,
        }
    }
    (!links.is_empty()).then_some(links)
}

/// What the counters came to.
enum Counted {
    /// Bytes sent and received, summed over the links.
    Bytes(u64, u64),
    /// A counter is missing: a partial sum would read as a drop in traffic.
    Missing,
    /// The driver did not answer the sum over all links.
    Refused,
}

/// The KiB counters in bytes: summed by the driver over every link
/// (`summed`), else over `links` here. A board with no active link moves
/// nothing and is not asked.
fn counters(dev: &Device<'_>, links: &[u32], summed: bool) -> Result<Counted, NvmlError> {
    if links.is_empty() {
        return Ok(Counted::Bytes(0, 0));
    }
    let wanted: Vec<(u32, u32)> = if summed {
        vec![(FI_DATA_TX, ALL_LINKS), (FI_DATA_RX, ALL_LINKS)]
    } else {
        links.iter().flat_map(|&l| [(FI_DATA_TX, l), (FI_DATA_RX, l)]).collect()
    };
    let values = fields::read(dev, &wanted)?;
    let (mut tx, mut rx) = (0u64, 0u64);
    for (&(id, _), value) in wanted.iter().zip(values) {
        // Only a 64-bit counter: KiB at NVLink's rates would wrap a 32-bit
        // one within seconds, and no driver has been seen to answer so.
        let Some(kib) = value.filter(|v| !v.wraps_at_32_bits).map(|v| v.value) else {
            return Ok(if summed { Counted::Refused } else { Counted::Missing });
        };
        let total = if id == FI_DATA_TX { &mut tx } else { &mut rx };
        *total = total.saturating_add(kib.saturating_mul(1024));
    }
    Ok(Counted::Bytes(tx, rx))
}
