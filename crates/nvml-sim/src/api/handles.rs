//! Enumerating devices and translating between handles, indices and UUIDs.

use std::ffi::{CStr, c_char, c_uint};

use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_FOUND, nvmlReturn_t};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    call::run("nvmlDeviceGetCount_v2", |ctx| unsafe { out::put(count, ctx.scenario.gpus.len() as c_uint) })
}

/// Works for lost GPUs too: NVML still enumerates a GPU that fell off the bus.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    call::run("nvmlDeviceGetHandleByIndex_v2", |ctx| {
        if index as usize >= ctx.scenario.gpus.len() {
            return Err(INVALID_ARGUMENT);
        }
        unsafe { out::put(device, call::handle_for(index as usize)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    call::run("nvmlDeviceGetHandleByUUID", |ctx| {
        if uuid.is_null() || device.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let wanted = unsafe { CStr::from_ptr(uuid) }.to_bytes();
        let index = (ctx.scenario.gpus.iter()).position(|gpu| gpu.uuid.as_bytes() == wanted).ok_or(NOT_FOUND)?;
        unsafe { out::put(device, call::handle_for(index)) }
    })
}

/// Pure handle bookkeeping, so unlike the queries it works on a lost GPU
/// (NVML does not list GPU_IS_LOST for it either).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) -> nvmlReturn_t {
    call::run("nvmlDeviceGetIndex", |ctx| {
        let dev = call::resolve(ctx, device)?;
        unsafe { out::put(index, dev.index) }
    })
}
