//! Processes holding a compute or graphics context on a device.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{NVML_VALUE_NOT_AVAILABLE, nvmlDevice_t, nvmlProcessInfo_t, nvmlProcessInfo_v1_t};

use super::out;
use crate::call::{self, Dev};
use crate::code::{Outcome, nvmlReturn_t};
use crate::scenario::{Gpu, MigDevice, ProcessSpec, Reading};

/// What NVML puts in `usedGpuMemory` when it cannot attribute memory.
const MEMORY_UNAVAILABLE: u64 = NVML_VALUE_NOT_AVAILABLE as u64;
/// What NVML puts in the instance IDs when MIG is off.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or readable and writable, and `infos` null or valid for `*count` entries, as `running` requires.
    call::device("nvmlDeviceGetComputeRunningProcesses_v3", device, Some(Reading::Processes), |dev| unsafe {
        running(dev, |p| p.kind.is_compute(), count, infos)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or readable and writable, and `infos` null or valid for `*count` entries, as `running` requires.
    call::device("nvmlDeviceGetGraphicsRunningProcesses_v3", device, Some(Reading::Processes), |dev| unsafe {
        running(dev, |p| p.kind.is_graphics(), count, infos)
    })
}

/// The first version of the list, still exported by every driver for the
/// clients built against it (nvtop among them): a 16-byte entry with the
/// PID and the memory only (nvml.h, `nvmlProcessInfo_v1_t`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v1_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or readable and writable, and `infos` null or valid for `*count` entries.
    call::device("nvmlDeviceGetComputeRunningProcesses", device, Some(Reading::Processes), |dev| unsafe {
        out::put_list(count, infos, &v1(&list(dev, |p| p.kind.is_compute())))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v1_t,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `count` is null or readable and writable, and `infos` null or valid for `*count` entries.
    call::device("nvmlDeviceGetGraphicsRunningProcesses", device, Some(Reading::Processes), |dev| unsafe {
        out::put_list(count, infos, &v1(&list(dev, |p| p.kind.is_graphics())))
    })
}

fn v1(list: &[nvmlProcessInfo_t]) -> Vec<nvmlProcessInfo_v1_t> {
    list.iter().map(|p| nvmlProcessInfo_v1_t { pid: p.pid, usedGpuMemory: p.usedGpuMemory }).collect()
}

/// # Safety
/// As for [`out::put_list`].
unsafe fn running(
    dev: &Dev<'_>,
    wanted: impl Fn(&ProcessSpec) -> bool,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Outcome {
    // SAFETY: NVML's contract: `count` is null or readable and writable, and `infos` null or valid for `*count` entries.
    unsafe { out::put_list(count, infos, &list(dev, wanted)) }
}

/// The processes `wanted` on the device, as the current list reports them.
fn list(dev: &Dev<'_>, wanted: impl Fn(&ProcessSpec) -> bool) -> Vec<nvmlProcessInfo_t> {
    let info = |p: &ProcessSpec, (gi, ci): (c_uint, c_uint)| {
        Some(nvmlProcessInfo_t {
            pid: p.pid_now()?,
            usedGpuMemory: Gpu::process_bytes(p, dev.t).unwrap_or(MEMORY_UNAVAILABLE),
            gpuInstanceId: gi,
            computeInstanceId: ci,
        })
    };
    let on_mig = |m: &'_ MigDevice| {
        let ids = (m.spec.gpu_instance_id, m.spec.compute_instance_id);
        m.spec.process.iter().filter(|p| wanted(p)).filter_map(move |p| info(p, ids)).collect::<Vec<_>>()
    };
    let list: Vec<nvmlProcessInfo_t> = match dev.mig {
        // A MIG handle lists the processes in its own instance.
        Some(m) => on_mig(m),
        // The parent lists them all, each with its instance (NVML's
        // aggregate view, given to a privileged caller); a process the
        // scenario puts on the parent itself is in instance 0, 0.
        None => {
            let parent = if dev.gpu.spec.mig_current { (0, 0) } else { (NO_INSTANCE, NO_INSTANCE) };
            let own = dev.gpu.spec.process.iter().filter(|p| wanted(p)).filter_map(|p| info(p, parent));
            own.chain(dev.gpu.mig.iter().flat_map(on_mig)).collect()
        }
    };
    list
}
