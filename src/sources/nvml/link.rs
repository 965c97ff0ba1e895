//! The PCIe link: its generation and width now and at most, and the replay
//! counter (`nvmlDeviceGetPcieReplayCounter`: transfers the link layer had
//! to send again, "Kepler or newer"). The maxima are the board's and its
//! slot's, read once per GPU; the rest every tick, three calls a GPU that
//! the simulator charges as ordinary ones (about 2 µs on an H100;
//! tests/gpu/nvml_costs.py times them on the next GPU run). An idle link
//! drops its generation to save power, so the current one means something
//! only beside the GPU's utilisation.

use nvml_wrapper::Device;

use super::device::Reader;
use crate::model::PcieLink;

#[derive(Debug, Clone, Default)]
pub struct LinkState {
    /// Generation and width at most, once read: they do not change.
    max: Option<(Option<u32>, Option<u32>)>,
    /// The replay counter at the last tick.
    replays: Option<u64>,
}

impl LinkState {
    pub fn read(&mut self, r: &mut Reader<'_>, dev: &Device<'_>) -> PcieLink {
        let failures = r.failures();
        let max = self.max.unwrap_or_else(|| {
            (
                r.take("max PCIe link generation", || dev.max_pcie_link_gen()),
                r.take("max PCIe link width", || dev.max_pcie_link_width()),
            )
        });
        // Kept only once the driver answered both (unsupported counts as
        // an answer): a transient error is asked again next tick.
        if r.failures() == failures && !r.lost() {
            self.max = Some(max);
        }
        let replays = r.take("PCIe replay counter", || dev.pcie_replay_counter()).map(u64::from);
        let since = self.replays.zip(replays).and_then(|(was, now)| now.checked_sub(was));
        self.replays = replays;
        PcieLink {
            gen_current: r.take("PCIe link generation", || dev.current_pcie_link_gen()),
            gen_max: max.0,
            width_current: r.take("PCIe link width", || dev.current_pcie_link_width()),
            width_max: max.1,
            replay_counter: replays,
            replays_since_last: since,
        }
    }
}
