//! Multi-Instance GPU mode.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, nvmlReturn_t};
use crate::scenario::{MAX_MIG_DEVICES, Reading};

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
        // SAFETY: NVML's contract: `current` and `pending` are each null or valid for writing one value.
        unsafe {
            out::put(current, c_uint::from(spec.mig_current))?;
            out::put(pending, c_uint::from(spec.mig_pending))
        }
    })
}

/// Seven with MIG on (the most GPU instances an A100 or H100 holds),
/// zero with it off, as NVML documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(device: nvmlDevice_t, count: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMaxMigDeviceCount", device, Some(Reading::Mig), |dev| {
        let n = if dev.gpu.spec.mig_current { MAX_MIG_DEVICES } else { 0 };
        // SAFETY: NVML's contract: `count` is null or valid for writing one value.
        unsafe { out::put(count, n) }
    })
}

/// A slot below the maximum with no MIG device in it is NOT_FOUND, as on
/// a GPU only partly split.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMigDeviceHandleByIndex", device, Some(Reading::Mig), |dev| {
        if !dev.gpu.spec.mig_current {
            return Err(NOT_SUPPORTED);
        }
        if mig_device.is_null() || index >= MAX_MIG_DEVICES {
            return Err(INVALID_ARGUMENT);
        }
        if index as usize >= dev.gpu.mig.len() {
            return Err(NOT_FOUND);
        }
        // SAFETY: NVML's contract: `mig_device` is null or valid for writing one value.
        unsafe { out::put(mig_device, call::mig_handle_for(dev.position, index as usize)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(device: nvmlDevice_t, is_mig: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `is_mig` is null or valid for writing one value.
    call::device("nvmlDeviceIsMigDeviceHandle", device, None, |dev| unsafe {
        out::put(is_mig, c_uint::from(dev.mig.is_some()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetGpuInstanceId", device, None, |dev| {
        let mig = dev.mig.ok_or(NOT_SUPPORTED)?;
        // SAFETY: NVML's contract: `id` is null or valid for writing one value.
        unsafe { out::put(id, mig.spec.gpu_instance_id) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetComputeInstanceId", device, None, |dev| {
        let mig = dev.mig.ok_or(NOT_SUPPORTED)?;
        // SAFETY: NVML's contract: `id` is null or valid for writing one value.
        unsafe { out::put(id, mig.spec.compute_instance_id) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig_device, None, |dev| {
        dev.mig.ok_or(NOT_SUPPORTED)?;
        // SAFETY: NVML's contract: `device` is null or valid for writing one value.
        unsafe { out::put(device, call::handle_for(dev.position)) }
    })
}
