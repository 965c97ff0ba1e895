//! Multi-Instance GPU mode.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, nvmlReturn_t};
use crate::scenario::Reading;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMigMode", device, Some(Reading::Mig), |dev| {
        if current.is_null() || pending.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let spec = &dev.gpu.spec;
        unsafe {
            out::put(current, c_uint::from(spec.mig_current))?;
            out::put(pending, c_uint::from(spec.mig_pending))
        }
    })
}
