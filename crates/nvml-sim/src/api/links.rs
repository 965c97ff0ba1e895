//! NVLink state and traffic, and the rows remapped to spares: what
//! nvidia-smi's `nvlink -s` and `--query-remapped-rows` read.

use std::ffi::{c_int, c_uint};

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlEnableState_t, nvmlFieldValue_t, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, SUCCESS, nvmlReturn_t};
use crate::scenario::Reading;

/// nvml.h: `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX` / `_RX`, the data
/// payload a link has sent / received, in KiB, cumulative; `scopeId`
/// names the link.
pub const FI_NVLINK_DATA_TX: c_uint = 138;
pub const FI_NVLINK_DATA_RX: c_uint = 139;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    is_active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetNvLinkState", device, Some(Reading::Nvlink), |dev| {
        let links = &dev.gpu.spec.nvlink;
        if links.is_empty() {
            return Err(NOT_SUPPORTED);
        }
        // A board answers INVALID_ARGUMENT past its last link.
        let spec = links.get(link as usize).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: NVML's contract: `is_active` is null or writable.
        unsafe { out::put(is_active, nvmlEnableState_t::from(spec.active)) }
    })
}

/// Each value gets its own return code, as NVML fills them; only the
/// NVLink data counters are simulated, every other field is
/// NOT_SUPPORTED.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetFieldValues", device, None, |dev| {
        let n = usize::try_from(count).map_err(|_| INVALID_ARGUMENT)?;
        if values.is_null() || n == 0 {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: NVML's contract: `values` points at `count` entries the
        // caller owns and has filled with field ids.
        let values = unsafe { std::slice::from_raw_parts_mut(values, n) };
        let micros = (dev.t * 1e6) as i64;
        for v in values {
            v.timestamp = micros;
            v.latencyUsec = 0;
            let link = dev.gpu.spec.nvlink.get(v.scopeId as usize);
            let rate = match (v.fieldId, link) {
                _ if !dev.gpu.supports(Reading::Nvlink) => None,
                (FI_NVLINK_DATA_TX, Some(l)) => Some(l.tx_kib_s),
                (FI_NVLINK_DATA_RX, Some(l)) => Some(l.rx_kib_s),
                _ => None,
            };
            match rate {
                Some(kib_s) => {
                    v.nvmlReturn = SUCCESS;
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    // Constant rates: the counter is the rate times the
                    // time since the scenario started.
                    v.value.ullVal = (kib_s.max(0.0) * dev.t) as u64;
                }
                None => v.nvmlReturn = NOT_SUPPORTED,
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetRemappedRows", device, Some(Reading::RemappedRows), |dev| {
        let r = &dev.gpu.spec.remapped_rows;
        // SAFETY: NVML's contract: each pointer is null or writable.
        unsafe {
            out::put(corr_rows, r.correctable)?;
            out::put(unc_rows, r.uncorrectable)?;
            out::put(is_pending, c_uint::from(r.pending))?;
            out::put(failure_occurred, c_uint::from(r.failure))
        }
    })
}
