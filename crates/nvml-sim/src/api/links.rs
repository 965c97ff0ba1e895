//! NVLink state and traffic, and the rows remapped to spares: what
//! nvidia-smi's `nvlink -s` and `--query-remapped-rows` read.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlEnableState_t};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, nvmlReturn_t};
use crate::scenario::Reading;

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
