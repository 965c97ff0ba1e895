//! PCIe traffic. `nvmlDeviceGetPcieThroughput` samples a byte counter
//! "over a 20ms interval" (nvml.h) and blocks that long, per direction:
//! two calls per GPU per tick were 340 ms of every tick on an 8-GPU node.
//! Where the driver has the cumulative counters
//! `NVML_FI_DEV_PCIE_COUNT_TX_BYTES` / `_RX_BYTES` (nvml.h, field ids 197
//! and 198, bytes), both are read in one `nvmlDeviceGetFieldValues` call
//! instead. Rates are `null` on a GPU's first tick (so in a one-shot
//! `--json`, `-1`, `check` or `--query-gpu`: one snapshot has no interval
//! to measure over; nvidia-smi's defaults show no PCIe throughput either).
//!
//! A real driver keeps those counters in 32 bits that wrap ("Value can be
//! wrapped", nvml.h): an H100 with driver 580.159.04 answered
//! `UNSIGNED_INT`, and under a 53 GB/s copy the counter wrapped about
//! every 80 ms (tests/gpu/nvml_costs.py and a copy loop, on that GPU).
//! Between ticks a second apart it may have wrapped any number of times,
//! so a rate from such a delta would be noise. A 32-bit counter is
//! therefore read at the start of a tick and again `WINDOW` later, all
//! GPUs together so that they share one wait (the poller thread's, never
//! the UI's), as NVML's own sampling does over 20 ms; the tick's other
//! readings follow the wait in one run, rather than half before it and
//! half after (each wake-up of the poller finds its code and data cold:
//! so ordered, the poller took 3-8% less CPU a tick). Where the tick's
//! per-process samples alone take a window's length, as on a real driver
//! with busy GPUs (2.5 ms a GPU on an H100), the window spans them instead
//! and closes between two GPUs' samples once its 20 ms have passed: no
//! wait, and on the simulated 8-GPU node with a real driver's costs a
//! collection took 26 ms where it took 46 (`NvmlSource::read`). Only where
//! the last reading is recent enough that a single wrap is all there can
//! have been (`WRAP_SAFE`: ticks of 30 ms or less) is the delta between
//! ticks used.
//! The counter itself is exact: read back to back on that H100 under a
//! 59 GB/s copy, it advanced every 0.11 ms. A 20 ms window still reads
//! what the link did in those 20 ms, as NVML's own sample does: a copy
//! loop averaging 54 GB/s read 59 GB/s in most ticks and 25-30 GB/s in a
//! few, where single 1 GiB copies slowed from 19.5 ms to up to 40 ms
//! (tests/gpu/pcie_check.py); rates that wrapped wrongly would be off by
//! 2^32 bytes per window, 215 GB/s.
//! A 64-bit counter (`UNSIGNED_LONG_LONG`) is read once a tick, and its
//! rate is the average over the whole tick; `null` after it goes back.
//!
//! Where the counters are missing (older boards and drivers) the sampled
//! throughput stands in, one direction per tick, RX and TX in turn, each
//! shown until its next sample: a 20 ms sample stands for a whole tick
//! either way, and this halves the time the driver blocks. A one-shot
//! there shows RX, and TX as `null`.

use std::time::{Duration, Instant};

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};

use super::calls::Calls;
use super::device::Reader;
use super::fields::{self, rate, rate_32};
use crate::model::Pcie;

/// How long a 32-bit counter is watched within a tick: NVML's own
/// sampling interval for `nvmlDeviceGetPcieThroughput`.
pub const WINDOW: Duration = Duration::from_millis(20);

/// The longest interval over which a 32-bit byte counter cannot wrap
/// twice: 2^32 bytes at PCIe 6.0 x16's 128 GB/s upper bound, 33 ms (the
/// H100's PCIe 5.0 x16 tops out near 64 GB/s: 67 ms).
const WRAP_SAFE: Duration = Duration::from_millis(33);

/// One reading of both counters.
#[derive(Debug, Clone, Copy)]
struct Counters {
    at: Instant,
    tx: u64,
    rx: u64,
    wraps_at_32_bits: bool,
}

impl Counters {
    /// The rates from `before` to `self`.
    fn since(&self, before: &Counters) -> Pcie {
        let secs = self.at.duration_since(before.at).as_secs_f64();
        let f = if self.wraps_at_32_bits { rate_32 } else { rate };
        Pcie { tx_bytes_per_s: f(before.tx, self.tx, secs), rx_bytes_per_s: f(before.rx, self.rx, secs) }
    }
}

/// One GPU's PCIe state between ticks.
#[derive(Debug, Clone, Default)]
pub struct PcieState {
    /// `Some(false)` once the driver said the counters are not there.
    counters: Option<bool>,
    /// The last reading of the counters.
    last: Option<Counters>,
    /// The rates over this tick's window (`open`, `close`), for `read`.
    windowed: Option<Pcie>,
    /// A window opened and not yet closed: one that spans the tick's
    /// per-process samples (`NvmlSource::read`) closes after `read` has
    /// run, and its rates go in then (`take_windowed`).
    window_open: bool,
    /// Without counters: the last sample of each direction, and whether
    /// TX is sampled next.
    sampled: Pcie,
    tx_next: bool,
}

impl PcieState {
    pub fn read(&mut self, r: &mut Reader<'_>, dev: &Device<'_>) -> Pcie {
        if let Some(pcie) = self.windowed.take() {
            return pcie;
        }
        if self.window_open {
            return Pcie::default();
        }
        // A 32-bit counter last read too long ago for a delta, with no
        // window this tick: at short intervals, a reading fresh when the
        // windows were opened that aged past `WRAP_SAFE` while slow calls
        // before this one ran. A fresh start.
        let stale = self.wants_window();
        if self.counters != Some(false) {
            let now = Instant::now();
            match r.take("PCIe counters", || counters(dev, now)) {
                Some(Some(c)) => {
                    self.counters = Some(true);
                    let pcie = self.last.filter(|_| !stale).map(|l| c.since(&l)).unwrap_or_default();
                    self.last = Some(c);
                    return pcie;
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

    /// Whether this tick's rates want a window of their own (`open`,
    /// `close`): the last reading is of a 32-bit counter, too long ago for
    /// a delta that cannot have wrapped twice.
    pub fn wants_window(&self) -> bool {
        self.last.is_some_and(|l| l.wraps_at_32_bits && l.at.elapsed() > WRAP_SAFE)
    }

    /// The window's first reading; `false` where it failed (the rates stay
    /// unknown this tick, and the next tick starts afresh). A window's
    /// rates not taken by `read` (the GPU was not read after all) go.
    pub fn open(&mut self, dev: &Device<'_>, calls: &Calls, gpu: u32) -> bool {
        self.windowed = None;
        self.last = read_tracked(dev, calls, gpu);
        self.window_open = self.last.is_some();
        self.window_open
    }

    /// Whether a window is open, waiting for `close`.
    pub fn is_open(&self) -> bool {
        self.window_open
    }

    /// The window's second reading; the rates over the window are what
    /// this tick's `read`, or `take_windowed` after it, gives.
    pub fn close(&mut self, dev: &Device<'_>, calls: &Calls, gpu: u32) {
        self.window_open = false;
        let (Some(before), Some(now)) = (self.last, read_tracked(dev, calls, gpu)) else {
            self.last = None;
            return;
        };
        self.last = Some(now);
        self.windowed = Some(now.since(&before));
    }

    /// The rates of a window closed after this tick's `read`.
    pub fn take_windowed(&mut self) -> Option<Pcie> {
        self.windowed.take()
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

fn read_tracked(dev: &Device<'_>, calls: &Calls, gpu: u32) -> Option<Counters> {
    calls.track("PCIe counters", Some(gpu), || counters(dev, Instant::now())).ok().flatten()
}

/// Both counters, or `None` where the driver lacks them (the call, or
/// either field, NOT_SUPPORTED).
fn counters(dev: &Device<'_>, at: Instant) -> Result<Option<Counters>, NvmlError> {
    let wanted = [(NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0), (NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0)];
    match fields::read(dev, &wanted) {
        Ok(v) => Ok(v.first().copied().flatten().zip(v.get(1).copied().flatten()).map(|(tx, rx)| Counters {
            at,
            tx: tx.value,
            rx: rx.value,
            wraps_at_32_bits: tx.wraps_at_32_bits || rx.wraps_at_32_bits,
        })),
        Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
