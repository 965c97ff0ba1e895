//! Readings that change only when an administrator changes them (limits,
//! modes, maximum clocks, the serial number), with a reboot or GPU reset
//! (pending ECC and MIG modes), or on a failing board's timescale (ECC
//! error counts, pages pending retirement, remapped rows; BAR1 with it):
//! read on a GPU's first tick and then every `REFRESH`, not every tick:
//! 20 fewer driver calls per GPU per tick. dcgm-exporter samples such
//! fields every 30 s by default. What the board itself fixes (its maximum
//! clocks, its serial number) is read once: a maximum clock cost a real
//! driver 1.5 ms of CPU per call, four calls a GPU (an H100, driver
//! 580.159.04: tests/gpu/nvml_costs.py), and the clocks are kept for the
//! boot beside (`boards.rs`).

use std::time::{Duration, Instant};

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::{Clock, ComputeMode as NvmlComputeMode};
use nvml_wrapper_sys::bindings::field_id;

use super::device::Reader;
use super::wanted::Wanted;
use crate::model::{Bar1Memory, ComputeMode, Ecc, Gpu, MaxClocks, MigMode, NvLinkErrors, RecoveryAction, RemappedRows};

/// How stale a changed setting may be shown: `nvidia-smi -pl` or `-c`
/// shows within this long.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The readings, and when they were taken.
#[derive(Debug, Clone, Default)]
pub struct Slow {
    read_at: Option<Instant>,
    v: Readings,
    /// The maximum clocks once known, from the driver or kept from an
    /// earlier run (`boards.rs`); the driver is not asked again.
    max_clocks: Option<MaxClocks>,
    /// `max_clocks` came from the driver this tick, cleanly, and are not
    /// yet handed to the boards file.
    fresh: bool,
}

#[derive(Debug, Clone, Default)]
struct Readings {
    power_limit_w: Option<f64>,
    power_management_limit_w: Option<f64>,
    serial: Option<String>,
    persistence_mode: Option<bool>,
    compute_mode: Option<ComputeMode>,
    max_clocks: MaxClocks,
    /// ECC mode (current, pending).
    ecc_mode: Option<(bool, bool)>,
    mig_mode: Option<MigMode>,
    /// Whether accounting is on, and its buffer's size.
    accounting: Option<(bool, Option<u32>)>,
    ecc_counts: Ecc,
    remapped_rows: RemappedRows,
    bar1: Bar1Memory,
    recovery_action: Option<RecoveryAction>,
    nvlink_errors: Option<NvLinkErrors>,
}

impl Slow {
    /// Whether the next `apply` reads them again: on the first tick, then
    /// every `REFRESH`.
    pub fn due(&self) -> bool {
        self.read_at.is_none_or(|at| at.elapsed() >= REFRESH)
    }

    /// Reads them again when due, those `wanted` asks, and puts them into
    /// `gpu`.
    pub fn apply(&mut self, r: &mut Reader<'_>, dev: &Device<'_>, gpu: &mut Gpu, wanted: Wanted) {
        if self.due() {
            let serial = self.read_at.map(|_| self.v.serial.clone());
            let failed = r.failures();
            let v = Readings::read(r, dev, self.max_clocks.clone(), serial, wanted);
            // Readings from a GPU lost part-way through are not kept.
            if !r.lost() {
                if self.max_clocks.is_none() && r.failures() == failed {
                    self.fresh = true;
                }
                self.max_clocks = Some(v.max_clocks.clone());
                self.v = v;
                self.read_at = Some(Instant::now());
            }
        }
        let v = &self.v;
        gpu.power_limit_w = v.power_limit_w;
        gpu.power_management_limit_w = v.power_management_limit_w;
        gpu.serial.clone_from(&v.serial);
        gpu.persistence_mode = v.persistence_mode;
        gpu.compute_mode = v.compute_mode;
        gpu.max_clocks = v.max_clocks.clone();
        gpu.ecc = Ecc { mode_current: v.ecc_mode.map(|m| m.0), mode_pending: v.ecc_mode.map(|m| m.1), ..v.ecc_counts };
        gpu.remapped_rows = v.remapped_rows.clone();
        gpu.bar1_memory = v.bar1.clone();
        gpu.recovery_action = v.recovery_action;
        gpu.nvlink_errors.clone_from(&v.nvlink_errors);
        gpu.mig_mode = v.mig_mode;
    }

    /// Whether the maximum clocks are still to be had.
    pub fn needs_max_clocks(&self) -> bool {
        self.max_clocks.is_none()
    }

    /// For an output that never shows the maximum clocks: they are not
    /// asked of the driver, nor kept for the boot, and read as unknown.
    pub fn forgo_max_clocks(&mut self) {
        self.max_clocks = Some(MaxClocks::default());
        self.fresh = false;
    }

    /// Clocks kept from an earlier run of the same board and firmware.
    pub fn seed_max_clocks(&mut self, clocks: MaxClocks) {
        self.max_clocks = Some(clocks);
    }

    /// The clocks the driver gave since the last call, where every call
    /// of those slow readings answered (unsupported counts as an answer):
    /// a transient error is not kept past this process.
    pub fn take_fresh_max_clocks(&mut self) -> Option<MaxClocks> {
        std::mem::take(&mut self.fresh).then(|| self.max_clocks.clone()).flatten()
    }

    /// Whether accounting is on and its buffer size, as last read.
    pub fn accounting(&self) -> Option<(bool, Option<u32>)> {
        self.v.accounting
    }
}

impl Readings {
    /// `max_clocks` and `serial`: as known already, where they are. The
    /// health counters and the settings only where `wanted` asks them.
    fn read(
        r: &mut Reader<'_>,
        dev: &Device<'_>,
        max_clocks: Option<MaxClocks>,
        serial: Option<Option<String>>,
        wanted: Wanted,
    ) -> Self {
        let watts = |mw: u32| f64::from(mw) / 1000.0;
        let mut v = Self::default();
        if wanted.health {
            v.ecc_mode = r.take("ECC mode", || dev.is_ecc_enabled()).map(|m| (m.currently_enabled, m.pending_enabled));
            (v.ecc_counts, v.remapped_rows, v.bar1) = super::settings::health(r, dev);
            (v.recovery_action, v.nvlink_errors) = health_fields(r, dev);
        }
        v.max_clocks = max_clocks.unwrap_or_else(|| MaxClocks {
            sm_mhz: r.take("max SM clock", || dev.max_clock_info(Clock::SM)),
            memory_mhz: r.take("max memory clock", || dev.max_clock_info(Clock::Memory)),
            graphics_mhz: r.take("max graphics clock", || dev.max_clock_info(Clock::Graphics)),
            video_mhz: r.take("max video clock", || dev.max_clock_info(Clock::Video)),
        });
        v.power_limit_w = r.take("power limit", || dev.enforced_power_limit()).map(watts);
        if wanted.settings {
            v.serial = serial.unwrap_or_else(|| r.take("serial", || dev.serial()));
            v.power_management_limit_w = r.take("power management limit", || dev.power_management_limit()).map(watts);
            v.persistence_mode = r.take("persistence mode", || dev.is_in_persistent_mode());
            v.compute_mode = r.take("compute mode", || dev.compute_mode()).map(compute_mode);
            v.accounting = r.take("accounting mode", || dev.is_accounting_enabled()).map(|on| {
                let size = r.take("accounting buffer size", || dev.accounting_buffer_size());
                (on, size)
            });
        }
        // NVML_DEVICE_MIG_ENABLE is 1 (nvml.h).
        v.mig_mode =
            r.take("MIG mode", || dev.mig_mode()).map(|m| MigMode { current: m.current == 1, pending: m.pending == 1 });
        v
    }
}

/// nvml.h's field ids: the recovery action the driver recommends
/// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, 230; R570 and later) and
/// NVLink's CRC (flow control, data), replay and recovery error counters,
/// each a "total for all Lanes" (38, 45, 52, 59).
const RECOVERY_ACTION: u32 = field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
const NVLINK_ERRORS: [u32; 4] = [
    field_id::NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
    field_id::NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
    field_id::NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
    field_id::NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
];

/// One field-value call for all five. Each field answers on its own: a
/// driver before R570 or a board without NVLink answers NOT_SUPPORTED
/// for those, and they stay unknown. The PCIe replay counter is read
/// beside the PCIe link state (the host-side branch), not here.
fn health_fields(r: &mut Reader<'_>, dev: &Device<'_>) -> (Option<RecoveryAction>, Option<NvLinkErrors>) {
    let wanted: Vec<(u32, u32)> = std::iter::once(RECOVERY_ACTION).chain(NVLINK_ERRORS).map(|id| (id, 0)).collect();
    let Some(values) = r.take("health field values", || super::fields::read(dev, &wanted)) else {
        return (None, None);
    };
    let value = |at: usize| values.get(at).copied().flatten().map(|v| v.value);
    let action = value(0).map(RecoveryAction::from_code);
    let errors = NvLinkErrors { crc_flit: value(1), crc_data: value(2), replay: value(3), recovery: value(4) };
    let any = [errors.crc_flit, errors.crc_data, errors.replay, errors.recovery].iter().any(Option::is_some);
    (action, any.then_some(errors))
}

fn compute_mode(m: NvmlComputeMode) -> ComputeMode {
    match m {
        NvmlComputeMode::Default => ComputeMode::Default,
        NvmlComputeMode::ExclusiveThread => ComputeMode::ExclusiveThread,
        NvmlComputeMode::Prohibited => ComputeMode::Prohibited,
        NvmlComputeMode::ExclusiveProcess => ComputeMode::ExclusiveProcess,
    }
}
