//! Enumerating devices and translating between handles, indices and UUIDs.

use std::ffi::{CStr, c_char, c_uint};

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, nvmlReturn_t};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or valid for writing one value.
    call::run("nvmlDeviceGetCount_v2", |ctx| unsafe { out::put(count, ctx.scenario.visible(ctx.t).len() as c_uint) })
}

/// Works for lost GPUs too: NVML still enumerates a GPU that fell off the
/// bus. A handle names the GPU, not the index: when GPUs come and go, the
/// index of a GPU may change, its handle does not.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    call::run("nvmlDeviceGetHandleByIndex_v2", |ctx| {
        let position = *ctx.scenario.visible(ctx.t).get(index as usize).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: NVML's contract: `device` is null or valid for writing one value.
        unsafe { out::put(device, call::handle_for(position)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    call::run("nvmlDeviceGetHandleByUUID", |ctx| {
        if uuid.is_null() || device.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: `uuid` is non-null (checked above) and, by NVML's contract, a NUL-terminated string.
        let wanted = unsafe { CStr::from_ptr(uuid) }.to_bytes();
        let visible = ctx.scenario.visible(ctx.t).iter();
        let position = visible.copied().find(|&p| ctx.scenario.gpus[p].uuid.as_bytes() == wanted).ok_or(NOT_FOUND)?;
        // SAFETY: NVML's contract: `device` is null or valid for writing one value.
        unsafe { out::put(device, call::handle_for(position)) }
    })
}

/// Pure handle bookkeeping, so unlike the queries it works on a lost GPU
/// (NVML does not list GPU_IS_LOST for it either).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) -> nvmlReturn_t {
    call::run("nvmlDeviceGetIndex", |ctx| {
        let dev = call::resolve(ctx, device)?;
        if dev.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: NVML's contract: `index` is null or valid for writing one value.
        unsafe { out::put(index, dev.index) }
    })
}
