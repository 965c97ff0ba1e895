//! PCIe traffic. `nvmlDeviceGetPcieThroughput` samples a byte counter
//! "over a 20ms interval" (nvml.h) and blocks that long, per direction:
//! two calls per GPU per tick were 340 ms of every tick on an 8-GPU node.
//! Where the driver has the cumulative counters
//! `NVML_FI_DEV_PCIE_COUNT_TX_BYTES` / `_RX_BYTES` (nvml.h, field ids 197
//! and 198, bytes), both are read in one `nvmlDeviceGetFieldValues` call
//! instead. Rates are `null` on a GPU's first tick, and on the first
//! after the dashboard shows them again (`PcieState::forget`). A run of
//! one snapshot (`--json`, `-1`, a `--query-gpu` without `-l`) has no
//! interval to measure over, and reads neither the counters nor a sample
//! (`app::wanted_by`), as `check`, whose rules do not read them, never
//! does; nvidia-smi's defaults show no PCIe throughput either.
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
//! either way, and this halves the time the driver blocks.

use std::time::{Duration, Instant};

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::field_id::{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES};

use super::calls::Calls;
use super::device::Reader;
use super::fields::{self, Unsigned, rate, rate_32};
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
    /// The middle of the call, by gpuscope's clock: the counters were read
    /// at most `took / 2` either side of it.
    at: Instant,
    took: Duration,
    tx: Unsigned,
    rx: Unsigned,
}

impl Counters {
    /// The rates from `before` to `self`.
    fn since(&self, before: &Counters) -> Pcie {
        let rate_of = |b: &Unsigned, a: &Unsigned| {
            let secs = interval(before, self, b.stamp_us, a.stamp_us).as_secs_f64();
            if a.wraps_at_32_bits || b.wraps_at_32_bits {
                rate_32(b.value, a.value, secs)
            } else {
                rate(b.value, a.value, secs)
            }
        };
        Pcie { tx_bytes_per_s: rate_of(&before.tx, &self.tx), rx_bytes_per_s: rate_of(&before.rx, &self.rx) }
    }

    fn wraps_at_32_bits(&self) -> bool {
        self.tx.wraps_at_32_bits || self.rx.wraps_at_32_bits
    }
}

/// The time between two readings of a counter. A call can take far
/// longer than the driver needs to read it: the thread may wait its turn
/// for a CPU on a busy node, and over a 20 ms window a 2 ms wait in one
/// reading and not the other would be a rate 10 % off. So the driver's
/// stamps of the two values are used where they are within what
/// gpuscope's clock allows (each value read within its call); else, or
/// without stamps (0), the time between the middles of the two calls, off
/// by at most half their lengths.
fn interval(before: &Counters, after: &Counters, stamp_before: i64, stamp_after: i64) -> Duration {
    let ours = after.at.saturating_duration_since(before.at);
    let slack = (before.took + after.took) / 2 + STAMP_RESOLUTION;
    let stamped = (stamp_before > 0 && stamp_after > stamp_before)
        .then(|| u64::try_from(stamp_after - stamp_before).ok().map(Duration::from_micros))
        .flatten();
    stamped.filter(|d| d.abs_diff(ours) <= slack).unwrap_or(ours)
}

/// A stamp is in whole microseconds: two of them may each be off by one.
const STAMP_RESOLUTION: Duration = Duration::from_micros(2);

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
            match r.take("PCIe counters", || counters(dev)) {
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

    /// Lets go of the last readings, on a tick that does not ask for the
    /// rates (the dashboard stopped showing them): when they are asked
    /// again, a rate from a counter read before would be the average over
    /// the time they were not shown, and a sample kept from then would be
    /// shown as now. The first tick asked again starts afresh, as a GPU's
    /// first does. Whether the driver has the counters is kept.
    pub fn forget(&mut self) {
        *self = Self { counters: self.counters, ..Self::default() };
    }

    /// Whether this tick's rates want a window of their own (`open`,
    /// `close`): the last reading is of a 32-bit counter, too long ago for
    /// a delta that cannot have wrapped twice.
    pub fn wants_window(&self) -> bool {
        self.last.is_some_and(|l| l.wraps_at_32_bits() && l.at.elapsed() > WRAP_SAFE)
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
    calls.track("PCIe counters", Some(gpu), || counters(dev)).ok().flatten()
}

/// Both counters, or `None` where the driver lacks them (the call, or
/// either field, NOT_SUPPORTED).
fn counters(dev: &Device<'_>) -> Result<Option<Counters>, NvmlError> {
    let wanted = [(NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0), (NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0)];
    let begun = Instant::now();
    let read = fields::read(dev, &wanted);
    let took = begun.elapsed();
    match read {
        Ok(v) => Ok(v.first().copied().flatten().zip(v.get(1).copied().flatten()).map(|(tx, rx)| Counters {
            at: begun + took / 2,
            took,
            tx,
            rx,
        })),
        Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at: Instant, took_us: u64, stamp_us: i64, value: u64) -> Counters {
        let counter = Unsigned { value, wraps_at_32_bits: true, stamp_us };
        Counters { at, took: Duration::from_micros(took_us), tx: counter, rx: counter }
    }

    #[test]
    fn the_driver_s_stamps_time_a_window_whose_second_call_waited_for_a_cpu() {
        // The second call took 4 ms, its thread waiting for a CPU before
        // the driver read the counter: by the calls' middles the window is
        // 22 ms, by the driver's stamps the 20 ms it was.
        let t0 = Instant::now();
        let (before, after) =
            (reading(t0, 300, 1_000_000, 0), reading(t0 + Duration::from_millis(22), 4_000, 1_020_000, 1 << 30));
        assert_eq!(interval(&before, &after, 1_000_000, 1_020_000), Duration::from_millis(20));
        assert_eq!(after.since(&before).rx_bytes_per_s, Some(((1u64 << 30) as f64 / 0.020).round() as u64));
    }

    #[test]
    fn stamps_that_gpuscope_s_clock_rules_out_are_not_used() {
        let t0 = Instant::now();
        let before = reading(t0, 300, 1_000_000, 0);
        let after = reading(t0 + Duration::from_millis(20), 300, 0, 0);
        let ours = Duration::from_millis(20);
        // None at all; a wall clock stepped back or forward between them;
        // stamps that disagree with the calls by more than their lengths.
        for (b, a) in [(0, 0), (1_000_000, 0), (1_000_000, 999_000), (1_000_000, 2_000_000), (1_000_000, 1_021_000)] {
            assert_eq!(interval(&before, &after, b, a), ours, "stamps {b} and {a}");
        }
        // Within half of each call's length (and a microsecond each of
        // rounding), they are.
        assert_eq!(interval(&before, &after, 1_000_000, 1_020_302), Duration::from_micros(20_302));
    }
}
