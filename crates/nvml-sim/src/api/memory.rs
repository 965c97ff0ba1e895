//! Framebuffer memory, in both the v1 and the versioned v2 layout.

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlDeviceAddressingMode_t, nvmlMemory_t, nvmlMemory_v2_t};

use super::out;
use crate::call;
use crate::code::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, nvmlReturn_t};
use crate::scenario::Reading;

/// NVML_STRUCT_VERSION(Memory, 2): the struct size tagged with version 2
/// in the top byte, so a caller built against another layout is caught.
pub const MEMORY_V2_VERSION: u32 = size_of::<nvmlMemory_v2_t>() as u32 | (2 << 24);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(device: nvmlDevice_t, memory: *mut nvmlMemory_t) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMemoryInfo", device, Some(Reading::Memory), |dev| {
        let m = dev.mig.map_or_else(|| dev.gpu.memory(dev.t), |mig| mig.memory(dev.t));
        // v1 has no reserved field; like the real driver it counts the
        // reserved memory as used, which is why v2 exists.
        let info = nvmlMemory_t { total: m.total, free: m.free, used: m.total - m.free };
        // SAFETY: NVML's contract: `memory` is null or valid for writing one value.
        unsafe { out::put(memory, info) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetMemoryInfo_v2", device, Some(Reading::Memory), |dev| {
        if memory.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: `memory` is non-null (checked above) and, by NVML's contract, points at the caller's nvmlMemory_v2_t.
        let version = unsafe { (*memory).version };
        if version != MEMORY_V2_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let m = dev.mig.map_or_else(|| dev.gpu.memory(dev.t), |mig| mig.memory(dev.t));
        let info = nvmlMemory_v2_t { version, total: m.total, reserved: m.reserved, free: m.free, used: m.used };
        // SAFETY: NVML's contract: `memory` is null or valid for writing one value.
        unsafe { out::put(memory, info) }
    })
}

/// nvml.h: `nvmlDeviceAddressingMode_v1`, NVML_STRUCT_VERSION(DeviceAddressingMode, 1).
pub const ADDRESSING_MODE_V1_VERSION: u32 = size_of::<nvmlDeviceAddressingMode_t>() as u32 | (1 << 24);

/// nvml.h's `nvmlDeviceAddressingModeType_t`: NONE (0) for a board with a
/// framebuffer of its own, ATS (2) for one that addresses the host's
/// memory (a `unified_memory` board).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAddressingMode(
    device: nvmlDevice_t,
    mode: *mut nvmlDeviceAddressingMode_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetAddressingMode", device, None, |dev| {
        if mode.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: `mode` is non-null (checked above) and, by NVML's contract, points at the caller's struct.
        let version = unsafe { (*mode).version };
        if version != ADDRESSING_MODE_V1_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let value = if dev.gpu.spec.unified_memory { 2 } else { 0 };
        // SAFETY: NVML's contract: `mode` is valid for writing one value.
        unsafe { out::put(mode, nvmlDeviceAddressingMode_t { version, value }) }
    })
}
