//! PCIe traffic. `nvmlDeviceGetPcieThroughput` samples a byte counter
//! "over a 20ms interval" (nvml.h) and blocks that long, per direction:
//! two calls per GPU per tick were 340 ms of every tick on an 8-GPU node.
//! Where the driver has the cumulative counters
//! `NVML_FI_DEV_PCIE_COUNT_TX_BYTES` / `_RX_BYTES` (nvml.h, field ids 197
//! and 198, bytes), both are read in one `nvmlDeviceGetFieldValues` call
//! and the rates are the deltas between ticks: `null` on a GPU's first
//! tick (so in a one-shot `--json`, `-1`, `check` or `--query-gpu`: one
//! snapshot has no interval to measure over; nvidia-smi's defaults show
//! no PCIe throughput either) and after a counter goes back.
//!
//! Where the counters are missing (older boards and drivers) the sampled
//! throughput stands in, one direction per tick, RX and TX in turn, each
//! shown until its next sample: a 20 ms sample stands for a whole tick
//! either way, and this halves the time the driver blocks. A one-shot
//! there shows RX, and TX as `null`.

use std::time::Instant;

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};

use super::device::Reader;
use super::fields::{self, rate};
use crate::model::Pcie;

/// One GPU's PCIe state between ticks.
#[derive(Debug, Clone, Default)]
pub struct PcieState {
    /// `Some(false)` once the driver said the counters are not there.
    counters: Option<bool>,
    /// The counters (TX, RX) at the last tick, and when.
    last: Option<(Instant, u64, u64)>,
    /// Without counters: the last sample of each direction, and whether
    /// TX is sampled next.
    sampled: Pcie,
    tx_next: bool,
}

impl PcieState {
    pub fn read(&mut self, r: &mut Reader<'_>, dev: &Device<'_>) -> Pcie {
        if self.counters != Some(false) {
            let now = Instant::now();
            match r.take("PCIe counters", || counters(dev)) {
                Some(Some((tx, rx))) => {
                    self.counters = Some(true);
                    return self.rates(now, tx, rx);
                }
                Some(None) => self.counters = Some(false),
                // Lost, or an error the device reports: unknown this tick.
                None => {
                    self.last = None;
                    return Pcie::default();
                }
            }
        }
        self.sample(r, dev)
    }

    fn rates(&mut self, now: Instant, tx: u64, rx: u64) -> Pcie {
        let pcie = match self.last {
            Some((then, tx0, rx0)) => {
                let secs = now.duration_since(then).as_secs_f64();
                Pcie { tx_bytes_per_s: rate(tx0, tx, secs), rx_bytes_per_s: rate(rx0, rx, secs) }
            }
            None => Pcie::default(),
        };
        self.last = Some((now, tx, rx));
        pcie
    }

    fn sample(&mut self, r: &mut Reader<'_>, dev: &Device<'_>) -> Pcie {
        let (counter, slot) = if self.tx_next {
            (PcieUtilCounter::Send, &mut self.sampled.tx_bytes_per_s)
        } else {
            (PcieUtilCounter::Receive, &mut self.sampled.rx_bytes_per_s)
        };
        // NVML reports PCIe throughput in KB/s (1024 bytes, per nvml.h).
        *slot = r.take("PCIe throughput", || dev.pcie_throughput(counter)).map(|k| u64::from(k) * 1024);
        self.tx_next = !self.tx_next;
        self.sampled.clone()
    }
}

/// Both counters, or `None` where the driver lacks them (the call, or
/// either field, NOT_SUPPORTED).
fn counters(dev: &Device<'_>) -> Result<Option<(u64, u64)>, NvmlError> {
    let wanted = [(NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0), (NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0)];
    match fields::read(dev, &wanted) {
        Ok(v) => Ok(v.first().copied().flatten().zip(v.get(1).copied().flatten())),
        Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
