//! nvmlDeviceGetFieldValues: the cumulative counters NVML answers by field
//! id. Each value gets its own return code, as NVML fills them; the
//! simulated fields are NVLink's data counters (per link by `scopeId`, or
//! summed over every link for `UINT_MAX`) and
//! the PCIe byte counters, NVLink's error counters summed over all lanes,
//! and the driver's recommended recovery action; every other field is
//! NOT_SUPPORTED.
//!
//! The PCIe counters come back as a real driver gives them: on an H100
//! with driver 580.159.04 (tests/gpu/nvml_costs.py) both were
//! `NVML_VALUE_TYPE_UNSIGNED_INT`, 32 bits that wrap ("Value can be
//! wrapped", nvml.h), about every 80 ms under a 53 GB/s host-to-device
//! copy, measured there.

use std::ffi::{c_int, c_uint};

use nvml_wrapper_sys::bindings::field_id::{
    NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
    NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
    NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlFieldValue_t, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT as UNSIGNED_INT,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG as UNSIGNED_LONG_LONG,
};

use crate::call::{self, Dev};
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS, nvmlReturn_t};
use crate::scenario::{RECOVERY_ACTION_SINCE, Reading};

/// nvml.h: `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` / `_RX`, the data
/// payload a link has sent / received, in KiB, cumulative; `scopeId`
/// names the link.
pub const FI_NVLINK_DATA_TX: c_uint = 138;
pub const FI_NVLINK_DATA_RX: c_uint = 139;
/// The `scopeId` that asks for NVLink's counters summed over every link.
pub const ALL_LINKS: c_uint = c_uint::MAX;
/// nvml.h: `NVML_FI_DEV_PCIE_COUNT_TX_BYTES` / `_RX_BYTES` (197, 198):
/// bytes the device has sent / received over PCIe, cumulative.
pub const FI_PCIE_TX_BYTES: c_uint = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
pub const FI_PCIE_RX_BYTES: c_uint = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
/// nvml.h: `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (230), "GPU Recovery
/// action - None/Reset/Reboot/Drain P2P/Drain and Reset", an
/// `nvmlDeviceGpuRecoveryAction_t`.
pub const FI_RECOVERY_ACTION: c_uint = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
/// nvml.h: NVLink's flow-control CRC, data CRC, replay and recovery error
/// counters, each a "total for all Lanes" (38, 45, 52, 59).
pub const FI_NVLINK_CRC_FLIT_TOTAL: c_uint = NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL;
pub const FI_NVLINK_CRC_DATA_TOTAL: c_uint = NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL;
pub const FI_NVLINK_REPLAY_TOTAL: c_uint = NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL;
pub const FI_NVLINK_RECOVERY_TOTAL: c_uint = NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    crate::cost::fields(usize::try_from(count).unwrap_or(0));
    call::device("nvmlDeviceGetFieldValues", device, None, |dev| {
        let n = usize::try_from(count).map_err(|_| INVALID_ARGUMENT)?;
        if values.is_null() || n == 0 {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: NVML's contract: `values` points at `count` entries the
        // caller owns and has filled with field ids.
        let values = unsafe { std::slice::from_raw_parts_mut(values, n) };
        for v in values {
            // nvml.h: "CPU Timestamp of this value in microseconds since
            // 1970": the moment the counters below are read at.
            v.timestamp = dev.unix_us;
            v.latencyUsec = 0;
            if v.fieldId == FI_RECOVERY_ACTION {
                match recovery_action(dev) {
                    Some(code) => {
                        v.nvmlReturn = SUCCESS;
                        v.valueType = UNSIGNED_INT;
                        v.value.uiVal = code;
                    }
                    None => v.nvmlReturn = NOT_SUPPORTED,
                }
                continue;
            }
            match counter(dev, v.fieldId, v.scopeId) {
                Some(total) if matches!(v.fieldId, FI_PCIE_TX_BYTES | FI_PCIE_RX_BYTES) => {
                    v.nvmlReturn = SUCCESS;
                    v.valueType = UNSIGNED_INT;
                    // Truncation is the point: the driver's counter is 32 bits.
                    v.value.uiVal = total as u32;
                }
                Some(total) => {
                    v.nvmlReturn = SUCCESS;
                    v.valueType = UNSIGNED_LONG_LONG;
                    v.value.ullVal = total;
                }
                None => v.nvmlReturn = NOT_SUPPORTED,
            }
        }
        Ok(())
    })
}

/// The recommended recovery action's code, where the driver (R570 and
/// later) and the board report one.
fn recovery_action(dev: &Dev<'_>) -> Option<c_uint> {
    let known = dev.driver_branch.is_some_and(|b| b >= RECOVERY_ACTION_SINCE);
    (known && dev.gpu.supports(Reading::RecoveryAction)).then(|| dev.gpu.recovery_action(dev.t).code())
}

/// A counter's value now: NVLink's in KiB, PCIe's in bytes, each what
/// the scenario's rate (KiB/s) has added up to since init.
fn counter(dev: &Dev<'_>, field: c_uint, scope: c_uint) -> Option<u64> {
    let gpu = dev.gpu;
    if scope == ALL_LINKS && matches!(field, FI_NVLINK_DATA_TX | FI_NVLINK_DATA_RX) {
        // nvml.h: "A scopeId of UINT_MAX returns aggregate value summed up
        // across all links for the specified counter type in fieldId."
        let links = gpu.spec.nvlink.len();
        if links == 0 || !gpu.supports(Reading::Nvlink) || !gpu.supports(Reading::NvlinkSum) {
            return None;
        }
        let scopes = (0..links).filter_map(|l| c_uint::try_from(l).ok());
        return scopes.map(|l| counter(dev, field, l)).try_fold(0u64, |sum, v| Some(sum.saturating_add(v?)));
    }
    let rates = &gpu.spec.nvlink_errors_per_s;
    let errors = match field {
        FI_NVLINK_CRC_FLIT_TOTAL => Some(rates.crc_flit),
        FI_NVLINK_CRC_DATA_TOTAL => Some(rates.crc_data),
        FI_NVLINK_REPLAY_TOTAL => Some(rates.replay),
        FI_NVLINK_RECOVERY_TOTAL => Some(rates.recovery),
        _ => None,
    };
    if let Some(per_s) = errors {
        // Totals over the whole device: no link to name.
        let links = !gpu.spec.nvlink.is_empty() && gpu.supports(Reading::Nvlink);
        return links.then_some((per_s * dev.t) as u64);
    }
    let link = gpu.spec.nvlink.get(scope as usize).filter(|_| gpu.supports(Reading::Nvlink));
    let pcie = gpu.supports(Reading::Pcie) && gpu.supports(Reading::PcieCounters);
    let kib = match (field, link) {
        // Constant rates: the counter is the rate times the time since
        // the scenario started.
        (FI_NVLINK_DATA_TX, Some(l)) => return Some((l.tx_kib_s.max(0.0) * dev.t) as u64),
        (FI_NVLINK_DATA_RX, Some(l)) => return Some((l.rx_kib_s.max(0.0) * dev.t) as u64),
        (FI_PCIE_TX_BYTES, _) if pcie => gpu.spec.pcie_tx_kib_s.integral(dev.t),
        (FI_PCIE_RX_BYTES, _) if pcie => gpu.spec.pcie_rx_kib_s.integral(dev.t),
        _ => return None,
    };
    Some((kib.max(0.0) * 1024.0) as u64)
}
